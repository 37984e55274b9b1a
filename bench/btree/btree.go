// Package btreebench is warp bench btree: the GPU B-link tree (PPoPP'19
// Table 3, Figs. 2-5) against the CPU backend, the LSM and the sorted array.
// cmd/warp dispatches to Run.
package btreebench

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"time"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/bench/internal/treebench"
	"github.com/warpkit/warpkit/btree"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/benchfmt"
	"github.com/warpkit/warpkit/internal/benchfmt/benchplot"
	"github.com/warpkit/warpkit/internal/cli"
	"github.com/warpkit/warpkit/lsm"
	"github.com/warpkit/warpkit/sortedarray"
)

// Summary is the line warp bench -h prints for btree.
const Summary = "GPU B-link tree: PPoPP'19 Table 3, Figs. 2-5 (insert, lookup, range, successor, delete, concurrent)"

// Targets of issue 5 (H100/H200, harmonic mean over 1M-45M keys), in G/s.
const (
	targetLookup     = 6.0
	targetInsert     = 1.0
	targetSuccessor  = 4.0
	targetRange      = 2.0
	targetConcurrent = 1.5
)

// Run runs warp bench btree with args (its flags) and writes the report to w.
func Run(ctx context.Context, args []string, w io.Writer) error {
	fs := cli.NewFlags("bench btree", "[--json] [--keys 32|64] [--quick] [--sizes 1M,4M,...] [--sort-queries] [--backend B] [--plot DIR]\n\n"+
		"Runs on a GPU, or on the CPU backend (--backend cpu, or auto without a device) at small sizes; there the\n"+
		"LSM and sorted-array columns (GPU structures) stay empty and --sort-queries is not run.")
	asJSON := fs.Bool("json", false, "print JSON")
	keyBits := fs.Int("keys", 32, "key and value width in bits: 32 or 64")
	quick := fs.Bool("quick", false, "small sizes (seconds; the default on the CPU backend)")
	sizesFlag := fs.String("sizes", "", "tree sizes for the query and concurrent benchmarks (default 1M,2M,4M,8M,16M,32M,45M)")
	sortQueries := fs.Bool("sort-queries", false, "Fig. 2 also runs every batch sorted on the device first (Options.SortQueries)")
	backend := warpkit.Auto
	fs.TextVar(&backend, "backend", warpkit.Auto, "backend: auto, cpu or cuda (auto: CUDA when a device is present)")
	plotDir := fs.String("plot", "", "also write each table as a plot, `DIR`/<table>.png and .svg")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	dev, err := warpkit.OpenDevice(backend, 0)
	if err != nil {
		return err
	}
	if dev != nil {
		defer dev.Close()
	}
	b := &btBench{ctx: ctx, dev: dev, quick: *quick || dev == nil, sortQueries: *sortQueries}
	b.sizes = []int{1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20, 32 << 20, 45_000_000}
	if b.quick {
		b.sizes = []int{1 << 16, 1 << 18, 1 << 20}
	}
	if *sizesFlag != "" {
		if b.sizes, err = parseSizes(*sizesFlag); err != nil {
			return err
		}
	}
	if *keyBits == 32 {
		for _, n := range b.sizes {
			if n > maxSize32 {
				return fmt.Errorf("%w: size %d: 32-bit keys allow trees of at most %d keys here (the concurrent table draws 2n distinct keys)", cli.ErrUsage, n, maxSize32)
			}
		}
	}
	name := "CPU (no CUDA device)"
	if dev != nil {
		p := dev.Properties()
		name = fmt.Sprintf("%s (cc %s, %d SMs)", p.Name, p.ComputeCapability(), p.Multiprocessors)
	}
	title := map[int]string{
		32: "warp bench btree: 32-bit keys and values (128-byte nodes)",
		64: "warp bench btree: 64-bit keys and values (256-byte nodes)",
	}[*keyBits]
	if title == "" {
		return fmt.Errorf("%w: --keys must be 32 or 64", cli.ErrUsage)
	}
	b.rep = benchfmt.NewReport(title, name)
	if !*asJSON {
		b.rep.Stream(w) // a run stopped by a timeout keeps what it measured
	}
	if *keyBits == 32 {
		err = runBTree[uint32, uint32](b)
	} else {
		err = runBTree[uint64, uint64](b)
	}
	if err != nil {
		return err
	}
	return benchplot.Finish(b.rep, w, *asJSON, *plotDir)
}

// Tree sizes --sizes accepts: ranges of 8 keys need more than 8 keys, and the
// concurrent table draws 2n distinct keys spread over the key range.
const (
	minSize   = 1 << 10
	maxSize32 = 1 << 30
)

