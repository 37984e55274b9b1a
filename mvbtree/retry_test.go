package mvbtree

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/gputest"
)

// The retry-limit tests corrupt a tree's device memory so that a walk
// cannot end, and check that every operation that takes the walk gives up
// with ErrRetryLimit (blink.cuh's kMaxSteps: 131072 node visits, version
// chain steps included), that Check reports the corruption, and that the
// tree works again once the original bytes are back.
//
// The tree: 100 keys 0, 10, ..., 990 (values k+1), bulk-built: a root over
// ten leaves, leaf j holding the keys [100j, 100j+100) (planBuild).

func TestEmulatedRetryLimit(t *testing.T) { testRetryLimit(t, emuDevice(t)) }

func TestGPURetryLimit(t *testing.T) { testRetryLimit(t, gputest.Device(t)) }

// retryDeadline bounds every call that meets a corrupted node: the
// emulation walks kMaxSteps nodes in about a second.
const retryDeadline = 60 * time.Second

func testRetryLimit(t *testing.T, dev *cuda.Device) {
	open := gpuTreeOn[uint32, uint32](dev, Options{})
	// Leaf 3 links to itself, its high fence (391) above its last key (390)
	// but below its sibling's low (400): keys in [391, 400) move right
	// forever (descents), and so does a walk past its last key (successor,
	// range). Every query kind of the latest version, phased and validated,
	// the writes, and a snapshot's lookups meet it.
	t.Run("leaf-self-link", func(t *testing.T) {
		tr := retryTree(t, open)
		leaf := retryLeaves(t, tr.gpu)[3]
		restore := corruptUnit(t, tr.gpu, leaf, func(n *hostNode) { n.Link, n.High = leaf, 391 })
		expectRetryLimit(t, "latest", tr, 395, 390, false)
		// Validated, every kind (-short: the walks of a descent and along
		// the leaves).
		var validatedOps []string
		if testing.Short() {
			validatedOps = []string{"lookup", "successor"}
		}
		expectRetryLimit(t, "latest", tr, 395, 390, true, validatedOps...)
		for _, w := range []struct {
			name string
			run  func() error
		}{
			{"insert", func() error { return tr.Insert(ctx, []uint32{395}, []uint32{396}) }},
			{"delete", func() error { return tr.Delete(ctx, []uint32{395}) }},
		} {
			err := gputest.Within(w.name, retryDeadline, w.run)
			t.Logf("%s: %v", w.name, err)
			if !errors.Is(err, warpkit.ErrRetryLimit) {
				t.Errorf("%s of key 395 on a cyclic tree: %v, want ErrRetryLimit", w.name, err)
			}
		}
		s, err := tr.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, validated := range []bool{false, true} {
			expectRetryLimit(t, "snapshot", s, 395, 390, validated, "lookup")
		}
		// With a snapshot open, the versioning kernel takes the insert.
		err = gputest.Within("insert beside a snapshot", retryDeadline, func() error { return tr.Insert(ctx, []uint32{395}, []uint32{396}) })
		t.Logf("insert beside a snapshot: %v", err)
		if !errors.Is(err, warpkit.ErrRetryLimit) {
			t.Errorf("insert of key 395 beside a snapshot on a cyclic tree: %v, want ErrRetryLimit", err)
		}
		// A key the cycle does not reach is still answered.
		gputest.ExpectLookup(t, tr, []uint32{100, 300, 390, 990}, true, retryDeadline)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		gputest.ExpectCheckFails(t, tr, retryDeadline)
		restore()
		expectRecovered(t, tr)
	})
	// The root's entry for leaf 6 (keys 600-690) names the root itself: a
	// descent of such a key rejects the child (no link or child may name
	// the root) and restarts from the root, again and again.
	t.Run("child-to-root", func(t *testing.T) {
		tr := retryTree(t, open)
		root := tr.gpu.cur.root
		restore := corruptUnit(t, tr.gpu, root, func(n *hostNode) { n.Vals[6] = uint64(root) })
		for _, validated := range []bool{false, true} {
			expectRetryLimit(t, "latest", tr, 650, 650, validated, "lookup")
		}
		err := gputest.Within("insert", retryDeadline, func() error { return tr.Insert(ctx, []uint32{655}, []uint32{656}) })
		t.Logf("insert: %v", err)
		if !errors.Is(err, warpkit.ErrRetryLimit) {
			t.Errorf("insert of key 655 on a cyclic tree: %v, want ErrRetryLimit", err)
		}
		gputest.ExpectCheckFails(t, tr, retryDeadline)
		restore()
		expectRecovered(t, tr)
	})
	// A head's version chain that leads back to the head: a snapshot's
	// reader, which walks a head's chain to the version of its stamp,
	// finds the head stamped past it again and again. The latest version
	// reads heads only and is not affected.
	t.Run("version-chain-cycle", func(t *testing.T) {
		tr := retryTree(t, open)
		s, err := tr.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		// Under CopyWhenPinned the write copies leaf 5's version, which s
		// sees, and stamps the head past s.
		if err := tr.Insert(ctx, []uint32{555}, []uint32{556}); err != nil {
			t.Fatal(err)
		}
		head := retryLeaves(t, tr.gpu)[5]
		restore := corruptUnit(t, tr.gpu, head, func(n *hostNode) {
			if n.Prev == addrNone {
				t.Fatalf("leaf 5 (%#x) has no older version after a write beside a snapshot", head)
			}
			n.Prev = head
		})
		for _, validated := range []bool{false, true} {
			expectRetryLimit(t, "snapshot", s, 550, 590, validated, "lookup", "successor")
		}
		gputest.ExpectLookup(t, tr, []uint32{550, 555, 590}, true, retryDeadline)
		gputest.ExpectCheckFails(t, tr, retryDeadline)
		restore()
		// The snapshot's view is back: 550 without 555.
		vals, found := make([]uint32, 2), make([]bool, 2)
		if err := gputest.Within("snapshot lookup", retryDeadline, func() error { return s.Lookup(ctx, []uint32{550, 555}, vals, found) }); err != nil {
			t.Fatal(err)
		}
		if !found[0] || vals[0] != 551 || found[1] {
			t.Errorf("snapshot lookup of 550, 555 after the repair: %v %v, want 551 found, 555 not", vals, found)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		expectRecovered(t, tr)
	})
}

// retryTree opens a CUDA tree holding the 100 keys described above.
func retryTree(t *testing.T, open func(testing.TB) *Tree[uint32, uint32]) *Tree[uint32, uint32] {
	t.Helper()
	tr := open(t)
	keys, vals := make([]uint32, 100), make([]uint32, 100)
	for i := range keys {
		keys[i], vals[i] = uint32(10*i), uint32(10*i+1)
	}
	if err := tr.Build(ctx, keys, vals); err != nil {
		t.Fatal(err)
	}
	return tr
}

// retryLeaves returns the addresses of the leaves, as the root's entries
// name them.
func retryLeaves[K, V warpkit.Word](t *testing.T, g *gpuTree[K, V]) []uint32 {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	b := make([]byte, g.lay.NodeBytes)
	if err := g.cur.pool.ReadUnit(ctx, g.cur.root, b); err != nil {
		t.Fatal(err)
	}
	root := g.lay.Decode(b)
	if root.Level() != 1 || root.Count() != 10 {
		t.Fatalf("root of level %d with %d entries, want a root over 10 leaves", root.Level(), root.Count())
	}
	leaves := make([]uint32, root.Count())
	for j := range leaves {
		leaves[j] = uint32(root.Vals[j])
	}
	return leaves
}

// corruptUnit rewrites the node at unit address a with change applied to
// it and returns the function that writes the original bytes back.
func corruptUnit[K, V warpkit.Word](t *testing.T, g *gpuTree[K, V], a uint32, change func(*hostNode)) (restore func()) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	pool := g.cur.pool
	orig := make([]byte, g.lay.NodeBytes)
	if err := pool.ReadUnit(ctx, a, orig); err != nil {
		t.Fatal(err)
	}
	n := g.lay.Decode(orig)
	change(&n)
	bad := make([]byte, len(orig))
	g.lay.Encode(bad, &n)
	if err := pool.WriteUnit(ctx, a, bad); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		g.mu.Lock()
		defer g.mu.Unlock()
		if err := pool.WriteUnit(ctx, a, orig); err != nil {
			t.Fatal(err)
		}
	}
}

