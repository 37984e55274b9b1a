package lsm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/gpurt"
	"github.com/warpkit/warpkit/internal/sorteddict"
	"github.com/warpkit/warpkit/prim"
)

// maxLevels is the size of the device level table (kMaxLevels in lsm.cu).
const maxLevels = 32

// Defaults for count and range: queries per chunk; candidates a query may
// have to be walked (more send its chunk through the five-stage pipeline);
// candidates a pipeline chunk may gather before it is split.
const (
	defaultChunkQueries = 1 << 20
	defaultWalkCap      = 128
	defaultBudget       = 1 << 26
	workers             = 4
)

// gpuLSM is the CUDA backend. Host state (r, the level buffers, the log's
// length) changes only under the LSM's write lock; every call synchronizes
// its stream before it returns, also when it fails (so that no work it
// enqueued still reads the caller's slices or uses buffers it frees).
type gpuLSM[K, V warpkit.Word] struct {
	*sorteddict.Host[K, V] // the Go-slice forms of the operations
	levelState
	dev    *cuda.Device
	ownDev bool
	eng    *prim.Engine
	fn     kernels
	lkeys  []cuda.Slice[K] // level i, allocated when first reached, kept when emptied
	ltags  []cuda.Slice[uint32]
	tab    cuda.Slice[uint64] // level table: key pointers, then tag pointers
	log    cuda.Slice[V]      // value log; capacity >= logged
	upd    *worker[K, V]      // updates and cleanup
	pool   *sorteddict.Pool[worker[K, V]]
	pingUp int // ping-pong merge buffer size Options.Capacity reserved (0: none)
	// The staging run is the first levelState.s entries of stageK[cur] and
	// stageT[cur]; an update writes the next one into the other pair.
	stageK [2]gpurt.Buf[K]
	stageT [2]gpurt.Buf[uint32]
	cur    int
	// broken is set when an update or cleanup failed after it had begun to
	// change the levels; every later call returns it.
	broken error

	chunkQueries int
	walkCap      uint64
	budget       uint64
}

// worker is a stream and the scratch one call uses.
type worker[K, V warpkit.Word] struct {
	dev    *cuda.Device
	stream *cuda.Stream
	stage  gpurt.Staging
	ones   gpurt.Buf[uint8] // deletion flags of a deletions-only batch
	// Updates: the sorted batch, the batch merged with the staging run, and
	// the ping-pong merge buffers.
	batchK gpurt.Buf[K]
	batchT gpurt.Buf[uint32]
	mergeK gpurt.Buf[K]
	mergeT gpurt.Buf[uint32]
	pingK  [2]gpurt.Buf[K]
	pingT  [2]gpurt.Buf[uint32]
	// Count and range stages, and small counters read back by the host.
	cnt, off, segoff, ct, selT, counts, small32 gpurt.Buf[uint32]
	start, small64, walkTotal                   gpurt.Buf[uint64]
	ck, selK                                    gpurt.Buf[K]
	flags                                       gpurt.Buf[uint8]
}

func newWorker[K, V warpkit.Word](dev *cuda.Device) (*worker[K, V], error) {
	s, err := dev.NewStream()
	if err != nil {
		return nil, err
	}
	return &worker[K, V]{dev: dev, stream: s}, nil
}

// free closes the stream, which waits for its work, then frees the buffers
// that work may have used.
func (w *worker[K, V]) free() error {
	return gpurt.Release(w.stream, w)
}

// readBack copies src to the host, synchronizing the worker's stream.
func readBack[T cuda.Elem, K, V warpkit.Word](w *worker[K, V], src cuda.Slice[T]) ([]T, error) {
	return sorteddict.ReadBack(w.dev, &w.stage, w.stream, src)
}

type kernels struct {
	prep, fixup, bounds, gather, validate, mark, queryOffsets, walkCount *cuda.Function
	lookup, succ, pred, scatter, gatherValues, walkRange                 *cuda.Function
}

