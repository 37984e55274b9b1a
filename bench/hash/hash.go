// Package hashbench is warp bench hash: the slab hash and SlabAlloc against
// a static open-addressing table (IPDPS'18 Figs. 4-7a and the allocation
// rate) on a GPU, and the experiments that have a CPU-backend variant on the
// CPU backend (cpu.go). cmd/warp dispatches to Run.
package hashbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/benchfmt"
	"github.com/warpkit/warpkit/internal/benchfmt/benchplot"
	"github.com/warpkit/warpkit/internal/cli"
	"github.com/warpkit/warpkit/internal/oahash"
	"github.com/warpkit/warpkit/slaballoc"
	"github.com/warpkit/warpkit/slabhash"
)

// Summary is the line warp bench -h prints for hash.
const Summary = "slab hash and SlabAlloc: IPDPS'18 Figs. 4-7a and allocation rate, against a static open-addressing table"

// Targets of issue 3 (H100/H200, 2^22-2^26 keys, 60% utilization), as
// ratios to the static baseline measured in the same run, and allocations/s.
const (
	hashTargetFind   = 0.8
	hashTargetInsert = 0.8
	hashTargetMixed  = 0.6 // Γ1
	hashTargetAlloc  = 5e9
)

type hashBench struct {
	ctx      context.Context
	dev      *cuda.Device
	rep      *benchfmt.Report
	reps     int
	quick    bool
	layout   slabhash.Layout
	misses   []string
	enlarged []string // mixes whose static table needed more than the footprint
}

