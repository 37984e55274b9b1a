package sorteddict

import (
	"context"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/front"
)

// UpdateKind says what a batch holds: a mix (per-entry deletion flags), only
// insertions, or only deletions.
type UpdateKind int

const (
	Mixed UpdateKind = iota
	InsertsOnly
	DeletesOnly
)

// Engine is one backend of a sorted dictionary. Front checks arguments and
// serializes updates before calling it; lengths are already equal.
type Engine[K, V warpkit.Word] interface {
	Update(ctx context.Context, keys []K, vals []V, dels []bool, kind UpdateKind) error
	UpdateDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V], dels cuda.Slice[uint8], kind UpdateKind) error
	Lookup(ctx context.Context, keys []K, vals []V, found []bool) error
	LookupDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V], found cuda.Slice[uint8]) error
	Count(ctx context.Context, lo, hi []K, counts []uint32) error
	CountDevice(ctx context.Context, lo, hi cuda.Slice[K], counts cuda.Slice[uint32]) error
	Range(ctx context.Context, lo, hi []K) (*warpkit.Ranges[K, V], error)
	RangeDevice(ctx context.Context, lo, hi cuda.Slice[K]) (*warpkit.DeviceRanges[K, V], error)
	Neighbor(ctx context.Context, keys, outKeys []K, outVals []V, found []bool, succ bool) error
	NeighborDevice(ctx context.Context, keys, outKeys cuda.Slice[K], outVals cuda.Slice[V], found cuda.Slice[uint8], succ bool) error
	Close() error
}

// Front is the public face both dictionaries share, on the shared front layer
// (internal/front): argument checks, the closed state, error context, and
// the lock (updates exclusive, queries shared). The packages' exported
// methods delegate to it.
type Front[K, V warpkit.Word] struct {
	*front.Front
	impl Engine[K, V]
}

// NewFront wraps a backend; pkg prefixes error messages.
func NewFront[K, V warpkit.Word](pkg string, backend warpkit.Backend, impl Engine[K, V]) *Front[K, V] {
	return &Front[K, V]{Front: front.New(pkg, backend), impl: impl}
}

// Close closes the backend; later calls return ErrClosed.
func (f *Front[K, V]) Close() error { return f.Front.Close(f.impl.Close) }

// LiveKeys counts the live keys of a dictionary: a count of [0, max) and a
// lookup of the largest key, which no half-open range holds.
func LiveKeys[K, V warpkit.Word](ctx context.Context, e Engine[K, V]) (int, error) {
	c, v, found := make([]uint32, 1), make([]V, 1), make([]bool, 1)
	if err := e.Count(ctx, []K{0}, []K{^K(0)}, c); err != nil {
		return 0, err
	}
	if err := e.Lookup(ctx, []K{^K(0)}, v, found); err != nil {
		return 0, err
	}
	n := int(c[0])
	if found[0] {
		n++
	}
	return n, nil
}

// Write runs an update alone.
func (f *Front[K, V]) Write(ctx context.Context, op string, run func() error) error {
	return f.Do(ctx, op, front.Exclusive, run)
}

// Read runs a query beside other queries.
func (f *Front[K, V]) Read(ctx context.Context, op string, run func() error) error {
	return f.Do(ctx, op, front.Shared, run)
}

// device checks equal lengths and the backend of a device-resident call.
func (f *Front[K, V]) device(op string, n int, lens ...int) error {
	if err := f.Device(op); err != nil {
		return err
	}
	return f.Lens(op, n, lens...)
}

// Update applies a mixed batch (dels nil: all insertions).
func (f *Front[K, V]) Update(ctx context.Context, keys []K, vals []V, dels []bool) error {
	kind := Mixed
	if dels == nil {
		kind = InsertsOnly
	} else if err := f.Lens("update", len(keys), len(dels)); err != nil {
		return err
	}
	if err := f.Lens("update", len(keys), len(vals)); err != nil {
		return err
	}
	return f.Write(ctx, "update", func() error { return f.impl.Update(ctx, keys, vals, dels, kind) })
}

// Delete deletes a batch of keys.
func (f *Front[K, V]) Delete(ctx context.Context, keys []K) error {
	return f.Write(ctx, "delete", func() error { return f.impl.Update(ctx, keys, nil, nil, DeletesOnly) })
}

// UpdateDevice applies a mixed device-resident batch.
func (f *Front[K, V]) UpdateDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V], dels cuda.Slice[uint8]) error {
	if err := f.device("update", keys.Len(), vals.Len(), dels.Len()); err != nil {
		return err
	}
	return f.Write(ctx, "update", func() error { return f.impl.UpdateDevice(ctx, keys, vals, dels, Mixed) })
}

// InsertDevice inserts a device-resident batch.
func (f *Front[K, V]) InsertDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V]) error {
	if err := f.device("insert", keys.Len(), vals.Len()); err != nil {
		return err
	}
	return f.Write(ctx, "insert", func() error { return f.impl.UpdateDevice(ctx, keys, vals, cuda.Slice[uint8]{}, InsertsOnly) })
}

// DeleteDevice deletes a device-resident batch of keys.
func (f *Front[K, V]) DeleteDevice(ctx context.Context, keys cuda.Slice[K]) error {
	if err := f.Device("delete"); err != nil {
		return err
	}
	return f.Write(ctx, "delete", func() error {
		return f.impl.UpdateDevice(ctx, keys, cuda.Slice[V]{}, cuda.Slice[uint8]{}, DeletesOnly)
	})
}