func loadKernels[K, V warpkit.Word](dev *cuda.Device) (kernels, error) {
	var k kernels
	ks, vs := "_k"+sorteddict.Width[K](), "_v"+sorteddict.Width[V]()
	return k, sorteddict.LoadKernels(dev, lsmPTX,
		sorteddict.Kernel{Dst: &k.prep, Name: "prep_batch" + ks + vs}, sorteddict.Kernel{Dst: &k.walkCount, Name: "walk_count" + ks},
		sorteddict.Kernel{Dst: &k.walkRange, Name: "walk_range" + ks + vs}, sorteddict.Kernel{Dst: &k.fixup, Name: "fixup_tombstones" + ks},
		sorteddict.Kernel{Dst: &k.bounds, Name: "bounds" + ks}, sorteddict.Kernel{Dst: &k.gather, Name: "gather_candidates" + ks},
		sorteddict.Kernel{Dst: &k.validate, Name: "validate" + ks}, sorteddict.Kernel{Dst: &k.mark, Name: "cleanup_mark" + ks},
		sorteddict.Kernel{Dst: &k.queryOffsets, Name: "query_offsets"}, sorteddict.Kernel{Dst: &k.lookup, Name: "lookup" + ks + vs},
		sorteddict.Kernel{Dst: &k.succ, Name: "successor" + ks + vs}, sorteddict.Kernel{Dst: &k.pred, Name: "predecessor" + ks + vs},
		sorteddict.Kernel{Dst: &k.scatter, Name: "cleanup_scatter" + ks + vs}, sorteddict.Kernel{Dst: &k.gatherValues, Name: "gather_values" + vs})
}

func newGPU[K, V warpkit.Word](dev *cuda.Device, own bool, b, capacity int) (*gpuLSM[K, V], error) {
	fn, err := loadKernels[K, V](dev)
	if err != nil {
		return nil, err
	}
	eng, err := prim.NewEngine(dev)
	if err != nil {
		return nil, err
	}
	g := &gpuLSM[K, V]{levelState: levelState{b: b}, dev: dev, ownDev: own, eng: eng, fn: fn,
		chunkQueries: defaultChunkQueries, walkCap: defaultWalkCap, budget: defaultBudget}
	fail := func(err error) (*gpuLSM[K, V], error) { g.Close(); return nil, err }
	if g.tab, err = cuda.Alloc[uint64](dev, 2*maxLevels); err != nil {
		return fail(err)
	}
	if err := g.tab.CopyFromHost(make([]uint64, 2*maxLevels)); err != nil {
		return fail(err)
	}
	if g.upd, err = newWorker[K, V](dev); err != nil {
		return fail(err)
	}
	g.Host = sorteddict.NewHost[K, V](dev, g, workers)
	g.pool = sorteddict.NewPool(workers, func() (*worker[K, V], error) { return newWorker[K, V](dev) }, (*worker[K, V]).free)
	if capacity > 0 {
		if err := g.reserve(capacity); err != nil {
			return fail(err)
		}
	}
	return g, nil
}

// reserve allocates what updates up to capacity resident entries need: the
// levels, the log, the ping-pong merge buffers, the staging buffers, a batch
// buffer, the buffer of a batch merged with the staging run, and prim's sort
// scratch for one batch (by sorting the uninitialized batch buffer once).
func (g *gpuLSM[K, V]) reserve(capacity int) error {
	w, s := g.upd, g.upd.stream
	r := uint64((capacity + g.b - 1) / g.b)
	top := bits.Len64(r) - 1
	if err := g.ensureLevels(top); err != nil {
		return err
	}
	if err := g.ensureLog(capacity); err != nil {
		return err
	}
	if top >= 2 {
		g.pingUp = g.b << (top - 1)
	}
	if err := g.reservePing(); err != nil {
		return err
	}
	bk, err1 := w.batchK.Get(g.dev, s, g.b)
	bt, err2 := w.batchT.Get(g.dev, s, g.b)
	_, err3 := w.mergeK.Get(g.dev, s, 2*g.b)
	_, err4 := w.mergeT.Get(g.dev, s, 2*g.b)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return err
	}
	for i := range 2 {
		_, err1 := g.stageK[i].Get(g.dev, s, g.b)
		_, err2 := g.stageT[i].Get(g.dev, s, g.b)
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
	}
	return errors.Join(prim.SortPairs(g.eng, s, bk, bt, prim.SortOptions{}), s.Synchronize())
}

// reservePing allocates the ping-pong merge buffers Options.Capacity reserved
// (a cascade into level t merges through buffers of b<<(t-1) entries).
func (g *gpuLSM[K, V]) reservePing() error {
	w := g.upd
	for i := range 2 {
		if g.pingUp > 0 {
			_, err1 := w.pingK[i].Get(g.dev, w.stream, g.pingUp)
			_, err2 := w.pingT[i].Get(g.dev, w.stream, g.pingUp)
			if err := errors.Join(err1, err2); err != nil {
				return err
			}
		}
	}
	return nil
}

