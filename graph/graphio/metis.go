package graphio

import (
	"fmt"
	"io"
)

// ReadMETIS reads a METIS / DIMACS10 .graph file: a header "n m [fmt
// [ncon]]" (n vertices, m undirected edges; fmt's digits say whether lines
// carry vertex sizes, vertex weights and edge weights: 0, 1, 10, 11, 100,
// ...; ncon vertex weights per vertex), then one line per vertex, in order,
// listing its neighbours (1-based), each followed by the edge's weight when
// fmt says so. A blank line is a vertex without neighbours; lines starting
// with '%' are comments. Every edge is listed from both ends, so the
// entries hold both directions (2m of them, checked); vertex sizes and
// weights are read and dropped; edge weights become W.
func ReadMETIS(r io.Reader, opts ReadOptions) (*Edges, error) {
	l := newLines("metis", r)
	var f [][]byte
	// The header: the first line that is not a comment.
	for {
		if !l.next() {
			if err := l.Err(); err != nil {
				return nil, err
			}
			return nil, &ParseError{Format: "metis", Msg: "no header line"}
		}
		if len(l.line) > 0 && l.line[0] == '%' {
			continue
		}
		break
	}
	f = fields(f, l.line)
	if len(f) < 2 || len(f) > 4 {
		return nil, l.errorf("header %q: want \"n m [fmt [ncon]]\"", l.line)
	}
	n, ok1 := atoi(f[0])
	m, ok2 := atoi(f[1])
	if !ok1 || !ok2 {
		return nil, l.errorf("header %q: n and m must be whole numbers", l.line)
	}
	var sizes, vweights, eweights bool
	ncon := int64(0)
	if len(f) >= 3 {
		code := f[2]
		if len(code) > 3 {
			return nil, l.errorf("header %q: fmt %q has more than 3 digits", l.line, code)
		}
		for k, c := range code {
			if c != '0' && c != '1' {
				return nil, l.errorf("header %q: fmt %q: digits must be 0 or 1", l.line, code)
			}
			on := c == '1'
			switch len(code) - 1 - k { // digits count from the right
			case 0:
				eweights = on
			case 1:
				vweights = on
			case 2:
				sizes = on
			}
		}
	}
	if vweights {
		ncon = 1
	}
	if len(f) == 4 {
		var ok bool
		if ncon, ok = atoi(f[3]); !ok || !vweights || ncon < 1 || ncon > 1024 {
			return nil, l.errorf("header %q: ncon %q needs vertex weights in fmt and 1..1024", l.line, f[3])
		}
	}
	if err := opts.checkVertices(int(min(n, 1<<40))); err != nil {
		return nil, err
	}
	if m > (1<<62)/2 {
		return nil, l.errorf("header %q: m %d too large", l.line, m)
	}
	e := &Edges{NumVertices: int(n)}
	capHint := int(min(2*m, 1<<16)) // a hint only: the header may claim more than the file holds
	e.Src, e.Dst = make([]uint32, 0, capHint), make([]uint32, 0, capHint)
	if eweights {
		e.W = make([]float64, 0, capHint)
	}
	lead := ncon
	if sizes {
		lead++
	}
	step := 1
	if eweights {
		step = 2
	}
	v := int64(0) // vertices read
	for v < n && l.next() {
		if len(l.line) > 0 && l.line[0] == '%' {
			continue
		}
		f = fields(f, l.line)
		if int64(len(f)) < lead || (int64(len(f))-lead)%int64(step) != 0 {
			return nil, l.errorf("vertex %d: %d fields; want %d for its size and weights, then neighbours%s", v+1, len(f), lead, map[bool]string{true: " with weights", false: ""}[eweights])
		}
		for _, x := range f[:lead] {
			if _, ok := atoi(x); !ok {
				return nil, l.errorf("vertex %d: size or weight %q is not a whole number", v+1, x)
			}
		}
		for k := lead; k < int64(len(f)); k += int64(step) {
			u, ok := atoi(f[k])
			if !ok || u < 1 || u > n {
				return nil, l.errorf("vertex %d: neighbour %q outside 1..%d", v+1, f[k], n)
			}
			if eweights {
				w, ok := atoi(f[k+1])
				if !ok {
					return nil, l.errorf("vertex %d: edge weight %q is not a whole number", v+1, f[k+1])
				}
				e.W = append(e.W, float64(w))
			}
			e.Src, e.Dst = append(e.Src, uint32(v)), append(e.Dst, uint32(u-1))
		}
		v++
	}
	if err := l.Err(); err != nil {
		return nil, err
	}
	if v < n {
		return nil, &ParseError{Format: "metis", Line: l.n, Msg: fmt.Sprintf("%d vertex lines, the header says %d", v, n)}
	}
	for l.next() {
		if len(l.line) > 0 && l.line[0] == '%' || blank(l.line) {
			continue
		}
		return nil, l.errorf("a line after the %d vertices", n)
	}
	if err := l.Err(); err != nil {
		return nil, err
	}
	if int64(len(e.Src)) != 2*m {
		return nil, &ParseError{Format: "metis", Msg: fmt.Sprintf("%d neighbour entries, the header's %d edges need %d (each listed from both ends)", len(e.Src), m, 2*m)}
	}
	return opts.finish(e)
}
