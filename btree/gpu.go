package btree

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/blinknode"
	"github.com/warpkit/warpkit/internal/gpurt"
	"github.com/warpkit/warpkit/prim"
)

const (
	blockSize = 256
	// writeBlock is the block size of the insert kernel (one operation per
	// tile): a block ends only when its slowest tile does, and at 256
	// threads a third of mvbtree's insert kernel's warp time, on the same
	// core, was spent waiting at the end of its blocks (ncu, H200). One warp
	// a block: 4M-key inserts 18-22% faster, though it caps an SM at 32
	// warps (64 threads, which keeps the occupancy of 48 registers, gained
	// 2%). Mixed batches keep 256: at 32 they ran 4% slower; deletes keep it
	// until a same-run A/B (docs/benchmarks.md).
	writeBlock          = 32
	defaultInitialNodes = 4096
	defaultStreams      = 4
	maxRangeRetries     = 4 // re-runs of a range batch whose results outgrew its windows
	// maxPoolNodes caps every pool: node indices are uint32 with linkNone
	// reserved, and the kernels bound a walk along the leaves by kMaxSteps
	// (1<<17) plus the capacity, computed in a uint32.
	maxPoolNodes = linkNone - 1<<17
)

// gpuTree is the CUDA backend. Node memory is one pool buffer (node 0 is the
// root); ctl holds the allocation counter and the key count.
type gpuTree[K, V warpkit.Word] struct {
	dev    *cuda.Device
	ownDev bool
	lay    layout
	k      kernels
	lanes  chan *lane
	all    []*lane

	// mu: batches hold it shared; replacing or reading the whole pool (grow,
	// build, compact, check, close) holds it exclusively. The Tree's front
	// runs batches side by side (so they coordinate through mu and phase)
	// and Build, Compact, Check and Close alone; it also keeps every call out
	// after Close, so the backend has no closed state of its own.
	mu       sync.RWMutex
	pool     *cuda.Buffer
	capNodes int
	maxNodes int                // the pool's cap: Options.MaxNodes, or maxPoolNodes
	ctl      cuda.Slice[uint64] // [0] next free node, [1] keys stored
	usedHint atomic.Int64       // nodes in use after the last writing batch (a lower bound)
	rounds   atomic.Int64       // insert launches past their batch's first (blinknode.Rounds; tests)

	phase   gpurt.Phase
	sortMin int // phased query batches of at least this many queries are sorted first (0: never)

	primOnce sync.Once
	prim     *prim.Engine // device sort, loaded on first use with mu held (free reads it under the exclusive lock)
	primErr  error
}

// lane is a stream with its status word; concurrent batches use different lanes.
type lane struct {
	stream  *cuda.Stream
	status  cuda.Slice[uint32]
	hostSt  *cuda.Pinned[uint32] // the status word, copied back on the stream
	hostCtl *cuda.Pinned[uint64] // ctl after a writing batch
	sortBuf *cuda.Buffer         // sorted query keys and their positions (grown on demand)
}

func newGPU[K, V warpkit.Word](dev *cuda.Device, own bool, opts Options) (*gpuTree[K, V], error) {
	var k K
	var v V
	g := &gpuTree[K, V]{dev: dev, ownDev: own, lay: layoutFor(int(unsafe.Sizeof(k)), int(unsafe.Sizeof(v))), maxNodes: maxPoolNodes, sortMin: opts.SortQueries}
	if opts.MaxNodes > 0 {
		g.maxNodes = min(opts.MaxNodes, maxPoolNodes)
	}

	var err error
	if g.k, err = loadKernels[K, V](dev); err != nil {
		return nil, err
	}
	nl := opts.Streams
	if nl == 0 {
		nl = defaultStreams
	}
	g.lanes = make(chan *lane, nl)
	fail := func(err error) (*gpuTree[K, V], error) {
		g.free()
		return nil, err
	}
	for range nl {
		s, err := dev.NewStream()
		if err != nil {
			return fail(err)
		}
		l := &lane{stream: s}
		g.all = append(g.all, l)
		if l.status, err = cuda.Alloc[uint32](dev, 1); err != nil {
			return fail(err)
		}
		if l.hostSt, err = cuda.AllocPinned[uint32](dev, 1); err != nil {
			return fail(err)
		}
		if l.hostCtl, err = cuda.AllocPinned[uint64](dev, 2); err != nil {
			return fail(err)
		}
		g.lanes <- l
	}
	if g.ctl, err = cuda.Alloc[uint64](dev, 2); err != nil {
		return fail(err)
	}
	initial := opts.InitialNodes
	if initial == 0 {
		initial = defaultInitialNodes
	}
	initial = max(min(initial, g.maxNodes), 1)
	if g.pool, err = dev.Alloc(int64(initial) * int64(g.lay.NodeBytes)); err != nil {
		return fail(err)
	}
	g.capNodes = initial
	if err := g.resetLocked(); err != nil {
		return fail(err)
	}
	return g, nil
}

