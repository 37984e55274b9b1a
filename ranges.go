package warpkit

import (
	"errors"
	"iter"

	"github.com/warpkit/warpkit/cuda"
)

// Ranges holds the answers of a batch of range queries on the host: the
// pairs of query i are Keys[Offsets[i]:Offsets[i+1]] with the matching
// Vals, in ascending key order. len(Offsets) is the number of queries plus
// one. Every structure's Range method returns it.
type Ranges[K, V Word] struct {
	Offsets []int
	Keys    []K
	Vals    []V
}

// Len returns the number of queries.
func (r *Ranges[K, V]) Len() int {
	if r == nil {
		return 0
	}
	return max(len(r.Offsets)-1, 0)
}

// Count returns the number of pairs query i found.
func (r *Ranges[K, V]) Count(i int) int { return r.Offsets[i+1] - r.Offsets[i] }

// Query returns query i's pairs in key order.
func (r *Ranges[K, V]) Query(i int) iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		for j := r.Offsets[i]; j < r.Offsets[i+1]; j++ {
			if !yield(r.Keys[j], r.Vals[j]) {
				return
			}
		}
	}
}

// Pairs returns query i's keys and values (views into Keys and Vals).
func (r *Ranges[K, V]) Pairs(i int) ([]K, []V) {
	return r.Keys[r.Offsets[i]:r.Offsets[i+1]], r.Vals[r.Offsets[i]:r.Offsets[i+1]]
}

// DeviceRanges is a batch of range-query answers in device memory, laid out as
// Ranges (offsets as uint32). The caller owns it and must Free it.
type DeviceRanges[K, V Word] struct {
	Offsets cuda.Slice[uint32] // queries + 1 entries
	Keys    cuda.Slice[K]      // Total entries (the zero Slice when Total is 0)
	Vals    cuda.Slice[V]
	Total   int
}

// Len returns the number of queries.
func (d *DeviceRanges[K, V]) Len() int { return max(d.Offsets.Len()-1, 0) }

// Free releases the device memory; the result must not be used afterwards.
func (d *DeviceRanges[K, V]) Free() error {
	return errors.Join(d.Offsets.Free(), d.Keys.Free(), d.Vals.Free())
}

// ToHost copies the answers into a Ranges (synchronously).
func (d *DeviceRanges[K, V]) ToHost() (*Ranges[K, V], error) {
	off, err := d.Offsets.ToHost()
	if err != nil {
		return nil, err
	}
	res := &Ranges[K, V]{Offsets: make([]int, len(off)), Keys: make([]K, d.Total), Vals: make([]V, d.Total)}
	for i, o := range off {
		res.Offsets[i] = int(o)
	}
	if d.Total > 0 {
		if err := d.Keys.Sub(0, d.Total).CopyToHost(res.Keys); err != nil {
			return nil, err
		}
		if err := d.Vals.Sub(0, d.Total).CopyToHost(res.Vals); err != nil {
			return nil, err
		}
	}
	return res, nil
}
