// Package mvbtreebench is warp bench mvbtree: the multiversion B-tree
// (Awad's thesis ch. 4, Fig 4.2) against package btree in the same run, and
// the snapshots readers hold (the spec's snapshot row). cmd/warp dispatches
// to Run.
package mvbtreebench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/bench/internal/treebench"
	"github.com/warpkit/warpkit/btree"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/benchfmt"
	"github.com/warpkit/warpkit/internal/benchfmt/benchplot"
	"github.com/warpkit/warpkit/internal/cli"
	"github.com/warpkit/warpkit/mvbtree"
)

// Summary is the line warp bench -h prints for mvbtree.
const Summary = "multiversion B-tree: thesis Fig 4.2 (build, find; ViB, VoB) against btree, snapshots held beside inserts"

// Targets of issue 18 (H100), G keys/s, and ratios to btree in the same run.
const (
	targetInPlaceBuild   = 0.6
	targetInPlaceVsBTree = 0.9
	targetCopyBuild      = 0.35
	targetCopyVsBTree    = 0.45
	targetFind           = 6.0
	targetFindVsBTree    = 0.95
	targetSnapFind       = 4.0
	targetSnapVsLatest   = 0.8
	targetSnapshotMicros = 200
	targetWideVsNarrow   = 0.7 // 64-bit keys and values against 32-bit, each rate
)

// The thesis's Fig 4.2 (V100, CUDA 11.5; spec §2), M keys/s: build from empty
// and find all, for the unversioned B-Tree, the in-place rule (ViB) and
// always-copy (VoB).
var thesis = struct{ build, find [3]float64 }{
	build: [3]float64{240.1, 216.5, 94.6},
	find:  [3]float64{1513, 1454, 1550},
}

// targetsFrom is the least tree size the Targets table's means take (the
// issue's 1M-45M; tests lower it to see the table on the emulation).
var targetsFrom = 1 << 20

const batch = 1 << 20 // keys per insert batch (the spec's snapshot row; Fig 4.2 uses it too)

// Run runs warp bench mvbtree with args (its flags) and writes the report to w.
func Run(ctx context.Context, args []string, w io.Writer) error {
	fs := cli.NewFlags("bench mvbtree", "[--json] [--keys 32|64|32,64] [--quick] [--sizes 1M,4M,...] [--snapshots 1,8,64] [--plot DIR]\n\n"+
		"Needs a GPU (the CPU backend's copy-on-write map has no node versions to measure).")
	asJSON := fs.Bool("json", false, "print JSON")
	var keyBits []int
	cli.IntListVarFlag(fs, &keyBits, "keys", []int{32}, 32, 64, "key and value widths in bits, 32 or 64: each runs every table; 32,64 also prints the 64-bit rates against the 32-bit ones")
	quick := fs.Bool("quick", false, "small sizes (seconds)")
	sizesFlag := fs.String("sizes", "", "tree sizes of Fig 4.2 (default 1M,2M,4M,8M,16M,32M,45M)")
	snapsFlag := fs.String("snapshots", "1,8,64", "open snapshots of the snapshot table (comma-separated)")
	snapKeys := fs.String("snap-keys", "", "keys inserted in the snapshot table (default 45M; --quick 4M)")
	plotDir := fs.String("plot", "", "also write each table as a plot, `DIR`/<table>.png and .svg")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	b := &bench{ctx: ctx, quick: *quick}
	b.sizes = []int{1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20, 32 << 20, 45_000_000}
	b.snapTotal = 45_000_000
	if b.quick {
		b.sizes, b.snapTotal = []int{1 << 20, 4 << 20}, 4<<20
	}
	var err error
	if *sizesFlag != "" {
		if b.sizes, err = treebench.ParseSizes(*sizesFlag, 1<<10); err != nil {
			return err
		}
	}
	if b.snaps, err = treebench.ParseSizes(*snapsFlag, 1); err != nil {
		return err
	}
	if *snapKeys != "" {
		s, err := treebench.ParseSizes(*snapKeys, 1<<10)
		if err != nil {
			return err
		}
		if len(s) != 1 {
			return fmt.Errorf("%w: --snap-keys takes one size", cli.ErrUsage)
		}
		b.snapTotal = s[0]
	}
	widths := map[int]bool{}
	for _, k := range keyBits {
		if k != 32 && k != 64 || widths[k] {
			return fmt.Errorf("%w: --keys takes 32 and 64, each once", cli.ErrUsage)
		}
		widths[k] = true
	}
	dev, err := openDevice()
	if errors.Is(err, cuda.ErrNoDevice) {
		return fmt.Errorf("warp bench mvbtree needs a GPU: %w", err)
	}
	if err != nil {
		return err
	}
	defer dev.Close()
	b.dev = dev
	p := dev.Properties()
	names := make([]string, len(keyBits))
	for i, k := range keyBits {
		names[i] = strconv.Itoa(k)
	}
	b.rep = benchfmt.NewReport(fmt.Sprintf("warp bench mvbtree: %s-bit keys and values", strings.Join(names, "- and ")),
		fmt.Sprintf("%s (cc %s, %d SMs)", p.Name, p.ComputeCapability(), p.Multiprocessors))
	if !*asJSON {
		b.rep.Stream(w)
	}
	rates := map[int]widthRates{}
	for _, k := range keyBits {
		if len(keyBits) > 1 {
			b.width = fmt.Sprintf(" (%d-bit)", k)
		}
		var r widthRates
		if k == 32 {
			r, err = run[uint32, uint32](b)
		} else {
			r, err = run[uint64, uint64](b)
		}
		if err != nil {
			return err
		}
		rates[k] = r
	}
	if len(rates) == 2 {
		wideVsNarrow(b, rates[64], rates[32])
	}
	return benchplot.Finish(b.rep, w, *asJSON, *plotDir)
}