func parseSizes(s string) ([]int, error) { return treebench.ParseSizes(s, minSize) }

type btBench struct {
	ctx         context.Context
	dev         *cuda.Device
	quick       bool
	sortQueries bool
	sizes       []int
	rep         *benchfmt.Report
}

func runBTree[K, V warpkit.Word](b *btBench) error {
	cpu, err := measureCPU[K, V](b)
	if err != nil {
		return err
	}
	b.rep.Note("baseline: the CPU backend (github.com/tidwall/btree, one goroutine) on a %s-key tree, measured in this run", treebench.SizeName(cpu.keys))
	if err := btQueries[K, V](b, cpu); err != nil {
		return err
	}
	if err := btInserts[K, V](b, cpu); err != nil {
		return err
	}
	if err := btCrossover[K, V](b); err != nil {
		return err
	}
	if err := btDeletes[K, V](b); err != nil {
		return err
	}
	return btConcurrent[K, V](b, cpu)
}

func openTree[K, V warpkit.Word](b *btBench, initialNodes int) (*btree.Tree[K, V], error) {
	return openTreeWith[K, V](b, btree.Options{InitialNodes: initialNodes})
}

// openTreeWith opens a tree with opts on the bench's backend.
func openTreeWith[K, V warpkit.Word](b *btBench, opts btree.Options) (*btree.Tree[K, V], error) {
	opts.Backend = warpkit.CPU
	if b.dev != nil {
		opts.Backend, opts.Device = warpkit.CUDA, b.dev
	}
	return btree.New[K, V](opts)
}

func valsFor[K, V warpkit.Word](keys []K) []V {
	v := make([]V, len(keys))
	for i, k := range keys {
		v[i] = V(k) ^ 0x5bd1e995
	}
	return v
}

// cpuBaseline measures the CPU backend (one goroutine) on a 1M-key tree, the
// in-run baseline every rate is compared with.
type cpuRates struct {
	keys                                  int
	lookup, rng, succ, insert, del, mixed float64
}

func measureCPU[K, V warpkit.Word](b *btBench) (cpuRates, error) {
	var r cpuRates
	n, q := 1<<20, 1<<17
	if b.quick {
		n, q = 1<<16, 1<<14
	}
	r.keys = n
	t, err := btree.New[K, V](btree.Options{Backend: warpkit.CPU})
	if err != nil {
		return r, err
	}
	defer t.Close()
	sorted := treebench.Keys[K](2*n, 99)
	base := make([]K, 0, n)
	fresh := make([]K, 0, n)
	for i, k := range sorted {
		if i%2 == 0 {
			base = append(base, k)
		} else {
			fresh = append(fresh, k)
		}
	}
	if err := t.Build(b.ctx, base, valsFor[K, V](base)); err != nil {
		return r, err
	}
	ctx := b.ctx
	qs := treebench.Shuffled(base, 5)[:q]
	vals, found := make([]V, q), make([]bool, q)
	rate := func(fn func() error) (float64, error) {
		d, err := treebench.Best(1, fn)
		return benchfmt.Rate(int64(q), d, 1e9), err
	}
	if r.lookup, err = rate(func() error { return t.Lookup(ctx, qs, vals, found) }); err != nil {
		return r, err
	}
	ok := make([]K, q)
	if r.succ, err = rate(func() error { return t.Successor(ctx, qs, ok, vals, found) }); err != nil {
		return r, err
	}
	lo, hi := make([]K, q), make([]K, q)
	rr := rand.New(rand.NewPCG(uint64(n), 4))
	for i := range lo {
		p := rr.IntN(n - 8)
		lo[i], hi[i] = base[p], base[p+8] // [lo, hi): 8 keys
	}
	if r.rng, err = rate(func() error { _, err := t.Range(ctx, lo, hi); return err }); err != nil {
		return r, err
	}
	ins := treebench.Shuffled(fresh, 6)[:q]
	if r.insert, err = rate(func() error { return t.Insert(ctx, ins, valsFor[K, V](ins)) }); err != nil {
		return r, err
	}
	if r.del, err = rate(func() error { return t.Delete(ctx, qs) }); err != nil {
		return r, err
	}
	ops := mixedOps[K, V](base, fresh, q, 0.6, 7)
	res := btree.Results[K, V]{Found: make([]bool, q), Keys: make([]K, q), Vals: make([]V, q), Counts: make([]uint32, q)}
	r.mixed, err = rate(func() error { return t.Apply(ctx, ops, res) })
	return r, err
}