// writeEmptyRoot makes node 0 of pool an empty leaf: the root of an empty tree.
func (g *gpuTree[K, V]) writeEmptyRoot(pool *cuda.Buffer) error {
	root := make([]byte, g.lay.NodeBytes)
	g.lay.Encode(root, &hostNode{Meta: makeMeta(0, 0), Link: linkNone})
	dst, err := cuda.View[uint8](pool, 0, len(root))
	if err != nil {
		return err
	}
	return dst.CopyFromHost(root)
}

// resetLocked makes the tree empty (an empty root leaf, one node in use, no
// keys), with the pool held exclusively.
func (g *gpuTree[K, V]) resetLocked() error {
	if err := g.writeEmptyRoot(g.pool); err != nil {
		return err
	}
	g.usedHint.Store(1)
	return g.ctl.CopyFromHost([]uint64{1, 0})
}

// poolBytes is a byte view of the pool (the caller checked the range).
func (g *gpuTree[K, V]) poolBytes(off, n int) cuda.Slice[uint8] {
	s, _ := cuda.View[uint8](g.pool, off, n)
	return s
}

func (g *gpuTree[K, V]) free() {
	for _, l := range g.all {
		l.stream.Close()
		l.status.Free()
		if l.hostSt != nil {
			l.hostSt.Free()
		}
		if l.hostCtl != nil {
			l.hostCtl.Free()
		}
		if l.sortBuf != nil {
			l.sortBuf.Free()
		}
	}
	g.all = nil
	if g.prim != nil {
		g.prim.Close()
	}
	g.ctl.Free()
	if g.pool != nil {
		g.pool.Free()
		g.pool = nil
	}
	if g.ownDev {
		g.dev.Close()
		g.ownDev = false
	}
}

func (g *gpuTree[K, V]) close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.free()
	return nil
}

// batch runs launch on a free lane under the shared lock and returns the status
// word. write says whether the batch modifies the tree; launch gets whether a
// query may skip validation (no writer can run beside it).
func (g *gpuTree[K, V]) batch(ctx context.Context, write bool, launch func(l *lane, fast bool) error) (uint32, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	l := <-g.lanes
	defer func() { g.lanes <- l }()
	fast := false
	if write {
		g.phase.BeginWrite()
		defer g.phase.EndWrite()
	} else {
		fast = g.phase.BeginQuery()
		defer g.phase.EndQuery(fast)
	}
	if err := l.status.Zero(l.stream); err != nil {
		return 0, err
	}
	err := launch(l, fast)
	if err == nil {
		err = cuda.CopyToHostAsync(l.hostSt, 0, l.status, l.stream)
	}
	if err == nil && write {
		err = cuda.CopyToHostAsync(l.hostCtl, 0, g.ctl, l.stream)
	}
	if serr := l.stream.Synchronize(); err == nil {
		err = serr
	}
	if err != nil {
		return 0, err
	}
	if write {
		g.usedHint.Store(int64(min(l.hostCtl.Data()[0], uint64(g.capNodes))))
	}
	return l.hostSt.Data()[0], nil
}

// readCtl returns the allocation counter and the key count.
func (g *gpuTree[K, V]) readCtl() (next, keys uint64, err error) {
	var c [2]uint64
	err = g.ctl.CopyToHost(c[:])
	return c[0], c[1], err
}

// used returns the nodes in use (the counter may pass the capacity after a failed
// allocation).
func (g *gpuTree[K, V]) used() (int, error) {
	next, _, err := g.readCtl()
	return int(min(next, uint64(g.capNodes))), err
}

// reserve makes sure the pool has room for need more nodes, growing it if it can.
// Growth beyond MaxNodes is left to the kernels to report.
func (g *gpuTree[K, V]) reserve(ctx context.Context, need int) error {
	g.mu.RLock()
	if g.capNodes-int(g.usedHint.Load()) >= need {
		g.mu.RUnlock()
		return nil
	}
	seen := g.capNodes
	used, err := g.used()
	g.mu.RUnlock()
	if err != nil || seen-used >= need {
		return err
	}
	_, err = g.grow(ctx, seen, used+need)
	return err
}

// grow replaces the pool with one of at least target nodes (at least double the
// size, at most the cap). seen is the capacity the caller found short: when the
// pool no longer has it (another call grew the pool meanwhile), grow reports
// true without growing it again, so that concurrent callers that ran out of the
// same pool grow it once. It reports false when the pool is at its cap.
func (g *gpuTree[K, V]) grow(ctx context.Context, seen, target int) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.capNodes != seen {
		return true, nil
	}
	return g.growLocked(target)
}

func (g *gpuTree[K, V]) growLocked(target int) (bool, error) {
	newCap := min(max(target, 2*g.capNodes), g.maxNodes)
	if newCap <= g.capNodes {
		return false, nil
	}
	next, keys, err := g.readCtl()
	if err != nil {
		return false, err
	}
	used := int(min(next, uint64(g.capNodes)))
	buf, err := g.dev.Alloc(int64(newCap) * int64(g.lay.NodeBytes))
	if err != nil {
		return false, err
	}
	nb := g.lay.NodeBytes
	dst, _ := cuda.View[uint8](buf, 0, used*nb)
	if err := dst.CopyFrom(g.poolBytes(0, used*nb)); err != nil {
		buf.Free()
		return false, err
	}
	if err := g.ctl.CopyFromHost([]uint64{uint64(used), keys}); err != nil {
		buf.Free()
		return false, err
	}
	g.usedHint.Store(int64(used))
	g.pool.Free()
	g.pool, g.capNodes = buf, newCap
	return true, nil
}

