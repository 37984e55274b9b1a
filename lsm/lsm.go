package lsm

import (
	"context"
	"fmt"
	"math/bits"
	"sync"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/sorteddict"
	"github.com/warpkit/warpkit/prim"
)

// DefaultBatchSize is the batch size b when Options.BatchSize is 0.
const DefaultBatchSize = 1 << 16

// MaxResident is the largest number of entries (r·b, stale entries and
// padding included) an LSM holds (prim's per-call limit, which a cleanup's
// merge of all levels reaches); MaxLogged the largest number of values logged
// between cleanups (a tag's 31-bit slot).
const (
	MaxResident = prim.MaxElements
	MaxLogged   = 1 << 31
)

// Options configure an LSM.
type Options struct {
	// Backend selects CUDA or the pure-Go backend; Auto picks CUDA when a
	// device exists.
	Backend warpkit.Backend
	// Device is the CUDA device to use; nil opens device 0 (closed by Close).
	Device *cuda.Device
	// BatchSize is b, the size of level 0 (default DefaultBatchSize). Larger b
	// favours update throughput and queries, smaller b short batches.
	BatchSize int
}

// RangeResult is a batch of range-query answers on the host.
type RangeResult[K, V warpkit.Word] = sorteddict.RangeResult[K, V]

// DeviceRange is a batch of range-query answers in device memory.
type DeviceRange[K, V warpkit.Word] = sorteddict.DeviceRange[K, V]

// Stats describes the structure's current shape.
type Stats struct {
	BatchSize int
	// Batches is r, the number of resident batches; the full levels are its set bits.
	Batches uint64
	// Resident is r·b: entries held, stale entries, tombstones and padding included.
	Resident int
	// Levels lists the sizes of the full levels, newest (smallest) first.
	Levels []int
	// Logged is the number of value-log slots in use.
	Logged int
}

// LSM is a GPU LSM dictionary from K to V. See the package documentation.
type LSM[K, V warpkit.Word] struct {
	mu      sync.RWMutex
	closed  bool
	backend warpkit.Backend
	impl    engine[K, V]
}

// engine is one backend's implementation; LSM serializes updates and checks
// arguments before calling it.
type engine[K, V warpkit.Word] interface {
	update(ctx context.Context, keys []K, vals []V, dels []bool, kind updateKind) error
	updateDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V], dels cuda.Slice[uint8], kind updateKind) error
	cleanup(ctx context.Context) error
	lookup(ctx context.Context, keys []K, vals []V, found []bool) error
	lookupDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V], found cuda.Slice[uint8]) error
	count(ctx context.Context, lo, hi []K, counts []uint32) error
	countDevice(ctx context.Context, lo, hi cuda.Slice[K], counts cuda.Slice[uint32]) error
	rangeHost(ctx context.Context, lo, hi []K) (*RangeResult[K, V], error)
	rangeDevice(ctx context.Context, lo, hi cuda.Slice[K]) (*DeviceRange[K, V], error)
	neighbor(ctx context.Context, keys []K, outKeys []K, outVals []V, found []bool, succ bool) error
	neighborDevice(ctx context.Context, keys, outKeys cuda.Slice[K], outVals cuda.Slice[V], found cuda.Slice[uint8], succ bool) error
	state() levelState
	snapshot() (*snapshot[K, V], error)
	close() error
}

// updateKind says what a batch holds: a mix (per-entry deletion flags), only
// insertions, or only deletions.
type updateKind int

const (
	mixed updateKind = iota
	insertsOnly
	deletesOnly
)

// levelState is the host-side shape both backends keep.
type levelState struct {
	b      int
	r      uint64
	logged int
}

func (s levelState) resident() int { return int(s.r) * s.b }

// padded returns the number of entries a batch of m becomes: ceil(m/b)·b.
func (s levelState) padded(m int) int { return (m + s.b - 1) / s.b * s.b }

