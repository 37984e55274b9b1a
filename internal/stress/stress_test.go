package stress

import (
	"errors"
	"os"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	MaybeBurn() // this test binary is the burners' program too
	os.Exit(m.Run())
}

// TestBurners: burners start, use about their share of a core each, and
// stop.
func TestBurners(t *testing.T) {
	b, err := Start(50, 2)
	if err != nil {
		t.Fatal(err)
	}
	if b.Len() != 2 {
		t.Fatalf("%d burners, want 2", b.Len())
	}
	time.Sleep(400 * time.Millisecond)
	cpu, err := b.Stop()
	if err != nil {
		t.Fatal(err)
	}
	// 2 burners at 50% for 0.4 s: about 0.4 s of CPU (a loaded machine
	// gives them less; startup adds a little).
	if cpu < 100*time.Millisecond || cpu > 1200*time.Millisecond {
		t.Fatalf("2 burners at 50%% for 400 ms used %v of CPU", cpu)
	}
	t.Logf("2 burners at 50%% for 400 ms: %v of CPU", cpu)
}

func TestStartArguments(t *testing.T) {
	for _, pct := range []int{-1, 101} {
		if _, err := Start(pct, 1); !errors.Is(err, ErrPercent) {
			t.Errorf("Start(%d): %v", pct, err)
		}
	}
	b, err := Start(0, 4)
	if err != nil || b.Len() != 0 {
		t.Fatalf("Start(0): %d burners, %v", b.Len(), err)
	}
	if cpu, err := b.Stop(); cpu != 0 || err != nil {
		t.Fatalf("Stop of none: %v, %v", cpu, err)
	}
}

// TestBurnDuty: burn sleeps the rest of each period.
func TestBurnDuty(t *testing.T) {
	stop := make(chan struct{})
	time.AfterFunc(200*time.Millisecond, func() { close(stop) })
	start := time.Now()
	n := burn(30, stop)
	el := time.Since(start)
	if n < 5 || n > int(el/Period)+1 {
		t.Fatalf("%d periods in %v", n, el)
	}
}