// mutate runs a writing batch, growing the pool and re-running the batch when
// the pool ran out (inserts and deletes are idempotent, so a re-run applies the
// batch once). It re-runs only after the capacity rose (this call or another
// grew the pool), and the capacity never falls and is capped, so the loop ends:
// with success, with ErrPoolExhausted at the cap, or with the error of a growth
// the device cannot hold (ErrOutOfMemory).
func (g *gpuTree[K, V]) mutate(ctx context.Context, need int, launch func(l *lane) error) error {
	// Growing ahead only saves re-runs: when the device cannot hold the larger
	// pool, the batch runs in the pool there is and its exhaustion decides.
	if err := g.reserve(ctx, need); err != nil && !errors.Is(err, warpkit.ErrOutOfMemory) {
		return err
	}
	for {
		ran := 0 // the capacity the batch ran with
		st, err := g.batch(ctx, true, func(l *lane, _ bool) error {
			ran = g.capNodes
			return launch(l)
		})
		if err != nil {
			return err
		}
		if st&gpurt.StatusPoolExhausted == 0 {
			return statusErr(st)
		}
		grown, err := g.grow(ctx, ran, ran+need)
		if err != nil {
			return err
		}
		if !grown {
			return statusErr(st)
		}
	}
}

// insertReserve estimates the nodes an insert batch of n may allocate.
func insertReserve(n int) int { return n/4 + 64 }

func (g *gpuTree[K, V]) insertDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V]) error {
	n := keys.Len()
	if n == 0 {
		return ctx.Err()
	}
	return g.mutate(ctx, insertReserve(n), func(l *lane) error {
		// A batch large against the tree runs in rounds: the nodes in use,
		// as last read back, estimate the tree.
		lo, ends := 0, blinknode.Rounds(n, int(g.usedHint.Load()))
		g.rounds.Add(int64(len(ends) - 1))
		for _, hi := range ends {
			m := hi - lo
			if err := g.k.insert.Launch(l.stream, m, g.pool, uint64(g.capNodes), g.ctl, l.status, keys.Sub(lo, hi), vals.Sub(lo, hi), uint64(m)); err != nil {
				return err
			}
			lo = hi
		}
		return nil
	})
}

func (g *gpuTree[K, V]) deleteDevice(ctx context.Context, keys cuda.Slice[K]) error {
	n := keys.Len()
	if n == 0 {
		return ctx.Err()
	}
	st, err := g.batch(ctx, true, func(l *lane, _ bool) error {
		return g.k.del.Launch(l.stream, n, g.pool, uint64(g.capNodes), g.ctl, l.status, keys, uint64(n))
	})
	if err != nil {
		return err
	}
	return statusErr(st)
}

// sortedQueries returns the keys a phased batch walks the tree with and, when
// the batch is large enough to sort, the original position of each: a copy of
// keys sorted on the device (prim's radix sort of key-position pairs, in the
// lane's scratch), so that neighbouring lanes share root-to-leaf paths and
// leaves. Unsorted, it returns keys itself and no positions.
func (g *gpuTree[K, V]) sortedQueries(l *lane, keys cuda.Slice[K]) (cuda.Slice[K], cuda.Slice[uint32], error) {
	n := keys.Len()
	if g.sortMin == 0 || n < g.sortMin || n > prim.MaxElements {
		return keys, cuda.Slice[uint32]{}, nil
	}
	eng, err := g.primEngine()
	if err != nil {
		return keys, cuda.Slice[uint32]{}, err
	}
	var k K
	keyBytes := n * int(unsafe.Sizeof(k))
	posOff := (keyBytes + 255) &^ 255
	if l.sortBuf == nil || l.sortBuf.Size() < int64(posOff+4*n) {
		if l.sortBuf != nil {
			l.sortBuf.Free()
			l.sortBuf = nil
		}
		if l.sortBuf, err = g.dev.Alloc(int64(posOff + 4*n)); err != nil {
			return keys, cuda.Slice[uint32]{}, err
		}
	}
	sk, err := cuda.View[K](l.sortBuf, 0, n)
	if err != nil {
		return keys, cuda.Slice[uint32]{}, err
	}
	pos, err := cuda.View[uint32](l.sortBuf, posOff/4, n)
	if err != nil {
		return keys, cuda.Slice[uint32]{}, err
	}
	if err := cuda.CopyAsync(sk, keys, l.stream); err != nil {
		return keys, cuda.Slice[uint32]{}, err
	}
	if err := g.k.iota.Launch(l.stream, n, pos, uint64(n)); err != nil {
		return keys, cuda.Slice[uint32]{}, err
	}
	if err := prim.SortPairs(eng, l.stream, sk, pos, prim.SortOptions{}); err != nil {
		return keys, cuda.Slice[uint32]{}, err
	}
	return sk, pos, nil
}

