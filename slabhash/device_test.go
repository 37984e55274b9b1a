package slabhash

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/gputest"
)

// This file checks every *Device method element by element against the same
// batch run from Go slices on the CPU backend. Keys are distinct within each
// batch, so every outcome is fixed and the two backends must agree exactly.

// toDevice copies host to a new device slice, freed when the test ends; nil
// gives the zero Slice (the argument left out).
func toDevice[T cuda.Elem](t testing.TB, dev *cuda.Device, host []T) cuda.Slice[T] {
	t.Helper()
	if host == nil {
		return cuda.Slice[T]{}
	}
	s, err := cuda.FromHost(dev, host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Free() })
	return s
}

// poison is the byte device outputs are filled with before a call: no valid
// Result, and no count or value the tests produce.
const poison = 0xa5

// poisonWord is a word of poison bytes.
func poisonWord[T warpkit.Word]() T {
	var w T
	for range sizeOf[T]() {
		w = w<<8 | poison
	}
	return w
}

// outDevice allocates n device outputs filled with poison, freed when the
// test ends, so an output the call should have written and did not shows.
func outDevice[T cuda.Elem](t testing.TB, dev *cuda.Device, n int) cuda.Slice[T] {
	t.Helper()
	s, err := cuda.Alloc[T](dev, n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Free() })
	if err := s.FillBytes(poison, nil); err != nil {
		t.Fatal(err)
	}
	return s
}

