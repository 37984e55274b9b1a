// Package graphio reads graphs in the file formats of the dynamic-graph
// literature's datasets — MatrixMarket (SuiteSparse), SNAP edge lists and
// METIS/DIMACS10 .graph — and generates the synthetic graphs that stand in
// for them where the real ones cannot be fetched (RMAT/Kronecker, random
// geometric graphs). Design: shared/docs/specs/graph.md §5.
//
// Readers stream their input (any io.Reader; ReadFile opens a path and
// undoes gzip), check every line, and report the first bad one as a
// *ParseError with its line number; nothing is returned for a bad file.
// ReadOptions turn a file's edges into what a graph structure wants: both
// directions of every edge (Symmetrize), no self-loops (DropSelfLoops), no
// repeated entry (Dedup), and a bound on the vertex count (MaxVertices).
//
// # Status
//
// Part of issue 17 (G3 of the spec's split): the three readers, their
// options, gzip; the RMAT, random-geometric, Delaunay, road and 3-D mesh
// generators and the stand-ins of the thesis's twelve datasets (StandIns,
// all within 15% of their entries: docs/benchmarks.md); WriteSNAP and
// DegreeStats, behind warp graph info, gen and standins; tested and
// fuzzed; the binary .wkg CSR cache (WriteWKG, ReadWKG). MatrixMarket and
// SNAP entries are parsed in chunks on every core (METIS, whose vertex is
// its line's rank, on one). Still to build: warp graph tc, with the graph
// structure.
//
// Departures from the spec (shared/docs/specs/graph.md §5): Delaunay is
// written here (fogleman/delaunay is not reachable), an incremental Lawson
// construction; RMAT is generated on the host only (the device kernel
// comes with the graph structure); the stand-ins' sizes are Table 5.1's
// rounded figures; METIS files parse on one core; the chunked parsers hold
// a MatrixMarket file's text until its entries are counted (to name the
// line of an entry past the count).
package graphio

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/gzip"

	"github.com/warpkit/warpkit/prim"
)

// Edges is a graph as a list of entries (COO): entry i goes from Src[i] to
// Dst[i], with weight W[i] when W is not nil. Vertex IDs are
// 0..NumVertices-1.
type Edges struct {
	NumVertices int
	Src, Dst    []uint32
	W           []float64 // nil: unweighted
	// Directed says the file's entries are directed (MatrixMarket general,
	// SNAP). An undirected file (MatrixMarket symmetric or skew-symmetric,
	// METIS) holds each edge once or twice as the format stores it;
	// Symmetrize makes both directions present.
	Directed bool
	// What the options removed.
	SelfLoops, Duplicates int
}

// Len returns the number of entries.
func (e *Edges) Len() int { return len(e.Src) }

// ReadOptions shape what a reader returns.
type ReadOptions struct {
	// Symmetrize adds the reverse of every entry (so that an undirected
	// graph has both directions of each edge; a directed one becomes its
	// undirected closure). Combine with Dedup where an edge may already be
	// stored both ways.
	Symmetrize bool
	// DropSelfLoops removes entries from a vertex to itself.
	DropSelfLoops bool
	// Dedup keeps one entry per (src, dst) pair — the last one in the
	// file, as a graph's insert replaces a repeated edge's weight — and
	// sorts the entries by source, then destination.
	Dedup bool
	// MaxVertices, when positive, rejects a file with more vertices
	// (ErrTooLarge), before reading its entries where the header says.
	MaxVertices int
}

// Errors, for errors.Is.
var (
	// ErrFormat is wrapped by every *ParseError.
	ErrFormat = errors.New("graphio: bad input")
	// ErrTooLarge is returned for a graph past ReadOptions.MaxVertices or
	// past 32-bit vertex IDs.
	ErrTooLarge = errors.New("graphio: graph too large")
	// ErrUnknownFormat is returned by ReadFile for a file name it cannot
	// tell the format of.
	ErrUnknownFormat = errors.New("graphio: unknown file format")
)

// ParseError is a bad line of an input.
type ParseError struct {
	Format string // "matrixmarket", "snap", "metis"
	Line   int    // 1-based; 0: the input as a whole
	Msg    string
}

func (e *ParseError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("graphio: %s: %s", e.Format, e.Msg)
	}
	return fmt.Sprintf("graphio: %s: line %d: %s", e.Format, e.Line, e.Msg)
}

func (e *ParseError) Unwrap() error { return ErrFormat }

// maxID is the largest vertex ID: 0xFFFFFFFF and 0xFFFFFFFE are reserved by
// the graph structures (empty and tombstone slots).
const maxID = 0xFFFFFFFD

