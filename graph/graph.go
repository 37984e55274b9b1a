package graph

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/front"
	"github.com/warpkit/warpkit/internal/hostpar"
	"github.com/warpkit/warpkit/slabhash"
)

// Weight is the type of edge weights (Weighted).
type Weight = warpkit.Word

// Reserved vertex IDs (the slab hash's sentinels): a batch holding one
// fails with ErrReservedKey and applies nothing.
const (
	ReservedEmpty     = 0xFFFFFFFF
	ReservedTombstone = 0xFFFFFFFE
)

// Options configure a graph. The zero Options are valid: an undirected graph
// with room for no vertex yet (Build, BuildCSR and EnsureVertices make room).
type Options struct {
	// Backend: CPU, CUDA (a device needed), or Auto (CUDA where a device
	// is present).
	Backend warpkit.Backend
	// Device is the device of the CUDA backend (nil: device 0, opened and
	// closed by the graph).
	Device *cuda.Device
	// MaxPoolBytes caps the CUDA backend's overflow slabs (0: 4 GiB); an
	// edge batch that needs more fails with ErrPoolExhausted, the edges it
	// could not insert reported Failed and the graph consistent.
	MaxPoolBytes int64
	// LoadFactor is the share of a bucket's slots a build fills (the CUDA
	// backend sizes each vertex's table for its entries at this load; 0:
	// DefaultLoadFactor; at most 16: above 1 the lists are that many slabs
	// long on average, the thesis's load-factor sweep). Lower loads cost
	// memory and speed up later inserts (fewer full slabs to pass). At
	// the default load or denser a table of at most a bucket's 7 slots
	// takes one bucket; a vertex without entries takes none until its
	// first insert.
	LoadFactor float64
	// RehashChain, when positive, grows tables ahead of inserts (the CUDA
	// backend): an insert batch first moves every table that the batch
	// could fill past RehashChain lists' worth of its head slabs (counting
	// each of the batch's entries for its source) to new buckets sized at
	// LoadFactor for its entries and the batch's — so that a hub's list
	// does not grow long within a batch. 0 (the default): tables move only
	// when Rehash is called (the thesis's behaviour).
	RehashChain float64
	// Directed graphs store each edge once, from its source; undirected
	// graphs (the default) store both directions, and an edge batch
	// applies each edge's two directions together.
	Directed bool
	// VertexCapacity is the number of vertices (IDs 0..VertexCapacity-1)
	// the graph starts with; EnsureVertices grows it.
	VertexCapacity int
	// AllowSelfLoops keeps edges (v, v); without it they are skipped and
	// counted (Stats.SelfLoopsSkipped).
	AllowSelfLoops bool
}

// DefaultLoadFactor is Options.LoadFactor's default: 5 entries in a
// bucket of 7 slots at build (the thesis's 0.7, §5.3).
const DefaultLoadFactor = 5.0 / 7

// CSR is a graph in compressed sparse row form: the neighbours of vertex v
// are Cols[Offsets[v]:Offsets[v+1]].
type CSR struct {
	Offsets []uint64
	Cols    []uint32
}

// Stats describe a graph.
type Stats struct {
	Backend warpkit.Backend
	// Vertices is the vertex capacity; Entries the adjacency entries
	// stored (an undirected edge is two, a self-loop one); Edges the edges
	// (undirected: each once).
	Vertices         int
	Entries, Edges   uint64
	MaxDegree        uint32
	SelfLoopsSkipped uint64
	// Bytes estimates the memory the adjacency takes. ScratchBytes is the
	// CUDA backend's device scratch kept between calls (buffers grown for the
	// largest batch and build so far, up to 1.5x their need, reused by the
	// next; freed by Flush and Close).
	Bytes, ScratchBytes int64
	// Buckets (head slabs in the arena, orphans of Rehash included),
	// OverflowSlabs and LongestList (in slabs) describe the CUDA backend's
	// bucket lists (0 on the CPU backend).
	Buckets, OverflowSlabs uint64
	LongestList            int
}

