// Package hostpar splits large host-memory loops over a few goroutines: the
// staging copies and argument checks of batches given as Go slices, which a
// single core cannot move as fast as the GPU takes them (docs/benchmarks.md:
// one core copies several times slower than pinned host-device copies run).
//
// Loops shorter than the grain run on the caller's goroutine, so small
// batches pay nothing.
package hostpar

import (
	"runtime"
	"sync"
)

// MaxParts bounds the goroutines one loop uses: past a few, memory
// bandwidth, not cores, bounds a copy.
const MaxParts = 8

// Grain is the fewest elements worth a goroutine of their own.
const Grain = 1 << 16

// For calls f over [0, n) in parts [lo, hi) of at least grain elements, at
// most min(GOMAXPROCS, MaxParts) parts, concurrently; it returns when every
// part has returned. Parts are consecutive and in order: part i covers
// [i*n/p, (i+1)*n/p).
func For(n, grain int, f func(part, lo, hi int)) {
	run(n, Parts(n, grain), f)
}

// ForCores is For for compute-bound loops, which every core speeds up: up
// to GOMAXPROCS parts (For stops at MaxParts, where copies run out of
// memory bandwidth).
func ForCores(n, grain int, f func(part, lo, hi int)) {
	ForWorkers(n, grain, 0, f)
}

// ForWorkers is ForCores in at most workers parts (0 or less: GOMAXPROCS),
// for a caller that bounds its goroutines (gpucompact's HostWorkers).
func ForWorkers(n, grain, workers int, f func(part, lo, hi int)) {
	run(n, max(1, min(n/max(grain, 1), Workers(workers))), f)
}

// Workers resolves a bound on goroutines: workers itself when positive,
// else GOMAXPROCS.
func Workers(workers int) int {
	if workers > 0 {
		return workers
	}
	return runtime.GOMAXPROCS(0)
}

// run calls f over [0, n) in p consecutive parts, concurrently.
func run(n, p int, f func(part, lo, hi int)) {
	if p <= 1 {
		if n > 0 {
			f(0, 0, n)
		}
		return
	}
	var wg sync.WaitGroup
	for i := 1; i < p; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(i, i*n/p, (i+1)*n/p)
		}()
	}
	f(0, 0, n/p)
	wg.Wait()
}

// Parts returns how many parts For splits n elements into.
func Parts(n, grain int) int {
	if grain < 1 {
		grain = 1
	}
	return max(1, min(n/grain, runtime.GOMAXPROCS(0), MaxParts))
}

// Copy is copy(dst, src) split over goroutines when it is long; it returns
// the number of elements copied.
func Copy[T any](dst, src []T) int {
	n := min(len(dst), len(src))
	For(n, Grain, func(_, lo, hi int) { copy(dst[lo:hi], src[lo:hi]) })
	return n
}
