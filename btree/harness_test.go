package btree

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/warpkit/warpkit"
)

// differ runs random batches on a tree under test and on a CPU oracle and
// compares every result, then the whole contents.
type differ[K, V warpkit.Word] struct {
	t      *testing.T
	ctx    context.Context
	subj   *Tree[K, V]
	oracle *Tree[K, V]
	r      *rand.Rand
	maxKey K
	round  int
}

func newDiffer[K, V warpkit.Word](t *testing.T, subj *Tree[K, V], seed uint64) *differ[K, V] {
	oracle, err := New[K, V](Options{Backend: warpkit.CPU})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { oracle.Close() })
	var mk K
	mk--
	return &differ[K, V]{t: t, ctx: context.Background(), subj: subj, oracle: oracle, r: rand.New(rand.NewPCG(seed, 99)), maxKey: mk}
}

// key draws from a dense range near 0, a dense range near the maximum, or the
// whole range, so batches repeat keys and reach both ends.
func (d *differ[K, V]) key() K {
	switch d.r.IntN(4) {
	case 0:
		return K(d.r.Uint64N(4000))
	case 1:
		return d.maxKey - K(d.r.Uint64N(4000))
	default:
		return K(d.r.Uint64())
	}
}

// value is a function of the key and the round, so a key repeated within a
// batch carries one value and the result is defined.
func (d *differ[K, V]) value(k K) V {
	return V(uint64(k)*0x9e3779b97f4a7c15 + uint64(d.round))
}

func (d *differ[K, V]) keys(n int) []K {
	ks := make([]K, n)
	for i := range ks {
		ks[i] = d.key()
	}
	if n > 2 {
		ks[0], ks[1] = 0, d.maxKey
	}
	return ks
}

// present returns n keys sampled from the oracle's contents (or random keys).
func (d *differ[K, V]) present(n int) []K {
	all := d.contents(d.oracle)
	ks := d.keys(n)
	if len(all.keys) > 0 {
		for i := range ks {
			if i%2 == 0 {
				ks[i] = all.keys[d.r.IntN(len(all.keys))]
			}
		}
	}
	return ks
}

type pairs[K, V warpkit.Word] struct {
	keys []K
	vals []V
}

func (d *differ[K, V]) contents(tr *Tree[K, V]) pairs[K, V] {
	d.t.Helper()
	if tr.gpu != nil {
		k, v, err := tr.gpu.pairs(d.ctx)
		if err != nil {
			d.t.Fatalf("round %d: %v", d.round, err)
		}
		return pairs[K, V]{k, v}
	}
	seq, err := tr.All(d.ctx)
	if err != nil {
		d.t.Fatal(err)
	}
	var p pairs[K, V]
	for k, v := range seq {
		p.keys = append(p.keys, k)
		p.vals = append(p.vals, v)
	}
	return p
}

func (d *differ[K, V]) must(err error, what string) {
	d.t.Helper()
	if err != nil {
		d.t.Fatalf("round %d %s: %v", d.round, what, err)
	}
}

func (d *differ[K, V]) compareAll() {
	d.t.Helper()
	a, b := d.contents(d.subj), d.contents(d.oracle)
	if !slices.Equal(a.keys, b.keys) || !slices.Equal(a.vals, b.vals) {
		d.t.Fatalf("round %d: contents differ: %d pairs vs oracle %d (%s)", d.round, len(a.keys), len(b.keys), firstDiff(a, b))
	}
	n, err := d.subj.Len(d.ctx)
	d.must(err, "len")
	if n != len(b.keys) {
		d.t.Fatalf("round %d: Len %d, oracle %d", d.round, n, len(b.keys))
	}
}

func firstDiff[K, V warpkit.Word](a, b pairs[K, V]) string {
	for i := range min(len(a.keys), len(b.keys)) {
		if a.keys[i] != b.keys[i] || a.vals[i] != b.vals[i] {
			return fmt.Sprintf("at %d: (%d,%d) vs (%d,%d)", i, a.keys[i], a.vals[i], b.keys[i], b.vals[i])
		}
	}
	return "one is a prefix of the other"
}

