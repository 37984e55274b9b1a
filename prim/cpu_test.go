package prim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/internal/kernelgen/ptxcheck"
)

func TestPTXUpToDate(t *testing.T) { ptxcheck.Check(t, "prim.ptx") }

var hostSizes = []int{0, 1, 2, 3, 31, 47, 48, 49, 255, 256, 257, 1000, 4097, 1<<16 + 13}

func TestSortHost(t *testing.T) {
	testSortHost[uint32, uint32](t)
	testSortHost[uint32, uint64](t)
	testSortHost[uint64, uint32](t)
	testSortHost[uint64, uint64](t)
}

// shortSizes drops the largest sizes under -short (the race detector makes the
// sort.SliceStable oracle slow).
func shortSizes(sizes []int, limit int) []int {
	if !testing.Short() {
		return sizes
	}
	return slices.DeleteFunc(slices.Clone(sizes), func(n int) bool { return n > limit })
}

func testSortHost[K, V warpkit.Word](t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range shortSizes(hostSizes, 5000) {
		for _, pat := range patterns {
			for _, opt := range bitRanges[K]() {
				name := fmt.Sprintf("k%d_v%d/n=%d/%s/bits=%v", keyBits[K](), 8*sizeOf[V](), n, pat, opt)
				keys := genKeys[K](rng, n, pat)
				vals := genVals[V](n)
				wantK, wantV := refSortPairs(keys, vals, opt)

				k, v := slices.Clone(keys), slices.Clone(vals)
				SortPairsHost(k, v, opt)
				mustEqual(t, name+" pair keys", k, wantK)
				mustEqual(t, name+" pair values", v, wantV)

				k = slices.Clone(keys)
				SortKeysHost(k, opt)
				mustEqual(t, name+" keys", k, wantK)
			}
		}
	}
}

func TestSegmentedSortHost(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range shortSizes([]int{0, 1, 100, 5000, 70000}, 5000) {
		for _, pat := range patterns {
			keys := genKeys[uint64](rng, n, pat)
			vals := genVals[uint32](n)
			offs := genOffsets(rng, n, 6000)
			for _, opt := range []SortOptions{{}, {BeginBit: 1, EndBit: 64}} {
				k, v := slices.Clone(keys), slices.Clone(vals)
				SegmentedSortPairsHost(k, v, offs, opt)
				k2 := slices.Clone(keys)
				SegmentedSortKeysHost(k2, offs, opt)
				for s := 0; s+1 < len(offs); s++ {
					lo, hi := offs[s], offs[s+1]
					wk, wv := refSortPairs(keys[lo:hi], vals[lo:hi], opt)
					name := fmt.Sprintf("n=%d/%s/%v/segment %d [%d,%d)", n, pat, opt, s, lo, hi)
					mustEqual(t, name+" keys", k[lo:hi], wk)
					mustEqual(t, name+" values", v[lo:hi], wv)
					mustEqual(t, name+" keys-only", k2[lo:hi], wk)
				}
			}
		}
	}
}

func TestMergeHost(t *testing.T) {
	testMergeHost[uint32, uint64](t, 0xfffffffe)
	testMergeHost[uint64, uint32](t, ^uint64(1))
	testMergeHost[uint64, uint64](t, 0)
}

func testMergeHost[K, V warpkit.Word](t *testing.T, mask K) {
	rng := rand.New(rand.NewPCG(5, 6))
	m := MergeOptions[K]{KeyMask: mask}.mask()
	for _, na := range []int{0, 1, 17, 1000, 3000} {
		for _, nb := range []int{0, 1, 5, 999, 4000} {
			for _, dup := range []bool{false, true} {
				ak, bk := sortedRun(rng, na, dup, m), sortedRun(rng, nb, dup, m)
				av, bv := genVals[V](na), genVals[V](nb)
				for i := range bv {
					bv[i] ^= 1 << 20 // values of B differ from A's
				}
				wk, wv := refMerge(ak, av, bk, bv, m)
				ok, ov := make([]K, na+nb), make([]V, na+nb)
				MergePairsHost(ak, av, bk, bv, ok, ov, MergeOptions[K]{KeyMask: mask})
				name := fmt.Sprintf("%d+%d dup=%v", na, nb, dup)
				mustEqual(t, name+" keys", ok, wk)
				mustEqual(t, name+" values", ov, wv)
				ok2 := make([]K, na+nb)
				MergeKeysHost(ak, bk, ok2, MergeOptions[K]{KeyMask: mask})
				mustEqual(t, name+" keys-only", ok2, wk)
			}
		}
	}
}