// widthRates are one key width's Fig 4.2 rates, harmonic means over the
// sizes run (G keys/s).
type widthRates struct{ vib, vob, find, snapFind float64 }

// wideVsNarrow prints the 64-bit rates against the 32-bit ones of the same
// run (the "64-bit keys ≥ 0.7× the 32-bit rates").
func wideVsNarrow(b *bench, wide, narrow widthRates) {
	tab := b.rep.Table("64-bit keys and values against 32-bit (Fig 4.2, harmonic means over the sizes run)",
		"measure", "32-bit G/s", "64-bit G/s", "64 / 32", "target", "met")
	for _, r := range []struct {
		name       string
		wide, narr float64
	}{
		{"ViB build", wide.vib, narrow.vib},
		{"VoB build", wide.vob, narrow.vob},
		{"latest find", wide.find, narrow.find},
		{"snapshot find (depth 1)", wide.snapFind, narrow.snapFind},
	} {
		ratio := r.wide / r.narr
		tab.Add(r.name, r.narr, r.wide, benchfmt.Ratio(r.wide, r.narr), targetWideVsNarrow, benchfmt.YesNo(ratio >= targetWideVsNarrow))
	}
}

// openDevice opens the GPU (tests give the benchmark an emulated one).
var openDevice = func() (*cuda.Device, error) { return cuda.Open(0) }

type bench struct {
	ctx       context.Context
	dev       *cuda.Device
	quick     bool
	sizes     []int
	snaps     []int
	snapTotal int
	rep       *benchfmt.Report
	width     string // " (64-bit)" in the tables' titles when the run has both widths
}

func run[K, V warpkit.Word](b *bench) (widthRates, error) {
	r, err := fig42[K, V](b)
	if err != nil {
		return r, err
	}
	return r, snapshots[K, V](b)
}

// inserter is what both trees' device batches offer.
type inserter[K, V warpkit.Word] interface {
	InsertDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V]) error
}

// insertAll inserts the device pairs in batches and returns the time.
func insertAll[K, V warpkit.Word](ctx context.Context, t inserter[K, V], dk cuda.Slice[K], dv cuda.Slice[V]) (time.Duration, error) {
	start := time.Now()
	for i := 0; i < dk.Len(); i += batch {
		j := min(i+batch, dk.Len())
		if err := t.InsertDevice(ctx, dk.Sub(i, j), dv.Sub(i, j)); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

type finder[K, V warpkit.Word] interface {
	LookupDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V], found cuda.Slice[uint8]) error
}