// Lookup answers point queries.
func (f *Front[K, V]) Lookup(ctx context.Context, keys []K, vals []V, found []bool) error {
	if err := f.Lens("lookup", len(keys), len(vals), len(found)); err != nil {
		return err
	}
	return f.Read(ctx, "lookup", func() error { return f.impl.Lookup(ctx, keys, vals, found) })
}

// Get looks up one key.
func (f *Front[K, V]) Get(ctx context.Context, key K) (V, bool, error) {
	var v [1]V
	var ok [1]bool
	err := f.Lookup(ctx, []K{key}, v[:], ok[:])
	return v[0], ok[0], err
}

// LookupDevice answers device-resident point queries.
func (f *Front[K, V]) LookupDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V], found cuda.Slice[uint8]) error {
	if err := f.device("lookup", keys.Len(), vals.Len(), found.Len()); err != nil {
		return err
	}
	return f.Read(ctx, "lookup", func() error { return f.impl.LookupDevice(ctx, keys, vals, found) })
}

// Count answers count queries.
func (f *Front[K, V]) Count(ctx context.Context, lo, hi []K, counts []uint32) error {
	if err := f.Lens("count", len(lo), len(hi), len(counts)); err != nil {
		return err
	}
	return f.Read(ctx, "count", func() error { return f.impl.Count(ctx, lo, hi, counts) })
}

// CountDevice answers device-resident count queries.
func (f *Front[K, V]) CountDevice(ctx context.Context, lo, hi cuda.Slice[K], counts cuda.Slice[uint32]) error {
	if err := f.device("count", lo.Len(), hi.Len(), counts.Len()); err != nil {
		return err
	}
	return f.Read(ctx, "count", func() error { return f.impl.CountDevice(ctx, lo, hi, counts) })
}

// Range answers range queries.
func (f *Front[K, V]) Range(ctx context.Context, lo, hi []K) (*warpkit.Ranges[K, V], error) {
	if err := f.Lens("range", len(lo), len(hi)); err != nil {
		return nil, err
	}
	var res *warpkit.Ranges[K, V]
	err := f.Read(ctx, "range", func() (err error) { res, err = f.impl.Range(ctx, lo, hi); return })
	return res, err
}

// RangeDevice answers device-resident range queries.
func (f *Front[K, V]) RangeDevice(ctx context.Context, lo, hi cuda.Slice[K]) (*warpkit.DeviceRanges[K, V], error) {
	if err := f.device("range", lo.Len(), hi.Len()); err != nil {
		return nil, err
	}
	var res *warpkit.DeviceRanges[K, V]
	err := f.Read(ctx, "range", func() (err error) { res, err = f.impl.RangeDevice(ctx, lo, hi); return })
	return res, err
}

func neighborOp(succ bool) string {
	if succ {
		return "successor"
	}
	return "predecessor"
}

// Neighbor answers successor (succ) or predecessor queries.
func (f *Front[K, V]) Neighbor(ctx context.Context, keys, outKeys []K, outVals []V, found []bool, succ bool) error {
	op := neighborOp(succ)
	if err := f.Lens(op, len(keys), len(outKeys), len(outVals), len(found)); err != nil {
		return err
	}
	return f.Read(ctx, op, func() error { return f.impl.Neighbor(ctx, keys, outKeys, outVals, found, succ) })
}

// NeighborDevice answers device-resident successor or predecessor queries.
func (f *Front[K, V]) NeighborDevice(ctx context.Context, keys, outKeys cuda.Slice[K], outVals cuda.Slice[V], found cuda.Slice[uint8], succ bool) error {
	op := neighborOp(succ)
	if err := f.device(op, keys.Len(), outKeys.Len(), outVals.Len(), found.Len()); err != nil {
		return err
	}
	return f.Read(ctx, op, func() error { return f.impl.NeighborDevice(ctx, keys, outKeys, outVals, found, succ) })
}

// CPUDevice is embedded by CPU backends: every device-resident method fails
// with warpkit.ErrNeedsCUDA.
type CPUDevice[K, V warpkit.Word] struct{}

func (CPUDevice[K, V]) UpdateDevice(context.Context, cuda.Slice[K], cuda.Slice[V], cuda.Slice[uint8], UpdateKind) error {
	return warpkit.ErrNeedsCUDA
}

func (CPUDevice[K, V]) LookupDevice(context.Context, cuda.Slice[K], cuda.Slice[V], cuda.Slice[uint8]) error {
	return warpkit.ErrNeedsCUDA
}

func (CPUDevice[K, V]) CountDevice(context.Context, cuda.Slice[K], cuda.Slice[K], cuda.Slice[uint32]) error {
	return warpkit.ErrNeedsCUDA
}

func (CPUDevice[K, V]) RangeDevice(context.Context, cuda.Slice[K], cuda.Slice[K]) (*warpkit.DeviceRanges[K, V], error) {
	return nil, warpkit.ErrNeedsCUDA
}

func (CPUDevice[K, V]) NeighborDevice(context.Context, cuda.Slice[K], cuda.Slice[K], cuda.Slice[V], cuda.Slice[uint8], bool) error {
	return warpkit.ErrNeedsCUDA
}
