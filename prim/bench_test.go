package prim

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/warpkit/warpkit/cuda"
)

var benchLog2N = flag.Int("prim.log2n", 24, "elements per benchmark operation: 2^log2n")

// benchGPU times op on the default stream per iteration (device synchronized
// after each), restoring inputs untimed with prepare, and reports G elements/s.
func benchGPU(b *testing.B, elems int, prepare, op func() error) {
	e := gpuEngine(b)
	b.ResetTimer()
	for b.Loop() {
		if prepare != nil {
			b.StopTimer()
			must(b, prepare())
			must(b, e.Device().Synchronize())
			b.StartTimer()
		}
		must(b, op())
		must(b, e.Device().Synchronize())
	}
	b.ReportMetric(float64(elems)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gelem/s")
}

func benchData(b *testing.B) (e *Engine, n int, r32 cuda.Slice[uint32], r64 cuda.Slice[uint64]) {
	e = gpuEngine(b)
	n = 1 << *benchLog2N
	rng := rand.New(rand.NewPCG(1, 1))
	h32, h64 := make([]uint32, n), make([]uint64, n)
	for i := range h64 {
		h64[i] = rng.Uint64()
		h32[i] = uint32(h64[i])
	}
	return e, n, upload(b, e, h32), upload(b, e, h64)
}

func BenchmarkGPUSortKeys32(b *testing.B) {
	e, n, r32, _ := benchData(b)
	k := alloc[uint32](b, e, n)
	benchGPU(b, n, func() error { return k.CopyFrom(r32) }, func() error { return SortKeys(e, nil, k, SortOptions{}) })
}

func BenchmarkGPUSortPairs32(b *testing.B) {
	e, n, r32, _ := benchData(b)
	k, v := alloc[uint32](b, e, n), alloc[uint32](b, e, n)
	benchGPU(b, n, func() error {
		if err := k.CopyFrom(r32); err != nil {
			return err
		}
		return v.CopyFrom(r32)
	}, func() error { return SortPairs(e, nil, k, v, SortOptions{}) })
}

func BenchmarkGPUSortPairs64(b *testing.B) {
	e, n, _, r64 := benchData(b)
	k, v := alloc[uint64](b, e, n), alloc[uint64](b, e, n)
	benchGPU(b, n, func() error {
		if err := k.CopyFrom(r64); err != nil {
			return err
		}
		return v.CopyFrom(r64)
	}, func() error { return SortPairs(e, nil, k, v, SortOptions{}) })
}

func BenchmarkGPUMergePairs32(b *testing.B) {
	e, n, r32, _ := benchData(b)
	h := n / 2
	a, bk := alloc[uint32](b, e, h), alloc[uint32](b, e, n-h)
	must(b, a.CopyFrom(r32.Sub(0, h)))
	must(b, bk.CopyFrom(r32.Sub(h, n)))
	must(b, SortKeys(e, nil, a, SortOptions{}))
	must(b, SortKeys(e, nil, bk, SortOptions{}))
	ok, ov := alloc[uint32](b, e, n), alloc[uint32](b, e, n)
	benchGPU(b, n, nil, func() error {
		return MergePairs(e, nil, a, r32.Sub(0, h), bk, r32.Sub(h, n), ok, ov, MergeOptions[uint32]{})
	})
}

func BenchmarkGPUExclusiveScan32(b *testing.B) {
	e, n, r32, _ := benchData(b)
	out := alloc[uint32](b, e, n)
	benchGPU(b, n, nil, func() error { return ExclusiveScan(e, nil, r32, out, cuda.Slice[uint32]{}) })
}

func BenchmarkGPUSelectFlagged32(b *testing.B) {
	e, n, r32, _ := benchData(b)
	rng := rand.New(rand.NewPCG(2, 2))
	flags := upload(b, e, genFlags(rng, n, 0.5))
	out, count := alloc[uint32](b, e, n), alloc[uint32](b, e, 1)
	benchGPU(b, n, nil, func() error { return SelectFlagged(e, nil, r32, flags, out, count) })
}

func BenchmarkGPUSegmentedSortPairs32(b *testing.B) {
	e, n, r32, _ := benchData(b)
	rng := rand.New(rand.NewPCG(3, 3))
	offs := []uint32{0}
	for pos := 0; pos < n; {
		pos = min(n, pos+1+rng.IntN(200))
		offs = append(offs, uint32(pos))
	}
	doffs := upload(b, e, offs)
	k, v := alloc[uint32](b, e, n), alloc[uint32](b, e, n)
	benchGPU(b, n, func() error {
		if err := k.CopyFrom(r32); err != nil {
			return err
		}
		return v.CopyFrom(r32)
	}, func() error { return SegmentedSortPairs(e, nil, k, v, doffs) })
}

func BenchmarkHostSortPairs32(b *testing.B) {
	n := 1 << min(*benchLog2N, 22)
	rng := rand.New(rand.NewPCG(4, 4))
	src := genKeys[uint32](rng, n, "random")
	k, v := make([]uint32, n), make([]uint32, n)
	for b.Loop() {
		copy(k, src)
		copy(v, src)
		SortPairsHost(k, v, SortOptions{})
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gelem/s")
}

// BenchmarkGPUSortPairsSmall sorts 2^12..2^19 u32 pairs (an LSM batch's
// sizes) with each fused-sort tile, timing one call with its synchronize:
// "small" is the small-input tile where it applies, "default" the regular
// tile for the same inputs.
func BenchmarkGPUSortPairsSmall(b *testing.B) {
	e := gpuEngine(b)
	rng := rand.New(rand.NewPCG(3, 3))
	for lg := 12; lg <= 19; lg++ {
		n := 1 << lg
		h := make([]uint32, n)
		for i := range h {
			h[i] = rng.Uint32()
		}
		src, k, v := upload(b, e, h), alloc[uint32](b, e, n), alloc[uint32](b, e, n)
		for _, tile := range []string{"small", "default"} {
			b.Run(fmt.Sprintf("2^%d/%s", lg, tile), func(b *testing.B) {
				if tile == "default" {
					defer func(m int) { e.fusedSmall = m }(e.fusedSmall)
					e.fusedSmall = 0
				}
				benchGPU(b, n, func() error {
					if err := k.CopyFrom(src); err != nil {
						return err
					}
					return v.CopyFrom(src)
				}, func() error { return SortPairs(e, nil, k, v, SortOptions{}) })
			})
		}
	}
}
