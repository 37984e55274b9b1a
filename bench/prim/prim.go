// Package primbench is warp bench prim: prim's device-wide primitives against
// the memory-bandwidth bound, or on the CPU backend their host twins
// (SortPairsHost and the others) against the host's. cmd/warp dispatches to
// Run.
package primbench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/benchfmt"
	"github.com/warpkit/warpkit/internal/benchfmt/benchplot"
	"github.com/warpkit/warpkit/internal/cli"
	"github.com/warpkit/warpkit/prim"
)

// Summary is the line warp bench -h prints for prim.
const Summary = "GPU sort, segmented sort, merge, scan, select, multisplit vs the memory-bandwidth bound (CPU: the host twins)"

// primCase is one measured primitive. prepare (untimed) restores the inputs a
// run consumes; run is timed with events on the stream.
type primCase struct {
	name, types string
	elems       int     // elements the rate counts
	minBytes    float64 // bytes per counted element the primitive must at least read and write
	target      float64 // G elements/s (absolute) or, with targetPct, % of the bound; 0: none
	targetPct   bool
	prepare     func() error
	run         func() error
}

// Run runs warp bench prim with args (its flags) and writes the report to w.
func Run(ctx context.Context, args []string, w io.Writer) error {
	fs := cli.NewFlags("bench prim", "[--log2n 26] [--reps 5] [--device 0] [--backend B] [--json] [--plot DIR]\n\n"+
		"Times the primitives on a GPU. On the CPU backend (--backend cpu, or auto without a device) it times their\n"+
		"host twins instead (SortKeysHost, SortPairsHost, ..., one goroutine, Go slices), every row of the GPU table,\n"+
		"at 2^20 elements by default, against the host's copy bandwidth; the targets are the GPU's and not judged there.")
	log2n := fs.Int("log2n", 26, "elements per primitive: 2^log2n (CPU backend: default 20, at most 26)")
	reps := fs.Int("reps", 5, "timed repetitions per primitive (the median is reported)")
	ordinal := fs.Int("device", 0, "CUDA device ordinal")
	asJSON := fs.Bool("json", false, "print JSON")
	backend := warpkit.Auto
	fs.TextVar(&backend, "backend", warpkit.Auto, "backend: auto, cpu or cuda (auto: CUDA when a device is present)")
	plotDir := fs.String("plot", "", "also write the table as a plot, `DIR`/<table>.png and .svg")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if *log2n < 10 || *log2n > 30 || *reps < 1 {
		return fmt.Errorf("%w: --log2n must be in [10, 30] and --reps positive", cli.ErrUsage)
	}
	dev, err := warpkit.OpenDevice(backend, *ordinal)
	if err != nil {
		return err
	}
	if dev == nil {
		n := hostDefaultLog2n
		fs.Visit(func(f *flag.Flag) {
			if f.Name == "log2n" {
				n = *log2n
			}
		})
		if n > hostMaxLog2n {
			return fmt.Errorf("%w: --log2n %d: the CPU backend runs at most --log2n %d (the host twins hold about 90 bytes per element)", cli.ErrUsage, n, hostMaxLog2n)
		}
		rep, err := runHost(ctx, n, *reps)
		if err != nil {
			return err
		}
		return benchplot.Finish(rep, w, *asJSON, *plotDir)
	}
	defer dev.Close()
	free, _, err := dev.MemInfo()
	if err != nil {
		return err
	}
	if err := checkPrimBenchMemory(*log2n, free); err != nil {
		return err
	}
	e, err := prim.NewEngine(dev)
	if err != nil {
		return err
	}
	defer e.Close()
	s, err := dev.NewStream()
	if err != nil {
		return err
	}
	defer s.Close()
	b := &primBench{dev: dev, e: e, s: s, n: 1 << *log2n, reps: *reps}
	defer b.free()

	bw, err := b.copyBandwidth()
	if err != nil {
		return err
	}
	cases, err := b.cases()
	if err != nil {
		return err
	}
	rep := benchfmt.NewReport("warp bench prim: device-wide primitives", dev.Name())
	t := rep.Table(fmt.Sprintf("n = 2^%d elements, device-resident; bound = copy bandwidth %.0f GB/s (cuMemcpyDtoD, read+write) / min bytes per element", *log2n, bw/1e9),
		"primitive", "types", "elements", "time", "G elem/s", "min B/elem", "bound G elem/s", "% of bound", "target", "met")
	for _, c := range cases {
		if err := ctx.Err(); err != nil {
			return err
		}
		d, err := b.time(c)
		if err != nil {
			return fmt.Errorf("%s %s: %w", c.name, c.types, err)
		}
		rate := benchfmt.Rate(int64(c.elems), d, 1e9)
		bound := bw / c.minBytes / 1e9
		pct := 100 * rate / bound
		target, met := "-", "-"
		switch {
		case c.target > 0 && c.targetPct:
			target, met = fmt.Sprintf(">= %.0f%% of bound", c.target), benchfmt.YesNo(pct >= c.target)
		case c.target > 0:
			target, met = fmt.Sprintf(">= %.0f G/s", c.target), benchfmt.YesNo(rate >= c.target)
		}
		t.Add(c.name, c.types, c.elems, d, rate, c.minBytes, bound, pct, target, met)
	}
	rep.Note("min B/elem counts one read of every input and one write of every output element; an LSD sort makes one pass per 8 key bits, so sorts cannot reach the bound.")
	rep.Note("times are medians of %d runs, measured with events on one stream; inputs are restored (untimed) before each run.", *reps)
	return benchplot.Finish(rep, w, *asJSON, *plotDir)
}

