package graph

import (
	"context"
	"iter"

	"github.com/warpkit/warpkit/internal/front"
	"github.com/warpkit/warpkit/slabhash"
)

// Graph is an unweighted graph: a set of neighbours per vertex.
type Graph struct{ base[struct{}] }

// Weighted is a graph with a weight of type W on every edge: a map of
// neighbours to weights per vertex.
type Weighted[W Weight] struct{ base[W] }

// New returns an unweighted graph.
func New(opts Options) (*Graph, error) {
	b, err := newBase[struct{}](opts)
	if err != nil {
		return nil, err
	}
	return &Graph{b}, nil
}

// NewWeighted returns a weighted graph.
func NewWeighted[W Weight](opts Options) (*Weighted[W], error) {
	b, err := newBase[W](opts)
	if err != nil {
		return nil, err
	}
	return &Weighted[W]{b}, nil
}

// Build replaces the graph's edges with edges (src[i], dst[i]) (COO),
// growing the vertex capacity to the largest ID + 1.
func (g *Graph) Build(ctx context.Context, src, dst []uint32) error {
	if err := g.f.Lens("build", len(src), len(dst)); err != nil {
		return err
	}
	return g.buildWith(ctx, "build", 0, src, dst, nil)
}

// BuildCSR replaces the graph's edges with a CSR's: vertex v's neighbours
// are cols[offsets[v]:offsets[v+1]] (len(offsets)-1 vertices at least).
func (g *Graph) BuildCSR(ctx context.Context, offsets []uint64, cols []uint32) error {
	if err := g.f.Lens("build csr", 0); err != nil { // closed first
		return err
	}
	src, dst, err := fromCSR(offsets, cols)
	if err != nil {
		return g.f.Err("build csr", err)
	}
	return g.buildWith(ctx, "build csr", max(0, len(offsets)-1), src, dst, nil)
}

// InsertEdges inserts edges (src[i], dst[i]) (an undirected graph both
// directions); res, optional, gets each one's result: Inserted, Present
// (already there), or NotFound (a self-loop skipped: Options.
// AllowSelfLoops). Repeated edges in a batch: the first is Inserted, the
// rest Present. IDs are checked first: a reserved ID (ErrReservedKey) or
// one past the capacity (ErrInvalidArgument) fails the batch whole.
func (g *Graph) InsertEdges(ctx context.Context, src, dst []uint32, res []slabhash.Result) error {
	return g.insertEdges(ctx, src, dst, nil, res)
}

// Neighbors returns an iterator over v's neighbours (in no fixed order),
// as they were when it was called.
func (g *Graph) Neighbors(ctx context.Context, v uint32) (iter.Seq[uint32], error) {
	return front.Value(g.f, ctx, "neighbors", front.Shared, func() (iter.Seq[uint32], error) {
		if err := g.checkIDs([]uint32{v}); err != nil {
			return nil, err
		}
		ns, err := g.e.neighbors(ctx, v)
		if err != nil {
			return nil, err
		}
		return func(yield func(uint32) bool) {
			for u := range ns {
				if !yield(u) {
					return
				}
			}
		}, nil
	})
}

// Build replaces the graph's edges with weighted edges (src[i], dst[i],
// w[i]) (a repeated edge keeps its last weight), growing the vertex
// capacity to the largest ID + 1.
func (g *Weighted[W]) Build(ctx context.Context, src, dst []uint32, w []W) error {
	if err := g.f.Lens("build", len(src), len(dst), len(w)); err != nil {
		return err
	}
	return g.buildWith(ctx, "build", 0, src, dst, w)
}

// BuildCSR replaces the graph's edges with a CSR's, weights[k] the weight
// of the edge of cols[k].
func (g *Weighted[W]) BuildCSR(ctx context.Context, offsets []uint64, cols []uint32, weights []W) error {
	if err := g.f.Lens("build csr", 0); err != nil { // closed first
		return err
	}
	src, dst, err := fromCSR(offsets, cols)
	if err != nil {
		return g.f.Err("build csr", err)
	}
	if err := g.f.Lens("build csr", len(cols), len(weights)); err != nil {
		return err
	}
	return g.buildWith(ctx, "build csr", max(0, len(offsets)-1), src, dst, weights)
}

// InsertEdges inserts weighted edges; an edge already present takes the
// new weight (Present). See Graph.InsertEdges.
func (g *Weighted[W]) InsertEdges(ctx context.Context, src, dst []uint32, w []W, res []slabhash.Result) error {
	if err := g.f.Lens("insert edges", len(src), len(w)); err != nil {
		return err
	}
	return g.insertEdges(ctx, src, dst, w, res)
}

// Weights writes each edge's weight (0 where absent) and, when found is not
// nil, whether it is present.
func (g *Weighted[W]) Weights(ctx context.Context, src, dst []uint32, out []W, found []bool) error {
	if err := g.f.Lens("weights", len(src), len(dst), len(out)); err != nil {
		return err
	}
	if found != nil {
		if err := g.f.Lens("weights", len(src), len(found)); err != nil {
			return err
		}
	}
	return g.withIDs(ctx, "weights", front.Shared, func() error { return g.e.lookup(ctx, src, dst, found, out) }, src, dst)
}

// Neighbors returns an iterator over v's neighbours and the weights of the
// edges to them (in no fixed order), as they were when it was called.
func (g *Weighted[W]) Neighbors(ctx context.Context, v uint32) (iter.Seq2[uint32, W], error) {
	return front.Value(g.f, ctx, "neighbors", front.Shared, func() (iter.Seq2[uint32, W], error) {
		if err := g.checkIDs([]uint32{v}); err != nil {
			return nil, err
		}
		return g.e.neighbors(ctx, v)
	})
}

// ToCSRWeights is ToCSR with each entry's weight.
func (g *Weighted[W]) ToCSRWeights(ctx context.Context, sorted bool) (*CSR, []W, error) {
	var ws []W
	out, err := front.Value(g.f, ctx, "to csr", front.Exclusive, func() (*CSR, error) {
		var out *CSR
		var err error
		out, ws, err = g.e.csr(ctx, sorted)
		return out, err
	})
	return out, ws, err
}

// fromCSR expands a CSR into edge lists.
func fromCSR(offsets []uint64, cols []uint32) (src, dst []uint32, err error) {
	if len(offsets) == 0 {
		return nil, nil, nil
	}
	n := len(offsets) - 1
	if offsets[0] != 0 || offsets[n] != uint64(len(cols)) {
		return nil, nil, errCSR("offsets must run from 0 to len(cols)")
	}
	if n > ReservedTombstone {
		return nil, nil, errCSR("too many vertices")
	}
	for v := range n { // before anything is filled: offsets bound the writes below
		if offsets[v+1] < offsets[v] {
			return nil, nil, errCSR("offsets must not decrease")
		}
	}
	src = make([]uint32, len(cols))
	for v := range n {
		for k := offsets[v]; k < offsets[v+1]; k++ {
			src[k] = uint32(v)
		}
	}
	return src, cols, nil
}