func TestScanSelectSplitHost(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range hostSizes {
		in := genKeys[uint32](rng, n, "random")
		out := make([]uint32, n)
		total := ExclusiveScanHost(in, out)
		var sum uint32
		for i := range in {
			if out[i] != sum {
				t.Fatalf("n=%d: scan[%d] = %d, want %d", n, i, out[i], sum)
			}
			sum += in[i]
		}
		if total != sum {
			t.Fatalf("n=%d: total %d, want %d", n, total, sum)
		}
		inPlace := slices.Clone(in)
		ExclusiveScanHost(inPlace, inPlace)
		mustEqual(t, "in-place scan", inPlace, out)

		flags := genFlags(rng, n, 0.3)
		vals := genVals[uint64](n)
		var wantK []uint32
		var wantV []uint64
		var restK []uint32
		var restV []uint64
		for i, f := range flags {
			if f != 0 {
				wantK, wantV = append(wantK, in[i]), append(wantV, vals[i])
			} else {
				restK, restV = append(restK, in[i]), append(restV, vals[i])
			}
		}
		sel := make([]uint32, n)
		c := SelectFlaggedHost(in, flags, sel)
		if c != len(wantK) {
			t.Fatalf("n=%d: selected %d, want %d", n, c, len(wantK))
		}
		mustEqual(t, "select", sel[:c], wantK)
		short := make([]uint32, c/2)
		if c2 := SelectFlaggedHost(in, flags, short); c2 != c {
			t.Fatalf("select into a short output counted %d, want %d", c2, c)
		}
		mustEqual(t, "select into a short output", short, wantK[:c/2])
		sk, sv := make([]uint32, n), make([]uint64, n)
		if c := SelectFlaggedPairsHost(in, vals, flags, sk, sv); c != len(wantK) {
			t.Fatalf("pairs selected %d", c)
		}
		mustEqual(t, "select pairs keys", sk[:len(wantK)], wantK)
		mustEqual(t, "select pairs values", sv[:len(wantK)], wantV)

		mk, mv := make([]uint32, n), make([]uint64, n)
		c0 := Multisplit2PairsHost(in, vals, flags, mk, mv)
		if c0 != len(restK) {
			t.Fatalf("n=%d: bucket 0 has %d, want %d", n, c0, len(restK))
		}
		mustEqual(t, "split keys", mk, slices.Concat(restK, wantK))
		mustEqual(t, "split values", mv, slices.Concat(restV, wantV))
	}
}

func TestHostPanicsOnMisuse(t *testing.T) {
	cases := map[string]func(){
		"pairs length":   func() { SortPairsHost([]uint32{1, 2}, []uint32{1}, SortOptions{}) },
		"bit range":      func() { SortKeysHost([]uint32{1}, SortOptions{BeginBit: 3, EndBit: 33}) },
		"empty range":    func() { SortKeysHost([]uint64{1}, SortOptions{BeginBit: 3, EndBit: 3}) },
		"merge out":      func() { MergeKeysHost([]uint32{1}, []uint32{2}, make([]uint32, 1), MergeOptions[uint32]{}) },
		"scan out":       func() { ExclusiveScanHost([]uint32{1}, nil) },
		"select flags":   func() { SelectFlaggedHost([]uint32{1}, nil, nil) },
		"split out":      func() { Multisplit2PairsHost([]uint32{1}, []uint32{1}, []uint8{0}, nil, nil) },
		"offsets":        func() { SegmentedSortKeysHost([]uint32{1, 2}, []uint32{0, 1}) },
		"two options":    func() { SegmentedSortKeysHost([]uint32{1}, []uint32{0, 1}, SortOptions{}, SortOptions{}) },
		"offsets backwd": func() { SegmentedSortKeysHost([]uint32{1, 2}, []uint32{0, 2, 1, 2}) },
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			defer func() {
				r := recover()
				if r == nil {
					t.Fatal("no panic")
				}
				if s, ok := r.(string); !ok || !strings.HasPrefix(s, "prim: ") && !strings.Contains(s, "prim: ") {
					t.Fatalf("panic %v does not say prim", r)
				}
			}()
			f()
		})
	}
}

