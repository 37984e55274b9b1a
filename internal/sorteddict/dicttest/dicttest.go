// Package dicttest is the test kit of the sorted dictionaries: an oracle with
// the batch semantics of the GPU LSM paper (§III-A), random workloads rich in
// duplicate, deleted and boundary keys, and a checker that runs every query
// kind against a dictionary and compares each answer with the oracle.
package dicttest

import (
	"context"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/warpkit/warpkit"
)

// Dict is the host-slice API both sortedarray and lsm offer.
type Dict[K, V warpkit.Word] interface {
	Update(ctx context.Context, keys []K, vals []V, dels []bool) error
	Delete(ctx context.Context, keys []K) error
	Lookup(ctx context.Context, keys []K, vals []V, found []bool) error
	Count(ctx context.Context, lo, hi []K, counts []uint32) error
	Range(ctx context.Context, lo, hi []K) (*warpkit.Ranges[K, V], error)
	Successor(ctx context.Context, keys []K, outKeys []K, outVals []V, found []bool) error
	Predecessor(ctx context.Context, keys []K, outKeys []K, outVals []V, found []bool) error
}

// Oracle is the reference dictionary. A batch applies as one step: a key with
// any deletion in the batch is deleted; otherwise its last insertion in the
// batch wins.
type Oracle[K, V warpkit.Word] struct {
	m      map[K]V
	sorted []K
	dirty  bool
}

// NewOracle returns an empty oracle.
func NewOracle[K, V warpkit.Word]() *Oracle[K, V] { return &Oracle[K, V]{m: map[K]V{}} }

// Apply applies one mixed batch (dels may be nil: all insertions).
func (o *Oracle[K, V]) Apply(keys []K, vals []V, dels []bool) {
	deleted := map[K]bool{}
	for i, k := range keys {
		if dels != nil && dels[i] {
			deleted[k] = true
		}
	}
	for i, k := range keys {
		if deleted[k] {
			delete(o.m, k)
		} else {
			o.m[k] = vals[i]
		}
	}
	o.dirty = true
}

// Len returns the number of live keys.
func (o *Oracle[K, V]) Len() int { return len(o.m) }

func (o *Oracle[K, V]) keys() []K {
	if o.dirty || o.sorted == nil {
		o.sorted = o.sorted[:0]
		for k := range o.m {
			o.sorted = append(o.sorted, k)
		}
		slices.Sort(o.sorted)
		o.dirty = false
	}
	return o.sorted
}

// Lookup returns k's value.
func (o *Oracle[K, V]) Lookup(k K) (V, bool) { v, ok := o.m[k]; return v, ok }

// Range returns the live keys in [lo, hi) in order.
func (o *Oracle[K, V]) Range(lo, hi K) []K {
	if lo >= hi {
		return nil
	}
	ks := o.keys()
	i, _ := slices.BinarySearch(ks, lo)
	j, _ := slices.BinarySearch(ks, hi)
	return ks[i:j]
}

// Successor returns the smallest live key > k.
func (o *Oracle[K, V]) Successor(k K) (K, V, bool) {
	ks := o.keys()
	i, found := slices.BinarySearch(ks, k)
	if found {
		i++
	}
	if i == len(ks) {
		return 0, 0, false
	}
	return ks[i], o.m[ks[i]], true
}

// Predecessor returns the largest live key < k.
func (o *Oracle[K, V]) Predecessor(k K) (K, V, bool) {
	ks := o.keys()
	i, _ := slices.BinarySearch(ks, k)
	if i == 0 {
		return 0, 0, false
	}
	return ks[i-1], o.m[ks[i-1]], true
}

// Max returns the largest K.
func Max[K warpkit.Word]() K { return ^K(0) }

// Workload draws keys from Space distinct values spread over the whole key
// range (a small space gives many duplicates), with the four boundary keys 0,
// 1, max-1 and max mixed in, and deletes a DeleteFrac share of batch entries.
type Workload struct {
	Space      uint64
	DeleteFrac float64
}