// Run runs warp bench hash with args (its flags) and writes the report to w.
func Run(ctx context.Context, args []string, w io.Writer) error {
	fs := cli.NewFlags("bench hash", "[--json] [--json-out FILE] [--quick] [--reps N] [--min-log2 N] [--max-log2 N] [--mix-utils U,..] [--mix-log2 N,..] [--only overhead,layouts,fig4,fig5,fig6,fig7,alloc] [--layout L] [--backend B] [--plot DIR]\n\n"+
		"Measures the slab hash and SlabAlloc on a GPU against a static open-addressing GPU table. On the CPU backend\n"+
		"(--backend cpu, or auto without a device) it runs at --quick sizes what has a CPU variant: overhead, fig5,\n"+
		"fig6 and fig7 (the slab hash's Go-map backend, from Go slices) and alloc (slaballoc's Go pool). The baseline,\n"+
		"layouts, fig4 (memory utilization), the warp allocators, --layout, --mix-utils and the targets need a GPU.")
	asJSON := fs.Bool("json", false, "print JSON")
	jsonOut := fs.String("json-out", "", "also write the JSON report to this file")
	quick := fs.Bool("quick", false, "small sizes, one repetition (seconds)")
	reps := fs.Int("reps", 3, "repetitions per measurement (the median is reported)")
	minLog := fs.Int("min-log2", 18, "smallest n of the size sweep (Fig. 5) is 2^min-log2")
	maxLog := fs.Int("max-log2", 26, "largest n of the size sweep (Fig. 5) is 2^max-log2")
	mixUtils := fs.String("mix-utils", "0.3,0.45,0.6,0.75", "initial utilizations of the concurrent mixes (Fig. 7a)")
	mixLogs := fs.String("mix-log2", "22", "table sizes of the concurrent mixes (Fig. 7a): 2^N keys each, N in 16..26 (--quick: 20)")
	only := fs.String("only", "", "comma-separated experiments, run in the order given (default all): overhead, layouts, fig4, fig5, fig6, fig7, alloc")
	layoutName := fs.String("layout", "auto", "slab layout of the slab hash: auto, paper, tile8, tile16")
	backend := warpkit.Auto
	fs.TextVar(&backend, "backend", warpkit.Auto, "backend: auto, cpu or cuda (auto: CUDA when a device is present)")
	plotDir := fs.String("plot", "", "also write each table as a plot, `DIR`/<table>.png and .svg")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	layouts := map[string]slabhash.Layout{"auto": slabhash.LayoutAuto, "paper": slabhash.LayoutPaper, "tile8": slabhash.LayoutTile8, "tile16": slabhash.LayoutTile16}
	layout, ok := layouts[*layoutName]
	if !ok {
		return fmt.Errorf("%w: unknown layout %q", cli.ErrUsage, *layoutName)
	}
	if *minLog < 10 || *maxLog > 28 || *minLog > *maxLog || *reps < 1 {
		return fmt.Errorf("%w: need 10 <= --min-log2 <= --max-log2 <= 28 and --reps positive", cli.ErrUsage)
	}
	var utils []float64
	for _, f := range strings.Split(*mixUtils, ",") {
		u, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(u > 0 && u < 1) {
			return fmt.Errorf("%w: --mix-utils: %q is not a utilization", cli.ErrUsage, f)
		}
		utils = append(utils, u)
	}
	var mixSizes []int
	for _, f := range strings.Split(*mixLogs, ",") {
		l, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || l < 16 || l > 26 {
			return fmt.Errorf("%w: --mix-log2: %q is not a size exponent in 16..26", cli.ErrUsage, f)
		}
		mixSizes = append(mixSizes, 1<<l)
	}
	order := []string{"overhead", "layouts", "fig4", "fig5", "fig6", "fig7", "alloc"}
	if *only != "" {
		known := order
		order = strings.Split(*only, ",")
		for _, name := range order {
			if !slices.Contains(known, name) {
				return fmt.Errorf("%w: --only: unknown experiment %q", cli.ErrUsage, name)
			}
		}
	}
	dev, err := warpkit.OpenDevice(backend, 0)
	if err != nil {
		return fmt.Errorf("warp bench hash measures the GPU against a GPU baseline (--backend cpu runs its CPU variants): %w", err)
	}
	if dev == nil {
		b := &hashBench{ctx: ctx, reps: 1, quick: true, layout: layout}
		return b.runCPU(w, order, *minLog, *maxLog, *asJSON, *jsonOut, *plotDir)
	}
	defer dev.Close()
	if *quick {
		mixSizes = []int{1 << 20}
	}
	p := dev.Properties()
	b := &hashBench{ctx: ctx, dev: dev, reps: *reps, quick: *quick, layout: layout}
	if *quick {
		b.reps = 1
	}
	b.rep = benchfmt.NewReport("warp bench hash: slab hash (32-bit keys and values, layout "+layout.String()+") vs static open addressing",
		fmt.Sprintf("%s (cc %s, %d SMs, %.0f GiB), driver CUDA %s", p.Name, p.ComputeCapability(), p.Multiprocessors,
			float64(p.TotalMemory)/(1<<30), p.DriverVersionString()))
	if !*asJSON {
		b.rep.Stream(w) // rows appear as measured: a run cut short keeps them
	}
	steps := map[string]func() error{
		"overhead": b.overhead,
		"layouts":  b.layouts,
		"fig4":     b.fig4,
		"fig5":     func() error { return b.fig5(*minLog, *maxLog) },
		"fig6":     b.fig6,
		"fig7":     func() error { return b.fig7(mixSizes, utils) },
		"alloc":    b.alloc,
	}
	if err := b.warmUp(); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	// An experiment that fails is reported and the others still run (a
	// device run is scarce); the command fails at the end.
	var failed []error
	for _, name := range order {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := steps[name](); err != nil {
			b.rep.Note("%s FAILED: %v", name, err)
			failed = append(failed, fmt.Errorf("%s: %w", name, err))
		}
	}
	b.rep.Note("Rates are operations per second of wall time for synchronous calls on device-resident data (median of %d).", b.reps)
	b.rep.Note("Baseline: static open-addressing table, one 8-byte slot per pair, linear probing, one thread per operation,")
	b.rep.Note("  sized to the slab hash's memory footprint (bucket heads + allocated slabs) measured in the same run.")
	b.rep.Note("Mixes: the baseline runs the same batches (its deletes leave tombstones, as the slab hash's do) on a table")
	b.rep.Note("  built with the same keys at the same footprint; 'x blend' is the older yardstick, the baseline's bulk rates")
	b.rep.Note("  (2^22-key calls) blended by the mix with deletes at the insert rate. Targets use the measured mix.")
	b.rep.Note("Utilization = bytes of the pairs / bytes of the slabs in use (the paper's definition).")
	if len(b.misses) == 0 {
		b.rep.Note("Targets (find, insert >= 0.8x and Γ1 >= 0.6x the baseline at 60%%, 2^22-2^26 keys; >= 5 G allocations/s): all met in the rows measured.")
	} else {
		b.rep.Note("Targets missed: %s.", strings.Join(b.misses, "; "))
	}
	if len(b.enlarged) > 0 {
		b.rep.Note("The static table of these mixes was enlarged beyond the footprint to hold the mix's inserts and tombstones")
		b.rep.Note("  at 90%% load at most (open addressing cannot run them at that footprint): %s.", strings.Join(b.enlarged, "; "))
	}
	return b.finish(w, *asJSON, *jsonOut, *plotDir, failed)
}

// finish writes the plots and the JSON file if asked to, then prints the
// report; the experiments that failed make it fail.
func (b *hashBench) finish(w io.Writer, asJSON bool, jsonOut, plotDir string, failed []error) error {
	if plotDir != "" {
		if _, err := benchplot.Write(b.rep, plotDir); err != nil {
			return err
		}
	}
	if jsonOut != "" {
		f, err := os.Create(jsonOut)
		if err != nil {
			return err
		}
		if err := errors.Join(b.rep.Print(f, true), f.Close()); err != nil {
			return err
		}
	}
	return errors.Join(append([]error{b.rep.Print(w, asJSON)}, failed...)...)
}

