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
	t0 := time.Now()
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
	wall := time.Since(t0)
	// 2 burners at 50%: about one core's worth of the wall time. A loaded
	// machine stretches the wall time and gives them less of it; neither
	// can use more than a core each (plus their start).
	if cpu < 50*time.Millisecond || cpu > 2*wall+300*time.Millisecond {
		t.Fatalf("2 burners at 50%% over %v used %v of CPU", wall, cpu)
	}
	t.Logf("2 burners at 50%% over %v: %v of CPU", wall, cpu)
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
	t.Setenv(envVar, "50")
	if _, err := Start(50, 1); !errors.Is(err, ErrNested) {
		t.Fatalf("Start in a burner: %v", err)
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
