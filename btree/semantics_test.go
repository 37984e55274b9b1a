package btree

import (
	"context"
	"errors"
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
	counts := make([]uint32, 4)
	must(tr.Count(ctx, []K{0, 2, 6, 0}, []K{top, 5, 1, 0}, counts))
	if !slices.Equal(counts, []uint32{5, 1, 0, 1}) {
		t.Fatalf("count: %v", counts)
	}
	seq, err := tr.Ascend(ctx, 1, top-1)
	must(err)
	var got []K
	for k := range seq {
		got = append(got, k)
		if len(got) == 2 {
			break // early stop is honoured
		}
	}
	if !slices.Equal(got, []K{1, 5}) {
		t.Fatalf("ascend: %v", got)
	}
	must(tr.Delete(ctx, []K{5, 5, 77, top}))
	n, err = tr.Len(ctx)
	must(err)
	if n != 3 {
		t.Fatalf("after delete: %d keys, want 3", n)
	}
	// Mixed batch on distinct keys.
	res := make([]Result[K, V], 4)
	must(tr.Apply(ctx, []Op[K, V]{
		{Kind: OpInsert, Key: 9, Value: 90},
		{Kind: OpLookup, Key: 1},
		{Kind: OpCount, Key: 0, Hi: 1},
		{Kind: OpPredecessor, Key: 1},
	}, res))
	if !res[1].Found || res[1].Value != 5 || res[2].Count != 2 || !res[3].Found || res[3].Key != 0 {
		t.Fatalf("apply: %+v", res)
	}
	if err := tr.Apply(ctx, []Op[K, V]{{Kind: 9}}, res[:1]); !errors.Is(err, warpkit.ErrInvalidArgument) {
		t.Fatalf("bad op kind: %v", err)
	}
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