// warmUp runs every kernel the experiments time once, so module loading and
// first-launch costs stay out of the measurements.
func (b *hashBench) warmUp() error {
	d, err := b.data(1 << 16)
	if err != nil {
		return err
	}
	defer d.free()
	for _, l := range []slabhash.Layout{b.layout, slabhash.LayoutPaper, slabhash.LayoutTile16, slabhash.LayoutTile8} {
		s, m, err := b.measureSlab(d, l, 0.6, 0)
		if err != nil {
			return err
		}
		base, err := b.measureBase(d, s.footprint)
		if err != nil {
			m.Close()
			return err
		}
		_, err = b.mixed(m, d, [4]float64{0.2, 0.2, 0.3, 0.3}, s.footprint, base)
		m.Close()
		if err != nil {
			return err
		}
	}
	out, err := cuda.Alloc[uint32](b.dev, 1<<16)
	if err != nil {
		return err
	}
	defer out.Free()
	p, err := slaballoc.New(slaballoc.Options{Backend: warpkit.CUDA, Device: b.dev, UnitBytes: 64})
	if err != nil {
		return err
	}
	defer p.Close()
	bump, err := slaballoc.NewBump(b.dev)
	if err != nil {
		return err
	}
	defer bump.Close()
	return errors.Join(p.AllocateDeviceTile(b.ctx, out, 8), p.FreeDevice(b.ctx, out), p.AllocateDeviceBulk(b.ctx, out),
		bump.Allocate(b.ctx, out))
}

// Keys returns n distinct non-reserved keys: a bijective mix of the
// indices [from, from+n), so disjoint index ranges give disjoint key sets.
func Keys(from, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = hashKey(from + i)
	}
	return out
}

// hashKey is the key of index i (below 2^31).
func hashKey(i int) uint32 {
	k := benchfmt.Mix32(uint32(i))
	if slabhash.IsReserved(k) {
		k = benchfmt.Mix32(uint32(i) | 1<<31) // outside every index range used here
	}
	return k
}

// hashData is one size's device-resident keys: the n present keys with
// their values, and n absent keys.
type hashData struct {
	n               int
	keys, vals, out cuda.Slice[uint32]
	absent          cuda.Slice[uint32]
	res             cuda.Slice[uint8]
}

func (b *hashBench) data(n int) (*hashData, error) {
	d := &hashData{n: n}
	var err error
	if d.keys, err = cuda.FromHost(b.dev, Keys(0, n)); err != nil {
		return nil, err
	}
	vals := make([]uint32, n)
	for i := range vals {
		vals[i] = uint32(i) + 1
	}
	if d.vals, err = cuda.FromHost(b.dev, vals); err != nil {
		d.free()
		return nil, err
	}
	if d.absent, err = cuda.FromHost(b.dev, Keys(n, n)); err != nil {
		d.free()
		return nil, err
	}
	if d.out, err = cuda.Alloc[uint32](b.dev, n); err != nil {
		d.free()
		return nil, err
	}
	if d.res, err = cuda.Alloc[uint8](b.dev, n); err != nil {
		d.free()
		return nil, err
	}
	return d, nil
}

func (d *hashData) free() {
	for _, s := range []cuda.Slice[uint32]{d.keys, d.vals, d.out, d.absent} {
		s.Free()
	}
	d.res.Free()
}

// CountFound counts the slabhash.Found results in res: the benchmarks check
// their answers.
func CountFound(res cuda.Slice[uint8]) (int, error) {
	h, err := res.ToHost()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range h {
		if slabhash.Result(r) == slabhash.Found {
			n++
		}
	}
	return n, nil
}

func (b *hashBench) median(f func() (time.Duration, error)) (time.Duration, error) {
	var ds []time.Duration
	for i := 0; i < b.reps; i++ {
		d, err := f()
		if err != nil {
			return 0, err
		}
		ds = append(ds, d)
	}
	slices.Sort(ds)
	return ds[len(ds)/2], nil
}

func hashTime(f func() error) (time.Duration, error) {
	start := time.Now()
	err := f()
	return time.Since(start), err
}

// slabRates are one configuration's measurements.
type slabRates struct {
	util, build, findAll, findNone float64 // utilization; rates in ops/s
	buckets                        int
	footprint                      int64
}

