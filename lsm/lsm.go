package lsm

import (
	"context"
	"fmt"
	"math/bits"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/sorteddict"
	"github.com/warpkit/warpkit/prim"
)

// DefaultBatchSize is the batch size b when Options.BatchSize is 0.
const DefaultBatchSize = 1 << 16

// MaxResident is the largest number of entries (r·b plus the staging run,
// stale entries included) an LSM holds (prim's per-call limit, which a cleanup's
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
	// Capacity, when positive, reserves device memory up front for that many
	// resident entries: the levels, the value log, the merge buffers, the
	// staging run and the sort scratch of a batch of b, so that
	// device-resident insertions and mixed updates of at most b entries
	// within it allocate nothing (also after Compact, which returns its own
	// larger buffers). Other updates still allocate, once, what the
	// reservation does not cover: a deletions-only batch its deletion flags
	// (DeleteDevice, Delete), a batch longer than b its sort buffers and
	// scratch, and the Go-slice methods their device copies of the arguments
	// and pinned staging.
	Capacity int
}

// Stats describes the structure's current shape.
type Stats struct {
	Backend   warpkit.Backend
	BatchSize int
	// Batches is r, the number of batches of b in the levels; the full levels
	// are its set bits.
	Batches uint64
	// Staged is the length of the staging run: the newest entries, fewer than
	// b, that wait for the next b to gather before they enter level 0.
	Staged int
	// Resident is r·b + Staged: entries held, stale entries and tombstones
	// included.
	Resident int
	// Levels lists the sizes of the full levels, newest (smallest) first.
	Levels []int
	// Logged is the number of value-log slots in use.
	Logged int
}

// LSM is a GPU LSM dictionary from K to V. See the package documentation.
type LSM[K, V warpkit.Word] struct {
	f    *sorteddict.Front[K, V]
	impl engine[K, V]
}

// engine is one backend: the shared dictionary operations plus cleanup and
// the views tests and Stats use.
type engine[K, V warpkit.Word] interface {
	sorteddict.Engine[K, V]
	Cleanup(ctx context.Context) error
	state() levelState
	snapshot() (*snapshot[K, V], error)
}

// levelState is the host-side shape both backends keep: b, the full levels
// (the set bits of r), the staging run's length s and the value log's.
type levelState struct {
	b      int
	r      uint64
	s      int
	logged int
}

func (s levelState) resident() int { return int(s.r)*s.b + s.s }

// plan returns how a batch of m entries lands: the staging run and the
// sorted batch (s+m entries) yield chunks runs of b for level 0 and a new
// staging run of rem.
func (s levelState) plan(m int) (chunks, rem int) { return (s.s + m) / s.b, (s.s + m) % s.b }

// checkRoom fails when a batch of m entries of the given kind would exceed
// the limits. A deletions-only batch logs no values (tombstones' slots are
// never read), so only the resident limit applies to it.
func (s levelState) checkRoom(m int, kind sorteddict.UpdateKind) error {
	if kind != sorteddict.DeletesOnly && s.logged+m > MaxLogged {
		return fmt.Errorf("%w: %d logged values plus a batch of %d exceed %d; call Compact", warpkit.ErrInvalidArgument, s.logged, m, MaxLogged)
	}
	if s.resident()+m > MaxResident {
		return fmt.Errorf("%w: %d resident entries plus a batch of %d exceed %d; call Compact", warpkit.ErrInvalidArgument, s.resident(), m, MaxResident)
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

// deepest returns, for inserting chunks batches one after the other,
// the deepest level reached (the first empty level of the last increment that
// reaches furthest).
func (s levelState) deepest(chunks int) int {
	d := 0
	for r, i := s.r, 0; i < chunks; r, i = r+1, i+1 {
		d = max(d, bits.TrailingZeros64(^r))
	}
	return d
}

// snapshot is a copy of the levels, the staging run and the value log, for
// tests that compare the two backends entry by entry.
type snapshot[K, V warpkit.Word] struct {
	state  levelState
	keys   map[int][]K
	tags   map[int][]uint32
	stageK []K
	stageT []uint32
	log    []V
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
	if opt.Capacity < 0 || opt.Capacity > MaxResident {
		return nil, fmt.Errorf("lsm: %w: capacity %d (want 0..%d)", warpkit.ErrInvalidArgument, opt.Capacity, MaxResident)
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
		return wrapEngine[K, V](warpkit.CPU, newCPU[K, V](b)), nil
	}
	g, err := newGPU[K, V](dev, own, b, opt.Capacity)
	if err != nil {
		if own {
			dev.Close()
		}
		return nil, fmt.Errorf("lsm: %w", err)
	}
	return wrapEngine[K, V](warpkit.CUDA, g), nil
}

func wrapEngine[K, V warpkit.Word](b warpkit.Backend, e engine[K, V]) *LSM[K, V] {
	return &LSM[K, V]{f: sorteddict.NewFront[K, V]("lsm", b, e), impl: e}
}

// Backend returns CPU or CUDA.
func (l *LSM[K, V]) Backend() warpkit.Backend { return l.f.Backend() }

// Close frees the structure's memory. Later calls return ErrClosed.
func (l *LSM[K, V]) Close() error { return l.f.Close() }

// Stats returns the current shape.
func (l *LSM[K, V]) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	err := l.f.Read(ctx, "stats", func() error {
		s := l.impl.state()
		st = Stats{Backend: l.Backend(), BatchSize: s.b, Batches: s.r, Staged: s.s, Resident: s.resident(), Logged: s.logged}
		for _, lv := range s.levels() {
			st.Levels = append(st.Levels, s.b<<lv)
		}
		return nil
	})
	return st, err
}

// Len returns the number of live keys. It counts them (a count query over
// every key): O(resident entries) on the CPU, one count launch on the GPU.
func (l *LSM[K, V]) Len(ctx context.Context) (int, error) {
	var n int
	err := l.f.Read(ctx, "len", func() error {
		var err error
		n, err = sorteddict.LiveKeys[K, V](ctx, l.impl)
		return err
	})
	return n, err
}

// Update applies one mixed batch: entry i deletes keys[i] when dels[i] is
// true and otherwise inserts (keys[i], vals[i]). dels may be nil (all
// insertions). See the package documentation for the batch semantics.
func (l *LSM[K, V]) Update(ctx context.Context, keys []K, vals []V, dels []bool) error {
	return l.f.Update(ctx, keys, vals, dels)
}

// Insert inserts (or replaces) a batch of pairs.
func (l *LSM[K, V]) Insert(ctx context.Context, keys []K, vals []V) error {
	return l.f.Update(ctx, keys, vals, nil)
}

// Delete deletes a batch of keys; absent keys are ignored.
func (l *LSM[K, V]) Delete(ctx context.Context, keys []K) error { return l.f.Delete(ctx, keys) }

// UpdateDevice is Update on device-resident slices; dels holds 0 (insert) or
// non-zero (delete) per entry.
func (l *LSM[K, V]) UpdateDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V], dels cuda.Slice[uint8]) error {
	return l.f.UpdateDevice(ctx, keys, vals, dels)
}