// engine is a backend: the CPU one (core) or the CUDA one (gpuGraph). The
// front (base) checks arguments and IDs and keeps whole-graph operations
// apart from batches; ws are the weights of a batch (nil for unweighted
// graphs).
type engine[W any] interface {
	vertices() int
	entries() int64
	ensureVertices(n int) error
	build(ctx context.Context, n int, src, dst []uint32, ws []W) error
	insert(ctx context.Context, src, dst []uint32, ws []W, res []slabhash.Result) error
	remove(ctx context.Context, src, dst []uint32, res []slabhash.Result) error
	lookup(ctx context.Context, src, dst []uint32, found []bool, out []W) error
	degrees(ctx context.Context, ids, out []uint32) error
	deleteVertices(ctx context.Context, ids []uint32) error
	neighbors(ctx context.Context, v uint32) (iter.Seq2[uint32, W], error)
	csr(ctx context.Context, sorted bool) (*CSR, []W, error)
	triangles(ctx context.Context, method TriangleMethod) (TriangleStats, error)
	flush(ctx context.Context) error
	rehash(ctx context.Context) error
	stats(ctx context.Context) (Stats, error)
	check(ctx context.Context) error
	close() error
}

// shards is the number of locks the CPU backend's vertices are spread
// over: an edge batch locks the vertices it changes, so batches run side
// by side.
const shards = 256

// core is the CPU backend, for weights of type W (struct{} for unweighted
// graphs): one Go map per vertex. Batches (front.Shared) lock the shards of
// the vertices they touch, an undirected edge's two vertices in shard order
// (so that both directions change together); whole-graph operations
// (front.Exclusive) run alone.
type core[W any] struct {
	directed, selfLoops bool
	adj                 []map[uint32]W
	locks               [shards]sync.Mutex
	entries_            atomic.Int64
	selfSkipped         atomic.Uint64
}

// base holds what Graph and Weighted share.
type base[W any] struct {
	f *front.Front
	e engine[W]
}

func newBase[W any](opts Options) (base[W], error) {
	f := front.New("graph", warpkit.CPU)
	switch opts.Backend {
	case warpkit.Auto, warpkit.CPU, warpkit.CUDA:
	default:
		return base[W]{}, f.Errorf("new", "unknown Backend %d", int(opts.Backend))
	}
	if opts.VertexCapacity < 0 || opts.VertexCapacity > ReservedTombstone {
		return base[W]{}, f.Errorf("new", "VertexCapacity %d outside 0..%d", opts.VertexCapacity, ReservedTombstone)
	}
	if !(opts.LoadFactor >= 0 && opts.LoadFactor <= 16) || (opts.LoadFactor > 0 && opts.LoadFactor*7 < 0.5) {
		return base[W]{}, f.Errorf("new", "LoadFactor %v outside (0.08, 16] (0: the default %v)", opts.LoadFactor, DefaultLoadFactor)
	}
	if !(opts.RehashChain >= 0 && opts.RehashChain <= 1000) {
		return base[W]{}, f.Errorf("new", "RehashChain %v outside 0..1000", opts.RehashChain)
	}
	if opts.MaxPoolBytes < 0 {
		return base[W]{}, f.Errorf("new", "MaxPoolBytes %d is negative", opts.MaxPoolBytes)
	}
	dev, own := opts.Device, false
	if opts.Backend == warpkit.CPU {
		dev = nil
	} else if dev == nil {
		var err error
		if dev, err = warpkit.OpenDevice(opts.Backend, 0); err != nil {
			return base[W]{}, f.Err("new", err)
		}
		own = dev != nil
	}
	if dev == nil {
		c := &core[W]{directed: opts.Directed, selfLoops: opts.AllowSelfLoops}
		c.adj = make([]map[uint32]W, opts.VertexCapacity)
		return base[W]{f: f, e: c}, nil
	}
	gg, err := newGPU[W](opts, dev, own)
	if err != nil {
		if own {
			dev.Close()
		}
		return base[W]{}, err
	}
	return base[W]{f: front.New("graph", warpkit.CUDA), e: gg}, nil
}

// Backend returns the graph's backend; it works after Close.
func (g *base[W]) Backend() warpkit.Backend { return g.f.Backend() }

