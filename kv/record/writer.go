package record

import (
	"encoding/binary"
	"io"
)

// Writer writes records to an io.Writer, buffering up to one block. It is not
// safe for concurrent use.
type Writer struct {
	w      io.Writer
	buf    [BlockSize]byte
	filled int   // bytes of buf holding chunks or padding
	sent   int   // bytes of buf already written to w
	base   int64 // file offset of buf[0]
	err    error
}

// NewWriter returns a Writer appending to w, which must be empty or end at a
// block boundary (the offsets it returns count from where w is now).
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// WriteRecord appends one record and returns its starting offset. The record
// reaches the io.Writer when a block fills or on Flush.
func (w *Writer) WriteRecord(p []byte) (int64, error) {
	if w.err != nil {
		return 0, w.err
	}
	start := int64(-1)
	first := true
	for {
		if BlockSize-w.filled < HeaderSize {
			clear(w.buf[w.filled:])
			w.filled = BlockSize
			if err := w.flushBlock(); err != nil {
				return 0, err
			}
		}
		if start < 0 {
			start = w.base + int64(w.filled)
		}
		avail := BlockSize - w.filled - HeaderSize
		n := min(len(p), avail)
		last := n == len(p)
		typ := chunkType(first, last)
		w.filled = encodeChunk(w.buf[:], w.filled, typ, p[:n])
		p = p[n:]
		first = false
		if last {
			return start, nil
		}
	}
}

// encodeChunk writes one chunk at buf[off:] and returns the new fill offset.
func encodeChunk(buf []byte, off int, typ byte, payload []byte) int {
	h := buf[off : off+HeaderSize]
	binary.LittleEndian.PutUint32(h[0:4], chunkCRC(typ, payload))
	binary.LittleEndian.PutUint16(h[4:6], uint16(len(payload)))
	h[6] = typ
	return off + HeaderSize + copy(buf[off+HeaderSize:], payload)
}

// flushBlock writes the rest of a full block and starts the next.
func (w *Writer) flushBlock() error {
	if err := w.Flush(); err != nil {
		return err
	}
	w.base += BlockSize
	w.filled, w.sent = 0, 0
	return nil
}

// Flush writes buffered bytes to the io.Writer.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	if w.sent < w.filled {
		if _, err := w.w.Write(w.buf[w.sent:w.filled]); err != nil {
			w.err = err
			return err
		}
		w.sent = w.filled
	}
	return nil
}

// Size returns the log's length including buffered bytes.
func (w *Writer) Size() int64 { return w.base + int64(w.filled) }
