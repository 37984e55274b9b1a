package cuda

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"
)

// DevicePtr is a device address (CUdeviceptr). It is passed to kernels as a
// pointer argument.
type DevicePtr uint64

// Buffer is a block of device memory. Free releases it; afterwards, and after
// the device's last handle is closed, its methods return ErrClosed. A Buffer
// that becomes unreachable without Free is freed by a cleanup, but programs
// should Free explicitly: the garbage collector does not see device memory.
type Buffer struct {
	st    *deviceState
	ptr   DevicePtr
	size  int64
	freed *atomic.Bool // shared with the cleanup
	vm    *vmPart      // a part of a VirtualRange (Map): Free unmaps and releases it
	view  bool         // a VirtualRange's View: Free releases nothing
}

// Alloc allocates size bytes of device memory (uninitialised). Failure for lack
// of memory wraps ErrOutOfMemory; the device stays usable.
func (d *Device) Alloc(size int64) (*Buffer, error) {
	if size <= 0 {
		return nil, fmt.Errorf("%w: cuda: allocation of %d bytes", ErrInvalidArgument, size)
	}
	var p uint64
	err := d.run(func() result { return d.st.drv.memAlloc(&p, uint64(size)) }, "cuMemAlloc")
	if err != nil {
		if e, ok := err.(*Error); ok {
			e.Detail = fmt.Sprintf("requested %d bytes", size)
		}
		return nil, err
	}
	b := &Buffer{st: d.st, ptr: DevicePtr(p), size: size, freed: new(atomic.Bool)}
	runtime.AddCleanup(b, freeLeaked, leaked{st: d.st, ptr: p, freed: b.freed})
	return b, nil
}

type leaked struct {
	st    *deviceState
	ptr   uint64
	freed *atomic.Bool
	vm    *vmPart
}

func freeLeaked(l leaked) {
	if !l.freed.CompareAndSwap(false, true) {
		return
	}
	if l.vm != nil {
		l.vm.unmap(l.st)
		return
	}
	l.st.do(func() { l.st.drv.memFree(l.ptr) })
}

// Ptr returns the device address. It stays valid until Free.
func (b *Buffer) Ptr() DevicePtr { return b.ptr }

// Size returns the size in bytes.
func (b *Buffer) Size() int64 { return b.size }

// Free releases the memory. Freeing twice returns ErrClosed.
func (b *Buffer) Free() error {
	if b == nil || !b.freed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	if b.vm != nil {
		return b.vm.unmap(b.st)
	}
	if b.view {
		return nil
	}
	p := uint64(b.ptr)
	return b.st.run(func() result { return b.st.drv.memFree(p) }, "cuMemFree")
}

// ptrErr lets Launch refuse a nil or freed buffer as a kernel argument.
func (b *Buffer) ptrErr() error { return b.live() }

// ptrErr lets Launch refuse a view of a freed buffer as a kernel argument.
func (s Slice[T]) ptrErr() error { return s.live() }

// live returns ErrClosed for a freed buffer.
func (b *Buffer) live() error {
	if b == nil || b.freed.Load() {
		return ErrClosed
	}
	return nil
}

func (b *Buffer) checkRange(off, n int64) error {
	if err := b.live(); err != nil {
		return err
	}
	if off < 0 || n < 0 || off+n > b.size {
		return fmt.Errorf("%w: cuda: range [%d, %d) outside a buffer of %d bytes", ErrInvalidArgument, off, off+n, b.size)
	}
	return nil
}

// Elem is the set of element types of typed device views.
type Elem interface {
	~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~float32 | ~float64
}

// Slice is a typed view of part of a Buffer: Len elements of T starting at an
// element offset. It is a small value; copies share the buffer. The zero Slice
// is empty. Slices are how structures accept device-resident batches.
type Slice[T Elem] struct {
	buf *Buffer
	off int64 // bytes
	n   int
}

// Alloc allocates a buffer holding n elements of T and returns a view of all of it.
func Alloc[T Elem](d *Device, n int) (Slice[T], error) {
	if n <= 0 {
		return Slice[T]{}, fmt.Errorf("%w: cuda: allocation of %d elements", ErrInvalidArgument, n)
	}
	b, err := d.Alloc(int64(n) * sizeOf[T]())
	if err != nil {
		return Slice[T]{}, err
	}
	return Slice[T]{buf: b, n: n}, nil
}

