// Package batchrepr is the encoding of a write batch, which is also the
// payload of every write-ahead-log record (LevelDB's WriteBatch format):
//
//	header:  seq   uint64 little-endian  sequence number of the first entry
//	         count uint32 little-endian  number of entries
//	entries: kind  1 byte                base.KindSet, KindDelete, KindRangeDelete
//	         key   uvarint length, bytes
//	         value uvarint length, bytes (Set: the value; RangeDelete: the
//	                                      exclusive end key; absent for Delete)
//
// Entry i gets sequence number seq+i.
package batchrepr

import (
	"encoding/binary"
	"errors"

	"github.com/warpkit/warpkit/kv/internal/base"
)

// HeaderLen is the length of the batch header.
const HeaderLen = 12

// ErrMalformed reports a batch whose encoding is inconsistent.
var ErrMalformed = errors.New("kv: malformed batch")

// Header returns the batch's sequence number and entry count.
func Header(b []byte) (seq base.SeqNum, count uint32, ok bool) {
	if len(b) < HeaderLen {
		return 0, 0, false
	}
	return base.SeqNum(binary.LittleEndian.Uint64(b)), binary.LittleEndian.Uint32(b[8:]), true
}

// SetSeqNum stores the sequence number in the header.
func SetSeqNum(b []byte, seq base.SeqNum) { binary.LittleEndian.PutUint64(b, uint64(seq)) }

// SetCount stores the entry count in the header.
func SetCount(b []byte, n uint32) { binary.LittleEndian.PutUint32(b[8:], n) }

// AppendEntry appends one entry (without touching the header's count).
func AppendEntry(b []byte, kind base.Kind, key, value []byte) []byte {
	b = append(b, byte(kind))
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	if kind != base.KindDelete {
		b = binary.AppendUvarint(b, uint64(len(value)))
		b = append(b, value...)
	}
	return b
}

// Reader iterates over a batch's entries.
type Reader struct {
	data  []byte
	left  uint32
	seq   base.SeqNum
	first bool
}

// NewReader checks the header and returns a reader over the entries.
func NewReader(b []byte) (*Reader, error) {
	seq, count, ok := Header(b)
	if !ok {
		return nil, ErrMalformed
	}
	return &Reader{data: b[HeaderLen:], left: count, seq: seq, first: true}, nil
}

// Next returns the next entry, its sequence number, and ok=false at the end.
// A batch whose entries do not match its count or its length is malformed.
// Keys and values alias the batch.
func (r *Reader) Next() (kind base.Kind, key, value []byte, seq base.SeqNum, ok bool, err error) {
	if r.left == 0 {
		if len(r.data) != 0 {
			return 0, nil, nil, 0, false, ErrMalformed
		}
		return 0, nil, nil, 0, false, nil
	}
	if len(r.data) < 1 {
		return 0, nil, nil, 0, false, ErrMalformed
	}
	kind = base.Kind(r.data[0])
	if kind > base.KindMax {
		return 0, nil, nil, 0, false, ErrMalformed
	}
	rest := r.data[1:]
	key, rest, ok = readBytes(rest)
	if !ok {
		return 0, nil, nil, 0, false, ErrMalformed
	}
	if kind != base.KindDelete {
		value, rest, ok = readBytes(rest)
		if !ok {
			return 0, nil, nil, 0, false, ErrMalformed
		}
	}
	r.data = rest
	r.left--
	if !r.first {
		r.seq++
	}
	r.first = false
	return kind, key, value, r.seq, true, nil
}

func readBytes(b []byte) ([]byte, []byte, bool) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) {
		return nil, nil, false
	}
	end := w + int(n)
	return b[w:end:end], b[end:], true
}
