package slabhash

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync/atomic"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/front"
	"github.com/warpkit/warpkit/internal/hostpar"
)

// Op is one operation of a mixed batch (Apply).
type Op uint8

const (
	// OpFind looks the key up (MultiMap: counts its values).
	OpFind Op = 0
	// OpInsert inserts the element's value (Map: or replaces it).
	OpInsert Op = 1
	// OpDelete deletes the key (MultiMap: its oldest pair).
	OpDelete Op = 2
	// OpDeleteAll deletes every pair of the key (MultiMap only).
	OpDeleteAll Op = 3
)

// Result is the outcome of one element of a batch.
type Result uint8

const (
	// NotFound: a find or delete found no entry for the key.
	NotFound Result = 0
	// Found: a find found the key (its value, or count, is reported).
	Found Result = 1
	// Inserted: the key (MultiMap: the pair) is new.
	Inserted Result = 2
	// Present: the key was already there; a Map replaced its value, a Set
	// left it.
	Present Result = 3
	// Removed: a delete removed the key (MultiMap: the counted pairs).
	Removed Result = 4
	// Failed: the element was not applied because the batch returned an
	// error (ErrPoolExhausted or ErrRetryLimit).
	Failed Result = 5
)

// String names the result.
func (r Result) String() string {
	switch r {
	case NotFound:
		return "not-found"
	case Found:
		return "found"
	case Inserted:
		return "inserted"
	case Present:
		return "present"
	case Removed:
		return "removed"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("Result(%d)", uint8(r))
}

// Reserved keys: the two sentinels, for each key width.
const (
	EmptyKey32 uint32 = 0xffffffff
	TombKey32  uint32 = 0xfffffffe
	EmptyKey64 uint64 = 0xffffffffffffffff
	TombKey64  uint64 = 0xfffffffffffffffe
)

// IsReserved reports whether k is one of the two sentinels of its width
// (all ones: empty; all ones minus one: deleted).
func IsReserved[K warpkit.Word](k K) bool { return k == ^K(0) || k == ^K(0)-1 }

// Stats describe a table's memory.
type Stats struct {
	Backend      warpkit.Backend
	Layout       string  // e.g. "tile8 (64-byte slabs, 7 pairs, 8-lane tiles)"
	Len          int     // live entries
	Buckets      int     // bucket lists (CUDA)
	SlabBytes    int     // bytes per slab (CUDA)
	PoolSlabs    int64   // slabs allocated beyond the bucket heads (CUDA)
	MemoryBytes  int64   // bucket heads plus allocated slabs (CUDA)
	Utilization  float64 // entry bytes over MemoryBytes (CUDA)
	PoolCapacity int64   // slabs the pool holds now (CUDA)
	PoolGrowths  int64   // times the pool grew since New (CUDA; each step adds one or more super blocks)
	Reruns       int64   // batch launches rerun for their failed elements after the pool grew (CUDA)
	Tombstones   int64   // deleted entries whose slots Compact has not reclaimed yet (CUDA)
}

// batch is one host-slice call, as every backend receives it.
type batch[K, V warpkit.Word] struct {
	ops    []Op // nil: every element is op
	op     Op
	keys   []K
	vals   []V      // insert values in; find values out
	res    []Result // may be nil
	counts []uint32 // MultiMap find and delete-all; may be nil
}

// sub returns elements [lo, hi) of b.
func (b *batch[K, V]) sub(lo, hi int) *batch[K, V] {
	p := &batch[K, V]{op: b.op, keys: b.keys[lo:hi]}
	if b.ops != nil {
		p.ops = b.ops[lo:hi]
	}
	if b.vals != nil {
		p.vals = b.vals[lo:hi]
	}
	if b.res != nil {
		p.res = b.res[lo:hi]
	}
	if b.counts != nil {
		p.counts = b.counts[lo:hi]
	}
	return p
}

// devBatch is one device-resident call.
type devBatch[K, V warpkit.Word] struct {
	ops    cuda.Slice[uint8]
	op     Op
	keys   cuda.Slice[K]
	vals   cuda.Slice[V]
	res    cuda.Slice[uint8]
	counts cuda.Slice[uint32]
}

// backend is what a table runs on.
type backend[K, V warpkit.Word] interface {
	apply(ctx context.Context, b *batch[K, V]) (delta int64, err error)
	applyDevice(ctx context.Context, b *devBatch[K, V]) (delta int64, err error)
	findAll(ctx context.Context, keys []K) (offsets []int, vals []V, err error)
	findAllDevice(ctx context.Context, keys cuda.Slice[K], offs cuda.Slice[uint64], vals cuda.Slice[V], counts cuda.Slice[uint32]) error
	snapshot(ctx context.Context) ([]K, []V, error)
	flush(ctx context.Context, live int) error
	stats(ctx context.Context, n int) (Stats, error)
	close() error
}

// table is the shared core of Map, Set and MultiMap. Its front runs batches
// (which run concurrently) as Shared calls and Compact, Pairs and Close,
// which need the table alone, as Exclusive ones.
type table[K, V warpkit.Word] struct {
	kind kind
	be   backend[K, V]
	f    *front.Front
	n    atomic.Int64
}

func newTable[K, V warpkit.Word](kd kind, opts Options) (*table[K, V], error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	geo, err := resolveGeometry[K, V](kd, opts.Layout)
	if err != nil {
		return nil, err
	}
	dev := opts.Device
	own := false
	if opts.Backend == warpkit.CPU {
		dev = nil
	} else if dev == nil {
		if dev, err = warpkit.OpenDevice(opts.Backend, 0); err != nil {
			return nil, fmt.Errorf("slabhash: %w", err)
		}
		own = dev != nil
	}
	t := &table[K, V]{kind: kd}
	if dev == nil {
		t.f = front.New("slabhash", warpkit.CPU)
		t.be = newCPU[K, V](kd)
		return t, nil
	}
	t.f = front.New("slabhash", warpkit.CUDA)
	g, err := newGPU[K, V](kd, geo, &opts, dev, own)
	if err != nil {
		if own {
			dev.Close()
		}
		return nil, err
	}
	t.be = g
	return t, nil
}

func (t *table[K, V]) backendKind() warpkit.Backend { return t.f.Backend() }

// maxOp is the largest op code the kind accepts.
func (k kind) maxOp() Op {
	if k == kindMulti {
		return OpDeleteAll
	}
	return OpDelete
}

// runChunks runs a host batch of n elements in chunks of at most size, in
// order. A chunk that fails with ErrPoolExhausted does not stop the batch:
// the chunks after it still run (each fails fast where it needs a new slab),
// so every element that needs no new slab is applied, as in one launch. Any
// other error stops it, and the elements of the chunks not run are marked
// Failed in res and counts (each nil when not wanted); run marks those of
// its own chunk. It returns the summed changes in live entries and the first
// error (joined with the one that stopped the batch, if that came later).
func runChunks(n, size int, res []Result, counts []uint32, run func(lo, hi int) (int64, error)) (int64, error) {
	var total int64
	var first error
	for lo := 0; lo < n; lo += size {
		hi := min(n, lo+size)
		d, err := run(lo, hi)
		total += d
		if err == nil {
			continue
		}
		exhausted := errors.Is(err, warpkit.ErrPoolExhausted)
		switch {
		case first == nil:
			first = err
		case !exhausted:
			first = errors.Join(first, err)
		}
		if !exhausted {
			if res != nil {
				res = res[hi:]
			}
			if counts != nil {
				counts = counts[hi:]
			}
			markFailed(res, counts)
			break
		}
	}
	return total, first
}

// markFailed marks elements that were not applied: Failed, count 0.
func markFailed(res []Result, counts []uint32) {
	for i := range res {
		res[i] = Failed
	}
	clear(counts)
}

// check validates a host batch before anything is applied.
func (t *table[K, V]) check(b *batch[K, V], valsNeeded bool) error {
	n := len(b.keys)
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", warpkit.ErrInvalidArgument, fmt.Sprintf(format, args...))
	}
	switch {
	case b.ops != nil && len(b.ops) != n:
		return bad("%d ops for %d keys", len(b.ops), n)
	case valsNeeded && len(b.vals) != n:
		return bad("%d values for %d keys", len(b.vals), n)
	case b.res != nil && len(b.res) != n:
		return bad("%d results for %d keys", len(b.res), n)
	case b.counts != nil && len(b.counts) != n:
		return bad("%d counts for %d keys", len(b.counts), n)
	}
	for i, o := range b.ops {
		if o > t.kind.maxOp() {
			return bad("op %d at %d is not a %s operation", o, i, t.kind)
		}
	}
	if i := firstReserved(b.keys); i >= 0 {
		return fmt.Errorf("key %#x at %d: %w (all ones and all ones minus one are the empty and deleted sentinels)",
			uint64(b.keys[i]), i, warpkit.ErrReservedKey)
	}
	return nil
}

