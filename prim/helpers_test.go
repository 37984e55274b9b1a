package prim

import (
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/warpkit/warpkit"
)

// Key patterns the sort, merge and select tests run on.
var patterns = []string{"random", "few", "equal", "sorted", "reverse", "lowbits"}

// genKeys returns n keys of the pattern: uniform random, a few distinct
// values, all equal, ascending, descending, or random in the low 12 bits only.
func genKeys[K warpkit.Word](rng *rand.Rand, n int, pattern string) []K {
	out := make([]K, n)
	for i := range out {
		switch pattern {
		case "random":
			out[i] = K(rng.Uint64())
		case "few":
			out[i] = K(rng.IntN(5)) * (^K(0) / 4)
		case "equal":
			out[i] = ^K(0) - 2
		case "sorted":
			out[i] = K(i) * 3
		case "reverse":
			out[i] = K(n-i) * 7
		case "lowbits":
			out[i] = K(rng.Uint64() & 0xfff)
		default:
			panic(pattern)
		}
	}
	return out
}

func genVals[V warpkit.Word](n int) []V {
	out := make([]V, n)
	for i := range out {
		out[i] = V(i)*2654435761 + 1 // distinct, so any misplaced value shows
	}
	return out
}

func genFlags(rng *rand.Rand, n int, density float64) []uint8 {
	out := make([]uint8, n)
	for i := range out {
		if rng.Float64() < density {
			out[i] = uint8(1 + rng.IntN(255))
		}
	}
	return out
}

// genOffsets splits n elements into segments of mixed sizes, empty ones
// included; maxLen bounds a segment's length.
func genOffsets(rng *rand.Rand, n, maxLen int) []uint32 {
	offs := []uint32{0}
	for pos := 0; pos < n; {
		var l int
		switch rng.IntN(4) {
		case 0:
			l = 0
		case 1:
			l = rng.IntN(33)
		case 2:
			l = rng.IntN(min(maxLen, 1100) + 1)
		default:
			l = rng.IntN(maxLen + 1)
		}
		l = min(l, n-pos)
		pos += l
		offs = append(offs, uint32(pos))
	}
	offs = append(offs, uint32(n)) // a trailing empty segment
	return offs
}

// bitsOf extracts the sort bits of k for opt (all bits for the zero value).
func bitsOf[K warpkit.Word](k K, opt SortOptions) K {
	b, e, err := bitRange[K](opt)
	if err != nil {
		panic(err)
	}
	k >>= b
	if e-b < keyBits[K]() {
		k &= K(1)<<(e-b) - 1
	}
	return k
}

// refSortPairs is the oracle: sort.SliceStable on (key bits) of (key, value)
// pairs.
func refSortPairs[K, V warpkit.Word](keys []K, vals []V, opt SortOptions) ([]K, []V) {
	idx := make([]int, len(keys))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return bitsOf(keys[idx[a]], opt) < bitsOf(keys[idx[b]], opt) })
	k, v := make([]K, len(keys)), make([]V, len(keys))
	for i, j := range idx {
		k[i] = keys[j]
		if vals != nil {
			v[i] = vals[j]
		}
	}
	return k, v
}

// refMerge is the oracle of a merge: a stable sort of A followed by B by
// masked key.
func refMerge[K, V warpkit.Word](ak []K, av []V, bk []K, bv []V, mask K) ([]K, []V) {
	k := slices.Concat(ak, bk)
	v := slices.Concat(av, bv)
	idx := make([]int, len(k))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return k[idx[a]]&mask < k[idx[b]]&mask })
	ok, ov := make([]K, len(k)), make([]V, len(k))
	for i, j := range idx {
		ok[i] = k[j]
		if len(v) > 0 {
			ov[i] = v[j]
		}
	}
	return ok, ov
}

// sortedRun returns n keys sorted by mask (with many duplicates when dup).
func sortedRun[K warpkit.Word](rng *rand.Rand, n int, dup bool, mask K) []K {
	out := make([]K, n)
	for i := range out {
		if dup {
			out[i] = K(rng.IntN(max(1, n/4)+1)) * 5
			if rng.IntN(2) == 0 {
				out[i] |= ^mask & K(rng.Uint64()) // bits outside the mask must not matter
			}
		} else {
			out[i] = K(rng.Uint64())
		}
	}
	slices.SortStableFunc(out, func(a, b K) int {
		switch {
		case a&mask < b&mask:
			return -1
		case a&mask > b&mask:
			return 1
		}
		return 0
	})
	return out
}

// firstDiff reports the first index where a and b differ, or -1.
func firstDiff[T comparable](a, b []T) int {
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

func mustEqual[T comparable](t *testing.T, what string, got, want []T) {
	t.Helper()
	if i := firstDiff(got, want); i >= 0 {
		var g, w any = "<none>", "<none>"
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		t.Fatalf("%s: first difference at %d of %d/%d: got %v, want %v", what, i, len(got), len(want), g, w)
	}
}

// bitRanges are the sort options every sort test covers for K.
func bitRanges[K warpkit.Word]() []SortOptions {
	kb := keyBits[K]()
	return []SortOptions{{}, {BeginBit: 0, EndBit: kb}, {BeginBit: 4, EndBit: 13}, {BeginBit: 1, EndBit: kb}, {BeginBit: kb - 5, EndBit: kb}, {BeginBit: 8, EndBit: 24}}
}
