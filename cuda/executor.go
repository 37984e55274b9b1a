package cuda

import (
	"runtime"
	"sync"
)

// executor runs functions on one goroutine locked to its OS thread, on which a
// device's primary context is current. Every driver call that needs a context
// goes through it.
type executor struct {
	mu      sync.RWMutex // held for reading while a call is in flight
	stopped bool
	calls   chan func()
	done    chan struct{}
}

// startExecutor starts the goroutine and runs setup on it; if setup fails the
// executor stops and the error is returned.
func startExecutor(setup func() error) (*executor, error) {
	e := &executor{calls: make(chan func()), done: make(chan struct{})}
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
		for f := range e.calls {
			f()
		}
	}()
	if err := <-errc; err != nil {
		<-e.done
		return nil, err
	}
	return e, nil
}

var donePool = sync.Pool{New: func() any { return make(chan struct{}, 1) }}

// do runs f on the executor thread and waits for it. It returns ErrClosed,
// without running f, once the executor is stopped.
func (e *executor) do(f func()) error {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.stopped {
		return ErrClosed
	}
	done := donePool.Get().(chan struct{})
	e.calls <- func() { f(); done <- struct{}{} }
	<-done
	donePool.Put(done)
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
	done := make(chan struct{})
	e.calls <- func() { last(); close(done) }
	<-done
	e.stopped = true
	close(e.calls)
	<-e.done
}
