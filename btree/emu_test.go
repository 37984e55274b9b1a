package btree

import (
	"testing"

	"github.com/warpkit/warpkit/internal/emu"
	"github.com/warpkit/warpkit/internal/gputest"
)

// With WARPKIT_EMULATE=1 the whole GPU suite runs on the CPU emulation
// where there is no GPU (slow: it is sized for a GPU).
func init() { gputest.Emulate("btree.cu") }

// TestEmulatedCUDA runs the CUDA backend — btree.cu's kernels built for the
// host and the Go code that drives them — on the CPU emulation of the GPU
// (internal/emu), so that the GPU path is tested on every machine: the
// semantics test and short differential runs for every width, and an
// insert batch in rounds.
func TestEmulatedCUDA(t *testing.T) {
	dev := emu.Device(t, emu.Options{}, "btree.cu")
	t.Run("semantics/u32u32", func(t *testing.T) { testSemantics(t, newGPUTree[uint32, uint32](t, dev, Options{})) })
	t.Run("semantics/u64u64", func(t *testing.T) { testSemantics(t, newGPUTree[uint64, uint64](t, dev, Options{})) })
	t.Run("diff/u32u32", func(t *testing.T) { runDiff(t, newGPUTree[uint32, uint32](t, dev, Options{}), 11, 8) })
	t.Run("diff/u64u32", func(t *testing.T) { runDiff(t, newGPUTree[uint64, uint32](t, dev, Options{}), 14, 8) })
	t.Run("replace-in-full-leaves", func(t *testing.T) {
		testReplaceInFullLeaves(t, newGPUTree[uint32, uint32](t, dev, Options{InitialNodes: 3, MaxNodes: 3}))
	})
	t.Run("rounds/u32u32", func(t *testing.T) {
		testInsertRounds(t, func() *Tree[uint32, uint32] { return newGPUTree[uint32, uint32](t, dev, Options{}) })
	})
}