// mixedOps draws n operations: with probability alpha an update (insert of a
// fresh key or delete of a present one, equally), otherwise a query (lookup,
// successor or count of ~8 keys, equally).
func mixedOps[K, V warpkit.Word](present, fresh []K, n int, alpha float64, seed uint64) btree.Ops[K, V] {
	r := rand.New(rand.NewPCG(seed, 11))
	ops := btree.Ops[K, V]{Kinds: make([]btree.OpKind, n), Keys: make([]K, n), Vals: make([]V, n), His: make([]K, n)}
	for i := range n {
		p := present[r.IntN(len(present))]
		if r.Float64() < alpha {
			if r.IntN(2) == 0 {
				f := fresh[r.IntN(len(fresh))]
				ops.Kinds[i], ops.Keys[i], ops.Vals[i] = btree.OpInsert, f, V(f)
			} else {
				ops.Kinds[i], ops.Keys[i] = btree.OpDelete, p
			}
			continue
		}
		switch r.IntN(3) {
		case 0:
			ops.Kinds[i], ops.Keys[i] = btree.OpLookup, p
		case 1:
			ops.Kinds[i], ops.Keys[i] = btree.OpSuccessor, p
		default:
			j := r.IntN(len(present) - 8)
			ops.Kinds[i], ops.Keys[i], ops.His[i] = btree.OpCount, present[j], present[j+8] // [lo, hi): 8 keys
		}
	}
	return ops
}

// btQueries reproduces Fig. 2: lookup, range (L = 8) and successor rates by tree
// size, on bulk-built trees, every key queried (in random order; at least 4M
// queries per call so that call overhead is amortized). With --sort-queries each
// batch also runs sorted on the device first (Options.SortQueries = 1), on a
// second tree of the same keys.
func btQueries[K, V warpkit.Word](b *btBench, cpu cpuRates) error {
	sorting := b.sortQueries && b.dev != nil
	title := "Fig. 2: queries on a bulk-built tree (G queries/s; every key, random order)"
	cols := []string{"keys", "height", "lookup", "vs CPU", "vs LSM", "range L=8", "vs CPU", "successor", "vs CPU", "build ms"}
	if sorting {
		title += "; sorted: the same batch sorted on the device first, sort included"
		cols = []string{"keys", "height", "lookup", "sorted", "vs CPU", "vs LSM", "range L=8", "sorted", "vs CPU", "successor", "sorted", "vs CPU", "build ms"}
	}
	tab := b.rep.Table(title, cols...)
	var lk, rg, sc [2][]float64 // as given, sorted
	lsmNote := ""
	for _, n := range b.sizes {
		if err := b.ctx.Err(); err != nil {
			return err
		}
		sorted := treebench.Keys[K](n, uint64(n))
		keys := treebench.Shuffled(sorted, 1)
		vals := valsFor[K, V](keys)
		q := max(n, 4<<20)
		if b.dev == nil {
			q = min(n, 1<<16)
		}
		qk := make([]K, q)
		for i := range qk {
			qk[i] = keys[i%n]
		}
		lo, hi := make([]K, q), make([]K, q)
		r := rand.New(rand.NewPCG(uint64(n), 2))
		for i := range lo {
			p := r.IntN(n - 8)
			lo[i], hi[i] = sorted[p], sorted[p+8] // [lo, hi): 8 keys
		}
		modes := []int{0} // Options.SortQueries: never (the default), always
		if sorting {
			modes = append(modes, 1)
		}
		var l, rr, s [2]float64
		var bt time.Duration
		var st btree.Stats
		for i, mode := range modes {
			t, err := openTreeWith[K, V](b, btree.Options{SortQueries: mode})
			if err != nil {
				return err
			}
			d, err := treebench.Best(1, func() error { return t.Build(b.ctx, keys, vals) })
			if err != nil {
				t.Close()
				return err
			}
			if i == 0 {
				bt = d
				st, _ = t.Stats(b.ctx)
			}
			l[i], rr[i], s[i], err = queryRates(b, t, qk, lo, hi, n)
			t.Close()
			if err != nil {
				return fmt.Errorf("%d keys (SortQueries %d): %w", n, mode, err)
			}
		}
		ll, why := lsmLookupRate(b, keys, vals, qk)
		if why != "" && lsmNote == "" {
			lsmNote = why
		}
		if sorting {
			tab.Add(treebench.SizeName(n), st.Height, l[0], l[1], benchfmt.Ratio(l[0], cpu.lookup), benchfmt.Ratio(l[0], ll), rr[0], rr[1], benchfmt.Ratio(rr[0], cpu.rng),
				s[0], s[1], benchfmt.Ratio(s[0], cpu.succ), float64(bt.Microseconds())/1e3)
		} else {
			tab.Add(treebench.SizeName(n), st.Height, l[0], benchfmt.Ratio(l[0], cpu.lookup), benchfmt.Ratio(l[0], ll), rr[0], benchfmt.Ratio(rr[0], cpu.rng),
				s[0], benchfmt.Ratio(s[0], cpu.succ), float64(bt.Microseconds())/1e3)
		}
		if n >= 1<<20 && n <= 45_000_000 {
			for i := range modes {
				lk[i], rg[i], sc[i] = append(lk[i], l[i]), append(rg[i], rr[i]), append(sc[i], s[i])
			}
		}
	}
	if len(lk[0]) > 0 {
		cols := []string{"operation", "G/s", "target", "vs target"}
		if sorting {
			cols = append(cols, "sorted")
		}
		sum := b.rep.Table("Targets (harmonic mean over the sizes from 1M to 45M keys)", cols...)
		for _, row := range []struct {
			name   string
			rates  [2][]float64
			target float64
		}{{"lookup", lk, targetLookup}, {"range L=8", rg, targetRange}, {"successor", sc, targetSuccessor}} {
			cells := []any{row.name, benchfmt.HMean(row.rates[0]), row.target, benchfmt.Ratio(benchfmt.HMean(row.rates[0]), row.target)}
			if sorting {
				cells = append(cells, benchfmt.HMean(row.rates[1]))
			}
			sum.Add(cells...)
		}
		b.rep.Note("build ms: Build from Go slices (upload, prim radix sort and dedup on the device, device layout); vs LSM: package lsm (batch 2^20) looking up the same queries")
	}
	if lsmNote != "" {
		b.rep.Note("Fig. 2: no LSM comparison: %s", lsmNote)
	}
	return nil
}