// firstReserved returns the index of the first reserved key, or -1; long
// batches are scanned by several goroutines.
func firstReserved[K warpkit.Word](keys []K) int {
	parts := make([]int, hostpar.Parts(len(keys), hostpar.Grain))
	for p := range parts {
		parts[p] = -1
	}
	hostpar.For(len(keys), hostpar.Grain, func(p, lo, hi int) {
		for i, k := range keys[lo:hi] {
			if k >= ^K(0)-1 { // IsReserved
				parts[p] = lo + i
				return
			}
		}
	})
	for _, i := range parts {
		if i >= 0 {
			return i
		}
	}
	return -1
}

func (t *table[K, V]) run(ctx context.Context, what string, b *batch[K, V], valsNeeded bool) error {
	return t.f.Do(ctx, what, front.Shared, func() error {
		if err := t.check(b, valsNeeded); err != nil || len(b.keys) == 0 {
			return err
		}
		delta, err := t.be.apply(ctx, b)
		t.n.Add(delta)
		return err
	})
}

// checkDevice validates a device batch's shape (its contents are checked on
// the device before anything is applied).
func (t *table[K, V]) checkDevice(b *devBatch[K, V], valsNeeded bool) error {
	if t.f.Backend() != warpkit.CUDA {
		return warpkit.ErrNeedsCUDA
	}
	n := b.keys.Len()
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", warpkit.ErrInvalidArgument, fmt.Sprintf(format, args...))
	}
	switch {
	case b.ops.Buffer() != nil && b.ops.Len() != n:
		return bad("%d ops for %d keys", b.ops.Len(), n)
	case valsNeeded && b.vals.Len() != n:
		return bad("%d values for %d keys", b.vals.Len(), n)
	case b.res.Buffer() != nil && b.res.Len() != n:
		return bad("%d results for %d keys", b.res.Len(), n)
	case b.counts.Buffer() != nil && b.counts.Len() != n:
		return bad("%d counts for %d keys", b.counts.Len(), n)
	}
	return nil
}