// retryQueries are the queries of a Tree (the latest version) and of a
// Snapshot.
type retryQueries interface {
	Lookup(ctx context.Context, keys []uint32, vals []uint32, found []bool) error
	Successor(ctx context.Context, keys, outKeys []uint32, outVals []uint32, found []bool) error
	Predecessor(ctx context.Context, keys, outKeys []uint32, outVals []uint32, found []bool) error
	Count(ctx context.Context, lo, hi []uint32, counts []uint32) error
	Range(ctx context.Context, lo, hi []uint32) (*warpkit.Ranges[uint32, uint32], error)
}

// expectRetryLimit runs the query kinds named in only (all when none) on
// q and wants ErrRetryLimit within the deadline: key's descent meets the
// corruption, and so does the walk to the right of last. validated runs
// them as queries beside writers do (validateReads), otherwise phased.
func expectRetryLimit(t *testing.T, where string, q retryQueries, key, last uint32, validated bool, only ...string) {
	t.Helper()
	defer func(v bool) { validateReads = v }(validateReads)
	validateReads = validated
	one := func() ([]uint32, []uint32, []bool) { return make([]uint32, 1), make([]uint32, 1), make([]bool, 1) }
	for _, op := range []struct {
		name string
		run  func() error
	}{
		{"lookup", func() error {
			// Beside keys the corruption does not reach, in one batch.
			return q.Lookup(ctx, []uint32{0, key, 990}, make([]uint32, 3), make([]bool, 3))
		}},
		{"successor", func() error { k, v, f := one(); return q.Successor(ctx, []uint32{last}, k, v, f) }},
		{"predecessor", func() error { k, v, f := one(); return q.Predecessor(ctx, []uint32{key + 1}, k, v, f) }},
		{"count", func() error { return q.Count(ctx, []uint32{last - 10}, []uint32{last + 200}, make([]uint32, 1)) }},
		{"range", func() error { _, err := q.Range(ctx, []uint32{last - 10}, []uint32{last + 200}); return err }},
	} {
		if len(only) > 0 && !slices.Contains(only, op.name) {
			continue
		}
		name := fmt.Sprintf("%s %s (validated %v)", where, op.name, validated)
		start := time.Now()
		err := gputest.Within(name, retryDeadline, op.run)
		t.Logf("%s: %v in %v", name, err, time.Since(start).Round(time.Millisecond))
		if !errors.Is(err, warpkit.ErrRetryLimit) {
			t.Errorf("%s of key %d (last %d) on a corrupted tree: %v, want ErrRetryLimit", name, key, last, err)
		}
	}
}

