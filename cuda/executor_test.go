package cuda

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var spinFlag = flag.String("cuda.spin", "", "executor and caller spin limits for this run, e.g. 50us,0 (default: the package's)")

func TestMain(m *testing.M) {
	flag.Parse()
	if *spinFlag != "" {
		ex, ca, _ := strings.Cut(*spinFlag, ",")
		var err1, err2 error
		executorSpin, err1 = time.ParseDuration(ex)
		callerSpin, err2 = time.ParseDuration(cmp.Or(ca, "0"))
		if err1 != nil || err2 != nil {
			fmt.Fprintln(os.Stderr, "bad -cuda.spin:", err1, err2)
			os.Exit(2)
		}
		fmt.Printf("cuda: executor spin %v, caller spin %v\n", executorSpin, callerSpin)
	}
	os.Exit(m.Run())
}

// TestExecutorSpinSettings runs calls under each spin setting, covering the
// spinning and the parking paths on both sides.
func TestExecutorSpinSettings(t *testing.T) {
	defer func(e, c time.Duration) { executorSpin, callerSpin = e, c }(executorSpin, callerSpin)
	for _, s := range [][2]time.Duration{{0, 0}, {50 * time.Microsecond, 0}, {0, 30 * time.Microsecond}, {50 * time.Microsecond, 30 * time.Microsecond}} {
		executorSpin, callerSpin = s[0], s[1]
		e := newTestExecutor(t)
		n := 0
		for i := range 200 {
			if err := e.do(func() { n++ }); err != nil {
				t.Fatal(err)
			}
			if i%50 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		e.stop(func() {})
		if n != 200 {
			t.Fatalf("spin %v: %d of 200 calls ran", s, n)
		}
	}
}

func newTestExecutor(t testing.TB) *executor {
	t.Helper()
	e, err := startExecutor(func() error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestExecutorRunsOnOneThread checks that calls from many goroutines all run,
// in the order each goroutine issued them, and never two at once.
func TestExecutorRunsOnOneThread(t *testing.T) {
	e := newTestExecutor(t)
	var inside atomic.Int32
	var wg sync.WaitGroup
	const goroutines, calls = 16, 500
	last := make([]int, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				if err := e.do(func() {
					if inside.Add(1) != 1 {
						t.Error("two calls ran at once")
					}
					if last[g] != i {
						t.Errorf("goroutine %d: call %d ran after %d", g, i, last[g])
					}
					last[g] = i + 1
					inside.Add(-1)
				}); err != nil {
					t.Error(err)
				}
				if i%97 == 0 {
					time.Sleep(200 * time.Microsecond) // let the executor park sometimes
				}
			}
		}()
	}
	wg.Wait()
	for g, n := range last {
		if n != calls {
			t.Fatalf("goroutine %d: %d of %d calls ran", g, n, calls)
		}
	}
	e.stop(func() {})
}

// TestExecutorStop checks that stop waits for calls in flight, runs last on
// the executor, and that later calls fail with ErrClosed without running.
func TestExecutorStop(t *testing.T) {
	e := newTestExecutor(t)
	started := make(chan struct{})
	release := make(chan struct{})
	var order []string
	var mu sync.Mutex
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	go e.do(func() { close(started); <-release; note("call") })
	<-started
	stopped := make(chan struct{})
	go func() { e.stop(func() { note("last") }); close(stopped) }()
	time.Sleep(10 * time.Millisecond)
	select {
	case <-stopped:
		t.Fatal("stop returned while a call was in flight")
	default:
	}
	close(release)
	<-stopped
	if len(order) != 2 || order[0] != "call" || order[1] != "last" {
		t.Fatalf("order %v", order)
	}
	ran := false
	if err := e.do(func() { ran = true }); !errors.Is(err, ErrClosed) || ran {
		t.Fatalf("call after stop: err %v, ran %v", err, ran)
	}
	e.stop(func() { t.Error("second stop ran last again") })
}

// TestExecutorWakesAfterParking checks that calls spaced further apart than
// any spin still complete (the park/wake path).
func TestExecutorWakesAfterParking(t *testing.T) {
	e := newTestExecutor(t)
	for i := range 5 {
		time.Sleep(5 * time.Millisecond)
		n := 0
		if err := e.do(func() { n = i + 1 }); err != nil || n != i+1 {
			t.Fatalf("call %d: %v, n=%d", i, err, n)
		}
	}
	e.stop(func() {})
}

// BenchmarkExecutorRoundTrip measures one call through the executor and back:
// the fixed cost every driver call pays on top of the driver itself.
func BenchmarkExecutorRoundTrip(b *testing.B) {
	e := newTestExecutor(b)
	defer e.stop(func() {})
	x := 0
	for b.Loop() {
		e.do(func() { x++ })
	}
}
