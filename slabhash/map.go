package slabhash

import (
	"context"
	"iter"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
)

// Map is a concurrent hash map with unique keys: insert-or-replace, delete
// and find, each linearizable per key. See the package documentation.
type Map[K, V warpkit.Word] struct{ t *table[K, V] }

// NewMap creates a map.
func NewMap[K, V warpkit.Word](opts Options) (*Map[K, V], error) {
	t, err := newTable[K, V](kindMap, opts)
	if err != nil {
		return nil, err
	}
	return &Map[K, V]{t}, nil
}

// Backend reports the backend in use (CPU or CUDA).
func (m *Map[K, V]) Backend() warpkit.Backend { return m.t.backendKind() }

// Insert inserts keys[i] with vals[i], replacing the value of a key that is
// present. res (nil or len(keys)) receives Inserted or Present.
func (m *Map[K, V]) Insert(ctx context.Context, keys []K, vals []V, res []Result) error {
	return m.t.run(ctx, "insert", &batch[K, V]{op: OpInsert, keys: keys, vals: vals, res: res}, true)
}

// Lookup stores the value of keys[i] in vals[i] (the zero value where
// absent); res (nil or len(keys)) receives Found or NotFound.
func (m *Map[K, V]) Lookup(ctx context.Context, keys []K, vals []V, res []Result) error {
	return m.t.run(ctx, "lookup", &batch[K, V]{op: OpFind, keys: keys, vals: vals, res: res}, true)
}

// Delete deletes keys; res (nil or len(keys)) receives Removed or NotFound.
func (m *Map[K, V]) Delete(ctx context.Context, keys []K, res []Result) error {
	return m.t.run(ctx, "delete", &batch[K, V]{op: OpDelete, keys: keys, res: res}, false)
}

// Apply runs a mixed batch in one kernel: element i is ops[i] (OpFind,
// OpInsert or OpDelete) on keys[i]; vals[i] is the value to insert and
// receives the found value; res (nil or len(keys)) the outcomes.
func (m *Map[K, V]) Apply(ctx context.Context, ops []Op, keys []K, vals []V, res []Result) error {
	if ops == nil {
		ops = []Op{}
	}
	return m.t.run(ctx, "apply", &batch[K, V]{ops: ops, keys: keys, vals: vals, res: res}, true)
}

// InsertDevice is Insert on device-resident slices (CUDA backend); res may
// be the zero Slice. Reserved keys are found on the device before anything
// is applied.
func (m *Map[K, V]) InsertDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V], res cuda.Slice[uint8]) error {
	return m.t.runDevice(ctx, "insert", &devBatch[K, V]{op: OpInsert, keys: keys, vals: vals, res: res}, true)
}

// LookupDevice is Lookup on device-resident slices (CUDA backend).
func (m *Map[K, V]) LookupDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V], res cuda.Slice[uint8]) error {
	return m.t.runDevice(ctx, "lookup", &devBatch[K, V]{op: OpFind, keys: keys, vals: vals, res: res}, true)
}

// DeleteDevice is Delete on device-resident slices (CUDA backend).
func (m *Map[K, V]) DeleteDevice(ctx context.Context, keys cuda.Slice[K], res cuda.Slice[uint8]) error {
	return m.t.runDevice(ctx, "delete", &devBatch[K, V]{op: OpDelete, keys: keys, res: res}, false)
}

// ApplyDevice is Apply on device-resident slices (CUDA backend); ops holds
// Op codes.
func (m *Map[K, V]) ApplyDevice(ctx context.Context, ops cuda.Slice[uint8], keys cuda.Slice[K], vals cuda.Slice[V], res cuda.Slice[uint8]) error {
	return m.t.runDevice(ctx, "apply", &devBatch[K, V]{ops: ops, keys: keys, vals: vals, res: res}, true)
}

// Len returns the number of keys, exact when no batch is in flight.
func (m *Map[K, V]) Len(ctx context.Context) (int, error) { return m.t.lenOf(ctx) }

// All returns an iterator over a copy of the pairs, taken when All is called
// (while no batch runs), in no particular order.
func (m *Map[K, V]) All(ctx context.Context) (iter.Seq2[K, V], error) { return m.t.all(ctx) }

// Pairs returns every key and its value, in no particular order.
func (m *Map[K, V]) Pairs(ctx context.Context) ([]K, []V, error) { return m.t.pairs(ctx) }

// Compact compacts every bucket list, dropping deleted entries (the paper's
// flush), and returns emptied slabs to the allocator. It waits for batches
// in flight.
func (m *Map[K, V]) Compact(ctx context.Context) error { return m.t.compact(ctx) }

// Stats reports the table's memory.
func (m *Map[K, V]) Stats(ctx context.Context) (Stats, error) { return m.t.stats(ctx) }

// Close frees the table's memory; later calls return ErrClosed.
func (m *Map[K, V]) Close() error { return m.t.close() }