func (g *gpuLSM[K, V]) state() levelState { return g.levelState }

func (g *gpuLSM[K, V]) Close() error {
	var errs []error
	if g.Host != nil {
		errs = append(errs, g.Host.Close())
	}
	if g.pool != nil {
		errs = append(errs, g.pool.Close())
	}
	if g.upd != nil {
		errs = append(errs, g.upd.free())
	}
	for i := range g.lkeys {
		errs = append(errs, g.lkeys[i].Free(), g.ltags[i].Free())
	}
	gpurt.FreeAll(g) // the staging run's buffers
	errs = append(errs, g.log.Free(), g.tab.Free())
	if g.eng != nil {
		errs = append(errs, g.eng.Close())
	}
	if g.ownDev {
		errs = append(errs, g.dev.Close())
	}
	return errors.Join(errs...)
}

// ensureLevels allocates levels 0..top and records them in the level table.
func (g *gpuLSM[K, V]) ensureLevels(top int) error {
	if top >= maxLevels {
		return fmt.Errorf("%w: level %d beyond %d", warpkit.ErrInvalidArgument, top, maxLevels)
	}
	for lv := len(g.lkeys); lv <= top; lv++ {
		k, err := cuda.Alloc[K](g.dev, g.b<<lv)
		if err != nil {
			return err
		}
		t, err := cuda.Alloc[uint32](g.dev, g.b<<lv)
		if err != nil {
			k.Free()
			return err
		}
		ptrs := []uint64{uint64(k.Ptr()), uint64(t.Ptr())}
		if err := errors.Join(g.tab.Sub(lv, lv+1).CopyFromHost(ptrs[:1]), g.tab.Sub(maxLevels+lv, maxLevels+lv+1).CopyFromHost(ptrs[1:])); err != nil {
			k.Free()
			t.Free()
			return err
		}
		g.lkeys, g.ltags = append(g.lkeys, k), append(g.ltags, t)
	}
	return nil
}

// ensureLog makes room for need logged values, keeping the logged ones.
func (g *gpuLSM[K, V]) ensureLog(need int) error {
	if g.log.Len() >= need {
		return nil
	}
	c := max(need, 2*g.log.Len(), 1<<16)
	nl, err := cuda.Alloc[V](g.dev, c)
	if err != nil && c > need {
		nl, err = cuda.Alloc[V](g.dev, need)
	}
	if err != nil {
		return err
	}
	if g.logged > 0 {
		s := g.upd.stream
		if err := errors.Join(cuda.CopyAsync(nl.Sub(0, g.logged), g.log.Sub(0, g.logged), s), s.Synchronize()); err != nil {
			nl.Free()
			return err
		}
	}
	g.log.Free()
	g.log = nl
	return nil
}

