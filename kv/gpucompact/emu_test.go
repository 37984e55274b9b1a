package gpucompact

import (
	"testing"

	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/gputest"
)

// The CUDA engine's kernels also build as C++ for the CPU emulation of the
// GPU (internal/emu): with WARPKIT_EMULATE=1 every TestCUDA test runs on
// it where there is no GPU, and TestEmulatedCUDAEngine runs them so in
// every go test.
func init() { gputest.Emulate("gpucompact.cu") }

// TestEmulatedCUDAEngine runs the CUDA engine's suites — the identity
// suites through the device pipeline, partitions, the estimates, device
// memory running out, damaged input — on the emulation. It checks the
// kernels' logic and the host code that drives them, not their speed or
// the GPU's memory model; on a machine with a GPU the TestCUDA tests run
// there instead.
func TestEmulatedCUDAEngine(t *testing.T) {
	if d, err := cuda.Open(0); err == nil {
		d.Close()
		t.Skip("a CUDA device runs the TestCUDA tests themselves")
	}
	t.Setenv("WARPKIT_EMULATE", "1")
	for _, c := range []struct {
		name      string
		test      func(*testing.T)
		shortOnly bool // minutes on the emulation at full size: their -short sizes
	}{
		{"Identical", TestCUDAEngineIdentical, false},
		{"RadixAndMovedValues", TestCUDAEngineRadixAndMovedValues, false},
		{"Matrix", TestCUDAEngineMatrix, false},
		{"IdenticalLarge", TestCUDAEngineIdenticalLarge, true},
		{"Partitioned", TestCUDAEnginePartitioned, true},
		{"DeviceEstimate", TestCUDADeviceEstimate, false},
		{"OutOfDeviceMemory", TestCUDAOutOfDeviceMemory, false},
		{"Compactor", TestCUDACompactor, false},
		{"DamagedInput", TestCUDADamagedInput, false},
		{"UnsortedRunDeclined", TestCUDAUnsortedRunDeclined, false},
		{"KeysOutsideBounds", TestCUDAKeysOutsideBounds, false},
		{"Engines", TestCUDAEngines, false},
		{"HostWorkers", TestCUDAHostWorkers, false},
		{"Staged", TestCUDAEngineStaged, false},
		{"PinnedBytes", TestCUDAPinnedBytes, false},
		{"SealBlocks", TestCUDASealBlocks, false},
		{"FlushSeal", TestCUDAFlushSeal, false},
		{"DeviceCompressionRefused", TestCUDADeviceCompressionRefused, false},
		{"CancelMidJob", TestCUDACancelMidJob, false},
		{"EncodeStatusWord", TestCUDAEncodeStatusWord, false},
	} {
		if c.shortOnly && !testing.Short() {
			continue // the emulation runs them with -short, the device at full size
		}
		t.Run(c.name, c.test)
	}
}
