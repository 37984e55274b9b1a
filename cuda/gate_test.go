package cuda

import (
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestCallsAcrossClose: many goroutines, each on its own stream, copy,
// launch and synchronize while the device closes under them. Every call
// returns its result or ErrClosed (never another error, a crash or a hang),
// every call the driver saw ran with the context current on its thread, and
// no goroutine outlives the test.
func TestCallsAcrossClose(t *testing.T) {
	for round := range 5 {
		before := runtime.NumGoroutine()
		f := newFakeGPU()
		d := openFake(t, f)
		mod, err := d.LoadModule(selftestPTX)
		if err != nil {
			t.Fatal(err)
		}
		fn, err := mod.Function("fill_u64")
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		started := make(chan struct{}, 16)
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := d.NewStream()
				if err != nil {
					errs <- err
					return
				}
				defer s.Close()
				buf, err := Alloc[uint64](d, 64)
				if err != nil {
					errs <- err
					return
				}
				defer buf.Free()
				started <- struct{}{}
				for i := 0; ; i++ {
					if err := buf.CopyFromHost([]uint64{uint64(g), uint64(i)}); err != nil {
						errs <- err
						return
					}
					if err := fn.Launch(D1(1), D1(32), 0, s, buf, uint64(7), uint64(64)); err != nil {
						errs <- err
						return
					}
					if err := s.Synchronize(); err != nil {
						errs <- err
						return
					}
					if _, err := buf.ToHost(); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		for range 16 {
			<-started
		}
		time.Sleep(time.Duration(round) * time.Millisecond)
		if err := d.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if !errors.Is(err, ErrClosed) {
				t.Fatalf("round %d: a call across Close returned %v, want ErrClosed", round, err)
			}
		}
		if n := f.wrongCtx.Load(); n > 0 {
			t.Fatalf("%d driver calls ran without the context current on their thread", n)
		}
		if f.contexts != 0 {
			t.Fatalf("%d contexts still retained after Close", f.contexts)
		}
		waitGoroutines(t, before)
	}
}

// waitGoroutines fails unless the goroutine count drops back to n.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
}

// TestCallsLeaveThreadsUnlocked: a goroutine returns from every call (and
// every failing call) with its thread unlocked. A goroutine that ends while
// locked to its thread takes the thread with it, so if calls leaked their
// lock, short-lived goroutines making calls would each run on a new thread.
func TestCallsLeaveThreadsUnlocked(t *testing.T) {
	if threadID() < 0 {
		t.Skip("thread ids are known on Linux only")
	}
	f := newFakeGPU()
	d := openFake(t, f)
	buf, err := Alloc[uint32](d, 4)
	if err != nil {
		t.Fatal(err)
	}
	calls := []func() error{
		func() error { return buf.CopyFromHost([]uint32{1, 2}) },
		func() error { _, err := buf.ToHost(); return err },
		func() error { _, _, err := d.MemInfo(); return err },
		func() error { return d.Synchronize() },
		func() error { _, err := Alloc[byte](d, 1<<40); return err }, // fails: out of memory
		func() error {
			s, err := d.NewStream()
			if err == nil {
				err = s.Close()
			}
			return err
		},
	}
	threads := map[int]bool{}
	const rounds = 40
	for range rounds {
		for _, c := range calls {
			tid := make(chan int)
			go func() {
				c()
				tid <- threadID() // the thread this goroutine ends on
			}()
			threads[<-tid] = true
		}
	}
	if n := len(threads); n > 3*runtime.GOMAXPROCS(0)+8 {
		t.Fatalf("%d goroutines ran on %d OS threads: calls leave goroutines locked to their threads, which then exit", rounds*len(calls), n)
	}
}

// TestCallKeepsCallersLock: a goroutine that locked itself to its thread
// before a call is still locked after it (the call's lock nests).
func TestCallKeepsCallersLock(t *testing.T) {
	if threadID() < 0 {
		t.Skip("thread ids are known on Linux only")
	}
	d := openFake(t, newFakeGPU())
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := threadID()
	if _, _, err := d.MemInfo(); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		runtime.Gosched()
		if threadID() != tid {
			t.Fatal("the call unlocked the caller's own lock")
		}
	}
}
