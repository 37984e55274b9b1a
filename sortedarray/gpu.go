package sortedarray

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/gpurt"
	"github.com/warpkit/warpkit/internal/sorteddict"
	"github.com/warpkit/warpkit/prim"
)

const workers = 4

// gpuSA is the CUDA backend: the array lives in one of two buffers (the
// other receives the next merge); host state changes only under the write
// lock, and every call synchronizes its stream before it returns, also when
// it fails.
type gpuSA[K, V warpkit.Word] struct {
	*sorteddict.Host[K, V] // the Go-slice forms of the operations
	dev                    *cuda.Device
	ownDev                 bool
	eng                    *prim.Engine
	fn                     kernels
	keys                   [2]cuda.Slice[K] // capacity; the array is keys[cur][:n]
	vals                   [2]cuda.Slice[V]
	cur, n                 int
	upd                    *worker[K, V]
	pool                   *sorteddict.Pool[worker[K, V]]
}

type worker[K, V warpkit.Word] struct {
	dev                 *cuda.Device
	stream              *cuda.Stream
	stage               gpurt.Staging
	bk, ck              gpurt.Buf[K]
	bt, ct, small, cnts gpurt.Buf[uint32]
	cv                  gpurt.Buf[V]
	keepB, keepA, ones  gpurt.Buf[uint8]
	drops, starts, tot  gpurt.Buf[uint64]
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

type kernels struct {
	prep, fixup, mark, unmark, bounds, gatherValues *cuda.Function
	lookup, rangeGather, neighbor                   *cuda.Function
}

func newGPU[K, V warpkit.Word](dev *cuda.Device, own bool, capacity int) (*gpuSA[K, V], error) {
	var fn kernels
	ks, vs := "_k"+sorteddict.Width[K](), "_v"+sorteddict.Width[V]()
	err := sorteddict.LoadKernels(dev, saPTX,
		sorteddict.Kernel{Dst: &fn.prep, Name: "prep_batch" + ks + vs}, sorteddict.Kernel{Dst: &fn.fixup, Name: "fixup_tombstones" + ks},
		sorteddict.Kernel{Dst: &fn.mark, Name: "mark" + ks}, sorteddict.Kernel{Dst: &fn.unmark, Name: "unmark"},
		sorteddict.Kernel{Dst: &fn.bounds, Name: "bounds" + ks}, sorteddict.Kernel{Dst: &fn.gatherValues, Name: "gather_values" + vs},
		sorteddict.Kernel{Dst: &fn.lookup, Name: "lookup" + ks + vs}, sorteddict.Kernel{Dst: &fn.rangeGather, Name: "range_gather" + ks + vs},
		sorteddict.Kernel{Dst: &fn.neighbor, Name: "neighbor" + ks + vs})
	if err != nil {
		return nil, err
	}
	eng, err := prim.NewEngine(dev)
	if err != nil {
		return nil, err
	}
	g := &gpuSA[K, V]{dev: dev, ownDev: own, eng: eng, fn: fn}
	if g.upd, err = newWorker[K, V](dev); err != nil {
		g.Close()
		return nil, err
	}
	g.Host = sorteddict.NewHost[K, V](dev, g, workers)
	g.pool = sorteddict.NewPool(workers, func() (*worker[K, V], error) { return newWorker[K, V](dev) }, (*worker[K, V]).free)
	if err := g.reserve(capacity); err != nil {
		g.Close()
		return nil, err
	}
	return g, nil
}

func (g *gpuSA[K, V]) len() int { return g.n }

func (g *gpuSA[K, V]) Close() error {
	var errs []error
	if g.Host != nil {
		errs = append(errs, g.Host.Close(), g.pool.Close())
	}
	if g.upd != nil {
		errs = append(errs, g.upd.free())
	}
	for i := range 2 {
		errs = append(errs, g.keys[i].Free(), g.vals[i].Free())
	}
	errs = append(errs, g.eng.Close())
	if g.ownDev {
		errs = append(errs, g.dev.Close())
	}
	return errors.Join(errs...)
}

// array returns the current array's keys and values.
func (g *gpuSA[K, V]) array() (cuda.Slice[K], cuda.Slice[V]) {
	if g.n == 0 {
		return cuda.Slice[K]{}, cuda.Slice[V]{}
	}
	return g.keys[g.cur].Sub(0, g.n), g.vals[g.cur].Sub(0, g.n)
}

// reserve makes both buffers hold at least need elements, keeping the array.
func (g *gpuSA[K, V]) reserve(need int) error {
	if need == 0 {
		return nil
	}
	s := g.upd.stream
	for i := range 2 {
		if g.keys[i].Len() >= need {
			continue
		}
		c := max(need, g.keys[i].Len()*3/2)
		k, err1 := sorteddict.Alloc[K](g.dev, c)
		v, err2 := sorteddict.Alloc[V](g.dev, c)
		if err := errors.Join(err1, err2); err != nil {
			k.Free()
			v.Free()
			return err
		}
		if i == g.cur && g.n > 0 {
			err := errors.Join(cuda.CopyAsync(k.Sub(0, g.n), g.keys[i].Sub(0, g.n), s), cuda.CopyAsync(v.Sub(0, g.n), g.vals[i].Sub(0, g.n), s))
			if err = errors.Join(err, s.Synchronize()); err != nil {
				k.Free()
				v.Free()
				return err
			}
		}
		g.keys[i].Free()
		g.vals[i].Free()
		g.keys[i], g.vals[i] = k, v
	}
	return nil
}

func (g *gpuSA[K, V]) UpdateDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V], dels cuda.Slice[uint8], kind sorteddict.UpdateKind) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	m := keys.Len()
	if m == 0 {
		return nil
	}
	if g.n+m > MaxLen {
		return fmt.Errorf("%w: %d keys plus a batch of %d exceed %d", warpkit.ErrInvalidArgument, g.n, m, MaxLen)
	}
	w, s := g.upd, g.upd.stream
	defer sorteddict.SyncOnError(s, &err)
	// Allocate everything first: a failure leaves the array as it was.
	if err := g.reserve(g.n + m); err != nil {
		return err
	}
	bk, e1 := w.bk.Get(g.dev, s, m)
	bt, e2 := w.bt.Get(g.dev, s, m)
	ck, e3 := w.ck.Get(g.dev, s, m)
	ct, e4 := w.ct.Get(g.dev, s, m)
	cv, e5 := w.cv.Get(g.dev, s, m)
	keepB, e6 := w.keepB.Get(g.dev, s, m)
	drops, e7 := w.drops.Get(g.dev, s, m)
	small, e8 := w.small.Get(g.dev, s, 2)
	keepA, e9 := w.keepA.Get(g.dev, s, g.n)
	if err := errors.Join(e1, e2, e3, e4, e5, e6, e7, e8, e9); err != nil {
		return err
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
	ak, av := g.array()
	grid := sorteddict.Grid(m)
	err = errors.Join(
		small.Zero(s),
		g.fn.prep.Launch(grid, sorteddict.Block, 0, s, keys, dels, nil, uint64(m), uint64(m), uint32(0), bk, bt, nil),
	)
	if err == nil {
		err = prim.SortPairs(g.eng, s, bk, bt, prim.SortOptions{})
	}
	if err == nil {
		err = g.fn.fixup.Launch(grid, sorteddict.Block, 0, s, bk, bt, uint64(m))
	}
	if err == nil {
		err = g.fn.mark.Launch(grid, sorteddict.Block, 0, s, bk, bt, uint64(m), ak, uint64(g.n), keepB, drops, small.Sub(0, 1))
	}
	if err == nil {
		err = prim.SelectFlaggedPairs(g.eng, s, bk, bt, keepB, ck, ct, small.Sub(1, 2))
	}
	if err != nil {
		return err
	}
	c, err := sorteddict.ReadBack(g.dev, &w.stage, s, small)
	if err != nil {
		return err
	}
	nd, cb := int(c[0]), int(c[1])
	if nd == 0 && cb == 0 {
		return nil
	}
	if cb > 0 {
		if err := g.fn.gatherValues.Launch(sorteddict.Grid(cb), sorteddict.Block, 0, s, ct, vals, uint64(cb), cv); err != nil {
			return err
		}
	}
	alt, newN := 1-g.cur, g.n-nd+cb
	dst := g.cur
	if nd > 0 {
		// Drop the replaced and deleted entries into the other buffer, then
		// merge the batch in back into this one.
		err := errors.Join(keepA.FillBytes(1, s),
			g.fn.unmark.Launch(sorteddict.Grid(nd), sorteddict.Block, 0, s, drops, uint64(nd), keepA))
		if err == nil {
			err = prim.SelectFlaggedPairs(g.eng, s, ak, av, keepA, g.keys[alt].Sub(0, g.n-nd), g.vals[alt].Sub(0, g.n-nd), cuda.Slice[uint32]{})
		}
		if err != nil {
			return err
		}
		ak, av = g.keys[alt].Sub(0, g.n-nd), g.vals[alt].Sub(0, g.n-nd)
	} else {
		dst = alt
	}
	if err := prim.MergePairs(g.eng, s, ck.Sub(0, cb), cv.Sub(0, cb), ak, av, g.keys[dst].Sub(0, newN), g.vals[dst].Sub(0, newN), prim.MergeOptions[K]{}); err != nil {
		return err // not enqueued: the array is as it was
	}
	if err := s.Synchronize(); err != nil {
		// A device fault: with dst == g.cur the merge may have overwritten
		// part of the array, which is undefined now (see the package doc).
		return err
	}
	g.cur, g.n = dst, newN
	return nil
}

