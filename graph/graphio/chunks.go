package graphio

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"sync"
)

// chunkBytes is about how much text one parsing goroutine takes at a time
// (tests make it small).
var chunkBytes = 4 << 20

// maxLineBytes bounds an entry line (a MatrixMarket or SNAP entry is a few
// numbers): a longer one is a *ParseError, not a reason to hold the input.
const maxLineBytes = 64 << 20

// entryChunk is a chunk of entry lines and what parsing it gave.
type entryChunk struct {
	text       []byte // the lines
	line       int    // the number of its first line
	src, dst   []uint32
	w          []float64
	cols       int         // fields of its first entry (0: none)
	colsLine   int         // that entry's line
	maxID      int64       // largest vertex ID (-1: none)
	nodes      int64       // SNAP: the vertex count a header comment gives (0: none)
	undirected bool        // SNAP: a header comment says undirected
	err        *ParseError // the chunk's first bad line
}

// lastLine is the number of the chunk's last line.
func (c *entryChunk) lastLine() int {
	n := bytes.Count(c.text, []byte{'\n'})
	if len(c.text) > 0 && c.text[len(c.text)-1] != '\n' {
		n++
	}
	return c.line + n - 1
}

// merge concatenates the chunks' entries into e.
func mergeChunks(e *Edges, chunks []*entryChunk, weighted bool) {
	total := 0
	for _, c := range chunks {
		total += len(c.src)
	}
	e.Src, e.Dst = make([]uint32, 0, total), make([]uint32, 0, total)
	if weighted {
		e.W = make([]float64, 0, total)
	}
	for _, c := range chunks {
		e.Src, e.Dst = append(e.Src, c.src...), append(e.Dst, c.dst...)
		if weighted {
			e.W = append(e.W, c.w...)
		}
	}
}

// parseEntryLines reads the rest of r as entry lines, in chunks cut at line
// ends, parsed on every core by parse (given the chunk, the number of the
// chunk's first line, and where to put the result), and returns the chunks'
// results in input order. Reading, cutting and counting lines stay on one
// goroutine (bytes.Count runs at memory speed); parsing, the work, does not.
// Only io.EOF ends the input: any other error of the reader (a cut gzip
// stream's io.ErrUnexpectedEOF) is returned as it is.
func parseEntryLines(format string, r io.Reader, firstLine int, parse func(chunk []byte, line int, out *entryChunk)) ([]*entryChunk, error) {
	type job struct {
		chunk []byte
		line  int
		out   *entryChunk
	}
	jobs := make(chan job, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				parse(j.chunk, j.line, j.out)
			}
		}()
	}
	var outs []*entryChunk
	var readErr error
	line := firstLine
	var carry []byte
	eof := false
	for !eof && readErr == nil {
		// The next chunk: what the last one left after its last line end,
		// then new bytes; a line longer than a chunk grows the buffer
		// (doubling), and only the new bytes are searched for its end.
		buf := make([]byte, len(carry), len(carry)+max(chunkBytes, len(carry)))
		copy(buf, carry)
		searched := len(carry)
		end := -1
		for end < 0 {
			for len(buf) < cap(buf) {
				n, err := r.Read(buf[len(buf):cap(buf)])
				buf = buf[:len(buf)+n]
				if err == io.EOF {
					eof = true
					break
				}
				if err != nil { // a cut gzip stream gives io.ErrUnexpectedEOF: an error, not an end
					readErr = err
					break
				}
			}
			if eof || readErr != nil {
				end = len(buf)
				break
			}
			if i := bytes.LastIndexByte(buf[searched:], '\n'); i >= 0 {
				end = searched + i + 1
				break
			}
			if len(buf) >= maxLineBytes {
				readErr = &ParseError{Format: format, Line: line, Msg: fmt.Sprintf("a line longer than %d MiB", maxLineBytes>>20)}
				break
			}
			searched = len(buf)
			buf = append(buf[:len(buf):len(buf)], make([]byte, len(buf))...)[:len(buf)] // double the room
		}
		if readErr != nil {
			break
		}
		if end > 0 {
			out := &entryChunk{text: buf[:end], line: line, maxID: -1}
			outs = append(outs, out)
			jobs <- job{buf[:end], line, out}
			line += bytes.Count(buf[:end], []byte{'\n'})
		}
		carry = append([]byte(nil), buf[end:]...)
	}
	close(jobs)
	wg.Wait()
	return outs, readErr
}

// chunkLines calls fn for each line of a chunk (its number, its bytes
// without the ending), stopping at fn's first false.
func chunkLines(chunk []byte, line int, fn func(n int, l []byte) bool) {
	for len(chunk) > 0 {
		i := bytes.IndexByte(chunk, '\n')
		var l []byte
		if i < 0 {
			l, chunk = chunk, nil
		} else {
			l, chunk = chunk[:i], chunk[i+1:]
		}
		if !fn(line, bytes.TrimRight(l, "\r")) {
			return
		}
		line++
	}
}
