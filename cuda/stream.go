package cuda

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// Stream is an ordered queue of device work (CUstream). Streams made by
// NewStream do not synchronize with each other or with the legacy default
// stream. The nil *Stream means the legacy default stream, and an operation
// given it is synchronous: it has completed when the call returns, so work on
// any stream that follows sees its result.
type Stream struct {
	st     *deviceState
	h      uintptr
	closed atomic.Bool
}

const streamNonBlocking = 1

// NewStream creates a stream that does not synchronize with the default stream.
func (d *Device) NewStream() (*Stream, error) {
	var h uintptr
	if err := d.run(func() result { return d.st.drv.streamCreate(&h, streamNonBlocking) }, "cuStreamCreate"); err != nil {
		return nil, err
	}
	return &Stream{st: d.st, h: h}, nil
}

// StreamPriorities returns the stream priorities the device takes, least
// and greatest urgency: lower numbers are more urgent (CUDA's convention),
// so greatest <= least. NewStream's streams have the default priority, 0
// (the least on current GPUs). Where the device has no priorities both
// are 0.
func (d *Device) StreamPriorities() (least, greatest int, err error) {
	var l, g int32
	if err := d.run(func() result { return d.st.drv.streamPrioRange(&l, &g) }, "cuCtxGetStreamPriorityRange"); err != nil {
		return 0, 0, err
	}
	return int(l), int(g), nil
}

// NewPriorityStream is NewStream with a priority from StreamPriorities'
// range (one outside it is clamped to it by the driver). The device's block
// scheduler starts the pending thread blocks of a more urgent stream's
// kernels before those of a less urgent one's as multiprocessors free up;
// running blocks are not preempted, and copies are not ordered by it. For
// short work that should not queue behind long kernels of other streams
// (kv/gpucompact seals a store's memtable flushes on one while compaction
// jobs run on others).
func (d *Device) NewPriorityStream(priority int) (*Stream, error) {
	if priority < math.MinInt32 || priority > math.MaxInt32 {
		return nil, fmt.Errorf("%w: cuda: stream priority %d", ErrInvalidArgument, priority)
	}
	var h uintptr
	if err := d.run(func() result { return d.st.drv.streamCreatePrio(&h, streamNonBlocking, int32(priority)) }, "cuStreamCreateWithPriority"); err != nil {
		return nil, err
	}
	return &Stream{st: d.st, h: h}, nil
}

// Priority returns the stream's priority (NewPriorityStream's, as the
// driver clamped it; 0 for NewStream's and the nil stream).
func (s *Stream) Priority() (int, error) {
	if s == nil {
		return 0, nil
	}
	if s.closed.Load() {
		return 0, ErrClosed
	}
	var p int32
	if err := s.st.run(func() result { return s.st.drv.streamPriority(s.h, &p) }, "cuStreamGetPriority"); err != nil {
		return 0, err
	}
	return int(p), nil
}

// handle returns the raw handle for use on st (0 for the nil stream).
func (s *Stream) handle(st *deviceState) (uintptr, error) {
	if s == nil {
		return 0, nil
	}
	if s.closed.Load() {
		return 0, ErrClosed
	}
	if s.st != st {
		return 0, fmt.Errorf("%w: cuda: stream belongs to another device", ErrInvalidArgument)
	}
	return s.h, nil
}

// Synchronize waits until all work on the stream has finished and returns the
// first asynchronous error. The wait does not hold up other goroutines' calls:
// see awaitWork.
func (s *Stream) Synchronize() error {
	if s == nil {
		return fmt.Errorf("%w: cuda: Synchronize on the nil stream; use Device.Synchronize", ErrInvalidArgument)
	}
	if s.closed.Load() {
		return ErrClosed
	}
	return s.st.awaitWork(
		func() result { return s.st.drv.streamQuery(s.h) }, "cuStreamQuery",
		func() result { return s.st.drv.streamSynchronize(s.h) }, "cuStreamSynchronize")
}