// Close frees the graph (the CUDA backend's device memory); every later
// call returns ErrClosed.
func (g *base[W]) Close() error {
	return g.f.Close(g.e.close)
}

// checkIDs refuses a batch with a reserved ID (ErrReservedKey) or one at or
// past the capacity (ErrInvalidArgument), before anything applies.
func (g *base[W]) checkIDs(ids ...[]uint32) error {
	n := uint32(g.e.vertices())
	for _, s := range ids {
		for _, v := range s {
			switch {
			case v >= ReservedTombstone:
				return fmt.Errorf("%w: vertex %#x", warpkit.ErrReservedKey, v)
			case v >= n:
				return fmt.Errorf("%w: vertex %d at or past the capacity %d (EnsureVertices grows it)", warpkit.ErrInvalidArgument, v, n)
			}
		}
	}
	return nil
}

// withIDs runs a batch under the front (mode, op) once its IDs pass
// checkIDs; a refused batch applies nothing.
func (g *base[W]) withIDs(ctx context.Context, op string, mode front.Mode, run func() error, ids ...[]uint32) error {
	return g.f.Do(ctx, op, mode, func() error {
		if err := g.checkIDs(ids...); err != nil {
			return err
		}
		return run()
	})
}

// insertEdges is InsertEdges for both kinds of graph (ws nil: unweighted).
func (g *base[W]) insertEdges(ctx context.Context, src, dst []uint32, ws []W, res []slabhash.Result) error {
	if err := g.lens("insert edges", len(src), len(dst), res); err != nil {
		return err
	}
	return g.withIDs(ctx, "insert edges", front.Shared, func() error { return g.e.insert(ctx, src, dst, ws, res) }, src, dst)
}

// weightAt returns a batch's weight i (the zero weight without weights).
func weightAt[W any](ws []W) func(int) W {
	return func(i int) W {
		if ws == nil {
			var z W
			return z
		}
		return ws[i]
	}
}

func (c *core[W]) vertices() int                { return len(c.adj) }
func (c *core[W]) entries() int64               { return c.entries_.Load() }
func (c *core[W]) close() error                 { c.adj = nil; return nil }
func (c *core[W]) flush(context.Context) error  { return nil }
func (c *core[W]) rehash(context.Context) error { return nil }

// lockPair locks the shards of u and v (once when they share one), in
// shard order, and returns the unlock.
func (c *core[W]) lockPair(u, v uint32) func() {
	a, b := u%shards, v%shards
	if a > b {
		a, b = b, a
	}
	c.locks[a].Lock()
	if b != a {
		c.locks[b].Lock()
	}
	return func() {
		if b != a {
			c.locks[b].Unlock()
		}
		c.locks[a].Unlock()
	}
}

// put stores u→v with weight w (the caller holds u's shard): Inserted, or
// Present (the weight replaced).
func (c *core[W]) put(u, v uint32, w W) slabhash.Result {
	m := c.adj[u]
	if m == nil {
		m = make(map[uint32]W, 1)
		c.adj[u] = m
	}
	if _, ok := m[v]; ok {
		m[v] = w
		return slabhash.Present
	}
	m[v] = w
	c.entries_.Add(1)
	return slabhash.Inserted
}

// drop removes u→v (the caller holds u's shard): Removed or NotFound.
func (c *core[W]) drop(u, v uint32) slabhash.Result {
	m := c.adj[u]
	if _, ok := m[v]; !ok {
		return slabhash.NotFound
	}
	delete(m, v)
	c.entries_.Add(-1)
	return slabhash.Removed
}

// batchGrain is how many batch elements a goroutine takes.
const batchGrain = 1 << 14

// byEdge runs f over a batch on goroutines, each taking the elements of
// the edges (undirected: the unordered pairs) that hash to it, in batch
// order: the copies of one edge in a batch apply in order, whatever the
// split (the first insert Inserted, the last weight kept).
func byEdge(src, dst []uint32, directed bool, f func(i int)) {
	parts := hostpar.Parts(len(src), batchGrain)
	hostpar.For(parts, 1, func(_, plo, phi int) {
		for i := range src {
			u, v := src[i], dst[i]
			if !directed && u > v {
				u, v = v, u
			}
			if p := int((uint64(u)*0x9E3779B97F4A7C15 ^ uint64(v)) % uint64(parts)); p >= plo && p < phi {
				f(i)
			}
		}
	})
}

