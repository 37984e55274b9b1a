package prim

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"
	"weak"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
)

// Engine holds a device's loaded prim kernels and per-stream scratch memory.
// It is safe for concurrent use. The device belongs to the caller: Close
// frees the Engine's scratch, not the device.
type Engine struct {
	dev *cuda.Device
	mod *cuda.Module
	sms int

	mu       sync.Mutex
	closed   bool
	kernels  map[string]*kernel
	arenas   map[weak.Pointer[cuda.Stream]]*arena
	fallback *arena // the nil (legacy default) stream's

	// fusedGridCap, when positive, caps the fused sort's grid below the
	// blocks that fill the device, so that tests reach the case of fewer
	// blocks than tiles (each block then takes many items in turn) on any
	// device. Set it before the Engine is used.
	fusedGridCap int
	// fusedSmall is the largest input the small-tile fused sort takes
	// (fusedSmallMax; 0: none, so benchmarks can compare the two tiles).
	fusedSmall int
	// emulated: the device is cuda.OpenEmulated's, which runs no prim
	// kernel (they use CUB); each operation runs its host twin on the
	// device memory instead (emulated.go).
	emulated bool
}

// kernel is a loaded function with its launch shape.
type kernel struct {
	f     *cuda.Function
	block int
	grid  int // blocks that fill the device once (SMs x resident blocks per SM)
}

// arena is one stream's scratch buffer. mu is held from the start of a call's
// enqueueing to its end, so that two calls on the same stream never
// interleave their use of the buffer; the stream's order does the rest.
type arena struct {
	mu     sync.Mutex
	stream weak.Pointer[cuda.Stream] // the zero pointer for the nil (legacy default) stream
	buf    *cuda.Buffer
	fused  *fusedState // allocated by the first fused sort on the stream
	closed bool        // the Engine is closed: no new buffer
}

// fusedState is a stream's two fused-sort states (see radix_fused in
// sort.cuh). A fused sort uses the half that is all zero and clears what the
// previous sort left in the other half, so consecutive sorts on the stream
// need no memset: the stream's order puts each clearing after the sort that
// dirtied the half and before the sort that uses it.
type fusedState struct {
	buf   *cuda.Buffer
	half  int    // the half the next sort uses
	dirty [2]int // leading words of each half that may be non-zero
}

// fusedStateWords is the number of state words a fused sort of the given
// passes and tiles uses: the header, hist[passes][256] and
// look[passes][tiles][256].
func fusedStateWords(passes, tiles int) int { return fusedHeader + passes*radixDigits*(1+tiles) }

// fusedHalfWords is the size of one half: room for the largest fused sort.
var fusedHalfWords = fusedStateWords(maxPasses, fusedMaxTiles)

// halves returns the half the next sort uses and the other one, which it clears.
func (f *fusedState) halves() (use, clear cuda.DevicePtr) {
	half := cuda.DevicePtr(4 * fusedHalfWords)
	base := f.buf.Ptr()
	return base + cuda.DevicePtr(f.half)*half, base + cuda.DevicePtr(1-f.half)*half
}

// launched records an enqueued sort that used words of its half and cleared
// the other half.
func (f *fusedState) launched(words int) {
	f.dirty[1-f.half] = 0
	f.dirty[f.half] = words
	f.half = 1 - f.half
}

// fusedState returns arena a's fused-sort state (the caller holds a.mu),
// allocating it zeroed, on stream s, the first time.
func (e *Engine) fusedState(a *arena, s *cuda.Stream) (*fusedState, error) {
	if a.fused != nil {
		return a.fused, nil
	}
	buf, err := e.dev.Alloc(int64(2 * 4 * fusedHalfWords))
	if err != nil {
		return nil, fmt.Errorf("prim: fused sort state: %w", err)
	}
	all, err := cuda.View[uint32](buf, 0, 2*fusedHalfWords)
	if err == nil {
		err = all.Zero(s)
	}
	if err != nil {
		buf.Free()
		return nil, fmt.Errorf("prim: fused sort state: %w", err)
	}
	a.fused = &fusedState{buf: buf}
	return a.fused, nil
}

// NewEngine loads the prim kernels on dev (the driver JIT-compiles them the
// first time; later loads hit the driver's cache).
func NewEngine(dev *cuda.Device) (*Engine, error) {
	if dev == nil {
		return nil, fmt.Errorf("%w: prim: NewEngine needs a device", warpkit.ErrInvalidArgument)
	}
	mod, err := dev.LoadModule(primPTX)
	if err != nil {
		return nil, fmt.Errorf("prim: loading kernels: %w", err)
	}
	return &Engine{
		dev:        dev,
		mod:        mod,
		sms:        dev.Properties().Multiprocessors,
		kernels:    map[string]*kernel{},
		arenas:     map[weak.Pointer[cuda.Stream]]*arena{},
		fusedSmall: fusedSmallMax,
		emulated:   dev.Emulated(),
	}, nil
}

// Device returns the Engine's device.
func (e *Engine) Device() *cuda.Device { return e.dev }

// Close waits for the work enqueued on each stream the Engine keeps scratch
// for and frees all scratch memory (a call still enqueueing on a stream
// finishes enqueueing first). Using the Engine afterwards returns ErrClosed;
// closing twice returns ErrClosed.
func (e *Engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return warpkit.ErrClosed
	}
	e.closed = true
	var err error
	for k, a := range e.arenas {
		err = errors.Join(err, a.free(e.dev, true))
		delete(e.arenas, k)
	}
	if e.fallback != nil {
		err = errors.Join(err, e.fallback.free(e.dev, true))
	}
	return err
}