func (g *gpuSA[K, V]) LookupDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V], found cuda.Slice[uint8]) error {
	if keys.Len() == 0 {
		return ctx.Err()
	}
	return g.pool.With(ctx, func(w *worker[K, V]) error {
		ak, av := g.array()
		n := keys.Len()
		err := g.fn.lookup.Launch(sorteddict.Grid(n), sorteddict.Block, 0, w.stream, ak, av, uint64(g.n), keys, uint64(n), vals, found)
		return errors.Join(err, w.stream.Synchronize())
	})
}

func (g *gpuSA[K, V]) NeighborDevice(ctx context.Context, keys, outKeys cuda.Slice[K], outVals cuda.Slice[V], found cuda.Slice[uint8], succ bool) error {
	if keys.Len() == 0 {
		return ctx.Err()
	}
	dir := uint32(0)
	if succ {
		dir = 1
	}
	return g.pool.With(ctx, func(w *worker[K, V]) error {
		ak, av := g.array()
		n := keys.Len()
		err := g.fn.neighbor.Launch(sorteddict.Grid(n), sorteddict.Block, 0, w.stream, ak, av, uint64(g.n), keys, uint64(n), dir, outKeys, outVals, found)
		return errors.Join(err, w.stream.Synchronize())
	})
}

func (g *gpuSA[K, V]) CountDevice(ctx context.Context, lo, hi cuda.Slice[K], counts cuda.Slice[uint32]) error {
	if lo.Len() == 0 {
		return ctx.Err()
	}
	return g.pool.With(ctx, func(w *worker[K, V]) error {
		ak, _ := g.array()
		n := lo.Len()
		err := g.fn.bounds.Launch(cuda.GridFor(n, sorteddict.BlockSize), sorteddict.Block, 0, w.stream, ak, uint64(g.n), lo, hi, uint64(n), counts, nil, nil)
		return errors.Join(err, w.stream.Synchronize())
	})
}

