package btree

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/emu"
	"github.com/warpkit/warpkit/internal/gputest"
)

// The retry-limit tests corrupt a tree's device memory so that a walk
// cannot end, and check that every operation that takes the walk gives up
// with ErrRetryLimit (blink.cuh's kMaxSteps: 131072 node visits), that
// Check reports the corruption, and that the tree works again once the
// original bytes are back.
//
// The tree: 100 keys 0, 10, ..., 990 (values k+1), bulk-built: the root
// (node 0) over ten leaves, nodes 1-10, leaf node j+1 holding the keys
// [100j, 100j+100) (planBuild).

func TestEmulatedRetryLimit(t *testing.T) {
	testRetryLimit(t, emu.Device(t, emu.Options{}, "btree.cu"))
}

func TestGPURetryLimit(t *testing.T) { testRetryLimit(t, gputest.Device(t)) }

// retryDeadline bounds every call that meets a corrupted node: the
// emulation walks kMaxSteps nodes in about a second.
const retryDeadline = 60 * time.Second

func testRetryLimit(t *testing.T, dev *cuda.Device) {
	// A leaf that links to itself with its high fence (391) above its last key
	// (390) but below its sibling's low (400): keys in [391, 400) move right
	// forever (descents), and so does a walk past its last key (successor,
	// range). Every operation kind, phased and validated, meets it.
	t.Run("leaf-self-link", func(t *testing.T) {
		tr, g := retryTree(t, dev)
		restore := corruptNode(t, g, 4, func(n *hostNode) { n.Link, n.High = 4, 391 })
		expectRetryLimit(t, tr, []uint32{395}, []uint32{390}, allRetryOps)
		// A key the cycle does not reach is still answered.
		gputest.ExpectLookup(t, tr, []uint32{100, 300, 390, 990}, true, retryDeadline)
		gputest.ExpectCheckFails(t, tr, retryDeadline)
		restore()
		expectRecovered(t, tr)
	})
	// Two leaves that link to each other: leaf 5 (keys 400-490) links back
	// to leaf 4, its high fence (491) below the searched key, whose own link
	// and high (5, 400) send the key right again.
	t.Run("two-leaf-cycle", func(t *testing.T) {
		tr, g := retryTree(t, dev)
		restore := corruptNode(t, g, 5, func(n *hostNode) { n.Link, n.High = 4, 491 })
		expectRetryLimit(t, tr, []uint32{495}, []uint32{490}, []retryOp{opLookup, opValidatedLookup, opSuccessor})
		gputest.ExpectCheckFails(t, tr, retryDeadline)
		restore()
		expectRecovered(t, tr)
	})
	// The root's entry for leaf 7 (keys 600-690) points back at the root: a
	// descent of such a key is rejected and restarts from the root, again
	// and again (restarts count as visits).
	t.Run("child-to-root", func(t *testing.T) {
		tr, g := retryTree(t, dev)
		restore := corruptNode(t, g, 0, func(n *hostNode) { n.Vals[6] = 0 })
		expectRetryLimit(t, tr, []uint32{650}, []uint32{650}, []retryOp{opLookup, opValidatedLookup, opInsert})
		gputest.ExpectCheckFails(t, tr, retryDeadline)
		restore()
		expectRecovered(t, tr)
	})
}

// retryTree returns a CUDA tree holding the 100 keys described above, and
// its backend.
func retryTree(t *testing.T, dev *cuda.Device) (*Tree[uint32, uint32], *gpuTree[uint32, uint32]) {
	t.Helper()
	tr := newGPUTree[uint32, uint32](t, dev, Options{})
	keys, vals := make([]uint32, 100), make([]uint32, 100)
	for i := range keys {
		keys[i], vals[i] = uint32(10*i), uint32(10*i+1)
	}
	if err := tr.Build(context.Background(), keys, vals); err != nil {
		t.Fatal(err)
	}
	return tr, tr.gpu
}

// corruptNode rewrites node i of the pool with change applied to it and
// returns the function that writes the original bytes back.
func corruptNode[K, V warpkit.Word](t *testing.T, g *gpuTree[K, V], i int, change func(*hostNode)) (restore func()) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	nb := g.lay.NodeBytes
	orig := make([]byte, nb)
	if err := g.poolBytes(i*nb, nb).CopyToHost(orig); err != nil {
		t.Fatal(err)
	}
	n := g.lay.Decode(orig)
	change(&n)
	bad := make([]byte, nb)
	g.lay.Encode(bad, &n)
	if err := g.poolBytes(i*nb, nb).CopyFromHost(bad); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		g.mu.Lock()
		defer g.mu.Unlock()
		if err := g.poolBytes(i*nb, nb).CopyFromHost(orig); err != nil {
			t.Fatal(err)
		}
	}
}

// A retryOp runs one operation kind on the keys a cycle traps: key, whose
// descent meets it, and last, the key whose walk to the right does.
type retryOp struct {
	name string
	run  func(ctx context.Context, tr *Tree[uint32, uint32], key, last uint32) error
}

