package btree

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/gputest"
)

// TestGPUConcurrentStressMixed extends TestGPUConcurrentStress to 64-bit keys
// and to every kind of concurrent batch: while writers insert and delete their
// own keys (Insert/Delete) and mixed batches (Apply) update theirs, readers run
// Lookup, Successor, Predecessor and RangeDevice over a stable key set, and the
// mixed batches query it too. Every result that involves only stable keys is
// exact; one that may involve a writer's key must be a key of some writer with
// a value that writer stored. At the end the contents must equal the CPU
// backend built from the stable pairs and each writer's final pairs.
func TestGPUConcurrentStressMixed(t *testing.T) {
	dev := gputest.Device(t)
	t.Run("u32u32", func(t *testing.T) { testStressMixed[uint32, uint32](t, dev) })
	t.Run("u64u64", func(t *testing.T) { testStressMixed[uint64, uint64](t, dev) })
}

// stressSpace maps slot numbers x to keys and back: x = 8i is stable key i,
// x = 8i+c (c in 1..6) belongs to writer class c. 64-bit keys spread the slots
// over high bits (x<<28 | 0xabc), so that they exercise the whole key width;
// the order of keys is the order of slots.
type stressSpace[K, V warpkit.Word] struct {
	wide   bool
	rounds int // writers' values are sv(x) + 1..rounds
}

func (s stressSpace[K, V]) key(x uint64) K {
	if s.wide {
		return K(x<<28 | 0xabc)
	}
	return K(x)
}

// slot returns the slot of k and whether k is the key of a slot at all.
func (s stressSpace[K, V]) slot(k K) (uint64, bool) {
	if s.wide {
		return uint64(k) >> 28, uint64(k)&(1<<28-1) == 0xabc
	}
	return uint64(k), true
}

// sv is the value of stable slot x (and the base of a writer's values).
func (s stressSpace[K, V]) sv(x uint64) V { return V(x*0x9e3779b97f4a7c15 + 1) }

// pairOK reports whether (k, v) is a pair the tree may hold: a stable pair, or
// a writer's key with one of the values writers store.
func (s stressSpace[K, V]) pairOK(k K, v V) bool {
	x, ok := s.slot(k)
	if !ok {
		return false
	}
	if x%8 == 0 {
		return v == s.sv(x)
	}
	d := uint64(v - s.sv(x))
	return x%8 <= 6 && d >= 1 && d <= uint64(s.rounds)
}

// checkNeighbor checks the successor (or predecessor) of stable key i, of
// stable keys, found as (k, v, found).
func (s stressSpace[K, V]) checkNeighbor(pred bool, i, stable uint64, k K, v V, found bool) error {
	x, _ := s.slot(k)
	bad := func() error {
		return fmt.Errorf("neighbor(pred=%v) of stable key %d = (%d, %d, %v)", pred, s.key(8*i), k, v, found)
	}
	switch {
	case pred && i == 0:
		if found {
			return bad()
		}
		return nil
	case !pred && i == stable-1: // writers' keys lie past the last stable key
		if found && (!s.pairOK(k, v) || x <= 8*i) {
			return bad()
		}
		return nil
	}
	if !found || !s.pairOK(k, v) {
		return bad()
	}
	if pred && (x < 8*(i-1) || x >= 8*i) || !pred && (x <= 8*i || x > 8*(i+1)) {
		return bad()
	}
	return nil
}

// countOK reports whether c keys in [stable a, stable b] is possible: every
// stable key, and at most 6 writer keys between two stable ones.
func countOK(a, b uint64, c uint32) bool {
	return uint64(c) >= b-a+1 && uint64(c) <= b-a+1+6*(b-a)
}

