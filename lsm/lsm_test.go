package lsm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/kernelgen/ptxcheck"
	"github.com/warpkit/warpkit/internal/sorteddict/dicttest"
)

func TestPTXUpToDate(t *testing.T) { ptxcheck.Check(t, "lsm.ptx") }

var _ dicttest.Dict[uint32, uint64] = (*LSM[uint32, uint64])(nil)

func newCPUTest[K, V warpkit.Word](t *testing.T, b int) *LSM[K, V] {
	t.Helper()
	l, err := New[K, V](Options{Backend: warpkit.CPU, BatchSize: b})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestCPUDifferential(t *testing.T) {
	cases := []struct {
		b     int
		space uint64
		del   float64
	}{{1, 16, 0.3}, {3, 40, 0.25}, {8, 200, 0.4}, {64, 1 << 12, 0.1}, {16, 1 << 40, 0.2}}
	steps := 40
	if testing.Short() {
		steps = 15
	}
	for _, c := range cases {
		for _, cleanup := range []bool{false, true} {
			name := fmt.Sprintf("b=%d/space=%d/cleanup=%v", c.b, c.space, cleanup)
			w := dicttest.Workload{Space: c.space, DeleteFrac: c.del}
			t.Run(name+"/k32v32", func(t *testing.T) { cpuRun[uint32, uint32](t, c.b, w, steps, cleanup) })
			t.Run(name+"/k32v64", func(t *testing.T) { cpuRun[uint32, uint64](t, c.b, w, steps, cleanup) })
			t.Run(name+"/k64v32", func(t *testing.T) { cpuRun[uint64, uint32](t, c.b, w, steps, cleanup) })
			t.Run(name+"/k64v64", func(t *testing.T) { cpuRun[uint64, uint64](t, c.b, w, steps, cleanup) })
		}
	}
}

func cpuRun[K, V warpkit.Word](t *testing.T, b int, w dicttest.Workload, steps int, cleanup bool) {
	l := newCPUTest[K, V](t, b)
	var between func(int) error
	if cleanup {
		between = func(step int) error {
			if step%3 != 2 {
				return nil
			}
			return l.Compact(context.Background())
		}
	}
	o := dicttest.Run[K, V](t, l, uint64(b)*7919+w.Space, w, steps, 3*b+5, 64, between)
	checkShape(t, l, o.Len())
}

// checkShape verifies the level invariants: sizes b·2^i for the set bits of
// r, a staging run shorter than b, each run sorted, and no fewer entries
// resident than live keys.
func checkShape[K, V warpkit.Word](t *testing.T, l *LSM[K, V], live int) {
	t.Helper()
	sn, err := l.impl.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, lv := range sn.state.levels() {
		ks := sn.keys[lv]
		if len(ks) != sn.state.b<<lv {
			t.Fatalf("level %d holds %d entries, want %d", lv, len(ks), sn.state.b<<lv)
		}
		for i := 1; i < len(ks); i++ {
			if ks[i] < ks[i-1] {
				t.Fatalf("level %d unsorted at %d", lv, i)
			}
		}
		total += len(ks)
	}
	if len(sn.stageK) != sn.state.s || sn.state.s >= sn.state.b || !slices.IsSorted(sn.stageK) {
		t.Fatalf("staging run of %d entries (state %d, b %d), sorted %v", len(sn.stageK), sn.state.s, sn.state.b, slices.IsSorted(sn.stageK))
	}
	total += sn.state.s
	if total != sn.state.resident() || total < live {
		t.Fatalf("%d entries resident, state says %d, %d live", total, sn.state.resident(), live)
	}
}

func TestCPUBatchSemantics(t *testing.T) {
	ctx := context.Background()
	l := newCPUTest[uint32, uint32](t, 4)
	mx := ^uint32(0)
	// Within a batch: last insertion wins; insert+delete (either order) deletes.
	keys := []uint32{5, 5, 7, 9, 9, mx, 0}
	vals := []uint32{1, 2, 3, 4, 5, 6, 7}
	dels := []bool{false, false, true, false, true, false, false}
	if err := l.Update(ctx, keys, vals, dels); err != nil {
		t.Fatal(err)
	}
	keys2 := []uint32{9, 7, 7}
	if err := l.Update(ctx, keys2, []uint32{10, 11, 12}, []bool{true, false, false}); err != nil {
		t.Fatal(err)
	}
	want := map[uint32]struct {
		v  uint32
		ok bool
	}{5: {2, true}, 7: {12, true}, 9: {0, false}, mx: {6, true}, 0: {7, true}, 1: {0, false}}
	check := func(when string) {
		for k, w := range want {
			v, ok, err := l.Get(ctx, k)
			if err != nil || ok != w.ok || v != w.v {
				t.Fatalf("%s: get(%d) = %d, %v, %v; want %d, %v", when, k, v, ok, err, w.v, w.ok)
			}
		}
	}
	check("before cleanup")
	if err := l.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	check("after cleanup")
	// Cleanup keeps exactly the live entries (no padding); a later delete of
	// the largest key hides it.
	if st := statsOf(t, l); st.Resident != 4 || st.Logged != 4 || st.Batches != 1 || st.Staged != 0 {
		t.Fatalf("after cleanup: %+v", st)
	}
	if err := l.Delete(ctx, []uint32{mx, 12345}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := l.Get(ctx, mx); ok {
		t.Fatal("max key still present after delete")
	}
	var out [1]uint32
	var ov [1]uint32
	var f [1]bool
	if err := l.Predecessor(ctx, []uint32{mx}, out[:], ov[:], f[:]); err != nil || !f[0] || out[0] != 7 || ov[0] != 12 {
		t.Fatalf("predecessor(max) = %d, %d, %v, %v", out[0], ov[0], f[0], err)
	}
	if err := l.Successor(ctx, []uint32{0}, out[:], ov[:], f[:]); err != nil || !f[0] || out[0] != 5 {
		t.Fatalf("successor(0) = %d, %v, %v", out[0], f[0], err)
	}
}

// TestCPUChunkedBatchSemantics checks that a batch longer than b still
// behaves as one batch: the deletion of a key earlier in the batch than its
// insertion wins, even when the two land in different chunks.
func TestCPUChunkedBatchSemantics(t *testing.T) {
	ctx := context.Background()
	for _, b := range []int{1, 2, 3, 5} {
		l := newCPUTest[uint64, uint64](t, b)
		n := 40
		keys, vals, dels := make([]uint64, 2*n), make([]uint64, 2*n), make([]bool, 2*n)
		for i := range n {
			keys[i], dels[i] = uint64(i), i%2 == 0 // deletions first
			keys[n+i], vals[n+i] = uint64(i), uint64(100+i)
		}
		if err := l.Update(ctx, keys, vals, dels); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			v, ok, _ := l.Get(ctx, uint64(i))
			if ok != (i%2 == 1) || (ok && v != uint64(100+i)) {
				t.Fatalf("b=%d: get(%d) = %d, %v", b, i, v, ok)
			}
		}
	}
}

func TestCPUErrors(t *testing.T) {
	ctx := context.Background()
	l := newCPUTest[uint32, uint32](t, 8)
	if err := l.Update(ctx, []uint32{1, 2}, []uint32{1}, nil); !errors.Is(err, warpkit.ErrInvalidArgument) {
		t.Errorf("mismatched lengths: %v", err)
	}
	if err := l.Lookup(ctx, []uint32{1}, nil, nil); !errors.Is(err, warpkit.ErrInvalidArgument) {
		t.Errorf("mismatched lookup: %v", err)
	}
	if err := l.InsertDevice(ctx, cuda.Slice[uint32]{}, cuda.Slice[uint32]{}); !errors.Is(err, warpkit.ErrInvalidArgument) {
		t.Errorf("device slices on the CPU: %v", err)
	}
	if _, err := New[uint32, uint32](Options{Backend: warpkit.CPU, BatchSize: -1}); !errors.Is(err, warpkit.ErrInvalidArgument) {
		t.Errorf("negative batch size: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := l.Insert(cctx, []uint32{1}, []uint32{1}); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled context: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Insert(ctx, []uint32{1}, []uint32{1}); !errors.Is(err, warpkit.ErrClosed) {
		t.Errorf("insert after close: %v", err)
	}
	if err := l.Close(); !errors.Is(err, warpkit.ErrClosed) {
		t.Errorf("second close: %v", err)
	}
}

func TestCPULimits(t *testing.T) {
	l := newCPUTest[uint32, uint32](t, 1<<20)
	c := l.impl.(*cpuLSM[uint32, uint32])
	c.logged = MaxLogged - 1 // pretend: the check happens before anything is touched
	if err := l.Insert(context.Background(), []uint32{1, 2}, []uint32{1, 2}); !errors.Is(err, warpkit.ErrInvalidArgument) {
		t.Fatalf("log overflow: %v", err)
	}
	// A deletions-only batch logs nothing, so a full log does not stop it.
	c.logged = MaxLogged
	if err := l.Delete(context.Background(), []uint32{1, 2}); err != nil {
		t.Fatalf("deletions with the log full: %v", err)
	}
	if st := statsOf(t, l); st.Logged != MaxLogged || st.Staged != 2 {
		t.Fatalf("deletions-only batch: %+v, want the log untouched and two entries staged", st)
	}
	if err := l.Update(context.Background(), []uint32{1, 2}, []uint32{1, 2}, []bool{true, true}); !errors.Is(err, warpkit.ErrInvalidArgument) {
		t.Fatalf("mixed batch (of deletions) with the log full: %v, want ErrInvalidArgument", err)
	}
	c.logged = 0
	c.r, c.s = MaxResident/(1<<20), MaxResident%(1<<20)-2 // two below the limit
	if err := l.Insert(context.Background(), []uint32{1, 2, 3}, []uint32{1, 2, 3}); !errors.Is(err, warpkit.ErrInvalidArgument) {
		t.Fatalf("resident overflow: %v", err)
	}
	c.r, c.s = 0, 2
	if st := statsOf(t, l); st.Resident != 2 || st.Batches != 0 {
		t.Fatalf("stats changed by failed updates: %+v", st)
	}
}

// shortBatches inserts 3,000 one-key batches with the default batch size and
// checks that they hold 3,000 entries (the staging run), not 3,000 padded
// batches of b, and that a long batch then moves the staging run's entries
// into level 0 without losing or resurrecting any.
func shortBatches(t *testing.T, l *LSM[uint32, uint32]) {
	ctx := context.Background()
	const n = 3000
	for i := range n {
		if err := l.Insert(ctx, []uint32{uint32(2 * i)}, []uint32{uint32(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if st := statsOf(t, l); st.Resident != n || st.Staged != n || st.Batches != 0 || st.Logged != n {
		t.Fatalf("after %d one-key batches: %+v", n, st)
	}
	// Delete the first 100 keys one by one; overwrite the next 100.
	for i := range 100 {
		if err := l.Delete(ctx, []uint32{uint32(2 * i)}); err != nil {
			t.Fatal(err)
		}
		if err := l.Insert(ctx, []uint32{uint32(2 * (100 + i))}, []uint32{7}); err != nil {
			t.Fatal(err)
		}
	}
	want := func(k uint32) (uint32, bool) {
		switch i := k / 2; {
		case k%2 == 0 && i < 100:
			return 0, false
		case k%2 == 0 && i < 200:
			return 7, true
		case k%2 == 0 && i < n:
			return i, true
		case k%2 == 1 && k < 2*DefaultBatchSize:
			return k, true // the long batch's odd keys
		}
		return 0, false
	}
	long := make([]uint32, DefaultBatchSize)
	for i := range long {
		long[i] = uint32(2*i + 1)
	}
	if err := l.Insert(ctx, long, long); err != nil {
		t.Fatal(err)
	}
	if st := statsOf(t, l); st.Batches != 1 || st.Staged != n+200 || st.Resident != DefaultBatchSize+n+200 {
		t.Fatalf("after the long batch: %+v", st)
	}
	probe := make([]uint32, 0, 2*n+64)
	for k := range uint32(2*n + 64) {
		probe = append(probe, k)
	}
	vals, found := make([]uint32, len(probe)), make([]bool, len(probe))
	if err := l.Lookup(ctx, probe, vals, found); err != nil {
		t.Fatal(err)
	}
	for i, k := range probe {
		if v, ok := want(k); found[i] != ok || vals[i] != v {
			t.Fatalf("lookup(%d) = %d, %v; want %d, %v", k, vals[i], found[i], v, ok)
		}
	}
	counts := make([]uint32, 1)
	if err := l.Count(ctx, []uint32{0}, []uint32{^uint32(0)}, counts); err != nil || counts[0] != n-100+DefaultBatchSize {
		t.Fatalf("count of everything = %d, %v; want %d", counts[0], err, n-100+DefaultBatchSize)
	}
	if err := l.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	if st := statsOf(t, l); st.Resident != n-100+DefaultBatchSize || st.Staged != n-100 || st.Batches != 1 {
		t.Fatalf("after cleanup: %+v", st)
	}
	out, ov, f := make([]uint32, 1), make([]uint32, 1), make([]bool, 1)
	if err := l.Successor(ctx, []uint32{0}, out, ov, f); err != nil || !f[0] || out[0] != 1 {
		t.Fatalf("successor(0) = %d, %v, %v", out[0], f[0], err)
	}
	if err := l.Predecessor(ctx, []uint32{200}, out, ov, f); err != nil || !f[0] || out[0] != 199 {
		t.Fatalf("predecessor(200) = %d, %v, %v", out[0], f[0], err)
	}
}

func TestCPUShortBatches(t *testing.T) { shortBatches(t, newCPUTest[uint32, uint32](t, 0)) }

// statsOf returns l's Stats, failing the test on an error.
func statsOf[K, V warpkit.Word](t testing.TB, l *LSM[K, V]) Stats {
	t.Helper()
	st, err := l.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}
