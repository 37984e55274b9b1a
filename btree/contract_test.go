package btree

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/ordmap"
)

// The CPU backend's map (internal/ordmap): its context-check interval and
// node degree.
const (
	ctxEvery  = ordmap.CheckEvery
	cpuDegree = ordmap.Degree
)

// calls returns one call of every method of tr but Backend and Close, each
// on valid arguments of one element. The Device methods get buffers on dev,
// or zero slices when dev is nil (enough where the closed or backend check
// refuses the call before its lengths are checked).
func calls[K, V warpkit.Word](t *testing.T, tr *Tree[K, V], dev *cuda.Device) map[string]func(ctx context.Context) error {
	ks, vs, fs, cs := []K{1}, []V{1}, []bool{false}, []uint32{0}
	var dk cuda.Slice[K]
	var dv cuda.Slice[V]
	var df, dkinds cuda.Slice[uint8]
	var dc, doff cuda.Slice[uint32]
	if dev != nil {
		dk, dv, df, dkinds = onDevice(t, dev, ks), onDevice(t, dev, vs), onDevice(t, dev, []uint8{0}), onDevice(t, dev, []uint8{uint8(OpLookup)})
		dc, doff = onDevice(t, dev, cs), onDevice(t, dev, []uint32{0, 1})
	}
	return map[string]func(ctx context.Context) error{
		"Build":       func(ctx context.Context) error { return tr.Build(ctx, ks, vs) },
		"Insert":      func(ctx context.Context) error { return tr.Insert(ctx, ks, vs) },
		"Delete":      func(ctx context.Context) error { return tr.Delete(ctx, ks) },
		"Lookup":      func(ctx context.Context) error { return tr.Lookup(ctx, ks, vs, fs) },
		"Successor":   func(ctx context.Context) error { return tr.Successor(ctx, ks, []K{0}, vs, fs) },
		"Predecessor": func(ctx context.Context) error { return tr.Predecessor(ctx, ks, []K{0}, vs, fs) },
		"Count":       func(ctx context.Context) error { return tr.Count(ctx, ks, []K{9}, cs) },
		"Range":       func(ctx context.Context) error { _, err := tr.Range(ctx, ks, []K{9}); return err },
		"AscendRange": func(ctx context.Context) error { _, err := tr.AscendRange(ctx, 1, 9); return err },
		"AscendGreaterOrEqual": func(ctx context.Context) error {
			_, err := tr.AscendGreaterOrEqual(ctx, 1)
			return err
		},
		"All": func(ctx context.Context) error { _, err := tr.All(ctx); return err },
		"Apply": func(ctx context.Context) error {
			return tr.Apply(ctx, Ops[K, V]{Kinds: []OpKind{OpInsert}, Keys: ks, Vals: vs}, Results[K, V]{})
		},
		"Len":               func(ctx context.Context) error { _, err := tr.Len(ctx); return err },
		"Stats":             func(ctx context.Context) error { _, err := tr.Stats(ctx); return err },
		"Compact":           func(ctx context.Context) error { return tr.Compact(ctx) },
		"Check":             func(ctx context.Context) error { return tr.Check(ctx) },
		"BuildDevice":       func(ctx context.Context) error { return tr.BuildDevice(ctx, dk, dv) },
		"InsertDevice":      func(ctx context.Context) error { return tr.InsertDevice(ctx, dk, dv) },
		"DeleteDevice":      func(ctx context.Context) error { return tr.DeleteDevice(ctx, dk) },
		"LookupDevice":      func(ctx context.Context) error { return tr.LookupDevice(ctx, dk, dv, df) },
		"SuccessorDevice":   func(ctx context.Context) error { return tr.SuccessorDevice(ctx, dk, dk, dv, df) },
		"PredecessorDevice": func(ctx context.Context) error { return tr.PredecessorDevice(ctx, dk, dk, dv, df) },
		"CountDevice":       func(ctx context.Context) error { return tr.CountDevice(ctx, dk, dk, dc) },
		"RangeDevice": func(ctx context.Context) error {
			return tr.RangeDevice(ctx, dk, dk, doff, dk, dv, dc)
		},
		"ApplyDevice": func(ctx context.Context) error {
			return tr.ApplyDevice(ctx, DeviceOps[K, V]{Kinds: dkinds, Keys: dk}, DeviceResults[K, V]{Found: df})
		},
	}
}

// isDevice reports whether the method named takes device slices.
func isDevice(name string) bool { return len(name) > 6 && name[len(name)-6:] == "Device" }