// measureSlab builds a fresh table reps times (median build rate), then
// times finds of present and absent keys on the last one, checking the
// answers. The table is returned open for further use.
func (b *hashBench) measureSlab(d *hashData, layout slabhash.Layout, util float64, buckets int) (slabRates, *slabhash.Map[uint32, uint32], error) {
	var r slabRates
	var m *slabhash.Map[uint32, uint32]
	open := func() error {
		if m != nil {
			m.Close()
		}
		var err error
		m, err = slabhash.NewMap[uint32, uint32](slabhash.Options{Backend: warpkit.CUDA, Device: b.dev, ExpectedSize: d.n,
			Utilization: util, Buckets: buckets, Layout: layout})
		return err
	}
	build, err := b.median(func() (time.Duration, error) {
		if err := open(); err != nil {
			return 0, err
		}
		return hashTime(func() error { return m.InsertDevice(b.ctx, d.keys, d.vals, d.res) })
	})
	if err != nil {
		if m != nil {
			m.Close()
		}
		return r, nil, err
	}
	fail := func(err error) (slabRates, *slabhash.Map[uint32, uint32], error) {
		m.Close()
		return r, nil, err
	}
	st, err := m.Stats(b.ctx)
	if err != nil {
		return fail(err)
	}
	if st.Len != d.n {
		return fail(fmt.Errorf("the slab hash holds %d keys after inserting %d", st.Len, d.n))
	}
	r.util, r.buckets, r.footprint = st.Utilization, st.Buckets, st.MemoryBytes
	r.build = float64(d.n) / build.Seconds()
	for _, q := range []struct {
		keys  cuda.Slice[uint32]
		rate  *float64
		found int
	}{{d.keys, &r.findAll, d.n}, {d.absent, &r.findNone, 0}} {
		t, err := b.median(func() (time.Duration, error) {
			return hashTime(func() error { return m.LookupDevice(b.ctx, q.keys, d.out, d.res) })
		})
		if err != nil {
			return fail(err)
		}
		if got, err := CountFound(d.res); err != nil || got != q.found {
			return fail(fmt.Errorf("find reported %d keys found, want %d (%v)", got, q.found, err))
		}
		*q.rate = float64(d.n) / t.Seconds()
	}
	return r, m, nil
}

// baseRates are the static table's measurements at a footprint.
type baseRates struct{ build, findAll, findNone float64 }

func (b *hashBench) measureBase(d *hashData, footprint int64) (baseRates, error) {
	var r baseRates
	capacity := int(footprint / 8)
	if capacity < d.n+1 {
		capacity = d.n + 1
	}
	t, err := oahash.New(b.dev, capacity)
	if err != nil {
		return r, err
	}
	defer t.Close()
	build, err := b.median(func() (time.Duration, error) {
		if err := t.Clear(); err != nil {
			return 0, err
		}
		return hashTime(func() error { return t.Insert(d.keys, d.vals) })
	})
	if err != nil {
		return r, err
	}
	r.build = float64(d.n) / build.Seconds()
	for _, q := range []struct {
		keys cuda.Slice[uint32]
		rate *float64
	}{{d.keys, &r.findAll}, {d.absent, &r.findNone}} {
		ft, err := b.median(func() (time.Duration, error) { return hashTime(func() error { return t.Find(q.keys, d.out) }) })
		if err != nil {
			return r, err
		}
		*q.rate = float64(d.n) / ft.Seconds()
	}
	return r, nil
}

// targetCell judges the 60% rows of 2^22+ keys against the targets.
func (b *hashBench) targetCell(where string, n int, util float64, s slabRates, base baseRates) string {
	if n < 1<<22 || util != 0.6 {
		return "-"
	}
	var miss []string
	if x := s.build / base.build; x < hashTargetInsert {
		miss = append(miss, fmt.Sprintf("insert %.2fx<%.1f", x, hashTargetInsert))
	}
	for _, c := range []struct {
		name string
		x    float64
	}{{"find-all", s.findAll / base.findAll}, {"find-none", s.findNone / base.findNone}} {
		if c.x < hashTargetFind {
			miss = append(miss, fmt.Sprintf("%s %.2fx<%.1f", c.name, c.x, hashTargetFind))
		}
	}
	if len(miss) == 0 {
		return "met"
	}
	b.misses = append(b.misses, fmt.Sprintf("%s n=2^%d: %s", where, log2(n), strings.Join(miss, ", ")))
	return "MISSED " + strings.Join(miss, ", ")
}

func log2(n int) int {
	l := 0
	for 1<<l < n {
		l++
	}
	return l
}

const gops = 1e9

// layouts compares the slab layouts at n = 2^22 and 60% (the choice of the
// default), with the 64-bit map for reference.
func (b *hashBench) layouts() error {
	n := 1 << 22
	if b.quick {
		n = 1 << 20
	}
	d, err := b.data(n)
	if err != nil {
		return err
	}
	defer d.free()
	tab := b.rep.Table(fmt.Sprintf("Slab layouts, 32-bit keys and values, n = 2^%d, 60%% target utilization (G ops/s; x = vs baseline)", log2(n)),
		"layout", "slab", "util", "build", "x", "find all", "x", "find none", "x", "Γ1 mix", "x")
	for _, l := range []slabhash.Layout{slabhash.LayoutPaper, slabhash.LayoutTile16, slabhash.LayoutTile8} {
		s, m, err := b.measureSlab(d, l, 0.6, 0)
		if err != nil {
			return fmt.Errorf("%s: %w", l, err)
		}
		st, _ := m.Stats(b.ctx)
		base, err := b.measureBase(d, s.footprint)
		if err != nil {
			m.Close()
			return err
		}
		mx, err := b.mixed(m, d, [4]float64{0.2, 0.2, 0.3, 0.3}, s.footprint, base)
		m.Close()
		if err != nil {
			return err
		}
		tab.Add(l.String(), fmt.Sprintf("%d B", st.SlabBytes), s.util, s.build/gops, s.build/base.build, s.findAll/gops,
			s.findAll/base.findAll, s.findNone/gops, s.findNone/base.findNone, mx.slab/gops, mx.slab/mx.static)
	}
	return nil
}