func TestValidation(t *testing.T) {
	for _, o := range []SortOptions{{}, {0, 32}, {31, 32}, {0, 1}} {
		if err := o.Validate(32); err != nil {
			t.Errorf("%v: %v", o, err)
		}
	}
	for _, o := range []SortOptions{{-1, 3}, {3, 3}, {5, 4}, {0, 33}, {0, 65}} {
		if err := o.Validate(32); !errors.Is(err, warpkit.ErrInvalidArgument) {
			t.Errorf("%v: got %v, want ErrInvalidArgument", o, err)
		}
	}
	if err := (SortOptions{0, 64}).Validate(64); err != nil {
		t.Error(err)
	}
	good := [][]uint32{{0}, {0, 0, 3}, {0, 3}, {0, 1, 1, 3}}
	for _, o := range good {
		n := int(o[len(o)-1])
		if err := ValidateOffsets(o, n); err != nil {
			t.Errorf("%v: %v", o, err)
		}
	}
	bad := [][]uint32{nil, {1, 3}, {0, 2, 1, 3}, {0, 2}}
	for _, o := range bad {
		if err := ValidateOffsets(o, 3); !errors.Is(err, warpkit.ErrInvalidArgument) {
			t.Errorf("%v: got %v, want ErrInvalidArgument", o, err)
		}
	}
}

// TestThirtyTwoBitLimits checks the host-side bounds that keep the sort
// kernels' 32-bit loop counters from overflowing: segmented sorts reject more
// than MaxSegmentedElements elements, and a multi-pass radix sort gives no
// block a run of tiles longer than that, however few blocks fill the device.
func TestThirtyTwoBitLimits(t *testing.T) {
	if err := checkSegmentedSize("op", MaxSegmentedElements); err != nil {
		t.Errorf("at the limit: %v", err)
	}
	for _, n := range []int{MaxSegmentedElements + 1, 1<<31 - 4096, MaxElements} {
		if err := checkSegmentedSize("op", n); !errors.Is(err, warpkit.ErrInvalidArgument) {
			t.Errorf("%d elements: got %v, want ErrInvalidArgument", n, err)
		}
	}
	for _, items := range []int{sortTileItems[uint32](), sortTileItems[uint64]()} {
		for _, n := range []int{MaxElements, MaxSegmentedElements + 1, 1 << 30, 3*items + 5} {
			tiles := ceilDiv(n, items)
			for _, fill := range []int{1, 2, 3, 132 * 8} {
				g := radixGrid(tiles, fill, items)
				if g < 1 || g > tiles || g < min(tiles, fill) {
					t.Fatalf("items %d, n %d, fill %d: grid %d of %d tiles", items, n, fill, g, tiles)
				}
				for b := range g { // tile_range in common.cuh
					first, last := int(int64(b)*int64(tiles)/int64(g)), int(int64(b+1)*int64(tiles)/int64(g))
					if run := min(last*items, n) - first*items; run > MaxSegmentedElements {
						t.Fatalf("items %d, n %d, fill %d: block %d of %d counts %d elements", items, n, fill, b, g, run)
					}
				}
			}
		}
	}
}
