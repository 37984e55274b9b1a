// Package lsmbench is warp bench lsm: the GPU LSM against the GPU sorted
// array (IPDPS'18 Tables II-IV, Fig. 4b, cleanup, status layout), or the same
// experiments on the CPU backend at small sizes (the driver-call overhead
// needs a GPU). cmd/warp dispatches to Run.
package lsmbench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"image/color"
	"io"
	"maps"
	"math"
	"math/bits"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/benchfmt"
	"github.com/warpkit/warpkit/internal/benchfmt/benchplot"
	"github.com/warpkit/warpkit/internal/cli"
	"github.com/warpkit/warpkit/lsm"
	"github.com/warpkit/warpkit/prim"
	"github.com/warpkit/warpkit/sortedarray"
)

// Summary is the line warp bench -h prints for lsm.
const Summary = "GPU LSM vs sorted array: insertion (Table II, Fig. 4b), lookup (Table III), count/range (Table IV), cleanup, status layout"

// Targets from the issue: LSM against the sorted array measured in the same run.
const (
	targetInsertVsSA = 10.0
	targetLookupVsSA = 0.6
	targetCountVsSA  = 0.6
)

type lsmBench struct {
	ctx      context.Context
	dev      *cuda.Device
	rep      *benchfmt.Report
	keys     arr[uint32] // distinct pseudo-random keys: Mix32 of the index
	vals     arr[uint32]
	warmAt   int           // keys[warmAt:] are the warm-up keys, used by nothing else
	samples  int           // resident-batch counts r measured per batch size (all when fewer)
	saBudget time.Duration // per batch size, for the sorted array's Table II run
	plotPath string        // Fig. 4b's file (--plot FILE.png), or a directory of plots
	plotDir  bool          // plotPath is a directory: every table, and Fig. 4b as fig4b.png and .svg
	queries  map[int]int   // Table IV: queries per measurement at L = 8 and 1024
	series   []insertSeries
	summary  map[string][2]float64 // LSM and SA harmonic means per experiment
}

// insertSeries is one batch size's Fig. 4b curves.
type insertSeries struct {
	b        int
	lsm, sa  []float64 // effective rate (M elements/s) after each batch
	saCapped bool
}