var (
	opLookup = retryOp{"phased lookup", func(ctx context.Context, tr *Tree[uint32, uint32], key, _ uint32) error {
		// Beside keys the cycle does not reach, in one batch.
		keys := []uint32{0, key, 990}
		return tr.Lookup(ctx, keys, make([]uint32, 3), make([]bool, 3))
	}}
	opValidatedLookup = retryOp{"validated lookup", func(ctx context.Context, tr *Tree[uint32, uint32], key, _ uint32) error {
		// A writer marked as running: the batch takes the generic,
		// validated path (as in TestGPUValidatedQueries).
		tr.gpu.phase.BeginWrite()
		defer tr.gpu.phase.EndWrite()
		return tr.Lookup(ctx, []uint32{key}, make([]uint32, 1), make([]bool, 1))
	}}
	opSuccessor = retryOp{"successor", func(ctx context.Context, tr *Tree[uint32, uint32], _, last uint32) error {
		return tr.Successor(ctx, []uint32{last}, make([]uint32, 1), make([]uint32, 1), make([]bool, 1))
	}}
	allRetryOps = []retryOp{
		opLookup, opValidatedLookup, opSuccessor,
		{"predecessor", func(ctx context.Context, tr *Tree[uint32, uint32], key, _ uint32) error {
			return tr.Predecessor(ctx, []uint32{key + 1}, make([]uint32, 1), make([]uint32, 1), make([]bool, 1))
		}},
		{"range", func(ctx context.Context, tr *Tree[uint32, uint32], _, last uint32) error {
			_, err := tr.Range(ctx, []uint32{last - 10}, []uint32{last + 200})
			return err
		}},
		{"validated successor", func(ctx context.Context, tr *Tree[uint32, uint32], _, last uint32) error {
			tr.gpu.phase.BeginWrite()
			defer tr.gpu.phase.EndWrite()
			return tr.Successor(ctx, []uint32{last}, make([]uint32, 1), make([]uint32, 1), make([]bool, 1))
		}},
		opInsert,
		{"delete", func(ctx context.Context, tr *Tree[uint32, uint32], key, _ uint32) error {
			return tr.Delete(ctx, []uint32{key})
		}},
		{"apply", func(ctx context.Context, tr *Tree[uint32, uint32], key, _ uint32) error {
			// A mixed batch: a lookup the cycle traps beside writes it
			// does not reach.
			ops := Ops[uint32, uint32]{
				Kinds: []OpKind{OpInsert, OpLookup, OpDelete},
				Keys:  []uint32{5, key, 7},
				Vals:  []uint32{6, 0, 0},
			}
			return tr.Apply(ctx, ops, Results[uint32, uint32]{Found: make([]bool, 3)})
		}},
	}
	opInsert = retryOp{"insert", func(ctx context.Context, tr *Tree[uint32, uint32], key, _ uint32) error {
		return tr.Insert(ctx, []uint32{key}, []uint32{key + 1})
	}}
)

// expectRetryLimit runs each op on the corrupted tree and wants
// ErrRetryLimit within the deadline.
func expectRetryLimit(t *testing.T, tr *Tree[uint32, uint32], keys, lasts []uint32, ops []retryOp) {
	t.Helper()
	ctx := context.Background()
	for _, op := range ops {
		for i, k := range keys {
			start := time.Now()
			err := gputest.Within(op.name, retryDeadline, func() error { return op.run(ctx, tr, k, lasts[i]) })
			t.Logf("%s (key %d, last %d): %v in %v", op.name, k, lasts[i], err, time.Since(start).Round(time.Millisecond))
			if !errors.Is(err, warpkit.ErrRetryLimit) {
				t.Errorf("%s of key %d on a cyclic tree: %v, want ErrRetryLimit", op.name, k, err)
			}
		}
	}
}

// expectRecovered runs every operation kind on the repaired tree (whose
// keys the failed writes may have changed only at 5, 7 and the trapped
// keys, none of them a multiple of 100) and checks it.
func expectRecovered(t *testing.T, tr *Tree[uint32, uint32]) {
	t.Helper()
	ctx := context.Background()
	if err := gputest.Within("check", retryDeadline, func() error { return tr.Check(ctx) }); err != nil {
		t.Fatalf("check after the repair: %v", err)
	}
	gputest.ExpectLookup(t, tr, []uint32{100, 390, 400, 490, 600, 650, 990}, true, retryDeadline)
	gputest.ExpectLookup(t, tr, []uint32{395, 495, 655}, false, retryDeadline)
	for _, k := range []uint32{395, 495, 655} {
		if err := gputest.Within("insert", retryDeadline, func() error { return tr.Insert(ctx, []uint32{k}, []uint32{k + 1}) }); err != nil {
			t.Fatalf("insert %d after the repair: %v", k, err)
		}
	}
	gputest.ExpectLookup(t, tr, []uint32{395, 495, 655}, true, retryDeadline)
	ok, ov, f := make([]uint32, 2), make([]uint32, 2), make([]bool, 2)
	if err := gputest.Within("successor", retryDeadline, func() error { return tr.Successor(ctx, []uint32{390, 490}, ok, ov, f) }); err != nil {
		t.Fatal(err)
	}
	if ok[0] != 395 || ok[1] != 495 || !f[0] || !f[1] {
		t.Errorf("successors of 390, 490 after the repair: %v %v", ok, f)
	}
	var r *warpkit.Ranges[uint32, uint32]
	if err := gputest.Within("range", retryDeadline, func() (err error) { r, err = tr.Range(ctx, []uint32{380}, []uint32{510}); return err }); err != nil {
		t.Fatal(err)
	}
	if want := []uint32{380, 390, 395, 400, 410, 420, 430, 440, 450, 460, 470, 480, 490, 495, 500}; fmt.Sprint(r.Keys) != fmt.Sprint(want) {
		t.Errorf("range [380, 510) after the repair: %v, want %v", r.Keys, want)
	}
	if err := gputest.Within("delete", retryDeadline, func() error { return tr.Delete(ctx, []uint32{395, 495, 655}) }); err != nil {
		t.Fatal(err)
	}
	if err := gputest.Within("check", retryDeadline, func() error { return tr.Check(ctx) }); err != nil {
		t.Fatalf("check after the repair and writes: %v", err)
	}
}
