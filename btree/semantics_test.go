package btree

import (
	"context"
	"errors"
	"iter"
	"slices"
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
)

// testSemantics checks the documented behaviour of every method on one tree
// (either backend) with hand-picked cases: both ends of the key range,
// replacement, absent keys, empty and inverted ranges, Build's last-wins rule.
func testSemantics[K, V warpkit.Word](t *testing.T, tr *Tree[K, V]) {
	ctx := context.Background()
	var top K
	top--
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// Empty tree.
	n, err := tr.Len(ctx)
	must(err)
	if n != 0 {
		t.Fatalf("new tree has %d keys", n)
	}
	ok, ov, of := make([]K, 2), make([]V, 2), make([]bool, 2)
	must(tr.Successor(ctx, []K{0, top}, ok, ov, of))
	if of[0] || of[1] {
		t.Fatal("successor in an empty tree found something")
	}
	// Both ends of the key range are ordinary keys.
	keys := []K{top, 0, 5, top - 1, 1, 5}
	vals := []V{1, 2, 3, 4, 5, 6}
	must(tr.Insert(ctx, keys[:5], vals[:5]))
	must(tr.Insert(ctx, keys[5:], vals[5:])) // replace 5's value
	lv, lf := make([]V, 7), make([]bool, 7)
	must(tr.Lookup(ctx, []K{top, 0, 5, top - 1, 1, 2, top - 2}, lv, lf))
	if !slices.Equal(lf, []bool{true, true, true, true, true, false, false}) || !slices.Equal(lv, []V{1, 2, 6, 4, 5, 0, 0}) {
		t.Fatalf("lookup: %v %v", lv, lf)
	}
	sk, sv, sf := make([]K, 4), make([]V, 4), make([]bool, 4)
	must(tr.Successor(ctx, []K{0, 1, top - 1, top}, sk, sv, sf))
	if !slices.Equal(sk, []K{1, 5, top, 0}) || !slices.Equal(sf, []bool{true, true, true, false}) || sv[2] != 1 {
		t.Fatalf("successor: %v %v %v", sk, sv, sf)
	}
	must(tr.Predecessor(ctx, []K{0, 1, 5, top}, sk, sv, sf))
	if !slices.Equal(sk, []K{0, 0, 1, top - 1}) || !slices.Equal(sf, []bool{false, true, true, true}) || sv[3] != 4 {
		t.Fatalf("predecessor: %v %v %v", sk, sv, sf)
	}
	// Stored: 0, 1, 5, top-1, top. Ranges are half-open.
	testHalfOpen(t, tr)
	seq, err := tr.AscendRange(ctx, 1, top)
	must(err)
	var got []K
	for k := range seq {
		got = append(got, k)
		if len(got) == 2 {
			break // early stop is honoured
		}
	}
	if !slices.Equal(got, []K{1, 5}) {
		t.Fatalf("ascend range: %v", got)
	}
	must(tr.Delete(ctx, []K{5, 5, 77, top}))
	n, err = tr.Len(ctx)
	must(err)
	if n != 3 {
		t.Fatalf("after delete: %d keys, want 3", n)
	}
	// Mixed batch on distinct keys (stored: 0, 1, top-1).
	testApply(t, tr)
	// Build replaces everything; the last of repeated keys wins.
	must(tr.Build(ctx, []K{7, 3, 7, top}, []V{1, 2, 3, 4}))
	must(tr.Lookup(ctx, []K{7, 3, top, 0, 9, 1, 2}, lv, lf))
	if !slices.Equal(lv, []V{3, 2, 4, 0, 0, 0, 0}) || !slices.Equal(lf, []bool{true, true, true, false, false, false, false}) {
		t.Fatalf("after build: %v %v", lv, lf)
	}
	must(tr.Check(ctx))
	must(tr.Compact(ctx))
	must(tr.Check(ctx))
	// Argument errors leave the tree alone.
	if err := tr.Insert(ctx, []K{1, 2}, []V{1}); !errors.Is(err, warpkit.ErrInvalidArgument) {
		t.Fatalf("length mismatch: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := tr.Insert(cctx, []K{1}, []V{1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled context: %v", err)
	}
	n, err = tr.Len(ctx)
	must(err)
	if n != 3 {
		t.Fatalf("failed calls changed the tree: %d keys", n)
	}
	st, err := tr.Stats(ctx)
	must(err)
	if st.Backend != tr.Backend() || st.Keys != 3 || st.Height != 1 {
		t.Fatalf("stats of a tree of 3 keys: %+v", st)
	}
}