// step runs one random batch on both trees and compares the results.
func (d *differ[K, V]) step() {
	d.round++
	ctx := d.ctx
	n := 1 + d.r.IntN(3000)
	switch op := d.r.IntN(9); op {
	case 0, 1, 2:
		ks := d.keys(n)
		vs := make([]V, n)
		for i, k := range ks {
			vs[i] = d.value(k)
		}
		d.must(d.subj.Insert(ctx, ks, vs), "insert")
		d.must(d.oracle.Insert(ctx, ks, vs), "oracle insert")
	case 3:
		ks := d.present(n)
		d.must(d.subj.Delete(ctx, ks), "delete")
		d.must(d.oracle.Delete(ctx, ks), "oracle delete")
	case 4:
		ks := d.present(n)
		v1, v2 := make([]V, n), make([]V, n)
		f1, f2 := make([]bool, n), make([]bool, n)
		d.must(d.subj.Lookup(ctx, ks, v1, f1), "lookup")
		d.must(d.oracle.Lookup(ctx, ks, v2, f2), "oracle lookup")
		for i := range ks {
			if f1[i] != f2[i] || v1[i] != v2[i] {
				d.t.Fatalf("round %d: lookup %d = (%d,%v), oracle (%d,%v)", d.round, ks[i], v1[i], f1[i], v2[i], f2[i])
			}
		}
	case 5:
		ks := d.present(n)
		for _, pred := range []bool{false, true} {
			k1, k2 := make([]K, n), make([]K, n)
			v1, v2 := make([]V, n), make([]V, n)
			f1, f2 := make([]bool, n), make([]bool, n)
			if pred {
				d.must(d.subj.Predecessor(ctx, ks, k1, v1, f1), "predecessor")
				d.must(d.oracle.Predecessor(ctx, ks, k2, v2, f2), "oracle predecessor")
			} else {
				d.must(d.subj.Successor(ctx, ks, k1, v1, f1), "successor")
				d.must(d.oracle.Successor(ctx, ks, k2, v2, f2), "oracle successor")
			}
			for i := range ks {
				if f1[i] != f2[i] || k1[i] != k2[i] || v1[i] != v2[i] {
					d.t.Fatalf("round %d: neighbor(pred=%v) of %d = (%d,%d,%v), oracle (%d,%d,%v)", d.round, pred, ks[i], k1[i], v1[i], f1[i], k2[i], v2[i], f2[i])
				}
			}
		}
	case 6, 7:
		n = 1 + d.r.IntN(300)
		lo, hi := d.present(n), make([]K, n)
		for i := range lo {
			switch d.r.IntN(4) {
			case 0:
				hi[i] = lo[i] - K(d.r.Uint64N(10)) // often lo > hi, sometimes lo == hi
			case 1:
				hi[i] = d.maxKey // to the end (the largest key excluded): many leaves
			default:
				span := K(d.r.Uint64N(uint64(d.maxKey)/uint64(1+d.r.IntN(100000)) + 1))
				hi[i] = lo[i] + span
				if hi[i] < lo[i] {
					hi[i] = d.maxKey
				}
			}
		}
		r1, err := d.subj.Range(ctx, lo, hi)
		d.must(err, "range")
		r2, err := d.oracle.Range(ctx, lo, hi)
		d.must(err, "oracle range")
		if !slices.Equal(r1.Offsets, r2.Offsets) || !slices.Equal(r1.Keys, r2.Keys) || !slices.Equal(r1.Vals, r2.Vals) {
			d.t.Fatalf("round %d: range results differ (%d vs %d pairs)", d.round, len(r1.Keys), len(r2.Keys))
		}
		c1 := make([]uint32, n)
		d.must(d.subj.Count(ctx, lo, hi, c1), "count")
		for i := range c1 {
			if int(c1[i]) != r2.Count(i) {
				d.t.Fatalf("round %d: count [%d,%d) = %d, want %d", d.round, lo[i], hi[i], c1[i], r2.Count(i))
			}
		}
	case 8:
		d.mixed(n)
	}
}

