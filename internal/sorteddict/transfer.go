package sorteddict

import (
	"errors"
	"fmt"
	"math"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/gpurt"
)

// Copier is one device-to-host copy of a call's results (see Pair).
type Copier interface {
	Download(s *gpurt.Staging, stream *cuda.Stream) (gpurt.Pending, error)
}

type pair[T cuda.Elem] struct {
	dst []T
	src cuda.Slice[T]
}

func (p pair[T]) Download(s *gpurt.Staging, stream *cuda.Stream) (gpurt.Pending, error) {
	return gpurt.Download(s, stream, p.dst, p.src)
}

// Pair names a copy of src into dst.
func Pair[T cuda.Elem](dst []T, src cuda.Slice[T]) Copier { return pair[T]{dst, src} }

// Fetch enqueues the copies through staging already reserved for them,
// synchronizes the stream and finishes them. It synchronizes also when it
// fails to enqueue a copy, so that none is in flight when it returns.
func Fetch(s *gpurt.Staging, stream *cuda.Stream, copies ...Copier) error {
	ps := make([]gpurt.Pending, 0, len(copies))
	for _, c := range copies {
		p, err := c.Download(s, stream)
		if err != nil {
			SyncOnError(stream, &err)
			return err
		}
		ps = append(ps, p)
	}
	if err := stream.Synchronize(); err != nil {
		return err
	}
	for _, p := range ps {
		p.Finish()
	}
	return nil
}

// ReadBack copies src to a new Go slice through staging (reserving it) and
// synchronizes the stream.
func ReadBack[T cuda.Elem](dev *cuda.Device, s *gpurt.Staging, stream *cuda.Stream, src cuda.Slice[T]) ([]T, error) {
	out := make([]T, src.Len())
	if err := s.Reserve(dev, gpurt.Bytes[T](src.Len())); err != nil {
		return nil, err
	}
	return out, Fetch(s, stream, Pair(out, src))
}

// RangeParts collects the pairs of a range query processed chunk by chunk.
type RangeParts[K, V warpkit.Word] struct {
	keys  []cuda.Slice[K]
	vals  []cuda.Slice[V]
	total int
}

// Alloc appends a chunk of n pairs and returns its (uninitialized) slices.
func (p *RangeParts[K, V]) Alloc(dev *cuda.Device, n int) (cuda.Slice[K], cuda.Slice[V], error) {
	if uint64(p.total)+uint64(n) > math.MaxUint32 {
		return cuda.Slice[K]{}, cuda.Slice[V]{}, fmt.Errorf("%w: a range result of more than %d pairs", warpkit.ErrInvalidArgument, uint64(math.MaxUint32))
	}
	k, err := Alloc[K](dev, n)
	if err != nil {
		return k, cuda.Slice[V]{}, err
	}
	v, err := Alloc[V](dev, n)
	if err != nil {
		k.Free()
		return cuda.Slice[K]{}, v, err
	}
	if n > 0 {
		p.keys, p.vals, p.total = append(p.keys, k), append(p.vals, v), p.total+n
	}
	return k, v, nil
}

// Free releases the chunks.
func (p *RangeParts[K, V]) Free() {
	for i := range p.keys {
		p.keys[i].Free()
		p.vals[i].Free()
	}
	p.keys, p.vals, p.total = nil, nil, 0
}

// Assemble builds the result: per-query offsets from counts (scan is an
// exclusive scan writing the total to its last argument), and the chunks'
// pairs in one pair of slices. It synchronizes the stream, also when it fails.
// On success the parts are consumed; on failure they are left for the caller
// to Free (and nothing Assemble allocated is left behind).
func (p *RangeParts[K, V]) Assemble(dev *cuda.Device, stream *cuda.Stream, counts cuda.Slice[uint32], scan func(in, out, total cuda.Slice[uint32]) error) (*warpkit.DeviceRanges[K, V], error) {
	nq := counts.Len()
	off, err := cuda.Alloc[uint32](dev, nq+1)
	if err != nil {
		return nil, err
	}
	res := &warpkit.DeviceRanges[K, V]{Offsets: off, Total: p.total}
	// fail frees what Assemble allocated once the work that writes it is done.
	fail := func(err error) (*warpkit.DeviceRanges[K, V], error) {
		SyncOnError(stream, &err)
		res.Free()
		return nil, err
	}
	if err := scan(counts, off.Sub(0, nq), off.Sub(nq, nq+1)); err != nil {
		return fail(err)
	}
	if len(p.keys) > 1 {
		k, err1 := Alloc[K](dev, p.total)
		v, err2 := Alloc[V](dev, p.total)
		res.Keys, res.Vals = k, v
		if err := errors.Join(err1, err2); err != nil {
			return fail(err)
		}
		at := 0
		for i := range p.keys {
			n := p.keys[i].Len()
			if err := errors.Join(cuda.CopyAsync(k.Sub(at, at+n), p.keys[i], stream), cuda.CopyAsync(v.Sub(at, at+n), p.vals[i], stream)); err != nil {
				return fail(err)
			}
			at += n
		}
	}
	if err := stream.Synchronize(); err != nil {
		return fail(err)
	}
	switch len(p.keys) {
	case 0:
	case 1: // the only part is the result
		res.Keys, res.Vals = p.keys[0], p.vals[0]
		p.keys, p.vals, p.total = nil, nil, 0
	default: // copied: the parts go
		p.Free()
	}
	return res, nil
}

// RangeToHost copies a device result to the host through staging and
// synchronizes the stream.
func RangeToHost[K, V warpkit.Word](dev *cuda.Device, s *gpurt.Staging, stream *cuda.Stream, dr *warpkit.DeviceRanges[K, V]) (*warpkit.Ranges[K, V], error) {
	nq := dr.Len()
	off := make([]uint32, nq+1)
	res := &warpkit.Ranges[K, V]{Offsets: make([]int, nq+1), Keys: make([]K, dr.Total), Vals: make([]V, dr.Total)}
	if err := s.Reserve(dev, gpurt.Bytes[uint32](nq+1)+gpurt.Bytes[K](dr.Total)+gpurt.Bytes[V](dr.Total)); err != nil {
		return nil, err
	}
	copies := []Copier{Pair(off, dr.Offsets)}
	if dr.Total > 0 {
		copies = append(copies, Pair(res.Keys, dr.Keys.Sub(0, dr.Total)), Pair(res.Vals, dr.Vals.Sub(0, dr.Total)))
	}
	if err := Fetch(s, stream, copies...); err != nil {
		return nil, err
	}
	for i, o := range off {
		res.Offsets[i] = int(o)
	}
	return res, nil
}
