package front

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warpkit/warpkit"
)

func TestDoAndClose(t *testing.T) {
	f := New("pkg", warpkit.CPU)
	ctx := context.Background()
	if err := f.Do(ctx, "op", Shared, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := f.Do(ctx, "op", Exclusive, func() error { return boom }); !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "pkg: op: ") {
		t.Fatalf("error %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	ran := false
	if err := f.Do(cctx, "op", Shared, func() error { ran = true; return nil }); !errors.Is(err, context.Canceled) || ran {
		t.Fatalf("cancelled: %v, ran %v", err, ran)
	}
	if v, err := Value(f, ctx, "get", Shared, func() (int, error) { return 7, nil }); v != 7 || err != nil {
		t.Fatalf("value %d, %v", v, err)
	}
	released := 0
	if err := f.Close(func() error { released++; return nil }); err != nil || released != 1 {
		t.Fatalf("close: %v, released %d", err, released)
	}
	if err := f.Close(func() error { released++; return nil }); !errors.Is(err, warpkit.ErrClosed) || released != 1 {
		t.Fatalf("second close: %v, released %d", err, released)
	}
	if err := f.Do(ctx, "op", Shared, func() error { ran = true; return nil }); !errors.Is(err, warpkit.ErrClosed) || ran {
		t.Fatalf("after close: %v, ran %v", err, ran)
	}
	if err := f.Lens("op", 1, 2); !errors.Is(err, warpkit.ErrClosed) {
		t.Fatalf("lens after close: %v", err)
	}
	if err := f.Device("op"); !errors.Is(err, warpkit.ErrClosed) {
		t.Fatalf("device after close: %v", err)
	}
	if f.Backend() != warpkit.CPU || !f.Closed() {
		t.Fatal("backend or closed state lost")
	}
}

func TestChecks(t *testing.T) {
	f := New("pkg", warpkit.CPU)
	if err := f.Lens("op", 3, 3, 3); err != nil {
		t.Fatal(err)
	}
	if err := f.Lens("op", 3, 3, 2); !errors.Is(err, warpkit.ErrInvalidArgument) {
		t.Fatalf("lens: %v", err)
	}
	if err := f.Device("op"); !errors.Is(err, warpkit.ErrNeedsCUDA) || !errors.Is(err, warpkit.ErrInvalidArgument) {
		t.Fatalf("device on CPU: %v", err)
	}
	if err := New("pkg", warpkit.CUDA).Device("op"); err != nil {
		t.Fatalf("device on CUDA: %v", err)
	}
}

// TestExclusion: an Exclusive call runs alone, Shared calls together, and
// Close waits for calls in flight.
func TestExclusion(t *testing.T) {
	f := New("pkg", warpkit.CPU)
	ctx := context.Background()
	var inside, most atomic.Int32
	enter := func() {
		n := inside.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(2 * time.Millisecond)
		inside.Add(-1)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() { defer wg.Done(); _ = f.Do(ctx, "read", Shared, func() error { enter(); return nil }) }()
	}
	wg.Wait()
	if most.Load() < 2 {
		t.Logf("shared calls did not overlap (%d); scheduling, not a failure", most.Load())
	}
	most.Store(0)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = f.Do(ctx, "write", Exclusive, func() error {
				if inside.Add(1) != 1 {
					t.Error("an exclusive call ran beside another call")
				}
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				return nil
			})
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = f.Do(ctx, "read", Shared, func() error { inside.Add(1); inside.Add(-1); return nil })
		}()
	}
	wg.Wait()
	done := make(chan struct{})
	go func() {
		_ = f.Do(ctx, "slow", Shared, func() error { close(done); time.Sleep(20 * time.Millisecond); return nil })
	}()
	<-done
	start := time.Now()
	if err := f.Close(func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < 10*time.Millisecond {
		t.Fatal("Close did not wait for the call in flight")
	}
}