func (g *gpuTree[K, V]) lookupDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V], found cuda.Slice[uint8]) error {
	n := keys.Len()
	if n == 0 {
		return ctx.Err()
	}
	st, err := g.batch(ctx, false, func(l *lane, fast bool) error {
		if !fast {
			return g.k.lookup.Launch(l.stream, n, g.pool, uint64(g.capNodes), l.status, keys, uint64(n), vals, found)
		}
		qk, pos, err := g.sortedQueries(l, keys)
		if err != nil {
			return err
		}
		return g.k.phasedLookup.Launch(l.stream, n, g.pool, uint64(g.capNodes), l.status, qk, pos, uint64(n), vals, found)
	})
	if err != nil {
		return err
	}
	return statusErr(st)
}

func (g *gpuTree[K, V]) neighborDevice(ctx context.Context, pred bool, keys, outKeys cuda.Slice[K], outVals cuda.Slice[V], found cuda.Slice[uint8]) error {
	n := keys.Len()
	if n == 0 {
		return ctx.Err()
	}
	p := uint32(0)
	if pred {
		p = 1
	}
	st, err := g.batch(ctx, false, func(l *lane, fast bool) error {
		if !fast {
			return g.k.neighbor.Launch(l.stream, n, g.pool, uint64(g.capNodes), l.status, keys, uint64(n), p, outKeys, outVals, found)
		}
		qk, pos, err := g.sortedQueries(l, keys)
		if err != nil {
			return err
		}
		return g.k.phasedNeighbor.Launch(l.stream, n, g.pool, uint64(g.capNodes), l.status, qk, pos, uint64(n), p, outKeys, outVals, found)
	})
	if err != nil {
		return err
	}
	return statusErr(st)
}

// rangeDevice counts (offsets empty) or collects range results into windows.
// Sorted phased batches sort the lower bounds; the kernel reads each query's
// upper bound and window at its original position.
func (g *gpuTree[K, V]) rangeDevice(ctx context.Context, lo, hi cuda.Slice[K], offsets cuda.Slice[uint32], outKeys cuda.Slice[K], outVals cuda.Slice[V], counts cuda.Slice[uint32]) error {
	n := lo.Len()
	if n == 0 {
		return ctx.Err()
	}
	st, err := g.batch(ctx, false, func(l *lane, fast bool) error {
		if !fast {
			return g.k.rng.Launch(l.stream, n, g.pool, uint64(g.capNodes), l.status, lo, hi, uint64(n), offsets, uint64(outKeys.Len()), outKeys, outVals, counts)
		}
		ql, pos, err := g.sortedQueries(l, lo)
		if err != nil {
			return err
		}
		return g.k.phasedRange.Launch(l.stream, n, g.pool, uint64(g.capNodes), l.status, ql, hi, pos, uint64(n), offsets, uint64(outKeys.Len()), outKeys, outVals, counts)
	})
	if err != nil {
		return err
	}
	return statusErr(st)
}

func (g *gpuTree[K, V]) applyDevice(ctx context.Context, ops DeviceOps[K, V], res DeviceResults[K, V]) error {
	n := ops.Kinds.Len()
	if n == 0 {
		return ctx.Err()
	}
	ops, res = ops.kernelArgs(), res.kernelArgs()
	return g.mutate(ctx, insertReserve(n), func(l *lane) error {
		// The check flags unknown kinds in the status word, which the mixed
		// kernel queued behind it reads first: such a batch applies nothing.
		if err := g.k.checkKinds.Launch(l.stream, n, ops.Kinds, uint64(n), l.status); err != nil {
			return err
		}
		return g.k.mixed.Launch(l.stream, n, g.pool, uint64(g.capNodes), g.ctl, l.status,
			ops.Kinds, ops.Keys, ops.Vals, ops.His, uint64(n), res.Found, res.Keys, res.Vals, res.Counts)
	})
}

// ---- Go-slice batches: staged through device buffers ----------------------

// staged holds device copies of a batch's inputs and outputs; free releases them.
type staged struct{ bufs []interface{ Free() error } }

func (s *staged) free() {
	for _, b := range s.bufs {
		b.Free()
	}
}

func upload[T cuda.Elem](s *staged, dev *cuda.Device, src []T) (cuda.Slice[T], error) {
	d, err := cuda.FromHost(dev, src)
	if err == nil {
		s.bufs = append(s.bufs, d)
	}
	return d, err
}

func scratch[T cuda.Elem](s *staged, dev *cuda.Device, n int) (cuda.Slice[T], error) {
	d, err := cuda.Alloc[T](dev, max(n, 1))
	if err == nil {
		s.bufs = append(s.bufs, d)
	}
	return d.Sub(0, n), err
}

func toBools(dst []bool, src []uint8) {
	for i, b := range src {
		dst[i] = b != 0
	}
}