// insert applies an edge batch; res (optional) gets each edge's result:
// Inserted, Present (it was there: its weight replaced), or NotFound for a
// self-loop skipped.
func (c *core[W]) insert(ctx context.Context, src, dst []uint32, ws []W, res []slabhash.Result) error {
	w := weightAt(ws)
	var skipped atomic.Uint64
	byEdge(src, dst, c.directed, func(i int) {
		u, v := src[i], dst[i]
		r := slabhash.NotFound
		if u != v || c.selfLoops {
			unlock := c.lockPair(u, v)
			r = c.put(u, v, w(i))
			if !c.directed && u != v {
				c.put(v, u, w(i))
			}
			unlock()
		} else {
			skipped.Add(1)
		}
		if res != nil {
			res[i] = r
		}
	})
	c.selfSkipped.Add(skipped.Load())
	return nil
}

// remove applies a deletion batch; res (optional): Removed or NotFound.
func (c *core[W]) remove(ctx context.Context, src, dst []uint32, res []slabhash.Result) error {
	byEdge(src, dst, c.directed, func(i int) {
		u, v := src[i], dst[i]
		unlock := c.lockPair(u, v)
		r := c.drop(u, v)
		if !c.directed && u != v {
			c.drop(v, u)
		}
		unlock()
		if res != nil {
			res[i] = r
		}
	})
	return nil
}

// lookup reports each edge's presence and weight.
func (c *core[W]) lookup(ctx context.Context, src, dst []uint32, found []bool, out []W) error {
	hostpar.For(len(src), batchGrain, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			u, v := src[i], dst[i]
			l := &c.locks[u%shards]
			l.Lock()
			x, ok := c.adj[u][v]
			l.Unlock()
			if found != nil {
				found[i] = ok
			}
			if out != nil {
				out[i] = x
			}
		}
	})
	return nil
}

// lens checks a batch's slices: res may be nil.
func (g *base[W]) lens(op string, n, m int, res []slabhash.Result) error {
	if res != nil {
		return g.f.Lens(op, n, m, len(res))
	}
	return g.f.Lens(op, n, m)
}

// DeleteEdges removes edges (an undirected graph both directions); res,
// optional: Removed or NotFound.
func (g *base[W]) DeleteEdges(ctx context.Context, src, dst []uint32, res []slabhash.Result) error {
	if err := g.lens("delete edges", len(src), len(dst), res); err != nil {
		return err
	}
	return g.withIDs(ctx, "delete edges", front.Shared, func() error { return g.e.remove(ctx, src, dst, res) }, src, dst)
}

// HasEdges reports whether each edge is present.
func (g *base[W]) HasEdges(ctx context.Context, src, dst []uint32, found []bool) error {
	if err := g.f.Lens("has edges", len(src), len(dst), len(found)); err != nil {
		return err
	}
	return g.withIDs(ctx, "has edges", front.Shared, func() error { return g.e.lookup(ctx, src, dst, found, nil) }, src, dst)
}

// Degrees writes the degree (out-degree of a directed graph) of each
// vertex: exact whenever no batch is running.
func (g *base[W]) Degrees(ctx context.Context, ids []uint32, out []uint32) error {
	if err := g.f.Lens("degrees", len(ids), len(out)); err != nil {
		return err
	}
	return g.withIDs(ctx, "degrees", front.Shared, func() error { return g.e.degrees(ctx, ids, out) }, ids)
}

func (c *core[W]) degrees(_ context.Context, ids, out []uint32) error {
	for i, v := range ids {
		l := &c.locks[v%shards]
		l.Lock()
		out[i] = uint32(len(c.adj[v]))
		l.Unlock()
	}
	return nil
}

