package mvbtree

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/gputest"
)

// The CUDA backend's tests on a GPU (and, with WARPKIT_EMULATE=1, on the
// emulation); emu_test.go runs them on the emulation in every go test.

// differentialCopyAlways runs the differential test under CopyAlways and
// fails unless some of its batches ran PlainCopy (no snapshot open).
func differentialCopyAlways(t *testing.T, dev *cuda.Device, keyRange uint64, steps int) {
	var tr *Tree[uint32, uint32]
	open := gpuTreeOn[uint32, uint32](dev, Options{Copy: CopyAlways})
	differential(t, keyRange, func(tb testing.TB) *Tree[uint32, uint32] { tr = open(tb); return tr }, 1, steps)
	if tr == nil || tr.gpu.copies.Load() == 0 {
		t.Fatal("no batch of the differential test ran PlainCopy")
	}
}

func TestGPUDifferential(t *testing.T) {
	dev := gputest.Device(t)
	t.Run("u32", func(t *testing.T) { differential(t, 1<<14, gpuTreeOn[uint32, uint32](dev, Options{}), 4, 120) })
	t.Run("u64", func(t *testing.T) { differential(t, 1<<14, gpuTreeOn[uint64, uint64](dev, Options{}), 2, 120) })
	t.Run("u32-full-range", func(t *testing.T) { differential(t, 0, gpuTreeOn[uint32, uint64](dev, Options{}), 2, 120) })
	t.Run("copy-always", func(t *testing.T) { differentialCopyAlways(t, dev, 1<<14, 120) })
	t.Run("u32-no-plain", func(t *testing.T) { // the versioning kernels where plain batches would run
		defer func(v bool) { noPlainWrites = v }(noPlainWrites)
		noPlainWrites = true
		differential(t, 1<<14, gpuTreeOn[uint32, uint32](dev, Options{}), 2, 120)
	})
}

// TestGPUValidatedReads: the differential test with every query on the
// path of queries beside writers.
func TestGPUValidatedReads(t *testing.T) {
	dev := gputest.Device(t)
	defer func(v bool) { validateReads = v }(validateReads)
	validateReads = true
	t.Run("u32", func(t *testing.T) { differential(t, 1<<14, gpuTreeOn[uint32, uint32](dev, Options{}), 2, 120) })
	t.Run("u64", func(t *testing.T) { differential(t, 1<<14, gpuTreeOn[uint64, uint64](dev, Options{}), 2, 120) })
}

func TestGPUSnapshotsBesideWriters(t *testing.T) {
	snapshotsBesideWriters(t, gpuTreeOn[uint32, uint32](gputest.Device(t), Options{})(t), 400, 50)
}

func TestGPUVersions(t *testing.T) {
	dev := gputest.Device(t)
	for _, mode := range []CopyMode{CopyWhenPinned, CopyAlways, CopyIfStale} {
		t.Run(mode.String(), func(t *testing.T) { testVersions(t, gpuTreeOn[uint64, uint64](dev, Options{Copy: mode})(t), mode) })
	}
}

func TestGPURestampAndPoison(t *testing.T) {
	dev := gputest.Device(t)
	defer func(l uint32, p bool) { restampLimit, poisonFreed = l, p }(restampLimit, poisonFreed)
	restampLimit, poisonFreed = 6, true
	differential(t, 1<<12, gpuTreeOn[uint32, uint32](dev, Options{}), 2, 120)
}

func TestGPUPoolExhausted(t *testing.T) {
	dev := gputest.Device(t)
	for _, mode := range []CopyMode{CopyWhenPinned, CopyAlways} { // CopyAlways: PlainCopy's batches run out
		t.Run(mode.String(), func(t *testing.T) {
			testPoolExhausted(t, gpuTreeOn[uint32, uint32](dev, Options{MaxPoolBytes: 2 * 1024 * 128, Copy: mode})(t))
		})
	}
}

func TestGPUDeviceMethods(t *testing.T) {
	dev := gputest.Device(t)
	testDeviceMethods(t, dev, gpuTreeOn[uint64, uint32](dev, Options{})(t))
}

