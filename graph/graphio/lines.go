package graphio

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
)

// lines reads an input line by line, counting lines, with CR LF endings
// and lines of any length (a hub vertex's METIS line can be long).
type lines struct {
	format string
	r      *bufio.Reader
	n      int    // the current line's number
	line   []byte // the current line, without its ending
	buf    []byte // a long line's pieces
	err    error
}

func newLines(format string, r io.Reader) *lines {
	return &lines{format: format, r: bufio.NewReaderSize(r, 1<<20)}
}

// next advances to the next line; false at the end of the input or on a
// read error (Err).
func (l *lines) next() bool {
	if l.err != nil {
		return false
	}
	l.buf = l.buf[:0]
	for {
		chunk, err := l.r.ReadSlice('\n')
		switch {
		case err == nil || err == io.EOF && (len(chunk) > 0 || len(l.buf) > 0):
			if len(l.buf) > 0 {
				l.buf = append(l.buf, chunk...)
				chunk = l.buf
			}
			l.n++
			l.line = bytes.TrimRight(chunk, "\r\n")
			if err == io.EOF {
				l.err = io.EOF
			}
			return true
		case errors.Is(err, bufio.ErrBufferFull):
			l.buf = append(l.buf, chunk...)
		default:
			l.err = err
			return false
		}
	}
}

// Err returns the read error that ended the lines, if any.
func (l *lines) Err() error {
	if l.err == io.EOF {
		return nil
	}
	return l.err
}

// errorf is a *ParseError at the current line.
func (l *lines) errorf(format string, args ...any) error {
	return &ParseError{Format: l.format, Line: l.n, Msg: fmt.Sprintf(format, args...)}
}

// fields splits a line at runs of spaces and tabs, into dst.
func fields(dst [][]byte, line []byte) [][]byte {
	dst = dst[:0]
	i := 0
	for i < len(line) {
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		j := i
		for j < len(line) && line[j] != ' ' && line[j] != '\t' {
			j++
		}
		if j > i {
			dst = append(dst, line[i:j])
		}
		i = j
	}
	return dst
}

// blank reports whether a line holds only spaces and tabs.
func blank(line []byte) bool {
	for _, c := range line {
		if c != ' ' && c != '\t' {
			return false
		}
	}
	return true
}

// atoi parses a non-negative decimal integer of at most 18 digits.
func atoi(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	return v, true
}

// atof parses a finite real number (Go's syntax: MatrixMarket and SNAP
// weights).
func atof(b []byte) (float64, bool) {
	v, err := strconv.ParseFloat(string(b), 64)
	return v, err == nil && !math.IsNaN(v) && !math.IsInf(v, 0)
}
