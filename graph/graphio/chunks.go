package graphio

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"sync"
)

// chunkBytes is about how much text one parsing goroutine takes at a time
// (tests make it small).
var chunkBytes = 4 << 20

// entryChunk is a chunk of entry lines and what parsing it gave.
type entryChunk struct {
	text     []byte // the lines
	line     int    // the number of its first line
	src, dst []uint32
	w        []float64
	cols     int         // fields of its first entry (0: none)
	colsLine int         // that entry's line
	maxID    int64       // largest vertex ID (-1: none)
	err      *ParseError // the chunk's first bad line
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
// An error of the reader is returned as it is.
func parseEntryLines(r io.Reader, firstLine int, parse func(chunk []byte, line int, out *entryChunk)) ([]*entryChunk, error) {
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
	for {
		buf := make([]byte, len(carry), len(carry)+chunkBytes)
		copy(buf, carry)
		n, err := io.ReadFull(r, buf[len(carry):cap(buf)])
		buf = buf[:len(carry)+n]
		end := len(buf)
		last := err != nil // io.EOF, io.ErrUnexpectedEOF or a read error
		if !last {
			if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
				end = i + 1
			} else {
				carry = buf // a line longer than the chunk: read on
				continue
			}
		}
		if end > 0 {
			out := &entryChunk{text: buf[:end], line: line, maxID: -1}
			outs = append(outs, out)
			jobs <- job{buf[:end], line, out}
			line += bytes.Count(buf[:end], []byte{'\n'})
		}
		carry = append([]byte(nil), buf[end:]...)
		if last {
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				readErr = err
			}
			break
		}
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