func (g *gpuLSM[K, V]) UpdateDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V], dels cuda.Slice[uint8], kind sorteddict.UpdateKind) (err error) {
	if g.broken != nil {
		return g.broken
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m := keys.Len()
	if m == 0 {
		return nil
	}
	if err := g.checkRoom(m, kind); err != nil {
		return err
	}
	w, s := g.upd, g.upd.stream
	defer sorteddict.SyncOnError(s, &err)
	chunks, rem := g.plan(m)
	n, nxt := g.s+m, 1-g.cur

	// Allocate everything before changing anything.
	if err := g.ensureLevels(bits.Len64(g.r+uint64(chunks)) - 1); err != nil {
		return err
	}
	if d := g.deepest(chunks); d >= 2 {
		for i := range 2 {
			if _, err := w.pingK[i].Get(g.dev, s, g.b<<(d-1)); err != nil {
				return err
			}
			if _, err := w.pingT[i].Get(g.dev, s, g.b<<(d-1)); err != nil {
				return err
			}
		}
	}
	if kind != sorteddict.DeletesOnly {
		if err := g.ensureLog(g.logged + m); err != nil {
			return err
		}
	}
	if kind == sorteddict.DeletesOnly {
		var err error
		if dels, err = w.ones.Get(g.dev, s, m); err != nil {
			return err
		}
		if err := dels.FillBytes(1, s); err != nil {
			return err
		}
	}
	// The batch is sorted straight into empty level 0 when it is exactly one
	// chunk and nothing is staged, straight into the next staging run when it
	// is short and nothing is staged, and otherwise into the batch buffer. T,
	// the batch merged with the staging run (n entries), goes to the next
	// staging run when it is short, otherwise to the merge buffer; its top
	// chunks·b entries then enter the levels, and the rest is copied to the
	// next staging run.
	var bk, tk, nk cuda.Slice[K]
	var bt, tt, nt cuda.Slice[uint32]
	get := func(kb *gpurt.Buf[K], tb *gpurt.Buf[uint32], n int) (cuda.Slice[K], cuda.Slice[uint32], error) {
		k, err1 := kb.Get(g.dev, s, n)
		t, err2 := tb.Get(g.dev, s, n)
		return k, t, errors.Join(err1, err2)
	}
	direct := g.s == 0 && m == g.b && g.r&1 == 0
	switch {
	case direct:
		bk, bt = g.lkeys[0], g.ltags[0]
	case g.s == 0 && chunks == 0:
		bk, bt, err = get(&g.stageK[nxt], &g.stageT[nxt], m)
	default:
		bk, bt, err = get(&w.batchK, &w.batchT, m)
	}
	if err != nil {
		return err
	}
	tk, tt = bk, bt
	if g.s > 0 {
		if chunks == 0 {
			tk, tt, err = get(&g.stageK[nxt], &g.stageT[nxt], n)
		} else {
			tk, tt, err = get(&w.mergeK, &w.mergeT, n)
		}
		if err != nil {
			return err
		}
	}
	if chunks > 0 && rem > 0 {
		if nk, nt, err = get(&g.stageK[nxt], &g.stageT[nxt], rem); err != nil {
			return err
		}
	}

	// prep also copies the values into the log; tombstones' slots are never
	// read, so a deletions-only batch logs nothing.
	var log cuda.Slice[V]
	if kind != sorteddict.DeletesOnly {
		log = g.log
	}
	if err := g.fn.prep.Launch(sorteddict.Grid(m), sorteddict.Block, 0, s, keys, dels, vals, uint64(m), uint64(m), uint32(g.logged), bk, bt, log); err != nil {
		return err
	}
	if err := prim.SortPairs(g.eng, s, bk, bt, prim.SortOptions{}); err != nil {
		return err
	}
	if kind != sorteddict.InsertsOnly { // without tombstones there is nothing to fix up
		if err := g.fn.fixup.Launch(sorteddict.Grid(m), sorteddict.Block, 0, s, bk, bt, uint64(m)); err != nil {
			return err
		}
	}
	if g.s > 0 { // the batch is newer than the staging run
		sk, st := g.stageRun()
		if err := prim.MergePairs(g.eng, s, bk, bt, sk, st, tk, tt, prim.MergeOptions[K]{}); err != nil {
			return err
		}
	}
	// From here on the levels change: a failure leaves them undefined.
	defer func() {
		if err != nil {
			g.broken = fmt.Errorf("lsm: an update failed after it had begun to change the levels; the structure is unusable: %w", err)
		}
	}()
	if kind != sorteddict.DeletesOnly {
		g.logged += m
	}
	// The chunks go in last-first, and the staging run keeps the lowest keys:
	// a key's segment may span runs, and its head (the entry that decides)
	// must end up in the newest of them.
	for ch := chunks - 1; ch >= 0; ch-- {
		lo := rem + ch*g.b
		if err := g.cascade(w, tk.Sub(lo, lo+g.b), tt.Sub(lo, lo+g.b), direct); err != nil {
			return err
		}
	}
	if chunks > 0 && rem > 0 {
		if err := errors.Join(cuda.CopyAsync(nk, tk.Sub(0, rem), s), cuda.CopyAsync(nt, tt.Sub(0, rem), s)); err != nil {
			return err
		}
	}
	if err := s.Synchronize(); err != nil {
		return err
	}
	g.cur, g.s = nxt, rem
	return nil
}

// stageRun returns the staging run (zero slices when it is empty).
func (g *gpuLSM[K, V]) stageRun() (cuda.Slice[K], cuda.Slice[uint32]) {
	if g.s == 0 {
		return cuda.Slice[K]{}, cuda.Slice[uint32]{}
	}
	return g.stageK[g.cur].View(g.s), g.stageT[g.cur].View(g.s)
}

// cascade inserts one sorted batch of b entries: merges it with the full
// levels 0..t-1 (newer run first) into the first empty level t.
func (g *gpuLSM[K, V]) cascade(w *worker[K, V], ak cuda.Slice[K], at cuda.Slice[uint32], direct bool) error {
	s := w.stream
	t := bits.TrailingZeros64(^g.r)
	if t == 0 {
		if !direct {
			if err := errors.Join(cuda.CopyAsync(g.lkeys[0], ak, s), cuda.CopyAsync(g.ltags[0], at, s)); err != nil {
				return err
			}
		}
		g.r++
		return nil
	}
	for i := 0; i < t; i++ {
		ok, ot := g.lkeys[t], g.ltags[t]
		if i < t-1 {
			n := g.b << (i + 1)
			k, err := w.pingK[i%2].Get(g.dev, s, n)
			if err != nil {
				return err
			}
			tg, err := w.pingT[i%2].Get(g.dev, s, n)
			if err != nil {
				return err
			}
			ok, ot = k, tg
		}
		if err := prim.MergePairs(g.eng, s, ak, at, g.lkeys[i], g.ltags[i], ok, ot, prim.MergeOptions[K]{}); err != nil {
			return err
		}
		ak, at = ok, ot
	}
	g.r++
	return nil
}

func (g *gpuLSM[K, V]) Cleanup(ctx context.Context) (err error) {
	if g.broken != nil {
		return g.broken
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	lvls := g.levels()
	if len(lvls) == 0 && g.s == 0 {
		return nil
	}
	w, s, n := g.upd, g.upd.stream, g.resident()
	defer func() {
		// Cleanup's buffers are as large as the structure: give them back,
		// down to what Options.Capacity reserved for updates, once no work
		// uses them (a failure may leave some enqueued). Reserving again is
		// best effort: should it fail, an update allocates (and reports
		// ErrOutOfMemory) on demand.
		sorteddict.SyncOnError(s, &err)
		for i := range 2 {
			w.pingK[i].Free()
			w.pingT[i].Free()
		}
		w.flags.Free()
		_ = g.reservePing()
	}()
	var pk [2]cuda.Slice[K]
	var pt [2]cuda.Slice[uint32]
	for i := range 2 {
		if pk[i], err = w.pingK[i].Get(g.dev, s, n); err != nil {
			return err
		}
		if pt[i], err = w.pingT[i].Get(g.dev, s, n); err != nil {
			return err
		}
	}
	flags, err := w.flags.Get(g.dev, s, n)
	if err != nil {
		return err
	}
	cnt, err := w.small32.Get(g.dev, s, 1)
	if err != nil {
		return err
	}
	// Merge the staging run and all levels, newest first, so each key's
	// entries stay newest first.
	mk, mt := g.stageRun()
	size, out := g.s, 0
	if g.s == 0 {
		mk, mt = g.lkeys[lvls[0]], g.ltags[lvls[0]]
		size, lvls = g.b<<lvls[0], lvls[1:]
	}
	for _, lv := range lvls {
		size += g.b << lv
		ok, ot := pk[out].Sub(0, size), pt[out].Sub(0, size)
		if err := prim.MergePairs(g.eng, s, mk, mt, g.lkeys[lv], g.ltags[lv], ok, ot, prim.MergeOptions[K]{}); err != nil {
			return err
		}
		mk, mt, out = ok, ot, 1-out
	}
	if err := g.fn.mark.Launch(sorteddict.Grid(n), sorteddict.Block, 0, s, mk, mt, uint64(n), flags); err != nil {
		return err
	}
	sk, st := pk[out], pt[out]
	if err := prim.SelectFlaggedPairs(g.eng, s, mk, mt, flags, sk, st, cnt); err != nil {
		return err
	}
	mm, err := readBack(w, cnt)
	if err != nil {
		return err
	}
	m := int(mm[0])
	r2, rem, nxt := uint64(m/g.b), m%g.b, 1-g.cur
	if err := g.ensureLevels(bits.Len64(r2) - 1); err != nil {
		return err
	}
	nk, err1 := g.stageK[nxt].Get(g.dev, s, rem)
	nt, err2 := g.stageT[nxt].Get(g.dev, s, rem)
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	var newlog cuda.Slice[V]
	if m > 0 {
		if newlog, err = cuda.Alloc[V](g.dev, m+g.b); err != nil {
			return err
		}
		if err := g.fn.scatter.Launch(sorteddict.Grid(m), sorteddict.Block, 0, s, sk, st, uint64(m), g.log, newlog, uint64(g.b), r2, g.tab, nk, nt, uint64(rem)); err != nil {
			newlog.Free()
			return err
		}
	}
	if err := s.Synchronize(); err != nil {
		// A device fault: the scatter may have rewritten part of the
		// levels, so the structure is undefined (see the package doc).
		newlog.Free()
		g.broken = fmt.Errorf("lsm: cleanup failed while it rewrote the levels; the structure is unusable: %w", err)
		return err
	}
	g.log.Free()
	g.log, g.r, g.s, g.cur, g.logged = newlog, r2, rem, nxt, m
	return nil
}

func (g *gpuLSM[K, V]) LookupDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V], found cuda.Slice[uint8]) error {
	if g.broken != nil {
		return g.broken
	}
	if keys.Len() == 0 {
		return ctx.Err()
	}
	sk, st := g.stageRun()
	return g.pool.With(ctx, func(w *worker[K, V]) error {
		n := keys.Len()
		err := g.fn.lookup.Launch(sorteddict.Grid(n), sorteddict.Block, 0, w.stream, g.tab, g.log, uint64(g.b), g.r, sk, st, uint64(g.s), keys, uint64(n), vals, found)
		return errors.Join(err, w.stream.Synchronize())
	})
}

