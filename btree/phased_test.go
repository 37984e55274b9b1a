package btree

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/gputest"
)

// queryChecker compares every query kind of a tree under test with a CPU
// oracle holding the same pairs.
type queryChecker[K, V warpkit.Word] struct {
	t            *testing.T
	ctx          context.Context
	subj, oracle *Tree[K, V]
}

func (c *queryChecker[K, V]) check(what string, qs []K) {
	c.t.Helper()
	ctx, n := c.ctx, len(qs)
	must := func(err error) {
		c.t.Helper()
		if err != nil {
			c.t.Fatalf("%s: %v", what, err)
		}
	}
	v1, v2 := make([]V, n), make([]V, n)
	f1, f2 := make([]bool, n), make([]bool, n)
	must(c.subj.Lookup(ctx, qs, v1, f1))
	must(c.oracle.Lookup(ctx, qs, v2, f2))
	for i, q := range qs {
		if f1[i] != f2[i] || v1[i] != v2[i] {
			c.t.Fatalf("%s: lookup %d (#%d of %d) = (%d, %v), oracle (%d, %v)", what, q, i, n, v1[i], f1[i], v2[i], f2[i])
		}
	}
	for _, pred := range []bool{false, true} {
		k1, k2 := make([]K, n), make([]K, n)
		if pred {
			must(c.subj.Predecessor(ctx, qs, k1, v1, f1))
			must(c.oracle.Predecessor(ctx, qs, k2, v2, f2))
		} else {
			must(c.subj.Successor(ctx, qs, k1, v1, f1))
			must(c.oracle.Successor(ctx, qs, k2, v2, f2))
		}
		for i, q := range qs {
			if f1[i] != f2[i] || k1[i] != k2[i] || v1[i] != v2[i] {
				c.t.Fatalf("%s: neighbor(pred=%v) of %d (#%d of %d) = (%d, %d, %v), oracle (%d, %d, %v)", what, pred, q, i, n, k1[i], v1[i], f1[i], k2[i], v2[i], f2[i])
			}
		}
	}
	// Ranges from each query: short, empty (hi < lo), and to the end of the key
	// range (the largest key excluded: ranges are half-open) for a few.
	var top K
	top--
	hi := make([]K, n)
	for i, q := range qs {
		switch i % 5 {
		case 0:
			hi[i] = q - 1 // lo > hi unless q is 0
		case 1:
			hi[i] = top
		default:
			hi[i] = q + K(i%97)*(top/K(1<<20)+1)
			if hi[i] < q {
				hi[i] = top
			}
		}
	}
	lo := qs
	if n > 64 { // ranges to the end of the key range cost O(tree) each: keep a few
		lo, hi = slices.Clone(qs[:64]), slices.Clone(hi[:64])
		for i := 64; i < n; i += 7 {
			if i%5 != 1 {
				lo, hi = append(lo, qs[i]), append(hi, qs[i]+1+K(i%31))
			}
		}
	}
	r1, err := c.subj.Range(ctx, lo, hi)
	must(err)
	r2, err := c.oracle.Range(ctx, lo, hi)
	must(err)
	if !slices.Equal(r1.Offsets, r2.Offsets) || !slices.Equal(r1.Keys, r2.Keys) || !slices.Equal(r1.Vals, r2.Vals) {
		for i := range lo {
			if r1.Count(i) != r2.Count(i) {
				c.t.Fatalf("%s: range [%d, %d) (#%d of %d) has %d pairs, oracle %d", what, lo[i], hi[i], i, len(lo), r1.Count(i), r2.Count(i))
			}
		}
		c.t.Fatalf("%s: range results differ (%d vs %d pairs)", what, len(r1.Keys), len(r2.Keys))
	}
	counts := make([]uint32, len(lo))
	must(c.subj.Count(ctx, lo, hi, counts))
	for i := range counts {
		if int(counts[i]) != r2.Count(i) {
			c.t.Fatalf("%s: count [%d, %d) = %d, oracle %d", what, lo[i], hi[i], counts[i], r2.Count(i))
		}
	}
}

// queryBatch draws n queries around the stored keys: present keys, their
// neighbours (absent unless adjacent keys are stored), both ends of the key
// range and uniform keys; in random order, or sorted (sorted batches put runs of
// neighbouring queries into one warp).
func queryBatch[K warpkit.Word](r *rand.Rand, stored []K, n int, sorted bool) []K {
	var top K
	top--
	qs := make([]K, n)
	for i := range qs {
		switch r.IntN(6) {
		case 0, 1:
			if len(stored) > 0 {
				qs[i] = stored[r.IntN(len(stored))]
				continue
			}
			qs[i] = K(r.Uint64())
		case 2:
			if len(stored) > 0 {
				qs[i] = stored[r.IntN(len(stored))] + 1
				continue
			}
			qs[i] = 1
		case 3:
			if len(stored) > 0 {
				qs[i] = stored[r.IntN(len(stored))] - 1
				continue
			}
			qs[i] = top - 1
		case 4:
			qs[i] = []K{0, 1, top, top - 1}[r.IntN(4)]
		default:
			qs[i] = K(r.Uint64())
		}
	}
	if sorted {
		slices.Sort(qs)
	}
	return qs
}

// TestGPUPhasedQueries checks the lockstep-wave path of phased queries against
// the CPU backend: every key width, unsorted and device-sorted batches, batch
// sizes around the wave size (16 queries for 128-byte nodes, 8 for 256-byte
// ones), trees from empty to several levels, and trees whose deletes left empty
// leaves (successors hop over them, predecessors descend again).
func TestGPUPhasedQueries(t *testing.T) {
	dev := gputest.Device(t)
	t.Run("u32u32", func(t *testing.T) { testPhased[uint32, uint32](t, dev) })
	t.Run("u64u64", func(t *testing.T) { testPhased[uint64, uint64](t, dev) })
	t.Run("u32u64", func(t *testing.T) { testPhased[uint32, uint64](t, dev) })
	t.Run("u64u32", func(t *testing.T) { testPhased[uint64, uint32](t, dev) })
}