// toHost copies a device slice back.
func toHost[T cuda.Elem](t testing.TB, s cuda.Slice[T]) []T {
	t.Helper()
	h, err := s.ToHost()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// opCodes converts ops to the device's op codes.
func opCodes(ops []Op) []uint8 {
	out := make([]uint8, len(ops))
	for i, o := range ops {
		out[i] = uint8(o)
	}
	return out
}

// resultsOf copies device results back as Results.
func resultsOf(t testing.TB, s cuda.Slice[uint8]) []Result {
	t.Helper()
	raw := toHost(t, s)
	out := make([]Result, len(raw))
	for i, r := range raw {
		out[i] = Result(r)
	}
	return out
}

// agree fails the test at the first element (where only, if not nil, says
// it counts) whose GPU output differs from the CPU's.
func agree[K warpkit.Word, T comparable](t testing.TB, what string, keys []K, gpu, cpu []T, only func(int) bool) {
	t.Helper()
	if len(gpu) != len(cpu) {
		t.Fatalf("%s: %d outputs from the GPU, %d from the CPU", what, len(gpu), len(cpu))
	}
	for i := range gpu {
		if (only == nil || only(i)) && gpu[i] != cpu[i] {
			t.Fatalf("%s: element %d (key %#x): GPU %v, CPU %v", what, i, uint64(keys[i]), gpu[i], cpu[i])
		}
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// distinct draws n distinct keys of pool.
func distinct[K warpkit.Word](rng *rand.Rand, pool []K, n int) []K {
	ks := make([]K, n)
	for i, p := range rng.Perm(len(pool))[:n] {
		ks[i] = pool[p]
	}
	return ks
}

func randomVals[V warpkit.Word](rng *rand.Rand, n int) []V {
	vs := make([]V, n)
	for i := range vs {
		vs[i] = V(rng.Uint64())
	}
	return vs
}

// randomOps draws n op codes up to max.
func randomOps(rng *rand.Rand, n int, max Op) []Op {
	ops := make([]Op, n)
	for i := range ops {
		ops[i] = Op(rng.IntN(int(max) + 1))
	}
	return ops
}

// lenFlusher is what endRound needs of a GPU table and its CPU twin.
type lenFlusher interface {
	Len(context.Context) (int, error)
	Compact(context.Context) error
}

// lenFunc returns x's Len as a func() int (-1 on an error, which no count
// matches).
func lenFunc(x interface {
	Len(context.Context) (int, error)
}) func() int {
	return func() int {
		n, err := x.Len(context.Background())
		if err != nil {
			return -1
		}
		return n
	}
}

// lenOf returns a table's Len, failing the test on an error.
func lenOf(t testing.TB, x interface {
	Len(context.Context) (int, error)
}) int {
	t.Helper()
	n, err := x.Len(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// endRound ends a round of a device test: both backends must hold as many
// entries, and the GPU table is flushed in round flushAt.
func endRound(t testing.TB, ctx context.Context, round, flushAt int, g, c lenFlusher) {
	t.Helper()
	if gl, cl := lenOf(t, g), lenOf(t, c); gl != cl {
		t.Fatalf("round %d: Len %d on the GPU, %d on the CPU", round, gl, cl)
	}
	if round == flushAt {
		must(t, g.Compact(ctx))
	}
}

// sameContents compares two snapshots as multisets of pairs (vals nil: keys
// only).
func sameContents[K, V warpkit.Word](t testing.TB, gk []K, gv []V, ck []K, cv []V) {
	t.Helper()
	type pair struct {
		k K
		v V
	}
	sorted := func(ks []K, vs []V) []pair {
		ps := make([]pair, len(ks))
		for i, k := range ks {
			ps[i].k = k
			if vs != nil {
				ps[i].v = vs[i]
			}
		}
		slices.SortFunc(ps, func(a, b pair) int { return cmp.Or(cmp.Compare(a.k, b.k), cmp.Compare(a.v, b.v)) })
		return ps
	}
	g, c := sorted(gk, gv), sorted(ck, cv)
	if len(g) != len(c) {
		t.Fatalf("the GPU table holds %d entries, the CPU one %d", len(g), len(c))
	}
	for i := range g {
		if g[i] != c[i] {
			t.Fatalf("entry %d of the sorted contents: GPU (%#x, %#x), CPU (%#x, %#x)", i, uint64(g[i].k), uint64(g[i].v), uint64(c[i].k), uint64(c[i].v))
		}
	}
}

// forLayouts runs f for every layout of a kind and width pair, on one
// device.
func forLayouts[K, V warpkit.Word](t *testing.T, kd kind, f func(t *testing.T, dev *cuda.Device, l Layout)) {
	dev := gputest.Device(t)
	for _, l := range layoutsFor[K, V](kd) {
		t.Run(l.String(), func(t *testing.T) { f(t, dev, l) })
	}
}

const (
	devRounds = 4
	devElems  = 1000 // elements per device batch
	devKeys   = 3000 // keys the batches draw from
)

func deviceMap[K, V warpkit.Word](t *testing.T, dev *cuda.Device, l Layout) {
	ctx := context.Background()
	g, err := NewMap[K, V](Options{Backend: warpkit.CUDA, Device: dev, Layout: l, Buckets: 31})
	must(t, err)
	defer g.Close()
	c, err := NewMap[K, V](Options{Backend: warpkit.CPU})
	must(t, err)
	defer c.Close()
	rng := rand.New(rand.NewPCG(11, uint64(l)))
	pool := keySpace[K](devKeys)
	for round := 0; round < devRounds; round++ {
		at := func(what string) string { return fmt.Sprintf("round %d: %s", round, what) }
		n := devElems
		want := make([]Result, n)

		ks, vs := distinct(rng, pool, n), randomVals[V](rng, n)
		res := outDevice[uint8](t, dev, n)
		must(t, g.InsertDevice(ctx, toDevice(t, dev, ks), toDevice(t, dev, vs), res))
		must(t, c.Insert(ctx, ks, vs, want))
		agree(t, at("InsertDevice"), ks, resultsOf(t, res), want, nil)

		ks = distinct(rng, pool, n)
		res, out := outDevice[uint8](t, dev, n), outDevice[V](t, dev, n)
		must(t, g.LookupDevice(ctx, toDevice(t, dev, ks), out, res))
		wantVals := make([]V, n)
		must(t, c.Lookup(ctx, ks, wantVals, want))
		agree(t, at("FindDevice"), ks, resultsOf(t, res), want, nil)
		agree(t, at("FindDevice values"), ks, toHost(t, out), wantVals, nil)

		ks = distinct(rng, pool, n/3)
		res = outDevice[uint8](t, dev, len(ks))
		must(t, g.DeleteDevice(ctx, toDevice(t, dev, ks), res))
		want = want[:len(ks)]
		must(t, c.Delete(ctx, ks, want))
		agree(t, at("DeleteDevice"), ks, resultsOf(t, res), want, nil)

		ops, ks, vs := randomOps(rng, n, OpDelete), distinct(rng, pool, n), randomVals[V](rng, n)
		res, dv := outDevice[uint8](t, dev, n), toDevice(t, dev, vs)
		must(t, g.ApplyDevice(ctx, toDevice(t, dev, opCodes(ops)), toDevice(t, dev, ks), dv, res))
		want = make([]Result, n)
		must(t, c.Apply(ctx, ops, ks, vs, want))
		agree(t, at("ApplyDevice"), ks, resultsOf(t, res), want, nil)
		agree(t, at("ApplyDevice found values"), ks, toHost(t, dv), vs, func(i int) bool { return ops[i] == OpFind })

		endRound(t, ctx, round, 1, g, c)
	}
	gk, gv, err := g.Pairs(ctx)
	must(t, err)
	ck, cv, err := c.Pairs(ctx)
	must(t, err)
	sameContents(t, gk, gv, ck, cv)
}

func deviceSet[K warpkit.Word](t *testing.T, dev *cuda.Device, l Layout) {
	ctx := context.Background()
	g, err := NewSet[K](Options{Backend: warpkit.CUDA, Device: dev, Layout: l, Buckets: 31})
	must(t, err)
	defer g.Close()
	c, err := NewSet[K](Options{Backend: warpkit.CPU})
	must(t, err)
	defer c.Close()
	rng := rand.New(rand.NewPCG(12, uint64(l)))
	pool := keySpace[K](devKeys)
	for round := 0; round < devRounds; round++ {
		at := func(what string) string { return fmt.Sprintf("round %d: %s", round, what) }
		n := devElems
		want := make([]Result, n)

		ks := distinct(rng, pool, n)
		res := outDevice[uint8](t, dev, n)
		must(t, g.InsertDevice(ctx, toDevice(t, dev, ks), res))
		must(t, c.Insert(ctx, ks, want))
		agree(t, at("InsertDevice"), ks, resultsOf(t, res), want, nil)

		ks = distinct(rng, pool, n)
		res = outDevice[uint8](t, dev, n)
		must(t, g.LookupDevice(ctx, toDevice(t, dev, ks), res))
		must(t, c.Lookup(ctx, ks, want))
		agree(t, at("ContainsDevice"), ks, resultsOf(t, res), want, nil)

		ks = distinct(rng, pool, n/3)
		res = outDevice[uint8](t, dev, len(ks))
		must(t, g.DeleteDevice(ctx, toDevice(t, dev, ks), res))
		want = want[:len(ks)]
		must(t, c.Delete(ctx, ks, want))
		agree(t, at("DeleteDevice"), ks, resultsOf(t, res), want, nil)

		ops, ks := randomOps(rng, n, OpDelete), distinct(rng, pool, n)
		res = outDevice[uint8](t, dev, n)
		must(t, g.ApplyDevice(ctx, toDevice(t, dev, opCodes(ops)), toDevice(t, dev, ks), res))
		want = make([]Result, n)
		must(t, c.Apply(ctx, ops, ks, want))
		agree(t, at("ApplyDevice"), ks, resultsOf(t, res), want, nil)

		endRound(t, ctx, round, 1, g, c)
	}
	gk, err := g.Keys(ctx)
	must(t, err)
	ck, err := c.Keys(ctx)
	must(t, err)
	sameContents[K, uint32](t, gk, nil, ck, nil)
}

// findAllDevice runs CountDevice, lays out the rooms on the host from the
// counts, and runs FindAllDevice into a values buffer with a poisoned tail
// of spare elements beyond the last room. It returns the offsets, the values
// (without the tail) and the counts FindAllDevice reported, after checking
// that the tail was not written.
func findAllDevice[K, V warpkit.Word](t testing.TB, ctx context.Context, dev *cuda.Device, m *MultiMap[K, V], ks []K) (offs []uint64, vals []V, counts []uint32) {
	t.Helper()
	const spare = 8
	dk := toDevice(t, dev, ks)
	dc := outDevice[uint32](t, dev, len(ks))
	must(t, m.CountDevice(ctx, dk, dc))
	offs = make([]uint64, len(ks)+1)
	for i, c := range toHost(t, dc) {
		offs[i+1] = offs[i] + uint64(c)
	}
	total := int(offs[len(ks)])
	dv := outDevice[V](t, dev, total+spare)
	must(t, dc.FillBytes(poison, nil))
	must(t, m.LookupAllDevice(ctx, dk, toDevice(t, dev, offs), dv, dc))
	all := toHost(t, dv)
	for i, v := range all[total:] {
		if v != poisonWord[V]() {
			t.Fatalf("FindAllDevice wrote %#x past the last room (at spare element %d)", uint64(v), i)
		}
	}
	return offs, all[:total], toHost(t, dc)
}

func deviceMulti[K, V warpkit.Word](t *testing.T, dev *cuda.Device, l Layout) {
	ctx := context.Background()
	g, err := NewMultiMap[K, V](Options{Backend: warpkit.CUDA, Device: dev, Layout: l, Buckets: 31})
	must(t, err)
	defer g.Close()
	c, err := NewMultiMap[K, V](Options{Backend: warpkit.CPU})
	must(t, err)
	defer c.Close()
	rng := rand.New(rand.NewPCG(13, uint64(l)))
	// Fewer keys than elsewhere, so that keys gather several values over the
	// rounds; one element per key per batch keeps each key's values in a
	// fixed order (one per batch), so both backends list them alike.
	pool := keySpace[K](devElems * 3 / 2)
	for round := 0; round < devRounds+2; round++ {
		at := func(what string) string { return fmt.Sprintf("round %d: %s", round, what) }
		n := devElems

		ks, vs := distinct(rng, pool, n), randomVals[V](rng, n)
		res := outDevice[uint8](t, dev, n)
		want := make([]Result, n)
		must(t, g.InsertDevice(ctx, toDevice(t, dev, ks), toDevice(t, dev, vs), res))
		must(t, c.Insert(ctx, ks, vs, want))
		agree(t, at("InsertDevice"), ks, resultsOf(t, res), want, nil)

		ks = distinct(rng, pool, n)
		counts := outDevice[uint32](t, dev, n)
		wantCounts := make([]uint32, n)
		must(t, g.CountDevice(ctx, toDevice(t, dev, ks), counts))
		must(t, c.Count(ctx, ks, wantCounts))
		agree(t, at("CountDevice"), ks, toHost(t, counts), wantCounts, nil)

		ks = distinct(rng, pool, n/2)
		offs, vals, got := findAllDevice(t, ctx, dev, g, ks)
		wantOffs, wantVals, err := c.LookupAll(ctx, ks)
		must(t, err)
		for i, k := range ks {
			if want := wantOffs[i+1] - wantOffs[i]; int(got[i]) != want || offs[i+1]-offs[i] != uint64(want) {
				t.Fatalf("round %d: FindAllDevice: key %#x: count %d, room %d, the CPU has %d values", round, uint64(k), got[i], offs[i+1]-offs[i], want)
			}
			if !slices.Equal(vals[offs[i]:offs[i+1]], wantVals[wantOffs[i]:wantOffs[i+1]]) {
				t.Fatalf("round %d: FindAllDevice: key %#x: values %#x, the CPU's %#x", round, uint64(k),
					vals[offs[i]:offs[i+1]], wantVals[wantOffs[i]:wantOffs[i+1]])
			}
		}

		ks = distinct(rng, pool, n/3)
		res = outDevice[uint8](t, dev, len(ks))
		want = want[:len(ks)]
		must(t, g.DeleteOneDevice(ctx, toDevice(t, dev, ks), res))
		must(t, c.DeleteOne(ctx, ks, want))
		agree(t, at("DeleteOneDevice"), ks, resultsOf(t, res), want, nil)

		ks = distinct(rng, pool, n/8)
		counts = outDevice[uint32](t, dev, len(ks))
		wantCounts = wantCounts[:len(ks)]
		must(t, g.DeleteAllDevice(ctx, toDevice(t, dev, ks), counts))
		must(t, c.DeleteAll(ctx, ks, wantCounts))
		agree(t, at("DeleteAllDevice"), ks, toHost(t, counts), wantCounts, nil)

		ops, ks, vs := randomOps(rng, n, OpDeleteAll), distinct(rng, pool, n), randomVals[V](rng, n)
		res, counts = outDevice[uint8](t, dev, n), outDevice[uint32](t, dev, n)
		want, wantCounts = make([]Result, n), make([]uint32, n)
		must(t, g.ApplyDevice(ctx, toDevice(t, dev, opCodes(ops)), toDevice(t, dev, ks), toDevice(t, dev, vs), res, counts))
		must(t, c.Apply(ctx, ops, ks, vs, want, wantCounts))
		agree(t, at("ApplyDevice"), ks, resultsOf(t, res), want, nil)
		agree(t, at("ApplyDevice counts"), ks, toHost(t, counts), wantCounts, nil)

		endRound(t, ctx, round, 2, g, c)
	}
	gk, gv, err := g.Pairs(ctx)
	must(t, err)
	ck, cv, err := c.Pairs(ctx)
	must(t, err)
	sameContents(t, gk, gv, ck, cv)
}

// TestMapDevice checks InsertDevice, FindDevice, DeleteDevice and
// ApplyDevice against the CPU backend, for every width pair and layout.
func TestMapDevice(t *testing.T) {
	t.Run("32x32", func(t *testing.T) { forLayouts[uint32, uint32](t, kindMap, deviceMap[uint32, uint32]) })
	t.Run("32x64", func(t *testing.T) { forLayouts[uint32, uint64](t, kindMap, deviceMap[uint32, uint64]) })
	t.Run("64x32", func(t *testing.T) { forLayouts[uint64, uint32](t, kindMap, deviceMap[uint64, uint32]) })
	t.Run("64x64", func(t *testing.T) { forLayouts[uint64, uint64](t, kindMap, deviceMap[uint64, uint64]) })
}

// TestSetDevice checks InsertDevice, ContainsDevice, DeleteDevice and
// ApplyDevice against the CPU backend.
func TestSetDevice(t *testing.T) {
	t.Run("32", func(t *testing.T) { forLayouts[uint32, uint32](t, kindSet, deviceSet[uint32]) })
	t.Run("64", func(t *testing.T) { forLayouts[uint64, uint32](t, kindSet, deviceSet[uint64]) })
}

// TestMultiMapDevice checks InsertDevice, CountDevice, FindAllDevice,
// DeleteOneDevice, DeleteAllDevice and ApplyDevice against the CPU backend.
func TestMultiMapDevice(t *testing.T) {
	t.Run("32x32", func(t *testing.T) { forLayouts[uint32, uint32](t, kindMulti, deviceMulti[uint32, uint32]) })
	t.Run("32x64", func(t *testing.T) { forLayouts[uint32, uint64](t, kindMulti, deviceMulti[uint32, uint64]) })
	t.Run("64x32", func(t *testing.T) { forLayouts[uint64, uint32](t, kindMulti, deviceMulti[uint64, uint32]) })
	t.Run("64x64", func(t *testing.T) { forLayouts[uint64, uint64](t, kindMulti, deviceMulti[uint64, uint64]) })
}

// TestFindAllDeviceRooms: the table changes between CountDevice and
// FindAllDevice. A key that gained values reports its new count and fills
// exactly its room with its oldest values; a key that lost some reports the
// smaller count and leaves the rest of its room alone; nothing is written
// past the rooms. Bad shapes and rooms outside the values fail with
// ErrInvalidArgument, writing nothing outside the values; reserved keys
// fail with ErrReservedKey, and the CPU backend refuses device slices like every
// other *Device method.
func TestFindAllDeviceRooms(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, opts Options) {
		m, err := NewMultiMap[uint32, uint32](opts)
		must(t, err)
		defer m.Close()
		if opts.Backend == warpkit.CPU {
			err := m.LookupAllDevice(ctx, cuda.Slice[uint32]{}, cuda.Slice[uint64]{}, cuda.Slice[uint32]{}, cuda.Slice[uint32]{})
			if !errors.Is(err, warpkit.ErrInvalidArgument) {
				t.Fatalf("device slices on the CPU: %v", err)
			}
			return
		}
		dev := opts.Device
		const a, b, absent = 10, 20, 30
		// One pair per batch, so each key's values have a fixed order.
		ins := func(k, v uint32) { must(t, m.Insert(ctx, []uint32{k}, []uint32{v}, nil)) }
		for v := uint32(1); v <= 5; v++ {
			ins(a, 100+v)
		}
		for v := uint32(1); v <= 3; v++ {
			ins(b, 200+v)
		}
		keys := []uint32{a, b, absent}
		dk := toDevice(t, dev, keys)
		dc := outDevice[uint32](t, dev, 3)
		must(t, m.CountDevice(ctx, dk, dc))
		if got := toHost(t, dc); !slices.Equal(got, []uint32{5, 3, 0}) {
			t.Fatalf("counts %v, want [5 3 0]", got)
		}
		offs := toDevice(t, dev, []uint64{0, 5, 8, 8})
		// The table changes: a gains two values, b loses its oldest.
		ins(a, 106)
		ins(a, 107)
		must(t, m.DeleteOne(ctx, []uint32{b}, nil))
		dv := outDevice[uint32](t, dev, 12)
		must(t, dc.FillBytes(poison, nil))
		must(t, m.LookupAllDevice(ctx, dk, offs, dv, dc))
		if got := toHost(t, dc); !slices.Equal(got, []uint32{7, 2, 0}) {
			t.Fatalf("counts after the change %v, want [7 2 0]", got)
		}
		const p = 0xa5a5a5a5
		want := []uint32{101, 102, 103, 104, 105, 202, 203, p, p, p, p, p}
		if got := toHost(t, dv); !slices.Equal(got, want) {
			t.Fatalf("values %#x, want %#x", got, want)
		}

		// Bad shapes fail on the host; rooms outside vals fail in the kernel,
		// which leaves them unwritten: each case gets a view of the first
		// len elements of dv, whose rest must stay poisoned.
		bad := []struct {
			name   string
			offs   []uint64
			len    int // of the view of dv passed as vals; -1: none
			counts cuda.Slice[uint32]
		}{
			{"offsets of len(keys)", []uint64{0, 5, 8}, 12, dc},
			{"no counts", []uint64{0, 5, 8, 8}, 12, cuda.Slice[uint32]{}},
			{"short counts", []uint64{0, 5, 8, 8}, 12, dc.Sub(0, 2)},
			{"a room past the values", []uint64{0, 5, 8, 8}, 6, dc},
			{"a room that ends before it starts", []uint64{0, 8, 2, 9}, 9, dc},
			{"a room that ends below them all", []uint64{9, 9, 9, 8}, 12, dc},
			{"rooms and no values", []uint64{0, 5, 8, 8}, -1, dc},
		}
		for _, c := range bad {
			must(t, dv.FillBytes(poison, nil))
			var vals cuda.Slice[uint32]
			if c.len >= 0 {
				vals = dv.Sub(0, c.len)
			}
			if err := m.LookupAllDevice(ctx, dk, toDevice(t, dev, c.offs), vals, c.counts); !errors.Is(err, warpkit.ErrInvalidArgument) {
				t.Fatalf("%s: %v", c.name, err)
			}
			for i, v := range toHost(t, dv)[max(c.len, 0):] {
				if v != p {
					t.Fatalf("%s: %#x written at %d, past the %d values", c.name, v, max(c.len, 0)+i, max(c.len, 0))
				}
			}
		}
		must(t, m.LookupAllDevice(ctx, dk.Sub(0, 0), offs.Sub(0, 1), cuda.Slice[uint32]{}, dc.Sub(0, 0)))
		// No values at all: rooms of zero need no values slice.
		must(t, m.LookupAllDevice(ctx, dk, toDevice(t, dev, []uint64{0, 0, 0, 0}), cuda.Slice[uint32]{}, dc))
		if got := toHost(t, dc); !slices.Equal(got, []uint32{7, 2, 0}) {
			t.Fatalf("counts with empty rooms %v, want [7 2 0]", got)
		}
		sk := toDevice(t, dev, []uint32{a, EmptyKey32})
		must(t, dv.FillBytes(poison, nil))
		must(t, dc.FillBytes(poison, nil))
		if err := m.LookupAllDevice(ctx, sk, offs.Sub(0, 3), dv, dc.Sub(0, 2)); !errors.Is(err, warpkit.ErrReservedKey) {
			t.Fatalf("a reserved key: %v", err)
		}
		// A rejected batch searches nothing: the outputs are as they were.
		for i, v := range toHost(t, dv) {
			if v != p {
				t.Fatalf("a reserved key: value %#x written at %d", v, i)
			}
		}
		for i, v := range toHost(t, dc) {
			if v != p {
				t.Fatalf("a reserved key: count %#x written at %d", v, i)
			}
		}
		// The table still answers.
		o, v, err := m.LookupAll(ctx, []uint32{a, b})
		must(t, err)
		if !slices.Equal(o, []int{0, 7, 9}) || !slices.Equal(v, []uint32{101, 102, 103, 104, 105, 106, 107, 202, 203}) {
			t.Fatalf("FindAll afterwards: %v %v", o, v)
		}
	})
}

// TestDevicePoolExhaustion: device batches that outgrow a pool capped by
// MaxPoolBytes return ErrPoolExhausted; each element is Inserted or Failed,
// the table holds exactly the inserted ones (with their values) and Len
// agrees; after deleting them and a Flush the freed slabs take new keys from
// device slices again. For each table type, and for a mixed device batch.
func TestDevicePoolExhaustion(t *testing.T) {
	dev := gputest.Device(t)
	ctx := context.Background()
	opts := Options{Backend: warpkit.CUDA, Device: dev, Buckets: 4, MaxPoolBytes: 64 << 10}
	const n = 20000
	keys := keySpace[uint32](n)
	vals := make([]uint32, n)
	for i := range vals {
		vals[i] = uint32(i) + 1
	}
	// Each table type: insert from device slices; held reads keys back from
	// Go slices (found, and the value where there is one); remove deletes.
	type target struct {
		insert func(keys, vals cuda.Slice[uint32], res cuda.Slice[uint8]) error
		held   func(keys []uint32) (found []bool, vals []uint32, err error)
		remove func(keys []uint32) error
		flush  func(context.Context) error
		length func() int
	}
	found := func(res []Result) []bool {
		out := make([]bool, len(res))
		for i, r := range res {
			out[i] = r == Found
		}
		return out
	}
	mapTarget := func(t *testing.T, apply bool) target {
		m, err := NewMap[uint32, uint32](opts)
		must(t, err)
		t.Cleanup(func() { m.Close() })
		return target{
			insert: func(k, v cuda.Slice[uint32], res cuda.Slice[uint8]) error {
				if !apply {
					return m.InsertDevice(ctx, k, v, res)
				}
				ops := make([]uint8, k.Len())
				for i := range ops {
					ops[i] = uint8(OpInsert)
				}
				return m.ApplyDevice(ctx, toDevice(t, dev, ops), k, v, res)
			},
			held: func(k []uint32) ([]bool, []uint32, error) {
				v, res := make([]uint32, len(k)), make([]Result, len(k))
				err := m.Lookup(ctx, k, v, res)
				return found(res), v, err
			},
			remove: func(k []uint32) error { return m.Delete(ctx, k, nil) },
			flush:  m.Compact, length: lenFunc(m),
		}
	}
	targets := []struct {
		name string
		open func(t *testing.T) target
	}{
		{"Map-InsertDevice", func(t *testing.T) target { return mapTarget(t, false) }},
		{"Map-ApplyDevice", func(t *testing.T) target { return mapTarget(t, true) }},
		{"Set-InsertDevice", func(t *testing.T) target {
			s, err := NewSet[uint32](opts)
			must(t, err)
			t.Cleanup(func() { s.Close() })
			return target{
				insert: func(k, _ cuda.Slice[uint32], res cuda.Slice[uint8]) error { return s.InsertDevice(ctx, k, res) },
				held: func(k []uint32) ([]bool, []uint32, error) {
					res := make([]Result, len(k))
					err := s.Lookup(ctx, k, res)
					return found(res), nil, err
				},
				remove: func(k []uint32) error { return s.Delete(ctx, k, nil) },
				flush:  s.Compact, length: lenFunc(s),
			}
		}},
		{"MultiMap-InsertDevice", func(t *testing.T) target {
			m, err := NewMultiMap[uint32, uint32](opts)
			must(t, err)
			t.Cleanup(func() { m.Close() })
			return target{
				insert: func(k, v cuda.Slice[uint32], res cuda.Slice[uint8]) error { return m.InsertDevice(ctx, k, v, res) },
				held: func(k []uint32) ([]bool, []uint32, error) {
					offs, vs, err := m.LookupAll(ctx, k)
					if err != nil {
						return nil, nil, err
					}
					f, v := make([]bool, len(k)), make([]uint32, len(k))
					for i := range k {
						switch offs[i+1] - offs[i] {
						case 0:
						case 1:
							f[i], v[i] = true, vs[offs[i]]
						default:
							return nil, nil, fmt.Errorf("key %#x holds %d pairs, inserted once", k[i], offs[i+1]-offs[i])
						}
					}
					return f, v, nil
				},
				remove: func(k []uint32) error { return m.DeleteAll(ctx, k, nil) },
				flush:  m.Compact, length: lenFunc(m),
			}
		}},
	}
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			x := tg.open(t)
			res := outDevice[uint8](t, dev, n)
			err := x.insert(toDevice(t, dev, keys), toDevice(t, dev, vals), res)
			if !errors.Is(err, warpkit.ErrPoolExhausted) {
				t.Fatalf("inserting past the pool: %v", err)
			}
			var in, failed []uint32
			for i, r := range resultsOf(t, res) {
				switch r {
				case Inserted:
					in = append(in, keys[i])
				case Failed:
					failed = append(failed, keys[i])
				default:
					t.Fatalf("element %d: %v after a failed batch", i, r)
				}
			}
			if len(in) == 0 || len(failed) == 0 || x.length() != len(in) {
				t.Fatalf("%d inserted, %d failed, Len %d", len(in), len(failed), x.length())
			}
			f, v, err := x.held(keys)
			must(t, err)
			resAt := resultsOf(t, res)
			for i, k := range keys {
				inserted := resAt[i] == Inserted
				if f[i] != inserted {
					t.Fatalf("key %#x: reported %v, now found %v", k, resAt[i], f[i])
				}
				if inserted && v != nil && v[i] != vals[i] {
					t.Fatalf("key %#x holds %#x, inserted with %#x", k, v[i], vals[i])
				}
			}
			must(t, x.remove(in))
			must(t, x.flush(ctx))
			again := failed[:len(in)/2]
			res = outDevice[uint8](t, dev, len(again))
			must(t, x.insert(toDevice(t, dev, again), toDevice(t, dev, vals[:len(again)]), res))
			for i, r := range resultsOf(t, res) {
				if r != Inserted {
					t.Fatalf("after the flush: element %d (key %#x): %v", i, again[i], r)
				}
			}
			if x.length() != len(again) {
				t.Fatalf("Len %d, want %d", x.length(), len(again))
			}
			f, _, err = x.held(again)
			must(t, err)
			if i := slices.Index(f, false); i >= 0 {
				t.Fatalf("key %#x inserted after the flush is missing", again[i])
			}
		})
	}
}