// fig4 sweeps the memory utilization at n = 2^22 (the paper's Fig. 4).
func (b *hashBench) fig4() error {
	n := 1 << 22
	utils := []float64{0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8}
	if b.quick {
		n, utils = 1<<20, []float64{0.3, 0.6, 0.8}
	}
	d, err := b.data(n)
	if err != nil {
		return err
	}
	defer d.free()
	tab := b.rep.Table(fmt.Sprintf("Fig. 4: build and search vs memory utilization, n = 2^%d (G ops/s; x = vs baseline at the same footprint)", log2(n)),
		"target", "util", "buckets", "build", "x", "find all", "x", "find none", "x", "base build", "base all", "base none", "targets")
	for _, u := range utils {
		s, m, err := b.measureSlab(d, b.layout, u, 0)
		if err != nil {
			return fmt.Errorf("utilization %.1f: %w", u, err)
		}
		m.Close()
		base, err := b.measureBase(d, s.footprint)
		if err != nil {
			return err
		}
		tab.Add(u, s.util, s.buckets, s.build/gops, s.build/base.build, s.findAll/gops, s.findAll/base.findAll,
			s.findNone/gops, s.findNone/base.findNone, base.build/gops, base.findAll/gops, base.findNone/gops,
			b.targetCell("Fig. 4", n, u, s, base))
	}
	return nil
}

// fig5 sweeps n at 60% utilization (the paper's Fig. 5).
func (b *hashBench) fig5(minLog, maxLog int) error {
	lo, hi := minLog, maxLog
	if b.quick {
		hi = min(hi, 22)
	}
	tab := b.rep.Table("Fig. 5: build and search vs n, 60% target utilization (G ops/s; x = vs baseline at the same footprint)",
		"n", "util", "build", "x", "find all", "x", "find none", "x", "base build", "base all", "base none", "targets")
	for l := lo; l <= hi; l += 1 {
		if b.quick && l%2 == 1 {
			continue
		}
		n := 1 << l
		d, err := b.data(n)
		if err != nil {
			return err
		}
		s, m, err := b.measureSlab(d, b.layout, 0.6, 0)
		if err != nil {
			d.free()
			return fmt.Errorf("n=2^%d: %w", l, err)
		}
		m.Close()
		base, err := b.measureBase(d, s.footprint)
		d.free()
		if err != nil {
			return err
		}
		tab.Add(fmt.Sprintf("2^%d", l), s.util, s.build/gops, s.build/base.build, s.findAll/gops, s.findAll/base.findAll,
			s.findNone/gops, s.findNone/base.findNone, base.build/gops, base.findAll/gops, base.findNone/gops,
			b.targetCell("Fig. 5", n, 0.6, s, base))
	}
	return nil
}

// fig6 inserts batches into one slab hash until 2M keys, against
// rebuilding the static table (at 65% load) after every batch (Fig. 6).
func (b *hashBench) fig6() error {
	total := 1 << 21
	if b.quick {
		total = 1 << 19
	}
	d, err := b.data(total)
	if err != nil {
		return err
	}
	defer d.free()
	tab := b.rep.Table(fmt.Sprintf("Fig. 6: incremental batches up to %d keys, final utilization 65%%: cumulative time (ms)", total),
		"batch", "batches", "slab hash", "static rebuilds", "speedup", "slab final util")
	for _, batch := range []int{32 << 10, 64 << 10, 128 << 10} {
		m, err := slabhash.NewMap[uint32, uint32](slabhash.Options{Backend: warpkit.CUDA, Device: b.dev, ExpectedSize: total,
			Utilization: 0.65, Layout: b.layout})
		if err != nil {
			return err
		}
		var slab, static time.Duration
		for lo := 0; lo < total; lo += batch {
			hi := min(total, lo+batch)
			t, err := hashTime(func() error {
				return m.InsertDevice(b.ctx, d.keys.Sub(lo, hi), d.vals.Sub(lo, hi), d.res.Sub(lo, hi))
			})
			if err != nil {
				m.Close()
				return err
			}
			slab += t
			st, err := oahash.New(b.dev, int(float64(hi)/0.65)+1)
			if err != nil {
				m.Close()
				return err
			}
			t, err = hashTime(func() error {
				if err := st.Clear(); err != nil {
					return err
				}
				return st.Insert(d.keys.Sub(0, hi), d.vals.Sub(0, hi))
			})
			st.Close()
			if err != nil {
				m.Close()
				return err
			}
			static += t
		}
		s, err := m.Stats(b.ctx)
		m.Close()
		if err != nil {
			return err
		}
		tab.Add(fmt.Sprintf("%dk", batch>>10), (total+batch-1)/batch, float64(slab.Microseconds())/1e3,
			float64(static.Microseconds())/1e3, static.Seconds()/slab.Seconds(), s.Utilization)
	}
	return nil
}