// View returns a typed view of n elements of b starting at element off.
func View[T Elem](b *Buffer, off, n int) (Slice[T], error) {
	sz := sizeOf[T]()
	if err := b.checkRange(int64(off)*sz, int64(n)*sz); err != nil {
		return Slice[T]{}, err
	}
	return Slice[T]{buf: b, off: int64(off) * sz, n: n}, nil
}

// FromHost allocates a slice and copies src into it.
func FromHost[T Elem](d *Device, src []T) (Slice[T], error) {
	s, err := Alloc[T](d, max(len(src), 1))
	if err != nil {
		return s, err
	}
	s.n = len(src)
	if err := s.CopyFromHost(src); err != nil {
		s.Free()
		return Slice[T]{}, err
	}
	return s, nil
}

func sizeOf[T Elem]() int64 {
	var z T
	return int64(unsafe.Sizeof(z))
}

// Len returns the number of elements.
func (s Slice[T]) Len() int { return s.n }

// Bytes returns the size of the view in bytes.
func (s Slice[T]) Bytes() int64 { return int64(s.n) * sizeOf[T]() }

// Buffer returns the underlying buffer.
func (s Slice[T]) Buffer() *Buffer { return s.buf }

// Ptr returns the device address of the first element (0 for the zero Slice).
func (s Slice[T]) Ptr() DevicePtr {
	if s.buf == nil {
		return 0
	}
	return s.buf.ptr + DevicePtr(s.off)
}

// DevicePointer lets a Slice be passed directly as a kernel argument.
func (s Slice[T]) DevicePointer() DevicePtr { return s.Ptr() }

// Sub returns the view of elements [i, j).
func (s Slice[T]) Sub(i, j int) Slice[T] {
	if i < 0 || j < i || j > s.n {
		panic(fmt.Sprintf("cuda: Slice.Sub(%d, %d) of length %d", i, j, s.n))
	}
	return Slice[T]{buf: s.buf, off: s.off + int64(i)*sizeOf[T](), n: j - i}
}

// Free frees the whole underlying buffer (not only this view).
func (s Slice[T]) Free() error {
	if s.buf == nil {
		return nil
	}
	return s.buf.Free()
}

func (s Slice[T]) live() error {
	if s.buf == nil {
		if s.n == 0 {
			return nil
		}
		return ErrClosed
	}
	return s.buf.live()
}

// enqueue runs an asynchronous operation and, when it went to the legacy
// default stream (stream 0), waits for it to complete.
func (st *deviceState) enqueue(stream uintptr, f func() result, op string) error {
	if err := st.run(f, op); err != nil {
		return err
	}
	return st.finishDefault(stream)
}

// CopyFromHost copies src into the first len(src) elements and returns once
// the data is on the device. (The driver may return from a copy out of
// pageable memory before its DMA has landed, ordered only on the legacy
// default stream; CopyFromHost waits for that stream, so work on any stream
// that follows sees the data.)
func (s Slice[T]) CopyFromHost(src []T) error {
	if err := s.live(); err != nil {
		return err
	}
	defer runtime.KeepAlive(s.buf) // its cleanup must not free it mid-copy
	if len(src) > s.n {
		return fmt.Errorf("%w: cuda: copying %d elements into a slice of %d", ErrInvalidArgument, len(src), s.n)
	}
	if len(src) == 0 {
		return nil
	}
	st, dst, n := s.buf.st, uint64(s.Ptr()), uint64(len(src))*uint64(sizeOf[T]())
	p := unsafe.Pointer(&src[0])
	if err := st.run(func() result { return st.drv.memcpyHtoD(dst, p, n) }, "cuMemcpyHtoD"); err != nil {
		return err
	}
	return st.finishDefault(0)
}

// CopyToHost copies the first len(dst) elements into dst, synchronously.
func (s Slice[T]) CopyToHost(dst []T) error {
	if err := s.live(); err != nil {
		return err
	}
	defer runtime.KeepAlive(s.buf)
	if len(dst) > s.n {
		return fmt.Errorf("%w: cuda: copying %d elements out of a slice of %d", ErrInvalidArgument, len(dst), s.n)
	}
	if len(dst) == 0 {
		return nil
	}
	st, src, n := s.buf.st, uint64(s.Ptr()), uint64(len(dst))*uint64(sizeOf[T]())
	p := unsafe.Pointer(&dst[0])
	return st.run(func() result { return st.drv.memcpyDtoH(p, src, n) }, "cuMemcpyDtoH")
}