// EnsureVertices grows the vertex capacity to at least n (IDs 0..n-1).
func (g *base[W]) EnsureVertices(ctx context.Context, n int) error {
	return g.f.Do(ctx, "ensure vertices", front.Exclusive, func() error {
		if n < 0 || n > ReservedTombstone {
			return fmt.Errorf("%w: %d vertices outside 0..%d", warpkit.ErrInvalidArgument, n, ReservedTombstone)
		}
		return g.e.ensureVertices(n)
	})
}

func (c *core[W]) ensureVertices(n int) error {
	if n > len(c.adj) {
		c.adj = append(c.adj, make([]map[uint32]W, n-len(c.adj))...)
	}
	return nil
}

// DeleteVertices removes every edge of the vertices given, those into them
// included (an undirected graph through their own lists, a directed one by
// a sweep of every vertex); the IDs stay valid, with degree 0.
func (g *base[W]) DeleteVertices(ctx context.Context, ids []uint32) error {
	if err := g.f.Lens("delete vertices", len(ids)); err != nil {
		return err
	}
	return g.withIDs(ctx, "delete vertices", front.Exclusive, func() error { return g.e.deleteVertices(ctx, ids) }, ids)
}

func (c *core[W]) deleteVertices(_ context.Context, ids []uint32) error {
	{
		if c.directed {
			gone := make(map[uint32]bool, len(ids))
			for _, v := range ids {
				gone[v] = true
			}
			hostpar.For(len(c.adj), 1<<12, func(_, lo, hi int) {
				var n int64
				for u := lo; u < hi; u++ {
					for v := range c.adj[u] {
						if gone[v] {
							delete(c.adj[u], v)
							n++
						}
					}
				}
				c.entries_.Add(-n)
			})
		}
		for _, v := range ids {
			for w := range c.adj[v] {
				if !c.directed && w != v {
					c.drop(w, v)
				}
				c.entries_.Add(-1)
			}
			c.adj[v] = nil
		}
	}
	return nil
}

// NumVertices returns the vertex capacity.
func (g *base[W]) NumVertices(ctx context.Context) (int, error) {
	return front.Value(g.f, ctx, "num vertices", front.Shared, func() (int, error) { return g.e.vertices(), nil })
}

// Len returns the adjacency entries stored (an undirected edge counts
// twice, a self-loop once): the structure contract's live keys.
func (g *base[W]) Len(ctx context.Context) (int, error) {
	return front.Value(g.f, ctx, "len", front.Shared, func() (int, error) { return int(g.e.entries()), nil })
}

// neighbors returns an iterator over v's neighbours (in no fixed order)
// with their weights, from a copy taken under v's lock.
func (c *core[W]) neighbors(_ context.Context, v uint32) (iter.Seq2[uint32, W], error) {
	l := &c.locks[v%shards]
	l.Lock()
	type nw struct {
		v uint32
		w W
	}
	ns := make([]nw, 0, len(c.adj[v]))
	for u, w := range c.adj[v] {
		ns = append(ns, nw{u, w})
	}
	l.Unlock()
	return func(yield func(uint32, W) bool) {
		for _, x := range ns {
			if !yield(x.v, x.w) {
				return
			}
		}
	}, nil
}

// csr lays the graph out as a CSR (rows sorted when sorted is true) and
// each entry's weight.
func (c *core[W]) csr(_ context.Context, sorted bool) (*CSR, []W, error) {
	out := &CSR{Offsets: make([]uint64, len(c.adj)+1)}
	for v, m := range c.adj {
		out.Offsets[v+1] = out.Offsets[v] + uint64(len(m))
	}
	out.Cols = make([]uint32, out.Offsets[len(c.adj)])
	ws := make([]W, len(out.Cols))
	hostpar.For(len(c.adj), 1<<12, func(_, lo, hi int) {
		for v := lo; v < hi; v++ {
			at := out.Offsets[v]
			row := out.Cols[at:out.Offsets[v+1]]
			i := 0
			for u := range c.adj[v] {
				row[i] = u
				i++
			}
			if sorted {
				slices.Sort(row)
			}
			for i, u := range row {
				ws[at+uint64(i)] = c.adj[v][u]
			}
		}
	})
	return out, ws, nil
}

