package slabhash

import (
	"context"
	"iter"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
)

// Set is a concurrent hash set: insert, delete and membership, each
// linearizable per key. See the package documentation.
type Set[K warpkit.Word] struct{ t *table[K, uint32] }

// NewSet creates a set.
func NewSet[K warpkit.Word](opts Options) (*Set[K], error) {
	t, err := newTable[K, uint32](kindSet, opts)
	if err != nil {
		return nil, err
	}
	return &Set[K]{t}, nil
}

// Backend reports the backend in use (CPU or CUDA).
func (s *Set[K]) Backend() warpkit.Backend { return s.t.backendKind() }

// Insert inserts keys; res (nil or len(keys)) receives Inserted or Present.
func (s *Set[K]) Insert(ctx context.Context, keys []K, res []Result) error {
	return s.t.run(ctx, "insert", &batch[K, uint32]{op: OpInsert, keys: keys, res: res}, false)
}

// Lookup reports membership in res (len(keys)): Found or NotFound.
func (s *Set[K]) Lookup(ctx context.Context, keys []K, res []Result) error {
	return s.t.run(ctx, "lookup", &batch[K, uint32]{op: OpFind, keys: keys, res: res}, false)
}

// Delete deletes keys; res (nil or len(keys)) receives Removed or NotFound.
func (s *Set[K]) Delete(ctx context.Context, keys []K, res []Result) error {
	return s.t.run(ctx, "delete", &batch[K, uint32]{op: OpDelete, keys: keys, res: res}, false)
}

// Apply runs a mixed batch of OpFind, OpInsert and OpDelete in one kernel.
func (s *Set[K]) Apply(ctx context.Context, ops []Op, keys []K, res []Result) error {
	if ops == nil {
		ops = []Op{}
	}
	return s.t.run(ctx, "apply", &batch[K, uint32]{ops: ops, keys: keys, res: res}, false)
}

// InsertDevice is Insert on device-resident slices (CUDA backend).
func (s *Set[K]) InsertDevice(ctx context.Context, keys cuda.Slice[K], res cuda.Slice[uint8]) error {
	return s.t.runDevice(ctx, "insert", &devBatch[K, uint32]{op: OpInsert, keys: keys, res: res}, false)
}

// LookupDevice is Lookup on device-resident slices (CUDA backend).
func (s *Set[K]) LookupDevice(ctx context.Context, keys cuda.Slice[K], res cuda.Slice[uint8]) error {
	return s.t.runDevice(ctx, "lookup", &devBatch[K, uint32]{op: OpFind, keys: keys, res: res}, false)
}

// DeleteDevice is Delete on device-resident slices (CUDA backend).
func (s *Set[K]) DeleteDevice(ctx context.Context, keys cuda.Slice[K], res cuda.Slice[uint8]) error {
	return s.t.runDevice(ctx, "delete", &devBatch[K, uint32]{op: OpDelete, keys: keys, res: res}, false)
}

// ApplyDevice is Apply on device-resident slices (CUDA backend).
func (s *Set[K]) ApplyDevice(ctx context.Context, ops cuda.Slice[uint8], keys cuda.Slice[K], res cuda.Slice[uint8]) error {
	return s.t.runDevice(ctx, "apply", &devBatch[K, uint32]{ops: ops, keys: keys, res: res}, false)
}

// Len returns the number of keys, exact when no batch is in flight.
func (s *Set[K]) Len(ctx context.Context) (int, error) { return s.t.lenOf(ctx) }

// All returns an iterator over a copy of the keys (see Map.All).
func (s *Set[K]) All(ctx context.Context) (iter.Seq[K], error) {
	keys, err := s.Keys(ctx)
	if err != nil {
		return nil, err
	}
	return func(yield func(K) bool) {
		for _, k := range keys {
			if !yield(k) {
				return
			}
		}
	}, nil
}

// Keys returns every key, in no particular order.
func (s *Set[K]) Keys(ctx context.Context) ([]K, error) {
	keys, _, err := s.t.pairs(ctx)
	return keys, err
}

// Compact compacts the bucket lists (see Map.Compact).
func (s *Set[K]) Compact(ctx context.Context) error { return s.t.compact(ctx) }

// Stats reports the table's memory.
func (s *Set[K]) Stats(ctx context.Context) (Stats, error) { return s.t.stats(ctx) }

// Close frees the table's memory; later calls return ErrClosed.
func (s *Set[K]) Close() error { return s.t.close() }