// expectRecovered checks the repaired tree, writes into and reads around
// the nodes the tests corrupt (leaves 3 and 5, the root), and checks it
// again after a Vacuum.
func expectRecovered(t *testing.T, tr *Tree[uint32, uint32]) {
	t.Helper()
	if err := gputest.Within("check", retryDeadline, func() error { return tr.Check(ctx) }); err != nil {
		t.Fatalf("check after the repair: %v", err)
	}
	gputest.ExpectLookup(t, tr, []uint32{100, 390, 400, 550, 590, 650, 990}, true, retryDeadline)
	if err := gputest.Within("insert", retryDeadline, func() error { return tr.Insert(ctx, []uint32{395, 595}, []uint32{396, 596}) }); err != nil {
		t.Fatalf("insert after the repair: %v", err)
	}
	gputest.ExpectLookup(t, tr, []uint32{395, 595}, true, retryDeadline)
	ok, ov, f := make([]uint32, 2), make([]uint32, 2), make([]bool, 2)
	if err := gputest.Within("successor", retryDeadline, func() error { return tr.Successor(ctx, []uint32{390, 590}, ok, ov, f) }); err != nil {
		t.Fatal(err)
	}
	if ok[0] != 395 || ok[1] != 595 || !f[0] || !f[1] {
		t.Errorf("successors of 390, 590 after the repair: %v %v", ok, f)
	}
	var r *warpkit.Ranges[uint32, uint32]
	if err := gputest.Within("range", retryDeadline, func() (err error) { r, err = tr.Range(ctx, []uint32{380}, []uint32{410}); return err }); err != nil {
		t.Fatal(err)
	}
	if want := []uint32{380, 390, 395, 400}; !slices.Equal(r.Keys, want) {
		t.Errorf("range [380, 410) after the repair: %v, want %v", r.Keys, want)
	}
	if err := gputest.Within("delete", retryDeadline, func() error { return tr.Delete(ctx, []uint32{395, 595}) }); err != nil {
		t.Fatal(err)
	}
	if err := gputest.Within("vacuum", retryDeadline, func() error { return tr.Vacuum(ctx) }); err != nil {
		t.Fatal(err)
	}
	if err := gputest.Within("check", retryDeadline, func() error { return tr.Check(ctx) }); err != nil {
		t.Fatalf("check after the repair and writes: %v", err)
	}
}
