package gpurt

import (
	"errors"
	"fmt"

	"github.com/warpkit/warpkit/cuda"
)

// Region is device memory that grows in place: one reserved address range
// (cuda.VirtualRange) with memory mapped into it part by part, seen as one
// array. Growing it copies nothing, waits for nothing and keeps its
// address, where a buffer grown by copying needs its old and new memory at
// once (2.5 times the data at the peak) and a wait for its stream before it
// frees the old (graph's arena of head slabs paid 125 µs a growth on the
// H200 that way). Its first Grow reserves address space for Max bytes (no
// memory behind it). On a device without virtual memory management, or
// when the range cannot be reserved, it is one buffer grown by copying.
//
// The zero Region is empty; Max, when set before the first Grow, bounds
// what it may grow to (default and at most: the device's memory). Not safe
// for concurrent use.
type Region struct {
	Max int64

	vr    *cuda.VirtualRange
	parts []*cuda.Buffer // mapped into vr, in order from its base
	view  *cuda.Buffer   // vr's mapped bytes, or the copied buffer
}

// regionVMM lets tests run the copying fallback on devices that have
// virtual memory management.
var regionVMM = true

// Bytes returns the region's memory: all Cap() bytes (the zero Slice while
// empty). Grow may replace it; the address stays unless the region copies.
func (r *Region) Bytes() cuda.Slice[uint8] {
	if r.view == nil {
		return cuda.Slice[uint8]{}
	}
	s, _ := cuda.View[uint8](r.view, 0, int(r.view.Size()))
	return s
}

// Cap returns the bytes the region holds.
func (r *Region) Cap() int64 {
	if r.view == nil {
		return 0
	}
	return r.view.Size()
}

// Grow makes the region at least n bytes, keeping its first used bytes and
// filling the rest with fill (queued on s), by half its size at least (so
// that growing by small steps maps or copies O(log n) times). On failure
// (ErrOutOfMemory for the device's memory or past Max) the region is as it
// was.
func (r *Region) Grow(dev *cuda.Device, s *cuda.Stream, used, n int64, fill byte) error {
	if n <= r.Cap() {
		return nil
	}
	limit := r.Max
	if total := int64(dev.Properties().TotalMemory); limit <= 0 || limit > total {
		limit = total
	}
	if n > limit {
		return fmt.Errorf("gpurt: growing a region to %d bytes: %w (at most %d)", n, cuda.ErrOutOfMemory, limit)
	}
	if used < 0 || used > r.Cap() {
		return fmt.Errorf("%w: gpurt: keeping %d bytes of a region of %d", cuda.ErrInvalidArgument, used, r.Cap())
	}
	c := min(limit, max(n, r.Cap()+r.Cap()/2, 1024))
	if r.vr == nil && r.view == nil && regionVMM && dev.VirtualMemorySupported() {
		// Without its address range (the process's address space spent,
		// say) the region copies instead.
		if vr, err := dev.ReserveRange(uint64(limit)); err == nil {
			r.vr = vr
		}
	}
	if r.vr == nil {
		return r.growCopying(dev, s, used, c, fill)
	}
	g := int64(r.vr.Granularity())
	c = min((c+g-1)/g*g, int64(r.vr.Size()))
	have := r.Cap() // the view spans every part
	part, err := r.vr.Map(uint64(have), uint64(c-have))
	if err != nil {
		return err
	}
	view, err := r.vr.View(0, uint64(c))
	if err == nil {
		if fs, verr := cuda.View[uint8](view, int(used), int(c-used)); verr != nil {
			err = verr
		} else {
			err = fs.FillBytes(fill, s)
		}
	}
	if err != nil {
		part.Free() // a fill not queued: nothing uses the part
		return err
	}
	r.parts = append(r.parts, part)
	if r.view != nil {
		r.view.Free() // a view: releases nothing
	}
	r.view = view
	return nil
}

// growCopying is Grow without virtual memory management (GrowCopy).
func (r *Region) growCopying(dev *cuda.Device, s *cuda.Stream, used, c int64, fill byte) error {
	nb, err := GrowCopy(dev, s, r.Bytes(), int(used), int(c), fill)
	if err != nil {
		return err
	}
	if r.view != nil {
		r.view.Free()
	}
	r.view = nb.Buffer()
	return nil
}

// GrowCopy returns a new slice of c elements holding old's first used
// elements, the rest of its bytes filled with fill, once s has done the
// copy (queued after the work on old); the caller frees old. On failure
// nothing it allocated stays and old is as it was.
func GrowCopy[T cuda.Elem](dev *cuda.Device, s *cuda.Stream, old cuda.Slice[T], used, c int, fill byte) (cuda.Slice[T], error) {
	ns, err := cuda.Alloc[T](dev, c)
	if err != nil {
		return ns, err
	}
	err = ns.FillBytes(fill, s)
	if err == nil && used > 0 {
		err = cuda.CopyAsync(ns.Sub(0, used), old.Sub(0, used), s)
	}
	if werr := s.Synchronize(); err == nil {
		err = werr
	}
	if err != nil {
		ns.Free()
		return cuda.Slice[T]{}, err
	}
	return ns, nil
}

// Free releases the region's memory (and address range); the region is
// empty afterwards. Work queued on its memory must be done.
func (r *Region) Free() error {
	var err error
	if r.view != nil {
		err = errors.Join(err, ignoreClosed(r.view.Free()))
		r.view = nil
	}
	for i := len(r.parts) - 1; i >= 0; i-- {
		err = errors.Join(err, ignoreClosed(r.parts[i].Free()))
	}
	r.parts = nil
	if r.vr != nil {
		err = errors.Join(err, ignoreClosed(r.vr.Free()))
		r.vr = nil
	}
	return err
}

func ignoreClosed(err error) error {
	if errors.Is(err, cuda.ErrClosed) {
		return nil
	}
	return err
}
