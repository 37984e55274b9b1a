package sortedarray

import (
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/sorteddict/dicttest"
)

// BenchmarkSortedArray: the same benchmarks as BenchmarkLSM in package lsm.
func BenchmarkSortedArray(b *testing.B) {
	dicttest.BenchmarkBackends(b, func(be warpkit.Backend, dev *cuda.Device) (dicttest.DeviceDict[uint32, uint32], func() error, error) {
		a, err := New[uint32, uint32](Options{Backend: be, Device: dev})
		if err != nil {
			return nil, nil, err
		}
		return a, a.Close, nil
	})
}