func (g *gpuLSM[K, V]) NeighborDevice(ctx context.Context, keys, outKeys cuda.Slice[K], outVals cuda.Slice[V], found cuda.Slice[uint8], succ bool) error {
	if g.broken != nil {
		return g.broken
	}
	if keys.Len() == 0 {
		return ctx.Err()
	}
	sk, st := g.stageRun()
	f := g.fn.pred
	if succ {
		f = g.fn.succ
	}
	return g.pool.With(ctx, func(w *worker[K, V]) error {
		n := keys.Len()
		err := f.Launch(sorteddict.Grid(n), sorteddict.Block, 0, w.stream, g.tab, g.log, uint64(g.b), g.r, sk, st, uint64(g.s), keys, uint64(n), outKeys, outVals, found)
		return errors.Join(err, w.stream.Synchronize())
	})
}

func (g *gpuLSM[K, V]) CountDevice(ctx context.Context, lo, hi cuda.Slice[K], counts cuda.Slice[uint32]) error {
	if g.broken != nil {
		return g.broken
	}
	return g.pool.With(ctx, func(w *worker[K, V]) error {
		_, err := g.countRange(ctx, w, lo, hi, counts, false)
		return err
	})
}

func (g *gpuLSM[K, V]) RangeDevice(ctx context.Context, lo, hi cuda.Slice[K]) (*warpkit.DeviceRanges[K, V], error) {
	if g.broken != nil {
		return nil, g.broken
	}
	var res *warpkit.DeviceRanges[K, V]
	err := g.pool.With(ctx, func(w *worker[K, V]) error {
		counts, err := w.counts.Get(g.dev, w.stream, lo.Len())
		if err != nil {
			return err
		}
		res, err = g.countRange(ctx, w, lo, hi, counts, true)
		return err
	})
	return res, err
}