func testPhased[K, V warpkit.Word](t *testing.T, dev *cuda.Device) {
	ctx := context.Background()
	sizes := []int{0, 1, 5, 14, 15, 200, 30000}
	batches := []int{1, 7, 8, 9, 15, 16, 17, 33, 1000, 20000}
	if !testing.Short() {
		sizes = append(sizes, 300000)
	}
	for _, size := range sizes {
		for _, sortMode := range []int{0, 1} {
			name := fmt.Sprintf("keys=%d/sort=%v", size, sortMode > 0)
			t.Run(name, func(t *testing.T) {
				r := rand.New(rand.NewPCG(uint64(size), uint64(sortMode+7)))
				subj := newGPUTree[K, V](t, dev, Options{SortQueries: sortMode})
				oracle, err := New[K, V](Options{Backend: warpkit.CPU})
				if err != nil {
					t.Fatal(err)
				}
				defer oracle.Close()
				c := &queryChecker[K, V]{t: t, ctx: ctx, subj: subj, oracle: oracle}
				var top K
				top--
				keys := make([]K, size)
				for i := range keys {
					switch r.IntN(8) {
					case 0:
						keys[i] = K(r.Uint64N(1000)) // dense near 0
					case 1:
						keys[i] = top - K(r.Uint64N(1000)) // dense near the top
					default:
						keys[i] = K(r.Uint64())
					}
				}
				vals := make([]V, size)
				for i, k := range keys {
					vals[i] = V(uint64(k)*0x9e3779b97f4a7c15 + 1)
				}
				if err := subj.Build(ctx, keys, vals); err != nil {
					t.Fatal(err)
				}
				if err := oracle.Build(ctx, keys, vals); err != nil {
					t.Fatal(err)
				}
				stored := slices.Sorted(slices.Values(keys))
				stored = slices.Compact(stored)
				for _, b := range batches {
					c.check(fmt.Sprintf("built, batch %d", b), queryBatch(r, stored, b, false))
				}
				c.check("built, sorted batch", queryBatch(r, stored, 5000, true))
				if size < 200 {
					return
				}
				// Delete a contiguous third of the keys (empty leaves in a row) and
				// every seventh key, then grow by inserts (splits, non-bulk nodes).
				third := stored[len(stored)/3 : 2*len(stored)/3]
				var del []K
				del = append(del, third...)
				for i := 0; i < len(stored); i += 7 {
					del = append(del, stored[i])
				}
				for _, tr := range []*Tree[K, V]{subj, oracle} {
					if err := tr.Delete(ctx, del); err != nil {
						t.Fatal(err)
					}
				}
				ins := make([]K, size/2)
				for i := range ins {
					ins[i] = K(r.Uint64())
				}
				iv := make([]V, len(ins))
				for i, k := range ins {
					iv[i] = V(k) ^ 77
				}
				for _, tr := range []*Tree[K, V]{subj, oracle} {
					if err := tr.Insert(ctx, ins, iv); err != nil {
						t.Fatal(err)
					}
				}
				all := append(slices.Clone(stored), ins...) // queries around deleted keys too
				for _, b := range batches {
					c.check(fmt.Sprintf("after deletes and inserts, batch %d", b), queryBatch(r, all, b, false))
				}
				c.check("after deletes and inserts, sorted batch", queryBatch(r, all, 5000, true))
			})
		}
	}
}

// TestGPUValidatedQueries runs the same comparisons with the queries forced
// into validated mode (as if a writer were running), the path concurrent query
// batches take.
func TestGPUValidatedQueries(t *testing.T) {
	dev := gputest.Device(t)
	ctx := context.Background()
	run := func(t *testing.T, subj *Tree[uint64, uint32]) {
		t.Helper()
		oracle, err := New[uint64, uint32](Options{Backend: warpkit.CPU})
		if err != nil {
			t.Fatal(err)
		}
		defer oracle.Close()
		r := rand.New(rand.NewPCG(3, 4))
		keys := make([]uint64, 50000)
		for i := range keys {
			keys[i] = r.Uint64() >> uint(r.IntN(40))
		}
		vals := make([]uint32, len(keys))
		for i, k := range keys {
			vals[i] = uint32(k) + 1
		}
		for _, tr := range []*Tree[uint64, uint32]{subj, oracle} {
			if err := tr.Build(ctx, keys, vals); err != nil {
				t.Fatal(err)
			}
			if err := tr.Delete(ctx, keys[:20000]); err != nil {
				t.Fatal(err)
			}
		}
		stored := slices.Compact(slices.Sorted(slices.Values(keys)))
		g := subj.gpu
		g.phase.BeginWrite() // queries now see a writer and validate
		defer g.phase.EndWrite()
		if fast := g.phase.BeginQuery(); fast {
			t.Fatal("a query joined as phased while a writer was marked")
		}
		c := &queryChecker[uint64, uint32]{t: t, ctx: ctx, subj: subj, oracle: oracle}
		for _, b := range []int{1, 9, 4000} {
			c.check(fmt.Sprintf("validated, batch %d", b), queryBatch(r, stored, b, b > 1000))
		}
	}
	// Sorting is for phased batches only; a tree that sorts every phased batch
	// must still validate without sorting.
	run(t, newGPUTree[uint64, uint32](t, dev, Options{SortQueries: 1}))
}
