package mvbtree

import (
	"context"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/front"
)

// The device-resident methods, with btree's signatures and contracts. On the
// CPU backend they return ErrNeedsCUDA (ErrClosed first on a closed tree or
// snapshot). Their buffers must stay allocated until the call returns.

// device runs a device-resident batch of n elements whose other buffers have
// lens elements.
func device(f *front.Front, ctx context.Context, op string, mode front.Mode, n int, lens []int, run func() error) error {
	if err := f.Device(op); err != nil {
		return err
	}
	if err := f.Lens(op, n, lens...); err != nil {
		return err
	}
	return f.Do(ctx, op, mode, run)
}

// BuildDevice is Build on device-resident pairs. It sorts keys and vals in
// place (prim's radix sort) and keeps the last pair of each key.
func (t *Tree[K, V]) BuildDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V]) error {
	return device(t.f, ctx, "build", front.Exclusive, keys.Len(), []int{vals.Len()}, func() error {
		return t.gpu.buildDevice(ctx, keys, vals)
	})
}

// InsertDevice is Insert on device-resident pairs.
func (t *Tree[K, V]) InsertDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V]) error {
	return device(t.f, ctx, "insert", front.Shared, keys.Len(), []int{vals.Len()}, func() error {
		return t.gpu.insertDevice(ctx, keys, vals)
	})
}

// DeleteDevice is Delete on device-resident keys.
func (t *Tree[K, V]) DeleteDevice(ctx context.Context, keys cuda.Slice[K]) error {
	return device(t.f, ctx, "delete", front.Shared, keys.Len(), nil, func() error { return t.gpu.deleteDevice(ctx, keys) })
}

func (t *Tree[K, V]) devReader() gpuReader[K, V] {
	if t.gpu == nil {
		return gpuReader[K, V]{}
	}
	return gpuReader[K, V]{g: t.gpu}
}

func (s *Snapshot[K, V]) devReader() gpuReader[K, V] {
	if s.gpu == nil {
		return gpuReader[K, V]{}
	}
	return s.gpu.reader()
}

// LookupDevice is Lookup on device-resident buffers; found[i] is 1 or 0.
func (t *Tree[K, V]) LookupDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V], found cuda.Slice[uint8]) error {
	return lookupDevice(t.f, ctx, t.devReader(), keys, vals, found)
}

// SuccessorDevice is Successor on device-resident buffers.
func (t *Tree[K, V]) SuccessorDevice(ctx context.Context, keys, outKeys cuda.Slice[K], outVals cuda.Slice[V], found cuda.Slice[uint8]) error {
	return neighborDevice(t.f, ctx, t.devReader(), "successor", false, keys, outKeys, outVals, found)
}

// PredecessorDevice is Predecessor on device-resident buffers.
func (t *Tree[K, V]) PredecessorDevice(ctx context.Context, keys, outKeys cuda.Slice[K], outVals cuda.Slice[V], found cuda.Slice[uint8]) error {
	return neighborDevice(t.f, ctx, t.devReader(), "predecessor", true, keys, outKeys, outVals, found)
}

// CountDevice is Count on device-resident buffers.
func (t *Tree[K, V]) CountDevice(ctx context.Context, lo, hi cuda.Slice[K], counts cuda.Slice[uint32]) error {
	return countDevice(t.f, ctx, t.devReader(), lo, hi, counts)
}

// RangeDevice is btree.Tree.RangeDevice on the latest version, linearizable:
// every query sees one version (a transient snapshot), so counts from
// CountDevice of a version no writer changed size the windows exactly. A
// query whose window is smaller than its range gets the range's first pairs
// and its whole count.
func (t *Tree[K, V]) RangeDevice(ctx context.Context, lo, hi cuda.Slice[K], offsets cuda.Slice[uint32], outKeys cuda.Slice[K], outVals cuda.Slice[V], counts cuda.Slice[uint32]) error {
	return rangeDevice(t.f, ctx, t.devReader(), lo, hi, offsets, outKeys, outVals, counts)
}