func TestCPUSemantics(t *testing.T) {
	t.Run("u32u32", func(t *testing.T) { testSemantics(t, newCPUTree[uint32, uint32](t)) })
	t.Run("u64u64", func(t *testing.T) { testSemantics(t, newCPUTree[uint64, uint64](t)) })
	t.Run("u32u64", func(t *testing.T) { testSemantics(t, newCPUTree[uint32, uint64](t)) })
	t.Run("u64u32", func(t *testing.T) { testSemantics(t, newCPUTree[uint64, uint32](t)) })
}

func newCPUTree[K, V warpkit.Word](t *testing.T) *Tree[K, V] {
	tr, err := New[K, V](Options{Backend: warpkit.CPU})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func TestCPUDifferentialHarness(t *testing.T) {
	rounds := 40
	if testing.Short() {
		rounds = 10
	}
	runDiff(t, newCPUTree[uint32, uint32](t), 1, rounds)
	runDiff(t, newCPUTree[uint64, uint64](t), 2, rounds)
}

func TestCPUBackendRefusesDeviceBuffers(t *testing.T) {
	tr := newCPUTree[uint32, uint32](t)
	if tr.Backend() != warpkit.CPU {
		t.Fatalf("backend %v", tr.Backend())
	}
	ctx := context.Background()
	var k cuda.Slice[uint32]
	var f cuda.Slice[uint8]
	if err := tr.LookupDevice(ctx, k, k, f); !errors.Is(err, warpkit.ErrInvalidArgument) {
		t.Fatalf("LookupDevice on the CPU: %v", err)
	}
	if err := tr.InsertDevice(ctx, k, k); !errors.Is(err, warpkit.ErrInvalidArgument) {
		t.Fatalf("InsertDevice on the CPU: %v", err)
	}
}

func TestCPUClose(t *testing.T) {
	tr, err := New[uint32, uint32](Options{Backend: warpkit.CPU})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := tr.Insert(ctx, []uint32{1}, []uint32{1}); !errors.Is(err, warpkit.ErrClosed) {
		t.Fatalf("insert after close: %v", err)
	}
	if _, err := tr.Len(ctx); !errors.Is(err, warpkit.ErrClosed) {
		t.Fatalf("len after close: %v", err)
	}
	if err := tr.Close(); !errors.Is(err, warpkit.ErrClosed) {
		t.Fatalf("second close: %v", err)
	}
}

// emptyView stands for a zero-length view of a real buffer: a non-zero address
// and no elements.
type emptyView struct{ addr, n int }

func (v emptyView) Len() int { return v.n }

// TestOrNullDropsEmptyViews checks the mapping ApplyDevice applies to its
// optional buffers: an empty view loses its address (the kernel then sees a
// null pointer and skips the field), a non-empty one is passed unchanged.
func TestOrNullDropsEmptyViews(t *testing.T) {
	if got := orNull(emptyView{addr: 0x7000, n: 0}); got != (emptyView{}) {
		t.Fatalf("empty view passed as %+v, want the zero value", got)
	}
	if got := orNull(emptyView{addr: 0x7000, n: 3}); got != (emptyView{addr: 0x7000, n: 3}) {
		t.Fatalf("non-empty view passed as %+v", got)
	}
	var ops DeviceOps[uint32, uint64]
	var res DeviceResults[uint32, uint64]
	if ops.kernelArgs() != ops || res.kernelArgs() != res {
		t.Fatal("kernelArgs changed a batch of zero slices")
	}
}

// testHalfOpen checks the bounds of Count, Range, CountDevice's host twin and
// the iterators on a tree holding exactly 0, 1, 5, top-1 and top (values 2, 5,
// 6, 4, 1): ranges are [lo, hi), empty when lo >= hi (hi = 0 included), and
// only AscendGreaterOrEqual (and All) reach the largest key.
func testHalfOpen[K, V warpkit.Word](t *testing.T, tr *Tree[K, V]) {
	t.Helper()
	ctx := context.Background()
	top := ^K(0)
	val := map[K]V{0: 2, 1: 5, 5: 6, top - 1: 4, top: 1}
	cases := []struct {
		lo, hi K
		want   []K
	}{
		{0, top, []K{0, 1, 5, top - 1}}, // the largest key is not below any hi
		{0, top - 1, []K{0, 1, 5}},
		{2, 5, nil},
		{2, 6, []K{5}},
		{5, 6, []K{5}},
		{1, 5, []K{1}},
		{0, 1, []K{0}},
		{top - 1, top, []K{top - 1}},
		{5, 5, nil},     // lo == hi
		{0, 0, nil},     // hi = 0
		{top, top, nil}, // lo == hi at the top
		{6, 1, nil},     // lo > hi
		{top, 0, nil},
		{1, 0, nil},
	}
	lo, hi := make([]K, len(cases)), make([]K, len(cases))
	for i, c := range cases {
		lo[i], hi[i] = c.lo, c.hi
	}
	counts := make([]uint32, len(cases))
	if err := tr.Count(ctx, lo, hi, counts); err != nil {
		t.Fatal(err)
	}
	r, err := tr.Range(ctx, lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	if r.Len() != len(cases) {
		t.Fatalf("range: %d queries answered, want %d", r.Len(), len(cases))
	}
	for i, c := range cases {
		keys, vals := r.Pairs(i)
		if int(counts[i]) != len(c.want) || r.Count(i) != len(c.want) || !slices.Equal(keys, c.want) {
			t.Fatalf("[%d, %d): count %d, range %v, want %v", c.lo, c.hi, counts[i], keys, c.want)
		}
		for j, k := range keys {
			if vals[j] != val[k] {
				t.Fatalf("[%d, %d): key %d has value %d, want %d", c.lo, c.hi, k, vals[j], val[k])
			}
		}
		seq, err := tr.AscendRange(ctx, c.lo, c.hi)
		if err != nil {
			t.Fatal(err)
		}
		if got := collect(seq); !slices.Equal(got, c.want) {
			t.Fatalf("AscendRange(%d, %d) = %v, want %v", c.lo, c.hi, got, c.want)
		}
	}
	for _, c := range []struct {
		lo   K
		want []K
	}{
		{0, []K{0, 1, 5, top - 1, top}},
		{2, []K{5, top - 1, top}},
		{top - 1, []K{top - 1, top}},
		{top, []K{top}}, // the largest key, which no half-open range holds
	} {
		seq, err := tr.AscendGreaterOrEqual(ctx, c.lo)
		if err != nil {
			t.Fatal(err)
		}
		var keys []K
		for k, v := range seq {
			if v != val[k] {
				t.Fatalf("AscendGreaterOrEqual(%d): key %d has value %d, want %d", c.lo, k, v, val[k])
			}
			keys = append(keys, k)
		}
		if !slices.Equal(keys, c.want) {
			t.Fatalf("AscendGreaterOrEqual(%d) = %v, want %v", c.lo, keys, c.want)
		}
	}
	seq, err := tr.All(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := collect(seq); !slices.Equal(got, []K{0, 1, 5, top - 1, top}) {
		t.Fatalf("All = %v", got)
	}
}

func collect[K, V any](seq iter.Seq2[K, V]) []K {
	var keys []K
	for k := range seq {
		keys = append(keys, k)
	}
	return keys
}

// testApply checks Apply's parallel slices on a tree holding exactly 0, 1 and
// top-1 (values 2, 5 and 4): every result field of every kind, optional fields
// left nil, and the length checks, which refuse a batch before any of it runs.
// It leaves the tree holding 0, 1, 9 (value 90) and top-1.
func testApply[K, V warpkit.Word](t *testing.T, tr *Tree[K, V]) {
	t.Helper()
	ctx := context.Background()
	top := ^K(0)
	ops := Ops[K, V]{
		Kinds: []OpKind{OpInsert, OpLookup, OpLookup, OpCount, OpCount, OpCount, OpCount, OpPredecessor, OpSuccessor, OpSuccessor, OpDelete},
		Keys:  []K{9, 1, 77, 0, 0, 1, 5, 1, top - 2, top - 1, 100},
		Vals:  []V{90, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		His:   []K{0, 0, 0, 1, 2, 1, 0, 0, 0, 0, 0},
	}
	res := newResults[K, V](len(ops.Kinds))
	for i := range res.Counts { // every field is written, zeros included
		res.Found[i], res.Keys[i], res.Vals[i], res.Counts[i] = true, 3, 3, 3
	}
	if err := tr.Apply(ctx, ops, res); err != nil {
		t.Fatal(err)
	}
	want := []testResult[K, V]{
		{},                                    // insert
		{Found: true, Key: 1, Value: 5},       // lookup
		{},                                    // absent lookup
		{Count: 1},                            // [0, 1)
		{Count: 2},                            // [0, 2)
		{},                                    // [1, 1)
		{},                                    // [5, 0)
		{Found: true, Key: 0, Value: 2},       // predecessor of 1
		{Found: true, Key: top - 1, Value: 4}, // successor of top-2
		{},                                    // successor of top-1: none
		{},                                    // delete of an absent key
	}
	for i, w := range want {
		if got := res.at(i); got != w {
			t.Fatalf("apply: element %d (%v %d) = %+v, want %+v", i, ops.Kinds[i], ops.Keys[i], got, w)
		}
	}
	mustHave := func(what string, key K, v V, ok bool) {
		t.Helper()
		vs, fs := make([]V, 1), make([]bool, 1)
		if err := tr.Lookup(ctx, []K{key}, vs, fs); err != nil {
			t.Fatal(err)
		}
		if fs[0] != ok || vs[0] != v {
			t.Fatalf("%s: key %d = (%d, %v), want (%d, %v)", what, key, vs[0], fs[0], v, ok)
		}
	}
	mustHave("apply's insert", 9, 90, true)

	// Optional fields: nil Vals inserts zeros, nil His counts nothing, nil
	// results are not written.
	counts := []uint32{7, 7}
	if err := tr.Apply(ctx, Ops[K, V]{Kinds: []OpKind{OpInsert, OpCount}, Keys: []K{11, 0}}, Results[K, V]{Counts: counts}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(counts, []uint32{0, 0}) {
		t.Fatalf("counts with nil His: %v", counts)
	}
	mustHave("insert with nil Vals", 11, 0, true)
	if err := tr.Apply(ctx, Ops[K, V]{Kinds: []OpKind{OpDelete}, Keys: []K{11}}, Results[K, V]{}); err != nil {
		t.Fatal(err)
	}
	mustHave("delete without results", 11, 0, false)
	if err := tr.Apply(ctx, Ops[K, V]{}, Results[K, V]{}); err != nil {
		t.Fatalf("empty batch: %v", err)
	}

	// Mismatched lengths and unknown kinds: nothing applied.
	ins := []OpKind{OpInsert, OpInsert}
	for name, c := range map[string]struct {
		ops Ops[K, V]
		res Results[K, V]
	}{
		"keys":        {Ops[K, V]{Kinds: ins, Keys: []K{12}}, Results[K, V]{}},
		"vals":        {Ops[K, V]{Kinds: ins, Keys: []K{12, 13}, Vals: []V{1}}, Results[K, V]{}},
		"empty vals":  {Ops[K, V]{Kinds: ins, Keys: []K{12, 13}, Vals: []V{}}, Results[K, V]{}},
		"his":         {Ops[K, V]{Kinds: ins, Keys: []K{12, 13}, His: []K{1, 2, 3}}, Results[K, V]{}},
		"found":       {Ops[K, V]{Kinds: ins, Keys: []K{12, 13}}, Results[K, V]{Found: make([]bool, 1)}},
		"result keys": {Ops[K, V]{Kinds: ins, Keys: []K{12, 13}}, Results[K, V]{Keys: make([]K, 3)}},
		"result vals": {Ops[K, V]{Kinds: ins, Keys: []K{12, 13}}, Results[K, V]{Vals: make([]V, 1)}},
		"counts":      {Ops[K, V]{Kinds: ins, Keys: []K{12, 13}}, Results[K, V]{Counts: make([]uint32, 0)}},
		"kind":        {Ops[K, V]{Kinds: []OpKind{OpInsert, 9}, Keys: []K{12, 13}}, Results[K, V]{}},
		"kind 255":    {Ops[K, V]{Kinds: []OpKind{255, OpInsert}, Keys: []K{12, 13}}, Results[K, V]{}},
	} {
		if err := tr.Apply(ctx, c.ops, c.res); !errors.Is(err, warpkit.ErrInvalidArgument) {
			t.Fatalf("apply with bad %s: %v, want ErrInvalidArgument", name, err)
		}
	}
	mustHave("refused batches", 12, 0, false)
	mustHave("refused batches", 13, 0, false)
}