// ToCSR returns the graph as a CSR, each row's neighbours in ascending
// order when sorted is true.
func (g *base[W]) ToCSR(ctx context.Context, sorted bool) (*CSR, error) {
	return front.Value(g.f, ctx, "to csr", front.Exclusive, func() (*CSR, error) {
		out, _, err := g.e.csr(ctx, sorted)
		return out, err
	})
}

// TriangleCount counts the triangles of an undirected graph, each once:
// every vertex's neighbours ranked above it by (degree, ID) — the
// degree-ordered orientation — intersected with those of each such
// neighbour (CPU backend: by sorted merge; CUDA backend: by probes of the
// neighbour's hash table). Self-loops do not count.
func (g *base[W]) TriangleCount(ctx context.Context) (uint64, error) {
	st, err := g.TriangleCountWith(ctx, TrianglesHash)
	return st.Triangles, err
}

// TriangleMethod is how the CUDA backend counts triangles
// (TriangleCountWith); the CPU backend has one method (sorted merge).
type TriangleMethod int

const (
	// TrianglesHash: the tables gathered into rows, the rows oriented, each
	// pair of an oriented row probed in a hash table (TriangleCount).
	TrianglesHash TriangleMethod = iota
	// TrianglesSorted: the rows sorted (prim's segmented sort), oriented,
	// each pair looked up by binary search — the sorted-adjacency
	// (Hornet, faimGraph) way, whose sort TriangleStats.Sort times apart.
	TrianglesSorted
	// TrianglesThesis: no orientation — every pair of every vertex's
	// neighbours probed, each triangle found three times: the work of the
	// thesis's edge-exists counting (Table 5.7).
	TrianglesThesis
)

// TriangleStats is a triangle count and where its time went (the CUDA
// backend's phases: stream time between events recorded on its stream as
// each phase is queued, so a phase includes what the host did while the
// stream waited for it; Sort is 0 but for TrianglesSorted, and Orient next
// to 0 for TrianglesHash on an unweighted graph, whose gather orients. The
// CPU backend times only Count, on the host).
type TriangleStats struct {
	Triangles                   uint64
	Gather, Sort, Orient, Count time.Duration
}

// TriangleCountWith is TriangleCount by a given method, with its phases
// timed.
func (g *base[W]) TriangleCountWith(ctx context.Context, method TriangleMethod) (TriangleStats, error) {
	return front.Value(g.f, ctx, "triangle count", front.Exclusive, func() (TriangleStats, error) {
		if method < TrianglesHash || method > TrianglesThesis {
			return TriangleStats{}, fmt.Errorf("%w: unknown triangle method %d", warpkit.ErrInvalidArgument, int(method))
		}
		if g.directed() {
			return TriangleStats{}, fmt.Errorf("%w: triangle counting needs an undirected graph", warpkit.ErrInvalidArgument)
		}
		return g.e.triangles(ctx, method)
	})
}

// directed reports whether the graph is directed.
func (g *base[W]) directed() bool {
	switch e := g.e.(type) {
	case *core[W]:
		return e.directed
	case *gpuGraph[W]:
		return e.directed
	}
	return false
}

func (c *core[W]) triangles(ctx context.Context, _ TriangleMethod) (TriangleStats, error) {
	t0 := time.Now()
	n, err := triangles(ctx, c.csrOriented())
	return TriangleStats{Triangles: n, Count: time.Since(t0)}, err
}