// countRange answers count (wantRange false) or range queries [lo[i], hi[i])
// chunk by chunk; counts receives each query's number of live keys, and for
// range it returns the pairs. A chunk whose queries all have at most walkCap
// candidates is walked (walk_count, walk_range); otherwise it goes through the
// paper's five stages.
func (g *gpuLSM[K, V]) countRange(ctx context.Context, w *worker[K, V], lo, hi cuda.Slice[K], counts cuda.Slice[uint32], wantRange bool) (res *warpkit.DeviceRanges[K, V], err error) {
	s, nq, nlev := w.stream, lo.Len(), len(g.levels())
	if g.s > 0 {
		nlev++ // the staging run
	}
	if err := counts.Zero(s); err != nil {
		return nil, err
	}
	var parts sorteddict.RangeParts[K, V]
	defer func() {
		if err != nil {
			sorteddict.SyncOnError(s, &err) // before the parts the work writes are freed
			parts.Free()
		}
	}()
	for q0 := 0; q0 < nq && nlev > 0; {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		qc := min(nq-q0, g.chunkQueries)
		walked, err := g.walk(w, lo.Sub(q0, q0+qc), hi.Sub(q0, q0+qc), counts.Sub(q0, q0+qc), wantRange, &parts)
		if err != nil {
			return nil, err
		}
		if !walked {
			if err := counts.Sub(q0, q0+qc).Zero(s); err != nil {
				return nil, err
			}
			for p0 := q0; p0 < q0+qc; {
				pc, total, err := g.stage1(w, lo, hi, p0, min(q0+qc-p0, g.chunkQueries), nlev)
				if err != nil {
					return nil, err
				}
				if total > 0 {
					if err := g.stages2to5(w, pc, nlev, int(total), counts.Sub(p0, p0+pc), wantRange, &parts); err != nil {
						return nil, err
					}
				}
				p0 += pc
			}
		}
		q0 += qc
	}
	if !wantRange {
		return nil, s.Synchronize()
	}
	return parts.Assemble(g.dev, s, counts, func(in, out, total cuda.Slice[uint32]) error {
		return prim.ExclusiveScan(g.eng, s, in, out, total)
	})
}