// queryRates measures lookup, range (fixed windows of 8) and successor and
// checks that the answers are right (every key found, 8 pairs per range).
func queryRates[K, V warpkit.Word](b *btBench, t *btree.Tree[K, V], qk, lo, hi []K, n int) (l, r, s float64, err error) {
	q := len(qk)
	ctx := b.ctx
	if b.dev == nil {
		vals, found := make([]V, q), make([]bool, q)
		d, err := treebench.Best(1, func() error { return t.Lookup(ctx, qk, vals, found) })
		if err != nil {
			return 0, 0, 0, err
		}
		l = benchfmt.Rate(int64(q), d, 1e9)
		d, err = treebench.Best(1, func() error { _, err := t.Range(ctx, lo, hi); return err })
		if err != nil {
			return 0, 0, 0, err
		}
		r = benchfmt.Rate(int64(q), d, 1e9)
		ok := make([]K, q)
		d, err = treebench.Best(1, func() error { return t.Successor(ctx, qk, ok, vals, found) })
		return l, r, benchfmt.Rate(int64(q), d, 1e9), err
	}
	var bufs treebench.Bufs
	defer bufs.Free()
	dq, err := treebench.Up(&bufs, b.dev, qk)
	if err != nil {
		return
	}
	dv, err := treebench.Alloc[V](&bufs, b.dev, q)
	if err != nil {
		return
	}
	df, err := treebench.Alloc[uint8](&bufs, b.dev, q)
	if err != nil {
		return
	}
	d, err := treebench.Best(3, func() error { return t.LookupDevice(ctx, dq, dv, df) })
	if err != nil {
		return
	}
	if err = expectAll(df, q, "lookup found"); err != nil {
		return
	}
	l = benchfmt.Rate(int64(q), d, 1e9)
	dl, err := treebench.Up(&bufs, b.dev, lo)
	if err != nil {
		return
	}
	dh, err := treebench.Up(&bufs, b.dev, hi)
	if err != nil {
		return
	}
	offs := make([]uint32, q+1)
	for i := range offs {
		offs[i] = uint32(8 * i)
	}
	do, err := treebench.Up(&bufs, b.dev, offs)
	if err != nil {
		return
	}
	rk, err := treebench.Alloc[K](&bufs, b.dev, 8*q)
	if err != nil {
		return
	}
	rv, err := treebench.Alloc[V](&bufs, b.dev, 8*q)
	if err != nil {
		return
	}
	rc, err := treebench.Alloc[uint32](&bufs, b.dev, q)
	if err != nil {
		return
	}
	d, err = treebench.Best(3, func() error { return t.RangeDevice(ctx, dl, dh, do, rk, rv, rc) })
	if err != nil {
		return
	}
	counts, err := rc.ToHost()
	if err != nil {
		return
	}
	for i, c := range counts {
		if c != 8 {
			return 0, 0, 0, fmt.Errorf("range %d returned %d pairs, want 8", i, c)
		}
	}
	r = benchfmt.Rate(int64(q), d, 1e9)
	sk, err := treebench.Alloc[K](&bufs, b.dev, q)
	if err != nil {
		return
	}
	d, err = treebench.Best(3, func() error { return t.SuccessorDevice(ctx, dq, sk, dv, df) })
	if err != nil {
		return
	}
	found, err := df.ToHost()
	if err != nil {
		return
	}
	missing := 0
	for _, f := range found {
		if f == 0 {
			missing++
		}
	}
	if missing > q/n+1 { // only the largest key has no successor
		return 0, 0, 0, fmt.Errorf("successor: %d of %d queries found nothing", missing, q)
	}
	return l, r, benchfmt.Rate(int64(q), d, 1e9), nil
}

