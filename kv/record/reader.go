package record

import (
	"encoding/binary"
	"errors"
	"io"

	"github.com/warpkit/warpkit/kv/internal/base"
)

// Reader reads records from a log. It is not safe for concurrent use.
type Reader struct {
	r    io.Reader
	name string // file name for errors

	buf      [BlockSize]byte
	n        int   // valid bytes in buf
	i        int   // next chunk starts at buf[i]
	blockOff int64 // file offset of buf[0]
	eof      bool  // buf holds the last block of the file
	started  bool  // the first block has been read

	rec       []byte // record being assembled (reused)
	recOff    int64  // offset of the current record's first chunk
	scanFrom  int64  // SkipCorruption looks for valid chunks from here
	lastErr   error
	readErr   error // a read error of the underlying reader (not corruption)
	lastValid int64 // end offset of the last complete record returned
}

// NewReader reads records from r; name labels corruption errors.
func NewReader(r io.Reader, name string) *Reader { return &Reader{r: r, name: name} }

// Next returns the next record. The slice is valid until the next call. At
// the end of the log it returns io.EOF. Malformed data gives a
// *base.CorruptionError (see the package doc); I/O errors are returned as is.
func (r *Reader) Next() ([]byte, error) {
	if r.readErr != nil {
		return nil, r.readErr
	}
	r.rec = r.rec[:0]
	inRecord := false
	for {
		off := r.blockOff + int64(r.i)
		typ, payload, err := r.nextChunk()
		if err != nil {
			if err == io.EOF && inRecord {
				return nil, r.corruptScan(r.recOff, r.blockOff+int64(r.n), "log ends inside a record")
			}
			return nil, err
		}
		switch typ {
		case chunkFull:
			if inRecord {
				r.i = int(off - r.blockOff) // a salvaging caller resumes at this chunk
				return nil, r.corruptScan(r.recOff, off, "record without its last chunk")
			}
			r.recOff = off
			r.rec = append(r.rec, payload...)
			r.lastValid = r.blockOff + int64(r.i)
			return r.rec, nil
		case chunkFirst:
			if inRecord {
				r.i = int(off - r.blockOff)
				return nil, r.corruptScan(r.recOff, off, "record without its last chunk")
			}
			inRecord = true
			r.recOff = off
			r.rec = append(r.rec, payload...)
		case chunkMiddle, chunkLast:
			if !inRecord {
				return nil, r.corrupt(off, "continuation chunk without a first chunk")
			}
			r.rec = append(r.rec, payload...)
			if typ == chunkLast {
				r.lastValid = r.blockOff + int64(r.i)
				return r.rec, nil
			}
		}
	}
}

// Offset returns the offset of the last record Next returned.
func (r *Reader) Offset() int64 { return r.recOff }

// LastValidOffset returns the end offset of the last complete record Next
// returned: where a writer reopening this log could resume.
func (r *Reader) LastValidOffset() int64 { return r.lastValid }

// corrupt reports damage at the chunk at off; valid data may resume after it.
func (r *Reader) corrupt(off int64, reason string) error {
	return r.corruptScan(off, off+1, reason)
}

// corruptScan reports damage at off; SkipCorruption scans from scanFrom,
// which lies in the loaded block (or at its end).
func (r *Reader) corruptScan(off, scanFrom int64, reason string) error {
	r.scanFrom = scanFrom
	r.lastErr = base.Corruptf(r.name, off, "%s", reason)
	return r.lastErr
}

// readBlock loads the next block; io.EOF when there is none.
func (r *Reader) readBlock() error {
	if r.eof {
		return io.EOF
	}
	if r.started {
		r.blockOff += BlockSize
	}
	r.started = true
	n, err := io.ReadFull(r.r, r.buf[:])
	r.n, r.i = n, 0
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		r.eof = true
		if n == 0 {
			return io.EOF
		}
	case err != nil:
		r.readErr = err
		return err
	}
	return nil
}

// nextChunk parses the chunk at r.i, loading blocks as needed.
func (r *Reader) nextChunk() (byte, []byte, error) {
	for {
		if !r.started || r.i >= r.n || (r.n-r.i < HeaderSize && !r.eof) {
			if err := r.readBlock(); err != nil {
				return 0, nil, err
			}
			continue
		}
		off := r.blockOff + int64(r.i)
		if r.n-r.i < HeaderSize {
			r.i = r.n
			return 0, nil, r.corrupt(off, "log ends inside a chunk header")
		}
		h := r.buf[r.i : r.i+HeaderSize]
		length := int(binary.LittleEndian.Uint16(h[4:6]))
		typ := h[6]
		end := r.i + HeaderSize + length
		if end > r.n {
			r.i = r.n
			if r.eof {
				return 0, nil, r.corrupt(off, "log ends inside a chunk")
			}
			return 0, nil, r.corrupt(off, "chunk length overruns its block")
		}
		payload := r.buf[r.i+HeaderSize : end]
		if typ == chunkZero && length == 0 && binary.LittleEndian.Uint32(h[0:4]) == 0 {
			r.i = r.n
			return 0, nil, r.corrupt(off, "zeroed chunk")
		}
		if typ < chunkFull || typ > chunkLast {
			r.i = r.n
			return 0, nil, r.corrupt(off, "unknown chunk type")
		}
		if chunkCRC(typ, payload) != binary.LittleEndian.Uint32(h[0:4]) {
			r.i = r.n
			return 0, nil, r.corrupt(off, "chunk checksum mismatch")
		}
		r.i = end
		return typ, payload, nil
	}
}

// validChunkAt reports whether a well-formed chunk starts at buf[i] of the
// loaded block, and returns its type and end.
func (r *Reader) validChunkAt(i int) (typ byte, end int, ok bool) {
	if r.n-i < HeaderSize {
		return 0, 0, false
	}
	h := r.buf[i : i+HeaderSize]
	typ = h[6]
	if typ < chunkFull || typ > chunkLast {
		return 0, 0, false
	}
	end = i + HeaderSize + int(binary.LittleEndian.Uint16(h[4:6]))
	if end > r.n || chunkCRC(typ, r.buf[i+HeaderSize:end]) != binary.LittleEndian.Uint32(h[0:4]) {
		return 0, 0, false
	}
	return typ, end, true
}

// SkipCorruption is called after Next returned a corruption error. It scans
// the rest of the log, byte by byte, for well-formed chunks. It reports
// whether any exists after the damage (if none, the damage is a torn tail),
// and leaves the reader at the first chunk that starts a record, so that a
// salvaging caller can continue with Next. The error is an I/O error.
func (r *Reader) SkipCorruption() (validAfter bool, err error) {
	if r.lastErr == nil {
		return false, errors.New("record: SkipCorruption without a corruption error")
	}
	r.lastErr = nil
	pos := int(r.scanFrom - r.blockOff)
	for {
		for i := pos; i < r.n; i++ {
			typ, end, ok := r.validChunkAt(i)
			if !ok {
				continue
			}
			validAfter = true
			if typ == chunkFull || typ == chunkFirst {
				r.i = i
				return true, nil
			}
			i = end - 1
		}
		if err := r.readBlock(); err != nil {
			if err == io.EOF {
				r.i = r.n
				return validAfter, nil
			}
			return validAfter, err
		}
		pos = 0
	}
}
