package sorteddict

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/hostpar"
)

// Width returns "32" or "64", the bit width of T, as kernel names spell it.
func Width[T warpkit.Word]() string {
	var z T
	if unsafe.Sizeof(z) == 8 {
		return "64"
	}
	return "32"
}

// BlockSize is the thread-block size of every sorted-dictionary kernel.
const BlockSize = 256

// Grid returns the grid for a grid-stride kernel over n items (at least one
// block, at most 2^22 blocks).
func Grid(n int) cuda.Dim3 { return cuda.D1(min(max(1, (n+BlockSize-1)/BlockSize), 1<<22)) }

// TileGrid returns the grid of a tiled kernel in which each thread handles
// items consecutive-by-block elements: one block per BlockSize*items elements.
func TileGrid(n, items int) cuda.Dim3 { return cuda.GridFor(n, BlockSize*items) }

// Block is the block shape of every sorted-dictionary kernel.
var Block = cuda.D1(BlockSize)

// Buf is grow-only device scratch. Get returns a view of n elements; when the
// buffer is too small it waits for stream (work queued earlier may still use
// the old memory), frees it and allocates a larger one. The contents are not
// kept across growth.
type Buf[T cuda.Elem] struct{ s cuda.Slice[T] }

// Get returns n elements of scratch (the zero Slice for n == 0).
func (b *Buf[T]) Get(dev *cuda.Device, stream *cuda.Stream, n int) (cuda.Slice[T], error) {
	if n == 0 {
		return cuda.Slice[T]{}, nil
	}
	if b.s.Len() >= n {
		return b.s.Sub(0, n), nil
	}
	old := b.s.Len()
	if old > 0 {
		if err := stream.Synchronize(); err != nil {
			return cuda.Slice[T]{}, err
		}
		b.Free()
	}
	s, err := cuda.Alloc[T](dev, max(n, old+old/2))
	if err != nil && old+old/2 > n {
		s, err = cuda.Alloc[T](dev, n)
	}
	if err != nil {
		return cuda.Slice[T]{}, err
	}
	b.s = s
	return s.Sub(0, n), nil
}

// Cap returns how many elements the buffer holds without growing.
func (b *Buf[T]) Cap() int { return b.s.Len() }

// View returns the first n <= Cap() elements (the zero Slice for n == 0),
// kept from earlier work: for buffers that hold state between calls.
func (b *Buf[T]) View(n int) cuda.Slice[T] {
	if n == 0 {
		return cuda.Slice[T]{}
	}
	return b.s.Sub(0, n)
}

// Free releases the memory.
func (b *Buf[T]) Free() {
	if b.s.Len() > 0 {
		b.s.Free()
	}
	b.s = cuda.Slice[T]{}
}

// SyncOnError waits for the work enqueued on stream when *err is set (defer
// it): a call that fails midway must not return while its work may still read
// the caller's slices or use buffers that are about to be freed. The wait's
// own error is dropped: *err is what the caller reports (a failed wait means a
// device fault, which every later call reports too).
func SyncOnError(stream *cuda.Stream, err *error) {
	if *err != nil {
		_ = stream.Synchronize()
	}
}

// Alloc allocates n elements, or returns the zero Slice for n == 0.
func Alloc[T cuda.Elem](dev *cuda.Device, n int) (cuda.Slice[T], error) {
	if n == 0 {
		return cuda.Slice[T]{}, nil
	}
	return cuda.Alloc[T](dev, n)
}

// Staging is pinned host memory through which Go slices travel to and from
// the device on a stream. Reserve sizes it for one call's transfers (no copy
// may be pending then); Upload and Download take consecutive regions of it.
type Staging struct {
	dev  *cuda.Device
	mem  *cuda.Pinned[uint8]
	used int
}

const stagingAlign = 16

func alignUp(n int) int { return (n + stagingAlign - 1) &^ (stagingAlign - 1) }

// Bytes returns the staging bytes n elements of T take.
func Bytes[T cuda.Elem](n int) int { var z T; return alignUp(n * int(unsafe.Sizeof(z))) }

// Reserve makes room for total bytes (sum of Bytes of every transfer of the
// call) and starts handing out regions from the beginning.
func (s *Staging) Reserve(dev *cuda.Device, total int) error {
	s.dev, s.used = dev, 0
	if s.mem != nil && s.mem.Len() >= total {
		return nil
	}
	s.Free()
	p, err := cuda.AllocPinned[uint8](dev, max(total, 1<<16))
	if err != nil {
		return err
	}
	s.mem = p
	return nil
}

// Free releases the pinned memory.
func (s *Staging) Free() {
	if s.mem != nil {
		s.mem.Free()
		s.mem = nil
	}
}

func (s *Staging) take(nbytes int) (int, error) {
	if s.mem == nil || s.used+alignUp(nbytes) > s.mem.Len() {
		return 0, fmt.Errorf("%w: staging region of %d bytes not reserved", warpkit.ErrInvalidArgument, nbytes)
	}
	off := s.used
	s.used += alignUp(nbytes)
	return off, nil
}