func (g *gpuTree[K, V]) insert(ctx context.Context, keys []K, vals []V) error {
	if len(keys) == 0 {
		return ctx.Err()
	}
	var s staged
	defer s.free()
	dk, err := upload(&s, g.dev, keys)
	if err != nil {
		return err
	}
	dv, err := upload(&s, g.dev, vals)
	if err != nil {
		return err
	}
	return g.insertDevice(ctx, dk, dv)
}

func (g *gpuTree[K, V]) delete(ctx context.Context, keys []K) error {
	if len(keys) == 0 {
		return ctx.Err()
	}
	var s staged
	defer s.free()
	dk, err := upload(&s, g.dev, keys)
	if err != nil {
		return err
	}
	return g.deleteDevice(ctx, dk)
}

func (g *gpuTree[K, V]) lookup(ctx context.Context, keys []K, vals []V, found []bool) error {
	return g.stagedQuery(ctx, keys, nil, vals, found, func(dk, _ cuda.Slice[K], dv cuda.Slice[V], df cuda.Slice[uint8]) error {
		return g.lookupDevice(ctx, dk, dv, df)
	})
}

func (g *gpuTree[K, V]) neighbor(ctx context.Context, pred bool, keys, outKeys []K, outVals []V, found []bool) error {
	return g.stagedQuery(ctx, keys, outKeys, outVals, found, func(dk, ok cuda.Slice[K], dv cuda.Slice[V], df cuda.Slice[uint8]) error {
		return g.neighborDevice(ctx, pred, dk, ok, dv, df)
	})
}

// stagedQuery runs a point-query batch from Go slices: it uploads keys, gives
// run device buffers for the found flags, the values and (when outKeys is not
// nil) the keys found, and copies the results into found, outVals and outKeys.
func (g *gpuTree[K, V]) stagedQuery(ctx context.Context, keys, outKeys []K, outVals []V, found []bool,
	run func(dk, ok cuda.Slice[K], dv cuda.Slice[V], df cuda.Slice[uint8]) error) error {
	n := len(keys)
	if n == 0 {
		return ctx.Err()
	}
	var s staged
	defer s.free()
	dk, err := upload(&s, g.dev, keys)
	if err != nil {
		return err
	}
	var ok cuda.Slice[K]
	if outKeys != nil {
		if ok, err = scratch[K](&s, g.dev, n); err != nil {
			return err
		}
	}
	dv, err := scratch[V](&s, g.dev, n)
	if err != nil {
		return err
	}
	df, err := scratch[uint8](&s, g.dev, n)
	if err != nil {
		return err
	}
	if err := run(dk, ok, dv, df); err != nil {
		return err
	}
	f := make([]uint8, n)
	if err := df.CopyToHost(f); err != nil {
		return err
	}
	toBools(found, f)
	if outKeys != nil {
		if err := ok.CopyToHost(outKeys); err != nil {
			return err
		}
	}
	return dv.CopyToHost(outVals)
}

func (g *gpuTree[K, V]) count(ctx context.Context, lo, hi []K, counts []uint32) error {
	n := len(lo)
	if n == 0 {
		return ctx.Err()
	}
	var s staged
	defer s.free()
	dl, err := upload(&s, g.dev, lo)
	if err != nil {
		return err
	}
	dh, err := upload(&s, g.dev, hi)
	if err != nil {
		return err
	}
	dc, err := scratch[uint32](&s, g.dev, n)
	if err != nil {
		return err
	}
	if err := g.rangeDevice(ctx, dl, dh, cuda.Slice[uint32]{}, cuda.Slice[K]{}, cuda.Slice[V]{}, dc); err != nil {
		return err
	}
	return dc.CopyToHost(counts)
}

// rangeQuery counts, sizes each query's window, collects, and repeats if a
// concurrent writer made a query outgrow its window. Each pass is a batch of
// its own, which checks the context first.
func (g *gpuTree[K, V]) rangeQuery(ctx context.Context, lo, hi []K) (*warpkit.Ranges[K, V], error) {
	n := len(lo)
	r := &warpkit.Ranges[K, V]{Offsets: make([]int, n+1)}
	if n == 0 {
		return r, nil
	}
	offsets := make([]uint32, n+1) // the windows, as the kernel reads them
	counts := make([]uint32, n)
	if err := g.count(ctx, lo, hi, counts); err != nil {
		return nil, err
	}
	var s staged
	defer s.free()
	dl, err := upload(&s, g.dev, lo)
	if err != nil {
		return nil, err
	}
	dh, err := upload(&s, g.dev, hi)
	if err != nil {
		return nil, err
	}
	dc, err := scratch[uint32](&s, g.dev, n)
	if err != nil {
		return nil, err
	}
	for attempt := 0; attempt < maxRangeRetries; attempt++ {
		total := uint64(0)
		for i, c := range counts {
			offsets[i] = uint32(total)
			total += uint64(c)
		}
		if total > 1<<32-1 {
			return nil, fmt.Errorf("%w: more than 2^32-1 range results", warpkit.ErrInvalidArgument)
		}
		offsets[n] = uint32(total)
		var w staged
		do, err := upload(&w, g.dev, offsets)
		if err != nil {
			return nil, err
		}
		ok, err := scratch[K](&w, g.dev, int(total))
		if err != nil {
			w.free()
			return nil, err
		}
		ov, err := scratch[V](&w, g.dev, int(total))
		if err != nil {
			w.free()
			return nil, err
		}
		err = g.rangeDevice(ctx, dl, dh, do, ok, ov, dc)
		got := make([]uint32, n)
		if err == nil {
			err = dc.CopyToHost(got)
		}
		fits := true
		for i := range got {
			fits = fits && got[i] == counts[i]
		}
		if err == nil && fits {
			r.Keys, r.Vals = make([]K, total), make([]V, total)
			if err = ok.CopyToHost(r.Keys); err == nil {
				err = ov.CopyToHost(r.Vals)
			}
			w.free()
			if err != nil {
				return nil, err
			}
			for i, o := range offsets {
				r.Offsets[i] = int(o)
			}
			return r, nil
		}
		w.free()
		if err != nil {
			return nil, err
		}
		counts = got // the tree changed between the passes: size the windows again
	}
	return nil, fmt.Errorf("%w: range results kept changing under concurrent writers", warpkit.ErrRetryLimit)
}