func mustStats[K, V warpkit.Word](t *testing.T, tr *Tree[K, V]) Stats {
	t.Helper()
	st, err := tr.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func mustCheck[K, V warpkit.Word](t *testing.T, tr *Tree[K, V]) {
	t.Helper()
	if err := tr.Check(ctx); err != nil {
		t.Fatal(err)
	}
}

// expect compares a version's pairs with want.
func expect[K, V warpkit.Word](t *testing.T, where string, seq func(func(K, V) bool), err error, want map[K]V) {
	t.Helper()
	ks, vs := collect(seq, err)
	if len(ks) != len(want) {
		t.Fatalf("%s: %d pairs, want %d", where, len(ks), len(want))
	}
	for i, k := range ks {
		if w, ok := want[k]; !ok || vs[i] != w {
			t.Fatalf("%s: pair (%d, %d), want (%d, %d present %v)", where, k, vs[i], k, w, ok)
		}
	}
}

// testVersions follows the versions a snapshot pins through updates, its
// Close, the writers' splices and Vacuum.
func testVersions[K, V warpkit.Word](t *testing.T, tr *Tree[K, V], mode CopyMode) {
	const n = 3000
	keys, vals := make([]K, n), make([]V, n)
	v0 := map[K]V{}
	for i := range keys {
		keys[i], vals[i] = K(i*7), V(i)
		v0[keys[i]] = vals[i]
	}
	if err := tr.Insert(ctx, keys, vals); err != nil {
		t.Fatal(err)
	}
	if st := mustStats(t, tr); mode == CopyWhenPinned && st.Versions != 0 {
		t.Fatalf("no snapshot open, but %d older versions kept: %+v", st.Versions, st)
	}
	s1, err := tr.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v1 := map[K]V{}
	for k, v := range v0 {
		v1[k] = v
	}
	half, hv := keys[:n/2], make([]V, n/2)
	for i := range half {
		hv[i] = V(i + 1_000_000)
		v1[half[i]] = hv[i]
	}
	if err := tr.Insert(ctx, half, hv); err != nil {
		t.Fatal(err)
	}
	st := mustStats(t, tr)
	if st.Versions == 0 || st.PinnedVersions == 0 || (mode == CopyWhenPinned && st.PinnedVersions != st.Versions) {
		t.Fatalf("after updates beside a snapshot: %+v", st)
	}
	mustCheck(t, tr)
	expect(t, "snapshot 1", func(y func(K, V) bool) { s, err := s1.All(ctx); check(t, err); s(y) }, nil, v0)
	expect(t, "latest", func(y func(K, V) bool) { s, err := tr.All(ctx); check(t, err); s(y) }, nil, v1)

	s2, err := tr.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	third := keys[n/3 : 2*n/3]
	if err := tr.Delete(ctx, third); err != nil {
		t.Fatal(err)
	}
	v2 := map[K]V{}
	for k, v := range v1 {
		v2[k] = v
	}
	for _, k := range third {
		delete(v2, k)
	}
	expect(t, "snapshot 1 after deletes", func(y func(K, V) bool) { s, err := s1.All(ctx); check(t, err); s(y) }, nil, v0)
	expect(t, "snapshot 2", func(y func(K, V) bool) { s, err := s2.All(ctx); check(t, err); s(y) }, nil, v1)
	expect(t, "latest after deletes", func(y func(K, V) bool) { s, err := tr.All(ctx); check(t, err); s(y) }, nil, v2)
	mustCheck(t, tr)

	// Closing snapshot 1 unpins its versions; writers that change those
	// nodes splice them, Vacuum the rest.
	both := mustStats(t, tr)
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tr.Insert(ctx, half, hv); err != nil { // rewrites the nodes snapshot 1 pinned
		t.Fatal(err)
	}
	for i, k := range half { // the deleted keys among them are back
		v2[k] = hv[i]
	}
	if err := tr.Vacuum(ctx); err != nil {
		t.Fatal(err)
	}
	st = mustStats(t, tr)
	if st.Versions != st.PinnedVersions || st.RetiredPending != 0 || st.Versions >= both.Versions {
		t.Fatalf("after snapshot 1's Close and Vacuum: %+v", st)
	}
	expect(t, "snapshot 2 after vacuum", func(y func(K, V) bool) { s, err := s2.All(ctx); check(t, err); s(y) }, nil, v1)
	mustCheck(t, tr)
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tr.Vacuum(ctx); err != nil {
		t.Fatal(err)
	}
	if st := mustStats(t, tr); st.Versions != 0 || st.PinnedVersions != 0 || st.OpenSnapshots != 0 {
		t.Fatalf("every snapshot closed, after Vacuum: %+v", st)
	}
	mustCheck(t, tr)
	expect(t, "latest at the end", func(y func(K, V) bool) { s, err := tr.All(ctx); check(t, err); s(y) }, nil, v2)
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// testPoolExhausted fills a capped pool: a batch that runs out fails with
// ErrPoolExhausted, applies whole operations only, and leaves a valid tree
// and every snapshot's view intact; a Build that cannot fit changes nothing.
func testPoolExhausted(t *testing.T, tr *Tree[uint32, uint32]) {
	rng := rand.New(rand.NewPCG(5, 6))
	stored := map[uint32]uint32{}
	var failed []uint32
	batch := 2000
	if tr.gpu.opts.Copy == CopyAlways {
		batch = 200 // a copy a write: smaller batches fill the pool with nodes first
	}
	for b := 0; b < 400 && failed == nil; b++ {
		ks, vs := make([]uint32, batch), make([]uint32, batch)
		for i := range ks {
			ks[i], vs[i] = rng.Uint32(), rng.Uint32()
		}
		err := tr.Insert(ctx, ks, vs)
		switch {
		case err == nil:
			for i, k := range ks {
				stored[k] = vs[i]
			}
		case errors.Is(err, warpkit.ErrPoolExhausted):
			failed = ks
		default:
			t.Fatal(err)
		}
	}
	if failed == nil {
		t.Fatalf("%d-key batches never filled a pool of 2048 nodes", batch)
	}
	if tr.gpu.opts.Copy == CopyAlways && (tr.gpu.copies.Load() == 0 || len(stored) < 4*batch) {
		t.Fatalf("CopyAlways: %d batches ran PlainCopy, %d keys stored before the pool ran out", tr.gpu.copies.Load(), len(stored))
	}
	mustCheck(t, tr)
	vals, found := make([]uint32, len(failed)), make([]bool, len(failed))
	check(t, tr.Lookup(ctx, failed, vals, found))
	applied := 0
	for i := range found {
		if found[i] {
			applied++
		}
	}
	if applied == len(failed) {
		t.Fatalf("the failed batch applied all %d keys", applied)
	}
	keys := slices.Collect(func(y func(uint32) bool) {
		for k := range stored {
			if !y(k) {
				return
			}
		}
	})
	vals, found = make([]uint32, len(keys)), make([]bool, len(keys))
	check(t, tr.Lookup(ctx, keys, vals, found))
	for i, k := range keys {
		if !found[i] || vals[i] != stored[k] {
			t.Fatalf("key %d of a batch that succeeded: (%d, %v), want %d", k, vals[i], found[i], stored[k])
		}
	}
	// A snapshot forces copies, which the full pool cannot hold.
	s, err := tr.Snapshot(ctx)
	check(t, err)
	defer s.Close()
	before := map[uint32]uint32{}
	for k, v := range func(y func(uint32, uint32) bool) { seq, err := s.All(ctx); check(t, err); seq(y) } {
		before[k] = v
	}
	// (Under CopyAlways the copies the last batches retired unlinked are
	// free again by now: these updates may fit.)
	upd := make([]uint32, len(keys))
	err = tr.Insert(ctx, keys, upd)
	if !errors.Is(err, warpkit.ErrPoolExhausted) && (err != nil || tr.gpu.opts.Copy != CopyAlways) {
		t.Fatalf("updates that need copies in a full pool: %v, want ErrPoolExhausted", err)
	}
	t.Logf("%d keys stored; updates of them beside a snapshot: %v", len(keys), err)
	mustCheck(t, tr)
	expect(t, "the snapshot after a failed batch", func(y func(uint32, uint32) bool) { seq, err := s.All(ctx); check(t, err); seq(y) }, nil, before)
	// A Build past the cap fails and leaves the tree.
	big := make([]uint32, 1<<16)
	for i := range big {
		big[i] = uint32(i)
	}
	if err := tr.Build(ctx, big, big); !errors.Is(err, warpkit.ErrPoolExhausted) {
		t.Fatalf("a Build past the cap: %v, want ErrPoolExhausted", err)
	}
	mustCheck(t, tr)
	if n, err := tr.Len(ctx); err != nil || n < len(stored) {
		t.Fatalf("Len after a failed Build: %d, %v (had at least %d)", n, err, len(stored))
	}
}

// testDeviceMethods checks the device-resident methods of the tree and of a
// snapshot against the CPU backend holding the same pairs.
func testDeviceMethods[K, V warpkit.Word](t *testing.T, dev *cuda.Device, tr *Tree[K, V]) {
	oracle := newCPUTree[K, V](t)
	defer oracle.Close()
	rng := rand.New(rand.NewPCG(7, 8))
	const n = 4000
	ks, vs := make([]K, n), make([]V, n)
	for i := range ks {
		ks[i], vs[i] = K(rng.Uint64N(1<<20)), V(rng.Uint64())
	}
	dk, err := cuda.FromHost(dev, ks)
	check(t, err)
	defer dk.Free()
	dv, err := cuda.FromHost(dev, vs)
	check(t, err)
	defer dv.Free()
	check(t, tr.BuildDevice(ctx, dk, dv)) // sorts dk, dv in place
	check(t, oracle.Build(ctx, ks, vs))
	del := ks[:n/4]
	dd, err := cuda.FromHost(dev, del)
	check(t, err)
	defer dd.Free()
	snap, err := tr.Snapshot(ctx)
	check(t, err)
	defer snap.Close()
	osnap, err := oracle.Snapshot(ctx)
	check(t, err)
	defer osnap.Close()
	check(t, tr.DeleteDevice(ctx, dd))
	check(t, oracle.Delete(ctx, del))
	ins := make([]K, n/4)
	iv := make([]V, n/4)
	for i := range ins {
		ins[i], iv[i] = K(rng.Uint64N(1<<20)), V(i)
	}
	ins = slices.Compact(slices.Sorted(slices.Values(ins)))
	iv = iv[:len(ins)]
	di, err := cuda.FromHost(dev, ins)
	check(t, err)
	defer di.Free()
	div, err := cuda.FromHost(dev, iv)
	check(t, err)
	defer div.Free()
	check(t, tr.InsertDevice(ctx, di, div))
	check(t, oracle.Insert(ctx, ins, iv))

	q := make([]K, 1000)
	for i := range q {
		q[i] = K(rng.Uint64N(1 << 20))
	}
	hi := make([]K, len(q))
	for i := range hi {
		hi[i] = q[i] + K(rng.Uint64N(3000))
	}
	dq, _ := cuda.FromHost(dev, q)
	defer dq.Free()
	dh, _ := cuda.FromHost(dev, hi)
	defer dh.Free()
	for _, c := range []struct {
		name string
		dev  interface {
			LookupDevice(context.Context, cuda.Slice[K], cuda.Slice[V], cuda.Slice[uint8]) error
			SuccessorDevice(context.Context, cuda.Slice[K], cuda.Slice[K], cuda.Slice[V], cuda.Slice[uint8]) error
			PredecessorDevice(context.Context, cuda.Slice[K], cuda.Slice[K], cuda.Slice[V], cuda.Slice[uint8]) error
			CountDevice(context.Context, cuda.Slice[K], cuda.Slice[K], cuda.Slice[uint32]) error
			RangeDevice(context.Context, cuda.Slice[K], cuda.Slice[K], cuda.Slice[uint32], cuda.Slice[K], cuda.Slice[V], cuda.Slice[uint32]) error
		}
		host interface {
			Lookup(context.Context, []K, []V, []bool) error
			Successor(context.Context, []K, []K, []V, []bool) error
			Predecessor(context.Context, []K, []K, []V, []bool) error
			Count(context.Context, []K, []K, []uint32) error
			Range(context.Context, []K, []K) (*warpkit.Ranges[K, V], error)
		}
	}{{"latest", tr, oracle}, {"snapshot", snap, osnap}} {
		m := len(q)
		ov, of := make([]V, m), make([]bool, m)
		check(t, c.host.Lookup(ctx, q, ov, of))
		gv, gf := onDevice[V](t, dev, m), onDevice[uint8](t, dev, m)
		check(t, c.dev.LookupDevice(ctx, dq, gv, gf))
		hv, hf := toHost(t, gv), toHost(t, gf)
		for i := range q {
			if (hf[i] != 0) != of[i] || (of[i] && hv[i] != ov[i]) {
				t.Fatalf("%s LookupDevice(%d) = (%d, %d), oracle (%d, %v)", c.name, q[i], hv[i], hf[i], ov[i], of[i])
			}
		}
		for _, pred := range []bool{false, true} {
			ok, ov, of := make([]K, m), make([]V, m), make([]bool, m)
			gk := onDevice[K](t, dev, m)
			if pred {
				check(t, c.host.Predecessor(ctx, q, ok, ov, of))
				check(t, c.dev.PredecessorDevice(ctx, dq, gk, gv, gf))
			} else {
				check(t, c.host.Successor(ctx, q, ok, ov, of))
				check(t, c.dev.SuccessorDevice(ctx, dq, gk, gv, gf))
			}
			hk, hv, hf := toHost(t, gk), toHost(t, gv), toHost(t, gf)
			for i := range q {
				if (hf[i] != 0) != of[i] || (of[i] && (hk[i] != ok[i] || hv[i] != ov[i])) {
					t.Fatalf("%s neighbour (pred %v) of %d = (%d, %d, %d), oracle (%d, %d, %v)", c.name, pred, q[i], hk[i], hv[i], hf[i], ok[i], ov[i], of[i])
				}
			}
		}
		oc := make([]uint32, m)
		check(t, c.host.Count(ctx, q, hi, oc))
		gc := onDevice[uint32](t, dev, m)
		check(t, c.dev.CountDevice(ctx, dq, dh, gc))
		if hc := toHost(t, gc); !slices.Equal(hc, oc) {
			t.Fatalf("%s CountDevice differs from the oracle", c.name)
		}
		r, err := c.host.Range(ctx, q, hi)
		check(t, err)
		offs := make([]uint32, m+1)
		for i := range m {
			offs[i+1] = offs[i] + oc[i]
		}
		do, _ := cuda.FromHost(dev, offs)
		defer do.Free()
		total := int(offs[m])
		rk, rv := onDevice[K](t, dev, max(total, 1)), onDevice[V](t, dev, max(total, 1))
		check(t, c.dev.RangeDevice(ctx, dq, dh, do, rk.Sub(0, total), rv.Sub(0, total), gc))
		hk, hv := toHost(t, rk)[:total], toHost(t, rv)[:total]
		if !slices.Equal(hk, r.Keys) || !slices.Equal(hv, r.Vals) {
			t.Fatalf("%s RangeDevice differs from the oracle", c.name)
		}
	}
}

func onDevice[T cuda.Elem](t *testing.T, dev *cuda.Device, n int) cuda.Slice[T] {
	t.Helper()
	d, err := cuda.Alloc[T](dev, n)
	check(t, err)
	t.Cleanup(func() { d.Free() })
	return d
}

func toHost[T cuda.Elem](t *testing.T, d cuda.Slice[T]) []T {
	t.Helper()
	h, err := d.ToHost()
	check(t, err)
	return h
}

// testRestamp takes snapshots between single-key inserts under a tiny stamp
// limit, keeping some open: Snapshot renumbers the stamps again and again,
// and every open snapshot keeps exactly its keys; an explicit Restamp too.
func testRestamp(t *testing.T, tr *Tree[uint32, uint32]) {
	defer func(l uint32) { restampLimit = l }(restampLimit)
	restampLimit = 8
	type open struct {
		s *Snapshot[uint32, uint32]
		n int
	}
	var snaps []open
	verify := func(where string) {
		t.Helper()
		for _, o := range snaps {
			want := map[uint32]uint32{}
			for k := range o.n {
				want[uint32(k)] = uint32(k) + 1
			}
			expect(t, where, func(y func(uint32, uint32) bool) { seq, err := o.s.All(ctx); check(t, err); seq(y) }, nil, want)
		}
	}
	for i := range 40 {
		check(t, tr.Insert(ctx, []uint32{uint32(i)}, []uint32{uint32(i) + 1}))
		s, err := tr.Snapshot(ctx)
		check(t, err)
		if i%4 == 0 {
			snaps = append(snaps, open{s, i + 1})
		} else {
			check(t, s.Close())
		}
		if i%5 == 0 && len(snaps) > 2 { // let an old one go now and then
			check(t, snaps[0].s.Close())
			snaps = snaps[1:]
		}
	}
	verify("after the inserts")
	st := mustStats(t, tr)
	if st.Restamps == 0 || st.Epoch >= uint64(restampLimit)+uint64(len(snaps)) {
		t.Fatalf("stamps never renumbered under a limit of %d: %+v", restampLimit, st)
	}
	check(t, tr.Restamp(ctx))
	verify("after an explicit Restamp")
	mustCheck(t, tr)
	for _, o := range snaps {
		check(t, o.s.Close())
	}
}

func TestGPURestamp(t *testing.T) {
	testRestamp(t, gpuTreeOn[uint32, uint32](gputest.Device(t), Options{})(t))
}

func TestGPUGenerationsBesideClose(t *testing.T) {
	generationsBesideClose(t, gpuTreeOn[uint32, uint32](gputest.Device(t), Options{})(t), 6)
}

func TestGPURestampFailsPartWay(t *testing.T) {
	restampFailsPartWay(t, gpuTreeOn[uint32, uint32](gputest.Device(t), Options{})(t))
}

// generationsBesideClose: snapshots of older generations (each Build
// starts one) close while Check, Stats, Vacuum and writers run beside them;
// every answer stays right, and once all are closed and a Vacuum ran only
// the latest generation is left (the others freed by an exclusive
// operation, never under a batch or scan that was reading them).
func generationsBesideClose(t *testing.T, tr *Tree[uint32, uint32], rounds int) {
	keysOf := func(r int) ([]uint32, []uint32) {
		k, v := make([]uint32, 3000), make([]uint32, 3000)
		for i := range k {
			k[i], v[i] = uint32(i*7+r), uint32(r)
		}
		return k, v
	}
	for r := range rounds {
		var snaps []*Snapshot[uint32, uint32]
		for range 3 {
			s, err := tr.Snapshot(ctx)
			check(t, err)
			snaps = append(snaps, s)
		}
		k, v := keysOf(r)
		check(t, tr.Build(ctx, k, v)) // a new generation; the snapshots keep the old
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		wg.Add(4)
		go func() { // the closer
			defer wg.Done()
			for _, s := range snaps {
				if err := s.Close(); err != nil {
					errs <- err
				}
			}
		}()
		go func() { // the checker
			defer wg.Done()
			for range 2 {
				if err := tr.Check(ctx); err != nil {
					errs <- fmt.Errorf("check: %w", err)
				}
				if _, err := tr.Stats(ctx); err != nil {
					errs <- fmt.Errorf("stats: %w", err)
				}
			}
		}()
		go func() { // the vacuum
			defer wg.Done()
			if err := tr.Vacuum(ctx); err != nil {
				errs <- fmt.Errorf("vacuum: %w", err)
			}
		}()
		go func() { // the writer
			defer wg.Done()
			for i := range 4 {
				if err := tr.Insert(ctx, []uint32{1<<30 + uint32(i)}, []uint32{7}); err != nil {
					errs <- fmt.Errorf("insert: %w", err)
				}
			}
		}()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", r, err)
		}
		got := make([]uint32, len(k))
		found := make([]bool, len(k))
		check(t, tr.Lookup(ctx, k, got, found))
		for i := range k {
			if !found[i] || got[i] != uint32(r) {
				t.Fatalf("round %d: key %d: %v %d, want %d", r, k[i], found[i], got[i], r)
			}
		}
	}
	check(t, tr.Vacuum(ctx))
	mustCheck(t, tr)
	if g := tr.gpu; g != nil {
		g.snapMu.Lock()
		gens, unread := len(g.gens), len(g.unread)
		g.snapMu.Unlock()
		if gens != 1 || unread != 0 {
			t.Fatalf("after every snapshot closed and a Vacuum: %d generations, %d unread, want 1 and 0", gens, unread)
		}
	}
	if st := mustStats(t, tr); st.OpenSnapshots != 0 || st.ReclaimLeaked != 0 {
		t.Fatalf("stats at the end: %+v", st)
	}
}

// restampFailsPartWay: a Restamp that fails on its second generation
// leaves stamps the host cannot reconcile; every call then returns
// ErrBroken rather than answering from views that may have moved, and
// Close still frees the tree and its snapshots.
func restampFailsPartWay(t *testing.T, tr *Tree[uint32, uint32]) {
	check(t, tr.Insert(ctx, []uint32{1, 2, 3}, []uint32{1, 2, 3}))
	old, err := tr.Snapshot(ctx)
	check(t, err)
	check(t, tr.Build(ctx, []uint32{5, 6}, []uint32{5, 6})) // old reads the first generation
	check(t, tr.Insert(ctx, []uint32{7}, []uint32{7}))
	s, err := tr.Snapshot(ctx)
	check(t, err)
	check(t, tr.Insert(ctx, []uint32{8}, []uint32{8}))
	defer func() { restampFault = nil }()
	restampFault = func(i int) error {
		if i == 1 {
			return errors.New("injected device error")
		}
		return nil
	}
	if err := tr.Restamp(ctx); !errors.Is(err, ErrBroken) {
		t.Fatalf("a Restamp failing part way: %v, want ErrBroken", err)
	}
	restampFault = nil
	v, f := make([]uint32, 1), make([]bool, 1)
	for name, err := range map[string]error{
		"Lookup":          tr.Lookup(ctx, []uint32{1}, v, f),
		"Insert":          tr.Insert(ctx, []uint32{9}, []uint32{9}),
		"snapshot Lookup": s.Lookup(ctx, []uint32{7}, v, f),
		"old Lookup":      old.Lookup(ctx, []uint32{1}, v, f),
		"Vacuum":          tr.Vacuum(ctx),
		"Check":           tr.Check(ctx),
	} {
		if !errors.Is(err, ErrBroken) {
			t.Errorf("%s on a broken tree: %v, want ErrBroken", name, err)
		}
	}
	if _, err := tr.Snapshot(ctx); !errors.Is(err, ErrBroken) {
		t.Errorf("Snapshot on a broken tree: %v", err)
	}
	check(t, s.Close())
	check(t, old.Close())
	check(t, tr.Close())
}

// testVersionIndexes holds a snapshot after each of many rounds that
// rewrite every key (and add a few; every third round writes half of them
// twice, the second time in place), so that every leaf's chain grows a
// version a round: with 10 rounds every index is dense (and a copy extends
// it without a walk while no snapshot closed), with 34 deeper than an index
// holds densely, so its stride doubles. Every snapshot must read its round's values through the index
// (the lockstep waves, and each tile's own walk with validateReads), the
// index must match its chain (Check), Restamp must keep it exact, and
// closing the snapshots (every other one first) must take the indexes away
// with the versions.
func testVersionIndexes[K, V warpkit.Word](t *testing.T, tr *Tree[K, V], rounds int, strict bool) {
	defer func(p bool) { poisonFreed = p }(poisonFreed)
	poisonFreed = true
	const n = 600
	type snap struct {
		s    *Snapshot[K, V]
		want map[K]V
	}
	model := map[K]V{}
	var snaps []snap
	verify := func(where string) {
		t.Helper()
		for i, o := range snaps {
			keys := make([]K, 0, len(o.want)+1)
			for k := range o.want {
				keys = append(keys, k)
			}
			keys = append(keys, K(n+rounds*7)) // never inserted
			for _, validated := range []bool{false, true} {
				validateReads = validated
				vals, found := make([]V, len(keys)), make([]bool, len(keys))
				err := o.s.Lookup(ctx, keys, vals, found)
				validateReads = false
				check(t, err)
				for j, k := range keys {
					w, ok := o.want[k]
					if found[j] != ok || vals[j] != w {
						t.Fatalf("%s: snapshot %d (validated %v): key %d = (%d, %v), want (%d, %v)", where, i, validated, k, vals[j], found[j], w, ok)
					}
				}
			}
			expect(t, fmt.Sprintf("%s: snapshot %d", where, i), func(y func(K, V) bool) { seq, err := o.s.All(ctx); check(t, err); seq(y) }, nil, o.want)
		}
	}
	for r := range rounds {
		var keys []K
		var vals []V
		for k := range n + 7*r {
			keys = append(keys, K(k))
			vals = append(vals, V(k*rounds+r+1))
			model[K(k)] = V(k*rounds + r + 1)
		}
		check(t, tr.Insert(ctx, keys, vals))
		if r%3 == 0 { // a second write before the snapshot: in place, the chains and their indexes unchanged
			for i := range keys[:n/2] {
				vals[i] += V(rounds * n * 8)
				model[keys[i]] = vals[i]
			}
			check(t, tr.Insert(ctx, keys[:n/2], vals[:n/2]))
			mustCheck(t, tr)
		}
		s, err := tr.Snapshot(ctx)
		check(t, err)
		snaps = append(snaps, snap{s, maps.Clone(model)})
		if r == indexMin+1 {
			if st := mustStats(t, tr); st.VersionIndexes == 0 {
				t.Fatalf("no version index with %d snapshots open: %+v", len(snaps), st)
			}
		}
	}
	st := mustStats(t, tr)
	if st.VersionIndexes == 0 || (strict && st.VersionIndexes > st.Nodes) {
		t.Fatalf("%d version indexes for %d heads", st.VersionIndexes, st.Nodes)
	}
	mustCheck(t, tr)
	verify("deep chains")
	check(t, tr.Restamp(ctx))
	mustCheck(t, tr)
	verify("after Restamp")
	// Every other snapshot closed, then a round of writes: the writers
	// splice the chains and index what is left.
	var kept []snap
	for i, o := range snaps {
		if i%2 == 1 {
			check(t, o.s.Close())
		} else {
			kept = append(kept, o)
		}
	}
	snaps = kept
	var keys []K
	var vals []V
	for k := range model {
		keys = append(keys, k)
		vals = append(vals, V(k))
		model[k] = V(k)
	}
	check(t, tr.Insert(ctx, keys, vals))
	mustCheck(t, tr)
	verify("half closed")
	// Every leaf was written since the closes: its writer walked its chain
	// (the closes outdated its index) and unlinked what no open snapshot
	// sees; what stays unpinned is in internal nodes.
	if st := mustStats(t, tr); strict && st.Versions-st.PinnedVersions > st.Versions/5 {
		t.Fatalf("after the closes and a write of every key: %d of %d versions unpinned", st.Versions-st.PinnedVersions, st.Versions)
	}
	// All but two closed (one taken now, so that the writes copy): the
	// writers take the splice without indexes, which must retire (or, with
	// a full log, empty) the indexes it meets.
	for _, o := range snaps[:len(snaps)-1] {
		check(t, o.s.Close())
	}
	snaps = snaps[len(snaps)-1:]
	s2, err := tr.Snapshot(ctx)
	check(t, err)
	snaps = append(snaps, snap{s2, maps.Clone(model)})
	for i := range vals {
		vals[i]++
		model[keys[i]] = vals[i]
	}
	check(t, tr.Insert(ctx, keys, vals))
	mustCheck(t, tr)
	verify("two open")
	for _, o := range snaps {
		check(t, o.s.Close())
	}
	snaps = nil
	check(t, tr.Vacuum(ctx))
	mustCheck(t, tr)
	if st := mustStats(t, tr); st.Versions != 0 || st.VersionIndexes != 0 {
		t.Fatalf("after every Close and Vacuum: %d versions, %d indexes", st.Versions, st.VersionIndexes)
	}
}

func TestGPUVersionIndexes(t *testing.T) {
	dev := gputest.Device(t)
	for _, rounds := range []int{10, 34} {
		t.Run(fmt.Sprint("u32-", rounds), func(t *testing.T) { testVersionIndexes(t, gpuTreeOn[uint32, uint32](dev, Options{})(t), rounds, true) })
		t.Run(fmt.Sprint("u64-", rounds), func(t *testing.T) { testVersionIndexes(t, gpuTreeOn[uint64, uint64](dev, Options{})(t), rounds, true) })
	}
}

// testNoVersionIndexes: with Options.NoVersionIndexes the same deep chains
// get no index, and every snapshot still reads its round.
func testNoVersionIndexes(t *testing.T, tr *Tree[uint32, uint32]) {
	const n, rounds = 300, 8
	var snaps []*Snapshot[uint32, uint32]
	keys := make([]uint32, n)
	vals := make([]uint32, n)
	for r := range rounds {
		for k := range keys {
			keys[k], vals[k] = uint32(k), uint32(k*rounds+r)
		}
		check(t, tr.Insert(ctx, keys, vals))
		s, err := tr.Snapshot(ctx)
		check(t, err)
		snaps = append(snaps, s)
	}
	if st := mustStats(t, tr); st.VersionIndexes != 0 || st.Versions < n/20*(rounds-1) {
		t.Fatalf("NoVersionIndexes: %d indexes over %d versions", st.VersionIndexes, st.Versions)
	}
	mustCheck(t, tr)
	lookupRoundsAndClose(t, snaps, keys, func(k, r int) uint32 { return uint32(k*rounds + r) })
}

func TestGPUNoVersionIndexes(t *testing.T) {
	testNoVersionIndexes(t, gpuTreeOn[uint32, uint32](gputest.Device(t), Options{NoVersionIndexes: true})(t))
}

// testIndexedCopyAlways: under CopyAlways a write copies versions no
// snapshot sees (each key is written twice a round here), which only a
// writer's walk unlinks; with indexed chains the writers must still walk,
// so that such copies do not pile up behind an index.
func testIndexedCopyAlways(t *testing.T, tr *Tree[uint32, uint32]) {
	const n, rounds = 300, 10
	var snaps []*Snapshot[uint32, uint32]
	keys := make([]uint32, n)
	vals := make([]uint32, n)
	for r := range rounds {
		for pass := range 2 {
			for k := range keys {
				keys[k], vals[k] = uint32(k), uint32(k*rounds*2+r*2+pass)
			}
			check(t, tr.Insert(ctx, keys, vals))
		}
		s, err := tr.Snapshot(ctx)
		check(t, err)
		snaps = append(snaps, s)
	}
	mustCheck(t, tr)
	st := mustStats(t, tr)
	if st.VersionIndexes == 0 || st.Versions-st.PinnedVersions > st.Nodes {
		t.Fatalf("CopyAlways: %d of %d versions unpinned over %d heads (%d indexes)", st.Versions-st.PinnedVersions, st.Versions, st.Nodes, st.VersionIndexes)
	}
	lookupRoundsAndClose(t, snaps, keys, func(k, r int) uint32 { return uint32(k*rounds*2 + r*2 + 1) })
}

// lookupRoundsAndClose looks keys up in snapshot r of snaps, each found
// with value want(k, r) (k: the key's index), and closes the snapshot.
func lookupRoundsAndClose(t *testing.T, snaps []*Snapshot[uint32, uint32], keys []uint32, want func(k, r int) uint32) {
	t.Helper()
	got, found := make([]uint32, len(keys)), make([]bool, len(keys))
	for r, s := range snaps {
		check(t, s.Lookup(ctx, keys, got, found))
		for k := range keys {
			if w := want(k, r); !found[k] || got[k] != w {
				t.Fatalf("snapshot %d: key %d = (%d, %v), want %d", r, keys[k], got[k], found[k], w)
			}
		}
		check(t, s.Close())
	}
}

func TestGPUIndexedCopyAlways(t *testing.T) {
	testIndexedCopyAlways(t, gpuTreeOn[uint32, uint32](gputest.Device(t), Options{Copy: CopyAlways})(t))
}

// testIndexesLogFull runs testVersionIndexes with every write batch's
// retire log one entry long: the writers' splices keep what they cannot
// log, old indexes stay linked as emptied pass-throughs (which Check holds
// to count and high 0, Restamp included), and every snapshot still reads
// its round.
func testIndexesLogFull[K, V warpkit.Word](t *testing.T, tr *Tree[K, V]) {
	defer func(c int) { retireLogCap = c }(retireLogCap)
	retireLogCap = 1
	testVersionIndexes(t, tr, 10, false)
}

func TestGPUIndexesLogFull(t *testing.T) {
	testIndexesLogFull(t, gpuTreeOn[uint32, uint32](gputest.Device(t), Options{})(t))
}

// testPlainWrites: write batches run the plain kernels (no copies, no
// splices) exactly when nothing can need them — no snapshot open, no chain
// linked since the last Vacuum that left none, and under CopyIfStale no
// snapshot ever taken of the generation — and a plain batch that meets
// chains it did not expect (forcePlainWrites: what a batch that decided
// before another lane linked them does) keeps them whole.
func testPlainWrites(t *testing.T, dev func(Options) func(testing.TB) *Tree[uint32, uint32]) {
	const n = 2000
	keys, vals := make([]uint32, n), make([]uint32, n)
	fill := func(salt uint32) {
		for i := range keys {
			keys[i], vals[i] = uint32(i*5), uint32(i)^salt
		}
	}
	// plain runs a write (in test t) and reports whether it ran the plain kernels,
	// and that it ran PlainCopy exactly when the copy rule is CopyAlways.
	plain := func(t *testing.T, tr *Tree[uint32, uint32], write func() error) bool {
		t.Helper()
		before, copies := tr.gpu.plains.Load(), tr.gpu.copies.Load()
		check(t, write())
		ran := tr.gpu.plains.Load() > before
		if copied := tr.gpu.copies.Load() > copies; copied != (ran && tr.gpu.opts.Copy == CopyAlways) {
			t.Fatalf("%v: plain %v, PlainCopy %v", tr.gpu.opts.Copy, ran, copied)
		}
		return ran
	}
	insert := func(tr *Tree[uint32, uint32], salt uint32) func() error {
		return func() error { fill(salt); return tr.Insert(ctx, keys, vals) }
	}
	want := func(t *testing.T, tr *Tree[uint32, uint32], where string, salt uint32) {
		t.Helper()
		fill(salt)
		w := map[uint32]uint32{}
		for i, k := range keys {
			w[k] = vals[i]
		}
		expect(t, where, func(y func(uint32, uint32) bool) { s, err := tr.All(ctx); check(t, err); s(y) }, nil, w)
		mustCheck(t, tr)
	}
	for _, mode := range []CopyMode{CopyWhenPinned, CopyIfStale, CopyAlways} {
		t.Run(mode.String(), func(t *testing.T) {
			tr := dev(Options{Copy: mode})(t)
			if !plain(t, tr, insert(tr, 1)) {
				t.Fatal("a fresh tree's first batch did not run plain")
			}
			st := mustStats(t, tr)
			if st.Versions != 0 {
				t.Fatalf("plain batches linked %d versions", st.Versions)
			}
			// Under CopyAlways every node written was copied out and the
			// copy retired (each insert writes a leaf at least).
			if retired := st.RetiredPending; (mode == CopyAlways) != (retired >= n) || (mode != CopyAlways && retired != 0) {
				t.Fatalf("%v: a plain batch of %d inserts retired %d units", mode, n, retired)
			}
			// Deletes of keys not there write no node: under CopyAlways
			// the units taken ahead for their copies go back (Check). (want
			// reads a transient snapshot: under CopyIfStale no batch after
			// it runs plain.)
			missing := make([]uint32, n)
			for i := range missing {
				missing[i] = uint32(i*5 + 1)
			}
			if !plain(t, tr, func() error { return tr.Delete(ctx, missing) }) {
				t.Fatal("deletes of missing keys did not run plain")
			}
			want(t, tr, "after the first batch and deletes of missing keys", 1)
			s, err := tr.Snapshot(ctx)
			check(t, err)
			if plain(t, tr, insert(tr, 2)) {
				t.Fatal("a batch beside an open snapshot ran plain")
			}
			if st := mustStats(t, tr); st.Versions == 0 {
				t.Fatalf("a batch beside an open snapshot copied nothing: %+v", st)
			}
			check(t, s.Close())
			// The closed snapshot's versions are still linked: the next
			// writers must splice them.
			if plain(t, tr, insert(tr, 3)) {
				t.Fatal("a batch over unspliced chains ran plain")
			}
			want(t, tr, "after the splicing batch", 3)
			check(t, tr.Vacuum(ctx))
			if st := mustStats(t, tr); st.Versions != 0 {
				t.Fatalf("after Vacuum with no snapshot open: %+v", st)
			}
			// Under CopyIfStale the snapshot taken makes every older stamp
			// stale for good; the other rules are plain again.
			if got, wantPlain := plain(t, tr, insert(tr, 4)), mode != CopyIfStale; got != wantPlain {
				t.Fatalf("after Vacuum: plain %v, want %v", got, wantPlain)
			}
			want(t, tr, "after Vacuum", 4)
			// A new generation starts over.
			fill(5)
			check(t, tr.Build(ctx, keys, vals))
			if !plain(t, tr, insert(tr, 6)) {
				t.Fatal("after Build: not plain")
			}
			want(t, tr, "after Build", 6)
		})
	}
	// PlainCopy's copies past a full retire log are freed by the kernel:
	// none may stay allocated unaccounted for (Check's pool accounting).
	t.Run("copies past a full log", func(t *testing.T) {
		defer func(c int) { retireLogCap = c }(retireLogCap)
		retireLogCap = 16
		tr := dev(Options{Copy: CopyAlways})(t)
		if !plain(t, tr, insert(tr, 1)) {
			t.Fatal("not plain")
		}
		if st := mustStats(t, tr); st.RetiredPending != retireLogCap {
			t.Fatalf("retired %d units into a log of %d", st.RetiredPending, retireLogCap)
		}
		want(t, tr, "inserts past a full log", 1)
		check(t, tr.Delete(ctx, keys[:n/2]))
		check(t, tr.Insert(ctx, keys[:n/2], vals[:n/2]))
		want(t, tr, "deletes and inserts past a full log", 1)
		check(t, tr.Vacuum(ctx))
		if st := mustStats(t, tr); st.RetiredPending != 0 || st.Versions != 0 {
			t.Fatalf("after Vacuum: %+v", st)
		}
	})
	t.Run("chains kept", func(t *testing.T) {
		tr := dev(Options{})(t)
		check(t, insert(tr, 1)())
		s, err := tr.Snapshot(ctx)
		check(t, err)
		check(t, insert(tr, 2)())
		s2, err := tr.Snapshot(ctx)
		check(t, err)
		check(t, insert(tr, 3)())
		check(t, s.Close())
		check(t, s2.Close())
		linked := mustStats(t, tr).Versions
		if linked == 0 {
			t.Fatal("no chains to keep")
		}
		defer func(f bool) { forcePlainWrites = f }(forcePlainWrites)
		forcePlainWrites = true
		if !plain(t, tr, insert(tr, 4)) {
			t.Fatal("forcePlainWrites: not plain")
		}
		check(t, tr.Delete(ctx, keys[:n/2]))
		check(t, tr.Insert(ctx, keys[:n/2], vals[:n/2]))
		if st := mustStats(t, tr); st.Versions != linked {
			t.Fatalf("plain batches over chains: %d versions linked, want the %d there were", st.Versions, linked)
		}
		want(t, tr, "plain batches over chains", 4) // Check: every chain whole, every unit accounted for
		forcePlainWrites = false
		check(t, tr.Vacuum(ctx))
		if st := mustStats(t, tr); st.Versions != 0 || st.RetiredPending != 0 {
			t.Fatalf("after Vacuum: %+v", st)
		}
		want(t, tr, "after Vacuum", 4)
	})
}

func TestGPUPlainWrites(t *testing.T) {
	dev := gputest.Device(t)
	testPlainWrites(t, func(o Options) func(testing.TB) *Tree[uint32, uint32] { return gpuTreeOn[uint32, uint32](dev, o) })
}

// testInsertRounds: insert batches large against the tree run in rounds
// (blinknode.Rounds), under each copy rule, through the plain kernels (no
// snapshot open) and the versioning ones (a snapshot of a small tree open),
// and land whole: every key with its value, the snapshot's view unchanged,
// Check. A batch small against the tree runs in one launch.
func testInsertRounds(t *testing.T, open func(Options) func(testing.TB) *Tree[uint32, uint32]) {
	const n = 3000
	keys, vals := make([]uint32, n+n/2), make([]uint32, n+n/2)
	for i := range keys { // distinct (an odd multiplier is a bijection), in no key order
		keys[i], vals[i] = uint32(i)*2654435761+12345, uint32(i)^0x5bd1e995
	}
	// holds checks that a version holds keys[:m] with their values and
	// none of the other keys.
	holds := func(t *testing.T, what string, m int, lookup func([]uint32, []uint32, []bool) error) {
		t.Helper()
		got, found := make([]uint32, len(keys)), make([]bool, len(keys))
		check(t, lookup(keys, got, found))
		for i := range keys {
			if found[i] != (i < m) || found[i] && got[i] != vals[i] {
				t.Fatalf("%s: key %d of %d: found %v value %#x, want found %v value %#x", what, i, len(keys), found[i], got[i], i < m, vals[i])
			}
		}
	}
	for _, mode := range []CopyMode{CopyWhenPinned, CopyIfStale, CopyAlways} {
		t.Run(mode.String(), func(t *testing.T) {
			insert := func(tr *Tree[uint32, uint32], lo, hi int) (rounds int64) {
				before := tr.gpu.rounds.Load()
				check(t, tr.Insert(ctx, keys[lo:hi], vals[lo:hi]))
				return tr.gpu.rounds.Load() - before
			}
			// A fresh tree: the plain kernels, in rounds.
			tr := open(Options{Copy: mode})(t)
			if r := insert(tr, 0, n); r == 0 {
				t.Fatalf("%d keys into an empty tree ran in one launch", n)
			}
			holds(t, "after a batch in rounds", n, func(k, v []uint32, f []bool) error { return tr.Lookup(ctx, k, v, f) })
			if r := insert(tr, n, len(keys)); r != 0 {
				t.Fatalf("%d keys into a tree of %d ran in %d launches", len(keys)-n, n, r+1)
			}
			holds(t, "after a batch in one launch", len(keys), func(k, v []uint32, f []bool) error { return tr.Lookup(ctx, k, v, f) })
			check(t, tr.Check(ctx))

			// A tree of 50 keys: a batch of n runs in rounds, under
			// CopyAlways too, whose copies (a unit for every node the first
			// batch wrote, retired, then freed by the next batch) are no
			// nodes of the tree.
			tr = open(Options{Copy: mode})(t)
			insert(tr, 0, 50)
			if r := insert(tr, 50, 50+n); r == 0 {
				t.Fatalf("%d keys into a tree of 50 ran in one launch", n)
			}
			holds(t, "after a small batch and one in rounds", 50+n, func(k, v []uint32, f []bool) error { return tr.Lookup(ctx, k, v, f) })
			check(t, tr.Check(ctx))

			// A built tree: its nodes count (the pool's bulk allocation).
			tr = open(Options{Copy: mode})(t)
			check(t, tr.Build(ctx, keys[:n], vals[:n]))
			if r := insert(tr, n, len(keys)); r != 0 {
				t.Fatalf("%d keys into a built tree of %d ran in %d launches", len(keys)-n, n, r+1)
			}
			holds(t, "after Build and a batch", len(keys), func(k, v []uint32, f []bool) error { return tr.Lookup(ctx, k, v, f) })

			// A snapshot of a tree of 10 keys open: the versioning kernels,
			// in rounds, beside it.
			tr = open(Options{Copy: mode})(t)
			insert(tr, 0, 10)
			s, err := tr.Snapshot(ctx)
			check(t, err)
			before := tr.gpu.plains.Load()
			if r := insert(tr, 10, 10+n); r == 0 {
				t.Fatalf("%d keys into a tree of 10 ran in one launch", n)
			}
			if tr.gpu.plains.Load() != before {
				t.Fatal("a batch beside an open snapshot ran the plain kernels")
			}
			holds(t, "latest, after a versioning batch in rounds", 10+n, func(k, v []uint32, f []bool) error { return tr.Lookup(ctx, k, v, f) })
			holds(t, "the snapshot taken before it", 10, func(k, v []uint32, f []bool) error { return s.Lookup(ctx, k, v, f) })
			check(t, tr.Check(ctx))
			check(t, s.Close())
			check(t, tr.Check(ctx))
		})
	}
}

func TestGPUInsertRounds(t *testing.T) {
	dev := gputest.Device(t)
	testInsertRounds(t, func(o Options) func(testing.TB) *Tree[uint32, uint32] { return gpuTreeOn[uint32, uint32](dev, o) })
}

// TestGPUCopyReserve: a CopyAlways batch of 2^20 keys into a tree of 64K
// (which splits ~120K nodes, each split copying the node and its parent)
// reserves the units its copies take: its pool does not run out (a batch
// that does fails slowly, then runs again).
func TestGPUCopyReserve(t *testing.T) {
	dev := gputest.Device(t)
	tr := gpuTreeOn[uint32, uint32](dev, Options{Copy: CopyAlways, MaxPoolBytes: 1 << 30})(t)
	const n = 1<<20 + 1<<16
	keys := make([]uint32, n)
	for i := range keys {
		keys[i] = uint32(i) * 2654435761 // distinct: an odd multiplier is a bijection
	}
	check(t, tr.Insert(ctx, keys[:1<<16], keys[:1<<16]))
	before := tr.gpu.reruns.Load()
	check(t, tr.Insert(ctx, keys[1<<16:], keys[1<<16:]))
	if r := tr.gpu.reruns.Load() - before; r != 0 {
		t.Fatalf("a CopyAlways batch of 2^20 keys into a tree of 2^16 ran its pool out %d times", r)
	}
	if got, err := tr.Len(ctx); err != nil || got != n {
		t.Fatalf("Len = %d, %v; want %d", got, err, n)
	}
}

func TestGPUVacuumPins(t *testing.T) {
	dev := gputest.Device(t)
	for _, mode := range []CopyMode{CopyWhenPinned, CopyAlways, CopyIfStale} {
		t.Run(mode.String(), func(t *testing.T) { testVacuumPins(t, gpuTreeOn[uint32, uint32](dev, Options{Copy: mode})(t)) })
	}
}

// TestGPURangeBesideWriters: the writers go on past 200 generations (to
// 2000 at most: 1.5M keys) until 20 reads ran beside them; iterators span
// many chunks of 4096 pairs.
func TestGPURangeBesideWriters(t *testing.T) {
	rangeBesideWriters(t, gpuTreeOn[uint32, uint32](gputest.Device(t), Options{MaxPoolBytes: 1 << 30})(t), 1024, 200, 2000, 20)
}