// primBenchBytesPerElem is the device memory the benchmark holds per element
// of n: 16 bytes for the bandwidth copy, 13 of inputs (32- and 64-bit values,
// flags), 24 of sort operands, 24 of outputs, 12 of sorted runs for the
// merges, and 20 of prim scratch (the 64-bit pair sort's copy of n keys and
// values, plus the arena's 25% headroom); the segment offsets add 4 bytes per
// segment of about 100.
const primBenchBytesPerElem = 16 + 13 + 24 + 24 + 12 + 20

// checkPrimBenchMemory rejects a --log2n whose data would not fit in free
// bytes of device memory (with 5% to spare), naming the largest that fits.
func checkPrimBenchMemory(log2n int, free uint64) error {
	need := func(l int) uint64 { n := uint64(1) << l; return n*primBenchBytesPerElem + n/16 }
	if need(log2n)+need(log2n)/20 <= free {
		return nil
	}
	fits := log2n - 1
	for fits >= 10 && need(fits)+need(fits)/20 > free {
		fits--
	}
	return fmt.Errorf("%w: --log2n %d needs about %.1f GiB of device memory, %.1f GiB are free (at most --log2n %d fits)",
		cli.ErrUsage, log2n, float64(need(log2n))/(1<<30), float64(free)/(1<<30), fits)
}

type primBench struct {
	dev   *cuda.Device
	e     *prim.Engine
	s     *cuda.Stream
	n     int
	reps  int
	freed []func() error
}

func (b *primBench) free() {
	for _, f := range b.freed {
		f()
	}
}

func benchAlloc[T cuda.Elem](b *primBench, n int) (cuda.Slice[T], error) {
	s, err := cuda.Alloc[T](b.dev, max(n, 1))
	if err == nil {
		b.freed = append(b.freed, s.Free)
	}
	return s.Sub(0, n), err
}

func benchUpload[T cuda.Elem](b *primBench, host []T) (cuda.Slice[T], error) {
	s, err := cuda.FromHost(b.dev, host)
	if err == nil {
		b.freed = append(b.freed, s.Free)
	}
	return s, err
}

// copyBandwidth measures device-to-device copy bandwidth (bytes read plus
// written per second) with copies of n 8-byte words.
func (b *primBench) copyBandwidth() (float64, error) {
	src, err := benchAlloc[uint64](b, b.n)
	if err != nil {
		return 0, err
	}
	dst, err := benchAlloc[uint64](b, b.n)
	if err != nil {
		return 0, err
	}
	d, err := b.time(primCase{run: func() error { return cuda.CopyAsync(dst, src, b.s) }})
	if err != nil {
		return 0, err
	}
	return 2 * float64(src.Bytes()) / d.Seconds(), nil
}