// apply stages the batch's fields (only those given) and the wanted results
// on the device and runs ApplyDevice.
func (g *gpuTree[K, V]) apply(ctx context.Context, ops Ops[K, V], res Results[K, V]) error {
	n := len(ops.Kinds)
	if n == 0 {
		return nil
	}
	kinds := make([]uint8, n)
	for i, k := range ops.Kinds {
		kinds[i] = uint8(k)
	}
	var s staged
	defer s.free()
	var dops DeviceOps[K, V]
	var dres DeviceResults[K, V]
	var err error
	if dops.Kinds, err = upload(&s, g.dev, kinds); err != nil {
		return err
	}
	if dops.Keys, err = upload(&s, g.dev, ops.Keys); err != nil {
		return err
	}
	if ops.Vals != nil {
		if dops.Vals, err = upload(&s, g.dev, ops.Vals); err != nil {
			return err
		}
	}
	if ops.His != nil {
		if dops.His, err = upload(&s, g.dev, ops.His); err != nil {
			return err
		}
	}
	if res.Found != nil {
		if dres.Found, err = scratch[uint8](&s, g.dev, n); err != nil {
			return err
		}
	}
	if res.Keys != nil {
		if dres.Keys, err = scratch[K](&s, g.dev, n); err != nil {
			return err
		}
	}
	if res.Vals != nil {
		if dres.Vals, err = scratch[V](&s, g.dev, n); err != nil {
			return err
		}
	}
	if res.Counts != nil {
		if dres.Counts, err = scratch[uint32](&s, g.dev, n); err != nil {
			return err
		}
	}
	if err := g.applyDevice(ctx, dops, dres); err != nil {
		return err
	}
	if res.Found != nil {
		f := make([]uint8, n)
		if err := dres.Found.CopyToHost(f); err != nil {
			return err
		}
		toBools(res.Found, f)
	}
	if res.Keys != nil {
		if err := dres.Keys.CopyToHost(res.Keys); err != nil {
			return err
		}
	}
	if res.Vals != nil {
		if err := dres.Vals.CopyToHost(res.Vals); err != nil {
			return err
		}
	}
	if res.Counts != nil {
		if err := dres.Counts.CopyToHost(res.Counts); err != nil {
			return err
		}
	}
	return nil
}

// ---- bulk build, compact, check, stats ------------------------------------

// build uploads the pairs and builds as BuildDevice does (prim's stable sort
// and selection of the last pair of each key, on the device). Batches larger
// than prim handles, and batches whose device sort ran out of device memory
// (it needs scratch of about twice the pairs), are sorted on the host instead
// (sortUnique, the same order and the same last-wins rule), which leaves only
// the distinct pairs to upload.
func (g *gpuTree[K, V]) build(ctx context.Context, keys []K, vals []V) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(keys) == 0 {
		return g.buildSorted(ctx, nil, nil)
	}
	if len(keys) <= prim.MaxElements {
		var s staged
		dk, err := upload(&s, g.dev, keys)
		var dv cuda.Slice[V]
		if err == nil {
			dv, err = upload(&s, g.dev, vals)
		}
		if err == nil {
			err = g.sortAndInstall(ctx, &s, dk, dv)
		}
		s.free()
		if !errors.Is(err, warpkit.ErrOutOfMemory) {
			return err
		}
		// Build either installs the new tree or fails: trying again with less
		// device memory is safe whatever the failed attempt left.
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	sk, sv := sortUnique(keys, vals)
	return g.buildSorted(ctx, sk, sv)
}