// Run runs warp bench lsm with args (its flags) and writes the report to w.
func Run(ctx context.Context, args []string, w io.Writer) error {
	fs := cli.NewFlags("bench lsm", "[--sections insert,lookup,count,cleanup,layout] [--plot DIR] [--backend B] [--json] [flags]\n\n"+
		"Measures the LSM and the sorted array on a GPU (device-resident data). On the CPU backend (--backend cpu, or\n"+
		"auto without a device) it runs the same sections from Go slices at small sizes (2^20 elements inserted, 2^18\n"+
		"resident for the queries, fewer count/range queries); the overhead section (driver calls) needs a GPU.")
	ordinal := fs.Int("device", 0, "CUDA device ordinal")
	asJSON := fs.Bool("json", false, "print JSON")
	backend := warpkit.Auto
	fs.TextVar(&backend, "backend", warpkit.Auto, "backend: auto, cpu or cuda (auto: CUDA when a device is present)")
	sections := fs.String("sections", "overhead,insert,lookup,count,cleanup,layout", "experiments to run")
	plotPath := fs.String("plot", "", "write each table as a plot, `DIR`/<table>.png and .svg, and Fig. 4b (effective insertion rate vs elements, every batch) as DIR/fig4b.png and .svg; a name ending in .png writes only Fig. 4b, to that file")
	insLog := fs.Int("insert-log2n", 27, "Table II: elements inserted, 2^n (CPU backend: 20)")
	insBMin := fs.Int("insert-bmin", 15, "Table II: smallest batch size, 2^n (CPU backend: 12)")
	insBMax := fs.Int("insert-bmax", 22, "Table II: largest batch size, 2^n (CPU backend: 16)")
	saBudget := fs.Duration("sa-budget", 40*time.Second, "Table II: stop the sorted array's run for one batch size after this long (the LSM always runs to the end; CPU backend: 10s)")
	qLog := fs.Int("query-log2n", 24, "Tables III, IV: elements resident at the end, 2^n (CPU backend: 18)")
	lkBMin := fs.Int("lookup-bmin", 16, "Table III: smallest batch size, 2^n (CPU backend: 12)")
	lkBMax := fs.Int("lookup-bmax", 24, "Table III: largest batch size, 2^n (CPU backend: 16)")
	cntBMin := fs.Int("count-bmin", 16, "Table IV: smallest batch size, 2^n (CPU backend: 12)")
	cntBMax := fs.Int("count-bmax", 20, "Table IV: largest batch size, 2^n (CPU backend: 14)")
	cleanLog := fs.Int("cleanup-log2b", 20, "cleanup: batch size 2^n with 63 batches (and 2^(n-1) with 127); lookups after cleanup at 2^(n-2) with 127 batches (CPU backend: 14)")
	samples := fs.Int("samples", 16, "Tables III, IV: resident-batch counts r measured per batch size (all of 1..n/b when fewer)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	names := strings.Split(*sections, ",")
	for _, s := range names {
		if !slices.Contains([]string{"overhead", "insert", "lookup", "count", "cleanup", "layout"}, strings.TrimSpace(s)) {
			return fmt.Errorf("%w: unknown section %q (want overhead, insert, lookup, count, cleanup, layout)", cli.ErrUsage, s)
		}
	}
	dev, err := warpkit.OpenDevice(backend, *ordinal)
	if err != nil {
		return err
	}
	queries := map[int]int{8: 1 << 20, 1024: 1 << 14}
	if dev == nil {
		// The CPU backend's sizes, for the flags not given.
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for _, d := range []struct {
			name string
			p    *int
			v    int
		}{{"insert-log2n", insLog, 20}, {"insert-bmin", insBMin, 12}, {"insert-bmax", insBMax, 16}, {"query-log2n", qLog, 18},
			{"lookup-bmin", lkBMin, 12}, {"lookup-bmax", lkBMax, 16}, {"count-bmin", cntBMin, 12}, {"count-bmax", cntBMax, 14}, {"cleanup-log2b", cleanLog, 14}} {
			if !set[d.name] {
				*d.p = d.v
			}
		}
		if !set["sa-budget"] {
			*saBudget = 10 * time.Second
		}
		queries = map[int]int{8: 1 << 14, 1024: 1 << 8}
	}
	if *insBMin > *insBMax || *insBMax > *insLog || *lkBMax > *qLog || *cntBMax > *qLog || *insLog > 30 || *qLog > 28 || *samples < 2 || *cleanLog < 8 || *cleanLog > 22 {
		if dev != nil {
			dev.Close()
		}
		return fmt.Errorf("%w: inconsistent sizes", cli.ErrUsage)
	}
	b := &lsmBench{ctx: ctx, dev: dev, samples: *samples, saBudget: *saBudget, plotPath: *plotPath, queries: queries, summary: map[string][2]float64{}}
	b.plotDir = *plotPath != "" && !strings.HasSuffix(strings.ToLower(*plotPath), ".png")
	if dev != nil {
		defer dev.Close()
		b.rep = benchfmt.NewReport("warp bench lsm: GPU LSM vs GPU sorted array (uint32 keys and values, device-resident)", dev.Name())
	} else {
		b.rep = benchfmt.NewReport("warp bench lsm: LSM vs sorted array on the CPU backend (uint32 keys and values, Go slices)",
			fmt.Sprintf("CPU backend, %d logical CPUs, GOMAXPROCS %d", runtime.NumCPU(), runtime.GOMAXPROCS(0)))
	}
	nKeys := max(1<<*insLog, 2<<*qLog, 64<<*cleanLog)
	b.warmAt = nKeys
	if err := b.makeKeys(nKeys + 1<<max(*insBMax, *lkBMax, *cntBMax)); err != nil {
		return err
	}
	defer b.keys.Free()
	defer b.vals.Free()
	run := map[string]func() error{
		"overhead": b.overhead,
		"insert":   func() error { return b.insertion(*insLog, *insBMin, *insBMax) },
		"lookup":   func() error { return b.lookups(*qLog, *lkBMin, *lkBMax) },
		"count":    func() error { return b.countRange(*qLog, *cntBMin, *cntBMax) },
		"cleanup":  func() error { return b.cleanup(*cleanLog) },
		"layout":   b.statusLayout,
	}
	if dev == nil {
		run["overhead"] = func() error {
			b.rep.Note("overhead: needs a GPU (it times CUDA driver calls and the device sort and merge of an insertion)")
			return nil
		}
	}
	for _, s := range names {
		if err := run[strings.TrimSpace(s)](); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	b.targets()
	b.rep.Note("keys: mix32 of the index (distinct, uniformly spread); values: the index; rates in M elements (or queries)/s, wall-clock per call, each call synchronizes; mean = harmonic mean")
	if dev != nil {
		b.rep.Note("both structures reserve device memory for the whole run up front (Options.Capacity) and are warmed by one insert+delete (+cleanup for the LSM) of other keys before timing")
	} else {
		b.rep.Note("CPU backend: both structures reserve memory for the whole run up front (Options.Capacity) and are warmed by one insert+delete (+cleanup for the LSM) of other keys before timing; the targets are the GPU's, shown for reference")
	}
	if b.plotDir {
		if _, err := benchplot.Write(b.rep, b.plotPath); err != nil {
			return err
		}
	}
	if b.plotPath != "" && len(b.series) > 0 {
		paths := []string{b.plotPath}
		if b.plotDir {
			paths = []string{filepath.Join(b.plotPath, "fig4b.png"), filepath.Join(b.plotPath, "fig4b.svg")}
		}
		for _, path := range paths {
			if err := b.plot(path); err != nil {
				return err
			}
		}
		b.rep.Note("Fig. 4b written to %s", strings.Join(paths, " and "))
	}
	return b.rep.Print(w, *asJSON)
}

func (b *lsmBench) makeKeys(n int) error {
	keys, vals := make([]uint32, n), make([]uint32, n)
	for i := range keys {
		keys[i], vals[i] = benchfmt.Mix32(uint32(i)^0x5bd1e995), uint32(i)
	}
	var err1, err2 error
	b.keys, err1 = arrFrom(b, keys)
	b.vals, err2 = arrFrom(b, vals)
	return errors.Join(err1, err2)
}

// withPair runs f on a warmed LSM with batch size bs and a warmed sorted
// array, both reserving capacity entries, and closes both afterwards.
func (b *lsmBench) withPair(bs, capacity int, f func(l *lsm.LSM[uint32, uint32], a *sortedarray.SortedArray[uint32, uint32]) error) error {
	l, a, err := b.open(bs, capacity)
	if err != nil {
		return err
	}
	defer l.Close()
	defer a.Close()
	return f(l, a)
}

// open returns a warmed LSM with batch size bs and a warmed sorted array,
// both reserving capacity entries. The warm-up inserts and deletes bs keys
// from keys[warmAt:], which no experiment uses.
func (b *lsmBench) open(bs, capacity int) (*lsm.LSM[uint32, uint32], *sortedarray.SortedArray[uint32, uint32], error) {
	warm := b.keys.Sub(b.warmAt, b.warmAt+bs)
	l, err := lsm.New[uint32, uint32](lsm.Options{Backend: b.backend(), Device: b.dev, BatchSize: bs, Capacity: capacity})
	if err != nil {
		return nil, nil, err
	}
	a, err := sortedarray.New[uint32, uint32](sortedarray.Options{Backend: b.backend(), Device: b.dev, Capacity: capacity})
	if err != nil {
		l.Close()
		return nil, nil, err
	}
	for _, d := range []dict{l, a} {
		err = errors.Join(err, b.insert(d, warm, b.vals.Sub(0, warm.Len())), b.delete(d, warm))
	}
	if err = errors.Join(err, l.Compact(b.ctx)); err != nil {
		l.Close()
		a.Close()
		return nil, nil, err
	}
	st, err1 := l.Stats(b.ctx)
	n, err2 := a.Len(b.ctx)
	if err := errors.Join(err1, err2); err != nil || st.Batches != 0 || st.Staged != 0 || n != 0 {
		l.Close()
		a.Close()
		if err != nil {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("warm-up left entries behind: %+v, %d", st, n)
	}
	return l, a, nil
}

func timed(f func() error) (time.Duration, error) {
	start := time.Now()
	err := f()
	return time.Since(start), err
}

func mrate(n int, d time.Duration) float64 { return float64(n) / d.Seconds() / 1e6 }

func minMaxHmean(xs []float64) (float64, float64, float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	return slices.Min(xs), slices.Max(xs), benchfmt.HMean(xs)
}

// insertion reproduces Table II and Fig. 4b: n keys inserted in batches of bs
// into an empty LSM and an empty sorted array; the rate of every batch.
func (b *lsmBench) insertion(logN, bmin, bmax int) error {
	n := 1 << logN
	t := b.rep.Table(fmt.Sprintf("Table II: insertion rate (M elements/s) over all resident-batch counts r = 1..2^%d/b", logN),
		"b", "LSM min", "LSM max", "LSM mean", "SA min", "SA max", "SA mean", "SA batches", "LSM/SA mean")
	var lsmMeans, saMeans []float64
	for lb := bmax; lb >= bmin; lb-- {
		bs := 1 << lb
		nb := n / bs
		s := insertSeries{b: bs}
		var lr, sr []float64
		err := b.withPair(bs, n, func(l *lsm.LSM[uint32, uint32], a *sortedarray.SortedArray[uint32, uint32]) error {
			var err error
			if lr, s.lsm, _, err = b.insertAll(l, bs, nb, 0); err != nil {
				return err
			}
			sr, s.sa, s.saCapped, err = b.insertAll(a, bs, nb, b.saBudget)
			return err
		})
		if err != nil {
			return err
		}
		lmin, lmax, lmean := minMaxHmean(lr)
		smin, smax, smean := minMaxHmean(sr)
		t.Add(fmt.Sprintf("2^%d", lb), lmin, lmax, lmean, smin, smax, smean, fmt.Sprintf("%d/%d", len(sr), nb), benchfmt.Ratio(lmean, smean))
		lsmMeans, saMeans = append(lsmMeans, lmean), append(saMeans, smean)
		b.series = append(b.series, s)
	}
	lm, sm := benchfmt.HMean(lsmMeans), benchfmt.HMean(saMeans)
	t.Add("mean", "", "", lm, "", "", sm, "", benchfmt.Ratio(lm, sm))
	b.summary["insertion (Table II mean)"] = [2]float64{lm, sm}
	if slices.ContainsFunc(b.series, func(s insertSeries) bool { return s.saCapped }) {
		b.rep.Note("Table II: where SA batches < all, the sorted array's run was stopped after --sa-budget; its mean then omits its slowest (largest) batches, which flatters the sorted array")
	}

	// Fig. 4b, sampled: effective rate (elements resident / total time) at powers of two.
	f := b.rep.Table("Fig. 4b: effective insertion rate (M elements/s) after inserting N elements", "b", "N", "LSM", "SA", "LSM/SA")
	first := 20
	if b.dev == nil {
		first = max(10, logN-7) // the CPU backend's runs are smaller
	}
	for _, s := range slices.Backward(b.series) {
		for ln := first; ln <= logN; ln++ {
			i := (1<<ln)/s.b - 1
			if i < 0 || i >= len(s.lsm) {
				continue
			}
			sa := math.NaN()
			if i < len(s.sa) {
				sa = s.sa[i]
			}
			f.Add(fmt.Sprintf("2^%d", bits.Len(uint(s.b))-1), fmt.Sprintf("2^%d", ln), s.lsm[i], sa, benchfmt.Ratio(s.lsm[i], sa))
		}
	}
	return nil
}

// insertAll inserts the nb batches of bs keys into d and returns each batch's
// rate and the effective rate after each (elements inserted / total time). A
// positive budget stops the run once the total time exceeds it (capped).
func (b *lsmBench) insertAll(d dict, bs, nb int, budget time.Duration) (rates, effective []float64, capped bool, err error) {
	var cum time.Duration
	for i := range nb {
		if budget > 0 && cum > budget {
			return rates, effective, true, nil
		}
		if err := b.ctx.Err(); err != nil {
			return nil, nil, false, err
		}
		t, err := timed(func() error {
			return b.insert(d, b.keys.Sub(i*bs, (i+1)*bs), b.vals.Sub(i*bs, (i+1)*bs))
		})
		if err != nil {
			return nil, nil, false, err
		}
		cum += t
		rates = append(rates, mrate(bs, t))
		effective = append(effective, mrate((i+1)*bs, cum))
	}
	return rates, effective, false, nil
}

// sampleR returns the resident-batch counts to measure: all of 1..nb when
// there are at most k, else k values: 1, nb, nb-1 (most levels full), and
// the rest spread evenly.
func sampleR(nb, k int) []int {
	if nb <= k {
		r := make([]int, nb)
		for i := range r {
			r[i] = i + 1
		}
		return r
	}
	set := map[int]bool{1: true, nb: true, nb - 1: true}
	for i := 0; len(set) < k && i < k; i++ {
		set[1+(nb-1)*i/(k-1)] = true
	}
	for r := 2; len(set) < k; r++ {
		set[r] = true
	}
	r := make([]int, 0, len(set))
	for v := range set {
		r = append(r, v)
	}
	slices.Sort(r)
	return r
}

// build inserts batches into both structures until r batches are resident.
func (b *lsmBench) grow(l, a dict, bs, from, to int) error {
	for i := from; i < to; i++ {
		k, v := b.keys.Sub(i*bs, (i+1)*bs), b.vals.Sub(i*bs, (i+1)*bs)
		if err := errors.Join(b.insert(l, k, v), b.insert(a, k, v)); err != nil {
			return err
		}
	}
	return b.ctx.Err()
}

// lookups reproduces Table III: for every r, as many lookups as resident
// elements, none present (keys never inserted) or all present.
func (b *lsmBench) lookups(logN, bmin, bmax int) error {
	n := 1 << logN
	out, err := newArr[uint32](b, n)
	if err != nil {
		return err
	}
	defer out.Free()
	found, err := newFlags(b, n)
	if err != nil {
		return err
	}
	defer found.Free()
	t := b.rep.Table(fmt.Sprintf("Table III: lookup rate (M queries/s), n = r·b up to 2^%d, as many queries as elements", logN),
		"b", "r measured", "none: LSM min", "max", "mean", "SA mean", "LSM/SA", "all: LSM min", "max", "mean", "SA mean", "LSM/SA")
	var lNone, sNone, lAll, sAll []float64
	for lb := bmax; lb >= bmin; lb-- {
		bs := 1 << lb
		nb := n / bs
		var ln, sn, la, sa []float64
		rs := sampleR(nb, b.samples)
		err := b.withPair(bs, n, func(l *lsm.LSM[uint32, uint32], a *sortedarray.SortedArray[uint32, uint32]) error {
			r0 := 0
			for _, r := range rs {
				if err := b.grow(l, a, bs, r0, r); err != nil {
					return err
				}
				r0 = r
				q := r * bs
				for _, c := range []struct {
					d     dict
					keys  arr[uint32]
					rates *[]float64
				}{{a, b.keys.Sub(n, n+q), &sn}, {l, b.keys.Sub(n, n+q), &ln}, {a, b.keys.Sub(0, q), &sa}, {l, b.keys.Sub(0, q), &la}} {
					d, err := timed(func() error { return b.lookup(c.d, c.keys, out.Sub(0, q), found.Sub(0, q)) })
					if err != nil {
						return err
					}
					*c.rates = append(*c.rates, mrate(q, d))
				}
			}
			return expectFound(found.Sub(0, n), true) // the LSM's last "all present" run
		})
		if err != nil {
			return err
		}
		n0, n1, nm := minMaxHmean(ln)
		a0, a1, am := minMaxHmean(la)
		t.Add(fmt.Sprintf("2^%d", lb), fmt.Sprintf("%d of %d", len(rs), nb), n0, n1, nm, benchfmt.HMean(sn), benchfmt.Ratio(nm, benchfmt.HMean(sn)), a0, a1, am, benchfmt.HMean(sa), benchfmt.Ratio(am, benchfmt.HMean(sa)))
		lNone, sNone, lAll, sAll = append(lNone, nm), append(sNone, benchfmt.HMean(sn)), append(lAll, am), append(sAll, benchfmt.HMean(sa))
	}
	t.Add("mean", "", "", "", benchfmt.HMean(lNone), benchfmt.HMean(sNone), benchfmt.Ratio(benchfmt.HMean(lNone), benchfmt.HMean(sNone)), "", "", benchfmt.HMean(lAll), benchfmt.HMean(sAll), benchfmt.Ratio(benchfmt.HMean(lAll), benchfmt.HMean(sAll)))
	b.summary["lookup none (Table III mean)"] = [2]float64{benchfmt.HMean(lNone), benchfmt.HMean(sNone)}
	b.summary["lookup all (Table III mean)"] = [2]float64{benchfmt.HMean(lAll), benchfmt.HMean(sAll)}
	return nil
}

func expectFound(found flags, want bool) error {
	if found.onHost {
		for i, f := range found.host {
			if f != want {
				return fmt.Errorf("lookup %d: found = %v, want %v", i, f, want)
			}
		}
		return nil
	}
	h, err := found.dev.ToHost()
	if err != nil {
		return err
	}
	for i, f := range h {
		if (f == 1) != want {
			return fmt.Errorf("lookup %d: found = %d, want %v", i, f, want)
		}
	}
	return nil
}

// countRange reproduces Table IV: count and range queries whose ranges hold
// L resident elements on average, at L = 8 and 1024.
func (b *lsmBench) countRange(logN, bmin, bmax int) error {
	n := 1 << logN
	queries := b.queries
	t := b.rep.Table(fmt.Sprintf("Table IV: count and range rate (M queries/s), n = r·b up to 2^%d; L = expected elements per range", logN),
		"query", "L", "b", "r measured", "LSM min", "max", "mean", "SA mean", "LSM/SA")
	rng := rand.New(rand.NewPCG(4, 4))
	qmax := max(queries[8], queries[1024])
	lo, err1 := newArr[uint32](b, qmax)
	hi, err2 := newArr[uint32](b, qmax)
	counts, err3 := newArr[uint32](b, qmax)
	defer lo.Free()
	defer hi.Free()
	defer counts.Free()
	if err := errors.Join(err1, err2, err3); err != nil {
		return err
	}
	type key struct {
		query string
		L     int
	}
	means := map[key][2][]float64{}
	for lb := bmax; lb >= bmin; lb-- {
		bs := 1 << lb
		nb := n / bs
		rates := map[key][2][]float64{}
		rs := sampleR(nb, max(2, b.samples/2))
		err := b.withPair(bs, n, func(l *lsm.LSM[uint32, uint32], a *sortedarray.SortedArray[uint32, uint32]) error {
			r0 := 0
			for _, r := range rs {
				if err := b.grow(l, a, bs, r0, r); err != nil {
					return err
				}
				r0 = r
				for _, L := range []int{8, 1024} {
					q := queries[L]
					width := uint64(L) << 32 / uint64(r*bs)
					hl, hh := make([]uint32, q), make([]uint32, q)
					for i := range hl {
						hl[i] = rng.Uint32()
						hh[i] = uint32(min(uint64(hl[i])+width, math.MaxUint32))
					}
					if err := errors.Join(lo.Sub(0, q).CopyFromHost(hl), hi.Sub(0, q).CopyFromHost(hh)); err != nil {
						return err
					}
					for si, d := range []dict{l, a} {
						dc, err := timed(func() error { return b.count(d, lo.Sub(0, q), hi.Sub(0, q), counts.Sub(0, q)) })
						if err != nil {
							return err
						}
						dr, err := timed(func() error { return b.rangeQuery(d, lo.Sub(0, q), hi.Sub(0, q)) })
						if err != nil {
							return err
						}
						kc, kr := key{"count", L}, key{"range", L}
						x, y := rates[kc], rates[kr]
						x[si], y[si] = append(x[si], mrate(q, dc)), append(y[si], mrate(q, dr))
						rates[kc], rates[kr] = x, y
					}
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range []key{{"count", 8}, {"count", 1024}, {"range", 8}, {"range", 1024}} {
			lmin, lmax, lmean := minMaxHmean(rates[k][0])
			smean := benchfmt.HMean(rates[k][1])
			t.Add(k.query, k.L, fmt.Sprintf("2^%d", lb), fmt.Sprintf("%d of %d", len(rs), nb), lmin, lmax, lmean, smean, benchfmt.Ratio(lmean, smean))
			m := means[k]
			m[0], m[1] = append(m[0], lmean), append(m[1], smean)
			means[k] = m
		}
	}
	for _, k := range []key{{"count", 8}, {"count", 1024}, {"range", 8}, {"range", 1024}} {
		lm, sm := benchfmt.HMean(means[k][0]), benchfmt.HMean(means[k][1])
		t.Add(k.query, k.L, "mean", "", "", "", lm, sm, benchfmt.Ratio(lm, sm))
		b.summary[fmt.Sprintf("%s L=%d (Table IV mean)", k.query, k.L)] = [2]float64{lm, sm}
	}
	b.rep.Note("Table IV: %d queries per measurement at L = 8 and %d at L = 1024 (the paper used as many queries as elements, which at L = 1024 exceeds device memory); lo uniform, hi = lo + L·2^32/n", queries[8], queries[1024])
	return nil
}

// cleanup measures Cleanup on LSMs where a share of the entries is stale,
// against rebuilding (radix-sorting all resident pairs), and the lookup
// speedup it buys (§V-D).
func (b *lsmBench) cleanup(lb int) error {
	t := b.rep.Table("Cleanup: rate (M resident elements/s) vs a rebuild by radix sort of all resident pairs",
		"b", "resident", "removed", "cleanup ms", "M elem/s", "sort ms", "cleanup/sort rate")
	for _, c := range []struct{ lb, batches, pct int }{{lb, 63, 10}, {lb, 63, 50}, {lb - 1, 127, 10}, {lb - 1, 127, 50}} {
		l, err := b.staleLSM(1<<c.lb, c.batches, c.pct)
		if err != nil {
			return err
		}
		st, err := l.Stats(b.ctx)
		if err != nil {
			l.Close()
			return err
		}
		d, err := timed(func() error { return l.Compact(b.ctx) })
		if err != nil {
			l.Close()
			return err
		}
		after, err := l.Stats(b.ctx)
		if err != nil {
			l.Close()
			return err
		}
		removed := float64(st.Resident-after.Logged) / float64(st.Resident)
		l.Close()
		sd, err := b.sortTime(st.Resident)
		if err != nil {
			return err
		}
		t.Add(fmt.Sprintf("2^%d", c.lb), st.Resident, fmt.Sprintf("%.0f%%", 100*removed), benchfmt.Millis(d), mrate(st.Resident, d), benchfmt.Millis(sd), benchfmt.Ratio(mrate(st.Resident, d), mrate(st.Resident, sd)))
	}

	// Lookup speedup (the paper: b = 2^18, 127 batches, 10% removed, 2^25
	// lookups): lookups before cleanup vs cleanup plus the same lookups after.
	bs, nb, q := 1<<(lb-2), 127, 1<<(lb+5)
	l, err := b.staleLSM(bs, nb, 10)
	if err != nil {
		return err
	}
	defer l.Close()
	out, err1 := newArr[uint32](b, q)
	found, err2 := newFlags(b, q)
	defer out.Free()
	defer found.Free()
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	st, err := l.Stats(b.ctx)
	if err != nil {
		return err
	}
	levels := len(st.Levels)
	look := func() (time.Duration, error) {
		return timed(func() error { return b.lookup(l, b.keys.Sub(0, q), out, found) })
	}
	before, err := look()
	if err != nil {
		return err
	}
	dc, err := timed(func() error { return l.Compact(b.ctx) })
	if err != nil {
		return err
	}
	after, err := look()
	if err != nil {
		return err
	}
	s := b.rep.Table(fmt.Sprintf("Cleanup and lookups: b = 2^%d, 127 batches, 10%% removed, 2^%d lookups", lb-2, lb+5),
		"levels before", "levels after", "lookups before ms", "cleanup ms", "lookups after ms", "speedup incl. cleanup", "speedup of lookups")
	st, err = l.Stats(b.ctx)
	if err != nil {
		return err
	}
	s.Add(levels, len(st.Levels), benchfmt.Millis(before), benchfmt.Millis(dc), benchfmt.Millis(after), benchfmt.Ratio(before.Seconds(), (dc+after).Seconds()), benchfmt.Ratio(before.Seconds(), after.Seconds()))
	return nil
}

// staleLSM builds an LSM of nb batches of bs in which each entry is, with
// probability pct/200, a deletion of an earlier key (removing the tombstone
// and the deleted entry: about pct% of the entries become stale).
func (b *lsmBench) staleLSM(bs, nb, pct int) (*lsm.LSM[uint32, uint32], error) {
	l, err := lsm.New[uint32, uint32](lsm.Options{Backend: b.backend(), Device: b.dev, BatchSize: bs, Capacity: bs * nb})
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(uint64(bs), uint64(pct)))
	var keys cuda.Slice[uint32]
	var dels cuda.Slice[uint8]
	if b.dev != nil {
		var err1, err2 error
		keys, err1 = cuda.Alloc[uint32](b.dev, bs)
		dels, err2 = cuda.Alloc[uint8](b.dev, bs)
		defer keys.Free()
		defer dels.Free()
		if err := errors.Join(err1, err2); err != nil {
			l.Close()
			return nil, err
		}
	}
	hk, hd := make([]uint32, bs), make([]uint8, bs)
	next := 0
	all, err := b.keys.Sub(0, bs*nb).ToHost()
	if err != nil {
		l.Close()
		return nil, err
	}
	for range nb {
		for j := range hk {
			hd[j] = 0
			if next > 0 && rng.IntN(200) < pct {
				hk[j], hd[j] = all[rng.IntN(next)], 1
			} else {
				hk[j] = all[next]
				next++
			}
		}
		var err error
		if b.dev == nil {
			hb := make([]bool, bs)
			for j, d := range hd {
				hb[j] = d == 1
			}
			err = l.Update(b.ctx, hk, b.vals.host[:bs], hb)
		} else {
			err = errors.Join(keys.CopyFromHost(hk), dels.CopyFromHost(hd))
			if err == nil {
				err = l.UpdateDevice(b.ctx, keys, b.vals.dev.Sub(0, bs), dels)
			}
		}
		if err != nil {
			l.Close()
			return nil, err
		}
	}
	return l, nil
}

// sortTime times prim's radix sort of n (key, value) pairs: the core of a
// rebuild from scratch.
func (b *lsmBench) sortTime(n int) (time.Duration, error) {
	if b.dev == nil {
		return b.sortTimeHost(n)
	}
	e, err := prim.NewEngine(b.dev)
	if err != nil {
		return 0, err
	}
	defer e.Close()
	s, err := b.dev.NewStream()
	if err != nil {
		return 0, err
	}
	defer s.Close()
	k, err1 := cuda.Alloc[uint32](b.dev, n)
	v, err2 := cuda.Alloc[uint32](b.dev, n)
	defer k.Free()
	defer v.Free()
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	var d time.Duration
	for range 2 { // the first run allocates the sort's scratch
		if err := errors.Join(cuda.CopyAsync(k, b.keys.dev.Sub(0, n), s), cuda.CopyAsync(v, b.vals.dev.Sub(0, n), s), s.Synchronize()); err != nil {
			return 0, err
		}
		if d, err = timed(func() error {
			return errors.Join(prim.SortPairs(e, s, k, v, prim.SortOptions{}), s.Synchronize())
		}); err != nil {
			return 0, err
		}
	}
	return d, nil
}

// overhead measures what one driver call costs from Go (through package
// cuda's executor thread), with and without waiting for the stream: the
// floor under every operation that issues a sequence of calls.
func (b *lsmBench) overhead() error {
	s, err := b.dev.NewStream()
	if err != nil {
		return err
	}
	defer s.Close()
	x, err := cuda.Alloc[uint32](b.dev, 64)
	if err != nil {
		return err
	}
	defer x.Free()
	const calls, trips = 2000, 500
	async, err := timed(func() error {
		for range calls {
			if err := cuda.Fill(x, 1, s); err != nil {
				return err
			}
		}
		return s.Synchronize()
	})
	if err != nil {
		return err
	}
	roundTrip := func(wait func(*cuda.Stream) error) (time.Duration, error) {
		return timed(func() error {
			for range trips {
				if err := errors.Join(cuda.Fill(x, 1, s), wait(s)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	sync, err := roundTrip((*cuda.Stream).Synchronize)
	if err != nil {
		return err
	}
	t := b.rep.Table("Call overhead: one asynchronous driver call (cuMemsetD32Async on 256 bytes), and one call plus Stream.Synchronize",
		"µs per call", "µs per call + Synchronize")
	t.Add(float64(async.Microseconds())/calls, float64(sync.Microseconds())/trips)
	b.rep.Note("per operation, in driver calls: LSM insert = 1 prep + the sort (1 fused launch up to 2^19 pairs, 12 launches above) + 1 merge per full level it passes + 1 sync (+1 fix-up with deletions); SA insert = 1 memset + 1 prep + the sort (as the LSM's) + 1 fix-up + 1 mark + 3 select launches (count, spine, move) + 1 copy and sync to read back the counts + 1 gather + 1 merge + 1 sync, and for a batch that replaces or deletes resident keys (none here: every inserted key is new) 1 memset + 1 unmark + 3 more select launches; LSM short count = 3 memsets + 1 walk + 2 copies and a sync to read back + 1 sync; SA count = 1 launch + 1 sync")
	return b.insertParts(s)
}

// insertParts times the steps of an insertion at the batch sizes of Table
// II, each call followed by a wait (median of 25): the batch's sort and the
// merge of two runs of b (the cascade's first step).
func (b *lsmBench) insertParts(s *cuda.Stream) error {
	e, err := prim.NewEngine(b.dev)
	if err != nil {
		return err
	}
	defer e.Close()
	const most = 1 << 21
	k, err1 := cuda.Alloc[uint32](b.dev, 2*most)
	v, err2 := cuda.Alloc[uint32](b.dev, 2*most)
	ok, err3 := cuda.Alloc[uint32](b.dev, 2*most)
	ov, err4 := cuda.Alloc[uint32](b.dev, 2*most)
	defer k.Free()
	defer v.Free()
	defer ok.Free()
	defer ov.Free()
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return err
	}
	median := func(f func() error) (float64, error) {
		var ds []time.Duration
		for range 25 {
			d, err := timed(func() error { return errors.Join(f(), s.Synchronize()) })
			if err != nil {
				return 0, err
			}
			ds = append(ds, d)
		}
		slices.Sort(ds)
		return float64(ds[len(ds)/2].Nanoseconds()) / 1e3, nil
	}
	t := b.rep.Table("Insert steps: µs per call + Stream.Synchronize (median of 25), u32 keys and u32 tags",
		"b", "SortPairs b", "sort M pairs/s", "MergePairs b+b", "merge M elem/s")
	for lb := 15; lb <= 21; lb++ {
		n := 1 << lb
		if n > b.keys.dev.Len() {
			b.rep.Note("insert steps: b = 2^%d and above not timed: the run holds %d keys (--insert-log2n)", lb, b.keys.dev.Len())
			break
		}
		sort := func() error {
			return errors.Join(cuda.CopyAsync(k.Sub(0, n), b.keys.dev.Sub(0, n), s), prim.SortPairs(e, s, k.Sub(0, n), v.Sub(0, n), prim.SortOptions{}))
		}
		sortUS, err := median(sort)
		if err != nil {
			return err
		}
		// Two sorted runs of n: the sorted keys and the same keys again.
		if err := errors.Join(cuda.CopyAsync(k.Sub(n, 2*n), k.Sub(0, n), s), s.Synchronize()); err != nil {
			return err
		}
		mergeUS, err := median(func() error {
			return prim.MergePairs(e, s, k.Sub(0, n), v.Sub(0, n), k.Sub(n, 2*n), v.Sub(n, 2*n), ok.Sub(0, 2*n), ov.Sub(0, 2*n), prim.MergeOptions[uint32]{})
		})
		if err != nil {
			return err
		}
		t.Add(fmt.Sprintf("2^%d", lb), sortUS, float64(n)/sortUS, mergeUS, float64(2*n)/mergeUS)
	}
	b.rep.Note("insert steps: the sort column includes a device copy of the unsorted keys into place (about 1 µs at these sizes)")
	return nil
}

// statusLayout measures the merge at the heart of every insertion under three
// ways to keep the tombstone status without taking a key bit.
func (b *lsmBench) statusLayout() error {
	// The merge rates of the three layouts at n entries.
	var measure func(n int) (tag, wk, wv float64, err error)
	sizes := []int{20, 22, 24, 26}
	if b.dev == nil {
		sizes = []int{16, 18, 20, 22} // the CPU backend: prim's host merge, one goroutine
		measure = func(n int) (float64, float64, float64, error) {
			return mergeRateHost[uint32, uint32](n, 0), mergeRateHost[uint64, uint32](n, ^uint64(1)), mergeRateHost[uint32, uint64](n, 0), nil
		}
	} else {
		e, err := prim.NewEngine(b.dev)
		if err != nil {
			return err
		}
		defer e.Close()
		s, err := b.dev.NewStream()
		if err != nil {
			return err
		}
		defer s.Close()
		measure = func(n int) (float64, float64, float64, error) {
			tag, err1 := mergeRate[uint32, uint32](b, e, s, n, 0)
			wk, err2 := mergeRate[uint64, uint32](b, e, s, n, ^uint64(1))
			wv, err3 := mergeRate[uint32, uint64](b, e, s, n, 0)
			return tag, wk, wv, errors.Join(err1, err2, err3)
		}
	}
	t := b.rep.Table("Status layout: merge of two sorted runs of n/2 entries (G entries/s), the step an insertion repeats",
		"n", "tag: key32 + tag32", "wide key: key<<1|status 64 + value32", "wide value: key32 + value|status 64", "tag vs wide key", "tag vs wide value")
	for _, ln := range sizes {
		tag, wk, wv, err := measure(1 << ln)
		if err != nil {
			return err
		}
		t.Add(fmt.Sprintf("2^%d", ln), tag, wk, wv, benchfmt.Ratio(tag, wk), benchfmt.Ratio(tag, wv))
	}
	b.rep.Note("status layout: lsm keeps the status in a 32-bit tag beside the key (tag = tombstone bit + value-log slot) and writes each value once, to the log; a status byte in a separate array would need a three-array merge (prim merges one value array), i.e. an index merge plus gathers, more traffic than any row here")
	return nil
}

// mergeRate times MergePairs of two interleaved sorted runs of n/2 (key, value)
// pairs; mask is the key mask (0: all bits).
func mergeRate[K, V warpkit.Word](b *lsmBench, e *prim.Engine, s *cuda.Stream, n int, mask K) (float64, error) {
	h := make([]K, n)
	for i := range h {
		h[i] = K(i) << 1 // run A: even positions, run B: odd; status bit 0 for the wide-key layout
	}
	a, bb := make([]K, 0, n/2), make([]K, 0, n/2)
	for i, k := range h {
		if i%2 == 0 {
			a = append(a, k)
		} else {
			bb = append(bb, k)
		}
	}
	ak, err1 := cuda.FromHost(b.dev, a)
	bk, err2 := cuda.FromHost(b.dev, bb)
	av, err3 := cuda.Alloc[V](b.dev, n/2)
	bv, err4 := cuda.Alloc[V](b.dev, n/2)
	ok, err5 := cuda.Alloc[K](b.dev, n)
	ov, err6 := cuda.Alloc[V](b.dev, n)
	defer func() {
		for _, f := range []func() error{ak.Free, bk.Free, av.Free, bv.Free, ok.Free, ov.Free} {
			f()
		}
	}()
	if err := errors.Join(err1, err2, err3, err4, err5, err6); err != nil {
		return 0, err
	}
	best := time.Duration(math.MaxInt64)
	for range 3 {
		d, err := timed(func() error {
			return errors.Join(prim.MergePairs(e, s, ak, av, bk, bv, ok, ov, prim.MergeOptions[K]{KeyMask: mask}), s.Synchronize())
		})
		if err != nil {
			return 0, err
		}
		best = min(best, d)
	}
	return float64(n) / best.Seconds() / 1e9, nil
}

// targets prints the targets against this run's ratios.
func (b *lsmBench) targets() {
	if len(b.summary) == 0 {
		return
	}
	t := b.rep.Table("Targets: LSM vs sorted array, same run", "experiment", "LSM", "SA", "LSM/SA", "target", "met")
	names := slices.Sorted(maps.Keys(b.summary))
	for _, k := range names {
		v := b.summary[k]
		target := targetCountVsSA
		switch {
		case strings.HasPrefix(k, "insertion"):
			target = targetInsertVsSA
		case strings.HasPrefix(k, "lookup"):
			target = targetLookupVsSA
		}
		got := v[0] / v[1]
		t.Add(k, v[0], v[1], benchfmt.Ratio(v[0], v[1]), fmt.Sprintf(">= %.1fx", target), benchfmt.YesNo(got >= target))
	}
}

// plot writes Fig. 4b: effective insertion rate against elements inserted,
// one line per batch size for the LSM (solid) and the sorted array (dashed).
func (b *lsmBench) plot(path string) error {
	p := plot.New()
	p.Title.Text = "Effective insertion rate: GPU LSM (solid) vs sorted array (dashed)"
	if b.dev != nil {
		p.Title.Text += ", " + b.dev.Name()
	} else {
		p.Title.Text = "Effective insertion rate: LSM (solid) vs sorted array (dashed), CPU backend"
	}
	p.X.Label.Text = "elements inserted"
	p.Y.Label.Text = "M elements/s"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	palette := []color.Color{
		color.RGBA{0xe4, 0x1a, 0x1c, 0xff}, color.RGBA{0x37, 0x7e, 0xb8, 0xff}, color.RGBA{0x4d, 0xaf, 0x4a, 0xff},
		color.RGBA{0x98, 0x4e, 0xa3, 0xff}, color.RGBA{0xff, 0x7f, 0x00, 0xff}, color.RGBA{0xa6, 0x56, 0x28, 0xff},
		color.RGBA{0xf7, 0x81, 0xbf, 0xff}, color.RGBA{0x33, 0x33, 0x33, 0xff},
	}
	low := math.Inf(1)
	for i, s := range b.series {
		color := palette[i%len(palette)]
		for j, ys := range [][]float64{s.lsm, s.sa} {
			pts := make(plotter.XYs, 0, len(ys))
			for k, y := range ys {
				if y > 0 {
					pts = append(pts, plotter.XY{X: float64((k + 1) * s.b), Y: y})
					low = min(low, y)
				}
			}
			if len(pts) == 0 {
				continue
			}
			line, err := plotter.NewLine(pts)
			if err != nil {
				return err
			}
			line.Color = color
			line.Width = vg.Points(1.5)
			if j == 1 {
				line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			} else {
				p.Legend.Add(fmt.Sprintf("b = 2^%d", bits.Len(uint(s.b))-1), line)
			}
			p.Add(line)
		}
	}
	p.Y.Min = low / 8 // room below the curves for the legend
	p.Legend.Left, p.Legend.Top = true, false
	return p.Save(9*vg.Inch, 6*vg.Inch, path)
}