// time runs c once to warm up, then reps times, and returns the median.
func (b *primBench) time(c primCase) (time.Duration, error) {
	start, err := b.dev.NewEvent()
	if err != nil {
		return 0, err
	}
	defer start.Close()
	end, err := b.dev.NewEvent()
	if err != nil {
		return 0, err
	}
	defer end.Close()
	var ds []time.Duration
	for i := 0; i <= b.reps; i++ {
		if c.prepare != nil {
			if err := c.prepare(); err != nil {
				return 0, err
			}
		}
		if err := start.Record(b.s); err != nil {
			return 0, err
		}
		if err := c.run(); err != nil {
			return 0, err
		}
		if err := end.Record(b.s); err != nil {
			return 0, err
		}
		if err := end.Synchronize(); err != nil {
			return 0, err
		}
		d, err := cuda.Elapsed(start, end)
		if err != nil {
			return 0, err
		}
		if i > 0 {
			ds = append(ds, d)
		}
	}
	slices.Sort(ds)
	return ds[len(ds)/2], nil
}

// cases builds the inputs on the device and the list of measured primitives.
func (b *primBench) cases() ([]primCase, error) {
	n := b.n
	h64, h32, flags, offs := inputs(n)

	r32, err := benchUpload(b, h32)
	if err != nil {
		return nil, err
	}
	r64, err := benchUpload(b, h64)
	if err != nil {
		return nil, err
	}
	dflags, err := benchUpload(b, flags)
	if err != nil {
		return nil, err
	}
	doffs, err := benchUpload(b, offs)
	if err != nil {
		return nil, err
	}
	k32, err := benchAlloc[uint32](b, n)
	if err != nil {
		return nil, err
	}
	v32, err := benchAlloc[uint32](b, n)
	if err != nil {
		return nil, err
	}
	k64, err := benchAlloc[uint64](b, n)
	if err != nil {
		return nil, err
	}
	v64, err := benchAlloc[uint64](b, n)
	if err != nil {
		return nil, err
	}
	o32, err := benchAlloc[uint32](b, n)
	if err != nil {
		return nil, err
	}
	ov32, err := benchAlloc[uint32](b, n)
	if err != nil {
		return nil, err
	}
	o64, err := benchAlloc[uint64](b, n)
	if err != nil {
		return nil, err
	}
	ov64, err := benchAlloc[uint64](b, n)
	if err != nil {
		return nil, err
	}
	count, err := benchAlloc[uint32](b, 1)
	if err != nil {
		return nil, err
	}
	// Sorted runs for the merges: each half of the random data, sorted.
	s32, err := benchAlloc[uint32](b, n)
	if err != nil {
		return nil, err
	}
	s64, err := benchAlloc[uint64](b, n)
	if err != nil {
		return nil, err
	}
	for _, err := range []error{
		cuda.CopyAsync(s32, r32, b.s), cuda.CopyAsync(s64, r64, b.s),
		prim.SortKeys(b.e, b.s, s32.Sub(0, n/2), prim.SortOptions{}), prim.SortKeys(b.e, b.s, s32.Sub(n/2, n), prim.SortOptions{}),
		prim.SortKeys(b.e, b.s, s64.Sub(0, n/2), prim.SortOptions{}), prim.SortKeys(b.e, b.s, s64.Sub(n/2, n), prim.SortOptions{}),
		b.s.Synchronize(),
	} {
		if err != nil {
			return nil, err
		}
	}
	restore32 := func() error { return cuda.CopyAsync(k32, r32, b.s) }
	restore64 := func() error { return cuda.CopyAsync(k64, r64, b.s) }
	restore3232 := func() error {
		if err := restore32(); err != nil {
			return err
		}
		return cuda.CopyAsync(v32, r32, b.s)
	}
	restore6432 := func() error {
		if err := restore64(); err != nil {
			return err
		}
		return cuda.CopyAsync(v32, r32, b.s)
	}
	restore6464 := func() error {
		if err := restore64(); err != nil {
			return err
		}
		return cuda.CopyAsync(v64, r64, b.s)
	}
	all := prim.SortOptions{}
	e, s, h := b.e, b.s, n/2
	return []primCase{
		{name: "SortKeys", types: "u32", elems: n, minBytes: 8, target: 10, prepare: restore32,
			run: func() error { return prim.SortKeys(e, s, k32, all) }},
		{name: "SortKeys", types: "u64", elems: n, minBytes: 16, prepare: restore64,
			run: func() error { return prim.SortKeys(e, s, k64, all) }},
		{name: "SortPairs", types: "u32/u32", elems: n, minBytes: 16, target: 5, prepare: restore3232,
			run: func() error { return prim.SortPairs(e, s, k32, v32, all) }},
		{name: "SortPairs", types: "u64/u32", elems: n, minBytes: 24, prepare: restore6432,
			run: func() error { return prim.SortPairs(e, s, k64, v32, all) }},
		{name: "SortPairs", types: "u64/u64", elems: n, minBytes: 32, prepare: restore6464,
			run: func() error { return prim.SortPairs(e, s, k64, v64, all) }},
		{name: "SortKeys bits [0,16)", types: "u32", elems: n, minBytes: 8, prepare: restore32,
			run: func() error { return prim.SortKeys(e, s, k32, prim.SortOptions{BeginBit: 0, EndBit: 16}) }},
		{name: fmt.Sprintf("SegmentedSortPairs (%d segs)", len(offs)-1), types: "u32/u32", elems: n, minBytes: 16, prepare: restore3232,
			run: func() error { return prim.SegmentedSortPairs(e, s, k32, v32, doffs) }},
		{name: fmt.Sprintf("SegmentedSortPairs (%d segs)", len(offs)-1), types: "u64/u32", elems: n, minBytes: 24, prepare: restore6432,
			run: func() error { return prim.SegmentedSortPairs(e, s, k64, v32, doffs) }},
		{name: "MergeKeys", types: "u32", elems: n, minBytes: 8,
			run: func() error {
				return prim.MergeKeys(e, s, s32.Sub(0, h), s32.Sub(h, n), o32, prim.MergeOptions[uint32]{})
			}},
		{name: "MergePairs", types: "u32/u32", elems: n, minBytes: 16, target: 20,
			run: func() error {
				return prim.MergePairs(e, s, s32.Sub(0, h), r32.Sub(0, h), s32.Sub(h, n), r32.Sub(h, n), o32, ov32, prim.MergeOptions[uint32]{})
			}},
		{name: "MergePairs", types: "u64/u64", elems: n, minBytes: 32,
			run: func() error {
				return prim.MergePairs(e, s, s64.Sub(0, h), r64.Sub(0, h), s64.Sub(h, n), r64.Sub(h, n), o64, ov64, prim.MergeOptions[uint64]{KeyMask: ^uint64(1)})
			}},
		{name: "ExclusiveScan", types: "u32", elems: n, minBytes: 8, target: 50, targetPct: true,
			run: func() error { return prim.ExclusiveScan(e, s, r32, o32, count) }},
		{name: "ExclusiveScan", types: "u64", elems: n, minBytes: 16, target: 50, targetPct: true,
			run: func() error { return prim.ExclusiveScan(e, s, r64, o64, cuda.Slice[uint64]{}) }},
		{name: "SelectFlagged (50%)", types: "u32", elems: n, minBytes: 4 + 1 + 2, target: 50, targetPct: true,
			run: func() error { return prim.SelectFlagged(e, s, r32, dflags, o32, count) }},
		{name: "SelectFlaggedPairs (50%)", types: "u32/u32", elems: n, minBytes: 8 + 1 + 4, target: 50, targetPct: true,
			run: func() error { return prim.SelectFlaggedPairs(e, s, r32, k32, dflags, o32, ov32, count) }},
		{name: "SelectFlagged (50%)", types: "u64", elems: n, minBytes: 8 + 1 + 4, target: 50, targetPct: true,
			run: func() error { return prim.SelectFlagged(e, s, r64, dflags, o64, count) }},
		{name: "Multisplit2Pairs", types: "u32/u32", elems: n, minBytes: 8 + 1 + 8,
			run: func() error { return prim.Multisplit2Pairs(e, s, r32, k32, dflags, o32, ov32, count) }},
	}, nil
}

// inputs returns the measured data, the same for the device and the host
// twins: n random 64-bit keys, their 32-bit keys, selection flags (half set)
// and segment offsets of 1..200 elements (mean about 100, like per-query
// results).
func inputs(n int) (h64 []uint64, h32 []uint32, flags []uint8, offs []uint32) {
	rng := rand.New(rand.NewPCG(1, 2))
	h64 = make([]uint64, n)
	for i := range h64 {
		h64[i] = rng.Uint64()
	}
	h32 = make([]uint32, n)
	for i := range h32 {
		h32[i] = uint32(h64[i] >> 17)
	}
	flags = make([]uint8, n)
	for i := range flags {
		flags[i] = uint8(h64[i] & 1)
	}
	offs = []uint32{0}
	for pos := 0; pos < n; {
		pos = min(n, pos+1+rng.IntN(200))
		offs = append(offs, uint32(pos))
	}
	return h64, h32, flags, offs
}