// Key draws one key.
func Key[K warpkit.Word](rng *rand.Rand, w Workload) K {
	mx := Max[K]()
	switch rng.IntN(40) {
	case 0:
		return 0
	case 1:
		return 1
	case 2:
		return mx - 1
	case 3:
		return mx
	}
	stride := uint64(mx) / max(w.Space, 1)
	return K(rng.Uint64N(max(w.Space, 1)) * stride)
}

// Batch draws a mixed batch of n entries.
func Batch[K, V warpkit.Word](rng *rand.Rand, w Workload, n int) (keys []K, vals []V, dels []bool) {
	keys, vals, dels = make([]K, n), make([]V, n), make([]bool, n)
	for i := range keys {
		keys[i] = Key[K](rng, w)
		vals[i] = V(rng.Uint64())
		dels[i] = rng.Float64() < w.DeleteFrac
	}
	return
}

// Queries draws n query keys: live keys, their neighbours, random and
// boundary keys.
func Queries[K, V warpkit.Word](rng *rand.Rand, w Workload, o *Oracle[K, V], n int) []K {
	live := o.keys()
	q := make([]K, n)
	for i := range q {
		switch c := rng.IntN(4); {
		case c == 0 && len(live) > 0:
			q[i] = live[rng.IntN(len(live))]
		case c == 1 && len(live) > 0:
			q[i] = live[rng.IntN(len(live))] + K(rng.IntN(3)) - 1 // wraps at the ends, on purpose
		default:
			q[i] = Key[K](rng, w)
		}
	}
	return q
}

// Check runs nq queries of every kind against d and fails t on the first
// answer that differs from the oracle's.
func Check[K, V warpkit.Word](t testing.TB, ctx context.Context, d Dict[K, V], o *Oracle[K, V], rng *rand.Rand, w Workload, nq int) {
	t.Helper()
	if err := check(ctx, d, o, rng, w, nq); err != nil {
		t.Fatal(err)
	}
}

// garbage fills the outputs of a query before it runs, so that an output the
// query leaves unwritten (a value not zeroed for an absent key, say) shows.
func garbage[T any](xs []T, x T) {
	for i := range xs {
		xs[i] = x
	}
}

