package lsmbench

import (
	"math"
	"slices"
	"time"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/prim"
)

// The CPU backend's variants of the steps that call prim directly: the host
// twins of the device sort and merge, timed the same way.

// sortTimeHost times prim's host radix sort of n (key, value) pairs, the
// second of two runs (as sortTime does on the device).
func (b *lsmBench) sortTimeHost(n int) (time.Duration, error) {
	var d time.Duration
	for range 2 {
		k, v := slices.Clone(b.keys.host[:n]), slices.Clone(b.vals.host[:n])
		d, _ = timed(func() error { prim.SortPairsHost(k, v, prim.SortOptions{}); return nil })
	}
	return d, nil
}

// mergeRateHost is mergeRate with prim's host merge: G entries/s, best of 3.
func mergeRateHost[K, V warpkit.Word](n int, mask K) float64 {
	a, bb := make([]K, 0, n/2), make([]K, 0, n/2)
	for i := range n {
		k := K(i) << 1 // run A: even positions, run B: odd; status bit 0 for the wide-key layout
		if i%2 == 0 {
			a = append(a, k)
		} else {
			bb = append(bb, k)
		}
	}
	av, bv := make([]V, n/2), make([]V, n/2)
	ok, ov := make([]K, n), make([]V, n)
	best := time.Duration(math.MaxInt64)
	for range 3 {
		d, _ := timed(func() error {
			prim.MergePairsHost(a, av, bb, bv, ok, ov, prim.MergeOptions[K]{KeyMask: mask})
			return nil
		})
		best = min(best, d)
	}
	return float64(n) / best.Seconds() / 1e9
}