// checkRoom fails when a batch of m entries would exceed the limits.
func (s levelState) checkRoom(m int) error {
	if s.logged+m > MaxLogged {
		return fmt.Errorf("lsm: update: %w: %d logged values plus a batch of %d exceed %d; call Cleanup", warpkit.ErrInvalidArgument, s.logged, m, MaxLogged)
	}
	if s.resident()+s.padded(m) > MaxResident {
		return fmt.Errorf("lsm: update: %w: %d resident entries plus a batch of %d exceed %d; call Cleanup", warpkit.ErrInvalidArgument, s.resident(), m, MaxResident)
	}
	return nil
}

// levels returns the full levels' numbers, newest first.
func (s levelState) levels() []int {
	var lv []int
	for r := s.r; r != 0; r &= r - 1 {
		lv = append(lv, bits.TrailingZeros64(r))
	}
	return lv
}

// cascadeDepths returns, for inserting chunks batches one after the other,
// the deepest level reached (the first empty level of the last increment that
// reaches furthest).
func (s levelState) deepest(chunks int) int {
	d := 0
	for r, i := s.r, 0; i < chunks; r, i = r+1, i+1 {
		d = max(d, bits.TrailingZeros64(^r))
	}
	return d
}

// snapshot is a copy of the levels and the value log, for tests that compare
// the two backends entry by entry.
type snapshot[K, V warpkit.Word] struct {
	state levelState
	keys  map[int][]K
	tags  map[int][]uint32
	log   []V
}

// New returns an empty LSM.
func New[K, V warpkit.Word](opt Options) (*LSM[K, V], error) {
	b := opt.BatchSize
	if b == 0 {
		b = DefaultBatchSize
	}
	if b < 1 || b > MaxResident {
		return nil, fmt.Errorf("lsm: %w: batch size %d (want 1..%d)", warpkit.ErrInvalidArgument, b, MaxResident)
	}
	dev, own := opt.Device, false
	if dev == nil && opt.Backend != warpkit.CPU {
		d, err := warpkit.OpenDevice(opt.Backend, 0)
		if err != nil {
			return nil, fmt.Errorf("lsm: %w", err)
		}
		dev, own = d, d != nil
	}
	if dev == nil || opt.Backend == warpkit.CPU {
		return &LSM[K, V]{backend: warpkit.CPU, impl: newCPU[K, V](b)}, nil
	}
	g, err := newGPU[K, V](dev, own, b)
	if err != nil {
		if own {
			dev.Close()
		}
		return nil, fmt.Errorf("lsm: %w", err)
	}
	return &LSM[K, V]{backend: warpkit.CUDA, impl: g}, nil
}

// Backend returns CPU or CUDA.
func (l *LSM[K, V]) Backend() warpkit.Backend { return l.backend }

// Close frees the structure's memory. Later calls return ErrClosed.
func (l *LSM[K, V]) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return warpkit.ErrClosed
	}
	l.closed = true
	return l.impl.close()
}

func (l *LSM[K, V]) write(op string, f func() error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("lsm: %s: %w", op, warpkit.ErrClosed)
	}
	return wrap(op, f())
}

func (l *LSM[K, V]) read(op string, f func() error) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return fmt.Errorf("lsm: %s: %w", op, warpkit.ErrClosed)
	}
	return wrap(op, f())
}

func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("lsm: %s: %w", op, err)
}

// Stats returns the current shape.
func (l *LSM[K, V]) Stats() Stats {
	l.mu.RLock()
	defer l.mu.RUnlock()
	s := l.impl.state()
	st := Stats{BatchSize: s.b, Batches: s.r, Resident: s.resident(), Logged: s.logged}
	for _, lv := range s.levels() {
		st.Levels = append(st.Levels, s.b<<lv)
	}
	return st
}