// findAll looks every key up (best of two) and checks that each was found.
func findAll[K, V warpkit.Word](ctx context.Context, t finder[K, V], dk cuda.Slice[K], dv cuda.Slice[V], df cuda.Slice[uint8]) (float64, error) {
	d, err := treebench.Best(2, func() error { return t.LookupDevice(ctx, dk, dv, df) })
	if err != nil {
		return 0, err
	}
	f, err := df.ToHost()
	if err != nil {
		return 0, err
	}
	for i, x := range f {
		if x == 0 {
			return 0, fmt.Errorf("key %d of %d not found", i, len(f))
		}
	}
	return benchfmt.Rate(int64(dk.Len()), d, 1e9), nil
}

// openMV opens a tree with the default pool (super blocks of 256 memory
// blocks: 16M nodes at most) or, big, with a pool of up to 60% of the
// device's free memory (the snapshot table's versions need more).
func openMV[K, V warpkit.Word](b *bench, mode mvbtree.CopyMode, big bool) (*mvbtree.Tree[K, V], error) {
	return openMVWith[K, V](b, mvbtree.Options{Copy: mode}, big)
}

func openMVWith[K, V warpkit.Word](b *bench, opts mvbtree.Options, big bool) (*mvbtree.Tree[K, V], error) {
	opts.Backend, opts.Device = warpkit.CUDA, b.dev
	if big {
		free, _, err := b.dev.MemInfo()
		if err != nil {
			return nil, err
		}
		opts.MaxPoolBytes = int64(free / 10 * 6)
	}
	return mvbtree.New[K, V](opts)
}

