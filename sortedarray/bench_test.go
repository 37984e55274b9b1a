package sortedarray

import (
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/sorteddict/dicttest"
)

// BenchmarkSortedArray: insert batches of 2^16, then lookups, counts and
// ranges on 2^20 (CPU) or 2^22 (CUDA, device-resident) keys, as BenchmarkLSM
// in package lsm does.
func BenchmarkSortedArray(b *testing.B) {
	b.Run("cpu", func(b *testing.B) {
		dicttest.Benchmarks(b, nil, opener(warpkit.CPU, nil), 1<<16, 1<<20)
	})
	dev, err := cuda.Open(0)
	if err != nil {
		b.Logf("no CUDA benchmarks: %v", err)
		return
	}
	defer dev.Close()
	b.Run("cuda", func(b *testing.B) {
		dicttest.Benchmarks(b, dev, opener(warpkit.CUDA, dev), 1<<16, 1<<22)
	})
}

func opener(be warpkit.Backend, dev *cuda.Device) dicttest.Opener {
	return func() (dicttest.DeviceDict[uint32, uint32], func() error, error) {
		a, err := New[uint32, uint32](Options{Backend: be, Device: dev})
		if err != nil {
			return nil, nil, err
		}
		return a, a.Close, nil
	}
}