// Update applies one mixed batch: entry i deletes keys[i] when dels[i] is
// true and otherwise inserts (keys[i], vals[i]). dels may be nil (all
// insertions). See the package documentation for the batch semantics.
func (l *LSM[K, V]) Update(ctx context.Context, keys []K, vals []V, dels []bool) error {
	kind := mixed
	if dels == nil {
		kind = insertsOnly
	} else if err := sorteddict.CheckLen("lsm: update", len(keys), len(dels)); err != nil {
		return err
	}
	if err := sorteddict.CheckLen("lsm: update", len(keys), len(vals)); err != nil {
		return err
	}
	return l.write("update", func() error { return l.impl.update(ctx, keys, vals, dels, kind) })
}

// Insert inserts (or replaces) a batch of pairs.
func (l *LSM[K, V]) Insert(ctx context.Context, keys []K, vals []V) error {
	return l.Update(ctx, keys, vals, nil)
}

// Delete deletes a batch of keys; absent keys are ignored.
func (l *LSM[K, V]) Delete(ctx context.Context, keys []K) error {
	return l.write("delete", func() error { return l.impl.update(ctx, keys, nil, nil, deletesOnly) })
}

// UpdateDevice is Update on device-resident slices; dels holds 0 (insert) or
// non-zero (delete) per entry.
func (l *LSM[K, V]) UpdateDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V], dels cuda.Slice[uint8]) error {
	if err := sorteddict.CheckLen("lsm: update", keys.Len(), vals.Len(), dels.Len()); err != nil {
		return err
	}
	return l.write("update", func() error { return l.impl.updateDevice(ctx, keys, vals, dels, mixed) })
}

// InsertDevice is Insert on device-resident slices.
func (l *LSM[K, V]) InsertDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V]) error {
	if err := sorteddict.CheckLen("lsm: insert", keys.Len(), vals.Len()); err != nil {
		return err
	}
	return l.write("insert", func() error { return l.impl.updateDevice(ctx, keys, vals, cuda.Slice[uint8]{}, insertsOnly) })
}

// DeleteDevice is Delete on a device-resident slice.
func (l *LSM[K, V]) DeleteDevice(ctx context.Context, keys cuda.Slice[K]) error {
	return l.write("delete", func() error {
		return l.impl.updateDevice(ctx, keys, cuda.Slice[V]{}, cuda.Slice[uint8]{}, deletesOnly)
	})
}

// Cleanup removes stale entries and tombstones and rebuilds the levels from
// the live entries (padded to a multiple of b), as in §III-F of the paper.
func (l *LSM[K, V]) Cleanup(ctx context.Context) error {
	return l.write("cleanup", func() error { return l.impl.cleanup(ctx) })
}

// Lookup sets vals[i] and found[i] to keys[i]'s value and whether it is
// present (vals[i] = 0 when absent).
func (l *LSM[K, V]) Lookup(ctx context.Context, keys []K, vals []V, found []bool) error {
	if err := sorteddict.CheckLen("lsm: lookup", len(keys), len(vals), len(found)); err != nil {
		return err
	}
	return l.read("lookup", func() error { return l.impl.lookup(ctx, keys, vals, found) })
}

// Get looks up one key.
func (l *LSM[K, V]) Get(ctx context.Context, key K) (V, bool, error) {
	var v [1]V
	var f [1]bool
	err := l.Lookup(ctx, []K{key}, v[:], f[:])
	return v[0], f[0], err
}

// LookupDevice is Lookup on device-resident slices (found[i] is 0 or 1).
func (l *LSM[K, V]) LookupDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V], found cuda.Slice[uint8]) error {
	if err := sorteddict.CheckLen("lsm: lookup", keys.Len(), vals.Len(), found.Len()); err != nil {
		return err
	}
	return l.read("lookup", func() error { return l.impl.lookupDevice(ctx, keys, vals, found) })
}

// Count sets counts[i] to the number of live keys k with lo[i] <= k <= hi[i]
// (0 when lo[i] > hi[i]).
func (l *LSM[K, V]) Count(ctx context.Context, lo, hi []K, counts []uint32) error {
	if err := sorteddict.CheckLen("lsm: count", len(lo), len(hi), len(counts)); err != nil {
		return err
	}
	return l.read("count", func() error { return l.impl.count(ctx, lo, hi, counts) })
}