// testClosed closes tr and checks that every method but Backend, a second
// Close included, returns ErrClosed.
func testClosed[K, V warpkit.Word](t *testing.T, tr *Tree[K, V], dev *cuda.Device) {
	t.Helper()
	b := tr.Backend()
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for name, call := range calls(t, tr, dev) {
		if err := call(ctx); !errors.Is(err, warpkit.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
	if err := tr.Close(); !errors.Is(err, warpkit.ErrClosed) {
		t.Errorf("second Close: %v, want ErrClosed", err)
	}
	if tr.Backend() != b {
		t.Errorf("Backend after Close: %v, want %v", tr.Backend(), b)
	}
}

// testCancelledAtEntry calls every method with a cancelled context: each
// returns the context's error (the Device methods on the CPU backend
// ErrNeedsCUDA, which comes first) and nothing is applied. dev is the GPU
// tree's device (nil on the CPU).
func testCancelledAtEntry[K, V warpkit.Word](t *testing.T, tr *Tree[K, V], dev *cuda.Device) {
	t.Helper()
	ctx := context.Background()
	if err := tr.Build(ctx, []K{5, 6}, []V{50, 60}); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	for name, call := range calls(t, tr, dev) {
		err := call(cctx)
		switch {
		case isDevice(name) && tr.Backend() == warpkit.CPU:
			if !errors.Is(err, warpkit.ErrNeedsCUDA) {
				t.Errorf("%s on the CPU backend: %v, want ErrNeedsCUDA", name, err)
			}
		case !errors.Is(err, context.Canceled):
			t.Errorf("%s with a cancelled context: %v, want context.Canceled", name, err)
		}
	}
	seq, err := tr.All(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var keys []K
	for k := range seq {
		keys = append(keys, k)
	}
	if len(keys) != 2 || keys[0] != 5 || keys[1] != 6 {
		t.Fatalf("calls with a cancelled context changed the tree: %v", keys)
	}
	if err := tr.Check(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestCPUClosedTree(t *testing.T) {
	tr, err := New[uint32, uint64](Options{Backend: warpkit.CPU})
	if err != nil {
		t.Fatal(err)
	}
	testClosed(t, tr, nil)
}

func TestCPUCancelledAtEntry(t *testing.T) {
	testCancelledAtEntry(t, newCPUTree[uint64, uint32](t), nil)
}

// cancelAfter is a context whose Err turns context.Canceled at its n-th call:
// it cancels a call midway, between the checks of its loops.
type cancelAfter struct {
	context.Context
	n, calls atomic.Int64
}

func newCancelAfter(n int64) *cancelAfter {
	c := &cancelAfter{Context: context.Background()}
	c.n.Store(n)
	return c
}

func (c *cancelAfter) Err() error {
	if c.calls.Add(1) >= c.n.Load() {
		return context.Canceled
	}
	return nil
}

func (c *cancelAfter) Done() <-chan struct{} { return nil }

func (c *cancelAfter) Deadline() (time.Time, bool) { return time.Time{}, false }

// TestCPUCancelMidway cancels long CPU calls between their context checks:
// each returns context.Canceled, a write batch has applied a prefix of its
// pairs (each whole), Build and Compact leave the old tree, and the tree stays
// consistent and usable.
func TestCPUCancelMidway(t *testing.T) {
	tr := newCPUTree[uint32, uint32](t)
	ctx := context.Background()
	const n = 10 * ctxEvery
	ks := make([]uint32, n)
	for i := range ks {
		ks[i] = uint32(i) * 3
	}
	// The front checks once at entry; the third check is the insert loop's second.
	if err := tr.Insert(newCancelAfter(3), ks, ks); !errors.Is(err, context.Canceled) {
		t.Fatalf("insert: %v", err)
	}
	got, err := tr.Len(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got == 0 || got >= n {
		t.Fatalf("a cancelled insert applied %d of %d pairs, want a proper prefix", got, n)
	}
	vs, fs := make([]uint32, n), make([]bool, n)
	if err := tr.Lookup(ctx, ks, vs, fs); err != nil {
		t.Fatal(err)
	}
	for i := range ks {
		if fs[i] != (i < got) || (fs[i] && vs[i] != ks[i]) {
			t.Fatalf("after a cancelled insert of %d pairs: key %d (#%d) = (%d, %v)", got, ks[i], i, vs[i], fs[i])
		}
	}
	if err := tr.Insert(ctx, ks, ks); err != nil {
		t.Fatal(err)
	}
	// Build and Compact stopped midway keep the old contents.
	if err := tr.Build(newCancelAfter(3), ks[:ctxEvery*3], ks[:ctxEvery*3]); !errors.Is(err, context.Canceled) {
		t.Fatalf("build: %v", err)
	}
	if err := tr.Compact(newCancelAfter(3)); !errors.Is(err, context.Canceled) {
		t.Fatalf("compact: %v", err)
	}
	if got, err := tr.Len(ctx); err != nil || got != n {
		t.Fatalf("Len %d (%v) after a cancelled Build and Compact, want %d", got, err, n)
	}
	// Queries: one long range, and many short ones.
	if _, err := tr.Range(newCancelAfter(3), []uint32{0}, []uint32{^uint32(0)}); !errors.Is(err, context.Canceled) {
		t.Fatalf("range: %v", err)
	}
	if err := tr.Count(newCancelAfter(3), ks, ks, make([]uint32, n)); !errors.Is(err, context.Canceled) {
		t.Fatalf("count: %v", err)
	}
	if _, err := tr.AscendGreaterOrEqual(newCancelAfter(3), 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("ascend: %v", err)
	}
	if err := tr.Apply(newCancelAfter(3), Ops[uint32, uint32]{Kinds: make([]OpKind, n), Keys: ks}, Results[uint32, uint32]{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("apply: %v", err)
	}
	if err := tr.Check(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestCPUStats checks the CPU backend's Stats: the backend, the key count and
// the height of the Go B-tree (0 when empty, 1 for a single leaf, and within
// the bounds its node sizes allow).
func TestCPUStats(t *testing.T) {
	tr := newCPUTree[uint64, uint64](t)
	ctx := context.Background()
	st, err := tr.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Backend != warpkit.CPU || st.Keys != 0 || st.Height != 0 {
		t.Fatalf("empty tree: %+v", st)
	}
	if err := tr.Insert(ctx, []uint64{1, 2, 3}, []uint64{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if st, err = tr.Stats(ctx); err != nil || st.Height != 1 || st.Keys != 3 {
		t.Fatalf("three keys: %+v, %v", st, err)
	}
	const n = 200000
	ks := make([]uint64, n)
	for i := range ks {
		ks[i] = uint64(i) * 0x9e3779b97f4a7c15
	}
	for _, op := range []string{"insert", "build", "compact"} {
		var err error
		switch op {
		case "insert":
			err = tr.Insert(ctx, ks, ks)
		case "build":
			err = tr.Build(ctx, ks, ks)
		case "compact":
			err = tr.Compact(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		if st, err = tr.Stats(ctx); err != nil {
			t.Fatal(err)
		}
		// A node of the Go B-tree holds at most 2*cpuDegree-1 keys and, but
		// for the root (at least one key), at least cpuDegree-1; an internal
		// node has one child more than keys. So a tree of height h holds at
		// most (2*cpuDegree)^h - 1 keys and at least 2*cpuDegree^(h-1) - 1.
		lo, hi := 0, 0
		for h := 1; h < 10; h++ {
			most, least := 1, 2
			for range h {
				most *= 2 * cpuDegree
			}
			for range h - 1 {
				least *= cpuDegree
			}
			if lo == 0 && most-1 >= n {
				lo = h
			}
			if least-1 <= n {
				hi = h
			}
		}
		if st.Height < lo || st.Height > hi || st.Keys < n-3 {
			t.Fatalf("after %s of %d keys: %+v, height outside [%d, %d]", op, n, st, lo, hi)
		}
	}
}

func TestCPUDeviceMethodsNeedCUDA(t *testing.T) {
	tr := newCPUTree[uint32, uint32](t)
	for name, call := range calls(t, tr, nil) {
		if !isDevice(name) {
			continue
		}
		err := call(context.Background())
		if !errors.Is(err, warpkit.ErrNeedsCUDA) || !errors.Is(err, warpkit.ErrInvalidArgument) {
			t.Errorf("%s on the CPU backend: %v, want ErrNeedsCUDA", name, err)
		}
	}
}

// TestCPUConcurrentCalls runs writers, queries, mixed batches, Compact and
// Check on one CPU tree from several goroutines (under -race: the backend's
// own lock), then Close beside them: every call succeeds or, once Close has
// run, returns ErrClosed.
func TestCPUConcurrentCalls(t *testing.T) {
	tr, err := New[uint32, uint32](Options{Backend: warpkit.CPU})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var closed atomic.Bool
	errs := make(chan error, 64)
	done := make(chan struct{})
	var running atomic.Int32
	worker := func(w int) {
		defer running.Add(-1)
		ks, vs := make([]uint32, 500), make([]uint32, 500)
		for round := 0; ; round++ {
			for i := range ks {
				ks[i], vs[i] = uint32(i*8+w), uint32(round)
			}
			var err error
			switch (round + w) % 6 {
			case 0:
				err = tr.Insert(ctx, ks, vs)
			case 1:
				err = tr.Delete(ctx, ks[:100])
			case 2:
				_, err = tr.Range(ctx, ks[:10], ks[10:20])
			case 3:
				err = tr.Apply(ctx, Ops[uint32, uint32]{Kinds: make([]OpKind, len(ks)), Keys: ks}, newResults[uint32, uint32](len(ks)))
			case 4:
				err = tr.Compact(ctx)
			case 5:
				err = tr.Check(ctx)
			}
			if err != nil {
				if !closed.Load() || !errors.Is(err, warpkit.ErrClosed) {
					errs <- err
				}
				return
			}
			select {
			case <-done:
				return
			default:
			}
		}
	}
	for w := range 6 {
		running.Add(1)
		go worker(w)
	}
	time.Sleep(20 * time.Millisecond)
	closed.Store(true)
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	close(done)
	for running.Load() > 0 {
		time.Sleep(time.Millisecond)
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
