package cuda

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"
)

// Pinned is page-locked host memory holding n elements of T (cuMemAllocHost).
// Asynchronous copies need it: the driver reads or writes it after the call
// returns, so it must stay allocated until the stream is synchronized. Data
// returns a Go slice over the memory; it is valid until Free.
type Pinned[T Elem] struct {
	st    *deviceState
	ptr   unsafe.Pointer // C memory from the driver
	n     int
	freed atomic.Bool
}

// AllocPinned allocates pinned host memory for n elements of T.
func AllocPinned[T Elem](d *Device, n int) (*Pinned[T], error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: cuda: pinned allocation of %d elements", ErrInvalidArgument, n)
	}
	var p unsafe.Pointer
	size := uint64(n) * uint64(sizeOf[T]())
	err := d.run(func() result { return d.st.drv.memAllocHost(&p, size) }, "cuMemAllocHost")
	if err != nil {
		if e, ok := err.(*Error); ok {
			e.Detail = fmt.Sprintf("requested %d pinned bytes", size)
		}
		return nil, err
	}
	return &Pinned[T]{st: d.st, ptr: p, n: n}, nil
}

// Len returns the number of elements.
func (p *Pinned[T]) Len() int { return p.n }

// DevicePtr returns the address at which kernels reach the memory
// (cuMemHostGetDevicePointer): pinned memory is mapped into the device's
// address space, so a kernel can write results where the host reads them,
// with no copy call (the host reads them after synchronizing the stream the
// kernel ran on). Accesses cross the bus: for a few words per launch, not
// bulk data.
func (p *Pinned[T]) DevicePtr() (DevicePtr, error) {
	if p == nil || p.freed.Load() {
		return 0, ErrClosed
	}
	var d uint64
	err := p.st.run(func() result { return p.st.drv.memHostGetDevPtr(&d, p.ptr, 0) }, "cuMemHostGetDevicePointer")
	return DevicePtr(d), err
}

// Data returns the memory as a Go slice, or nil once the memory is freed (by
// Free, or by closing the device's last handle). A slice obtained earlier must
// not be used after that.
func (p *Pinned[T]) Data() []T {
	if p.freed.Load() || p.st.closed.Load() {
		return nil
	}
	return unsafe.Slice((*T)(p.ptr), p.n)
}

// Free releases the memory; freeing twice returns ErrClosed.
func (p *Pinned[T]) Free() error {
	if p == nil || !p.freed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	return p.st.run(func() result { return p.st.drv.memFreeHost(p.ptr) }, "cuMemFreeHost")
}

func (p *Pinned[T]) checkRange(off, n int) error {
	if p == nil || p.freed.Load() {
		return ErrClosed
	}
	if off < 0 || n < 0 || off+n > p.n {
		return fmt.Errorf("%w: cuda: pinned range [%d, %d) of %d elements", ErrInvalidArgument, off, off+n, p.n)
	}
	return nil
}

// CopyToDeviceAsync enqueues a copy of src's elements [off, off+dst.Len()) into
// dst on stream. src must stay allocated until the stream is synchronized
// (nil stream: the copy is done on return).
func CopyToDeviceAsync[T Elem](dst Slice[T], src *Pinned[T], off int, stream *Stream) error {
	if err := dst.live(); err != nil {
		return err
	}
	if err := src.checkRange(off, dst.n); err != nil {
		return err
	}
	if dst.n == 0 {
		return nil
	}
	defer runtime.KeepAlive(dst.buf)
	st := dst.buf.st
	hs, err := stream.handle(st)
	if err != nil {
		return err
	}
	d, s, n := uint64(dst.Ptr()), unsafe.Add(src.ptr, int64(off)*sizeOf[T]()), uint64(dst.Bytes())
	return st.enqueue(hs, func() result { return st.drv.memcpyHtoDAsync(d, s, n, hs) }, "cuMemcpyHtoDAsync")
}

// CopyToHostAsync enqueues a copy of src into dst's elements [off,
// off+src.Len()) on stream. Read dst only after the stream is synchronized
// (nil stream: the copy is done on return).
func CopyToHostAsync[T Elem](dst *Pinned[T], off int, src Slice[T], stream *Stream) error {
	if err := src.live(); err != nil {
		return err
	}
	if err := dst.checkRange(off, src.n); err != nil {
		return err
	}
	if src.n == 0 {
		return nil
	}
	defer runtime.KeepAlive(src.buf)
	st := src.buf.st
	hs, err := stream.handle(st)
	if err != nil {
		return err
	}
	d, s, n := unsafe.Add(dst.ptr, int64(off)*sizeOf[T]()), uint64(src.Ptr()), uint64(src.Bytes())
	return st.enqueue(hs, func() result { return st.drv.memcpyDtoHAsync(d, s, n, hs) }, "cuMemcpyDtoHAsync")
}
