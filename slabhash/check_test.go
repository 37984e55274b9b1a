package slabhash

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/warpkit/warpkit"
)

// This file holds the test oracle: a per-key linearizability checker for
// batches whose elements ran concurrently. Keys are independent objects, so
// a batch is linearizable iff, for every key, some order of that key's
// elements explains every result the backend reported and the state it left.

// state is one key of a Map or Set.
type state[V comparable] struct {
	present bool
	val     V
}

// elem is one element of a batch as the backend reported it.
type elem[V comparable] struct {
	op  Op
	in  V      // value to insert
	res Result // reported outcome
	out V      // reported value of a find (Map)
}

// step applies one element to a key's state and returns what it should
// report.
func step[V comparable](kd kind, s state[V], e elem[V]) (state[V], Result, V) {
	var zero V
	switch e.op {
	case OpInsert:
		if s.present {
			if kd == kindMap {
				s.val = e.in
			}
			return s, Present, zero
		}
		return state[V]{true, e.in}, Inserted, zero
	case OpDelete:
		if !s.present {
			return s, NotFound, zero
		}
		return state[V]{}, Removed, zero
	default:
		if !s.present {
			return s, NotFound, zero
		}
		return s, Found, s.val
	}
}

// linearizable reports whether some order of es takes pre to post with
// every reported outcome.
func linearizable[V comparable](kd kind, pre state[V], es []elem[V], post state[V]) bool {
	used := make([]bool, len(es))
	var try func(s state[V], left int) bool
	try = func(s state[V], left int) bool {
		if left == 0 {
			return s.present == post.present && (!s.present || kd == kindSet || s.val == post.val)
		}
		for i, e := range es {
			if used[i] {
				continue
			}
			ns, r, v := step(kd, s, e)
			if r != e.res || (e.op == OpFind && kd == kindMap && r == Found && v != e.out) {
				continue
			}
			used[i] = true
			ok := try(ns, left-1)
			used[i] = false
			if ok {
				return true
			}
		}
		return false
	}
	return try(pre, len(es))
}

// checkBatch verifies a batch key by key against the model (the states
// before it) and the observed states after it, then updates the model.
func checkBatch[K, V warpkit.Word](kd kind, model map[K]V, keys []K, ops []Op, in []V, res []Result, out []V, post map[K]state[V]) error {
	byKey := map[K][]elem[V]{}
	var order []K
	for i, k := range keys {
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		e := elem[V]{op: ops[i], res: res[i]}
		if in != nil {
			e.in = in[i]
		}
		if out != nil && ops[i] == OpFind {
			e.out = out[i]
		}
		byKey[k] = append(byKey[k], e)
	}
	for _, k := range order {
		v, ok := model[k]
		pre := state[V]{ok, v}
		if !linearizable(kd, pre, byKey[k], post[k]) {
			return fmt.Errorf("key %#x: no order of %+v takes %+v to %+v", uint64(k), byKey[k], pre, post[k])
		}
		if post[k].present {
			model[k] = post[k].val
		} else {
			delete(model, k)
		}
	}
	return nil
}

// keySpace maps small indices to keys spread over the whole key range,
// including the values next to the sentinels and zero.
func keySpace[K warpkit.Word](n int) []K {
	ks := make([]K, 0, n)
	seen := map[K]bool{}
	add := func(k K) {
		if !IsReserved(k) && !seen[k] {
			seen[k] = true
			ks = append(ks, k)
		}
	}
	add(0)
	add(1)
	add(^K(0) - 2)
	add(^K(0) - 3)
	for i := uint64(1); len(ks) < n; i++ {
		z := i * 0x9e3779b97f4a7c15
		z = (z ^ z>>31) * 0xbf58476d1ce4e5b9
		add(K(z ^ z>>29))
	}
	return ks
}

// randomBatch draws a mixed batch over keys with at most maxPerKey elements
// per key (the checker tries every order of them).
func randomBatch[K, V warpkit.Word](rng *rand.Rand, keys []K, n, maxPerKey int, mix [3]int) ([]Op, []K, []V) {
	ops := make([]Op, 0, n)
	ks := make([]K, 0, n)
	vs := make([]V, 0, n)
	per := map[K]int{}
	total := mix[0] + mix[1] + mix[2]
	for len(ks) < n {
		k := keys[rng.IntN(len(keys))]
		if per[k] >= maxPerKey {
			continue
		}
		per[k]++
		r := rng.IntN(total)
		op := OpFind
		switch {
		case r < mix[0]:
			op = OpInsert
		case r < mix[0]+mix[1]:
			op = OpDelete
		}
		ops = append(ops, op)
		ks = append(ks, k)
		vs = append(vs, V(rng.Uint64()))
	}
	return ops, ks, vs
}

// TestCheckerCatchesErrors makes sure the oracle rejects the failures it
// exists to find: duplicate inserts, lost keys, stale values, wrong finds.
func TestCheckerCatchesErrors(t *testing.T) {
	k := uint32(7)
	ins := func(v uint32, r Result) elem[uint32] { return elem[uint32]{op: OpInsert, in: v, res: r} }
	cases := []struct {
		name string
		pre  state[uint32]
		es   []elem[uint32]
		post state[uint32]
		ok   bool
	}{
		{"replace", state[uint32]{}, []elem[uint32]{ins(1, Inserted), ins(2, Present)}, state[uint32]{true, 2}, true},
		{"duplicate insert", state[uint32]{}, []elem[uint32]{ins(1, Inserted), ins(2, Inserted)}, state[uint32]{true, 2}, false},
		{"stale value", state[uint32]{}, []elem[uint32]{ins(1, Inserted), ins(2, Present)}, state[uint32]{true, 1}, false},
		{"lost key", state[uint32]{}, []elem[uint32]{ins(1, Inserted)}, state[uint32]{}, false},
		{"removed nothing", state[uint32]{}, []elem[uint32]{{op: OpDelete, res: Removed}}, state[uint32]{}, false},
		{"wrong find", state[uint32]{true, 3}, []elem[uint32]{{op: OpFind, res: Found, out: 4}}, state[uint32]{true, 3}, false},
		{"find between", state[uint32]{true, 3}, []elem[uint32]{{op: OpDelete, res: Removed}, {op: OpFind, res: Found, out: 3}, ins(5, Inserted)}, state[uint32]{true, 5}, true},
	}
	for _, c := range cases {
		if got := linearizable(kindMap, c.pre, c.es, c.post); got != c.ok {
			t.Errorf("%s: linearizable = %v, want %v", c.name, got, c.ok)
		}
	}
	model := map[uint32]uint32{}
	err := checkBatch(kindMap, model, []uint32{k, k}, []Op{OpInsert, OpInsert}, []uint32{1, 2},
		[]Result{Inserted, Inserted}, nil, map[uint32]state[uint32]{k: {true, 2}})
	if err == nil {
		t.Fatal("checkBatch accepted a duplicate insert")
	}
}
