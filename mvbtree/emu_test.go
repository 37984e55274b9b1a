package mvbtree

import (
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/emu"
	"github.com/warpkit/warpkit/internal/gputest"
	"github.com/warpkit/warpkit/internal/kernelgen/ptxcheck"
)

func TestPTXUpToDate(t *testing.T) { ptxcheck.Check(t, "mvbtree.ptx") }

// The CUDA backend's sources, for the CPU emulation of the GPU
// (internal/emu): its kernels and SlabAlloc's host-API kernels.
var sources = []string{"mvbtree.cu", "../slaballoc/slaballoc.cu"}

// With WARPKIT_EMULATE=1 the GPU tests run on the emulation where there is
// no GPU.
func init() { gputest.Emulate(sources...) }

// emuDevice opens an emulated device for a test.
func emuDevice(t testing.TB) *cuda.Device { return emu.Device(t, emu.Options{}, sources...) }

// gpuTreeOn returns a constructor of CUDA-backend trees on dev, checked and
// closed at the test's end.
func gpuTreeOn[K, V warpkit.Word](dev *cuda.Device, opts Options) func(testing.TB) *Tree[K, V] {
	return func(t testing.TB) *Tree[K, V] {
		t.Helper()
		opts.Backend, opts.Device = warpkit.CUDA, dev
		if opts.MaxPoolBytes == 0 {
			opts.MaxPoolBytes = 64 << 20
		}
		tr, err := New[K, V](opts)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Backend() != warpkit.CUDA {
			t.Fatalf("backend %v", tr.Backend())
		}
		t.Cleanup(func() { tr.Close() })
		return tr
	}
}

// TestEmulatedDifferential runs the differential test on the CUDA backend,
// emulated: every query of the latest version and of every open snapshot
// against the model, exactly, with Check after every step.
func TestEmulatedDifferential(t *testing.T) {
	dev := emuDevice(t)
	steps := 60
	if testing.Short() {
		steps = 25
	}
	t.Run("u32", func(t *testing.T) { differential(t, 1<<12, gpuTreeOn[uint32, uint32](dev, Options{}), 2, steps) })
	t.Run("u64", func(t *testing.T) { differential(t, 1<<12, gpuTreeOn[uint64, uint64](dev, Options{}), 1, steps) })
	t.Run("u32-full-range", func(t *testing.T) { differential(t, 0, gpuTreeOn[uint32, uint64](dev, Options{}), 1, steps) })
}
