package sortedarray

import (
	"context"
	"fmt"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/sorteddict"
	"github.com/warpkit/warpkit/prim"
)

// MaxLen is the largest number of keys the array holds.
const MaxLen = prim.MaxElements

// Options configure a SortedArray.
type Options struct {
	// Backend selects CUDA or the pure-Go backend; Auto picks CUDA when a
	// device exists.
	Backend warpkit.Backend
	// Device is the CUDA device to use; nil opens device 0 (closed by Close).
	Device *cuda.Device
	// Capacity, when positive, reserves device memory for that many keys up
	// front (the array and the buffer the next merge writes).
	Capacity int
}

// Stats describes the array.
type Stats struct {
	Backend warpkit.Backend
	// Len is the number of keys.
	Len int
}

// SortedArray is a sorted-array dictionary from K to V.
type SortedArray[K, V warpkit.Word] struct {
	f    *sorteddict.Front[K, V]
	impl engine[K, V]
}

type engine[K, V warpkit.Word] interface {
	sorteddict.Engine[K, V]
	len() int
}

// New returns an empty sorted array.
func New[K, V warpkit.Word](opt Options) (*SortedArray[K, V], error) {
	if opt.Capacity < 0 || opt.Capacity > MaxLen {
		return nil, fmt.Errorf("sortedarray: %w: capacity %d (want 0..%d)", warpkit.ErrInvalidArgument, opt.Capacity, MaxLen)
	}
	dev, own := opt.Device, false
	if dev == nil && opt.Backend != warpkit.CPU {
		d, err := warpkit.OpenDevice(opt.Backend, 0)
		if err != nil {
			return nil, fmt.Errorf("sortedarray: %w", err)
		}
		dev, own = d, d != nil
	}
	if dev == nil || opt.Backend == warpkit.CPU {
		return wrapEngine[K, V](warpkit.CPU, &cpuSA[K, V]{}), nil
	}
	g, err := newGPU[K, V](dev, own, opt.Capacity)
	if err != nil {
		if own {
			dev.Close()
		}
		return nil, fmt.Errorf("sortedarray: %w", err)
	}
	return wrapEngine[K, V](warpkit.CUDA, g), nil
}

func wrapEngine[K, V warpkit.Word](b warpkit.Backend, e engine[K, V]) *SortedArray[K, V] {
	return &SortedArray[K, V]{f: sorteddict.NewFront[K, V]("sortedarray", b, e), impl: e}
}

// Backend returns CPU or CUDA.
func (a *SortedArray[K, V]) Backend() warpkit.Backend { return a.f.Backend() }

// Close frees the array's memory. Later calls return ErrClosed.
func (a *SortedArray[K, V]) Close() error { return a.f.Close() }

// Len returns the number of keys.
func (a *SortedArray[K, V]) Len(ctx context.Context) (int, error) {
	n := 0
	err := a.f.Read(ctx, "len", func() error { n = a.impl.len(); return nil })
	return n, err
}

// Stats returns the array's size.
func (a *SortedArray[K, V]) Stats(ctx context.Context) (Stats, error) {
	st := Stats{Backend: a.Backend()}
	err := a.f.Read(ctx, "stats", func() error { st.Len = a.impl.len(); return nil })
	return st, err
}

// Update applies one mixed batch: entry i deletes keys[i] when dels[i] is
// true and otherwise inserts (keys[i], vals[i]). dels may be nil (all
// insertions).
func (a *SortedArray[K, V]) Update(ctx context.Context, keys []K, vals []V, dels []bool) error {
	return a.f.Update(ctx, keys, vals, dels)
}

// Insert inserts (or replaces) a batch of pairs.
func (a *SortedArray[K, V]) Insert(ctx context.Context, keys []K, vals []V) error {
	return a.f.Update(ctx, keys, vals, nil)
}

// Delete deletes a batch of keys; absent keys are ignored.
func (a *SortedArray[K, V]) Delete(ctx context.Context, keys []K) error { return a.f.Delete(ctx, keys) }