// fig42 reproduces Fig 4.2: each tree built from empty by inserting n random
// distinct keys generated on the device (treebench.DeviceKeys; batches of
// 2^20, device-resident), then every key found;
// btree, and mvbtree under each copy rule, with no snapshot open (the
// thesis's experiment): the in-place rule then writes in place, always-copy
// copies every node it writes. Snapshot find: a snapshot taken after the
// build, every key then updated (each node one version deep), every key
// found in the snapshot.
func fig42[K, V warpkit.Word](b *bench) (widthRates, error) {
	ctx := b.ctx
	var all [4][]float64 // every size's ViB, VoB, find, snapshot find
	rates := func() widthRates {
		return widthRates{benchfmt.HMean(all[0]), benchfmt.HMean(all[1]), benchfmt.HMean(all[2]), benchfmt.HMean(all[3])}
	}
	tab := b.rep.Table("Fig 4.2"+b.width+": build from empty, then find all (G keys/s)",
		"keys", "height", "btree-ins", "ViB-ins", "/btree", "VoB-ins", "/btree", "pinned-ins", "btree-find", "mv-find", "/btree", "snap-find", "/latest")
	var vib, vob, vibR, vobR, find, findR, snapF []float64
	for _, n := range b.sizes {
		if err := ctx.Err(); err != nil {
			return rates(), err
		}
		var bufs treebench.Bufs
		dk, dv, err := treebench.DeviceKeys[K, V](&bufs, b.dev, n, uint64(n), 0x5bd1e995)
		if err != nil {
			bufs.Free()
			return rates(), err
		}
		out, err := treebench.Alloc[V](&bufs, b.dev, n)
		if err != nil {
			bufs.Free()
			return rates(), err
		}
		df, err := treebench.Alloc[uint8](&bufs, b.dev, n)
		if err != nil {
			bufs.Free()
			return rates(), err
		}
		row, err := fig42Row[K, V](b, n, dk, dv, out, df)
		bufs.Free()
		if err != nil {
			return rates(), fmt.Errorf("%d keys: %w", n, err)
		}
		for i, v := range []float64{row.vib, row.vob, row.find, row.snapFind} {
			all[i] = append(all[i], v)
		}
		tab.Add(treebench.SizeName(n), row.height, row.btIns, row.vib, benchfmt.Ratio(row.vib, row.btIns), row.vob, benchfmt.Ratio(row.vob, row.btIns),
			row.pinned, row.btFind, row.find, benchfmt.Ratio(row.find, row.btFind), row.snapFind, benchfmt.Ratio(row.snapFind, row.find))
		if n >= targetsFrom {
			vib, vob, find, snapF = append(vib, row.vib), append(vob, row.vob), append(find, row.find), append(snapF, row.snapFind)
			vibR, vobR, findR = append(vibR, row.vib/row.btIns), append(vobR, row.vob/row.btIns), append(findR, row.find/row.btFind)
		}
	}
	b.rep.Note("thesis (V100): build B-Tree / ViB / VoB %.1f / %.1f / %.1f M keys/s (ViB 1.11x slower, VoB 2.5x), find %.0f / %.0f / %.0f M/s; the spec scales targets by the H100's bandwidth (x3.7)",
		thesis.build[0], thesis.build[1], thesis.build[2], thesis.find[0], thesis.find[1], thesis.find[2])
	b.rep.Note("ViB = Copy: CopyIfStale (copy when the node's stamp is not the batch's), VoB = CopyAlways, pinned = CopyWhenPinned (the default: copy only what an open snapshot sees; with none open, in place); inserts in batches of 2^20 device-resident keys; finds of every key in one batch")
	if len(vib) == 0 {
		return rates(), nil
	}
	// The rates' targets are the 32-bit tree's; 64-bit keys and values are
	// held to the 32-bit rates (wideVsNarrow), their ratios to btree to the
	// same targets.
	var k0 K
	var v0 V
	wide := any(k0) != any(uint32(0)) || any(v0) != any(uint32(0))
	sum := b.rep.Table("Targets"+b.width+" (harmonic mean over the sizes from "+treebench.SizeName(targetsFrom)+" keys; thesis: V100, 32-bit)", "measure", "value", "target", "vs target", "met", "thesis")
	const thesisG = 1e-3 // M keys/s to G keys/s
	for _, r := range []struct {
		name           string
		v, tgt, thesis float64
		rate           bool
	}{
		{"ViB build G keys/s", benchfmt.HMean(vib), targetInPlaceBuild, thesis.build[1] * thesisG, true},
		{"ViB build / btree", benchfmt.HMean(vibR), targetInPlaceVsBTree, thesis.build[1] / thesis.build[0], false},
		{"VoB build G keys/s", benchfmt.HMean(vob), targetCopyBuild, thesis.build[2] * thesisG, true},
		{"VoB build / btree", benchfmt.HMean(vobR), targetCopyVsBTree, thesis.build[2] / thesis.build[0], false},
		{"latest find G/s", benchfmt.HMean(find), targetFind, thesis.find[1] * thesisG, true},
		{"latest find / btree", benchfmt.HMean(findR), targetFindVsBTree, thesis.find[1] / thesis.find[0], false},
		{"snapshot find G/s (depth 1)", benchfmt.HMean(snapF), targetSnapFind, math.NaN(), true},
	} {
		th := "-"
		if !math.IsNaN(r.thesis) {
			th = strconv.FormatFloat(r.thesis, 'f', 3, 64)
		}
		if wide && r.rate {
			sum.Add(r.name, r.v, "-", "-", "-", th)
			continue
		}
		sum.Add(r.name, r.v, r.tgt, benchfmt.Ratio(r.v, r.tgt), benchfmt.YesNo(r.v >= r.tgt), th)
	}
	if wide {
		b.rep.Note("64-bit rates: their target is 0.7x the 32-bit rates of the same run (--keys 32,64 prints them)")
	}
	return rates(), nil
}

type fig42Result struct {
	height                                          int
	btIns, vib, vob, pinned, btFind, find, snapFind float64
}