// ReleaseScratch frees the cached scratch memory of every stream, each after
// the work enqueued on its stream has finished; later calls allocate afresh.
func (e *Engine) ReleaseScratch() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return warpkit.ErrClosed
	}
	var err error
	for _, a := range e.arenas {
		err = errors.Join(err, a.free(e.dev, false))
	}
	if e.fallback != nil {
		err = errors.Join(err, e.fallback.free(e.dev, false))
	}
	return err
}

// free releases the buffers; unless closing, the arena stays usable. It
// takes the arena's lock first, so that no call is enqueueing work that uses
// the buffers, then waits for the work already enqueued on the stream (the
// whole device's for the nil stream, or for a stream that has been
// collected, whose pending work cannot be waited for by itself), and frees.
// The buffers are freed even when the wait fails (a device fault, after
// which no work runs).
func (a *arena) free(dev *cuda.Device, closing bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = a.closed || closing
	if a.fused == nil && a.buf == nil {
		return nil
	}
	err := a.sync(dev)
	if a.fused != nil {
		err = errors.Join(err, a.fused.buf.Free())
		a.fused = nil
	}
	if a.buf != nil {
		err = errors.Join(err, a.buf.Free())
		a.buf = nil
	}
	return err
}

// sync waits for the work enqueued on the arena's stream (see free).
func (a *arena) sync(dev *cuda.Device) error {
	if s := a.stream.Value(); s != nil {
		err := s.Synchronize()
		if errors.Is(err, cuda.ErrClosed) {
			return nil // Stream.Close waited for the stream's work
		}
		return err
	}
	err := dev.Synchronize()
	if errors.Is(err, cuda.ErrClosed) {
		return nil // a closed device runs no more work
	}
	return err
}

// kernel returns the named kernel, loading it and its occupancy once.
func (e *Engine) kernel(name string, block int) (*kernel, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, warpkit.ErrClosed
	}
	if k, ok := e.kernels[name]; ok {
		return k, nil
	}
	f, err := e.mod.Function(name)
	if err != nil {
		return nil, fmt.Errorf("prim: %w", err)
	}
	perSM, err := f.MaxActiveBlocksPerSM(block, 0)
	if err != nil {
		return nil, fmt.Errorf("prim: occupancy of %s: %w", name, err)
	}
	k := &kernel{f: f, block: block, grid: max(1, perSM*e.sms)}
	e.kernels[name] = k
	return k, nil
}

// launch enqueues k on s with grid blocks.
func (k *kernel) launch(s *cuda.Stream, grid int, args ...any) error {
	if err := k.f.Launch(cuda.D1(grid), cuda.D1(k.block), 0, s, args...); err != nil {
		return fmt.Errorf("prim: %w", err)
	}
	return nil
}

// scratch is a call's carved-up view of its stream's arena; release unlocks
// the arena once the call has enqueued everything.
type scratch struct {
	a   *arena
	off int64
}

// scratchFor locks stream s's arena, makes it at least bytes large and returns
// it. Growing synchronizes s first, since earlier work may still use the old
// buffer. The caller must call release, and must not call e.kernel (which
// takes e.mu, which Close holds while it takes arena locks) in between.
func (e *Engine) scratchFor(s *cuda.Stream, bytes int64) (*scratch, error) {
	a, err := e.arenaFor(s)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil, warpkit.ErrClosed
	}
	if a.buf == nil || a.buf.Size() < bytes {
		if a.buf != nil {
			var err error
			if s == nil {
				err = e.dev.Synchronize()
			} else {
				err = s.Synchronize()
			}
			if err == nil {
				err = a.buf.Free()
			}
			a.buf = nil
			if err != nil {
				a.mu.Unlock()
				return nil, fmt.Errorf("prim: replacing scratch: %w", err)
			}
		}
		size := max(bytes+bytes/4, 1<<20) // headroom, so that slowly growing calls do not reallocate every time
		buf, err := e.dev.Alloc(size)
		if err != nil {
			a.mu.Unlock()
			return nil, fmt.Errorf("prim: scratch of %d bytes: %w", size, err)
		}
		a.buf = buf
	}
	return &scratch{a: a}, nil
}

func (e *Engine) arenaFor(s *cuda.Stream) (*arena, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, warpkit.ErrClosed
	}
	if s == nil {
		if e.fallback == nil {
			e.fallback = &arena{}
		}
		return e.fallback, nil
	}
	key := weak.Make(s)
	if a, ok := e.arenas[key]; ok {
		return a, nil
	}
	a := &arena{stream: key}
	e.arenas[key] = a
	// When the stream is collected, its scratch goes with it.
	runtime.AddCleanup(s, func(key weak.Pointer[cuda.Stream]) {
		e.mu.Lock()
		a, ok := e.arenas[key]
		delete(e.arenas, key)
		e.mu.Unlock()
		if ok {
			a.free(e.dev, true)
		}
	}, key)
	return a, nil
}

func (sc *scratch) release() { sc.a.mu.Unlock() }

// scratchAlign keeps every carved array 256-byte aligned.
const scratchAlign = 256

func alignUp(n int64) int64 { return (n + scratchAlign - 1) &^ (scratchAlign - 1) }

// take carves n elements of T from the scratch (which must have been sized
// with scratchBytes for the same sequence of takes).
func take[T cuda.Elem](sc *scratch, n int) cuda.Slice[T] {
	sz := int64(unsafe.Sizeof(*new(T)))
	off := sc.off
	sc.off += alignUp(int64(n) * sz)
	v, err := cuda.View[T](sc.a.buf, int(off/sz), n)
	if err != nil {
		panic("prim: scratch layout: " + err.Error()) // sizes are computed by the same code
	}
	return v
}

// scratchBytes sums the aligned sizes of arrays of the given byte sizes.
func scratchBytes(sizes ...int64) int64 {
	var total int64
	for _, s := range sizes {
		total += alignUp(s)
	}
	return total
}