// walk counts one chunk of queries with walk_count and, for range, writes
// their pairs with walk_range. It reports false, having written nothing that
// stays, when a query has more than walkCap candidates.
func (g *gpuLSM[K, V]) walk(w *worker[K, V], lo, hi cuda.Slice[K], counts cuda.Slice[uint32], wantRange bool, parts *sorteddict.RangeParts[K, V]) (bool, error) {
	s, qc := w.stream, lo.Len()
	ovf, err1 := w.small32.Get(g.dev, s, 1)
	tot, err2 := w.walkTotal.Get(g.dev, s, 1)
	if err := errors.Join(err1, err2); err != nil {
		return false, err
	}
	err := errors.Join(ovf.Zero(s), tot.Zero(s))
	if err == nil {
		sk, st := g.stageRun()
		err = g.fn.walkCount.Launch(cuda.GridFor(qc, sorteddict.BlockSize), sorteddict.Block, 0, s, g.tab, uint64(g.b), g.r, sk, st, uint64(g.s), lo, hi, uint64(qc), g.walkCap, counts, ovf, tot)
	}
	if err != nil {
		return false, err
	}
	o, t := make([]uint32, 1), make([]uint64, 1)
	if err := w.stage.Reserve(g.dev, gpurt.Bytes[uint32](1)+gpurt.Bytes[uint64](1)); err != nil {
		return false, err
	}
	if err := sorteddict.Fetch(&w.stage, s, sorteddict.Pair(o, ovf), sorteddict.Pair(t, tot)); err != nil {
		return false, err
	}
	if o[0] > 0 {
		return false, nil
	}
	if !wantRange || t[0] == 0 {
		return true, nil
	}
	off, err := w.off.Get(g.dev, s, qc)
	if err != nil {
		return false, err
	}
	if err := prim.ExclusiveScan(g.eng, s, counts, off, cuda.Slice[uint32]{}); err != nil {
		return false, err
	}
	k, v, err := parts.Alloc(g.dev, int(t[0]))
	if err != nil {
		return false, err
	}
	sk, st := g.stageRun()
	return true, g.fn.walkRange.Launch(sorteddict.Grid(qc), sorteddict.Block, 0, s, g.tab, g.log, uint64(g.b), g.r, sk, st, uint64(g.s), lo, hi, uint64(qc), off, k, v)
}

// stage1 runs the per-level bounds of queries [q0, q0+qc) and returns how many
// queries fit the candidate budget (at least one) and their candidate total.
func (g *gpuLSM[K, V]) stage1(w *worker[K, V], lo, hi cuda.Slice[K], q0, qc, nlev int) (int, uint64, error) {
	s := w.stream
	for {
		cnt, err1 := w.cnt.Get(g.dev, s, qc*nlev)
		start, err2 := w.start.Get(g.dev, s, qc*nlev)
		tot, err3 := w.small64.Get(g.dev, s, 1)
		if err := errors.Join(err1, err2, err3); err != nil {
			return 0, 0, err
		}
		if err := tot.Zero(s); err != nil {
			return 0, 0, err
		}
		sk, st := g.stageRun()
		err := g.fn.bounds.Launch(cuda.GridFor(qc, sorteddict.BlockSize), sorteddict.Block, 0, s, g.tab, uint64(g.b), g.r, sk, st, uint64(g.s), uint32(nlev),
			lo.Sub(q0, q0+qc), hi.Sub(q0, q0+qc), uint64(qc), cnt, start, tot)
		if err != nil {
			return 0, 0, err
		}
		t, err := readBack(w, tot)
		if err != nil {
			return 0, 0, err
		}
		total := t[0]
		if total <= g.budget || qc == 1 {
			if total > math.MaxUint32 {
				return 0, 0, fmt.Errorf("%w: one query has %d candidates", warpkit.ErrInvalidArgument, total)
			}
			return qc, total, nil
		}
		qc = max(1, min(qc/2, int(uint64(qc)*g.budget/total)))
	}
}

