package lsm

import (
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/sorteddict/dicttest"
)

// BenchmarkLSM: insert batches of 2^16, then lookups, counts and ranges on
// 2^20 (CPU) or 2^22 (CUDA, device-resident) entries. warp bench lsm runs the
// paper's full experiments.
func BenchmarkLSM(b *testing.B) {
	dicttest.BenchmarkBackends(b, func(be warpkit.Backend, dev *cuda.Device) (dicttest.DeviceDict[uint32, uint32], func() error, error) {
		l, err := New[uint32, uint32](Options{Backend: be, Device: dev, BatchSize: 1 << 16})
		if err != nil {
			return nil, nil, err
		}
		return l, l.Close, nil
	})
}