func (g *gpuSA[K, V]) RangeDevice(ctx context.Context, lo, hi cuda.Slice[K]) (*warpkit.DeviceRanges[K, V], error) {
	var res *warpkit.DeviceRanges[K, V]
	err := g.pool.With(ctx, func(w *worker[K, V]) error {
		s, nq := w.stream, lo.Len()
		counts, e1 := w.cnts.Get(g.dev, s, nq)
		starts, e2 := w.starts.Get(g.dev, s, nq)
		tot, e3 := w.tot.Get(g.dev, s, 1)
		off, e4 := cuda.Alloc[uint32](g.dev, nq+1)
		if err := errors.Join(e1, e2, e3, e4); err != nil {
			off.Free()
			return err
		}
		dr := &warpkit.DeviceRanges[K, V]{Offsets: off}
		fail := func(err error) error {
			sorteddict.SyncOnError(s, &err) // before the memory the work writes is freed
			dr.Free()
			return err
		}
		ak, av := g.array()
		if err := tot.Zero(s); err != nil {
			return fail(err)
		}
		if nq > 0 {
			err := g.fn.bounds.Launch(cuda.GridFor(nq, sorteddict.BlockSize), sorteddict.Block, 0, s, ak, uint64(g.n), lo, hi, uint64(nq), counts, starts, tot)
			if err != nil {
				return fail(err)
			}
		}
		if err := prim.ExclusiveScan(g.eng, s, counts, off.Sub(0, nq), off.Sub(nq, nq+1)); err != nil {
			return fail(err)
		}
		t, err := sorteddict.ReadBack(g.dev, &w.stage, s, tot)
		if err != nil {
			return fail(err)
		}
		if t[0] > math.MaxUint32 {
			return fail(fmt.Errorf("%w: a range result of %d pairs (at most %d)", warpkit.ErrInvalidArgument, t[0], uint64(math.MaxUint32)))
		}
		total := int(t[0])
		if dr.Keys, err = sorteddict.Alloc[K](g.dev, total); err != nil {
			return fail(err)
		}
		if dr.Vals, err = sorteddict.Alloc[V](g.dev, total); err != nil {
			return fail(err)
		}
		dr.Total = total
		if total > 0 {
			err := g.fn.rangeGather.Launch(sorteddict.TileGrid(total, tileItems), sorteddict.Block, 0, s, ak, av, starts, off, uint64(nq), uint64(total), dr.Keys, dr.Vals)
			if err = errors.Join(err, s.Synchronize()); err != nil {
				return fail(err)
			}
		}
		res = dr
		return nil
	})
	return res, err
}

// tileItems is kItems in sortedarray.cu.
const tileItems = 4