func testStressMixed[K, V warpkit.Word](t *testing.T, dev *cuda.Device) {
	ctx := context.Background()
	tr := newGPUTree[K, V](t, dev, Options{InitialNodes: 256, Streams: 10})
	const stable = 40000
	writers, appliers, rounds := 4, 2, 40
	if testing.Short() {
		rounds = 16
	}
	var k K
	sp := stressSpace[K, V]{wide: unsafe.Sizeof(k) == 8, rounds: rounds}
	sk, sv := make([]K, stable), make([]V, stable)
	for i := range sk {
		sk[i], sv[i] = sp.key(8*uint64(i)), sp.sv(8*uint64(i))
	}
	if err := tr.Build(ctx, sk, sv); err != nil {
		t.Fatal(err)
	}
	final := make([]map[K]V, writers+appliers) // class c = index+1
	for c := range final {
		final[c] = map[K]V{}
	}
	// ownKeys draws n distinct keys of class c (slots past the stable keys too).
	ownKeys := func(r *rand.Rand, c, n int) []K {
		seen := map[K]bool{}
		var ks []K
		for range n {
			k := sp.key(uint64(r.IntN(stable+1000))*8 + uint64(c))
			if !seen[k] {
				seen[k] = true
				ks = append(ks, k)
			}
		}
		return ks
	}
	var writing sync.WaitGroup  // writers and appliers
	var stop atomic.Bool        // readers stop once writing ended
	var sawWriters atomic.Int64 // reader results that were writers' keys (logged)
	var readers sync.WaitGroup
	errs := make(chan error, 16)
	fail := func(format string, args ...any) { errs <- fmt.Errorf(format, args...) }

	for w := range writers {
		writing.Add(1)
		go func(c int) { // Insert/Delete of class c's keys
			defer writing.Done()
			r := rand.New(rand.NewPCG(uint64(c), 17))
			mine := final[c-1]
			for round := 1; round <= rounds; round++ {
				ks := ownKeys(r, c, 1+r.IntN(20000))
				var err error
				if r.IntN(3) == 0 {
					err = tr.Delete(ctx, ks)
					for _, k := range ks {
						delete(mine, k)
					}
				} else {
					vs := make([]V, len(ks))
					for i, k := range ks {
						x, _ := sp.slot(k)
						vs[i] = sp.sv(x) + V(round)
						mine[k] = vs[i]
					}
					err = tr.Insert(ctx, ks, vs)
				}
				if err != nil {
					fail("writer %d round %d: %w", c, round, err)
					return
				}
			}
		}(w + 1)
	}
	for a := range appliers {
		writing.Add(1)
		go func(c int) { // Apply: updates of class c's keys and queries of stable keys
			defer writing.Done()
			r := rand.New(rand.NewPCG(uint64(c), 18))
			mine := final[c-1]
			for round := 1; round <= rounds; round++ {
				var ops []testOp[K, V]
				for _, k := range ownKeys(r, c, 1+r.IntN(6000)) {
					if r.IntN(3) == 0 {
						ops = append(ops, testOp[K, V]{Kind: OpDelete, Key: k})
						delete(mine, k)
					} else {
						x, _ := sp.slot(k)
						v := sp.sv(x) + V(round)
						ops = append(ops, testOp[K, V]{Kind: OpInsert, Key: k, Value: v})
						mine[k] = v
					}
				}
				nq := 1 + r.IntN(6000)
				for range nq {
					i := uint64(r.IntN(stable))
					switch r.IntN(4) {
					case 0:
						ops = append(ops, testOp[K, V]{Kind: OpLookup, Key: sp.key(8 * i)})
					case 1:
						ops = append(ops, testOp[K, V]{Kind: OpSuccessor, Key: sp.key(8 * i)})
					case 2:
						ops = append(ops, testOp[K, V]{Kind: OpPredecessor, Key: sp.key(8 * i)})
					default:
						j := min(i+uint64(r.IntN(30)), stable-1)
						// [stable i, stable j]: the bound past stable key j is exclusive
						ops = append(ops, testOp[K, V]{Kind: OpCount, Key: sp.key(8 * i), Hi: sp.key(8*j) + 1})
					}
				}
				r.Shuffle(len(ops), func(i, j int) { ops[i], ops[j] = ops[j], ops[i] })
				res, err := applyOps(ctx, tr, ops)
				if err != nil {
					fail("applier %d round %d: %w", c, round, err)
					return
				}
				for n, op := range ops {
					x, _ := sp.slot(op.Key)
					i, got := x/8, res[n]
					var err error
					switch op.Kind {
					case OpLookup:
						if !got.Found || got.Value != sp.sv(x) {
							err = fmt.Errorf("lookup of stable key %d = %+v", op.Key, got)
						}
					case OpSuccessor, OpPredecessor:
						err = sp.checkNeighbor(op.Kind == OpPredecessor, i, stable, got.Key, got.Value, got.Found)
					case OpCount:
						hx, _ := sp.slot(op.Hi)
						if !countOK(i, hx/8, got.Count) {
							err = fmt.Errorf("count of stable keys %d..%d = %d", i, hx/8, got.Count)
						}
					}
					if err != nil {
						fail("applier %d round %d: %w", c, round, err)
						return
					}
				}
			}
		}(writers + a + 1)
	}

	// Readers run until writing has ended (and at least a few rounds).
	reader := func(name string, seed uint64, body func(r *rand.Rand) error) {
		readers.Add(1)
		go func() {
			defer readers.Done()
			r := rand.New(rand.NewPCG(seed, 19))
			for round := 0; round < 3 || !stop.Load(); round++ {
				if err := body(r); err != nil {
					fail("%s round %d: %w", name, round, err)
					return
				}
			}
		}()
	}
	stableQueries := func(r *rand.Rand, n int) ([]K, []uint64) {
		ks, is := make([]K, n), make([]uint64, n)
		for q := range ks {
			is[q] = uint64(r.IntN(stable))
			ks[q] = sp.key(8 * is[q])
		}
		return ks, is
	}
	reader("lookup", 1, func(r *rand.Rand) error {
		ks, is := stableQueries(r, 1+r.IntN(10000))
		vs, fs := make([]V, len(ks)), make([]bool, len(ks))
		if err := tr.Lookup(ctx, ks, vs, fs); err != nil {
			return err
		}
		for q := range ks {
			if !fs[q] || vs[q] != sp.sv(8*is[q]) {
				return fmt.Errorf("stable key %d = (%d, %v)", ks[q], vs[q], fs[q])
			}
		}
		return nil
	})
	reader("neighbor", 2, func(r *rand.Rand) error {
		ks, is := stableQueries(r, 1+r.IntN(10000))
		ks[0], is[0] = sp.key(0), 0 // both ends
		ks[len(ks)-1], is[len(ks)-1] = sp.key(8*(stable-1)), stable-1
		ok, ov, of := make([]K, len(ks)), make([]V, len(ks)), make([]bool, len(ks))
		for _, pred := range []bool{false, true} {
			var err error
			if pred {
				err = tr.Predecessor(ctx, ks, ok, ov, of)
			} else {
				err = tr.Successor(ctx, ks, ok, ov, of)
			}
			if err != nil {
				return err
			}
			for q := range ks {
				if err := sp.checkNeighbor(pred, is[q], stable, ok[q], ov[q], of[q]); err != nil {
					return err
				}
				if x, _ := sp.slot(ok[q]); of[q] && x%8 != 0 {
					sawWriters.Add(1)
				}
			}
		}
		return nil
	})
	reader("range", 3, func(r *rand.Rand) error {
		// RangeDevice with fixed windows large enough for any outcome: query q
		// covers stable keys a..a+span (span <= 20), at most 7*span+1 keys.
		const span, window = 20, 7*20 + 1
		nq := 1 + r.IntN(500)
		lo, hi := make([]K, nq), make([]K, nq)
		offsets := make([]uint32, nq+1)
		as, bs := make([]uint64, nq), make([]uint64, nq)
		for q := range lo {
			as[q] = uint64(r.IntN(stable))
			bs[q] = min(as[q]+uint64(r.IntN(span+1)), stable-1)
			lo[q], hi[q] = sp.key(8*as[q]), sp.key(8*bs[q])+1 // through stable key b
			offsets[q+1] = uint32((q + 1) * window)
		}
		var s staged
		defer s.free()
		dl, err := upload(&s, dev, lo)
		if err != nil {
			return err
		}
		dh, err := upload(&s, dev, hi)
		if err != nil {
			return err
		}
		do, err := upload(&s, dev, offsets)
		if err != nil {
			return err
		}
		ok, err := scratch[K](&s, dev, nq*window)
		if err != nil {
			return err
		}
		ov, err := scratch[V](&s, dev, nq*window)
		if err != nil {
			return err
		}
		dc, err := scratch[uint32](&s, dev, nq)
		if err != nil {
			return err
		}
		if err := tr.RangeDevice(ctx, dl, dh, do, ok, ov, dc); err != nil {
			return err
		}
		keys, vals, counts := make([]K, nq*window), make([]V, nq*window), make([]uint32, nq)
		for _, e := range []error{ok.CopyToHost(keys), ov.CopyToHost(vals), dc.CopyToHost(counts)} {
			if e != nil {
				return e
			}
		}
		for q := range lo {
			c := counts[q]
			if !countOK(as[q], bs[q], c) {
				return fmt.Errorf("range of stable keys %d..%d has %d keys", as[q], bs[q], c)
			}
			nstable, prev := uint64(0), uint64(0)
			for j := range int(c) {
				k, v := keys[q*window+j], vals[q*window+j]
				x, _ := sp.slot(k)
				if !sp.pairOK(k, v) || x < 8*as[q] || x > 8*bs[q] || (j > 0 && x <= prev) {
					return fmt.Errorf("range of stable keys %d..%d: pair %d of %d is (%d, %d) after slot %d", as[q], bs[q], j, c, k, v, prev)
				}
				if x%8 == 0 {
					nstable++
				}
				prev = x
			}
			sawWriters.Add(int64(uint64(c) - nstable))
			if nstable != bs[q]-as[q]+1 {
				return fmt.Errorf("range of stable keys %d..%d holds %d of them", as[q], bs[q], nstable)
			}
		}
		return nil
	})

	writing.Wait()
	stop.Store(true)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("readers saw %d writers' keys", sawWriters.Load())

	// The final contents against the CPU backend built from what each batch
	// sequence implies.
	d := newDiffer(t, tr, 1)
	wk, wv := append([]K(nil), sk...), append([]V(nil), sv...)
	for _, m := range final {
		for k, v := range m {
			wk, wv = append(wk, k), append(wv, v)
		}
	}
	d.must(d.oracle.Build(ctx, wk, wv), "oracle build")
	d.compareAll()
}