func expectAll(flags cuda.Slice[uint8], n int, what string) error {
	f, err := flags.ToHost()
	if err != nil {
		return err
	}
	for i, x := range f[:n] {
		if x == 0 {
			return fmt.Errorf("%s: element %d is 0", what, i)
		}
	}
	return nil
}

// insertBatches inserts keys in batches of size bs into t and returns the time.
func insertBatches[K, V warpkit.Word](b *btBench, t *btree.Tree[K, V], keys []K, vals []V, bs int) (time.Duration, error) {
	ctx := b.ctx
	if b.dev == nil {
		start := time.Now()
		for i := 0; i < len(keys); i += bs {
			j := min(i+bs, len(keys))
			if err := t.Insert(ctx, keys[i:j], vals[i:j]); err != nil {
				return 0, err
			}
		}
		return time.Since(start), nil
	}
	var bufs treebench.Bufs
	defer bufs.Free()
	dk, dv, err := upPairs(&bufs, b.dev, keys, vals)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := insertDeviceBatches(ctx, t, dk, dv, bs); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// btInserts reproduces Table 3: a tree grown from empty to N keys by batches of
// b, for b = 2^16..2^22; the rate is N over the total time (the harmonic mean
// of the batch rates).
func btInserts[K, V warpkit.Word](b *btBench, cpu cpuRates) error {
	total := 1 << 24
	if b.quick {
		total = 1 << 20
	}
	if b.dev == nil {
		total = 1 << 18
	}
	keys := treebench.Shuffled(treebench.Keys[K](total, 77), 4)
	vals := valsFor[K, V](keys)
	tab := b.rep.Table(fmt.Sprintf("Table 3: incremental inserts, tree grown from empty to %s keys by batches", treebench.SizeName(total)),
		"batch", "G keys/s", "vs CPU", "vs target", "LSM", "vs LSM", "SA", "vs SA")
	var rates, lsmRates, saRates []float64
	lsmNote, saNote := "", ""
	for lb := 16; lb <= 22; lb++ {
		bs := 1 << lb
		if bs > total {
			break
		}
		t, err := openTree[K, V](b, total/4)
		if err != nil {
			return err
		}
		d, err := insertBatches(b, t, keys, vals, bs)
		if err == nil {
			if n, lerr := t.Len(b.ctx); lerr != nil || n != total {
				err = fmt.Errorf("tree holds %d keys after inserting %d (%v)", n, total, lerr)
			}
		}
		t.Close()
		if err != nil {
			return fmt.Errorf("inserts by %d: %w", bs, err)
		}
		r := benchfmt.Rate(int64(total), d, 1e9)
		rates = append(rates, r)
		lr, why := lsmInsertRate(b, keys, vals, bs)
		if why != "" && lsmNote == "" {
			lsmNote = why
		}
		lsmRates = append(lsmRates, lr)
		sr, why := saInsertRate(b, keys, vals, bs)
		if why != "" && saNote == "" {
			saNote = why
		}
		saRates = append(saRates, sr)
		tab.Add(fmt.Sprintf("2^%d", lb), r, benchfmt.Ratio(r, cpu.insert), benchfmt.Ratio(r, targetInsert), lr, benchfmt.Ratio(r, lr), sr, benchfmt.Ratio(r, sr))
	}
	tab.Add("mean", benchfmt.HMean(rates), benchfmt.Ratio(benchfmt.HMean(rates), cpu.insert), benchfmt.Ratio(benchfmt.HMean(rates), targetInsert),
		benchfmt.HMean(lsmRates), benchfmt.Ratio(benchfmt.HMean(rates), benchfmt.HMean(lsmRates)), benchfmt.HMean(saRates), benchfmt.Ratio(benchfmt.HMean(rates), benchfmt.HMean(saRates)))
	if lsmNote != "" {
		b.rep.Note("Table 3: the LSM column is empty where the LSM failed: %s", lsmNote)
	}
	if saNote != "" {
		b.rep.Note("Table 3: the SA column is empty where the sorted array failed: %s", saNote)
	}
	b.rep.Note("Table 3: the node pool is preallocated (Options.InitialNodes = N/4) so pool growth is not timed; LSM = package lsm with batch size b, SA = package sortedarray with memory for all keys reserved; same keys, same run")
	return nil
}

// btCrossover reproduces Fig. 3: rebuilding a tree of m keys from scratch
// versus inserting a batch of b keys into a tree of m-b keys.
func btCrossover[K, V warpkit.Word](b *btBench) error {
	ms := []int{1 << 20, 4 << 20, 16 << 20}
	bss := []int{1 << 16, 1 << 18, 1 << 20, 1 << 22}
	if b.quick {
		ms, bss = []int{1 << 18, 1 << 20}, []int{1 << 14, 1 << 16}
	}
	tab := b.rep.Table("Fig. 3: bulk rebuild of m keys vs inserting a batch of b into m-b keys (ms)",
		"m", "b", "rebuild", "insert", "faster")
	for _, m := range ms {
		keys := treebench.Shuffled(treebench.Keys[K](m, uint64(m)+5), 8)
		vals := valsFor[K, V](keys)
		t, err := openTree[K, V](b, 0)
		if err != nil {
			return err
		}
		rebuild, err := treebench.Best(2, func() error { return t.Build(b.ctx, keys, vals) })
		if err == nil && b.dev != nil {
			var d time.Duration
			if d, err = deviceRebuild(b, t, keys, vals); err == nil {
				rebuild = d
			} else {
				b.rep.Note("Fig. 3: BuildDevice failed at m = %s (%v); the rebuild times of that m are Build from Go slices", treebench.SizeName(m), err)
				err = nil
			}
		}
		t.Close()
		if err != nil {
			return err
		}
		for _, bs := range bss {
			if bs >= m {
				continue
			}
			t, err := openTree[K, V](b, m/4)
			if err != nil {
				return err
			}
			if err := t.Build(b.ctx, keys[:m-bs], vals[:m-bs]); err != nil {
				t.Close()
				return err
			}
			ins, err := insertBatches(b, t, keys[m-bs:], vals[m-bs:], bs)
			t.Close()
			if err != nil {
				return err
			}
			faster := "insert"
			if rebuild < ins {
				faster = "rebuild"
			}
			tab.Add(treebench.SizeName(m), treebench.SizeName(bs), benchfmt.Millis(rebuild), benchfmt.Millis(ins), faster)
		}
	}
	if b.dev != nil {
		b.rep.Note("Fig. 3: rebuild = BuildDevice from unsorted device pairs (prim radix sort, dedup, device layout), best of 2")
	} else {
		b.rep.Note("Fig. 3: rebuild = Build on the CPU backend (no CUDA device), best of 2")
	}
	return nil
}

// batchInserter is what Table 3 needs of a batch dictionary (lsm, sortedarray).
type batchInserter[K, V warpkit.Word] interface {
	InsertDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V]) error
	Close() error
}

