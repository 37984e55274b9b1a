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
	want := 2
	if weighted {
		want = 3
	}
	parse := func(chunk []byte, line int, out *entryChunk) {
		var f [][]byte
		bad := func(n int, format string, args ...any) bool {
			out.err = &ParseError{Format: "matrixmarket", Line: n, Msg: fmt.Sprintf(format, args...)}
			return false
		}
		chunkLines(chunk, line, func(n int, l []byte) bool {
			if len(l) > 0 && l[0] == '%' || blank(l) {
				return true
			}
			f = fields(f, l)
			if len(f) != want {
				return bad(n, "entry %q: want %d fields", l, want)
			}
			i, ok1 := atoi(f[0])
			j, ok2 := atoi(f[1])
			if !ok1 || !ok2 || i < 1 || i > rows || j < 1 || j > cols {
				return bad(n, "entry %q: indices outside 1..%d × 1..%d", l, rows, cols)
			}
			if skew && i == j {
				return bad(n, "entry %q: on the diagonal of a skew-symmetric matrix", l)
			}
			if weighted {
				w, ok := atof(f[2])
				if !ok {
					return bad(n, "entry %q: value %q is not a finite number", l, f[2])
				}
				out.w = append(out.w, w)
			}
			out.src, out.dst = append(out.src, uint32(i-1)), append(out.dst, uint32(j-1))
			return true
		})
	}
	chunks, err := parseEntryLines("matrixmarket", l.r, l.n+1, parse)
	if err != nil {
		return nil, err
	}
	// The first problem in file order: a bad line, or the entry past nnz.
	var count int64
	for _, c := range chunks {
		if count+int64(len(c.src)) > nnz {
			k := nnz - count // c's entry past the count
			line := 0
			chunkLines(c.text, c.line, func(n int, l []byte) bool {
				if len(l) > 0 && l[0] == '%' || blank(l) {
					return true
				}
				if k == 0 {
					line = n
					return false
				}
				k--
				return true
			})
			if c.err == nil || c.err.Line > line {
				return nil, &ParseError{Format: "matrixmarket", Line: line, Msg: fmt.Sprintf("more entries than the %d the size line says", nnz)}
			}
		}
		if c.err != nil {
			return nil, c.err
		}
		count += int64(len(c.src))
	}
	if count != nnz {
		last := l.n
		if len(chunks) > 0 {
			last = chunks[len(chunks)-1].lastLine()
		}
		return nil, &ParseError{Format: "matrixmarket", Line: last, Msg: fmt.Sprintf("%d entries, the size line says %d", count, nnz)}
	}
	mergeChunks(e, chunks, weighted)
	if skew && opts.Symmetrize && e.W != nil {
		// The mirrored entries of a skew-symmetric matrix are the negated
		// values: symmetrize here, then let finish dedup.
		n := len(e.Src)
		for k := range n {
			e.Src, e.Dst, e.W = append(e.Src, e.Dst[k]), append(e.Dst, e.Src[k]), append(e.W, -e.W[k])
		}
		opts.Symmetrize = false
	}
	return opts.finish(e)
}