// InsertDevice is Insert on device-resident slices.
func (l *LSM[K, V]) InsertDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V]) error {
	return l.f.InsertDevice(ctx, keys, vals)
}

// DeleteDevice is Delete on a device-resident slice.
func (l *LSM[K, V]) DeleteDevice(ctx context.Context, keys cuda.Slice[K]) error {
	return l.f.DeleteDevice(ctx, keys)
}

// Compact removes stale entries and tombstones and rebuilds the levels from
// the live entries: the paper's cleanup (§III-F). The m mod b smallest keys
// become the staging run. Contents do not change.
func (l *LSM[K, V]) Compact(ctx context.Context) error {
	return l.f.Write(ctx, "compact", func() error { return l.impl.Cleanup(ctx) })
}

// Lookup sets vals[i] and found[i] to keys[i]'s value and whether it is
// present (vals[i] = 0 when absent).
func (l *LSM[K, V]) Lookup(ctx context.Context, keys []K, vals []V, found []bool) error {
	return l.f.Lookup(ctx, keys, vals, found)
}

// Get looks up one key.
func (l *LSM[K, V]) Get(ctx context.Context, key K) (V, bool, error) { return l.f.Get(ctx, key) }

// LookupDevice is Lookup on device-resident slices (found[i] is 0 or 1).
func (l *LSM[K, V]) LookupDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V], found cuda.Slice[uint8]) error {
	return l.f.LookupDevice(ctx, keys, vals, found)
}

// Count sets counts[i] to the number of live keys k with lo[i] <= k < hi[i]
// (0 when lo[i] >= hi[i]): ranges are half-open.
func (l *LSM[K, V]) Count(ctx context.Context, lo, hi []K, counts []uint32) error {
	return l.f.Count(ctx, lo, hi, counts)
}

// CountDevice is Count on device-resident slices.
func (l *LSM[K, V]) CountDevice(ctx context.Context, lo, hi cuda.Slice[K], counts cuda.Slice[uint32]) error {
	return l.f.CountDevice(ctx, lo, hi, counts)
}

// Range returns, for each query i, the live pairs with lo[i] <= key < hi[i]
// in ascending key order.
func (l *LSM[K, V]) Range(ctx context.Context, lo, hi []K) (*warpkit.Ranges[K, V], error) {
	return l.f.Range(ctx, lo, hi)
}

// RangeDevice is Range with device-resident queries and results; the caller
// frees the result.
func (l *LSM[K, V]) RangeDevice(ctx context.Context, lo, hi cuda.Slice[K]) (*warpkit.DeviceRanges[K, V], error) {
	return l.f.RangeDevice(ctx, lo, hi)
}

// Successor sets (outKeys[i], outVals[i]) to the live pair with the smallest
// key > keys[i]; found[i] is false (and the outputs 0) when there is none.
func (l *LSM[K, V]) Successor(ctx context.Context, keys, outKeys []K, outVals []V, found []bool) error {
	return l.f.Neighbor(ctx, keys, outKeys, outVals, found, true)
}

// Predecessor is Successor for the largest live key < keys[i].
func (l *LSM[K, V]) Predecessor(ctx context.Context, keys, outKeys []K, outVals []V, found []bool) error {
	return l.f.Neighbor(ctx, keys, outKeys, outVals, found, false)
}

// SuccessorDevice is Successor on device-resident slices.
func (l *LSM[K, V]) SuccessorDevice(ctx context.Context, keys, outKeys cuda.Slice[K], outVals cuda.Slice[V], found cuda.Slice[uint8]) error {
	return l.f.NeighborDevice(ctx, keys, outKeys, outVals, found, true)
}

// PredecessorDevice is Predecessor on device-resident slices.
func (l *LSM[K, V]) PredecessorDevice(ctx context.Context, keys, outKeys cuda.Slice[K], outVals cuda.Slice[V], found cuda.Slice[uint8]) error {
	return l.f.NeighborDevice(ctx, keys, outKeys, outVals, found, false)
}