func check[K, V warpkit.Word](ctx context.Context, d Dict[K, V], o *Oracle[K, V], rng *rand.Rand, w Workload, nq int) error {
	q := Queries(rng, w, o, nq)
	vals, found := make([]V, nq), make([]bool, nq)
	garbage(vals, V(0x5a5a5a5a))
	garbage(found, true)
	if err := d.Lookup(ctx, q, vals, found); err != nil {
		return fmt.Errorf("lookup: %w", err)
	}
	for i, k := range q {
		v, ok := o.Lookup(k) // v is 0 when absent, as Lookup documents
		if found[i] != ok || vals[i] != v {
			return fmt.Errorf("lookup(%#x) = %#x, %v; want %#x, %v", k, vals[i], found[i], v, ok)
		}
	}

	lo, hi := make([]K, nq), make([]K, nq)
	for i := range lo {
		lo[i] = q[i]
		switch rng.IntN(8) {
		case 0:
			lo[i], hi[i] = 0, Max[K]() // everything
		case 1:
			hi[i] = lo[i] - K(rng.IntN(2)) // lo >= hi: empty
		case 2:
			hi[i] = lo[i] + 1 // a point (empty when lo is the largest key)
		default:
			width := rangeWidth[K](w, uint64(rng.IntN(16)))
			hi[i] = lo[i] + width
			if hi[i] < lo[i] {
				hi[i] = Max[K]()
			}
		}
	}
	counts := make([]uint32, nq)
	if err := d.Count(ctx, lo, hi, counts); err != nil {
		return fmt.Errorf("count: %w", err)
	}
	res, err := d.Range(ctx, lo, hi)
	if err != nil {
		return fmt.Errorf("range: %w", err)
	}
	if res.Len() != nq {
		return fmt.Errorf("range returned %d queries, want %d", res.Len(), nq)
	}
	for i := range lo {
		want := o.Range(lo[i], hi[i])
		if int(counts[i]) != len(want) {
			return fmt.Errorf("count(%#x, %#x) = %d, want %d", lo[i], hi[i], counts[i], len(want))
		}
		if res.Count(i) != len(want) {
			return fmt.Errorf("range(%#x, %#x) has %d pairs, want %d", lo[i], hi[i], res.Count(i), len(want))
		}
		j := 0
		for k, v := range res.Query(i) {
			wv, _ := o.Lookup(want[j])
			if k != want[j] || v != wv {
				return fmt.Errorf("range(%#x, %#x)[%d] = (%#x, %#x), want (%#x, %#x)", lo[i], hi[i], j, k, v, want[j], wv)
			}
			j++
		}
	}

	ok, ov := make([]K, nq), make([]V, nq)
	for _, dir := range []string{"successor", "predecessor"} {
		f, want := d.Successor, o.Successor
		if dir == "predecessor" {
			f, want = d.Predecessor, o.Predecessor
		}
		garbage(ok, K(0x6b6b6b6b))
		garbage(ov, V(0x7c7c7c7c))
		garbage(found, true)
		if err := f(ctx, q, ok, ov, found); err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
		for i, k := range q {
			wk, wv, wf := want(k) // 0, 0, false when there is none: the outputs are documented as 0 then
			if found[i] != wf || ok[i] != wk || ov[i] != wv {
				return fmt.Errorf("%s(%#x) = (%#x, %#x, %v), want (%#x, %#x, %v)", dir, k, ok[i], ov[i], found[i], wk, wv, wf)
			}
		}
	}
	return nil
}

// Run applies steps random batches (sizes up to maxBatch, sometimes empty or
// far larger than typical) to d and the oracle and checks nq queries of every
// kind after each step; between steps it calls between (when non-nil), e.g. a
// cleanup, and checks again.
func Run[K, V warpkit.Word](t testing.TB, d Dict[K, V], seed uint64, w Workload, steps, maxBatch, nq int, between func(step int) error) *Oracle[K, V] {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	o := NewOracle[K, V]()
	for step := 0; step < steps; step++ {
		n := rng.IntN(maxBatch + 1)
		if rng.IntN(10) == 0 {
			n = maxBatch * (2 + rng.IntN(3))
		}
		keys, vals, dels := Batch[K, V](rng, w, n)
		var err error
		switch rng.IntN(8) {
		case 0: // deletions only
			for i := range dels {
				dels[i] = true
			}
			err = d.Delete(ctx, keys)
		case 1: // insertions only
			dels = nil
			err = d.Update(ctx, keys, vals, nil)
		default:
			err = d.Update(ctx, keys, vals, dels)
		}
		if err != nil {
			t.Fatalf("step %d: update of %d: %v", step, n, err)
		}
		o.Apply(keys, vals, dels)
		if err := check(ctx, d, o, rng, w, nq); err != nil {
			t.Fatalf("step %d (batch %d, %d live): %v", step, n, o.Len(), err)
		}
		if between != nil {
			if err := between(step); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			if err := check(ctx, d, o, rng, w, nq); err != nil {
				t.Fatalf("step %d, after cleanup (%d live): %v", step, o.Len(), err)
			}
		}
	}
	return o
}

// rangeWidth returns m key strides (the distance between neighbouring keys of
// the workload), saturated at the largest key.
func rangeWidth[K warpkit.Word](w Workload, m uint64) K {
	stride := uint64(Max[K]()) / max(w.Space, 1)
	hi, lo := bits.Mul64(stride, m)
	if hi != 0 || lo > uint64(Max[K]()) {
		return Max[K]()
	}
	return K(lo)
}