// ToHost returns a new Go slice holding the elements.
func (s Slice[T]) ToHost() ([]T, error) {
	out := make([]T, s.n)
	return out, s.CopyToHost(out)
}

// CopyFrom copies src (same length) into s, device to device, and returns once
// the copy is done.
func (s Slice[T]) CopyFrom(src Slice[T]) error {
	return CopyAsync(s, src, nil)
}

// CopyAsync enqueues a device-to-device copy of src into dst (same length) on
// stream; with the nil stream it returns once the copy is done.
func CopyAsync[T Elem](dst, src Slice[T], stream *Stream) error {
	if err := dst.live(); err != nil {
		return err
	}
	if err := src.live(); err != nil {
		return err
	}
	defer runtime.KeepAlive(dst.buf)
	defer runtime.KeepAlive(src.buf)
	if dst.n != src.n {
		return fmt.Errorf("%w: cuda: copy of %d elements into %d", ErrInvalidArgument, src.n, dst.n)
	}
	if dst.n == 0 {
		return nil
	}
	if dst.buf.st != src.buf.st {
		return fmt.Errorf("%w: cuda: copy between devices", ErrInvalidArgument)
	}
	st, d, sp, n := dst.buf.st, uint64(dst.Ptr()), uint64(src.Ptr()), uint64(dst.Bytes())
	hs, err := stream.handle(st)
	if err != nil {
		return err
	}
	return st.enqueue(hs, func() result { return st.drv.memcpyDtoDAsync(d, sp, n, hs) }, "cuMemcpyDtoDAsync")
}

// Zero sets every byte of the view to 0, asynchronously on stream (nil: done
// on return).
func (s Slice[T]) Zero(stream *Stream) error { return s.memsetBytes(0, stream) }

// FillBytes sets every byte of the view to v, asynchronously on stream (nil:
// done on return).
func (s Slice[T]) FillBytes(v byte, stream *Stream) error { return s.memsetBytes(v, stream) }

func (s Slice[T]) memsetBytes(v byte, stream *Stream) error {
	if err := s.live(); err != nil || s.n == 0 {
		return err
	}
	defer runtime.KeepAlive(s.buf)
	st, p, n := s.buf.st, uint64(s.Ptr()), uint64(s.Bytes())
	hs, err := stream.handle(st)
	if err != nil {
		return err
	}
	return st.enqueue(hs, func() result { return st.drv.memsetD8Async(p, v, n, hs) }, "cuMemsetD8Async")
}

// Fill sets every element of the view to v, asynchronously on stream (nil:
// done on return).
func Fill[T Elem](s Slice[T], v T, stream *Stream) error {
	if err := s.live(); err != nil || s.n == 0 {
		return err
	}
	defer runtime.KeepAlive(s.buf)
	st, p, n := s.buf.st, uint64(s.Ptr()), uint64(s.n)
	hs, err := stream.handle(st)
	if err != nil {
		return err
	}
	bits := toBits(v)
	switch sizeOf[T]() {
	case 1:
		return st.enqueue(hs, func() result { return st.drv.memsetD8Async(p, uint8(bits), n, hs) }, "cuMemsetD8Async")
	case 2:
		return st.enqueue(hs, func() result { return st.drv.memsetD16Async(p, uint16(bits), n, hs) }, "cuMemsetD16Async")
	case 4:
		return st.enqueue(hs, func() result { return st.drv.memsetD32Async(p, uint32(bits), n, hs) }, "cuMemsetD32Async")
	}
	k, err := builtinKernel(st, "fill_u64")
	if err != nil {
		return err
	}
	return k.Launch(GridFor(s.n, 256), D1(256), 0, stream, s.Ptr(), bits, n)
}

// toBits returns the element's bit pattern, zero-extended to 64 bits.
func toBits[T Elem](v T) uint64 {
	var b [8]byte
	*(*T)(unsafe.Pointer(&b[0])) = v
	return *(*uint64)(unsafe.Pointer(&b[0])) & (^uint64(0) >> (64 - 8*sizeOf[T]()))
}