// lsmInsertRate grows a GPU LSM (batch size bs) by the same batches.
func lsmInsertRate[K, V warpkit.Word](b *btBench, keys []K, vals []V, bs int) (float64, string) {
	return dictInsertRate(b, keys, vals, bs, func() (batchInserter[K, V], error) {
		return lsm.New[K, V](lsm.Options{Backend: warpkit.CUDA, Device: b.dev, BatchSize: bs})
	})
}

// saInsertRate grows a GPU sorted array by the same batches, with memory for
// all keys reserved up front (as the tree's node pool is).
func saInsertRate[K, V warpkit.Word](b *btBench, keys []K, vals []V, bs int) (float64, string) {
	return dictInsertRate(b, keys, vals, bs, func() (batchInserter[K, V], error) {
		return sortedarray.New[K, V](sortedarray.Options{Backend: warpkit.CUDA, Device: b.dev, Capacity: len(keys)})
	})
}

// dictInsertRate inserts keys into a new dictionary in batches of bs from
// device memory and returns the rate in G keys/s; it returns 0 and the error
// text when the dictionary fails, so the B-tree tables still print.
func dictInsertRate[K, V warpkit.Word](b *btBench, keys []K, vals []V, bs int, open func() (batchInserter[K, V], error)) (float64, string) {
	if b.dev == nil {
		return 0, "no device"
	}
	d, err := open()
	if err != nil {
		return 0, err.Error()
	}
	defer d.Close()
	var bufs treebench.Bufs
	defer bufs.Free()
	dk, dv, err := upPairs(&bufs, b.dev, keys, vals)
	if err != nil {
		return 0, err.Error()
	}
	start := time.Now()
	if err := insertDeviceBatches(b.ctx, d, dk, dv, bs); err != nil {
		return 0, err.Error()
	}
	return benchfmt.Rate(int64(len(keys)), time.Since(start), 1e9), ""
}