// LookupDevice is Lookup on the snapshot with device-resident buffers.
func (s *Snapshot[K, V]) LookupDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V], found cuda.Slice[uint8]) error {
	return lookupDevice(s.f, ctx, s.devReader(), keys, vals, found)
}

// SuccessorDevice is Successor on the snapshot with device-resident buffers.
func (s *Snapshot[K, V]) SuccessorDevice(ctx context.Context, keys, outKeys cuda.Slice[K], outVals cuda.Slice[V], found cuda.Slice[uint8]) error {
	return neighborDevice(s.f, ctx, s.devReader(), "successor", false, keys, outKeys, outVals, found)
}

// PredecessorDevice is Predecessor on the snapshot with device-resident
// buffers.
func (s *Snapshot[K, V]) PredecessorDevice(ctx context.Context, keys, outKeys cuda.Slice[K], outVals cuda.Slice[V], found cuda.Slice[uint8]) error {
	return neighborDevice(s.f, ctx, s.devReader(), "predecessor", true, keys, outKeys, outVals, found)
}

// CountDevice is Count on the snapshot with device-resident buffers.
func (s *Snapshot[K, V]) CountDevice(ctx context.Context, lo, hi cuda.Slice[K], counts cuda.Slice[uint32]) error {
	return countDevice(s.f, ctx, s.devReader(), lo, hi, counts)
}

// RangeDevice is RangeDevice on the snapshot.
func (s *Snapshot[K, V]) RangeDevice(ctx context.Context, lo, hi cuda.Slice[K], offsets cuda.Slice[uint32], outKeys cuda.Slice[K], outVals cuda.Slice[V], counts cuda.Slice[uint32]) error {
	return rangeDevice(s.f, ctx, s.devReader(), lo, hi, offsets, outKeys, outVals, counts)
}

func lookupDevice[K, V warpkit.Word](f *front.Front, ctx context.Context, r gpuReader[K, V], keys cuda.Slice[K], vals cuda.Slice[V], found cuda.Slice[uint8]) error {
	return device(f, ctx, "lookup", front.Shared, keys.Len(), []int{vals.Len(), found.Len()}, func() error {
		return r.lookupDevice(ctx, keys, vals, found)
	})
}

func neighborDevice[K, V warpkit.Word](f *front.Front, ctx context.Context, r gpuReader[K, V], op string, pred bool, keys, outKeys cuda.Slice[K], outVals cuda.Slice[V], found cuda.Slice[uint8]) error {
	return device(f, ctx, op, front.Shared, keys.Len(), []int{outKeys.Len(), outVals.Len(), found.Len()}, func() error {
		return r.neighborDevice(ctx, pred, keys, outKeys, outVals, found)
	})
}

func countDevice[K, V warpkit.Word](f *front.Front, ctx context.Context, r gpuReader[K, V], lo, hi cuda.Slice[K], counts cuda.Slice[uint32]) error {
	return device(f, ctx, "count", front.Shared, lo.Len(), []int{hi.Len(), counts.Len()}, func() error {
		return r.countDevice(ctx, lo, hi, counts)
	})
}

func rangeDevice[K, V warpkit.Word](f *front.Front, ctx context.Context, r gpuReader[K, V], lo, hi cuda.Slice[K], offsets cuda.Slice[uint32], outKeys cuda.Slice[K], outVals cuda.Slice[V], counts cuda.Slice[uint32]) error {
	if err := f.Device("range"); err != nil {
		return err
	}
	if err := f.Lens("range", outKeys.Len(), outVals.Len()); err != nil {
		return err
	}
	return device(f, ctx, "range", front.Shared, lo.Len(), []int{hi.Len(), counts.Len(), offsets.Len() - 1}, func() error {
		return r.rangeDevice(ctx, lo, hi, offsets, outKeys, outVals, counts)
	})
}