// checkVertices applies MaxVertices and the 32-bit ID range to a vertex
// count.
func (o ReadOptions) checkVertices(n int) error {
	if n > maxID+1 {
		return fmt.Errorf("%w: %d vertices, IDs past 32 bits", ErrTooLarge, n)
	}
	if o.MaxVertices > 0 && n > o.MaxVertices {
		return fmt.Errorf("%w: %d vertices, more than MaxVertices %d", ErrTooLarge, n, o.MaxVertices)
	}
	return nil
}

// Apply applies the options but MaxVertices to e (a generated graph, say),
// in place, and returns it.
func (o ReadOptions) Apply(e *Edges) (*Edges, error) { return o.finish(e) }

// finish applies the options to what a reader read.
func (o ReadOptions) finish(e *Edges) (*Edges, error) {
	if o.Dedup && 2*len(e.Src) > math.MaxUint32 {
		return nil, fmt.Errorf("%w: %d entries to deduplicate (at most 2^31)", ErrTooLarge, len(e.Src))
	}
	if o.DropSelfLoops {
		k := 0
		for i := range e.Src {
			if e.Src[i] == e.Dst[i] {
				continue
			}
			e.Src[k], e.Dst[k] = e.Src[i], e.Dst[i]
			if e.W != nil {
				e.W[k] = e.W[i]
			}
			k++
		}
		e.SelfLoops = len(e.Src) - k
		e.Src, e.Dst = e.Src[:k], e.Dst[:k]
		if e.W != nil {
			e.W = e.W[:k]
		}
	}
	if o.Symmetrize {
		n := len(e.Src)
		for i := range n {
			if e.Src[i] == e.Dst[i] {
				continue // a self-loop is its own reverse
			}
			e.Src, e.Dst = append(e.Src, e.Dst[i]), append(e.Dst, e.Src[i])
			if e.W != nil {
				e.W = append(e.W, e.W[i])
			}
		}
	}
	if o.Dedup {
		dedup(e)
	}
	return e, nil
}

// dedup sorts e's entries by (src, dst), keeping the last of each pair.
func dedup(e *Edges) {
	// (finish keeps dedup under 2^32 entries: positions are uint32)
	// A stable radix sort of (src<<32|dst, position): ties keep file order,
	// so the last of a run is the file's last entry of the pair.
	keys, at := make([]uint64, len(e.Src)), make([]uint32, len(e.Src))
	for i := range keys {
		keys[i], at[i] = uint64(e.Src[i])<<32|uint64(e.Dst[i]), uint32(i)
	}
	prim.SortPairsHost(keys, at, prim.SortOptions{})
	src, dst := make([]uint32, 0, len(keys)), make([]uint32, 0, len(keys))
	var w []float64
	if e.W != nil {
		w = make([]float64, 0, len(keys))
	}
	for k, key := range keys {
		if k+1 < len(keys) && keys[k+1] == key {
			continue // a later entry of the pair follows: it wins
		}
		src, dst = append(src, uint32(key>>32)), append(dst, uint32(key))
		if w != nil {
			w = append(w, e.W[at[k]])
		}
	}
	e.Duplicates = len(e.Src) - len(src)
	e.Src, e.Dst, e.W = src, dst, w
}

// ReadFile reads the graph at path, its format told by its extension:
// .mtx (MatrixMarket), .graph or .metis (METIS/DIMACS10), .txt, .el, .edges
// or .tsv (SNAP edge list), .wkg (the binary CSR cache: WriteWKG); a further
// .gz is undone first.
func ReadFile(path string, opts ReadOptions) (*Edges, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	name := strings.ToLower(path)
	var r io.Reader = f
	if strings.HasSuffix(name, ".gz") {
		z, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("graphio: %s: %w", path, err)
		}
		defer z.Close()
		r, name = z, strings.TrimSuffix(name, ".gz")
	}
	var e *Edges
	switch filepath.Ext(name) {
	case ".mtx":
		e, err = ReadMatrixMarket(r, opts)
	case ".graph", ".metis":
		e, err = ReadMETIS(r, opts)
	case ".txt", ".el", ".edges", ".tsv":
		e, err = ReadSNAP(r, opts)
	case ".wkg":
		e, err = ReadWKG(r, opts)
	default:
		return nil, fmt.Errorf("%w: %s (want .mtx, .graph, .metis, .txt, .el, .edges, .tsv or .wkg, optionally .gz)", ErrUnknownFormat, path)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return e, nil
}