// mixed runs a mixed batch whose updates touch a set U of distinct keys and
// whose queries are chosen so that §5.6 defines their results: they involve no
// key of U. Results must equal the oracle's before the batch; afterwards the
// contents must equal the oracle's after applying the updates.
func (d *differ[K, V]) mixed(n int) {
	ctx := d.ctx
	upd := map[K]bool{}
	var ops []testOp[K, V]
	for _, k := range d.present(n / 2) {
		if upd[k] {
			continue
		}
		upd[k] = true
		if d.r.IntN(2) == 0 {
			ops = append(ops, testOp[K, V]{Kind: OpInsert, Key: k, Value: d.value(k)})
		} else {
			ops = append(ops, testOp[K, V]{Kind: OpDelete, Key: k})
		}
	}
	u := make([]K, 0, len(upd))
	for k := range upd {
		u = append(u, k)
	}
	slices.Sort(u)
	// touches reports whether U has a key in [a, b).
	touches := func(a, b K) bool {
		if a >= b {
			return false
		}
		i := sort.Search(len(u), func(i int) bool { return u[i] >= a })
		return i < len(u) && u[i] < b
	}
	queries := d.present(n)
	var qops []testOp[K, V]
	for _, q := range queries {
		var op testOp[K, V]
		switch d.r.IntN(4) {
		case 0:
			op = testOp[K, V]{Kind: OpLookup, Key: q}
			if upd[q] {
				continue
			}
		case 1:
			op = testOp[K, V]{Kind: OpSuccessor, Key: q}
		case 2:
			op = testOp[K, V]{Kind: OpPredecessor, Key: q}
		case 3:
			op = testOp[K, V]{Kind: OpCount, Key: q, Hi: q + K(d.r.Uint64N(1<<20))}
			if op.Hi < q {
				op.Hi = d.maxKey
			}
		}
		qops = append(qops, op)
	}
	want, err := applyOps(ctx, d.oracle, qops)
	d.must(err, "oracle queries")
	// Keep the queries whose answer interval avoids U.
	keep := qops[:0]
	var keepWant []testResult[K, V]
	for i, op := range qops {
		ok := true
		switch op.Kind {
		case OpSuccessor: // U must avoid [Key+1, the answer or the largest key]
			end := d.maxKey
			if want[i].Found {
				end = want[i].Key
			}
			ok = op.Key == d.maxKey || !touches(op.Key+1, end) && !upd[end]
		case OpPredecessor: // U must avoid [the answer or 0, Key)
			start := K(0)
			if want[i].Found {
				start = want[i].Key
			}
			ok = op.Key == 0 || !touches(start, op.Key)
		case OpCount:
			ok = !touches(op.Key, op.Hi)
		}
		if ok {
			keep = append(keep, op)
			keepWant = append(keepWant, want[i])
		}
	}
	all := append(slices.Clone(ops), keep...)
	perm := d.r.Perm(len(all))
	shuffled := make([]testOp[K, V], len(all))
	where := make([]int, len(all))
	for i, p := range perm {
		shuffled[p] = all[i]
		where[i] = p
	}
	got, err := applyOps(ctx, d.subj, shuffled)
	d.must(err, "apply")
	for i := range keep {
		g, w := got[where[len(ops)+i]], keepWant[i]
		if g != w {
			d.t.Fatalf("round %d: mixed %v(%d, hi %d) = %+v, want %+v", d.round, keep[i].Kind, keep[i].Key, keep[i].Hi, g, w)
		}
	}
	_, err = applyOps(ctx, d.oracle, ops)
	d.must(err, "oracle updates")
}

// testOp is one element of a mixed batch as the tests write them; toOps
// turns a list of them into the parallel slices Apply takes.
type testOp[K, V warpkit.Word] struct {
	Kind  OpKind
	Key   K
	Value V
	Hi    K
}

// testResult is one element's results, gathered from Results.
type testResult[K, V warpkit.Word] struct {
	Found bool
	Key   K
	Value V
	Count uint32
}

func toOps[K, V warpkit.Word](list []testOp[K, V]) Ops[K, V] {
	n := len(list)
	o := Ops[K, V]{Kinds: make([]OpKind, n), Keys: make([]K, n), Vals: make([]V, n), His: make([]K, n)}
	for i, op := range list {
		o.Kinds[i], o.Keys[i], o.Vals[i], o.His[i] = op.Kind, op.Key, op.Value, op.Hi
	}
	return o
}

// newResults returns Results with every field wanted.
func newResults[K, V warpkit.Word](n int) Results[K, V] {
	return Results[K, V]{Found: make([]bool, n), Keys: make([]K, n), Vals: make([]V, n), Counts: make([]uint32, n)}
}

func (r Results[K, V]) at(i int) testResult[K, V] {
	return testResult[K, V]{Found: r.Found[i], Key: r.Keys[i], Value: r.Vals[i], Count: r.Counts[i]}
}

// applyOps runs list as one Apply batch on tr and returns every result.
func applyOps[K, V warpkit.Word](ctx context.Context, tr *Tree[K, V], list []testOp[K, V]) ([]testResult[K, V], error) {
	res := newResults[K, V](len(list))
	if err := tr.Apply(ctx, toOps(list), res); err != nil {
		return nil, err
	}
	out := make([]testResult[K, V], len(list))
	for i := range out {
		out[i] = res.at(i)
	}
	return out, nil
}

// runDiff runs rounds batches and compares the contents every few rounds and
// at the end.
func runDiff[K, V warpkit.Word](t *testing.T, subj *Tree[K, V], seed uint64, rounds int) {
	d := newDiffer(t, subj, seed)
	for i := 0; i < rounds; i++ {
		d.step()
		if i%8 == 7 {
			d.compareAll()
		}
	}
	d.compareAll()
	d.must(subj.Compact(d.ctx), "compact")
	d.must(d.oracle.Compact(d.ctx), "oracle compact")
	d.compareAll()
}
