package slabhash

import (
	"context"
	"fmt"
	"iter"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/front"
)

// MultiMap is a concurrent hash multimap: a key may hold many values
// (duplicate pairs included). Insert and delete-one are linearizable per
// key, and so is a delete-all when it is the only one on its key in the
// batch. Count and search-all walk the key's list without a snapshot: they
// see every pair present for their whole duration and none that never
// existed, but a pair inserted or deleted while they run may or may not be
// seen; use separate batches when a count must follow a change. See the
// package documentation.
type MultiMap[K, V warpkit.Word] struct{ t *table[K, V] }

// NewMultiMap creates a multimap.
func NewMultiMap[K, V warpkit.Word](opts Options) (*MultiMap[K, V], error) {
	t, err := newTable[K, V](kindMulti, opts)
	if err != nil {
		return nil, err
	}
	return &MultiMap[K, V]{t}, nil
}

// Backend reports the backend in use (CPU or CUDA).
func (m *MultiMap[K, V]) Backend() warpkit.Backend { return m.t.backendKind() }

// Insert adds the pairs (keys[i], vals[i]); every result is Inserted.
func (m *MultiMap[K, V]) Insert(ctx context.Context, keys []K, vals []V, res []Result) error {
	return m.t.run(ctx, "insert", &batch[K, V]{op: OpInsert, keys: keys, vals: vals, res: res}, true)
}

// Count stores the number of values of keys[i] in counts[i].
func (m *MultiMap[K, V]) Count(ctx context.Context, keys []K, counts []uint32) error {
	if counts == nil {
		return m.t.f.Do(ctx, "count", front.Shared, func() error { return fmt.Errorf("%w: nil counts", warpkit.ErrInvalidArgument) })
	}
	return m.t.run(ctx, "count", &batch[K, V]{op: OpFind, keys: keys, counts: counts}, false)
}

// LookupAll returns the values of every key: those of keys[i] are
// vals[offsets[i]:offsets[i+1]], oldest first (pairs inserted by one batch
// have no defined order among themselves).
func (m *MultiMap[K, V]) LookupAll(ctx context.Context, keys []K) (offsets []int, vals []V, err error) {
	return m.t.findAll(ctx, keys)
}

// DeleteOne deletes the oldest pair of each key; res (nil or len(keys))
// receives Removed or NotFound.
func (m *MultiMap[K, V]) DeleteOne(ctx context.Context, keys []K, res []Result) error {
	return m.t.run(ctx, "delete one", &batch[K, V]{op: OpDelete, keys: keys, res: res}, false)
}

// DeleteAll deletes every pair of each key; counts (nil or len(keys))
// receives how many were removed.
func (m *MultiMap[K, V]) DeleteAll(ctx context.Context, keys []K, counts []uint32) error {
	return m.t.run(ctx, "delete all", &batch[K, V]{op: OpDeleteAll, keys: keys, counts: counts}, false)
}

// Apply runs a mixed batch in one kernel: OpInsert adds (keys[i], vals[i]),
// OpFind counts, OpDelete deletes one pair, OpDeleteAll every pair; res and
// counts (nil or len(keys)) receive outcomes and counts.
func (m *MultiMap[K, V]) Apply(ctx context.Context, ops []Op, keys []K, vals []V, res []Result, counts []uint32) error {
	if ops == nil {
		ops = []Op{}
	}
	return m.t.run(ctx, "apply", &batch[K, V]{ops: ops, keys: keys, vals: vals, res: res, counts: counts}, true)
}

// InsertDevice is Insert on device-resident slices (CUDA backend).
func (m *MultiMap[K, V]) InsertDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V], res cuda.Slice[uint8]) error {
	return m.t.runDevice(ctx, "insert", &devBatch[K, V]{op: OpInsert, keys: keys, vals: vals, res: res}, true)
}

// CountDevice is Count on device-resident slices (CUDA backend); like Count,
// it needs counts.
func (m *MultiMap[K, V]) CountDevice(ctx context.Context, keys cuda.Slice[K], counts cuda.Slice[uint32]) error {
	if err := m.t.f.Device("count"); err != nil {
		return err
	}
	if counts.Buffer() == nil {
		return m.t.f.Do(ctx, "count", front.Shared, func() error { return fmt.Errorf("%w: no counts slice", warpkit.ErrInvalidArgument) })
	}
	return m.t.runDevice(ctx, "count", &devBatch[K, V]{op: OpFind, keys: keys, counts: counts}, false)
}

