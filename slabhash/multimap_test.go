package slabhash

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/internal/gputest"
)

// entry is one pair of the multimap model; batch orders pairs by age (pairs
// inserted by one batch have no order among themselves).
type entry[V warpkit.Word] struct {
	val   V
	batch int
}

// multiModel is the oracle: each key's pairs, oldest first.
type multiModel[K, V warpkit.Word] map[K][]entry[V]

// checkOrder verifies that got lists exactly the model's values for k, in
// batch order.
func (mm multiModel[K, V]) checkOrder(k K, got []V) error {
	want := mm[k]
	if len(got) != len(want) {
		return fmt.Errorf("key %#x: %d values, model %d", uint64(k), len(got), len(want))
	}
	for i := 0; i < len(want); {
		j := i
		for j < len(want) && want[j].batch == want[i].batch {
			j++
		}
		a := make([]V, 0, j-i)
		for _, e := range want[i:j] {
			a = append(a, e.val)
		}
		b := slices.Clone(got[i:j])
		slices.Sort(a)
		slices.Sort(b)
		if !slices.Equal(a, b) {
			return fmt.Errorf("key %#x: values %v of batch %d, want %v", uint64(k), b, want[i].batch, a)
		}
		i = j
	}
	return nil
}

// multiRound runs one batch where each key gets either some inserts or one
// count, delete-one or delete-all, checks the results against the model,
// then reads the touched keys back with FindAll.
func multiRound[K, V warpkit.Word](ctx context.Context, m *MultiMap[K, V], mm multiModel[K, V], rng *rand.Rand, keys []K, n, round int, next *uint64) ([]Op, []K, []V, []Result, []uint32, error) {
	var ops []Op
	var ks []K
	var vs []V
	used := map[K]bool{}
	for len(ks) < n {
		k := keys[rng.IntN(len(keys))]
		if used[k] {
			continue
		}
		used[k] = true
		switch r := rng.IntN(10); {
		case r < 5:
			for c := 1 + rng.IntN(3); c > 0; c-- {
				*next++
				ops, ks, vs = append(ops, OpInsert), append(ks, k), append(vs, V(*next))
			}
		case r < 7:
			ops, ks, vs = append(ops, OpFind), append(ks, k), append(vs, 0)
		case r < 9:
			ops, ks, vs = append(ops, OpDelete), append(ks, k), append(vs, 0)
		default:
			ops, ks, vs = append(ops, OpDeleteAll), append(ks, k), append(vs, 0)
		}
	}
	res := make([]Result, len(ks))
	counts := make([]uint32, len(ks))
	if err := m.Apply(ctx, ops, ks, vs, res, counts); err != nil {
		return nil, nil, nil, nil, nil, err
	}
	touched := uniqueKeys(ks)
	offs, got, err := m.LookupAll(ctx, touched)
	if err != nil {
		return nil, nil, nil, nil, nil, err
	}
	after := map[K][]V{}
	for i, k := range touched {
		after[k] = got[offs[i]:offs[i+1]]
	}
	for i, k := range ks {
		have := len(mm[k])
		bad := func(what string) error {
			return fmt.Errorf("key %#x %v with %d pairs: %s (result %v, count %d)", uint64(k), ops[i], have, what, res[i], counts[i])
		}
		switch ops[i] {
		case OpInsert:
			if res[i] != Inserted {
				return nil, nil, nil, nil, nil, bad("not inserted")
			}
		case OpFind:
			if (have == 0) != (res[i] == NotFound) || counts[i] != uint32(have) {
				return nil, nil, nil, nil, nil, bad("wrong count")
			}
		case OpDelete:
			if have == 0 {
				if res[i] != NotFound {
					return nil, nil, nil, nil, nil, bad("removed from nothing")
				}
				continue
			}
			if res[i] != Removed || counts[i] != 1 {
				return nil, nil, nil, nil, nil, bad("not removed")
			}
			// The removed pair must be one of the oldest batch's.
			oldest := mm[k][0].batch
			idx := -1
			for j, e := range mm[k] {
				if e.batch == oldest && !slices.Contains(after[k], e.val) {
					idx = j
				}
			}
			if idx < 0 {
				return nil, nil, nil, nil, nil, bad("removed a pair that was not among the oldest")
			}
			mm[k] = slices.Delete(mm[k], idx, idx+1)
		case OpDeleteAll:
			if counts[i] != uint32(have) || (have == 0) != (res[i] == NotFound) {
				return nil, nil, nil, nil, nil, bad("wrong count removed")
			}
			delete(mm, k)
		}
	}
	for i, k := range ks {
		if ops[i] == OpInsert {
			mm[k] = append(mm[k], entry[V]{vs[i], round})
		}
	}
	for k, v := range after {
		if err := mm.checkOrder(k, v); err != nil {
			return nil, nil, nil, nil, nil, fmt.Errorf("after the batch: %w", err)
		}
		if len(mm[k]) == 0 {
			delete(mm, k)
		}
	}
	return ops, ks, vs, res, counts, nil
}