// mixBatch is one batch of a concurrent mix, on the device (in Go slices on
// the CPU backend).
type mixBatch struct {
	ops        cuda.Slice[uint8]
	keys, vals cuda.Slice[uint32]
	hostOps    []slabhash.Op // the batch in Go slices (CPU backend only)
	hostKeys   []uint32
	hostVals   []uint32
	present    int // finds of present keys: the Found results to expect
	inserts    int // inserts of new keys
}

// mixBatches builds the batches of the operation distribution g = (new
// inserts, deletes of present keys, finds of present keys, finds of absent
// keys), batches of n/4 elements shuffled together, for a table that holds
// d's n keys before the first one; the present keys follow the batches'
// inserts and deletes.
func (b *hashBench) mixBatches(d *hashData, g [4]float64) ([]mixBatch, func(), error) {
	const batches = 4
	size := d.n / 4
	rng := rand.New(rand.NewPCG(uint64(d.n), 5))
	present := Keys(0, d.n)
	fresh := 4 * d.n // index ranges for new and absent keys
	var out []mixBatch
	free := func() {
		for _, mb := range out {
			mb.ops.Free()
			mb.keys.Free()
			mb.vals.Free()
		}
	}
	for it := 0; it < batches; it++ {
		ops := make([]uint8, size)
		keys := make([]uint32, size)
		vals := make([]uint32, size)
		counts := [4]int{int(g[0] * float64(size)), int(g[1] * float64(size)), int(g[2] * float64(size))}
		counts[3] = size - counts[0] - counts[1] - counts[2]
		i := 0
		var inserted []uint32
		for c := 0; c < counts[0]; c++ { // new keys
			k := hashKey(fresh)
			fresh++
			ops[i], keys[i], vals[i] = uint8(slabhash.OpInsert), k, uint32(i)
			inserted = append(inserted, k)
			i++
		}
		for c := 0; c < counts[1]; c++ { // deletes of present keys
			j := rng.IntN(len(present))
			ops[i], keys[i] = uint8(slabhash.OpDelete), present[j]
			present[j] = present[len(present)-1]
			present = present[:len(present)-1]
			i++
		}
		for c := 0; c < counts[2]; c++ { // finds of present keys
			ops[i], keys[i] = uint8(slabhash.OpFind), present[rng.IntN(len(present))]
			i++
		}
		absent := Keys(1<<30+it*size, counts[3])
		for c := 0; c < counts[3]; c++ { // finds of absent keys
			ops[i], keys[i] = uint8(slabhash.OpFind), absent[c]
			i++
		}
		present = append(present, inserted...)
		rng.Shuffle(size, func(a, b int) {
			ops[a], ops[b] = ops[b], ops[a]
			keys[a], keys[b] = keys[b], keys[a]
			vals[a], vals[b] = vals[b], vals[a]
		})
		var mb mixBatch
		var err error
		mb.present, mb.inserts = counts[2], counts[0]
		if b.dev == nil { // CPU backend: the batch stays in Go slices
			mb.hostOps, mb.hostKeys, mb.hostVals = make([]slabhash.Op, size), keys, vals
			for i, op := range ops {
				mb.hostOps[i] = slabhash.Op(op)
			}
			out = append(out, mb)
			continue
		}
		if mb.ops, err = cuda.FromHost(b.dev, ops); err == nil {
			if mb.keys, err = cuda.FromHost(b.dev, keys); err == nil {
				mb.vals, err = cuda.FromHost(b.dev, vals)
			}
		}
		out = append(out, mb)
		if err != nil {
			free()
			return nil, nil, err
		}
	}
	return out, free, nil
}

// mixRates are one mix's measurements: the slab hash's rate, the rate of
// the static baseline running the same batches, the older blended yardstick
// (the baseline's bulk rates weighted by the mix, deletes at the insert
// rate), and the pool growth steps and reruns inside the timed slab hash
// calls.
type mixRates struct {
	slab, static, blended float64
	grows, reruns         int64
	staticScale           float64 // the static table's bytes over the footprint (1 unless enlarged)
}

