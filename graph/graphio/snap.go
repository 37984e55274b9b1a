package graphio

import "io"

// ReadSNAP reads a SNAP-style edge list: a line per entry, "src dst" or
// "src dst weight", separated by spaces or tabs, vertex IDs from 0; lines
// starting with '#' (or '%') are comments, blank lines are skipped. The
// vertex count is the largest ID plus one. Entries are taken as directed
// (the format does not say; Symmetrize makes the graph undirected). A
// weight column, if any, must be on every entry.
func ReadSNAP(r io.Reader, opts ReadOptions) (*Edges, error) {
	l := newLines("snap", r)
	e := &Edges{Directed: true}
	var f [][]byte
	var maxSeen int64 = -1
	cols := 0 // 2 or 3, set by the first entry
	for l.next() {
		if len(l.line) > 0 && (l.line[0] == '#' || l.line[0] == '%') || blank(l.line) {
			continue
		}
		f = fields(f, l.line)
		if len(f) != 2 && len(f) != 3 {
			return nil, l.errorf("entry %q: want \"src dst\" or \"src dst weight\"", l.line)
		}
		if cols == 0 {
			cols = len(f)
			if cols == 3 {
				e.W = []float64{}
			}
		} else if len(f) != cols {
			return nil, l.errorf("entry %q: %d fields, earlier entries have %d", l.line, len(f), cols)
		}
		s, ok1 := atoi(f[0])
		d, ok2 := atoi(f[1])
		if !ok1 || !ok2 || s > maxID || d > maxID {
			return nil, l.errorf("entry %q: vertex IDs must be whole numbers in 0..%d", l.line, int64(maxID))
		}
		if m := max(s, d); m > maxSeen {
			maxSeen = m
			if err := opts.checkVertices(int(m + 1)); err != nil {
				return nil, err
			}
		}
		if cols == 3 {
			w, ok := atof(f[2])
			if !ok {
				return nil, l.errorf("entry %q: weight %q is not a finite number", l.line, f[2])
			}
			e.W = append(e.W, w)
		}
		e.Src, e.Dst = append(e.Src, uint32(s)), append(e.Dst, uint32(d))
	}
	if err := l.Err(); err != nil {
		return nil, err
	}
	e.NumVertices = int(maxSeen + 1)
	return opts.finish(e), nil
}