func (t *table[K, V]) runDevice(ctx context.Context, what string, b *devBatch[K, V], valsNeeded bool) error {
	return t.f.Do(ctx, what, front.Shared, func() error {
		if err := t.checkDevice(b, valsNeeded); err != nil || b.keys.Len() == 0 {
			return err
		}
		delta, err := t.be.applyDevice(ctx, b)
		t.n.Add(delta)
		return err
	})
}

// length is the entry count batches keep (exact when none is in flight).
func (t *table[K, V]) length() int { return int(t.n.Load()) }

func (t *table[K, V]) lenOf(ctx context.Context) (int, error) {
	return front.Value(t.f, ctx, "len", front.Shared, func() (int, error) { return t.length(), nil })
}

func (t *table[K, V]) pairs(ctx context.Context) ([]K, []V, error) {
	var keys []K
	var vals []V
	err := t.f.Do(ctx, "pairs", front.Exclusive, func() (err error) {
		keys, vals, err = t.be.snapshot(ctx)
		return err
	})
	return keys, vals, err
}

// all returns an iterator over a copy of the pairs taken now.
func (t *table[K, V]) all(ctx context.Context) (iter.Seq2[K, V], error) {
	keys, vals, err := t.pairs(ctx)
	if err != nil {
		return nil, err
	}
	return func(yield func(K, V) bool) {
		for i, k := range keys {
			var v V
			if vals != nil {
				v = vals[i]
			}
			if !yield(k, v) {
				return
			}
		}
	}, nil
}

func (t *table[K, V]) compact(ctx context.Context) error {
	return t.f.Do(ctx, "compact", front.Exclusive, func() error { return t.be.flush(ctx, t.length()) })
}

func (t *table[K, V]) stats(ctx context.Context) (Stats, error) {
	return front.Value(t.f, ctx, "stats", front.Shared, func() (Stats, error) {
		s, err := t.be.stats(ctx, t.length())
		s.Backend = t.f.Backend()
		s.Len = t.length()
		return s, err
	})
}

func (t *table[K, V]) close() error { return t.f.Close(t.be.close) }

// findAll runs a MultiMap search-all beside other batches.
func (t *table[K, V]) findAll(ctx context.Context, keys []K) ([]int, []V, error) {
	var offsets []int
	var vals []V
	err := t.f.Do(ctx, "lookup all", front.Shared, func() (err error) {
		if err := t.check(&batch[K, V]{keys: keys}, false); err != nil {
			return err
		}
		offsets, vals, err = t.be.findAll(ctx, keys)
		return err
	})
	return offsets, vals, err
}

// findAllDevice runs a MultiMap search-all on device slices under the read
// lock. It checks the shapes; the kernel checks each key's room against
// vals.
func (t *table[K, V]) findAllDevice(ctx context.Context, keys cuda.Slice[K], offs cuda.Slice[uint64], vals cuda.Slice[V], counts cuda.Slice[uint32]) error {
	return t.f.Do(ctx, "lookup all", front.Shared, func() error {
		if err := t.checkDevice(&devBatch[K, V]{keys: keys, counts: counts}, false); err != nil {
			return err
		}
		n := keys.Len()
		if n == 0 {
			return nil
		}
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: %s", warpkit.ErrInvalidArgument, fmt.Sprintf(format, args...))
		}
		if counts.Buffer() == nil {
			return bad("no counts slice")
		}
		if offs.Len() != n+1 {
			return bad("%d offsets for %d keys (want len(keys)+1)", offs.Len(), n)
		}
		return t.be.findAllDevice(ctx, keys, offs, vals, counts)
	})
}

var errCPUDevice = warpkit.ErrNeedsCUDA