// mixed runs the batches of distribution g on m, whose first d.n keys are
// present, then the same batches on a static table built with those keys at
// the slab hash's footprint. Both check their Found counts.
func (b *hashBench) mixed(m *slabhash.Map[uint32, uint32], d *hashData, g [4]float64, footprint int64, base baseRates) (mixRates, error) {
	var r mixRates
	batches, free, err := b.mixBatches(d, g)
	if err != nil {
		return r, err
	}
	defer free()
	before, err := m.Stats(b.ctx)
	if err != nil {
		return r, err
	}
	check := func(what string, res cuda.Slice[uint8], want int) error {
		if got, err := CountFound(res); err != nil || got != want {
			return fmt.Errorf("%s: mixed batch found %d of %d present keys (%v)", what, got, want, err)
		}
		return nil
	}
	var slabT, staticT time.Duration
	for _, mb := range batches {
		res := d.res.Sub(0, mb.keys.Len())
		t, err := hashTime(func() error { return m.ApplyDevice(b.ctx, mb.ops, mb.keys, mb.vals, res) })
		if err != nil {
			return r, err
		}
		slabT += t
		if err := check("slab hash", res, mb.present); err != nil {
			return r, err
		}
	}
	after, err := m.Stats(b.ctx)
	if err != nil {
		return r, err
	}
	r.grows, r.reruns = after.PoolGrowths-before.PoolGrowths, after.Reruns-before.Reruns
	// Every key inserted, and every tombstone, holds a slot of the static
	// table to the end: it gets the footprint, or enough for those at 90%.
	slots := d.n
	for _, mb := range batches {
		slots += mb.inserts
	}
	capacity := max(int(footprint/8), slots*10/9+1)
	r.staticScale = float64(capacity) * 8 / float64(footprint)
	st, err := oahash.New(b.dev, capacity)
	if err != nil {
		return r, err
	}
	defer st.Close()
	if err := st.Insert(d.keys, d.vals); err != nil {
		return r, err
	}
	for _, mb := range batches {
		res := d.res.Sub(0, mb.keys.Len())
		t, err := hashTime(func() error { return st.Apply(mb.ops, mb.keys, mb.vals, res) })
		if err != nil {
			return r, err
		}
		staticT += t
		if err := check("static table", res, mb.present); err != nil {
			return r, err
		}
	}
	n := float64(len(batches) * batches[0].keys.Len())
	r.slab, r.static = n/slabT.Seconds(), n/staticT.Seconds()
	r.blended = 1 / ((g[0]+g[1])/base.build + g[2]/base.findAll + g[3]/base.findNone)
	return r, nil
}

// fig7 measures the concurrent mixes Γ0-Γ2 against the initial utilization
// (the paper's Fig. 7a), one table per size.
// A size that fails is reported and the others still run.
func (b *hashBench) fig7(sizes []int, utils []float64) error {
	var errs []error
	for _, n := range sizes {
		if err := b.fig7At(n, utils); err != nil {
			errs = append(errs, fmt.Errorf("fig. 7a, n = %d: %w", n, err))
		}
	}
	return errors.Join(errs...)
}

func (b *hashBench) fig7At(n int, utils []float64) error {
	d, err := b.data(n)
	if err != nil {
		return err
	}
	defer d.free()
	mixes := []struct {
		name string
		g    [4]float64
	}{{"Γ0", [4]float64{0.5, 0.5, 0, 0}}, {"Γ1", [4]float64{0.2, 0.2, 0.3, 0.3}}, {"Γ2", [4]float64{0.1, 0.1, 0.4, 0.4}}}
	tab := b.rep.Table(fmt.Sprintf("Fig. 7a: concurrent mixes, %d keys built, 4 batches of n/4 mixed operations, one kernel each (G ops/s; x = vs the static table running the same batches)", n),
		"target util", "util", "Γ0", "x", "Γ1", "x", "Γ2", "x", "Γ1 static", "Γ1 x blend", "Γ1 grows", "targets")
	for _, u := range utils {
		row := []any{u}
		var g1 mixRates
		for i, mx := range mixes {
			s, m, err := b.measureSlab(d, b.layout, u, 0)
			if err != nil {
				return err
			}
			if i == 0 {
				row = append(row, s.util)
			}
			base, err := b.measureBase(d, s.footprint)
			if err != nil {
				m.Close()
				return err
			}
			r, err := b.mixed(m, d, mx.g, s.footprint, base)
			m.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", mx.name, err)
			}
			if r.staticScale > 1.001 {
				b.enlarged = append(b.enlarged, fmt.Sprintf("util %.2f %s x%.2f", u, mx.name, r.staticScale))
			}
			row = append(row, r.slab/gops, r.slab/r.static)
			if i == 1 {
				g1 = r
			}
		}
		row = append(row, g1.static/gops, g1.slab/g1.blended, g1.grows)
		cell := "-"
		if u == 0.6 && n >= 1<<22 {
			cell = "met"
			if x := g1.slab / g1.static; x < hashTargetMixed {
				cell = fmt.Sprintf("MISSED Γ1 %.2fx<%.1f", x, hashTargetMixed)
				b.misses = append(b.misses, fmt.Sprintf("Fig. 7a n=2^%d: %s", bits.Len(uint(n))-1, cell[7:]))
			}
		}
		tab.Add(append(row, cell)...)
	}
	return nil
}