// csrOriented returns, for every vertex, its neighbours ranked above it by
// (degree, ID), sorted by ID.
func (c *core[W]) csrOriented() *CSR {
	// The degrees in one array: the ranks read them at random.
	degs := make([]uint32, len(c.adj))
	hostpar.ForCores(len(c.adj), 1<<12, func(_, lo, hi int) {
		for v := lo; v < hi; v++ {
			degs[v] = uint32(len(c.adj[v]))
		}
	})
	above := func(u, v uint32) bool { // v ranks above u
		if d := cmp.Compare(degs[u], degs[v]); d != 0 {
			return d < 0
		}
		return u < v
	}
	out := &CSR{Offsets: make([]uint64, len(c.adj)+1)}
	hostpar.ForCores(len(c.adj), 1<<10, func(_, lo, hi int) {
		for v := lo; v < hi; v++ {
			n := 0
			for u := range c.adj[v] {
				if above(uint32(v), u) {
					n++
				}
			}
			out.Offsets[v+1] = uint64(n)
		}
	})
	for v := range c.adj {
		out.Offsets[v+1] += out.Offsets[v]
	}
	out.Cols = make([]uint32, out.Offsets[len(c.adj)])
	hostpar.For(len(c.adj), 1<<12, func(_, lo, hi int) {
		for v := lo; v < hi; v++ {
			row := out.Cols[out.Offsets[v]:out.Offsets[v]]
			for u := range c.adj[v] {
				if above(uint32(v), u) {
					row = append(row, u)
				}
			}
			slices.Sort(row)
		}
	})
	return out
}

// triangles counts the triangles of an oriented CSR (each triangle's three
// edges oriented acyclically): for every edge u→v, the common out-
// neighbours of u and v, by sorted merge, on every core.
func triangles(ctx context.Context, g *CSR) (uint64, error) {
	var total atomic.Uint64
	n := len(g.Offsets) - 1
	hostpar.ForCores(n, 1<<10, func(_, lo, hi int) {
		var sum uint64
		for u := lo; u < hi && ctx.Err() == nil; u++ {
			ru := g.Cols[g.Offsets[u]:g.Offsets[u+1]]
			for _, v := range ru {
				sum += intersect(ru, g.Cols[g.Offsets[v]:g.Offsets[v+1]])
			}
		}
		total.Add(sum)
	})
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return total.Load(), nil
}

// intersect counts the common elements of two ascending lists.
func intersect(a, b []uint32) uint64 {
	var n uint64
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			n++
			i++
			j++
		}
	}
	return n
}

// Flush compacts the CUDA backend's bucket lists (the thesis's flush: live
// entries to the front of each list, emptied overflow slabs back to the
// pool) and frees the device scratch kept between calls
// (Stats.ScratchBytes); the CPU backend's maps need neither.
func (g *base[W]) Flush(ctx context.Context) error {
	return g.f.Do(ctx, "flush", front.Exclusive, func() error { return g.e.flush(ctx) })
}

// Rehash re-buckets the tables that outgrew their buckets (the CUDA
// backend: every vertex holding more entries than its head slabs have
// slots gets a new run of buckets sized at Options.LoadFactor, its old
// lists emptied once the entries moved; a failure leaves the graph as it
// was). The CPU backend's maps grow on their own: a no-op there.
func (g *base[W]) Rehash(ctx context.Context) error {
	return g.f.Do(ctx, "rehash", front.Exclusive, func() error { return g.e.rehash(ctx) })
}

// Stats returns the graph's size and shape.
func (g *base[W]) Stats(ctx context.Context) (Stats, error) {
	return front.Value(g.f, ctx, "stats", front.Exclusive, func() (Stats, error) { return g.e.stats(ctx) })
}

func (c *core[W]) stats(context.Context) (Stats, error) {
	{
		st := Stats{Backend: warpkit.CPU, Vertices: len(c.adj), Entries: uint64(c.entries_.Load()), SelfLoopsSkipped: c.selfSkipped.Load()}
		var self uint64
		for v, m := range c.adj {
			st.MaxDegree = max(st.MaxDegree, uint32(len(m)))
			if _, ok := m[uint32(v)]; ok {
				self++
			}
		}
		st.Edges = st.Entries
		if !c.directed {
			st.Edges = (st.Entries-self)/2 + self
		}
		// A Go map costs about 48 bytes a slot of (key, weight) plus its
		// header; the vertex array 8 bytes a vertex.
		st.Bytes = int64(len(c.adj))*8 + int64(st.Entries)*48
		return st, nil
	}
}

// Check verifies the structure's invariants: the entry count is the sum
// of the degrees, every neighbour is a vertex, no self-loop is stored
// unless allowed, and an undirected graph holds every edge both ways with
// one weight. It returns the first violation found.
func (g *base[W]) Check(ctx context.Context) error {
	return g.f.Do(ctx, "check", front.Exclusive, func() error { return g.e.check(ctx) })
}

