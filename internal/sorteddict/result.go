// Package sorteddict holds what the sorted dictionaries (packages sortedarray
// and lsm) share: range-query results on the host and on the device, argument
// checks, and the GPU plumbing both use (grow-only device scratch, pinned
// staging of Go slices, kernel launch shapes).
package sorteddict

import (
	"errors"
	"fmt"
	"iter"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
)

// RangeResult holds the answers to a batch of range queries: query i's pairs
// are Keys[Offsets[i]:Offsets[i+1]] with Values at the same positions, in
// ascending key order.
type RangeResult[K, V warpkit.Word] struct {
	Offsets []int // len = queries + 1; Offsets[0] = 0
	Keys    []K
	Values  []V
}

// Len returns the number of queries.
func (r *RangeResult[K, V]) Len() int { return max(len(r.Offsets)-1, 0) }

// Count returns how many pairs query i found.
func (r *RangeResult[K, V]) Count(i int) int { return r.Offsets[i+1] - r.Offsets[i] }

// Query iterates over query i's pairs in ascending key order.
func (r *RangeResult[K, V]) Query(i int) iter.Seq2[K, V] {
	lo, hi := r.Offsets[i], r.Offsets[i+1]
	return func(yield func(K, V) bool) {
		for j := lo; j < hi; j++ {
			if !yield(r.Keys[j], r.Values[j]) {
				return
			}
		}
	}
}

// DeviceRange is a batch of range-query answers in device memory, laid out as
// RangeResult. The caller owns it and must Free it.
type DeviceRange[K, V warpkit.Word] struct {
	Offsets cuda.Slice[uint32] // queries + 1 entries
	Keys    cuda.Slice[K]      // Total entries (zero Slice when Total is 0)
	Values  cuda.Slice[V]
	Total   int
}

// Len returns the number of queries.
func (d *DeviceRange[K, V]) Len() int { return max(d.Offsets.Len()-1, 0) }

// Free releases the device memory; the result must not be used afterwards.
func (d *DeviceRange[K, V]) Free() error {
	return errors.Join(d.Offsets.Free(), d.Keys.Free(), d.Values.Free())
}

// ToHost copies the result into a RangeResult (synchronously).
func (d *DeviceRange[K, V]) ToHost() (*RangeResult[K, V], error) {
	off, err := d.Offsets.ToHost()
	if err != nil {
		return nil, err
	}
	res := &RangeResult[K, V]{Offsets: make([]int, len(off)), Keys: make([]K, d.Total), Values: make([]V, d.Total)}
	for i, o := range off {
		res.Offsets[i] = int(o)
	}
	if d.Total > 0 {
		if err := d.Keys.Sub(0, d.Total).CopyToHost(res.Keys); err != nil {
			return nil, err
		}
		if err := d.Values.Sub(0, d.Total).CopyToHost(res.Values); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// ErrNoDeviceSlices is returned (wrapped) by the CPU backend's device-resident methods.
var ErrNoDeviceSlices = fmt.Errorf("%w: device-resident slices need the CUDA backend", warpkit.ErrInvalidArgument)