// overhead measures the cost of one call: batches of one element (a find,
// an insert and a mixed batch) on a small table, against the static table's
// calls. It is the floor under every rate at small n.
func (b *hashBench) overhead() error {
	const calls = 300
	d, err := b.data(1 << 16)
	if err != nil {
		return err
	}
	defer d.free()
	s, m, err := b.measureSlab(d, b.layout, 0.6, 0)
	if err != nil {
		return err
	}
	defer m.Close()
	st, err := oahash.New(b.dev, int(s.footprint/8))
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.Insert(d.keys, d.vals); err != nil {
		return err
	}
	ops, err := cuda.FromHost(b.dev, []uint8{uint8(slabhash.OpFind)})
	if err != nil {
		return err
	}
	defer ops.Free()
	k, v, out, res := d.keys.Sub(0, 1), d.vals.Sub(0, 1), d.out.Sub(0, 1), d.res.Sub(0, 1)
	perCall := func(f func() error) (float64, error) {
		t, err := b.median(func() (time.Duration, error) {
			return hashTime(func() error {
				for i := 0; i < calls; i++ {
					if err := f(); err != nil {
						return err
					}
				}
				return nil
			})
		})
		return float64(t.Microseconds()) / calls, err
	}
	tab := b.rep.Table(fmt.Sprintf("Call overhead: µs per synchronous call of one element (median of %d runs of %d calls)", b.reps, calls),
		"call", "slab hash", "static table")
	for _, c := range []struct {
		name       string
		slab, base func() error
	}{
		{"find", func() error { return m.LookupDevice(b.ctx, k, out, res) }, func() error { return st.Find(k, out) }},
		{"insert", func() error { return m.InsertDevice(b.ctx, k, v, res) }, func() error { return st.Insert(k, v) }},
		{"mixed", func() error { return m.ApplyDevice(b.ctx, ops, k, out, res) }, func() error { return st.Apply(ops, k, out, res) }},
	} {
		a, err := perCall(c.slab)
		if err != nil {
			return err
		}
		z, err := perCall(c.base)
		if err != nil {
			return err
		}
		tab.Add(c.name, a, z)
	}
	return nil
}

// alloc measures SlabAlloc allocations and frees per second, one unit per
// thread, against a bump-pointer allocator (one atomicAdd each, no reuse).
func (b *hashBench) alloc() error {
	n := 1 << 24
	if b.quick {
		n = 1 << 22
	}
	out, err := cuda.Alloc[uint32](b.dev, n)
	if err != nil {
		return err
	}
	defer out.Free()
	tab := b.rep.Table(fmt.Sprintf("SlabAlloc: %d allocations of 64-byte units, one per thread (G/s; x = vs bump-pointer atomicAdd)", n),
		"allocator", "allocate", "x", "free", "reallocate", "x", "target")
	bumper, err := slaballoc.NewBump(b.dev)
	if err != nil {
		return err
	}
	defer bumper.Close()
	bump, err := b.median(func() (time.Duration, error) {
		return hashTime(func() error { return bumper.Allocate(b.ctx, out) })
	})
	if err != nil {
		return err
	}
	bumpRate := float64(n) / bump.Seconds()
	for _, tile := range []int{32, 8, 0} {
		var alloc, free, again time.Duration
		for r := 0; r < b.reps; r++ {
			p, err := slaballoc.New(slaballoc.Options{Backend: warpkit.CUDA, Device: b.dev, UnitBytes: 64,
				BlocksPerSuperBlock: 16384, InitialSuperBlocks: max(1, 2*n/(16384*1024))})
			if err != nil {
				return err
			}
			step := func(acc *time.Duration, f func() error) error {
				t, err := hashTime(f)
				*acc += t
				return err
			}
			allocate := func() error {
				if tile == 0 {
					return p.AllocateDeviceBulk(b.ctx, out)
				}
				return p.AllocateDeviceTile(b.ctx, out, tile)
			}
			err = errors.Join(
				step(&alloc, allocate),
				step(&free, func() error { return p.FreeDevice(b.ctx, out) }),
				step(&again, allocate),
			)
			st, serr := p.Stats(b.ctx)
			p.Close()
			if err != nil {
				return err
			}
			if serr != nil || st.Allocated != int64(n) {
				return fmt.Errorf("pool reports %d allocated units after reallocating %d (%v)", st.Allocated, n, serr)
			}
		}
		per := func(d time.Duration) float64 { return float64(n*b.reps) / d.Seconds() }
		name := map[int]string{32: "warp, one per atomic (paper)", 8: "8-lane tile, one per atomic", 0: "warp, bulk (one atomic per word)"}[tile]
		cell := "met"
		if per(alloc) < hashTargetAlloc {
			cell = fmt.Sprintf("MISSED %.2f<5 G/s", per(alloc)/gops)
			b.misses = append(b.misses, "SlabAlloc "+name+": "+cell[7:])
		}
		tab.Add(name, per(alloc)/gops, per(alloc)/bumpRate, per(free)/gops, per(again)/gops, per(again)/bumpRate, cell)
	}
	tab.Add("bump pointer", bumpRate/gops, 1.0, "-", "-", "-", "-")
	return nil
}