// UpdateDevice is Update on device-resident slices; dels holds 0 (insert) or
// non-zero (delete) per entry.
func (a *SortedArray[K, V]) UpdateDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V], dels cuda.Slice[uint8]) error {
	return a.f.UpdateDevice(ctx, keys, vals, dels)
}

// InsertDevice is Insert on device-resident slices.
func (a *SortedArray[K, V]) InsertDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V]) error {
	return a.f.InsertDevice(ctx, keys, vals)
}

// DeleteDevice is Delete on a device-resident slice.
func (a *SortedArray[K, V]) DeleteDevice(ctx context.Context, keys cuda.Slice[K]) error {
	return a.f.DeleteDevice(ctx, keys)
}

// Lookup sets vals[i] and found[i] to keys[i]'s value and whether it is
// present (vals[i] = 0 when absent).
func (a *SortedArray[K, V]) Lookup(ctx context.Context, keys []K, vals []V, found []bool) error {
	return a.f.Lookup(ctx, keys, vals, found)
}

// Get looks up one key.
func (a *SortedArray[K, V]) Get(ctx context.Context, key K) (V, bool, error) {
	return a.f.Get(ctx, key)
}

// LookupDevice is Lookup on device-resident slices (found[i] is 0 or 1).
func (a *SortedArray[K, V]) LookupDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V], found cuda.Slice[uint8]) error {
	return a.f.LookupDevice(ctx, keys, vals, found)
}

// Count sets counts[i] to the number of keys k with lo[i] <= k < hi[i] (0 when lo[i] >= hi[i]).
func (a *SortedArray[K, V]) Count(ctx context.Context, lo, hi []K, counts []uint32) error {
	return a.f.Count(ctx, lo, hi, counts)
}

// CountDevice is Count on device-resident slices.
func (a *SortedArray[K, V]) CountDevice(ctx context.Context, lo, hi cuda.Slice[K], counts cuda.Slice[uint32]) error {
	return a.f.CountDevice(ctx, lo, hi, counts)
}

// Range returns, for each query i, the pairs with lo[i] <= key < hi[i] in
// ascending key order.
func (a *SortedArray[K, V]) Range(ctx context.Context, lo, hi []K) (*warpkit.Ranges[K, V], error) {
	return a.f.Range(ctx, lo, hi)
}

// RangeDevice is Range with device-resident queries and results; the caller
// frees the result.
func (a *SortedArray[K, V]) RangeDevice(ctx context.Context, lo, hi cuda.Slice[K]) (*warpkit.DeviceRanges[K, V], error) {
	return a.f.RangeDevice(ctx, lo, hi)
}

// Successor sets (outKeys[i], outVals[i]) to the pair with the smallest key >
// keys[i]; found[i] is false (and the outputs 0) when there is none.
func (a *SortedArray[K, V]) Successor(ctx context.Context, keys, outKeys []K, outVals []V, found []bool) error {
	return a.f.Neighbor(ctx, keys, outKeys, outVals, found, true)
}

// Predecessor is Successor for the largest key < keys[i].
func (a *SortedArray[K, V]) Predecessor(ctx context.Context, keys, outKeys []K, outVals []V, found []bool) error {
	return a.f.Neighbor(ctx, keys, outKeys, outVals, found, false)
}

// SuccessorDevice is Successor on device-resident slices.
func (a *SortedArray[K, V]) SuccessorDevice(ctx context.Context, keys, outKeys cuda.Slice[K], outVals cuda.Slice[V], found cuda.Slice[uint8]) error {
	return a.f.NeighborDevice(ctx, keys, outKeys, outVals, found, true)
}

// PredecessorDevice is Predecessor on device-resident slices.
func (a *SortedArray[K, V]) PredecessorDevice(ctx context.Context, keys, outKeys cuda.Slice[K], outVals cuda.Slice[V], found cuda.Slice[uint8]) error {
	return a.f.NeighborDevice(ctx, keys, outKeys, outVals, found, false)
}
