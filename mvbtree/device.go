package mvbtree

import (
	"context"

	"github.com/warpkit/warpkit/cuda"
)

// The device-resident methods, with btree's signatures and contracts. They
// need the CUDA backend (not built yet: issue 18); on the CPU backend they
// return ErrNeedsCUDA (ErrClosed first on a closed tree or snapshot).

// BuildDevice is Build on device-resident pairs.
func (t *Tree[K, V]) BuildDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V]) error {
	return t.f.Device("build")
}

// InsertDevice is Insert on device-resident pairs.
func (t *Tree[K, V]) InsertDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V]) error {
	return t.f.Device("insert")
}

// DeleteDevice is Delete on device-resident keys.
func (t *Tree[K, V]) DeleteDevice(ctx context.Context, keys cuda.Slice[K]) error {
	return t.f.Device("delete")
}

// LookupDevice is Lookup on device-resident buffers; found[i] is 1 or 0.
func (t *Tree[K, V]) LookupDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V], found cuda.Slice[uint8]) error {
	return t.f.Device("lookup")
}

// SuccessorDevice is Successor on device-resident buffers.
func (t *Tree[K, V]) SuccessorDevice(ctx context.Context, keys, outKeys cuda.Slice[K], outVals cuda.Slice[V], found cuda.Slice[uint8]) error {
	return t.f.Device("successor")
}

// PredecessorDevice is Predecessor on device-resident buffers.
func (t *Tree[K, V]) PredecessorDevice(ctx context.Context, keys, outKeys cuda.Slice[K], outVals cuda.Slice[V], found cuda.Slice[uint8]) error {
	return t.f.Device("predecessor")
}

// CountDevice is Count on device-resident buffers.
func (t *Tree[K, V]) CountDevice(ctx context.Context, lo, hi cuda.Slice[K], counts cuda.Slice[uint32]) error {
	return t.f.Device("count")
}

// RangeDevice is btree.Tree.RangeDevice on the latest version
// (linearizable).
func (t *Tree[K, V]) RangeDevice(ctx context.Context, lo, hi cuda.Slice[K], offsets cuda.Slice[uint32], outKeys cuda.Slice[K], outVals cuda.Slice[V], counts cuda.Slice[uint32]) error {
	return t.f.Device("range")
}

// LookupDevice is Lookup on the snapshot with device-resident buffers.
func (s *Snapshot[K, V]) LookupDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V], found cuda.Slice[uint8]) error {
	return s.f.Device("lookup")
}

// SuccessorDevice is Successor on the snapshot with device-resident buffers.
func (s *Snapshot[K, V]) SuccessorDevice(ctx context.Context, keys, outKeys cuda.Slice[K], outVals cuda.Slice[V], found cuda.Slice[uint8]) error {
	return s.f.Device("successor")
}

// PredecessorDevice is Predecessor on the snapshot with device-resident
// buffers.
func (s *Snapshot[K, V]) PredecessorDevice(ctx context.Context, keys, outKeys cuda.Slice[K], outVals cuda.Slice[V], found cuda.Slice[uint8]) error {
	return s.f.Device("predecessor")
}

// CountDevice is Count on the snapshot with device-resident buffers.
func (s *Snapshot[K, V]) CountDevice(ctx context.Context, lo, hi cuda.Slice[K], counts cuda.Slice[uint32]) error {
	return s.f.Device("count")
}

// RangeDevice is RangeDevice on the snapshot.
func (s *Snapshot[K, V]) RangeDevice(ctx context.Context, lo, hi cuda.Slice[K], offsets cuda.Slice[uint32], outKeys cuda.Slice[K], outVals cuda.Slice[V], counts cuda.Slice[uint32]) error {
	return s.f.Device("range")
}