// buildSorted installs a tree built from sorted, distinct host pairs. The
// context is checked last before the old tree is replaced.
func (g *gpuTree[K, V]) buildSorted(ctx context.Context, keys []K, vals []V) error {
	var s staged
	defer s.free()
	var dk cuda.Slice[K]
	var dv cuda.Slice[V]
	var err error
	if len(keys) > 0 {
		if dk, err = upload(&s, g.dev, keys); err != nil {
			return err
		}
		if dv, err = upload(&s, g.dev, vals); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.installLocked(dk, dv)
}

// buildDevice sorts the device pairs in place with prim's radix sort, keeps the
// last pair of each key (mark_last, then prim's selection) and builds from them.
func (g *gpuTree[K, V]) buildDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V]) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if keys.Len() == 0 {
		return g.buildSorted(ctx, nil, nil)
	}
	var s staged
	defer s.free()
	return g.sortAndInstall(ctx, &s, keys, vals)
}

// sortAndInstall sorts the device pairs in place, keeps the last pair of each
// key (in scratch buffers of s) and installs the tree built from them. The
// context is checked between the sort and the install, which replaces the old
// tree.
func (g *gpuTree[K, V]) sortAndInstall(ctx context.Context, s *staged, keys cuda.Slice[K], vals cuda.Slice[V]) error {
	uk, uv, err := g.sortUniqueDevice(s, keys, vals)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.installLocked(uk, uv)
}

// sortUniqueDevice sorts the pairs in place and returns the last pair of each
// key, in scratch buffers of s. It holds mu shared while it uses a lane and the
// prim engine (the Tree's front already keeps Close out until the call
// returns); the caller then takes mu exclusively to install the pairs.
func (g *gpuTree[K, V]) sortUniqueDevice(s *staged, keys cuda.Slice[K], vals cuda.Slice[V]) (cuda.Slice[K], cuda.Slice[V], error) {
	n := keys.Len()
	fail := func(err error) (cuda.Slice[K], cuda.Slice[V], error) { return cuda.Slice[K]{}, cuda.Slice[V]{}, err }
	g.mu.RLock()
	defer g.mu.RUnlock()
	eng, err := g.primEngine()
	if err != nil {
		return fail(err)
	}
	flags, err := scratch[uint8](s, g.dev, n)
	if err != nil {
		return fail(err)
	}
	uk, err := scratch[K](s, g.dev, n)
	if err != nil {
		return fail(err)
	}
	uv, err := scratch[V](s, g.dev, n)
	if err != nil {
		return fail(err)
	}
	count, err := scratch[uint32](s, g.dev, 1)
	if err != nil {
		return fail(err)
	}
	l := <-g.lanes
	defer func() { g.lanes <- l }()
	err = prim.SortPairs(eng, l.stream, keys, vals, prim.SortOptions{})
	if err == nil {
		err = g.k.markLast.Launch(l.stream, n, keys, uint64(n), flags)
	}
	if err == nil {
		err = prim.SelectFlaggedPairs(eng, l.stream, keys, vals, flags, uk, uv, count)
	}
	if serr := l.stream.Synchronize(); err == nil {
		err = serr
	}
	// prim caches a sort's scratch (about the pairs' size again) on the
	// stream until released; a build is rare, so give it back now rather
	// than hold it, unused, until Close.
	if rerr := eng.ReleaseScratch(); err == nil {
		err = rerr
	}
	if err != nil {
		return fail(err)
	}
	var m [1]uint32
	if err := count.CopyToHost(m[:]); err != nil {
		return fail(err)
	}
	return uk.Sub(0, int(m[0])), uv.Sub(0, int(m[0])), nil
}

// primEngine returns the device's prim engine, loading it on first use. The
// caller holds mu (shared is enough).
func (g *gpuTree[K, V]) primEngine() (*prim.Engine, error) {
	g.primOnce.Do(func() { g.prim, g.primErr = prim.NewEngine(g.dev) })
	return g.prim, g.primErr
}

// installLocked replaces the tree with a bulk-built tree of the sorted,
// distinct device pairs (empty slices: an empty tree), with the pool held
// exclusively. When the pool is too small it lays the tree out in a new pool
// and swaps it in only on success, so a failure leaves the old tree. Otherwise
// it lays the tree out in place, and a failure there (a kernel launch or a
// synchronisation error) resets the tree to empty, the one valid state it can
// still reach.
func (g *gpuTree[K, V]) installLocked(keys cuda.Slice[K], vals cuda.Slice[V]) error {
	m := keys.Len()
	p := planBuild(m)
	if p.nodes > g.maxNodes {
		return fmt.Errorf("%w: a tree of %d keys needs %d nodes, the pool's cap is %d", warpkit.ErrPoolExhausted, m, p.nodes, g.maxNodes)
	}
	dst, capNodes := g.pool, g.capNodes
	if want := p.nodes + p.nodes/2 + 64; capNodes < want {
		bigger := max(min(want, g.maxNodes), p.nodes)
		buf, err := g.dev.Alloc(int64(bigger) * int64(g.lay.NodeBytes))
		switch {
		case err == nil:
			dst, capNodes = buf, bigger
		case errors.Is(err, warpkit.ErrOutOfMemory) && p.nodes <= capNodes:
			// No memory for the room to grow, but the tree fits: build in place.
		default:
			return err // nothing was written: the old tree stands
		}
	}
	fresh := dst != g.pool
	if err := g.layOut(dst, p, keys, vals); err != nil {
		if fresh {
			dst.Free()
			return err // the old tree stands
		}
		return g.emptyAfterLocked(err)
	}
	if fresh {
		g.pool.Free()
		g.pool, g.capNodes = dst, capNodes
	}
	g.usedHint.Store(int64(p.nodes))
	if err := g.ctl.CopyFromHost([]uint64{uint64(p.nodes), uint64(m)}); err != nil {
		return g.emptyAfterLocked(err)
	}
	return nil
}