func (c *core[W]) check(context.Context) error {
	{
		var sum int64
		for v, m := range c.adj {
			sum += int64(len(m))
			for u, w := range m {
				switch {
				case int(u) >= len(c.adj):
					return fmt.Errorf("vertex %d has neighbour %d past the capacity %d", v, u, len(c.adj))
				case u == uint32(v) && !c.selfLoops:
					return fmt.Errorf("vertex %d has a self-loop", v)
				case !c.directed:
					back, ok := c.adj[u][uint32(v)]
					if !ok {
						return fmt.Errorf("edge %d-%d is stored one way only", v, u)
					}
					if any(back) != any(w) {
						return fmt.Errorf("edge %d-%d has two weights, %v and %v", v, u, w, back)
					}
				}
			}
		}
		if sum != c.entries_.Load() {
			return fmt.Errorf("degrees sum to %d entries, the count says %d", sum, c.entries_.Load())
		}
		return nil
	}
}

// build replaces the graph's edges with a batch (exclusive): the entries
// counted per vertex, laid out by vertex in batch order (a counting sort),
// then each vertex's map made at its size and filled, vertices split among
// goroutines — no locks, and a repeated edge keeps its last weight as an
// insert batch would.
func (c *core[W]) build(_ context.Context, n int, src, dst []uint32, ws []W) error {
	w := weightAt(ws)
	c.adj = make([]map[uint32]W, n)
	c.entries_.Store(0)
	off := make([]uint64, n+1)
	var skipped uint64
	for i := range src {
		u, v := src[i], dst[i]
		if u == v && !c.selfLoops {
			skipped++
			continue
		}
		off[u+1]++
		if !c.directed && u != v {
			off[v+1]++
		}
	}
	c.selfSkipped.Store(skipped)
	for v := range n {
		off[v+1] += off[v]
	}
	tgt, from := make([]uint32, off[n]), make([]int, off[n])
	at := slices.Clone(off[:n])
	put := func(u, v uint32, i int) {
		tgt[at[u]], from[at[u]] = v, i
		at[u]++
	}
	for i := range src {
		u, v := src[i], dst[i]
		if u == v && !c.selfLoops {
			continue
		}
		put(u, v, i)
		if !c.directed && u != v {
			put(v, u, i)
		}
	}
	hostpar.ForCores(n, 1<<10, func(_, lo, hi int) {
		var entries int64
		for v := lo; v < hi; v++ {
			if off[v] == off[v+1] {
				continue
			}
			m := make(map[uint32]W, off[v+1]-off[v])
			for k := off[v]; k < off[v+1]; k++ {
				m[tgt[k]] = w(from[k])
			}
			c.adj[v] = m
			entries += int64(len(m))
		}
		c.entries_.Add(entries)
	})
	return nil
}

// buildWith is Build: the edges replace the graph's, the capacity grows to
// minN and to the largest ID + 1.
func (g *base[W]) buildWith(ctx context.Context, op string, minN int, src, dst []uint32, ws []W) error {
	return g.f.Do(ctx, op, front.Exclusive, func() error {
		if err := checkReserved(src, dst); err != nil {
			return err
		}
		return g.e.build(ctx, max(minN, capacityFor(g.e.vertices(), src, dst)), src, dst, ws)
	})
}

// capacityFor is the vertex capacity a build of these edges needs (at
// least the current one).
func capacityFor(cur int, ids ...[]uint32) int {
	n := cur
	for _, s := range ids {
		for _, v := range s {
			n = max(n, int(v)+1)
		}
	}
	return n
}

// checkReserved refuses reserved IDs (builds size the graph to their IDs).
func checkReserved(ids ...[]uint32) error {
	for _, s := range ids {
		for _, v := range s {
			if v >= ReservedTombstone {
				return fmt.Errorf("%w: vertex %#x", warpkit.ErrReservedKey, v)
			}
		}
	}
	return nil
}

func errCSR(msg string) error { return fmt.Errorf("%w: CSR: %s", warpkit.ErrInvalidArgument, msg) }