func fig42Row[K, V warpkit.Word](b *bench, n int, dk cuda.Slice[K], dv cuda.Slice[V], out cuda.Slice[V], df cuda.Slice[uint8]) (fig42Result, error) {
	ctx := b.ctx
	var r fig42Result
	rate := func(d time.Duration) float64 { return benchfmt.Rate(int64(n), d, 1e9) }
	bt, err := btree.New[K, V](btree.Options{Backend: warpkit.CUDA, Device: b.dev})
	if err != nil {
		return r, err
	}
	d, err := insertAll[K, V](ctx, bt, dk, dv)
	if err == nil {
		r.btIns = rate(d)
		r.btFind, err = findAll[K, V](ctx, bt, dk, out, df)
	}
	bt.Close()
	if err != nil {
		return r, fmt.Errorf("btree: %w", err)
	}
	for _, m := range []struct {
		mode mvbtree.CopyMode
		dst  *float64
	}{{mvbtree.CopyAlways, &r.vob}, {mvbtree.CopyWhenPinned, &r.pinned}, {mvbtree.CopyIfStale, &r.vib}} {
		t, err := openMV[K, V](b, m.mode, false)
		if err != nil {
			return r, err
		}
		d, err := insertAll[K, V](ctx, t, dk, dv)
		if err != nil {
			t.Close()
			return r, fmt.Errorf("mvbtree %v: %w", m.mode, err)
		}
		*m.dst = rate(d)
		if m.mode != mvbtree.CopyIfStale {
			t.Close()
			continue
		}
		// The in-place tree answers the finds.
		st, err := t.Stats(ctx)
		if err == nil {
			r.height = st.Height
			r.find, err = findAll[K, V](ctx, t, dk, out, df)
		}
		if err == nil {
			r.snapFind, err = snapshotFind[K, V](b, t, dk, out, df)
		}
		t.Close()
		if err != nil {
			return r, fmt.Errorf("mvbtree finds: %w", err)
		}
	}
	return r, nil
}

// snapshotFind takes a snapshot, updates every key (one version per node
// written) and finds every key in the snapshot.
func snapshotFind[K, V warpkit.Word](b *bench, t *mvbtree.Tree[K, V], dk cuda.Slice[K], out cuda.Slice[V], df cuda.Slice[uint8]) (float64, error) {
	s, err := t.Snapshot(b.ctx)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	if _, err := insertAll[K, V](b.ctx, t, dk, out); err != nil { // new values (whatever out holds)
		return 0, err
	}
	return findAll[K, V](b.ctx, s, dk, out, df)
}