// CountDevice is Count on device-resident slices.
func (l *LSM[K, V]) CountDevice(ctx context.Context, lo, hi cuda.Slice[K], counts cuda.Slice[uint32]) error {
	if err := sorteddict.CheckLen("lsm: count", lo.Len(), hi.Len(), counts.Len()); err != nil {
		return err
	}
	return l.read("count", func() error { return l.impl.countDevice(ctx, lo, hi, counts) })
}

// Range returns, for each query i, the live pairs with lo[i] <= key <= hi[i]
// in ascending key order.
func (l *LSM[K, V]) Range(ctx context.Context, lo, hi []K) (*RangeResult[K, V], error) {
	if err := sorteddict.CheckLen("lsm: range", len(lo), len(hi)); err != nil {
		return nil, err
	}
	var res *RangeResult[K, V]
	err := l.read("range", func() (err error) { res, err = l.impl.rangeHost(ctx, lo, hi); return })
	return res, err
}

// RangeDevice is Range with device-resident queries and results; the caller
// frees the result.
func (l *LSM[K, V]) RangeDevice(ctx context.Context, lo, hi cuda.Slice[K]) (*DeviceRange[K, V], error) {
	if err := sorteddict.CheckLen("lsm: range", lo.Len(), hi.Len()); err != nil {
		return nil, err
	}
	var res *DeviceRange[K, V]
	err := l.read("range", func() (err error) { res, err = l.impl.rangeDevice(ctx, lo, hi); return })
	return res, err
}

// Successor sets (outKeys[i], outVals[i]) to the live pair with the smallest
// key > keys[i]; found[i] is false (and the outputs 0) when there is none.
func (l *LSM[K, V]) Successor(ctx context.Context, keys, outKeys []K, outVals []V, found []bool) error {
	return l.neighbor(ctx, "successor", keys, outKeys, outVals, found, true)
}

// Predecessor is Successor for the largest live key < keys[i].
func (l *LSM[K, V]) Predecessor(ctx context.Context, keys, outKeys []K, outVals []V, found []bool) error {
	return l.neighbor(ctx, "predecessor", keys, outKeys, outVals, found, false)
}

func (l *LSM[K, V]) neighbor(ctx context.Context, op string, keys, outKeys []K, outVals []V, found []bool, succ bool) error {
	if err := sorteddict.CheckLen("lsm: "+op, len(keys), len(outKeys), len(outVals), len(found)); err != nil {
		return err
	}
	return l.read(op, func() error { return l.impl.neighbor(ctx, keys, outKeys, outVals, found, succ) })
}

// SuccessorDevice is Successor on device-resident slices.
func (l *LSM[K, V]) SuccessorDevice(ctx context.Context, keys, outKeys cuda.Slice[K], outVals cuda.Slice[V], found cuda.Slice[uint8]) error {
	return l.neighborDevice(ctx, "successor", keys, outKeys, outVals, found, true)
}

// PredecessorDevice is Predecessor on device-resident slices.
func (l *LSM[K, V]) PredecessorDevice(ctx context.Context, keys, outKeys cuda.Slice[K], outVals cuda.Slice[V], found cuda.Slice[uint8]) error {
	return l.neighborDevice(ctx, "predecessor", keys, outKeys, outVals, found, false)
}

func (l *LSM[K, V]) neighborDevice(ctx context.Context, op string, keys, outKeys cuda.Slice[K], outVals cuda.Slice[V], found cuda.Slice[uint8], succ bool) error {
	if err := sorteddict.CheckLen("lsm: "+op, keys.Len(), outKeys.Len(), outVals.Len(), found.Len()); err != nil {
		return err
	}
	return l.read(op, func() error { return l.impl.neighborDevice(ctx, keys, outKeys, outVals, found, succ) })
}
