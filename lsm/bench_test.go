package lsm

import (
	"context"
	"runtime"
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

// BenchmarkShortInserts: one-key Insert calls from Go slices with the
// default batch size, on a fresh LSM per run of b.N calls. It reports the
// entries held per call (1 since the staging run; b = 65,536 when every batch
// was padded to b) and the bytes the Go heap holds per call (the CPU
// backend's levels live there).
func BenchmarkShortInserts(b *testing.B) {
	run := func(b *testing.B, be warpkit.Backend, dev *cuda.Device) {
		l, err := New[uint32, uint32](Options{Backend: be, Device: dev})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		ctx := context.Background()
		var before runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		b.ResetTimer()
		for i := range b.N {
			if err := l.Insert(ctx, []uint32{uint32(i * 7919)}, []uint32{uint32(i)}); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		var after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(statsOf(b, l).Resident)/float64(b.N), "entries/call")
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(b.N), "heap-B/call")
	}
	b.Run("cpu", func(b *testing.B) { run(b, warpkit.CPU, nil) })
	dev, err := cuda.Open(0)
	if err != nil {
		b.Logf("no CUDA benchmark: %v", err)
		return
	}
	defer dev.Close()
	b.Run("cuda", func(b *testing.B) { run(b, warpkit.CUDA, dev) })
}