// snapshots measures the spec's snapshot row: k snapshots opened at even
// intervals while snapTotal keys are inserted in 2^20 batches, then left
// open: the versions they pin against the bound k x changed nodes x node
// size, lookups in the oldest snapshot against the latest version, and the
// host latency of Snapshot()+Close() on an idle tree.
func snapshots[K, V warpkit.Word](b *bench) error {
	ctx := b.ctx
	tab := b.rep.Table(fmt.Sprintf("Snapshots held%s during %s inserts (batches of 2^20)", b.width, treebench.SizeName(b.snapTotal)),
		"k", "indexed", "insert G/s", "nodes", "versions", "indexes", "pinned MB", "bound MB", "/bound", "oldest G/s", "middle G/s", "newest G/s", "latest G/s", "oldest/latest", "middle/latest", "take+close us", "vacuum ms")
	n := b.snapTotal
	var bufs treebench.Bufs
	defer bufs.Free()
	dk, dv, err := treebench.DeviceKeys[K, V](&bufs, b.dev, n, 77, 0x9e3779b9)
	if err != nil {
		return err
	}
	out, err := treebench.Alloc[V](&bufs, b.dev, n)
	if err != nil {
		return err
	}
	df, err := treebench.Alloc[uint8](&bufs, b.dev, n)
	if err != nil {
		return err
	}
	nodeBytes := 128
	var k0 K
	var v0 V
	if any(k0) != any(uint32(0)) || any(v0) != any(uint32(0)) {
		nodeBytes = 256
	}
	type cell struct {
		k       int
		indexed bool
	}
	var cells []cell
	for _, k := range b.snaps {
		cells = append(cells, cell{k, true})
		if k+1 >= mvbtree.VersionIndexMin { // chains this long: writers index them unless told not to
			cells = append(cells, cell{k, false})
		}
	}
	var verdicts [][]any
	for _, c := range cells {
		k := c.k
		t, err := openMVWith[K, V](b, mvbtree.Options{NoVersionIndexes: !c.indexed}, true)
		if err != nil {
			return err
		}
		batches := (n + batch - 1) / batch
		var open []*mvbtree.Snapshot[K, V]
		start := time.Now()
		for i, bi := 0, 0; i < n; i, bi = i+batch, bi+1 {
			j := min(i+batch, n)
			if err := t.InsertDevice(ctx, dk.Sub(i, j), dv.Sub(i, j)); err != nil {
				t.Close()
				return err
			}
			// k snapshots spread over the batches, the first after the
			// first batch (more than one per gap when k > batches: those
			// share a stamp).
			for len(open) < (bi+1)*k/batches || len(open) == 0 {
				s, err := t.Snapshot(ctx)
				if err != nil {
					t.Close()
					return err
				}
				open = append(open, s)
			}
		}
		ins := benchfmt.Rate(int64(n), time.Since(start), 1e9)
		st, err := t.Stats(ctx)
		if err != nil {
			t.Close()
			return err
		}
		// The oldest snapshot saw the first batch only: look those keys up
		// in it (each found), and the same keys in the latest version.
		first := min(batch, n)
		snapRate, err := findAll[K, V](ctx, open[0], dk.Sub(0, first), out.Sub(0, first), df.Sub(0, first))
		var latest, middle, newest float64
		if err == nil {
			middle, err = findAll[K, V](ctx, open[len(open)/2], dk.Sub(0, first), out.Sub(0, first), df.Sub(0, first))
		}
		if err == nil {
			newest, err = findAll[K, V](ctx, open[len(open)-1], dk.Sub(0, first), out.Sub(0, first), df.Sub(0, first))
		}
		if err == nil {
			latest, err = findAll[K, V](ctx, t, dk.Sub(0, first), out.Sub(0, first), df.Sub(0, first))
		}
		if err != nil {
			t.Close()
			return err
		}
		const takes = 200
		d, err := treebench.Best(1, func() error {
			for range takes {
				s, err := t.Snapshot(ctx)
				if err != nil {
					return err
				}
				if err := s.Close(); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Close()
			return err
		}
		for _, s := range open {
			s.Close()
		}
		vstart := time.Now()
		err = t.Vacuum(ctx)
		vac := time.Since(vstart)
		if err == nil {
			var after mvbtree.Stats
			if after, err = t.Stats(ctx); err == nil && after.Versions != 0 {
				err = fmt.Errorf("%d versions left after every snapshot closed and Vacuum", after.Versions)
			}
		}
		t.Close()
		if err != nil {
			return err
		}
		pinned := float64(st.PinnedVersions*nodeBytes) / (1 << 20)
		bound := float64(k*st.Nodes*nodeBytes) / (1 << 20)
		take := float64(d.Microseconds()) / takes
		tab.Add(k, c.indexed, ins, st.Nodes, st.Versions, st.VersionIndexes, pinned, bound, benchfmt.Ratio(pinned, bound), snapRate, middle, newest, latest, benchfmt.Ratio(snapRate, latest), benchfmt.Ratio(middle, latest),
			take, float64(vac.Microseconds())/1e3)
		verdicts = append(verdicts, []any{k, c.indexed, benchfmt.YesNo(pinned <= bound), benchfmt.YesNo(snapRate >= targetSnapVsLatest*latest),
			benchfmt.YesNo(middle >= targetSnapVsLatest*latest), benchfmt.YesNo(take <= targetSnapshotMicros)})
	}
	b.rep.Note("bound: k x the latest version's nodes x the node size (every node changed since every snapshot); targets: pinned <= bound, snapshot find >= %.1fx latest, Snapshot()+Close() <= %d us; oldest/middle/newest: the first batch's keys found in the oldest snapshot (its versions behind as many newer ones as snapshots after it), in snapshot k/2 and in the newest; indexed: Options.NoVersionIndexes unset (indexes: the version indexes writers built for chains of 4 or more: a query reads head, index, version)", targetSnapVsLatest, targetSnapshotMicros)
	met := b.rep.Table("Snapshot targets"+b.width, "k", "indexed", "pinned <= bound", fmt.Sprintf("oldest >= %.1fx latest", targetSnapVsLatest),
		fmt.Sprintf("middle >= %.1fx latest", targetSnapVsLatest), fmt.Sprintf("take+close <= %d us", targetSnapshotMicros))
	for _, v := range verdicts {
		met.Add(v...)
	}
	return nil
}