func byteView[T cuda.Elem](d cuda.Slice[T]) (cuda.Slice[uint8], error) {
	return cuda.View[uint8](d.Buffer(), int(d.Ptr()-d.Buffer().Ptr()), int(d.Bytes()))
}

// Upload copies src into pinned memory and enqueues its copy into dst (which
// has len(src) elements) on stream.
func Upload[T cuda.Elem](s *Staging, stream *cuda.Stream, dst cuda.Slice[T], src []T) error {
	if len(src) == 0 {
		return nil
	}
	if dst.Len() != len(src) {
		return fmt.Errorf("%w: upload of %d elements into %d", warpkit.ErrInvalidArgument, len(src), dst.Len())
	}
	nb := int(dst.Bytes())
	off, err := s.take(nb)
	if err != nil {
		return err
	}
	hostpar.Copy(s.mem.Data()[off:off+nb], unsafe.Slice((*uint8)(unsafe.Pointer(&src[0])), nb))
	db, err := byteView(dst)
	if err != nil {
		return err
	}
	return cuda.CopyToDeviceAsync(db, s.mem, off, stream)
}

// Pending is a device-to-host copy in flight; Finish after the stream is
// synchronized.
type Pending struct {
	s        *Staging
	off, nb  int
	finishTo unsafe.Pointer
}

// Download enqueues the copy of src into pinned memory on stream; after the
// stream is synchronized, Finish copies it into dst (len(dst) == src.Len()).
func Download[T cuda.Elem](s *Staging, stream *cuda.Stream, dst []T, src cuda.Slice[T]) (Pending, error) {
	if len(dst) == 0 {
		return Pending{}, nil
	}
	if src.Len() != len(dst) {
		return Pending{}, fmt.Errorf("%w: download of %d elements into %d", warpkit.ErrInvalidArgument, src.Len(), len(dst))
	}
	nb := int(src.Bytes())
	off, err := s.take(nb)
	if err != nil {
		return Pending{}, err
	}
	sb, err := byteView(src)
	if err != nil {
		return Pending{}, err
	}
	if err := cuda.CopyToHostAsync(s.mem, off, sb, stream); err != nil {
		return Pending{}, err
	}
	return Pending{s: s, off: off, nb: nb, finishTo: unsafe.Pointer(&dst[0])}, nil
}

// Finish copies the downloaded bytes into the destination slice.
func (p Pending) Finish() {
	if p.nb == 0 {
		return
	}
	hostpar.Copy(unsafe.Slice((*uint8)(p.finishTo), p.nb), p.s.mem.Data()[p.off:p.off+p.nb])
}

// Pool hands out up to size workers (a stream plus scratch each), creating
// them on first use, so that concurrent calls run on separate streams.
type Pool[W any] struct {
	mu      sync.Mutex
	free    []*W
	all     []*W
	size    int
	waiters chan struct{}
	create  func() (*W, error)
	destroy func(*W) error
}

// NewPool returns a pool of at most size workers.
func NewPool[W any](size int, create func() (*W, error), destroy func(*W) error) *Pool[W] {
	return &Pool[W]{size: size, create: create, destroy: destroy, waiters: make(chan struct{}, size)}
}

// Get returns a free worker, creating one if fewer than size exist, or waits
// for one to be Put back (or ctx to end).
func (p *Pool[W]) Get(ctx context.Context) (*W, error) {
	for {
		p.mu.Lock()
		if n := len(p.free); n > 0 {
			w := p.free[n-1]
			p.free = p.free[:n-1]
			p.mu.Unlock()
			return w, nil
		}
		if len(p.all) < p.size {
			w, err := p.create()
			if err == nil {
				p.all = append(p.all, w)
			}
			p.mu.Unlock()
			return w, err
		}
		p.mu.Unlock()
		select {
		case <-p.waiters:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Put returns a worker to the pool.
func (p *Pool[W]) Put(w *W) {
	p.mu.Lock()
	p.free = append(p.free, w)
	p.mu.Unlock()
	select {
	case p.waiters <- struct{}{}:
	default:
	}
}

// Close destroys every worker; none may be in use.
func (p *Pool[W]) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for _, w := range p.all {
		errs = append(errs, p.destroy(w))
	}
	p.all, p.free = nil, nil
	return errors.Join(errs...)
}

// With runs f on a worker from the pool and puts it back.
func (p *Pool[W]) With(ctx context.Context, f func(w *W) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w, err := p.Get(ctx)
	if err != nil {
		return err
	}
	defer p.Put(w)
	return f(w)
}

// Kernel names a kernel to resolve into *Dst.
type Kernel struct {
	Dst  **cuda.Function
	Name string
}

// LoadKernels loads ptx on dev and resolves the named kernels.
func LoadKernels(dev *cuda.Device, ptx []byte, ks ...Kernel) error {
	mod, err := dev.LoadModule(ptx)
	if err != nil {
		return err
	}
	for _, k := range ks {
		if *k.Dst, err = mod.Function(k.Name); err != nil {
			return err
		}
	}
	return nil
}
