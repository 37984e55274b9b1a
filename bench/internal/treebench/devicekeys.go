package treebench

import (
	_ "embed"
	"fmt"
	"unsafe"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
)

//go:generate go run github.com/warpkit/warpkit/internal/kernelgen -o ptx/treebench.ptx keys.cu

//go:embed ptx/treebench.ptx
var treebenchPTX []byte

// keyKernels loads keys.cu's kernels on dev (the device keeps the module:
// a second load is a compare of the PTX).
func keyKernels(dev *cuda.Device) (u32, u64 *cuda.Function, err error) {
	mod, err := dev.LoadModule(treebenchPTX)
	if err == nil {
		u32, err = mod.Function("tb_keys_u32")
	}
	if err == nil {
		u64, err = mod.Function("tb_keys_u64")
	}
	if err != nil {
		return nil, nil, fmt.Errorf("treebench: %w", err)
	}
	return u32, u64, nil
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
	u32, u64, err := keyKernels(dev)
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
		err = u64.Launch(cuda.D1(grid), cuda.D1(block), 0, nil, keys, vals, uint64(n), seed, salt)
	} else {
		err = u32.Launch(cuda.D1(grid), cuda.D1(block), 0, nil, keys, vals, uint64(n), uint32(seed), uint32(salt))
	}
	if err == nil {
		err = dev.Synchronize()
	}
	return keys, vals, err
}
