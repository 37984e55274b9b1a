package sorteddict

import (
	"context"
	"errors"
	"sync"
	"unsafe"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
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