// DeleteOneDevice is DeleteOne on device-resident slices (CUDA backend).
func (m *MultiMap[K, V]) DeleteOneDevice(ctx context.Context, keys cuda.Slice[K], res cuda.Slice[uint8]) error {
	return m.t.runDevice(ctx, "delete one", &devBatch[K, V]{op: OpDelete, keys: keys, res: res}, false)
}

// DeleteAllDevice is DeleteAll on device-resident slices (CUDA backend).
func (m *MultiMap[K, V]) DeleteAllDevice(ctx context.Context, keys cuda.Slice[K], counts cuda.Slice[uint32]) error {
	return m.t.runDevice(ctx, "delete all", &devBatch[K, V]{op: OpDeleteAll, keys: keys, counts: counts}, false)
}

// LookupAllDevice is FindAll on device-resident slices (CUDA backend), as the
// second of two calls: CountDevice gives each key's count, the caller lays
// out room for the values, and LookupAllDevice gathers them.
//
// offsets holds len(keys)+1 offsets into vals, the exclusive prefix sum of
// the counts with the total last (offsets[0] is usually 0): the values of
// keys[i] go to vals[offsets[i]:offsets[i+1]], in list order (oldest first;
// pairs inserted by one batch have no order among themselves), and
// counts[i] (len(keys), required) receives the number of values the key had
// when the search read its list. The kernel checks every room: where
// offsets[i] > offsets[i+1] or offsets[i+1] > vals.Len(), that key's values
// are not written (it is only counted) and the call returns
// ErrInvalidArgument, with the outputs unspecified; nothing outside vals is
// ever written.
//
// The table may change between CountDevice and LookupAllDevice, and during
// LookupAllDevice (it is safe for concurrent use, and like Count it reads each
// list once without a snapshot, so a pair inserted or deleted while it runs
// may or may not be seen). Nothing is ever written outside a key's room:
// where a key gained values, counts[i] exceeds offsets[i+1]-offsets[i] and
// only the first offsets[i+1]-offsets[i] of its values in list order were
// written; where it lost some, counts[i] is smaller and the rest of its room
// is left as it was. LookupAllDevice does not read the counts back, so it
// returns nil in both cases: compare counts with the rooms and search again
// the keys that outgrew theirs (host LookupAll does this itself). Reserved keys
// are found on the device first and fail the call with ErrReservedKey; the
// search then runs for no key, and vals and counts are left as they were.
func (m *MultiMap[K, V]) LookupAllDevice(ctx context.Context, keys cuda.Slice[K], offsets cuda.Slice[uint64], vals cuda.Slice[V], counts cuda.Slice[uint32]) error {
	return m.t.findAllDevice(ctx, keys, offsets, vals, counts)
}

// ApplyDevice is Apply on device-resident slices (CUDA backend).
func (m *MultiMap[K, V]) ApplyDevice(ctx context.Context, ops cuda.Slice[uint8], keys cuda.Slice[K], vals cuda.Slice[V], res cuda.Slice[uint8], counts cuda.Slice[uint32]) error {
	return m.t.runDevice(ctx, "apply", &devBatch[K, V]{ops: ops, keys: keys, vals: vals, res: res, counts: counts}, true)
}

// Len returns the number of pairs, exact when no batch is in flight.
func (m *MultiMap[K, V]) Len(ctx context.Context) (int, error) { return m.t.lenOf(ctx) }

// All returns an iterator over a copy of every pair (see Map.All).
func (m *MultiMap[K, V]) All(ctx context.Context) (iter.Seq2[K, V], error) { return m.t.all(ctx) }

// Pairs returns every pair, in no particular order.
func (m *MultiMap[K, V]) Pairs(ctx context.Context) ([]K, []V, error) { return m.t.pairs(ctx) }

// Compact compacts the bucket lists (see Map.Compact); the order of each key's
// pairs is kept.
func (m *MultiMap[K, V]) Compact(ctx context.Context) error { return m.t.compact(ctx) }

// Stats reports the table's memory.
func (m *MultiMap[K, V]) Stats(ctx context.Context) (Stats, error) { return m.t.stats(ctx) }

// Close frees the table's memory; later calls return ErrClosed.
func (m *MultiMap[K, V]) Close() error { return m.t.close() }
