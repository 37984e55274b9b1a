package graph

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/graph/graphio"
	"github.com/warpkit/warpkit/internal/gpurt"
	"github.com/warpkit/warpkit/internal/gputest"
	"github.com/warpkit/warpkit/slabhash"
)

// TestCUDADeviceBatches: the device-resident methods give what the
// Go-slice ones give on the CPU backend (the same RMAT graph built, updated
// and queried both ways), refuse IDs past the capacity on the device with
// nothing applied, and answer ErrClosed after Close.
func TestCUDADeviceBatches(t *testing.T) { deviceBatches(t, gputest.Device(t)) }

func deviceBatches(t *testing.T, dev *cuda.Device) {
	e, err := graphio.RMAT(12, 8, graphio.RMATOptions{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	n := e.NumVertices
	g, err := NewWeighted[uint32](Options{Backend: warpkit.CUDA, Device: dev})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	c, err := NewWeighted[uint32](Options{Backend: warpkit.CPU})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	up := func(s []uint32) cuda.Slice[uint32] {
		d, err := cuda.FromHost(dev, s)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Free() })
		return d.Sub(0, len(s))
	}
	ws := make([]uint32, len(e.Src))
	for i := range ws {
		a, b := min(e.Src[i], e.Dst[i]), max(e.Src[i], e.Dst[i])
		ws[i] = a*7919 + b
	}
	if err := g.BuildDevice(ctx, n, up(e.Src), up(e.Dst), up(ws)); err != nil {
		t.Fatal(err)
	}
	if err := c.BuildCSR(ctx, make([]uint64, n+1), nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Build(ctx, e.Src, e.Dst, ws); err != nil {
		t.Fatal(err)
	}
	same := func(where string) { t.Helper(); sameGraphs(t, where, g, c) }
	same("build")
	// Device inserts and deletes of random edges.
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 4 {
		k := 5000
		src, dst, w := make([]uint32, k), make([]uint32, k), make([]uint32, k)
		for i := range k {
			src[i], dst[i] = uint32(rng.IntN(n)), uint32(rng.IntN(n))
			w[i] = min(src[i], dst[i])*31 + max(src[i], dst[i]) + uint32(round)
		}
		res, err := cuda.Alloc[uint8](dev, k)
		if err != nil {
			t.Fatal(err)
		}
		if round%2 == 0 {
			err = g.InsertEdgesDevice(ctx, up(src), up(dst), up(w), res)
		} else {
			err = g.DeleteEdgesDevice(ctx, up(src), up(dst), res)
		}
		if err != nil {
			t.Fatal(err)
		}
		got := make([]uint8, k)
		if err := res.CopyToHost(got); err != nil {
			t.Fatal(err)
		}
		res.Free()
		want := make([]slabhash.Result, k)
		if round%2 == 0 {
			err = c.InsertEdges(ctx, src, dst, w, want)
		} else {
			err = c.DeleteEdges(ctx, src, dst, want)
		}
		if err != nil {
			t.Fatal(err)
		}
		gr := make([]slabhash.Result, k)
		for i, x := range got {
			gr[i] = slabhash.Result(x)
		}
		if !sameResults(warpkit.CUDA, false, src, dst, gr, want) {
			t.Fatalf("round %d: results differ", round)
		}
		same("round")
	}
	// Device queries.
	k := 3000
	src, dst := make([]uint32, k), make([]uint32, k)
	for i := range k {
		src[i] = uint32(rng.IntN(n))
		dst[i] = uint32(rng.IntN(n))
		if i%2 == 0 { // an edge that is there
			ns, _ := c.Neighbors(ctx, src[i])
			for v := range ns {
				dst[i] = v
				break
			}
		}
	}
	found, err := cuda.Alloc[uint8](dev, k)
	if err != nil {
		t.Fatal(err)
	}
	defer found.Free()
	if err := g.HasEdgesDevice(ctx, up(src), up(dst), found); err != nil {
		t.Fatal(err)
	}
	gotF := make([]uint8, k)
	if err := found.CopyToHost(gotF); err != nil {
		t.Fatal(err)
	}
	wantF := make([]bool, k)
	if err := c.HasEdges(ctx, src, dst, wantF); err != nil {
		t.Fatal(err)
	}
	for i := range k {
		if (gotF[i] == 1) != wantF[i] {
			t.Fatalf("edge %d-%d: found %d, want %v", src[i], dst[i], gotF[i], wantF[i])
		}
	}
	deg, err := cuda.Alloc[uint32](dev, k)
	if err != nil {
		t.Fatal(err)
	}
	defer deg.Free()
	if err := g.DegreesDevice(ctx, up(src), deg); err != nil {
		t.Fatal(err)
	}
	gotD, wantD := make([]uint32, k), make([]uint32, k)
	if err := deg.CopyToHost(gotD); err != nil {
		t.Fatal(err)
	}
	if err := c.Degrees(ctx, src, wantD); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(gotD, wantD) {
		t.Fatal("degrees differ")
	}
	// Neighbour gathers into windows sized by the degrees.
	nids := src[:200]
	deg200 := gotD[:200]
	offs := make([]uint64, len(nids)+1)
	for i, d := range deg200 {
		offs[i+1] = offs[i] + uint64(d)
	}
	doffs, err := cuda.FromHost(dev, offs)
	if err != nil {
		t.Fatal(err)
	}
	defer doffs.Free()
	nout, err := cuda.Alloc[uint32](dev, int(max(1, offs[len(nids)])))
	if err != nil {
		t.Fatal(err)
	}
	defer nout.Free()
	if err := g.NeighborsDevice(ctx, up(nids), doffs, nout.Sub(0, int(offs[len(nids)]))); err != nil {
		t.Fatal(err)
	}
	flat := make([]uint32, offs[len(nids)])
	if err := nout.Sub(0, len(flat)).CopyToHost(flat); err != nil {
		t.Fatal(err)
	}
	for i, v := range nids {
		got := slices.Clone(flat[offs[i]:offs[i+1]])
		slices.Sort(got)
		var want []uint32
		ns, _ := c.Neighbors(ctx, v)
		for u := range ns {
			want = append(want, u)
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("neighbours of %d: %v, want %v", v, got, want)
		}
	}
	if offs[len(nids)] > 0 { // windows too small, and past the end of out
		if err := g.NeighborsDevice(ctx, up(nids), doffs, nout.Sub(0, int(offs[len(nids)])-1)); !errors.Is(err, warpkit.ErrInvalidArgument) {
			t.Fatalf("a window past the end of out: %v", err)
		}
		short := slices.Clone(offs)
		for i := range short {
			short[i] /= 2
		}
		ds, _ := cuda.FromHost(dev, short)
		defer ds.Free()
		if err := g.NeighborsDevice(ctx, up(nids), ds, nout); !errors.Is(err, warpkit.ErrInvalidArgument) {
			t.Fatalf("windows smaller than the degrees: %v", err)
		}
	}
	// Vertex deletes on the device (a repeated ID among them).
	ids := []uint32{0, 1, 2, 3, 5, 8, 13, 21, 34, 3, uint32(n - 1)}
	if err := g.DeleteVerticesDevice(ctx, up(ids)); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteVertices(ctx, ids); err != nil {
		t.Fatal(err)
	}
	same("delete vertices")
	tg, err := g.TriangleCount(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := c.TriangleCount(ctx)
	if err != nil || tg != tc {
		t.Fatalf("triangles %d, the CPU backend %d (%v)", tg, tc, err)
	}
	// IDs past the capacity: refused on the device, nothing applied (the
	// hint of vertices without a table, which a build rewrites, included).
	before, _ := g.Len(ctx)
	lackBefore, err := g.e.(*gpuGraph[uint32]).lack.ToHost()
	if err != nil {
		t.Fatal(err)
	}
	bad := up([]uint32{1, uint32(n)})
	two := up([]uint32{2, 3})
	for name, err := range map[string]error{
		"insert":          g.InsertEdgesDevice(ctx, bad, two, up([]uint32{1, 1}), cuda.Slice[uint8]{}),
		"delete":          g.DeleteEdgesDevice(ctx, two, bad, cuda.Slice[uint8]{}),
		"has":             g.HasEdgesDevice(ctx, bad, two, found.Sub(0, 2)),
		"degrees":         g.DegreesDevice(ctx, bad, deg.Sub(0, 2)),
		"delete vertices": g.DeleteVerticesDevice(ctx, bad),
		"lengths":         g.HasEdgesDevice(ctx, bad, up([]uint32{1}), found.Sub(0, 2)),
		"build":           g.BuildDevice(ctx, n, two, bad, up([]uint32{1, 1})),
	} {
		if !errors.Is(err, warpkit.ErrInvalidArgument) {
			t.Errorf("%s with an ID past the capacity: %v", name, err)
		}
	}
	if after, _ := g.Len(ctx); after != before {
		t.Fatalf("refused batches changed the entries: %d → %d", before, after)
	}
	if lack, err := g.e.(*gpuGraph[uint32]).lack.ToHost(); err != nil || !slices.Equal(lack, lackBefore) {
		t.Fatalf("the refused build rewrote the tables' hint (%v)", err)
	}
	same("refused batches")
	// A directed build checks its IDs too (without the symmetry sums).
	d, err := New(Options{Backend: warpkit.CUDA, Device: dev, Directed: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.BuildDevice(ctx, 4, up([]uint32{0, 1}), up([]uint32{1, 2})); err != nil {
		t.Fatal(err)
	}
	if err := d.BuildDevice(ctx, 4, up([]uint32{0, 4}), up([]uint32{1, 2})); !errors.Is(err, warpkit.ErrInvalidArgument) {
		t.Errorf("a directed build with an ID past its vertices: %v", err)
	}
	if k, err := d.Len(ctx); err != nil || k != 2 {
		t.Errorf("the refused build changed the graph: %d entries (%v), want 2", k, err)
	}
	// A refused build counts nothing (3→1 here): the next build must not
	// size its tables over its counts.
	if err := d.BuildDevice(ctx, 4, up([]uint32{3, 0}), up([]uint32{1, 4})); !errors.Is(err, warpkit.ErrInvalidArgument) {
		t.Errorf("a directed build with an ID past its vertices: %v", err)
	}
	if err := d.BuildDevice(ctx, 4, up([]uint32{0, 1}), up([]uint32{1, 2})); err != nil {
		t.Fatal(err)
	}
	if st, err := d.Stats(ctx); err != nil || st.Buckets != 2 {
		t.Errorf("a build after a refused one: %d buckets (%v), want 2 (vertex 3 has no entries)", st.Buckets, err)
	}
	d.Close()
	if err := g.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	same("flush")
	st, err := g.Stats(ctx)
	if err != nil || st.Backend != warpkit.CUDA || st.Entries != uint64(before) || st.LongestList < 1 {
		t.Fatalf("stats %+v (%v)", st, err)
	}
	g.Close()
	if err := g.HasEdgesDevice(ctx, two, two, found.Sub(0, 2)); !errors.Is(err, warpkit.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

// TestCUDAPoolExhausted: a batch that needs more overflow slabs than
// MaxPoolBytes allows fails with ErrPoolExhausted, the edges it applied
// counted exactly (Check holds — an undirected graph symmetric —, Len =
// the Inserted results), and the graph keeps working.
func TestCUDAPoolExhausted(t *testing.T) {
	dev := gputest.Device(t)
	for _, directed := range []bool{true, false} {
		t.Run(fmt.Sprintf("directed=%v", directed), func(t *testing.T) { poolExhausted(t, dev, directed) })
	}
}

func poolExhausted(t *testing.T, dev *cuda.Device, directed bool) {
	g, err := New(Options{Backend: warpkit.CUDA, Device: dev, Directed: directed, VertexCapacity: 4, MaxPoolBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	// 40,000 vertices of one bucket each (EnsureVertices), 20 neighbours
	// each (40 undirected): 2 overflow slabs of 32 bytes a vertex, 2.4 MiB
	// in all, where 1 MiB holds 32K slabs.
	const nv = 40_000
	k := 800_000
	src, dst := make([]uint32, k), make([]uint32, k)
	for i := range k {
		src[i], dst[i] = uint32(i/20), uint32(i%20)
		if !directed {
			dst[i] = uint32((i/20 + 1 + i%20) % nv)
		}
	}
	if err := g.EnsureVertices(ctx, nv); err != nil {
		t.Fatal(err)
	}
	res := make([]slabhash.Result, k)
	err = g.InsertEdges(ctx, src, dst, res)
	if !errors.Is(err, warpkit.ErrPoolExhausted) {
		t.Fatalf("insert past MaxPoolBytes: %v", err)
	}
	ins := 0
	for _, r := range res {
		if r == slabhash.Inserted {
			ins++
		}
	}
	want := ins
	if !directed {
		want = 2 * ins
	}
	if n, _ := g.Len(ctx); n != want || ins == 0 {
		t.Fatalf("Len %d, Inserted results %d", n, ins)
	}
	if err := g.Check(ctx); err != nil {
		t.Fatal(err)
	}
	logStats := func(when string) {
		st, err := g.Stats(ctx)
		t.Logf("%s: %+v (%v)", when, st, err)
	}
	logStats("exhausted")
	// Deleting frees room: more fits after a flush.
	if err := g.DeleteEdges(ctx, src[:ins/2], dst[:ins/2], nil); err != nil {
		t.Fatal(err)
	}
	if err := g.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	logStats("deleted and flushed")
	if err := g.InsertEdges(ctx, src[:ins/8], dst[:ins/8], nil); err != nil {
		t.Fatal(err)
	}
	if err := g.Check(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestCUDABuildSymmetric: a build whose edges list both directions of
// every edge (found by gr_symmetry: inserted as given, in one pass) gives
// the CPU backend's graph, with repeated edges and self-loops; one that
// runs out of pool part way fails with ErrPoolExhausted and leaves a
// symmetric graph with exact counts.
func TestCUDABuildSymmetric(t *testing.T) {
	dev := gputest.Device(t)
	e, err := graphio.RMAT(14, 8, graphio.RMATOptions{Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	// Both directions of every edge, repeats and self-loops kept.
	src, dst := bothWays(e.Src, e.Dst)
	for _, loops := range []bool{false, true} {
		g, err := New(Options{Backend: warpkit.CUDA, Device: dev, AllowSelfLoops: loops})
		if err != nil {
			t.Fatal(err)
		}
		c, err := New(Options{Backend: warpkit.CPU, AllowSelfLoops: loops})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Build(ctx, src, dst); err != nil {
			t.Fatal(err)
		}
		if err := c.Build(ctx, src, dst); err != nil {
			t.Fatal(err)
		}
		a, err := g.ToCSR(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.ToCSR(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(a.Offsets, b.Offsets) || !slices.Equal(a.Cols, b.Cols) {
			t.Fatalf("self-loops %v: the CUDA graph differs from the CPU graph", loops)
		}
		gs, _ := g.Stats(ctx)
		cs, _ := c.Stats(ctx)
		if gs.Entries != cs.Entries || gs.Edges != cs.Edges || gs.SelfLoopsSkipped != cs.SelfLoopsSkipped {
			t.Fatalf("self-loops %v: stats %+v, the CPU backend %+v", loops, gs, cs)
		}
		// The adjacency's bytes are its dictionary entries and slabs (no
		// owner array beside the arena).
		if v := uint64(gs.Vertices); gs.Buckets == 0 || cs.Buckets != 0 ||
			gs.Bytes != int64(16*v+32*(gs.Buckets+gs.OverflowSlabs)) {
			t.Fatalf("self-loops %v: %d bytes for %d vertices, %d buckets, %d overflow slabs (CPU: %d buckets)",
				loops, gs.Bytes, v, gs.Buckets, gs.OverflowSlabs, cs.Buckets)
		}
		// The build's per-vertex scratch (20 bytes a vertex) stays for the
		// next build and is reported, as do the columns ToCSR gathered into
		// (4 bytes an entry); the CPU backend keeps none.
		if v := int64(gs.Vertices); gs.ScratchBytes < 20*v+4*int64(gs.Entries) || cs.ScratchBytes != 0 {
			t.Fatalf("scratch %d bytes for %d vertices (CPU: %d)", gs.ScratchBytes, v, cs.ScratchBytes)
		}
		gt, err := g.TriangleCount(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ct, err := c.TriangleCount(ctx); err != nil || ct != gt {
			t.Fatalf("self-loops %v: %d triangles, the CPU backend %d (%v)", loops, gt, ct, err)
		}
		if err := g.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if fs, err := g.Stats(ctx); err != nil || fs.ScratchBytes != 0 || fs.Entries != gs.Entries {
			t.Fatalf("after Flush: %+v, %v (scratch should be freed, entries kept)", fs, err)
		}
		if err := g.Check(ctx); err != nil {
			t.Fatal(err)
		}
		g.Close()
		c.Close()
	}
	// A pool of one block (1024 slabs) cannot hold the overflow; the build
	// runs in chunks of 4096 edges, so that the reverses of edges that went
	// in lie in chunks that never run.
	defer func(c int) { buildChunk = c }(buildChunk)
	buildChunk = 1 << 12
	g, err := New(Options{Backend: warpkit.CUDA, Device: dev, MaxPoolBytes: 32 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.Build(ctx, src, dst); !errors.Is(err, warpkit.ErrPoolExhausted) {
		t.Fatalf("a build past MaxPoolBytes: %v", err)
	}
	if err := g.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := g.Len(ctx); n == 0 {
		t.Fatal("nothing built")
	}
}

// TestCUDARehash: an incremental build into one bucket per vertex (the
// thesis's mode) makes long lists; Rehash moves the tables that outgrew
// their buckets (Stats.LongestList falls) and the graph answers as the CPU
// backend's before and after, through later updates, vertex deletes and
// triangle counts; Check's pool accounting holds (the old lists freed). A
// rehash that runs out of pool leaves the graph as it was.
func TestCUDARehash(t *testing.T) {
	dev := gputest.Device(t)
	e, err := graphio.RMAT(13, 16, graphio.RMATOptions{Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewWeighted[uint64](Options{Backend: warpkit.CUDA, Device: dev, VertexCapacity: e.NumVertices})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	c, err := NewWeighted[uint64](Options{Backend: warpkit.CPU, VertexCapacity: e.NumVertices})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ws := make([]uint64, len(e.Src))
	for i := range ws {
		ws[i] = uint64(min(e.Src[i], e.Dst[i]))<<32 | uint64(max(e.Src[i], e.Dst[i]))
	}
	for lo := 0; lo < len(e.Src); lo += 1 << 15 {
		hi := min(len(e.Src), lo+1<<15)
		if err := g.InsertEdges(ctx, e.Src[lo:hi], e.Dst[lo:hi], ws[lo:hi], nil); err != nil {
			t.Fatal(err)
		}
		if err := c.InsertEdges(ctx, e.Src[lo:hi], e.Dst[lo:hi], ws[lo:hi], nil); err != nil {
			t.Fatal(err)
		}
	}
	same := func(where string) { t.Helper(); sameGraphs(t, where, g, c) }
	same("incremental build")
	before, _ := g.Stats(ctx)
	if err := g.Rehash(ctx); err != nil {
		t.Fatal(err)
	}
	after, _ := g.Stats(ctx)
	if after.LongestList >= before.LongestList || after.Entries != before.Entries {
		t.Fatalf("rehash: %+v → %+v", before, after)
	}
	t.Logf("longest list %d → %d slabs, %d → %d overflow slabs", before.LongestList, after.LongestList, before.OverflowSlabs, after.OverflowSlabs)
	same("rehash")
	if err := g.Rehash(ctx); err != nil { // nothing left to move
		t.Fatal(err)
	}
	same("second rehash")
	rng := rand.New(rand.NewPCG(3, 4))
	src, dst := make([]uint32, 4000), make([]uint32, 4000)
	w := make([]uint64, 4000)
	for i := range src {
		src[i], dst[i] = uint32(rng.IntN(e.NumVertices)), uint32(rng.IntN(e.NumVertices))
		w[i] = uint64(min(src[i], dst[i]))<<32 | uint64(max(src[i], dst[i]))
	}
	for _, x := range []*Weighted[uint64]{g, c} {
		if err := x.InsertEdges(ctx, src, dst, w, nil); err != nil {
			t.Fatal(err)
		}
		if err := x.DeleteEdges(ctx, e.Src[:5000], e.Dst[:5000], nil); err != nil {
			t.Fatal(err)
		}
		if err := x.DeleteVertices(ctx, []uint32{0, 1, 2, 3, 100, 1000}); err != nil {
			t.Fatal(err)
		}
	}
	same("updates after the rehash")
	tg, err := g.TriangleCount(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tc, _ := c.TriangleCount(ctx); tg != tc {
		t.Fatalf("triangles %d, the CPU backend %d", tg, tc)
	}

	// Options.RehashChain grows the tables ahead of every insert batch:
	// the same incremental build never makes a long list.
	h, err := NewWeighted[uint64](Options{Backend: warpkit.CUDA, Device: dev, VertexCapacity: e.NumVertices, RehashChain: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	hc, _ := NewWeighted[uint64](Options{Backend: warpkit.CPU, VertexCapacity: e.NumVertices})
	defer hc.Close()
	for lo := 0; lo < len(e.Src); lo += 1 << 15 {
		hi := min(len(e.Src), lo+1<<15)
		for _, x := range []*Weighted[uint64]{h, hc} {
			if err := x.InsertEdges(ctx, e.Src[lo:hi], e.Dst[lo:hi], ws[lo:hi], nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	sameGraphs(t, "RehashChain", h, hc)
	if st, _ := h.Stats(ctx); st.LongestList > 4 {
		t.Fatalf("RehashChain 1: longest list %d slabs", st.LongestList)
	} else {
		t.Logf("RehashChain 1: longest list %d slabs, %d overflow slabs", st.LongestList, st.OverflowSlabs)
	}

	// A pool that holds the long lists but not them and the new tables'
	// overflow together: the rehash fails and changes nothing. About 180
	// random neighbours a vertex (a list of 26 slabs; 30,000 overflow
	// slabs of the pool's 32,768): their new tables are 37 buckets, which
	// a failed rehash gives back in chunks, and their hashes fill some
	// buckets past 7, which takes more overflow than the pool has left
	// (neighbours in arithmetic progression, tried first, hashed so evenly
	// that the rehash took no overflow slab at all).
	const nv, deg = 1200, 200
	p, err := New(Options{Backend: warpkit.CUDA, Device: dev, Directed: true, VertexCapacity: nv, MaxPoolBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	prng := rand.New(rand.NewPCG(5, 6))
	ps, pd := make([]uint32, nv*deg), make([]uint32, nv*deg)
	for i := range ps {
		ps[i], pd[i] = uint32(i/deg), uint32((i/deg+1+prng.IntN(nv-1))%nv)
	}
	if err := p.InsertEdges(ctx, ps, pd, nil); err != nil {
		t.Fatalf("the long lists do not fit the pool: %v", err)
	}
	want, _ := p.ToCSR(ctx, true)
	err = p.Rehash(ctx)
	t.Logf("rehash in a tight pool: %v", err)
	if !errors.Is(err, warpkit.ErrPoolExhausted) {
		t.Fatalf("rehash in a tight pool: %v, want ErrPoolExhausted", err)
	}
	got, _ := p.ToCSR(ctx, true)
	if !slices.Equal(got.Offsets, want.Offsets) || !slices.Equal(got.Cols, want.Cols) {
		t.Fatal("the graph changed across a rehash")
	}
	if err := p.Check(ctx); err != nil {
		t.Fatal(err)
	}
}

// sameGraphs checks that a CUDA graph holds what its CPU twin holds, weights
// included, and passes Check.
func sameGraphs[W Weight](t *testing.T, where string, g, c *Weighted[W]) {
	t.Helper()
	a, aw, err := g.ToCSRWeights(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	b, bw, err := c.ToCSRWeights(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Offsets, b.Offsets) || !slices.Equal(a.Cols, b.Cols) || !slices.Equal(aw, bw) {
		t.Fatalf("%s: the CUDA graph differs from the CPU graph", where)
	}
	if err := g.Check(ctx); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
}

// TestCUDASortedCSR: the sorted-CSR baseline holds what the CPU backend
// holds (entries, triangles) after its build and after merge-inserts of
// batches with repeats and self-loops.
func TestCUDASortedCSR(t *testing.T) {
	dev := gputest.Device(t)
	e, err := graphio.RMAT(12, 8, graphio.RMATOptions{Seed: 21})
	if err != nil {
		t.Fatal(err)
	}
	up := func(s []uint32) cuda.Slice[uint32] {
		d, err := cuda.FromHost(dev, s)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Free() })
		return d.Sub(0, len(s))
	}
	half := len(e.Src) / 2
	s, err := NewSortedCSR(ctx, dev, e.NumVertices, up(e.Src[:half]), up(e.Dst[:half]))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, _ := New(Options{Backend: warpkit.CPU, VertexCapacity: e.NumVertices})
	defer c.Close()
	if err := c.InsertEdges(ctx, e.Src[:half], e.Dst[:half], nil); err != nil {
		t.Fatal(err)
	}
	check := func(where string) {
		t.Helper()
		n, _ := c.Len(ctx)
		want, _ := c.TriangleCount(ctx)
		got, err := s.TriangleCount(ctx)
		if err != nil || got != want || s.Len() != n {
			t.Fatalf("%s: %d entries and %d triangles (%v), want %d and %d", where, s.Len(), got, err, n, want)
		}
	}
	check("build")
	for lo := half; lo < len(e.Src); lo += 4000 {
		hi := min(len(e.Src), lo+4000)
		if err := s.Insert(ctx, up(e.Src[lo:hi]), up(e.Dst[lo:hi])); err != nil {
			t.Fatal(err)
		}
		if err := c.InsertEdges(ctx, e.Src[lo:hi], e.Dst[lo:hi], nil); err != nil {
			t.Fatal(err)
		}
	}
	check("merge-inserts")
	s.Close()
	if _, err := s.TriangleCount(ctx); !errors.Is(err, warpkit.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

// TestCUDATablesOnDemand: a build gives no table to a vertex without
// entries and one bucket to a table of at most 7; finds, deletes,
// neighbours, degrees and triangle counts see such a vertex as empty, and
// an insert batch from it gives it a table first (a bucket at the arena's
// end: in prep, or after the apply launch failed it) and then applies as
// the CPU backend does — directed and undirected, with tables grown ahead
// of inserts (RehashChain) or not.
func TestCUDATablesOnDemand(t *testing.T) { tablesOnDemand(t, gputest.Device(t)) }

func tablesOnDemand(t *testing.T, dev *cuda.Device) {
	const nv = 400 // vertices 100..399 have no entries at the build
	var bs, bd []uint32
	edge := func(u, v uint32) { bs, bd = append(bs, u), append(bd, v) }
	for v := uint32(1); v < 40; v++ {
		edge(0, v) // a hub
	}
	for v := uint32(40); v < 99; v++ {
		edge(v, v+1) // a path: tables of 1-2 entries
	}
	for v := uint32(10); v < 17; v++ {
		edge(40, v) // vertex 40: 8 entries with the path's first edge (2 buckets)
	}
	edge(1, 2)
	edge(2, 3)
	edge(1, 3)
	for _, claim := range []bool{true, false} {
		for _, directed := range []bool{false, true} {
			for _, chain := range []float64{0, 1} {
				t.Run(fmt.Sprintf("prep=%v/directed=%v/chain=%v", claim, directed, chain), func(t *testing.T) {
					prepClaims = claim
					defer func() { prepClaims = true }()
					opts := Options{Backend: warpkit.CUDA, Device: dev, Directed: directed, VertexCapacity: nv, RehashChain: chain}
					g, c := cudaAndOracle(t, opts, NewWeighted[uint64])
					ws := make([]uint64, len(bs))
					for i := range ws {
						ws[i] = uint64(i + 1)
					}
					for _, x := range []*Weighted[uint64]{g, c} {
						if err := x.Build(ctx, bs, bd, ws); err != nil {
							t.Fatal(err)
						}
					}
					sameGraphs(t, "build", g, c)
					st, err := g.Stats(ctx)
					if err != nil {
						t.Fatal(err)
					}
					// No bucket for a vertex without entries, one for up to 7,
					// ceil(entries / 5) past that (the default load factor).
					const slab = 128 // a Weighted[uint64] map slab
					ids := make([]uint32, nv)
					for i := range ids {
						ids[i] = uint32(i)
					}
					deg := make([]uint32, nv)
					if err := c.Degrees(ctx, ids, deg); err != nil {
						t.Fatal(err)
					}
					want := uint64(0)
					for _, d := range deg {
						switch {
						case d == 0:
						case d <= 7:
							want++
						default:
							want += uint64(d+4) / 5
						}
					}
					if st.Buckets != want || st.Bytes != int64(16*nv+slab*(st.Buckets+st.OverflowSlabs)) {
						t.Fatalf("build: %d buckets (want %d), %d bytes, %d overflow", st.Buckets, want, st.Bytes, st.OverflowSlabs)
					}
					// Queries, deletes, neighbours and degrees of vertices without
					// a table: nothing there.
					qs, qd := []uint32{100, 150, 399, 0, 99}, []uint32{0, 151, 1, 100, 98}
					for _, x := range []*Weighted[uint64]{g, c} {
						found := make([]bool, len(qs))
						out := make([]uint64, len(qs))
						if err := x.Weights(ctx, qs, qd, out, found); err != nil {
							t.Fatal(err)
						}
						want := []bool{false, false, false, false, !directed}
						if !slices.Equal(found, want) {
							t.Fatalf("%v: found %v, want %v", x.Backend(), found, want)
						}
						res := make([]slabhash.Result, 3)
						if err := x.DeleteEdges(ctx, qs[:3], qd[:3], res); err != nil {
							t.Fatal(err)
						}
						for i, r := range res {
							if r != slabhash.NotFound {
								t.Fatalf("%v: delete %d: %v", x.Backend(), i, r)
							}
						}
						nb, err := x.Neighbors(ctx, 150)
						if err != nil {
							t.Fatal(err)
						}
						for v := range nb {
							t.Fatalf("%v: vertex 150 has neighbour %d", x.Backend(), v)
						}
						two := make([]uint32, 2)
						if err := x.Degrees(ctx, []uint32{150, 0}, two); err != nil || two[0] != 0 || two[1] != 39 {
							t.Fatalf("%v: degrees %v (%v)", x.Backend(), two, err)
						}
					}
					countsAgree(t, "build", g, c)
					// Inserts from and into vertices without a table: a new hub
					// (200, 30 entries in one batch: its bucket and overflow), pairs
					// of new vertices, repeats, edges back into the built part.
					rng := rand.New(rand.NewPCG(7, uint64(len(t.Name()))))
					var is, id []uint32
					for v := uint32(0); v < 30; v++ {
						is, id = append(is, 200), append(id, 300+v)
					}
					for range 300 {
						is, id = append(is, 100+uint32(rng.IntN(300))), append(id, uint32(rng.IntN(nv)))
					}
					is, id = append(is, 200, 201, 201), append(id, 301, 5, 5)
					iw := make([]uint64, len(is))
					for i := range iw {
						iw[i] = uint64(1000 + i)
					}
					gr, cr := make([]slabhash.Result, len(is)), make([]slabhash.Result, len(is))
					if err := g.InsertEdges(ctx, is, id, iw, gr); err != nil {
						t.Fatal(err)
					}
					if err := c.InsertEdges(ctx, is, id, iw, cr); err != nil {
						t.Fatal(err)
					}
					// Which copy of a repeated edge is Inserted differs by backend;
					// how many of each result does not.
					tally := func(rs []slabhash.Result) map[slabhash.Result]int {
						m := map[slabhash.Result]int{}
						for _, r := range rs {
							m[r]++
						}
						return m
					}
					if a, b := tally(gr), tally(cr); fmt.Sprint(a) != fmt.Sprint(b) || a[slabhash.Failed] != 0 {
						t.Fatalf("insert results %v, the CPU backend's %v", a, b)
					}
					// Weights of repeated edges may differ by backend: compare
					// after setting every weight once more, one edge per batch
					// element.
					sameCSR(t, "inserts", g, c)
					after, err := g.Stats(ctx)
					if err != nil {
						t.Fatal(err)
					}
					// Prep gave the tables, or (prep's claims off, no tables grown
					// ahead) the apply launch failed the inserts and giveTables did.
					if late := g.e.(*gpuGraph[uint64]).lateTables; (claim || chain > 0) != (late == 0) {
						t.Fatalf("inserts: %d tables given after the apply launch", late)
					}
					if after.Buckets <= st.Buckets || after.Bytes != int64(16*nv+slab*(after.Buckets+after.OverflowSlabs)) {
						t.Fatalf("inserts: %d buckets after %d, %d bytes", after.Buckets, st.Buckets, after.Bytes)
					}
					if err := g.Check(ctx); err != nil {
						t.Fatal(err)
					}
					countsAgree(t, "inserts", g, c)
					for _, x := range []*Weighted[uint64]{g, c} {
						if err := x.DeleteVertices(ctx, []uint32{200, 399, 0}); err != nil {
							t.Fatal(err)
						}
					}
					sameCSR(t, "vertex deletes", g, c)
					if err := g.Rehash(ctx); err != nil {
						t.Fatal(err)
					}
					sameCSR(t, "rehash", g, c)
					countsAgree(t, "rehash", g, c)
					if err := g.Check(ctx); err != nil {
						t.Fatal(err)
					}
				})
			}
		}
	}
}

// csrGraph is what sameCSR reads of a graph, weighted or not.
type csrGraph interface {
	ToCSR(ctx context.Context, sorted bool) (*CSR, error)
	Check(ctx context.Context) error
}

// sameCSR compares the two graphs' sorted adjacency (not weights) and
// checks g.
func sameCSR(t *testing.T, where string, g, c csrGraph) {
	t.Helper()
	a, err := g.ToCSR(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.ToCSR(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Offsets, b.Offsets) || !slices.Equal(a.Cols, b.Cols) {
		t.Fatalf("%s: the CUDA graph differs from the CPU graph", where)
	}
	if err := g.Check(ctx); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
}

// countsAgree compares the graphs' triangle counts (undirected graphs).
func countsAgree[W Weight](t *testing.T, where string, g, c *Weighted[W]) {
	t.Helper()
	a, err := g.TriangleCount(ctx)
	if err != nil {
		if errors.Is(err, warpkit.ErrInvalidArgument) {
			return // directed
		}
		t.Fatal(err)
	}
	b, err := c.TriangleCount(ctx)
	if err != nil || a != b {
		t.Fatalf("%s: %d triangles, the CPU backend %d (%v)", where, a, b, err)
	}
}

// TestCUDAMoveChunks: tables of more than chunkBuckets buckets that move
// (ahead of an insert batch at RehashChain 1, or by Rehash) are gathered
// and released in chunks, a tile each: two hubs' entries, with tombstones
// among them, all arrive in their new buckets with their weights, beside
// a thousand small tables moving in the same batch, and the graph stays
// as the CPU backend's. Directed and undirected, weighted and not.
func TestCUDAMoveChunks(t *testing.T) { moveChunks(t, gputest.Device(t)) }

func moveChunks(t *testing.T, dev *cuda.Device) {
	const nv = 3000
	hubs := []uint32{0, 1700} // in different warps of the plan
	// Each hub's edges to lo..hi-1 (every step-th, itself and the other
	// hub left out), weighted by their ends.
	edges := func(lo, hi, step uint32) (s, d []uint32, w []uint64) {
		for _, h := range hubs {
			for v := lo; v < hi; v += step {
				if v != hubs[0] && v != hubs[1] {
					s, d, w = append(s, h), append(d, v), append(w, uint64(v)<<32|uint64(h))
				}
			}
		}
		return s, d, w
	}
	// nb is vertex v's buckets in g's dictionary.
	nb := func(t *testing.T, g *Weighted[uint64], v uint32) uint32 {
		t.Helper()
		e := g.e.(*gpuGraph[uint64])
		var ent [vertexWords]uint32
		if err := e.dict.Sub(int(v)*vertexWords, int(v+1)*vertexWords).CopyToHost(ent[:]); err != nil {
			t.Fatal(err)
		}
		return ent[1]
	}
	for _, directed := range []bool{true, false} {
		for _, chain := range []float64{1, 0} {
			t.Run(fmt.Sprintf("directed=%v/chain=%v", directed, chain), func(t *testing.T) {
				opts := Options{Backend: warpkit.CUDA, Device: dev, Directed: directed, VertexCapacity: nv, RehashChain: chain}
				g, err := NewWeighted[uint64](opts)
				if err != nil {
					t.Fatal(err)
				}
				defer g.Close()
				u, err := New(opts)
				if err != nil {
					t.Fatal(err)
				}
				defer u.Close()
				cpu := Options{Backend: warpkit.CPU, Directed: directed, VertexCapacity: nv}
				c, _ := NewWeighted[uint64](cpu)
				defer c.Close()
				uc, _ := New(cpu)
				defer uc.Close()
				same := func(where string) {
					t.Helper()
					sameGraphs(t, where, g, c)
					sameCSR(t, where+", unweighted", u, uc)
				}
				insert := func(where string, s, d []uint32, w []uint64) {
					t.Helper()
					for _, x := range []*Weighted[uint64]{g, c} {
						if err := x.InsertEdges(ctx, s, d, w, nil); err != nil {
							t.Fatalf("%s: %v", where, err)
						}
					}
					for _, x := range []*Graph{u, uc} {
						if err := x.InsertEdges(ctx, s, d, nil); err != nil {
							t.Fatalf("%s: %v", where, err)
						}
					}
					same(where)
				}
				rehash := func(where string) {
					t.Helper()
					if chain != 0 {
						return
					}
					for _, x := range []interface{ Rehash(context.Context) error }{g, u} {
						if err := x.Rehash(ctx); err != nil {
							t.Fatal(err)
						}
					}
					same(where + ", rehash")
				}
				// 300 entries a hub in 60 buckets at the default load: a build.
				s, d, w := edges(2, 302, 1)
				for _, x := range []*Weighted[uint64]{g, c} {
					if err := x.Build(ctx, s, d, w); err != nil {
						t.Fatal(err)
					}
				}
				for _, x := range []*Graph{u, uc} {
					if err := x.Build(ctx, s, d); err != nil {
						t.Fatal(err)
					}
				}
				same("build")
				for _, h := range hubs {
					if b := nb(t, g, h); b <= chunkBuckets {
						t.Fatalf("hub %d: %d buckets after the build, want more than a chunk (%d)", h, b, chunkBuckets)
					}
				}
				// Tombstones among them.
				s, d, _ = edges(2, 302, 3)
				for _, x := range []interface {
					DeleteEdges(context.Context, []uint32, []uint32, []slabhash.Result) error
				}{g, c, u, uc} {
					if err := x.DeleteEdges(ctx, s, d, nil); err != nil {
						t.Fatal(err)
					}
				}
				same("deletes")
				// 2,600 more a hub, and 12 edges from each of a thousand
				// other vertices: at RehashChain 1 the hubs' 60 buckets (two
				// chunks each) move with the small tables before the batch
				// inserts; without, the lists grow and Rehash moves them.
				before := []uint32{nb(t, g, hubs[0]), nb(t, g, hubs[1])}
				s, d, w = edges(302, nv, 1)
				for v := uint32(2); v < 1002; v++ {
					for k := range uint32(12) {
						s, d, w = append(s, v), append(d, 1002+(v*37+k*101)%(nv-1002)), append(w, uint64(v+k))
					}
				}
				insert("a batch past the tables", s, d, w)
				rehash("a batch past the tables")
				for i, h := range hubs {
					if b := nb(t, g, h); b <= before[i] {
						t.Fatalf("hub %d: buckets %d -> %d: the table did not move", h, before[i], b)
					}
				}
				// And once more, from the large tables.
				s, d, w = edges(2, nv, 2)
				for i := range w {
					w[i]++
				}
				insert("a second batch", s, d, w)
				rehash("a second batch")
			})
		}
	}
}

// TestCUDAGrowForCounts: an insert batch that grows its tables first
// (RehashChain) plans from per-source counts that the plan zeroes again, so
// batches of edges already present move a table once (the first batch's
// count is an upper bound of what it adds) and never again: a count left
// over from an earlier batch would move it again and again. Directed and
// undirected, before and after the vertices (and the count array) grow.
func TestCUDAGrowForCounts(t *testing.T) { growForCounts(t, gputest.Device(t)) }

func growForCounts(t *testing.T, dev *cuda.Device) {
	for _, directed := range []bool{true, false} {
		g, err := New(Options{Backend: warpkit.CUDA, Device: dev, Directed: directed, VertexCapacity: 64, RehashChain: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		buckets := func() uint64 {
			t.Helper()
			st, err := g.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return st.Buckets
		}
		entries := 0
		// Vertex v: 5 entries in one bucket (7 slots at RehashChain 1),
		// then batches of 3 of them: the first moves the table (5 + 3 > 7),
		// the others find it large enough.
		repeat := func(v uint32) {
			t.Helper()
			b0 := buckets()
			src, dst := []uint32{v, v, v}, []uint32{1, 2, 3}
			res := make([]slabhash.Result, len(src))
			if err := g.InsertEdges(ctx, src, dst, res); err != nil {
				t.Fatal(err)
			}
			b1 := buckets()
			if b1 <= b0 {
				t.Fatalf("directed %v: a batch that may fill vertex %d past a list: buckets %d -> %d, want the table moved", directed, v, b0, b1)
			}
			for i := range 10 {
				if err := g.InsertEdges(ctx, src, dst, res); err != nil {
					t.Fatal(err)
				}
				for j, r := range res {
					if r != slabhash.Present {
						t.Fatalf("directed %v, vertex %d, batch %d: edge %d: %v, want Present", directed, v, i, j, r)
					}
				}
				if b := buckets(); b != b1 {
					t.Fatalf("directed %v, vertex %d, batch %d of edges present: buckets %d -> %d (a count left from an earlier batch?)", directed, v, i, b1, b)
				}
			}
			if err := g.Check(ctx); err != nil {
				t.Fatal(err)
			}
			if n, err := g.Len(ctx); err != nil || n != entries {
				t.Fatalf("directed %v: Len %d, %v, want %d", directed, n, err, entries)
			}
		}
		five := []uint32{1, 2, 3, 4, 5}
		if err := g.Build(ctx, []uint32{0, 0, 0, 0, 0}, five); err != nil {
			t.Fatal(err)
		}
		perEdge := 1
		if !directed {
			perEdge = 2
		}
		entries = 5 * perEdge
		repeat(0)
		// More vertices (the count array grows with them), a vertex past
		// the old capacity filled to 5 by an insert, then the same.
		if err := g.EnsureVertices(ctx, 5000); err != nil {
			t.Fatal(err)
		}
		if err := g.InsertEdges(ctx, []uint32{4000, 4000, 4000, 4000, 4000}, five, nil); err != nil {
			t.Fatal(err)
		}
		entries += 5 * perEdge
		repeat(4000)
	}
}

// TestCUDAInsertBothExhausted: an undirected insert batch (both directions
// in one launch) that runs out of pool part way, with every edge listed
// twice (once reversed), fails with ErrPoolExhausted and leaves a symmetric
// graph in which exactly the edges reported Inserted or Present are, and
// none reported Failed; the graph keeps working.
func TestCUDAInsertBothExhausted(t *testing.T) { insertBothExhausted(t, gputest.Device(t)) }

func insertBothExhausted(t *testing.T, dev *cuda.Device) {
	// One pool block (1024 slabs of 32 bytes) where the batch needs about
	// 2 overflow slabs a vertex.
	g, err := New(Options{Backend: warpkit.CUDA, Device: dev, MaxPoolBytes: 32 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	const nv, deg = 1500, 10
	if err := g.EnsureVertices(ctx, nv); err != nil {
		t.Fatal(err)
	}
	// A few edges present before the batch: they stay whatever fails.
	pre := [][2]uint32{{0, 1}, {7, 300}, {1499, 2}}
	for _, e := range pre {
		if err := g.InsertEdges(ctx, []uint32{e[0]}, []uint32{e[1]}, nil); err != nil {
			t.Fatal(err)
		}
	}
	var src, dst []uint32
	for u := uint32(0); u < nv; u++ {
		for k := uint32(1); k <= deg; k++ {
			v := (u + 37*k) % nv
			src, dst = append(src, u, v), append(dst, v, u)
		}
	}
	for _, e := range pre {
		src, dst = append(src, e[1]), append(dst, e[0])
	}
	res := make([]slabhash.Result, len(src))
	err = g.InsertEdges(ctx, src, dst, res)
	if !errors.Is(err, warpkit.ErrPoolExhausted) {
		t.Fatalf("insert past MaxPoolBytes: %v", err)
	}
	found := make([]bool, len(src))
	if err := g.HasEdges(ctx, src, dst, found); err != nil {
		t.Fatal(err)
	}
	in := map[[2]uint32]bool{}
	failed := 0
	for i, r := range res {
		switch r {
		case slabhash.Inserted, slabhash.Present:
			if !found[i] {
				t.Fatalf("edge %d (%d, %d): %v, but not in the graph", i, src[i], dst[i], r)
			}
		case slabhash.Failed:
			failed++
			if found[i] {
				t.Fatalf("edge %d (%d, %d): Failed, but in the graph", i, src[i], dst[i])
			}
		default:
			t.Fatalf("edge %d: %v", i, r)
		}
		if found[i] {
			in[[2]uint32{min(src[i], dst[i]), max(src[i], dst[i])}] = true
		}
	}
	for _, e := range pre {
		if !in[[2]uint32{min(e[0], e[1]), max(e[0], e[1])}] {
			t.Fatalf("edge %v, present before the batch, is gone", e)
		}
	}
	if n, err := g.Len(ctx); err != nil || n != 2*len(in) || failed == 0 || len(in) <= len(pre) {
		t.Fatalf("Len %d (%v), %d distinct edges in, %d results Failed", n, err, len(in), failed)
	}
	if err := g.Check(ctx); err != nil {
		t.Fatal(err)
	}
	// Deleting what went in frees room for more.
	var ds, dd []uint32
	for e := range in {
		ds, dd = append(ds, e[0]), append(dd, e[1])
	}
	if err := g.DeleteEdges(ctx, ds, dd, nil); err != nil {
		t.Fatal(err)
	}
	if err := g.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.InsertEdges(ctx, src[:200], dst[:200], nil); err != nil {
		t.Fatal(err)
	}
	if err := g.Check(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestCUDAInsertStoppedBeforeApply: an undirected insert batch whose
// context is cancelled after prep, before its apply launch, applies
// nothing and takes nothing away — edges present before it stay, also
// when the batch holds them — and one with an ID past the capacity (a
// device batch) is refused without touching the graph.
func TestCUDAInsertStoppedBeforeApply(t *testing.T) { insertStoppedBeforeApply(t, gputest.Device(t)) }

func insertStoppedBeforeApply(t *testing.T, dev *cuda.Device) {
	defer func() { beforeInsertBoth = nil }()
	for _, chain := range []float64{0, 1} {
		g, err := New(Options{Backend: warpkit.CUDA, Device: dev, VertexCapacity: 16, RehashChain: chain})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		src, dst := []uint32{0, 1, 2}, []uint32{1, 2, 3}
		if err := g.InsertEdges(ctx, src, dst, nil); err != nil {
			t.Fatal(err)
		}
		intact := func(when string) {
			t.Helper()
			found := make([]bool, 3)
			if err := g.HasEdges(ctx, dst, src, found); err != nil {
				t.Fatal(err)
			}
			if n, err := g.Len(ctx); err != nil || n != 6 || !found[0] || !found[1] || !found[2] {
				t.Fatalf("chain %v, %s: Len %d (%v), reverses found %v; want the 3 edges as they were", chain, when, n, err, found)
			}
			if err := g.Check(ctx); err != nil {
				t.Fatal(err)
			}
		}
		c, cancel := context.WithCancel(ctx)
		beforeInsertBoth = cancel
		res := make([]slabhash.Result, 4)
		err = g.InsertEdges(c, []uint32{0, 1, 2, 5}, []uint32{1, 2, 3, 6}, res)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("chain %v: an insert cancelled before its launch: %v", chain, err)
		}
		intact("cancelled")
		ds, err := cuda.Alloc[uint32](dev, 2)
		if err != nil {
			t.Fatal(err)
		}
		defer ds.Free()
		dd, err := cuda.Alloc[uint32](dev, 2)
		if err != nil {
			t.Fatal(err)
		}
		defer dd.Free()
		if err := ds.CopyFromHost([]uint32{0, 1 << 30}); err != nil {
			t.Fatal(err)
		}
		if err := dd.CopyFromHost([]uint32{1, 2}); err != nil {
			t.Fatal(err)
		}
		c, cancel = context.WithCancel(ctx)
		beforeInsertBoth = cancel
		if err := g.InsertEdgesDevice(c, ds, dd, cuda.Slice[uint8]{}); err == nil {
			t.Fatalf("chain %v: a device batch with an ID past the capacity applied", chain)
		}
		beforeInsertBoth = nil
		intact("rejected")
		if err := g.InsertEdgesDevice(ctx, ds, dd, cuda.Slice[uint8]{}); !errors.Is(err, warpkit.ErrInvalidArgument) {
			t.Fatalf("chain %v: a device batch with an ID past the capacity: %v", chain, err)
		}
		intact("rejected again")
	}
}

// TestCUDAGatherShapes: an unweighted graph's gather (gr_gather_set_vertices
// and gr_gather_set_items, under ToCSR, Check and TriangleCount) against
// the CPU backend over every shape of table it treats apart.
func TestCUDAGatherShapes(t *testing.T) { gatherShapes(t, gputest.Device(t)) }

// gatherShapes builds tables of no bucket, one (its lane alone writes it),
// three and gatherWarpBuckets (lanes share it), one more (a warp's item)
// and a hub of several 64-bucket items; then grows one-bucket tables into long overflow lists (RehashChain
// 0: no table grows), gives tables late (inserts from vertices that had
// none: buckets at the arena's end) and leaves tombstones (deletes).
func gatherShapes(t *testing.T, dev *cuda.Device) {
	const nv, hubDeg = 3000, 2500 // vertices 2504.. have no entries at the build
	var bs, bd []uint32
	edge := func(u, v uint32) { bs, bd = append(bs, u), append(bd, v) }
	for v := uint32(1); v <= hubDeg; v++ {
		edge(0, v) // 2500 entries: 500 buckets, 8 items
	}
	shared := uint32(gatherWarpBuckets * 5) // entries of gatherWarpBuckets buckets at the default load
	for i := range shared {
		edge(2501, 1000+i) // the largest table lanes share
	}
	for i := range shared + 1 {
		edge(2502, 1100+i) // the smallest that is an item
	}
	for i := range uint32(12) {
		edge(2503, 1200+i) // three buckets
	}
	for v := uint32(1); v < 2000; v += 2 {
		edge(v, v+1) // tables of 2-3 entries, triangles with the hub
	}
	for _, chain := range []float64{0, 1} {
		t.Run(fmt.Sprintf("chain=%v", chain), func(t *testing.T) {
			opts := Options{Backend: warpkit.CUDA, Device: dev, VertexCapacity: nv, RehashChain: chain}
			if dev.Emulated() {
				opts.MaxPoolBytes = 4 << 20
			}
			g, c := cudaAndOracle(t, opts, New)
			same := func(where string) {
				t.Helper()
				sameCSR(t, where, g, c)
				gatheredRows(t, where, g.e.(*gpuGraph[struct{}]))
				for _, m := range []TriangleMethod{TrianglesHash, TrianglesSorted} {
					gt, err := g.TriangleCountWith(ctx, m)
					if err != nil {
						t.Fatal(err)
					}
					ct, err := c.TriangleCount(ctx)
					if err != nil || gt.Triangles != ct || ct == 0 {
						t.Fatalf("%s, method %d: %d triangles, the CPU graph %d (%v)", where, m, gt.Triangles, ct, err)
					}
				}
			}
			both := func(f func(x *Graph) error) {
				t.Helper()
				for _, x := range []*Graph{g, c} {
					if err := f(x); err != nil {
						t.Fatal(err)
					}
				}
			}
			both(func(x *Graph) error { return x.Build(ctx, bs, bd) })
			same("build")
			ids := []uint32{0, 2501, 2502, 2503, 1, 2600}
			e := g.e.(*gpuGraph[struct{}])
			dict := make([]uint32, e.nv*vertexWords)
			if err := e.dict.Sub(0, len(dict)).CopyToHost(dict); err != nil {
				t.Fatal(err)
			}
			var nbs []uint32
			for _, v := range ids {
				nbs = append(nbs, dict[v*vertexWords+1])
			}
			if want := []uint32{hubDeg / 5, gatherWarpBuckets, gatherWarpBuckets + 1, 3, 1, 0}; !slices.Equal(nbs, want) {
				t.Fatalf("buckets of %v: %v, want %v", ids, nbs, want)
			}
			// Long lists: 300 more entries in each of two tables of 2-3.
			var is, id []uint32
			for i := uint32(0); i < 300; i++ {
				is, id = append(is, 3, 5), append(id, 2100+i, 2200+i)
			}
			// Tables given late: vertices 2600..2799 had none.
			for v := uint32(2600); v < 2800; v++ {
				is, id = append(is, v), append(id, v%97+1)
			}
			both(func(x *Graph) error { return x.InsertEdges(ctx, is, id, nil) })
			same("inserts")
			// Tombstones: every third hub entry and a third of the lists.
			var ds, dd []uint32
			for v := uint32(1); v <= hubDeg; v += 3 {
				ds, dd = append(ds, 0), append(dd, v)
			}
			for i := 0; i < len(is); i += 3 {
				ds, dd = append(ds, is[i]), append(dd, id[i])
			}
			both(func(x *Graph) error { return x.DeleteEdges(ctx, ds, dd, nil) })
			same("deletes")
		})
	}
}

// gatheredRows checks the rows a whole-graph gather writes beside the
// columns (each entry's vertex), which ToCSR does not ask for and a
// triangle count reads for oriented entries only.
func gatheredRows[W any](t *testing.T, where string, e *gpuGraph[W]) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	off, total, err := e.offsets()
	if err != nil {
		t.Fatal(err)
	}
	cols, err := cuda.Alloc[uint32](e.dev, int(max(1, total)))
	if err != nil {
		t.Fatal(err)
	}
	defer cols.Free()
	rows, err := cuda.Alloc[uint32](e.dev, int(max(1, total)))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Free()
	if err := e.gatherAll(off, total, cols, 0, rows.Ptr(), cuda.Slice[uint32]{}); err != nil {
		t.Fatal(err)
	}
	ho := make([]uint64, e.nv+1)
	hr := make([]uint32, max(1, total))
	hc := make([]uint32, max(1, total))
	if err := off.Sub(0, e.nv+1).CopyToHost(ho); err != nil {
		t.Fatal(err)
	}
	if err := rows.CopyToHost(hr); err != nil {
		t.Fatal(err)
	}
	if err := cols.CopyToHost(hc); err != nil {
		t.Fatal(err)
	}
	for v := range e.nv {
		for k := ho[v]; k < ho[v+1]; k++ {
			if hr[k] != uint32(v) {
				t.Fatalf("%s: the gather's row of entry %d of vertex %d says %d", where, k-ho[v], v, hr[k])
			}
		}
	}
	if e.fGatherVertices == nil {
		return
	}
	// The oriented gather of the triangle count: each row's neighbours
	// ranked above its vertex (by degree, then ID) at its front, their
	// number in ocnt, rows right there; the rest of the row is left as it
	// was (here: a pattern no vertex has).
	deg, err := e.hostDegrees()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []cuda.Slice[uint32]{cols, rows} {
		if err := cuda.Fill(s, 0xdeadbeef, e.stream); err != nil {
			t.Fatal(err)
		}
	}
	ocnt, err := cuda.Alloc[uint32](e.dev, e.nv+1)
	if err != nil {
		t.Fatal(err)
	}
	defer ocnt.Free()
	if err := cuda.Fill(ocnt, 0xdeadbeef, e.stream); err != nil {
		t.Fatal(err)
	}
	if err := e.gatherAll(off, total, cols, 0, rows.Ptr(), ocnt); err != nil {
		t.Fatal(err)
	}
	oc := make([]uint32, e.nv+1)
	or := make([]uint32, max(1, total))
	ocl := make([]uint32, max(1, total))
	for _, c := range []struct {
		s cuda.Slice[uint32]
		h []uint32
	}{{ocnt, oc}, {rows, or}, {cols, ocl}} {
		if err := c.s.CopyToHost(c.h); err != nil {
			t.Fatal(err)
		}
	}
	above := func(x, v uint32) bool { return deg[x] > deg[v] || deg[x] == deg[v] && x > v }
	oriented := 0
	for v := range e.nv {
		var want []uint32
		for _, x := range hc[ho[v]:ho[v+1]] {
			if above(x, uint32(v)) {
				want = append(want, x)
			}
		}
		n := uint64(oc[v])
		if n != uint64(len(want)) || ho[v]+n > ho[v+1] {
			t.Fatalf("%s: the oriented row of vertex %d (degree %d) has %d entries, want %d", where, v, deg[v], oc[v], len(want))
		}
		got := slices.Clone(ocl[ho[v] : ho[v]+n])
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: the oriented row of vertex %d: %v, want %v", where, v, got, want)
		}
		for k := ho[v]; k < ho[v]+n; k++ {
			if or[k] != uint32(v) {
				t.Fatalf("%s: the oriented gather's row of entry %d of vertex %d says %d", where, k-ho[v], v, or[k])
			}
		}
		oriented += len(want)
	}
	if oriented == 0 || uint64(2*oriented) > total {
		t.Fatalf("%s: %d oriented entries of %d", where, oriented, total)
	}
}

// TestCUDAArenaInPlace grows a graph's arena through many mapped parts (2
// MiB granules on a GPU: moves and new vertices add buckets batch after
// batch) and checks that it never moved (gpurt.Region maps new memory after
// the old), that every list survived each growth (the CPU backend's CSR,
// Check) and that the arena's room past the used buckets was empty when
// handed out (inserts into tables given there find no stale entries).
func TestCUDAArenaInPlace(t *testing.T) { arenaInPlace(t, gputest.Device(t)) }

func arenaInPlace(t *testing.T, dev *cuda.Device) {
	nv, batches, batch := 1<<17, 6, 1<<16
	if dev.Emulated() {
		nv, batch = 1<<12, 1<<11 // 64 KiB granules there
	}
	g, c := cudaAndOracle(t, Options{Backend: warpkit.CUDA, Device: dev, VertexCapacity: nv, RehashChain: 1}, New)
	e := g.e.(*gpuGraph[struct{}])
	base := e.arena.Ptr()
	rng := rand.New(rand.NewPCG(7, 11))
	grew := 0
	for b := range batches {
		if b == batches/2 { // new vertices: a bucket each at the arena's end
			nv *= 2
			for _, x := range []*Graph{g, c} {
				if err := x.EnsureVertices(ctx, nv); err != nil {
					t.Fatal(err)
				}
			}
		}
		// Edges from a few hundred sources: their tables fill past one
		// list and move to new buckets at the arena's end.
		s, d := make([]uint32, batch), make([]uint32, batch)
		for i := range s {
			s[i], d[i] = uint32(rng.IntN(512)), uint32(rng.IntN(nv))
		}
		before := e.arena.Len()
		for _, x := range []*Graph{g, c} {
			if err := x.InsertEdges(ctx, s, d, nil); err != nil {
				t.Fatal(err)
			}
		}
		if e.arena.Len() > before {
			grew++
		}
		if e.arena.Ptr() != base {
			t.Fatalf("batch %d: the arena moved from %#x to %#x", b, base, e.arena.Ptr())
		}
		if err := g.Check(ctx); err != nil {
			t.Fatalf("batch %d: %v", b, err)
		}
		sameCSR(t, fmt.Sprintf("batch %d", b), g, c)
	}
	if grew < 2 {
		t.Fatalf("the arena grew in %d batches of %d; the test wants several growths", grew, batches)
	}
}

// cudaAndOracle makes a graph with opts (the CUDA backend) and its oracle:
// one with the same options on the CPU backend. Both close when the test
// ends.
func cudaAndOracle[G interface{ Close() error }](t *testing.T, opts Options, mk func(Options) (G, error)) (g, c G) {
	t.Helper()
	g, err := mk(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	opts.Backend, opts.Device = warpkit.CPU, nil
	if c, err = mk(opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return g, c
}

// TestCUDAPlacedBuild: a build's first batch into an unweighted graph is
// placed in the head slabs by prep and settled (gr_settle) before the
// apply launch inserts what did not fit. Edges repeated inside one head
// slab, hubs whose buckets overflow, self-loops, tables of one bucket and
// of many, directed and undirected, edges listing both directions or not,
// one batch or several: each graph equals the CPU backend's and the one
// built through the apply launches alone, with exact degrees and counts,
// and passes Check (whose census holds every slab to the frontier rule).
func TestCUDAPlacedBuild(t *testing.T) { placedBuild(t, gputest.Device(t)) }

func placedBuild(t *testing.T, dev *cuda.Device) {
	rng := rand.New(rand.NewPCG(7, 11))
	const nv = 600
	var src, dst []uint32
	add := func(u, v uint32) { src, dst = append(src, u), append(dst, v) }
	for v := uint32(1); v < 200; v++ { // hub 0: ~40 buckets, some overflowing
		add(0, v)
		if v%7 == 0 {
			add(0, v) // a repeat, likely in the same head slab
		}
	}
	for v := uint32(0); v < 150; v++ { // hub 1: each neighbour three times
		for range 3 {
			add(1, 300+v)
		}
	}
	for range 2500 { // small tables, repeats and self-loops among them
		u, v := uint32(2+rng.IntN(nv-2)), uint32(2+rng.IntN(nv-2))
		if rng.IntN(40) == 0 {
			v = u
		}
		add(u, v)
		if rng.IntN(10) == 0 {
			add(u, v)
		}
	}
	// The same edges listing both directions (an undirected build inserts
	// them as given).
	bsrc, bdst := bothWays(src, dst)
	defer func(c int) { buildChunk = c }(buildChunk)
	for _, chunk := range []int{1 << 26, 1024} {
		for _, directed := range []bool{false, true} {
			for _, loops := range []bool{false, true} {
				for _, both := range []bool{false, true} {
					name := fmt.Sprintf("chunk=%d/directed=%v/loops=%v/both=%v", chunk, directed, loops, both)
					s, d := src, dst
					if both {
						s, d = bsrc, bdst
					}
					buildChunk = chunk
					opts := Options{Device: dev, Directed: directed, AllowSelfLoops: loops, VertexCapacity: nv}
					var csr [3]*CSR
					var stats [3]Stats
					for k, b := range []string{"cpu", "placed", "applied"} {
						o := opts
						o.Backend = warpkit.CUDA
						if b == "cpu" {
							o.Backend, o.Device = warpkit.CPU, nil
						}
						placeBuilds = b != "applied"
						g, err := New(o)
						if err != nil {
							t.Fatal(err)
						}
						err = g.Build(ctx, s, d)
						placeBuilds = true
						if err != nil {
							t.Fatalf("%s %s: %v", name, b, err)
						}
						if e, ok := g.e.(*gpuGraph[struct{}]); ok && (e.placed > 0) != (b == "placed") {
							t.Fatalf("%s %s: %d batches placed", name, b, e.placed)
						}
						if err := g.Check(ctx); err != nil {
							t.Fatalf("%s %s: %v", name, b, err)
						}
						if csr[k], err = g.ToCSR(ctx, true); err != nil {
							t.Fatal(err)
						}
						if stats[k], err = g.Stats(ctx); err != nil {
							t.Fatal(err)
						}
						deg := make([]uint32, nv)
						ids := make([]uint32, nv)
						for i := range ids {
							ids[i] = uint32(i)
						}
						if err := g.Degrees(ctx, ids, deg); err != nil {
							t.Fatal(err)
						}
						for v := range nv {
							if want := csr[k].Offsets[v+1] - csr[k].Offsets[v]; uint64(deg[v]) != want {
								t.Fatalf("%s %s: vertex %d has degree %d, %d entries", name, b, v, deg[v], want)
							}
						}
						g.Close()
					}
					for k := 1; k < 3; k++ {
						if !slices.Equal(csr[k].Offsets, csr[0].Offsets) || !slices.Equal(csr[k].Cols, csr[0].Cols) {
							t.Fatalf("%s: graph %d differs from the CPU backend's", name, k)
						}
						if stats[k].Entries != stats[0].Entries || stats[k].SelfLoopsSkipped != stats[0].SelfLoopsSkipped {
							t.Fatalf("%s: stats %+v, the CPU backend %+v", name, stats[k], stats[0])
						}
					}
					if stats[1].OverflowSlabs == 0 {
						t.Fatalf("%s: no table overflowed its head slab", name)
					}
				}
			}
		}
	}
	// A placed batch whose overflow the pool (one block of 1024 slabs)
	// cannot hold: ErrPoolExhausted, and an undirected graph stays
	// symmetric (both directions of every entry that failed deleted) with
	// exact counts.
	buildChunk = 1 << 26
	e, err := graphio.RMAT(14, 8, graphio.RMATOptions{Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	for _, both := range []bool{false, true} {
		s, d := e.Src, e.Dst
		if both {
			s, d = bothWays(e.Src, e.Dst)
		}
		g, err := New(Options{Backend: warpkit.CUDA, Device: dev, MaxPoolBytes: 32 << 10})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Build(ctx, s, d); !errors.Is(err, warpkit.ErrPoolExhausted) {
			t.Fatalf("both=%v: a placed build past MaxPoolBytes: %v", both, err)
		}
		if pe := g.e.(*gpuGraph[struct{}]).placed; pe != 1 {
			t.Fatalf("both=%v: %d batches placed", both, pe)
		}
		if err := g.Check(ctx); err != nil {
			t.Fatalf("both=%v: %v", both, err)
		}
		if n, _ := g.Len(ctx); n == 0 {
			t.Fatalf("both=%v: nothing built", both)
		}
		g.Close()
	}
	// A placed batch stopped before its apply launch (ctx cancelled):
	// the entries placed stay, counted; an undirected graph keeps only
	// edges with both directions.
	for _, directed := range []bool{false, true} {
		for _, both := range []bool{false, true} {
			s, d := e.Src, e.Dst
			if both {
				s, d = bothWays(e.Src, e.Dst)
			}
			g, err := New(Options{Backend: warpkit.CUDA, Device: dev, Directed: directed})
			if err != nil {
				t.Fatal(err)
			}
			cctx, cancel := context.WithCancel(ctx)
			beforePlacedApply = cancel
			err = g.Build(cctx, s, d)
			beforePlacedApply = nil
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("directed=%v both=%v: a build cancelled before its apply launch: %v", directed, both, err)
			}
			if err := g.Check(ctx); err != nil {
				t.Fatalf("directed=%v both=%v: %v", directed, both, err)
			}
			if n, _ := g.Len(ctx); n == 0 {
				t.Fatalf("directed=%v both=%v: nothing placed", directed, both)
			}
			g.Close()
		}
	}
	// The apply launch of a placed batch runs only the elements prep laid
	// out, however many it is sized for: here none (a cycle, nothing
	// overflows), over scratch whose every element reads as a failed
	// insert of the edge 1-50 (a batch before may leave such elements).
	g, err := New(Options{Backend: warpkit.CUDA, Device: dev})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var cs, cd []uint32
	for v := range uint32(100) {
		w := (v + 1) % 100
		cs, cd = append(cs, v, w), append(cd, w, v)
	}
	gg := g.e.(*gpuGraph[struct{}])
	m := len(cs)
	var l gpurt.Layout
	pSrc, pDst, pRes := gpurt.Place[uint32](&l, m), gpurt.Place[uint32](&l, m), gpurt.Place[uint8](&l, m)
	gpurt.Place[uint8](&l, m)
	mem, err := l.Get(&gg.bPrep, dev, gg.stream)
	if err != nil {
		t.Fatal(err)
	}
	if err := pSrc.In(mem).CopyFromHost(slices.Repeat([]uint32{1}, m)); err != nil {
		t.Fatal(err)
	}
	if err := pDst.In(mem).CopyFromHost(slices.Repeat([]uint32{50}, m)); err != nil {
		t.Fatal(err)
	}
	if err := pRes.In(mem).CopyFromHost(slices.Repeat([]uint8{resFailed}, m)); err != nil {
		t.Fatal(err)
	}
	if err := g.Build(ctx, cs, cd); err != nil {
		t.Fatal(err)
	}
	if gg.placed != 1 {
		t.Fatalf("the cycle's build placed %d batches", gg.placed)
	}
	if n, err := g.Len(ctx); err != nil || n != m {
		t.Fatalf("the cycle's build holds %d entries, want %d (%v)", n, m, err)
	}
	if err := g.Check(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestCUDABuildSizing: a build sizes each table for the entries the edges
// give it (the load factor's 5 a bucket; a table of at most 7 one bucket),
// counting an undirected edge at both ends unless the edges list both
// directions (gr_symmetry's sums, read by gr_count_edges): a star of 100
// edges into vertex 0 takes 20 buckets for it and one for each leaf, given
// one way or both, and no table is given late.
func TestCUDABuildSizing(t *testing.T) { buildSizing(t, gputest.Device(t)) }

func buildSizing(t *testing.T, dev *cuda.Device) {
	var src, dst []uint32
	for v := uint32(1); v <= 100; v++ {
		src, dst = append(src, 0), append(dst, v)
	}
	for _, both := range []bool{false, true} {
		s, d := src, dst
		if both {
			s, d = bothWays(src, dst)
		}
		g, err := New(Options{Backend: warpkit.CUDA, Device: dev})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Build(ctx, s, d); err != nil {
			t.Fatal(err)
		}
		st, err := g.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if late := g.e.(*gpuGraph[struct{}]).lateTables; st.Buckets != 120 || late != 0 || st.Entries != 200 {
			t.Errorf("both=%v: %d buckets (want 120), %d tables given late, %d entries", both, st.Buckets, late, st.Entries)
		}
		g.Close()
	}
}

// bothWays returns the edges src→dst followed by their reverses: a list
// that gives every edge in both directions.
func bothWays(src, dst []uint32) (s, d []uint32) {
	return append(slices.Clone(src), dst...), append(slices.Clone(dst), src...)
}
