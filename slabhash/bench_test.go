package slabhash

import (
	"context"
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/gputest"
	"github.com/warpkit/warpkit/internal/oahash"
)

// Benchmarks report Mops/s; `warp bench hash` prints the paper's tables with
// the same baseline. They never assert timings.

const benchN = 1 << 22

func benchKeys(n int) ([]uint32, []uint32) {
	keys := keySpace[uint32](n)
	vals := make([]uint32, n)
	for i := range vals {
		vals[i] = uint32(i)
	}
	return keys, vals
}

func BenchmarkCPUMap(b *testing.B) {
	const n = 1 << 18
	keys, vals := benchKeys(n)
	ctx := context.Background()
	b.Run("insert", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			m, _ := NewMap[uint32, uint32](Options{Backend: warpkit.CPU})
			if err := m.Insert(ctx, keys, vals, nil); err != nil {
				b.Fatal(err)
			}
			m.Close()
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mops/s")
	})
	b.Run("find", func(b *testing.B) {
		m, _ := NewMap[uint32, uint32](Options{Backend: warpkit.CPU})
		defer m.Close()
		m.Insert(ctx, keys, vals, nil)
		out := make([]uint32, n)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := m.Lookup(ctx, keys, out, nil); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mops/s")
	})
}

// BenchmarkGPUMap builds and searches 2^22 device-resident keys at 60%
// utilization for each layout, and the static baseline at the footprint of
// the default layout.
func BenchmarkGPUMap(b *testing.B) {
	dev := gputest.Device(b)
	ctx := context.Background()
	keys, vals := benchKeys(benchN)
	dk, _ := cuda.FromHost(dev, keys)
	dv, _ := cuda.FromHost(dev, vals)
	out, _ := cuda.Alloc[uint32](dev, benchN)
	defer dk.Free()
	defer dv.Free()
	defer out.Free()
	var footprint int64
	for _, l := range []Layout{LayoutTile8, LayoutTile16, LayoutPaper} {
		b.Run(l.String()+"/insert", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				m, err := NewMap[uint32, uint32](Options{Backend: warpkit.CUDA, Device: dev, ExpectedSize: benchN, Layout: l})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := m.InsertDevice(ctx, dk, dv, cuda.Slice[uint8]{}); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if st, err := m.Stats(ctx); err == nil && l == LayoutTile8 {
					footprint = st.MemoryBytes
				}
				m.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(benchN)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mops/s")
		})
		b.Run(l.String()+"/find", func(b *testing.B) {
			m, err := NewMap[uint32, uint32](Options{Backend: warpkit.CUDA, Device: dev, ExpectedSize: benchN, Layout: l})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			if err := m.InsertDevice(ctx, dk, dv, cuda.Slice[uint8]{}); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := m.LookupDevice(ctx, dk, out, cuda.Slice[uint8]{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(benchN)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mops/s")
		})
	}
	b.Run("static-baseline", func(b *testing.B) {
		if footprint == 0 {
			footprint = int64(benchN) * 8 / 6 * 10
		}
		t, err := oahash.New(dev, int(footprint/8))
		if err != nil {
			b.Fatal(err)
		}
		defer t.Close()
		var ins, find float64
		for i := 0; i < b.N; i++ {
			t.Clear()
			start := b.Elapsed()
			if err := t.Insert(dk, dv); err != nil {
				b.Fatal(err)
			}
			mid := b.Elapsed()
			if err := t.Find(dk, out); err != nil {
				b.Fatal(err)
			}
			ins += (mid - start).Seconds()
			find += (b.Elapsed() - mid).Seconds()
		}
		b.ReportMetric(float64(benchN)*float64(b.N)/ins/1e6, "insert-Mops/s")
		b.ReportMetric(float64(benchN)*float64(b.N)/find/1e6, "find-Mops/s")
	})
}

// BenchmarkGPUMapGoSlices finds and inserts 2^22 keys given as Go slices:
// the pinned staging path (chunks of hostChunk, host copies beside device
// work) on top of the kernels BenchmarkGPUMap times alone.
func BenchmarkGPUMapGoSlices(b *testing.B) {
	dev := gputest.Device(b)
	ctx := context.Background()
	keys, vals := benchKeys(benchN)
	out, res := make([]uint32, benchN), make([]Result, benchN)
	m, err := NewMap[uint32, uint32](Options{Backend: warpkit.CUDA, Device: dev, ExpectedSize: benchN})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	b.Run("insert", func(b *testing.B) {
		for b.Loop() {
			if err := m.Insert(ctx, keys, vals, res); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(benchN)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mops/s")
	})
	b.Run("find", func(b *testing.B) {
		for b.Loop() {
			if err := m.Lookup(ctx, keys, out, res); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(benchN)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mops/s")
	})
}