// upPairs copies keys and vals to the device, into bufs.
func upPairs[K, V warpkit.Word](bufs *treebench.Bufs, dev *cuda.Device, keys []K, vals []V) (cuda.Slice[K], cuda.Slice[V], error) {
	dk, err := treebench.Up(bufs, dev, keys)
	if err != nil {
		return cuda.Slice[K]{}, cuda.Slice[V]{}, err
	}
	dv, err := treebench.Up(bufs, dev, vals)
	return dk, dv, err
}

// insertDeviceBatches inserts the device pairs into d in batches of bs.
func insertDeviceBatches[K, V warpkit.Word](ctx context.Context, d batchInserter[K, V], dk cuda.Slice[K], dv cuda.Slice[V], bs int) error {
	for i := 0; i < dk.Len(); i += bs {
		j := min(i+bs, dk.Len())
		if err := d.InsertDevice(ctx, dk.Sub(i, j), dv.Sub(i, j)); err != nil {
			return err
		}
	}
	return nil
}

// lsmLookupRate builds a GPU LSM of the keys (batches of 2^20) and looks up qk.
func lsmLookupRate[K, V warpkit.Word](b *btBench, keys []K, vals []V, qk []K) (float64, string) {
	if b.dev == nil {
		return 0, "no device"
	}
	l, err := lsm.New[K, V](lsm.Options{Backend: warpkit.CUDA, Device: b.dev, BatchSize: 1 << 20})
	if err != nil {
		return 0, err.Error()
	}
	defer l.Close()
	var bufs treebench.Bufs
	defer bufs.Free()
	dk, dv, err := upPairs(&bufs, b.dev, keys, vals)
	if err != nil {
		return 0, err.Error()
	}
	if err := insertDeviceBatches(b.ctx, l, dk, dv, 1<<20); err != nil {
		return 0, err.Error()
	}
	dq, err := treebench.Up(&bufs, b.dev, qk)
	if err != nil {
		return 0, err.Error()
	}
	ov, err := treebench.Alloc[V](&bufs, b.dev, len(qk))
	if err != nil {
		return 0, err.Error()
	}
	of, err := treebench.Alloc[uint8](&bufs, b.dev, len(qk))
	if err != nil {
		return 0, err.Error()
	}
	d, err := treebench.Best(2, func() error { return l.LookupDevice(b.ctx, dq, ov, of) })
	if err != nil {
		return 0, err.Error()
	}
	return benchfmt.Rate(int64(len(qk)), d, 1e9), ""
}

// deviceRebuild times BuildDevice from fresh unsorted device copies of the pairs.
func deviceRebuild[K, V warpkit.Word](b *btBench, t *btree.Tree[K, V], keys []K, vals []V) (time.Duration, error) {
	d := time.Duration(math.MaxInt64)
	for range 2 {
		var bufs treebench.Bufs
		dk, dv, err := upPairs(&bufs, b.dev, keys, vals)
		if err != nil {
			bufs.Free()
			return 0, err
		}
		start := time.Now()
		err = t.BuildDevice(b.ctx, dk, dv)
		d = min(d, time.Since(start))
		bufs.Free()
		if err != nil {
			return 0, err
		}
	}
	if n, err := t.Len(b.ctx); err != nil || n != len(keys) {
		return 0, fmt.Errorf("BuildDevice left %d keys of %d (%v)", n, len(keys), err)
	}
	return d, nil
}

// btDeletes reproduces Fig. 4: deleting x% of a tree's keys.
func btDeletes[K, V warpkit.Word](b *btBench) error {
	n := 16 << 20
	if b.quick {
		n = 1 << 20
	}
	if b.dev == nil {
		n = 1 << 18
	}
	keys := treebench.Shuffled(treebench.Keys[K](n, 31), 9)
	vals := valsFor[K, V](keys)
	tab := b.rep.Table(fmt.Sprintf("Fig. 4: deleting x%% of a %s-key tree", treebench.SizeName(n)), "x", "ms", "G deletes/s")
	for _, pct := range []int{10, 20, 30, 40, 50} {
		t, err := openTree[K, V](b, 0)
		if err != nil {
			return err
		}
		if err := t.Build(b.ctx, keys, vals); err != nil {
			t.Close()
			return err
		}
		del := keys[:n*pct/100]
		var d time.Duration
		if b.dev == nil {
			d, err = treebench.Best(1, func() error { return t.Delete(b.ctx, del) })
		} else {
			var bufs treebench.Bufs
			dk, uerr := treebench.Up(&bufs, b.dev, del)
			if uerr != nil {
				t.Close()
				return uerr
			}
			d, err = treebench.Best(1, func() error { return t.DeleteDevice(b.ctx, dk) })
			bufs.Free()
		}
		if err == nil {
			if left, lerr := t.Len(b.ctx); lerr != nil || left != n-len(del) {
				err = fmt.Errorf("%d keys left after deleting %d of %d (%v)", left, len(del), n, lerr)
			}
		}
		t.Close()
		if err != nil {
			return err
		}
		tab.Add(fmt.Sprintf("%d%%", pct), benchfmt.Millis(d), benchfmt.Rate(int64(len(del)), d, 1e9))
	}
	return nil
}

