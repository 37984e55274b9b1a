package graphio

import (
	"bytes"
	"fmt"
	"io"
)

// ReadMatrixMarket reads a MatrixMarket coordinate matrix as a graph:
// entry (i, j) is an edge from vertex i-1 to vertex j-1 (the format is
// 1-based), weighted by the entry's value unless the matrix is a pattern.
// Field pattern, integer or real; symmetry general (Directed), symmetric or
// skew-symmetric (undirected: the file stores one triangle, Symmetrize
// adds the other; a skew-symmetric matrix's mirrored entries are negated,
// and its diagonal must be empty).
// Comments (%) and blank lines are skipped anywhere after the banner; the
// vertex count is the larger of the row and column counts.
func ReadMatrixMarket(r io.Reader, opts ReadOptions) (*Edges, error) {
	l := newLines("matrixmarket", r)
	if !l.next() {
		if err := l.Err(); err != nil {
			return nil, err
		}
		return nil, &ParseError{Format: "matrixmarket", Msg: "empty input"}
	}
	var f [][]byte
	f = fields(f, bytes.ToLower(l.line))
	if len(f) != 5 || string(f[0]) != "%%matrixmarket" || string(f[1]) != "matrix" {
		return nil, l.errorf("not a MatrixMarket banner (%%%%MatrixMarket matrix coordinate <field> <symmetry>)")
	}
	if string(f[2]) != "coordinate" {
		return nil, l.errorf("format %q: a graph needs a coordinate (sparse) matrix", f[2])
	}
	field, symmetry := string(f[3]), string(f[4])
	weighted := false
	switch field {
	case "pattern":
	case "integer", "real", "double":
		weighted = true
	default:
		return nil, l.errorf("field %q: want pattern, integer or real", field)
	}
	skew := false
	e := &Edges{}
	switch symmetry {
	case "general":
		e.Directed = true
	case "symmetric":
	case "skew-symmetric":
		skew = true
	default:
		return nil, l.errorf("symmetry %q: want general, symmetric or skew-symmetric", symmetry)
	}
	// The size line: the first line that is neither a comment nor blank.
	var rows, cols, nnz int64
	for {
		if !l.next() {
			if err := l.Err(); err != nil {
				return nil, err
			}
			return nil, &ParseError{Format: "matrixmarket", Msg: "no size line"}
		}
		if len(l.line) > 0 && l.line[0] == '%' || blank(l.line) {
			continue
		}
		f = fields(f, l.line)
		var ok1, ok2, ok3 bool
		if len(f) == 3 {
			rows, ok1 = atoi(f[0])
			cols, ok2 = atoi(f[1])
			nnz, ok3 = atoi(f[2])
		}
		if !ok1 || !ok2 || !ok3 {
			return nil, l.errorf("size line %q: want rows, columns and entries", l.line)
		}
		break
	}
	n := max(rows, cols)
	if err := opts.checkVertices(int(min(n, 1<<40))); err != nil {
		return nil, err
	}
	e.NumVertices = int(n)
	capHint := int(min(nnz, 1<<26))
	e.Src, e.Dst = make([]uint32, 0, capHint), make([]uint32, 0, capHint)
	if weighted {
		e.W = make([]float64, 0, capHint)
	}
	want := 2
	if weighted {
		want = 3
	}
	var count int64
	for l.next() {
		if len(l.line) > 0 && l.line[0] == '%' || blank(l.line) {
			continue
		}
		if count == nnz {
			return nil, l.errorf("more entries than the %d the size line says", nnz)
		}
		f = fields(f, l.line)
		if len(f) != want {
			return nil, l.errorf("entry %q: want %d fields", l.line, want)
		}
		i, ok1 := atoi(f[0])
		j, ok2 := atoi(f[1])
		if !ok1 || !ok2 || i < 1 || i > rows || j < 1 || j > cols {
			return nil, l.errorf("entry %q: indices outside 1..%d × 1..%d", l.line, rows, cols)
		}
		if skew && i == j {
			return nil, l.errorf("entry %q: on the diagonal of a skew-symmetric matrix", l.line)
		}
		if weighted {
			w, ok := atof(f[2])
			if !ok {
				return nil, l.errorf("entry %q: value %q is not a finite number", l.line, f[2])
			}
			e.W = append(e.W, w)
		}
		e.Src, e.Dst = append(e.Src, uint32(i-1)), append(e.Dst, uint32(j-1))
		count++
	}
	if err := l.Err(); err != nil {
		return nil, err
	}
	if count != nnz {
		return nil, &ParseError{Format: "matrixmarket", Line: l.n, Msg: fmt.Sprintf("%d entries, the size line says %d", count, nnz)}
	}
	if skew && opts.Symmetrize && e.W != nil {
		// The mirrored entries of a skew-symmetric matrix are the negated
		// values: symmetrize here, then let finish dedup.
		n := len(e.Src)
		for k := range n {
			e.Src, e.Dst, e.W = append(e.Src, e.Dst[k]), append(e.Dst, e.Src[k]), append(e.W, -e.W[k])
		}
		opts.Symmetrize = false
	}
	return opts.finish(e), nil
}
