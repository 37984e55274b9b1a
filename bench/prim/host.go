package primbench

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/warpkit/warpkit/internal/benchfmt"
	"github.com/warpkit/warpkit/prim"
)

// The CPU backend's sizes: 2^20 elements by default; at most 2^26 (about
// 6 GiB of Go slices, 90 bytes per element with the sorts' scratch).
const (
	hostDefaultLog2n = 20
	hostMaxLog2n     = 26
)

// runHost measures prim's host twins on the rows of the GPU table: the same
// inputs (the same generator and seeds), the same element counts and minimum
// bytes, wall time of one goroutine, against the bandwidth of Go's copy.
func runHost(ctx context.Context, log2n, reps int) (*benchfmt.Report, error) {
	n := 1 << log2n
	bw := hostCopyBandwidth(n, reps)
	cases := hostCases(n)
	rep := benchfmt.NewReport("warp bench prim: the host twins of the device-wide primitives (CPU backend)",
		fmt.Sprintf("CPU backend: host twins on one goroutine (%d logical CPUs)", runtime.NumCPU()))
	t := rep.Table(fmt.Sprintf("n = 2^%d elements, Go slices; bound = copy bandwidth %.1f GB/s (Go copy, one goroutine, read+write) / min bytes per element", log2n, bw/1e9),
		"primitive", "types", "elements", "time", "G elem/s", "min B/elem", "bound G elem/s", "% of bound", "target", "met")
	for _, c := range cases {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		d, err := hostTime(c, reps)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", c.name, c.types, err)
		}
		rate := benchfmt.Rate(int64(c.elems), d, 1e9)
		bound := bw / c.minBytes / 1e9
		t.Add(c.name, c.types, c.elems, d, rate, c.minBytes, bound, 100*rate/bound, "-", "-")
	}
	rep.Note("CPU backend: each row times the host twin of the GPU primitive (SortKeysHost for SortKeys, ...) on Go slices, on one goroutine; the GPU table's targets are not judged.")
	rep.Note("min B/elem counts one read of every input and one write of every output element; an LSD sort makes one pass per 8 key bits, so sorts cannot reach the bound.")
	rep.Note("times are medians of %d runs of wall time after one discarded; inputs are restored (untimed) before each run.", reps)
	return rep, nil
}

// hostCopyBandwidth is the bytes read plus written per second of Go's copy
// of n 8-byte words (the median of reps after one discarded).
func hostCopyBandwidth(n, reps int) float64 {
	src, dst := make([]uint64, n), make([]uint64, n)
	for i := range src {
		src[i] = uint64(i)
	}
	d, _ := hostTime(primCase{run: func() error { copy(dst, src); return nil }}, reps)
	return 2 * 8 * float64(n) / d.Seconds()
}

// hostTime runs c once to warm up, then reps times, and returns the median
// wall time of run (prepare is not timed).
func hostTime(c primCase, reps int) (time.Duration, error) {
	var ds []time.Duration
	for i := 0; i <= reps; i++ {
		if c.prepare != nil {
			if err := c.prepare(); err != nil {
				return 0, err
			}
		}
		start := time.Now()
		if err := c.run(); err != nil {
			return 0, err
		}
		if d := time.Since(start); i > 0 {
			ds = append(ds, d)
		}
	}
	slices.Sort(ds)
	return ds[len(ds)/2], nil
}

