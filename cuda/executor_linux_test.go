package cuda

import (
	"sync"
	"syscall"
	"testing"
)

// TestExecutorKeepsOneThread checks what the executor exists for: every call,
// from any goroutine, runs on the same OS thread (where the context is
// current).
func TestExecutorKeepsOneThread(t *testing.T) {
	e := newTestExecutor(t)
	defer e.stop(func() {})
	var first int
	e.do(func() { first = syscall.Gettid() })
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				e.do(func() {
					if tid := syscall.Gettid(); tid != first {
						t.Errorf("call ran on thread %d, not %d", tid, first)
					}
				})
			}
		}()
	}
	wg.Wait()
}
