package graphio

import (
	"bytes"
	"fmt"
	"io"
)

// ReadSNAP reads a SNAP-style edge list: a line per entry, "src dst" or
// "src dst weight", separated by spaces or tabs, vertex IDs from 0; lines
// starting with '#' (or '%') are comments, blank lines are skipped. The
// vertex count is the largest ID plus one, or what a "Nodes: N" header
// comment says when larger (SNAP's files and WriteSNAP write one). Entries
// are taken as directed unless a header comment says "undirected"
// (Symmetrize makes a graph undirected). A weight column, if any, must be
// on every entry.
func ReadSNAP(r io.Reader, opts ReadOptions) (*Edges, error) {
	chunks, err := parseEntryLines("snap", r, 1, parseSNAPChunk)
	if err != nil {
		return nil, err
	}
	e := &Edges{Directed: true}
	cols := 0
	var maxSeen int64 = -1
	var nodes int64
	for k, c := range chunks {
		if k == 0 {
			nodes, e.Directed = c.nodes, !c.undirected
		}
		if c.cols != 0 {
			if cols == 0 {
				cols = c.cols
			} else if c.cols != cols && (c.err == nil || c.colsLine < c.err.Line) {
				return nil, &ParseError{Format: "snap", Line: c.colsLine, Msg: fmt.Sprintf("%d fields, earlier entries have %d", c.cols, cols)}
			}
		}
		if c.err != nil {
			return nil, c.err
		}
		if c.maxID > maxSeen {
			maxSeen = c.maxID
			if err := opts.checkVertices(int(maxSeen + 1)); err != nil {
				return nil, err
			}
		}
	}
	if nodes > maxSeen+1 {
		if err := opts.checkVertices(int(nodes)); err != nil {
			return nil, err
		}
		maxSeen = nodes - 1 // vertices past the last entry's, as the header comment counts them
	}
	mergeChunks(e, chunks, cols == 3)
	e.NumVertices = int(maxSeen + 1)
	return opts.finish(e)
}

// parseSNAPChunk parses a chunk of SNAP lines.
func parseSNAPChunk(chunk []byte, line int, out *entryChunk) {
	var f [][]byte
	bad := func(n int, format string, args ...any) bool {
		out.err = &ParseError{Format: "snap", Line: n, Msg: fmt.Sprintf(format, args...)}
		return false
	}
	chunkLines(chunk, line, func(n int, l []byte) bool {
		if len(l) > 0 && (l[0] == '#' || l[0] == '%') {
			if out.line == 1 && out.cols == 0 { // the header comments: SNAP's own, and WriteSNAP's
				lower := bytes.ToLower(l)
				if bytes.Contains(lower, []byte("undirected")) {
					out.undirected = true
				}
				if i := bytes.Index(lower, []byte("nodes:")); i >= 0 {
					if f := fields(nil, lower[i+len("nodes:"):]); len(f) > 0 {
						if v, ok := atoi(f[0]); ok && v <= maxID+1 {
							out.nodes = v
						}
					}
				}
			}
			return true
		}
		if blank(l) {
			return true
		}
		f = fields(f, l)
		if len(f) != 2 && len(f) != 3 {
			return bad(n, "entry %q: want \"src dst\" or \"src dst weight\"", l)
		}
		if out.cols == 0 {
			out.cols, out.colsLine = len(f), n
		} else if len(f) != out.cols {
			return bad(n, "entry %q: %d fields, earlier entries have %d", l, len(f), out.cols)
		}
		s, ok1 := atoi(f[0])
		d, ok2 := atoi(f[1])
		if !ok1 || !ok2 || s > maxID || d > maxID {
			return bad(n, "entry %q: vertex IDs must be whole numbers in 0..%d", l, int64(maxID))
		}
		out.maxID = max(out.maxID, s, d)
		if len(f) == 3 {
			w, ok := atof(f[2])
			if !ok {
				return bad(n, "entry %q: weight %q is not a finite number", l, f[2])
			}
			out.w = append(out.w, w)
		}
		out.src, out.dst = append(out.src, uint32(s)), append(out.dst, uint32(d))
		return true
	})
	out.text = nil // no one needs it again
}