// btConcurrent reproduces Fig. 5: one mixed batch of n operations on a tree of
// n keys, with update ratio alpha (inserts and deletes equally; the rest
// lookups, successors and counts equally), in one kernel.
func btConcurrent[K, V warpkit.Word](b *btBench, cpu cpuRates) error {
	tab := b.rep.Table("Fig. 5: concurrent mixed batches, n operations on an n-key tree (G ops/s)",
		"keys", "α=0.2", "α=0.6", "vs CPU", "α=1.0")
	var at06 []float64
	for _, n := range b.sizes {
		sorted := treebench.Keys[K](2*n, uint64(n)+9)
		present, fresh := make([]K, 0, n), make([]K, 0, n)
		for i, k := range sorted {
			if i%2 == 0 {
				present = append(present, k)
			} else {
				fresh = append(fresh, k)
			}
		}
		pv := valsFor[K, V](present)
		row := []any{treebench.SizeName(n)}
		for _, alpha := range []float64{0.2, 0.6, 1.0} {
			t, err := openTree[K, V](b, n/2)
			if err != nil {
				return err
			}
			err = t.Build(b.ctx, treebench.Shuffled(present, 3), pv)
			ops := mixedOps[K, V](present, fresh, n, alpha, uint64(n))
			var d time.Duration
			if err == nil {
				d, err = applyTimed(b, t, ops)
			}
			if err == nil {
				err = t.Check(b.ctx)
			}
			t.Close()
			if err != nil {
				return fmt.Errorf("concurrent %d keys α=%.1f: %w", n, alpha, err)
			}
			r := benchfmt.Rate(int64(n), d, 1e9)
			row = append(row, r)
			if alpha == 0.6 {
				row = append(row, benchfmt.Ratio(r, cpu.mixed))
				if n >= 1<<20 && n <= 45_000_000 {
					at06 = append(at06, r)
				}
			}
		}
		tab.Add(row...)
	}
	if b.dev != nil {
		b.rep.Note("Fig. 5: the node pool is preallocated (Options.InitialNodes = n/2) so pool growth is not timed")
	}
	if len(at06) > 0 {
		b.rep.Note("concurrent α=0.6: harmonic mean %.3g G ops/s over 1M-45M keys; target %.1f (%s)", benchfmt.HMean(at06), targetConcurrent, benchfmt.Ratio(benchfmt.HMean(at06), targetConcurrent))
	}
	return nil
}

func applyTimed[K, V warpkit.Word](b *btBench, t *btree.Tree[K, V], ops btree.Ops[K, V]) (time.Duration, error) {
	ctx := b.ctx
	n := len(ops.Kinds)
	if b.dev == nil {
		res := btree.Results[K, V]{Found: make([]bool, n), Keys: make([]K, n), Vals: make([]V, n), Counts: make([]uint32, n)}
		return treebench.Best(1, func() error { return t.Apply(ctx, ops, res) })
	}
	kinds, keys, vals, his := make([]uint8, n), ops.Keys, ops.Vals, ops.His
	for i, k := range ops.Kinds {
		kinds[i] = uint8(k)
	}
	var bufs treebench.Bufs
	defer bufs.Free()
	var o btree.DeviceOps[K, V]
	var r btree.DeviceResults[K, V]
	var err error
	if o.Kinds, err = treebench.Up(&bufs, b.dev, kinds); err != nil {
		return 0, err
	}
	if o.Keys, err = treebench.Up(&bufs, b.dev, keys); err != nil {
		return 0, err
	}
	if o.Vals, err = treebench.Up(&bufs, b.dev, vals); err != nil {
		return 0, err
	}
	if o.His, err = treebench.Up(&bufs, b.dev, his); err != nil {
		return 0, err
	}
	if r.Found, err = treebench.Alloc[uint8](&bufs, b.dev, n); err != nil {
		return 0, err
	}
	if r.Vals, err = treebench.Alloc[V](&bufs, b.dev, n); err != nil {
		return 0, err
	}
	if r.Counts, err = treebench.Alloc[uint32](&bufs, b.dev, n); err != nil {
		return 0, err
	}
	return treebench.Best(1, func() error { return t.ApplyDevice(ctx, o, r) })
}
