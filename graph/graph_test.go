package graph

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/graph/graphio"
	"github.com/warpkit/warpkit/internal/gputest"
	"github.com/warpkit/warpkit/slabhash"
)

var ctx = context.Background()

// model is the reference: the adjacency entries with their weights.
type model struct {
	n                   int
	directed, selfLoops bool
	e                   map[[2]uint32]uint64
}

func (m *model) insert(u, v uint32, w uint64) slabhash.Result {
	if u == v && !m.selfLoops {
		return slabhash.NotFound
	}
	_, had := m.e[[2]uint32{u, v}]
	m.e[[2]uint32{u, v}] = w
	if !m.directed {
		m.e[[2]uint32{v, u}] = w
	}
	if had {
		return slabhash.Present
	}
	return slabhash.Inserted
}

func (m *model) remove(u, v uint32) slabhash.Result {
	_, had := m.e[[2]uint32{u, v}]
	delete(m.e, [2]uint32{u, v})
	if !m.directed {
		delete(m.e, [2]uint32{v, u})
	}
	if had {
		return slabhash.Removed
	}
	return slabhash.NotFound
}

func (m *model) deleteVertex(v uint32) {
	for k := range m.e {
		if k[0] == v || k[1] == v {
			delete(m.e, k)
		}
	}
}

// csr is the model as a sorted CSR with weights.
func (m *model) csr() (*CSR, []uint64) {
	rows := make([][]uint32, m.n)
	for k := range m.e {
		rows[k[0]] = append(rows[k[0]], k[1])
	}
	out := &CSR{Offsets: make([]uint64, m.n+1)}
	var ws []uint64
	for v, r := range rows {
		slices.Sort(r)
		out.Cols = append(out.Cols, r...)
		for _, u := range r {
			ws = append(ws, m.e[[2]uint32{uint32(v), u}])
		}
		out.Offsets[v+1] = uint64(len(out.Cols))
	}
	return out, ws
}

// TestDifferential: random mixes of edge inserts (with duplicates and
// self-loops), deletes (present and absent), vertex deletes, capacity
// growth and rebuilds give the model's results, contents, degrees and
// weights, for directed and undirected, weighted and unweighted graphs,
// with self-loops kept or skipped; Check holds after every step.
func TestDifferential(t *testing.T) {
	for _, directed := range []bool{false, true} {
		for _, selfLoops := range []bool{false, true} {
			t.Run(fmt.Sprintf("directed=%v/selfloops=%v", directed, selfLoops), func(t *testing.T) {
				for seed := range uint64(6) {
					differential(t, warpkit.CPU, nil, seed, directed, selfLoops)
				}
			})
		}
	}
}

// TestDifferentialCUDA is TestDifferential on the CUDA backend, where the
// copies of one edge in a batch apply concurrently: which copy is Inserted
// (or Removed), and which weight a repeated edge keeps, are not fixed. The
// batches give every copy of an edge one weight (a new one each batch), and
// the results are compared per edge: as many Inserted (Removed) as the
// model's, the other copies Present (NotFound).
func TestDifferentialCUDA(t *testing.T) {
	dev := gputest.Device(t)
	for _, directed := range []bool{false, true} {
		for _, selfLoops := range []bool{false, true} {
			t.Run(fmt.Sprintf("directed=%v/selfloops=%v", directed, selfLoops), func(t *testing.T) {
				for seed := range uint64(6) {
					differential(t, warpkit.CUDA, dev, seed, directed, selfLoops)
				}
			})
		}
	}
}

// sameResults compares a batch's results with the model's: exactly on the
// CPU backend, per edge on the CUDA backend (see TestDifferentialCUDA).
func sameResults(backend warpkit.Backend, directed bool, src, dst []uint32, got, want []slabhash.Result) bool {
	if backend == warpkit.CPU {
		return slices.Equal(got, want)
	}
	type tally struct{ got, want [6]int }
	per := map[[2]uint32]*tally{}
	for i := range src {
		k := [2]uint32{src[i], dst[i]}
		if !directed && k[0] > k[1] {
			k[0], k[1] = k[1], k[0]
		}
		if per[k] == nil {
			per[k] = &tally{}
		}
		per[k].got[got[i]%6]++
		per[k].want[want[i]%6]++
	}
	for _, x := range per {
		if x.got != x.want {
			return false
		}
	}
	return true
}

