package hostpar

import (
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
)

func TestFor(t *testing.T) {
	checkFor(t, For, func(n int) int { return Parts(n, Grain) })
}

// TestForCores: ForCores covers every element once in up to GOMAXPROCS
// parts (past MaxParts when there are the cores).
func TestForCores(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2 * MaxParts))
	checkFor(t, ForCores, func(n int) int { return max(1, min(n/Grain, 2*MaxParts)) })
}

// TestForWorkers: ForWorkers stops at its bound, which may pass
// GOMAXPROCS, and takes GOMAXPROCS when given none.
func TestForWorkers(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	for _, w := range []int{-1, 0, 1, 3, 9} {
		bound := w
		if w <= 0 {
			bound = 4
		}
		checkFor(t, func(n, grain int, f func(int, int, int)) { ForWorkers(n, grain, w, f) },
			func(n int) int { return max(1, min(n/Grain, bound)) })
	}
}

func checkFor(t *testing.T, forFn func(int, int, func(int, int, int)), parts func(n int) int) {
	t.Helper()
	for _, n := range []int{0, 1, Grain - 1, Grain, 3*Grain + 7, 20 * Grain} {
		seen := make([]atomic.Int32, n)
		var calls atomic.Int32
		forFn(n, Grain, func(_, lo, hi int) {
			calls.Add(1)
			for i := lo; i < hi; i++ {
				seen[i].Add(1)
			}
		})
		for i := range seen {
			if seen[i].Load() != 1 {
				t.Fatalf("n=%d: element %d visited %d times", n, i, seen[i].Load())
			}
		}
		if want := parts(n); n > 0 && int(calls.Load()) != want {
			t.Fatalf("n=%d: %d parts, want %d", n, calls.Load(), want)
		}
	}
}

func TestCopy(t *testing.T) {
	n := 10*Grain + 3
	src := make([]uint32, n)
	for i := range src {
		src[i] = uint32(i * 7)
	}
	dst := make([]uint32, n+5)
	if Copy(dst, src) != n || !slices.Equal(dst[:n], src) || dst[n] != 0 {
		t.Fatal("copy differs")
	}
}