// stages2to5 scans the candidate counts, gathers the candidates, sorts each
// query's candidates by key (stable: newest level first within a key),
// validates them into counts and, for range, compacts the live pairs into parts.
func (g *gpuLSM[K, V]) stages2to5(w *worker[K, V], qc, nlev, total int, counts cuda.Slice[uint32], wantRange bool, parts *sorteddict.RangeParts[K, V]) error {
	s, nseg := w.stream, qc*nlev
	cnt, _ := w.cnt.Get(g.dev, s, nseg)
	start, _ := w.start.Get(g.dev, s, nseg)
	off, err1 := w.off.Get(g.dev, s, nseg)
	segoff, err2 := w.segoff.Get(g.dev, s, qc+1)
	ck, err3 := w.ck.Get(g.dev, s, total)
	ct, err4 := w.ct.Get(g.dev, s, total)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return err
	}
	if err := prim.ExclusiveScan(g.eng, s, cnt, off, cuda.Slice[uint32]{}); err != nil {
		return err
	}
	if err := g.fn.queryOffsets.Launch(sorteddict.Grid(qc+1), sorteddict.Block, 0, s, off, uint32(nlev), uint64(qc), uint32(total), segoff); err != nil {
		return err
	}
	stk, stt := g.stageRun()
	if err := g.fn.gather.Launch(sorteddict.TileGrid(total, tileItems), sorteddict.Block, 0, s, g.tab, stk, stt, off, start, uint64(nseg), uint64(total), ck, ct); err != nil {
		return err
	}
	// One query is one segment: sort it with the device-wide radix sort (same
	// stable order), which also takes the candidates of a single query that
	// exceed prim.MaxSegmentedElements. Several queries have at most
	// g.budget candidates in all (stage1 splits them).
	sortCandidates := func() error { return prim.SegmentedSortPairs(g.eng, s, ck, ct, segoff) }
	if qc == 1 {
		sortCandidates = func() error { return prim.SortPairs(g.eng, s, ck, ct, prim.SortOptions{}) }
	}
	if err := sortCandidates(); err != nil {
		return err
	}
	var flags cuda.Slice[uint8]
	if wantRange {
		var err error
		if flags, err = w.flags.Get(g.dev, s, total); err != nil {
			return err
		}
	}
	if err := g.fn.validate.Launch(sorteddict.TileGrid(total, tileItems), sorteddict.Block, 0, s, ck, ct, segoff, uint64(qc), uint64(total), counts, flags); err != nil {
		return err
	}
	if !wantRange {
		return nil
	}
	sk, err1 := w.selK.Get(g.dev, s, total)
	st, err2 := w.selT.Get(g.dev, s, total)
	sel32, err3 := w.small32.Get(g.dev, s, 1)
	if err := errors.Join(err1, err2, err3); err != nil {
		return err
	}
	if err := prim.SelectFlaggedPairs(g.eng, s, ck, ct, flags, sk, st, sel32); err != nil {
		return err
	}
	nv, err := readBack(w, sel32)
	if err != nil {
		return err
	}
	n := int(nv[0])
	k, v, err := parts.Alloc(g.dev, n)
	if err != nil || n == 0 {
		return err
	}
	return errors.Join(cuda.CopyAsync(k, sk.Sub(0, n), s), g.fn.gatherValues.Launch(sorteddict.Grid(n), sorteddict.Block, 0, s, st, g.log, uint64(n), v))
}

// tileItems is kItems in lsm.cu: elements per thread of the tiled stages.
const tileItems = 4

func (g *gpuLSM[K, V]) snapshot() (*snapshot[K, V], error) {
	sn := &snapshot[K, V]{state: g.levelState, keys: map[int][]K{}, tags: map[int][]uint32{}}
	if err := g.upd.stream.Synchronize(); err != nil {
		return nil, err
	}
	for _, lv := range g.levels() {
		k, err1 := g.lkeys[lv].ToHost()
		t, err2 := g.ltags[lv].ToHost()
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
		sn.keys[lv], sn.tags[lv] = k, t
	}
	if sk, st := g.stageRun(); g.s > 0 {
		var err1, err2 error
		sn.stageK, err1 = sk.ToHost()
		sn.stageT, err2 = st.ToHost()
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
	}
	if g.logged > 0 {
		var err error
		if sn.log, err = g.log.Sub(0, g.logged).ToHost(); err != nil {
			return nil, err
		}
	}
	return sn, nil
}