// emptyAfterLocked resets the tree to empty after err left the pool or its
// counters in an unknown state, and says so in the error it returns.
func (g *gpuTree[K, V]) emptyAfterLocked(err error) error {
	if rerr := g.resetLocked(); rerr != nil {
		return fmt.Errorf("%w; emptying the tree afterwards failed too: %w", err, rerr)
	}
	return fmt.Errorf("%w (the tree is now empty)", err)
}

// layOut writes the nodes of plan p for the sorted, distinct device pairs into
// pool, level by level (leaves first).
func (g *gpuTree[K, V]) layOut(pool *cuda.Buffer, p buildPlan, keys cuda.Slice[K], vals cuda.Slice[V]) error {
	m := keys.Len()
	if m == 0 {
		return g.writeEmptyRoot(pool)
	}
	l := <-g.lanes
	defer func() { g.lanes <- l }()
	for lv := range p.counts {
		nodes := p.counts[lv]
		childBase, children, childSpan := 0, 0, 0
		if lv > 0 {
			childBase, children, childSpan = p.bases[lv-1], p.counts[lv-1], p.spans[lv-1]
		}
		err := g.k.buildLevel.Launch(l.stream, nodes, pool, keys, vals, uint64(m), uint32(lv),
			uint32(p.bases[lv]), uint64(nodes), uint32(childBase), uint64(children), uint32(buildFill), uint32(buildFan),
			uint64(p.spans[lv]), uint64(childSpan))
		if err != nil {
			l.stream.Synchronize()
			return err
		}
	}
	return l.stream.Synchronize()
}

// snapshotLocked copies the used nodes to the host and checks them, returning
// the pairs in key order.
func (g *gpuTree[K, V]) snapshotLocked() ([]uint64, []uint64, error) {
	next, nkeys, err := g.readCtl()
	if err != nil {
		return nil, nil, err
	}
	used := int(min(next, uint64(g.capNodes)))
	buf := make([]byte, used*g.lay.NodeBytes)
	if err := g.poolBytes(0, len(buf)).CopyToHost(buf); err != nil {
		return nil, nil, err
	}
	keys, vals, err := checkTree(g.lay, buf, used)
	if err != nil {
		return nil, nil, err
	}
	if uint64(len(keys)) != nkeys {
		return nil, nil, fmt.Errorf("the tree holds %d keys but its counter says %d", len(keys), nkeys)
	}
	return keys, vals, nil
}

func (g *gpuTree[K, V]) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	_, _, err := g.snapshotLocked()
	return err
}

// pairs returns the tree's pairs in key order (checking the structure).
func (g *gpuTree[K, V]) pairs(ctx context.Context) ([]K, []V, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pairsLocked()
}

// pairsLocked checks the tree and returns its pairs in key order.
func (g *gpuTree[K, V]) pairsLocked() ([]K, []V, error) {
	wk, wv, err := g.snapshotLocked()
	if err != nil {
		return nil, nil, err
	}
	keys, vals := make([]K, len(wk)), make([]V, len(wv))
	for i := range wk {
		keys[i], vals[i] = K(wk[i]), V(wv[i])
	}
	return keys, vals, nil
}

// compact rebuilds the tree from its pairs with the pool held exclusively: the
// pairs travel to the host (where the structure is checked) and back.
func (g *gpuTree[K, V]) compact(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	keys, vals, err := g.pairsLocked()
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil { // before anything is replaced
		return err
	}
	var s staged
	defer s.free()
	var dk cuda.Slice[K]
	var dv cuda.Slice[V]
	if len(keys) > 0 {
		if dk, err = upload(&s, g.dev, keys); err != nil {
			return err
		}
		if dv, err = upload(&s, g.dev, vals); err != nil {
			return err
		}
	}
	return g.installLocked(dk, dv)
}

func (g *gpuTree[K, V]) stats(ctx context.Context) (Stats, error) {
	if err := ctx.Err(); err != nil {
		return Stats{}, err
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	next, keys, err := g.readCtl()
	if err != nil {
		return Stats{}, err
	}
	var meta [1]uint32
	m, _ := cuda.View[uint32](g.pool, 0, 1)
	if err := m.CopyToHost(meta[:]); err != nil {
		return Stats{}, err
	}
	return Stats{
		Keys:      int(keys),
		Nodes:     int(min(next, uint64(g.capNodes))),
		Height:    int(meta[0]>>8&0xff) + 1,
		PoolBytes: int64(g.capNodes) * int64(g.lay.NodeBytes),
		NodeBytes: g.lay.NodeBytes,
	}, nil
}
