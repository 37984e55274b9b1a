package graph

import (
	"fmt"
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/internal/emu"
	"github.com/warpkit/warpkit/internal/gputest"
)

// The CUDA backend's sources, for the CPU emulation of the GPU
// (internal/emu): its kernels and SlabAlloc's host-API kernels. prim's
// kernels run as host twins on an emulated device.
var sources = []string{"graph.cu", "../slaballoc/slaballoc.cu"}

// With WARPKIT_EMULATE=1 the GPU tests run on the emulation where there is
// no GPU.
func init() { gputest.Emulate(sources...) }

// TestEmulatedDifferential is TestDifferentialCUDA on the CPU emulation of
// the GPU: the CUDA backend's kernels (edge batches through the slab hash
// engine, vertex deletes, degrees, triangle counts) tested in every
// `go test`, with lanes interleaved as a warp's are.
func TestEmulatedDifferential(t *testing.T) {
	dev := emu.Device(t, emu.Options{}, sources...)
	seeds := uint64(3)
	if testing.Short() {
		seeds = 1
	}
	for _, directed := range []bool{false, true} {
		for _, selfLoops := range []bool{false, true} {
			t.Run(fmt.Sprintf("directed=%v/selfloops=%v", directed, selfLoops), func(t *testing.T) {
				for seed := range seeds {
					differential(t, warpkit.CUDA, dev, seed, directed, selfLoops)
				}
			})
		}
	}
}

// TestEmulatedTablesOnDemand is TestCUDATablesOnDemand on the emulation.
func TestEmulatedTablesOnDemand(t *testing.T) {
	tablesOnDemand(t, emu.Device(t, emu.Options{}, sources...))
}

// TestEmulatedGrowForCounts is TestCUDAGrowForCounts on the emulation.
func TestEmulatedGrowForCounts(t *testing.T) {
	growForCounts(t, emu.Device(t, emu.Options{}, sources...))
}

// TestEmulatedInsertBothExhausted is TestCUDAInsertBothExhausted on the
// emulation.
func TestEmulatedInsertBothExhausted(t *testing.T) {
	insertBothExhausted(t, emu.Device(t, emu.Options{}, sources...))
}

// TestEmulatedInsertStoppedBeforeApply is TestCUDAInsertStoppedBeforeApply
// on the emulation.
func TestEmulatedInsertStoppedBeforeApply(t *testing.T) {
	insertStoppedBeforeApply(t, emu.Device(t, emu.Options{}, sources...))
}

// TestEmulatedGatherShapes is TestCUDAGatherShapes on the emulation.
func TestEmulatedGatherShapes(t *testing.T) {
	gatherShapes(t, emu.Device(t, emu.Options{}, sources...))
}

// TestEmulatedMoveChunks is TestCUDAMoveChunks on the emulation.
func TestEmulatedMoveChunks(t *testing.T) {
	moveChunks(t, emu.Device(t, emu.Options{}, sources...))
}
