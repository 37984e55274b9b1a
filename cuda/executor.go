package cuda

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// executor runs functions on one goroutine locked to its OS thread, on which a
// device's primary context is current. Every driver call that needs a context
// goes through it.
//
// Handing work to a goroutine locked to its thread costs a thread wake-up when
// that goroutine is parked, and so does handing the result back. Both sides
// can spin for a while before they park (executorSpin, callerSpin), but by
// default neither does. Measured on an H100 machine (a VM), spinning on both
// sides cut a one-element batch call from ~100 to ~45 us, yet halved the rate
// of batches of a million operations (a slab hash mix: 1.2-1.8 against
// 2.4-3.4 G ops/s; its static baseline 1.9-2.7 against 3.9-5.4), and every
// other setting tried (docs/benchmarks.md) was slower than parking too;
// device batches are what the structures are for. An idle executor parks and
// uses no CPU.
type executor struct {
	mu      sync.RWMutex // held for reading while a call is in flight
	stopped bool

	qmu      sync.Mutex
	queue    []*call
	queued   atomic.Int32  // len(queue), for polling without the lock
	sleeping atomic.Bool   // the executor is parked (or about to park) on wake
	wake     chan struct{} // capacity 1
	quit     bool          // guarded by qmu: the executor goroutine exits when the queue drains
	done     chan struct{} // closed when the executor goroutine has exited
}

// Spin limits (zero: park at once; the default, see executor). The
// executor's would cover the gap between the driver calls of one batch
// operation; the caller's a typical driver call (a launch, a query, a small
// copy) but not a long wait. They are variables so that the package's
// benchmarks can compare settings on a device (the cuda.spin flag of its
// tests).
var (
	executorSpin = time.Duration(0)
	callerSpin   = time.Duration(0)
)

// spinning reports whether to spin for up to limit. With one processor (a
// one-CPU container) a spinning goroutine would hold the processor the other
// side needs to make progress, so nobody spins.
func spinning(limit time.Duration) bool {
	return limit > 0 && runtime.GOMAXPROCS(0) > 1
}

// call is one unit of work and its completion state.
type call struct {
	f     func()
	state atomic.Uint32 // callRunning, callDone, or callParked
	ch    chan struct{} // capacity 1: signalled when a parked caller's call is done
}

const (
	callRunning uint32 = iota
	callDone
	callParked
)

var callPool = sync.Pool{New: func() any { return &call{ch: make(chan struct{}, 1)} }}

// startExecutor starts the goroutine and runs setup on it; if setup fails the
// executor stops and the error is returned.
func startExecutor(setup func() error) (*executor, error) {
	e := &executor{wake: make(chan struct{}, 1), done: make(chan struct{})}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer close(e.done)
		if err := setup(); err != nil {
			errc <- err
			// Leave the thread locked: it may hold a context; the runtime
			// discards a locked thread when its goroutine exits.
			return
		}
		errc <- nil
		e.loop()
	}()
	if err := <-errc; err != nil {
		<-e.done
		return nil, err
	}
	return e, nil
}

// loop runs calls until quit is set and the queue is empty.
func (e *executor) loop() {
	for {
		c, quit := e.pop()
		if c != nil {
			c.f()
			c.finish()
			continue
		}
		if quit {
			return
		}
		if spinning(executorSpin) && e.spinForWork() {
			continue
		}
		// Announce the park, then look once more: a submitter either sees
		// sleeping and sends a wake, or its call is seen here.
		e.sleeping.Store(true)
		if e.pending() {
			e.sleeping.Store(false)
			continue
		}
		<-e.wake
		e.sleeping.Store(false)
	}
}

func (e *executor) pop() (*call, bool) {
	e.qmu.Lock()
	defer e.qmu.Unlock()
	if len(e.queue) == 0 {
		return nil, e.quit
	}
	c := e.queue[0]
	e.queue[0] = nil
	e.queue = e.queue[1:]
	e.queued.Add(-1)
	return c, false
}

func (e *executor) pending() bool {
	if e.queued.Load() > 0 {
		return true
	}
	e.qmu.Lock()
	defer e.qmu.Unlock()
	return e.quit
}

// spinForWork polls the queue for up to executorSpin and reports whether work
// (or quit) arrived.
func (e *executor) spinForWork() bool {
	deadline := time.Now().Add(executorSpin)
	for i := 0; ; i++ {
		if e.queued.Load() > 0 {
			return true
		}
		if i%64 == 63 {
			if e.pending() {
				return true
			}
			if time.Now().After(deadline) {
				return false
			}
		}
	}
}

// push queues c and wakes the executor if it is parked.
func (e *executor) push(c *call) {
	e.qmu.Lock()
	e.queue = append(e.queue, c)
	e.queued.Add(1)
	e.qmu.Unlock()
	if e.sleeping.Load() {
		select {
		case e.wake <- struct{}{}:
		default: // a wake is already pending
		}
	}
}

// finish marks the call done, waking its caller if it parked.
func (c *call) finish() {
	if c.state.Swap(callDone) == callParked {
		c.ch <- struct{}{}
	}
}

// wait returns once the call is done: it spins for up to callerSpin, then parks.
func (c *call) wait() {
	if spinning(callerSpin) {
		deadline := time.Now().Add(callerSpin)
		for i := 0; ; i++ {
			if c.state.Load() == callDone {
				return
			}
			if i%64 == 63 && time.Now().After(deadline) {
				break
			}
		}
	}
	if c.state.CompareAndSwap(callRunning, callParked) {
		<-c.ch
	}
}

// do runs f on the executor thread and waits for it. It returns ErrClosed,
// without running f, once the executor is stopped.
func (e *executor) do(f func()) error {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.stopped {
		return ErrClosed
	}
	c := callPool.Get().(*call)
	c.f = f
	c.state.Store(callRunning)
	e.push(c)
	c.wait()
	c.f = nil
	callPool.Put(c)
	return nil
}

// stop runs last on the executor thread after every call in flight has
// finished, then ends the goroutine. Later calls to do return ErrClosed.
func (e *executor) stop(last func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return
	}
	c := &call{f: last, ch: make(chan struct{}, 1)}
	e.push(c)
	c.wait()
	e.stopped = true
	e.qmu.Lock()
	e.quit = true
	e.qmu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
	<-e.done
}