// differential runs seeded random batches on a graph of the backend (on dev,
// or device 0 where dev is nil) and on the model, comparing every result.
func differential(t *testing.T, backend warpkit.Backend, dev *cuda.Device, seed uint64, directed, selfLoops bool) {
	rng := rand.New(rand.NewPCG(seed, 7))
	opts := Options{Backend: backend, Device: dev, Directed: directed, AllowSelfLoops: selfLoops, VertexCapacity: 40}
	if dev != nil && dev.Emulated() {
		opts.MaxPoolBytes = 4 << 20 // not 64 MiB filled per Build, on the CPU
	}
	g, err := NewWeighted[uint64](opts)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	u, err := New(opts) // the unweighted twin, the same operations
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	n32, err := NewWeighted[uint32](opts) // and the 32-bit-weight twin
	if err != nil {
		t.Fatal(err)
	}
	defer n32.Close()
	w32 := func(w []uint64) []uint32 {
		out := make([]uint32, len(w))
		for i, x := range w {
			out[i] = uint32(x)
		}
		return out
	}
	m := &model{n: 40, directed: directed, selfLoops: selfLoops, e: map[[2]uint32]uint64{}}
	batch := func(n int) ([]uint32, []uint32, []uint64) {
		src, dst, w := make([]uint32, n), make([]uint32, n), make([]uint64, n)
		salt := rng.Uint64()
		for i := range n {
			src[i], dst[i], w[i] = uint32(rng.IntN(m.n)), uint32(rng.IntN(m.n)), rng.Uint64()
			if rng.IntN(10) == 0 {
				dst[i] = src[i]
			}
			if backend == warpkit.CUDA { // one weight per edge in a batch
				a, b := min(src[i], dst[i]), max(src[i], dst[i])
				w[i] = (uint64(a)<<32 | uint64(b)) * (salt | 1)
			}
		}
		return src, dst, w
	}
	for step := range 60 {
		switch op := rng.IntN(10); {
		case op < 5:
			src, dst, w := batch(1 + rng.IntN(80))
			if rng.IntN(4) == 0 && len(src) > 1 { // a repeated edge in the batch
				src[1], dst[1] = src[0], dst[0]
			}
			var want []slabhash.Result
			for i := range src {
				want = append(want, m.insert(src[i], dst[i], w[i]))
			}
			res, ures := make([]slabhash.Result, len(src)), make([]slabhash.Result, len(src))
			if err := g.InsertEdges(ctx, src, dst, w, res); err != nil {
				t.Fatal(err)
			}
			if err := u.InsertEdges(ctx, src, dst, ures); err != nil {
				t.Fatal(err)
			}
			if err := n32.InsertEdges(ctx, src, dst, w32(w), nil); err != nil {
				t.Fatal(err)
			}
			if !sameResults(backend, directed, src, dst, res, want) || !sameResults(backend, directed, src, dst, ures, want) {
				t.Fatalf("seed %d step %d: insert results %v / %v, want %v", seed, step, res, ures, want)
			}
		case op < 8:
			src, dst, _ := batch(1 + rng.IntN(60))
			var want []slabhash.Result
			for i := range src {
				want = append(want, m.remove(src[i], dst[i]))
			}
			res := make([]slabhash.Result, len(src))
			if err := g.DeleteEdges(ctx, src, dst, res); err != nil {
				t.Fatal(err)
			}
			if err := u.DeleteEdges(ctx, src, dst, nil); err != nil {
				t.Fatal(err)
			}
			if err := n32.DeleteEdges(ctx, src, dst, nil); err != nil {
				t.Fatal(err)
			}
			if !sameResults(backend, directed, src, dst, res, want) {
				t.Fatalf("seed %d step %d: delete results %v, want %v", seed, step, res, want)
			}
		case op == 8:
			ids := []uint32{uint32(rng.IntN(m.n)), uint32(rng.IntN(m.n))}
			for _, v := range ids {
				m.deleteVertex(v)
			}
			if err := g.DeleteVertices(ctx, ids); err != nil {
				t.Fatal(err)
			}
			if err := u.DeleteVertices(ctx, ids); err != nil {
				t.Fatal(err)
			}
			if err := n32.DeleteVertices(ctx, ids); err != nil {
				t.Fatal(err)
			}
		default:
			if rng.IntN(2) == 0 {
				m.n += 5
				if err := g.EnsureVertices(ctx, m.n); err != nil {
					t.Fatal(err)
				}
				if err := u.EnsureVertices(ctx, m.n); err != nil {
					t.Fatal(err)
				}
				if err := n32.EnsureVertices(ctx, m.n); err != nil {
					t.Fatal(err)
				}
			} else {
				src, dst, w := batch(100)
				m.e = map[[2]uint32]uint64{}
				for i := range src {
					m.insert(src[i], dst[i], w[i])
				}
				if err := g.Build(ctx, src, dst, w); err != nil {
					t.Fatal(err)
				}
				if err := u.Build(ctx, src, dst); err != nil {
					t.Fatal(err)
				}
				if err := n32.Build(ctx, src, dst, w32(w)); err != nil {
					t.Fatal(err)
				}
			}
		}
		compare(t, fmt.Sprintf("seed %d step %d", seed, step), m, g, u)
		// The 32-bit twin holds the same edges with the weights' low halves.
		want, wantW := m.csr()
		got, gotW, err := n32.ToCSRWeights(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Offsets, want.Offsets) || !slices.Equal(got.Cols, want.Cols) || !slices.Equal(gotW, w32(wantW)) {
			t.Fatalf("seed %d step %d: the 32-bit-weight graph differs from the model", seed, step)
		}
		if err := n32.Check(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// compare checks both graphs against the model.
func compare(t *testing.T, where string, m *model, g *Weighted[uint64], u *Graph) {
	t.Helper()
	want, wantW := m.csr()
	got, gotW, err := g.ToCSRWeights(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	ugot, err := u.ToCSR(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Offsets, want.Offsets) || !slices.Equal(got.Cols, want.Cols) || !slices.Equal(gotW, wantW) {
		t.Fatalf("%s: contents differ from the model", where)
	}
	if !slices.Equal(ugot.Offsets, want.Offsets) || !slices.Equal(ugot.Cols, want.Cols) {
		t.Fatalf("%s: the unweighted graph's contents differ from the model", where)
	}
	for _, x := range []interface{ Check(context.Context) error }{g, u} {
		if err := x.Check(ctx); err != nil {
			t.Fatalf("%s: %v", where, err)
		}
	}
	ids := make([]uint32, m.n)
	for i := range ids {
		ids[i] = uint32(i)
	}
	deg := make([]uint32, m.n)
	if err := g.Degrees(ctx, ids, deg); err != nil {
		t.Fatal(err)
	}
	for v := range m.n {
		if uint64(deg[v]) != want.Offsets[v+1]-want.Offsets[v] {
			t.Fatalf("%s: vertex %d degree %d, want %d", where, v, deg[v], want.Offsets[v+1]-want.Offsets[v])
		}
	}
	if n, err := g.Len(ctx); err != nil || n != len(m.e) {
		t.Fatalf("%s: Len %d (%v), want %d", where, n, err, len(m.e))
	}
	// Point queries and neighbour iteration on a few vertices.
	src, dst := []uint32{0, 1, 2, 3}, []uint32{1, 2, 3, 0}
	found, w := make([]bool, 4), make([]uint64, 4)
	if err := g.Weights(ctx, src, dst, w, found); err != nil {
		t.Fatal(err)
	}
	for i := range src {
		x, ok := m.e[[2]uint32{src[i], dst[i]}]
		if found[i] != ok || w[i] != x {
			t.Fatalf("%s: weight of %d-%d %d %v, want %d %v", where, src[i], dst[i], w[i], found[i], x, ok)
		}
	}
	ns, err := u.Neighbors(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got0 []uint32
	for v := range ns {
		got0 = append(got0, v)
	}
	slices.Sort(got0)
	if !slices.Equal(got0, want.Cols[want.Offsets[0]:want.Offsets[1]]) {
		t.Fatalf("%s: neighbours of 0 %v, want %v", where, got0, want.Cols[want.Offsets[0]:want.Offsets[1]])
	}
}

// bruteTriangles counts triangles u < v < w of an undirected edge list.
func bruteTriangles(n int, src, dst []uint32) uint64 {
	adj := make([]map[uint32]bool, n)
	for i := range adj {
		adj[i] = map[uint32]bool{}
	}
	for i := range src {
		if src[i] != dst[i] {
			adj[src[i]][dst[i]], adj[dst[i]][src[i]] = true, true
		}
	}
	var t uint64
	for u := range n {
		for v := range adj[u] {
			if v <= uint32(u) {
				continue
			}
			for w := range adj[v] {
				if w > v && adj[u][w] {
					t++
				}
			}
		}
	}
	return t
}

// TestTriangleCount: each triangle counted once, by every method —
// complete graphs (n choose 3), Zachary's karate club (45), self-loops
// (none), RMAT graphs of scales 10 to 16 against brute force, after
// inserts and deletes too.
func TestTriangleCount(t *testing.T) {
	for n := 3; n <= 12; n++ {
		var src, dst []uint32
		for a := range n {
			for b := a + 1; b < n; b++ {
				src, dst = append(src, uint32(a)), append(dst, uint32(b))
			}
		}
		g, _ := New(Options{})
		if err := g.Build(ctx, src, dst); err != nil {
			t.Fatal(err)
		}
		got, err := g.TriangleCount(ctx)
		if want := uint64(n * (n - 1) * (n - 2) / 6); err != nil || got != want {
			t.Fatalf("K%d: %d triangles (%v), want %d", n, got, err, want)
		}
		g.Close()
	}
	// Zachary's karate club: 34 members, 78 ties, 45 triangles.
	karate := [][2]uint32{{1, 2}, {1, 3}, {1, 4}, {1, 5}, {1, 6}, {1, 7}, {1, 8}, {1, 9}, {1, 11}, {1, 12}, {1, 13}, {1, 14},
		{1, 18}, {1, 20}, {1, 22}, {1, 32}, {2, 3}, {2, 4}, {2, 8}, {2, 14}, {2, 18}, {2, 20}, {2, 22}, {2, 31}, {3, 4},
		{3, 8}, {3, 9}, {3, 10}, {3, 14}, {3, 28}, {3, 29}, {3, 33}, {4, 8}, {4, 13}, {4, 14}, {5, 7}, {5, 11}, {6, 7},
		{6, 11}, {6, 17}, {7, 17}, {9, 31}, {9, 33}, {9, 34}, {10, 34}, {14, 34}, {15, 33}, {15, 34}, {16, 33}, {16, 34},
		{19, 33}, {19, 34}, {20, 34}, {21, 33}, {21, 34}, {23, 33}, {23, 34}, {24, 26}, {24, 28}, {24, 30}, {24, 33},
		{24, 34}, {25, 26}, {25, 28}, {25, 32}, {26, 32}, {27, 30}, {27, 34}, {28, 34}, {29, 32}, {29, 34}, {30, 33},
		{30, 34}, {31, 33}, {31, 34}, {32, 33}, {32, 34}, {33, 34}}
	var ks, kd []uint32
	for _, e := range karate {
		ks, kd = append(ks, e[0]-1), append(kd, e[1]-1)
	}
	if len(ks) != 78 || bruteTriangles(34, ks, kd) != 45 {
		t.Fatalf("the karate club's list: %d ties, %d triangles", len(ks), bruteTriangles(34, ks, kd))
	}
	for _, m := range []TriangleMethod{TrianglesHash, TrianglesSorted, TrianglesThesis} {
		g, _ := New(Options{})
		if err := g.Build(ctx, ks, kd); err != nil {
			t.Fatal(err)
		}
		if st, err := g.TriangleCountWith(ctx, m); err != nil || st.Triangles != 45 {
			t.Fatalf("karate club, method %d: %d triangles (%v), want 45", m, st.Triangles, err)
		}
		g.Close()
	}
	// Self-loops kept do not count, by any method: a vertex with a loop and
	// four neighbours forms no triangle.
	for _, m := range []TriangleMethod{TrianglesHash, TrianglesSorted, TrianglesThesis} {
		g, _ := New(Options{AllowSelfLoops: true})
		if err := g.Build(ctx, []uint32{0, 0, 0, 0, 0, 5}, []uint32{0, 1, 2, 3, 4, 5}); err != nil {
			t.Fatal(err)
		}
		if st, err := g.TriangleCountWith(ctx, m); err != nil || st.Triangles != 0 {
			t.Fatalf("method %d with self-loops: %d triangles (%v), want 0", m, st.Triangles, err)
		}
		g.Close()
	}
	for seed := range uint64(8) {
		e, err := graphio.RMAT(10+int(seed%7), 8, graphio.RMATOptions{Seed: seed}) // scales 10-16
		if err != nil {
			t.Fatal(err)
		}
		g, _ := New(Options{})
		if err := g.Build(ctx, e.Src, e.Dst); err != nil {
			t.Fatal(err)
		}
		want := bruteTriangles(e.NumVertices, e.Src, e.Dst)
		for _, m := range []TriangleMethod{TrianglesHash, TrianglesSorted, TrianglesThesis} {
			st, err := g.TriangleCountWith(ctx, m)
			if err != nil || st.Triangles != want {
				t.Fatalf("RMAT seed %d, method %d: %d triangles (%v), want %d", seed, m, st.Triangles, err, want)
			}
		}
		// After deleting a third of the edges and adding random ones.
		rng := rand.New(rand.NewPCG(seed, 9))
		k := len(e.Src) / 3
		if err := g.DeleteEdges(ctx, e.Src[:k], e.Dst[:k], nil); err != nil {
			t.Fatal(err)
		}
		src, dst := slices.Clone(e.Src[k:]), slices.Clone(e.Dst[k:])
		var as, ad []uint32
		for range 500 {
			a, b := uint32(rng.IntN(e.NumVertices)), uint32(rng.IntN(e.NumVertices))
			as, ad = append(as, a), append(ad, b)
		}
		if err := g.InsertEdges(ctx, as, ad, nil); err != nil {
			t.Fatal(err)
		}
		src, dst = append(src, as...), append(dst, ad...)
		// The deleted edges may reappear later in src: remove them from the
		// expectation the way the graph did (every copy of a deleted pair).
		gone := map[[2]uint32]bool{}
		for i := range k {
			gone[[2]uint32{e.Src[i], e.Dst[i]}], gone[[2]uint32{e.Dst[i], e.Src[i]}] = true, true
		}
		var ks, kd []uint32
		for i := range src {
			if i < len(e.Src)-k && gone[[2]uint32{src[i], dst[i]}] {
				continue
			}
			ks, kd = append(ks, src[i]), append(kd, dst[i])
		}
		got, err := g.TriangleCount(ctx)
		if want := bruteTriangles(e.NumVertices, ks, kd); err != nil || got != want {
			t.Fatalf("RMAT seed %d after updates: %d triangles (%v), want %d", seed, got, err, want)
		}
		if err := g.Check(ctx); err != nil {
			t.Fatal(err)
		}
		g.Close()
	}
}

// TestContract: the structure contract's errors, and nothing applied by a
// refused batch.
func TestContract(t *testing.T) {
	if _, err := cuda.Devices(); err != nil {
		if _, err := New(Options{Backend: warpkit.CUDA}); !errors.Is(err, warpkit.ErrNoDevice) {
			t.Fatalf("Backend CUDA without a device: %v", err)
		}
	}
	if _, err := New(Options{VertexCapacity: -1}); !errors.Is(err, warpkit.ErrInvalidArgument) {
		t.Fatalf("VertexCapacity -1: %v", err)
	}
	if _, err := New(Options{MaxPoolBytes: -1}); !errors.Is(err, warpkit.ErrInvalidArgument) {
		t.Fatalf("MaxPoolBytes -1: %v", err)
	}
	for _, rc := range []float64{-1, 1e6, math.NaN()} {
		if _, err := New(Options{RehashChain: rc}); !errors.Is(err, warpkit.ErrInvalidArgument) {
			t.Fatalf("RehashChain %v: %v", rc, err)
		}
	}
	for _, lf := range []float64{-0.5, 16.5, 0.01, math.NaN()} {
		if _, err := New(Options{LoadFactor: lf}); !errors.Is(err, warpkit.ErrInvalidArgument) {
			t.Fatalf("LoadFactor %v: %v", lf, err)
		}
	}
	g, err := New(Options{Backend: warpkit.CPU, VertexCapacity: 10})
	if err != nil {
		t.Fatal(err)
	}
	if g.Backend() != warpkit.CPU {
		t.Fatalf("backend %v", g.Backend())
	}
	for _, c := range []struct {
		src, dst []uint32
		want     error
	}{
		{[]uint32{1, 2}, []uint32{3}, warpkit.ErrInvalidArgument},
		{[]uint32{1, 2}, []uint32{3, ReservedEmpty}, warpkit.ErrReservedKey},
		{[]uint32{1, ReservedTombstone}, []uint32{3, 4}, warpkit.ErrReservedKey},
		{[]uint32{1, 10}, []uint32{3, 4}, warpkit.ErrInvalidArgument},
	} {
		if err := g.InsertEdges(ctx, c.src, c.dst, nil); !errors.Is(err, c.want) {
			t.Fatalf("insert %v %v: %v, want %v", c.src, c.dst, err, c.want)
		}
		if n, _ := g.Len(ctx); n != 0 {
			t.Fatalf("a refused batch applied %d entries", n)
		}
	}
	if err := g.InsertEdgesDevice(ctx, cudaNone, cudaNone, cudaNoneU8); !errors.Is(err, warpkit.ErrNeedsCUDA) {
		t.Fatalf("a Device method on the CPU backend: %v", err)
	}
	d, _ := New(Options{Directed: true, VertexCapacity: 3})
	if _, err := d.TriangleCount(ctx); !errors.Is(err, warpkit.ErrInvalidArgument) {
		t.Fatalf("triangles of a directed graph: %v", err)
	}
	if _, err := g.TriangleCountWith(ctx, TriangleMethod(7)); !errors.Is(err, warpkit.ErrInvalidArgument) {
		t.Fatalf("an unknown triangle method: %v", err)
	}
	d.Close()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := g.InsertEdges(cancelled, []uint32{1}, []uint32{2}, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: %v", err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	calls := map[string]error{
		"insert":  g.InsertEdges(ctx, []uint32{1}, []uint32{2}, nil),
		"delete":  g.DeleteEdges(ctx, []uint32{1}, []uint32{2}, nil),
		"has":     g.HasEdges(ctx, []uint32{1}, []uint32{2}, []bool{false}),
		"degrees": g.Degrees(ctx, []uint32{1}, []uint32{0}),
		"build":   g.Build(ctx, nil, nil),
		"check":   g.Check(ctx),
		"flush":   g.Flush(ctx),
		"close":   g.Close(),
	}
	_, calls["tc"] = g.TriangleCount(ctx)
	_, calls["stats"] = g.Stats(ctx)
	_, calls["len"] = g.Len(ctx)
	_, calls["neighbors"] = g.Neighbors(ctx, 1)
	for name, err := range calls {
		if !errors.Is(err, warpkit.ErrClosed) {
			t.Errorf("%s after Close: %v", name, err)
		}
	}
}

// TestConcurrentBatches: batches inserting and deleting overlapping edges
// from many goroutines leave an undirected graph consistent (both
// directions of every edge, exact degrees).
func TestConcurrentBatches(t *testing.T) {
	g, err := NewWeighted[uint32](Options{VertexCapacity: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			for range 200 {
				n := 1 + rng.IntN(50)
				src, dst, ws := make([]uint32, n), make([]uint32, n), make([]uint32, n)
				for i := range n {
					src[i], dst[i], ws[i] = uint32(rng.IntN(64)), uint32(rng.IntN(64)), rng.Uint32()
				}
				var err error
				if rng.IntN(2) == 0 {
					err = g.InsertEdges(ctx, src, dst, ws, nil)
				} else {
					err = g.DeleteEdges(ctx, src, dst, nil)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := g.Check(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := g.Stats(ctx)
	if err != nil || st.Entries == 0 || st.Edges*2 < st.Entries {
		t.Fatalf("stats %+v (%v)", st, err)
	}
}

var (
	cudaNone   = zeroSlice[uint32]()
	cudaNoneU8 = zeroSlice[uint8]()
)

func zeroSlice[T cuda.Elem]() cuda.Slice[T] { return cuda.Slice[T]{} }

// TestLargeBatchOrder: a batch large enough to be split among goroutines
// still applies the copies of one edge in batch order (the first insert
// Inserted, the rest Present, the last weight kept; both orientations of
// an undirected edge count as one), and BuildCSR refuses offsets that
// rise and fall without writing past the columns.
func TestLargeBatchOrder(t *testing.T) {
	g, err := NewWeighted[uint32](Options{Backend: warpkit.CPU, VertexCapacity: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	n := 5 * batchGrain
	src, dst, w := make([]uint32, n), make([]uint32, n), make([]uint32, n)
	for i := range n {
		src[i], dst[i], w[i] = uint32(i%2), uint32(1-i%2), uint32(i) // (0,1) and (1,0) alternating
		if i%7 == 3 {
			src[i], dst[i] = 2+uint32(i%5), 3
		}
	}
	res := make([]slabhash.Result, n)
	if err := g.InsertEdges(ctx, src, dst, w, res); err != nil {
		t.Fatal(err)
	}
	if res[0] != slabhash.Inserted || res[1] != slabhash.Present || res[n-1] != slabhash.Present {
		t.Fatalf("results %v %v ... %v", res[0], res[1], res[n-1])
	}
	last := -1
	for i := range n {
		if (src[i] == 0 || src[i] == 1) && (dst[i] == 0 || dst[i] == 1) {
			last = i
		}
	}
	out := make([]uint32, 2)
	if err := g.Weights(ctx, []uint32{0, 1}, []uint32{1, 0}, out, nil); err != nil {
		t.Fatal(err)
	}
	if out[0] != uint32(last) || out[1] != uint32(last) {
		t.Fatalf("weights %v, want the last copy's %d", out, last)
	}
	u, _ := New(Options{})
	defer u.Close()
	if err := u.BuildCSR(ctx, []uint64{0, 10, 5}, make([]uint32, 5)); !errors.Is(err, warpkit.ErrInvalidArgument) {
		t.Fatalf("offsets rising and falling: %v", err)
	}
	u.Close()
	if err := u.BuildCSR(ctx, []uint64{0, 10, 5}, make([]uint32, 5)); !errors.Is(err, warpkit.ErrClosed) {
		t.Fatalf("BuildCSR after Close: %v", err)
	}
}