// hostCases are the rows of primBench.cases for the host twins, named as
// there.
func hostCases(n int) []primCase {
	h64, h32, flags, offs := inputs(n)
	k32, v32, o32, ov32 := make([]uint32, n), make([]uint32, n), make([]uint32, n), make([]uint32, n)
	k64, v64, o64, ov64 := make([]uint64, n), make([]uint64, n), make([]uint64, n), make([]uint64, n)
	// Sorted runs for the merges: each half of the random data, sorted.
	s32, s64 := slices.Clone(h32), slices.Clone(h64)
	h := n / 2
	all := prim.SortOptions{}
	for _, s := range [][]uint32{s32[:h], s32[h:]} {
		prim.SortKeysHost(s, all)
	}
	for _, s := range [][]uint64{s64[:h], s64[h:]} {
		prim.SortKeysHost(s, all)
	}
	restore32 := func() error { copy(k32, h32); return nil }
	restore64 := func() error { copy(k64, h64); return nil }
	restore3232 := func() error { copy(k32, h32); copy(v32, h32); return nil }
	restore6432 := func() error { copy(k64, h64); copy(v32, h32); return nil }
	restore6464 := func() error { copy(k64, h64); copy(v64, h64); return nil }
	do := func(f func()) func() error { return func() error { f(); return nil } }
	return []primCase{
		{name: "SortKeys", types: "u32", elems: n, minBytes: 8, prepare: restore32,
			run: do(func() { prim.SortKeysHost(k32, all) })},
		{name: "SortKeys", types: "u64", elems: n, minBytes: 16, prepare: restore64,
			run: do(func() { prim.SortKeysHost(k64, all) })},
		{name: "SortPairs", types: "u32/u32", elems: n, minBytes: 16, prepare: restore3232,
			run: do(func() { prim.SortPairsHost(k32, v32, all) })},
		{name: "SortPairs", types: "u64/u32", elems: n, minBytes: 24, prepare: restore6432,
			run: do(func() { prim.SortPairsHost(k64, v32, all) })},
		{name: "SortPairs", types: "u64/u64", elems: n, minBytes: 32, prepare: restore6464,
			run: do(func() { prim.SortPairsHost(k64, v64, all) })},
		{name: "SortKeys bits [0,16)", types: "u32", elems: n, minBytes: 8, prepare: restore32,
			run: do(func() { prim.SortKeysHost(k32, prim.SortOptions{BeginBit: 0, EndBit: 16}) })},
		{name: fmt.Sprintf("SegmentedSortPairs (%d segs)", len(offs)-1), types: "u32/u32", elems: n, minBytes: 16, prepare: restore3232,
			run: do(func() { prim.SegmentedSortPairsHost(k32, v32, offs) })},
		{name: fmt.Sprintf("SegmentedSortPairs (%d segs)", len(offs)-1), types: "u64/u32", elems: n, minBytes: 24, prepare: restore6432,
			run: do(func() { prim.SegmentedSortPairsHost(k64, v32, offs) })},
		{name: "MergeKeys", types: "u32", elems: n, minBytes: 8,
			run: do(func() { prim.MergeKeysHost(s32[:h], s32[h:], o32, prim.MergeOptions[uint32]{}) })},
		{name: "MergePairs", types: "u32/u32", elems: n, minBytes: 16,
			run: do(func() {
				prim.MergePairsHost(s32[:h], h32[:h], s32[h:], h32[h:], o32, ov32, prim.MergeOptions[uint32]{})
			})},
		{name: "MergePairs", types: "u64/u64", elems: n, minBytes: 32,
			run: do(func() {
				prim.MergePairsHost(s64[:h], h64[:h], s64[h:], h64[h:], o64, ov64, prim.MergeOptions[uint64]{KeyMask: ^uint64(1)})
			})},
		{name: "ExclusiveScan", types: "u32", elems: n, minBytes: 8,
			run: do(func() { prim.ExclusiveScanHost(h32, o32) })},
		{name: "ExclusiveScan", types: "u64", elems: n, minBytes: 16,
			run: do(func() { prim.ExclusiveScanHost(h64, o64) })},
		{name: "SelectFlagged (50%)", types: "u32", elems: n, minBytes: 4 + 1 + 2,
			run: do(func() { prim.SelectFlaggedHost(h32, flags, o32) })},
		{name: "SelectFlaggedPairs (50%)", types: "u32/u32", elems: n, minBytes: 8 + 1 + 4,
			run: do(func() { prim.SelectFlaggedPairsHost(h32, k32, flags, o32, ov32) })},
		{name: "SelectFlagged (50%)", types: "u64", elems: n, minBytes: 8 + 1 + 4,
			run: do(func() { prim.SelectFlaggedHost(h64, flags, o64) })},
		{name: "Multisplit2Pairs", types: "u32/u32", elems: n, minBytes: 8 + 1 + 8,
			run: do(func() { prim.Multisplit2PairsHost(h32, k32, flags, o32, ov32) })},
	}
}