func multiDifferential[K, V warpkit.Word](t *testing.T, m, twin *MultiMap[K, V], rounds, n int) {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, uint64(n)))
	keys := keySpace[K](n)
	mm := multiModel[K, V]{}
	var next uint64
	for round := 0; round < rounds; round++ {
		ops, ks, vs, res, counts, err := multiRound(ctx, m, mm, rng, keys, n/2, round, &next)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if twin != nil {
			tres := make([]Result, len(ks))
			tcounts := make([]uint32, len(ks))
			if err := twin.Apply(ctx, ops, ks, vs, tres, tcounts); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res, tres) || !slices.Equal(counts, tcounts) {
				t.Fatalf("round %d: results differ from the CPU backend's", round)
			}
		}
		if round%4 == 3 {
			if err := m.Compact(ctx); err != nil {
				t.Fatal(err)
			}
		}
		total := 0
		for _, es := range mm {
			total += len(es)
		}
		if lenOf(t, m) != total {
			t.Fatalf("round %d: Len %d, model %d", round, lenOf(t, m), total)
		}
	}
	pairs := 0
	all, err := m.All(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range all {
		pairs++
		found := false
		for _, e := range mm[k] {
			found = found || e.val == v
		}
		if !found {
			t.Fatalf("All yields (%#x, %#x), not in the model", uint64(k), uint64(v))
		}
	}
	if pairs != lenOf(t, m) {
		t.Fatalf("All yields %d pairs, Len %d", pairs, lenOf(t, m))
	}
}

func runMulti[K, V warpkit.Word](t *testing.T) {
	t.Run("CPU", func(t *testing.T) {
		m, err := NewMultiMap[K, V](Options{Backend: warpkit.CPU})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		multiDifferential(t, m, nil, 12, 800)
	})
	for _, l := range layoutsFor[K, V](kindMulti) {
		t.Run("GPU-"+l.String(), func(t *testing.T) {
			dev := gputest.Device(t)
			m, err := NewMultiMap[K, V](Options{Backend: warpkit.CUDA, Device: dev, Layout: l, Buckets: 11})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			twin, err := NewMultiMap[K, V](Options{Backend: warpkit.CPU})
			if err != nil {
				t.Fatal(err)
			}
			defer twin.Close()
			multiDifferential(t, m, twin, 24, 2000)
		})
	}
}

func TestMultiMapDifferential(t *testing.T) {
	t.Run("32x32", func(t *testing.T) { runMulti[uint32, uint32](t) })
	t.Run("32x64", func(t *testing.T) { runMulti[uint32, uint64](t) })
	t.Run("64x32", func(t *testing.T) { runMulti[uint64, uint32](t) })
	t.Run("64x64", func(t *testing.T) { runMulti[uint64, uint64](t) })
}
