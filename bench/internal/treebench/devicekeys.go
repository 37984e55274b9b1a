package treebench

import (
	_ "embed"
	"fmt"
	"sync"
	"unsafe"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
)

//go:generate go run github.com/warpkit/warpkit/internal/kernelgen -o ptx/treebench.ptx keys.cu

//go:embed ptx/treebench.ptx
var treebenchPTX []byte

// keyFns are keys.cu's kernels, loaded once per device.
type keyFns struct{ u32, u64 *cuda.Function }

var keyModules sync.Map // *cuda.Device → *keyFns

func keyKernels(dev *cuda.Device) (*keyFns, error) {
	if f, ok := keyModules.Load(dev); ok {
		return f.(*keyFns), nil
	}
	mod, err := dev.LoadModule(treebenchPTX)
	if err != nil {
		return nil, fmt.Errorf("treebench: %w", err)
	}
	f := &keyFns{}
	if f.u32, err = mod.Function("tb_keys_u32"); err == nil {
		f.u64, err = mod.Function("tb_keys_u64")
	}
	if err != nil {
		return nil, fmt.Errorf("treebench: %w", err)
	}
	got, _ := keyModules.LoadOrStore(dev, f)
	return got.(*keyFns), nil
}

// DeviceKeys generates n random distinct keys on the device, key i being
// a bijection of i + seed over the whole key range (keys.cu: murmur3's or
// splitmix64's finalizer), and their values, key ^ salt; keys and values
// are both 32-bit or both 64-bit (1 <= n <= 2^32 for 32-bit keys). The
// buffers join d.
func DeviceKeys[K, V warpkit.Word](d *Bufs, dev *cuda.Device, n int, seed, salt uint64) (cuda.Slice[K], cuda.Slice[V], error) {
	var k0 K
	var v0 V
	var keys cuda.Slice[K]
	var vals cuda.Slice[V]
	wide := unsafe.Sizeof(k0) == 8
	if unsafe.Sizeof(v0) != unsafe.Sizeof(k0) || n < 1 || !wide && uint64(n) > 1<<32 {
		return keys, vals, fmt.Errorf("%w: treebench: %d keys of %d bytes with values of %d", warpkit.ErrInvalidArgument, n, unsafe.Sizeof(k0), unsafe.Sizeof(v0))
	}
	f, err := keyKernels(dev)
	if err != nil {
		return keys, vals, err
	}
	if keys, err = Alloc[K](d, dev, n); err != nil {
		return keys, vals, err
	}
	if vals, err = Alloc[V](d, dev, n); err != nil {
		return keys, vals, err
	}
	const block = 256
	grid := min((n+block-1)/block, 4096)
	if wide {
		err = f.u64.Launch(cuda.D1(grid), cuda.D1(block), 0, nil, keys, vals, uint64(n), seed, salt)
	} else {
		err = f.u32.Launch(cuda.D1(grid), cuda.D1(block), 0, nil, keys, vals, uint64(n), uint32(seed), uint32(salt))
	}
	if err == nil {
		err = dev.Synchronize()
	}
	return keys, vals, err
}
