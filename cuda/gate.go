package cuda

import (
	"runtime"
	"sync"
	"time"
)

// Driver calls run on the calling goroutine's own OS thread. A CUDA context
// is current per thread and goroutines migrate between threads, so each call
// (or each short group of calls) locks the goroutine to its thread, makes the
// device's primary context current there, calls the driver and unlocks:
// no other thread is involved, so a call costs what the driver costs plus
// about a hundred nanoseconds (cuCtxSetCurrent and the lock), instead of two
// cross-thread wake-ups. (Until 2026-11 every call went to one executor
// goroutine per device and its result came back, which cost ~20-200 us per
// call on a VM where waking a parked thread is slow: docs/benchmarks.md.)
//
// A call that blocks in the driver (a synchronization, a large synchronous
// copy) blocks its own thread: the Go runtime hands that thread's processor
// to other goroutines after ~20 us, so the program goes on, and other
// goroutines' calls go on in parallel (the driver is thread-safe).
//
// The gate also orders calls against Close: every call holds it for reading
// while it runs, Close takes it for writing, so Close waits for the calls in
// flight and every later call returns ErrClosed without reaching the driver.
type gate struct {
	mu      sync.RWMutex
	stopped bool
}

// do runs f on the caller's thread with the device's context current. It
// returns ErrClosed, without running f, once the device is closed, and the
// error of cuCtxSetCurrent if that fails. f must not call do (the gate is
// not re-entrant while Close waits).
func (st *deviceState) do(f func()) error {
	st.gate.mu.RLock()
	defer st.gate.mu.RUnlock()
	if st.gate.stopped {
		return ErrClosed
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if r := st.drv.ctxSetCurrent(st.ctx); r != resultSuccess {
		return check(st.drv, "cuCtxSetCurrent", r)
	}
	f()
	return nil
}

// run runs one driver call through do and turns its result into an error.
func (st *deviceState) run(f func() result, op string) error {
	var r result
	if err := st.do(func() { r = f() }); err != nil {
		return err
	}
	return check(st.drv, op, r)
}

// stop closes the gate: it waits for the calls in flight, then runs last
// (with the context current, on this thread); later calls return ErrClosed.
// A second stop does nothing.
func (st *deviceState) stop(last func()) {
	st.gate.mu.Lock()
	defer st.gate.mu.Unlock()
	if st.gate.stopped {
		return
	}
	st.gate.stopped = true
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	st.drv.ctxSetCurrent(st.ctx)
	last()
}

// pollWindow bounds how long awaitWork polls before it blocks in the driver
// (a variable so that tests and the package's benchmarks can set it).
// Polling and blocking run on the caller's thread alike; polling notices
// finished work sooner than a blocking synchronization returns only where
// the driver's wake-up is slow, so the window is short (see
// docs/benchmarks.md "Driver calls on the caller's thread" for the
// measurements it was chosen by).
var pollWindow = 50 * time.Microsecond

// awaitWork waits for device work: it polls query (which returns
// CUDA_ERROR_NOT_READY until the work is done) for up to pollWindow, then
// blocks in wait, all on the caller's thread. A poll finding the work done
// returns at once, so waiting for work that has finished costs one query.
func (st *deviceState) awaitWork(query func() result, queryOp string, wait func() result, waitOp string) error {
	st.calls.waits.Add(1)
	deadline := time.Now().Add(pollWindow)
	for {
		var r result
		if err := st.do(func() { r = query() }); err != nil {
			return err
		}
		if r != resultNotReady {
			return check(st.drv, queryOp, r)
		}
		if time.Now().After(deadline) {
			return st.run(wait, waitOp)
		}
	}
}

// finishDefault makes work enqueued on the legacy default stream (handle 0)
// complete before the caller goes on: an operation given the nil *Stream is
// synchronous. warpkit's own streams are non-blocking, so without this wait
// the work would not be ordered before later work on them.
func (st *deviceState) finishDefault(stream uintptr) error {
	if stream != 0 {
		return nil
	}
	return st.awaitWork(
		func() result { return st.drv.streamQuery(0) }, "cuStreamQuery",
		func() result { return st.drv.streamSynchronize(0) }, "cuStreamSynchronize")
}