// Done reports whether all work on the stream has finished, without waiting.
func (s *Stream) Done() (bool, error) {
	if s == nil || s.closed.Load() {
		return false, ErrClosed
	}
	var r result
	if err := s.st.do(func() { r = s.st.drv.streamQuery(s.h) }); err != nil {
		return false, err
	}
	if r == resultNotReady {
		return false, nil
	}
	return r == resultSuccess, check(s.st.drv, "cuStreamQuery", r)
}

// Close waits for the stream's work and destroys it. Closing twice returns
// ErrClosed.
func (s *Stream) Close() error {
	if s == nil || s.closed.Load() {
		return ErrClosed
	}
	syncErr := s.Synchronize()
	if !s.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	destroyErr := s.st.run(func() result { return s.st.drv.streamDestroy(s.h) }, "cuStreamDestroy")
	if syncErr != nil {
		return syncErr
	}
	return destroyErr
}

// Event marks a point in a stream, for ordering and timing (CUevent).
type Event struct {
	st      *deviceState
	h       uintptr
	untimed bool // made without timing (NewBlockingEvent)
	closed  atomic.Bool
}

// CUevent_flags.
const (
	eventBlockingSync  = 0x1
	eventDisableTiming = 0x2
	blockingEventFlags = eventBlockingSync | eventDisableTiming
)

// NewEvent creates an event with timing enabled.
func (d *Device) NewEvent() (*Event, error) { return d.newEvent(0) }

// newEvent creates an event with CUevent_flags flags.
func (d *Device) newEvent(flags uint32) (*Event, error) {
	var h uintptr
	if err := d.run(func() result { return d.st.drv.eventCreate(&h, flags) }, "cuEventCreate"); err != nil {
		return nil, err
	}
	return &Event{st: d.st, h: h, untimed: flags&eventDisableTiming != 0}, nil
}

// NewBlockingEvent creates an event for waiting on, without timing
// (CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING). Its Synchronize,
// once the poll window has passed, puts the calling thread to sleep in the
// driver until the device reaches the event, where a Stream's Synchronize
// and a timing event's spin a processor for the whole wait (the primary
// context's default scheduling). Record it on the stream, then
// Synchronize it. It suits long waits whose processor is wanted elsewhere;
// waking takes a free processor, so on a busy host the wait can end later
// than a spinning one would (docs/driver.md "Waiting" has the
// measurements). Elapsed refuses it.
func (d *Device) NewBlockingEvent() (*Event, error) { return d.newEvent(blockingEventFlags) }

// Record records the event at the current end of stream (nil: default stream).
func (e *Event) Record(stream *Stream) error {
	if e == nil || e.closed.Load() {
		return ErrClosed
	}
	hs, err := stream.handle(e.st)
	if err != nil {
		return err
	}
	return e.st.run(func() result { return e.st.drv.eventRecord(e.h, hs) }, "cuEventRecord")
}

// Synchronize waits until the work before the event's last Record has finished.
func (e *Event) Synchronize() error {
	if e == nil || e.closed.Load() {
		return ErrClosed
	}
	return e.st.awaitWork(
		func() result { return e.st.drv.eventQuery(e.h) }, "cuEventQuery",
		func() result { return e.st.drv.eventSynchronize(e.h) }, "cuEventSynchronize")
}

// Elapsed returns the device time between two recorded events (resolution
// about half a microsecond). Both must have completed; call end.Synchronize
// first.
func Elapsed(start, end *Event) (time.Duration, error) {
	if start == nil || end == nil || start.closed.Load() || end.closed.Load() {
		return 0, ErrClosed
	}
	if start.untimed || end.untimed {
		return 0, fmt.Errorf("%w: cuda: Elapsed of an event without timing (NewBlockingEvent)", ErrInvalidArgument)
	}
	var ms float32
	err := start.st.run(func() result { return start.st.drv.eventElapsedTime(&ms, start.h, end.h) }, "cuEventElapsedTime")
	return time.Duration(float64(ms) * float64(time.Millisecond)), err
}

// Close destroys the event; closing twice returns ErrClosed.
func (e *Event) Close() error {
	if e == nil || !e.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	return e.st.run(func() result { return e.st.drv.eventDestroy(e.h) }, "cuEventDestroy")
}
