package sstable

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/warpkit/warpkit/kv/internal/base"
)

// blockWriter builds one block.
type blockWriter struct {
	restartInterval int
	buf             []byte
	restarts        []uint32
	sinceRestart    int
	count           int
	lastKey         []byte
}

func (w *blockWriter) add(key, value []byte) {
	shared := 0
	if w.sinceRestart == w.restartInterval || w.count == 0 {
		w.restarts = append(w.restarts, uint32(len(w.buf)))
		w.sinceRestart = 0
	} else {
		n := min(len(key), len(w.lastKey))
		for shared < n && key[shared] == w.lastKey[shared] {
			shared++
		}
	}
	unshared := len(key) - shared
	if shared < 128 && unshared < 128 && len(value) < 128 {
		w.buf = append(w.buf, byte(shared), byte(unshared), byte(len(value)))
	} else {
		w.buf = binary.AppendUvarint(w.buf, uint64(shared))
		w.buf = binary.AppendUvarint(w.buf, uint64(unshared))
		w.buf = binary.AppendUvarint(w.buf, uint64(len(value)))
	}
	w.buf = append(w.buf, key[shared:]...)
	w.buf = append(w.buf, value...)
	w.lastKey = append(w.lastKey[:0], key...)
	w.sinceRestart++
	w.count++
}

// estimatedSize is the size finish would return.
func (w *blockWriter) estimatedSize() int { return len(w.buf) + 4*len(w.restarts) + 4 }

// finish appends the restart array and returns the block; the slice is
// valid until reset.
func (w *blockWriter) finish() []byte {
	if len(w.restarts) == 0 {
		w.restarts = append(w.restarts, 0)
	}
	for _, r := range w.restarts {
		w.buf = binary.LittleEndian.AppendUint32(w.buf, r)
	}
	w.buf = binary.LittleEndian.AppendUint32(w.buf, uint32(len(w.restarts)))
	return w.buf
}

func (w *blockWriter) reset() {
	w.buf = w.buf[:0]
	w.restarts = w.restarts[:0]
	w.sinceRestart = 0
	w.count = 0
	w.lastKey = w.lastKey[:0]
}

// blockIter walks a block whose keys are encoded internal keys (internal
// mode) or plain names. It validates everything it reads.
type blockIter struct {
	data        []byte // entries, then the restart array
	restarts    int    // offset of the restart array
	numRestarts int
	internal    bool
	points      bool // a data block: only point entries (sets, deletions)

	offset     int // offset of the current entry; -1 when not positioned
	nextOffset int
	key        []byte // current key (aliases data or keyBuf)
	keyBuf     []byte
	aliased    bool // key aliases data
	ikey       base.InternalKey
	val        []byte
	err        error

	file     string // for corruption errors
	blockOff int64
}

func (it *blockIter) corrupt(reason string) bool {
	if it.err == nil {
		it.err = base.Corruptf(it.file, it.blockOff, "%s", reason)
	}
	it.offset = -1
	return false
}

// init points the iterator at a block; it returns false (with Error set)
// when the trailer is malformed.
func (it *blockIter) init(data []byte, internal bool, file string, blockOff int64) bool {
	*it = blockIter{keyBuf: it.keyBuf[:0], internal: internal, file: file, blockOff: blockOff, offset: -1}
	if len(data) < 4 {
		return it.corrupt("block too short")
	}
	n := int(binary.LittleEndian.Uint32(data[len(data)-4:]))
	if n < 1 || n > (len(data)-4)/4 {
		return it.corrupt("bad restart count")
	}
	it.data = data
	it.numRestarts = n
	it.restarts = len(data) - 4 - 4*n
	return true
}

// initData points the iterator at a data block, whose entries must be
// point entries: any other kind is corruption.
func (it *blockIter) initData(data []byte, file string, blockOff int64) bool {
	if !it.init(data, true, file, blockOff) {
		return false
	}
	it.points = true
	return true
}

func (it *blockIter) restart(i int) int {
	return int(binary.LittleEndian.Uint32(it.data[it.restarts+4*i:]))
}

// decodeAt parses the entry at off, whose predecessor's key is it.key (or
// nothing at a restart point). It sets key, value and nextOffset.
func (it *blockIter) decodeAt(off int, atRestart bool) bool {
	if off < 0 || off >= it.restarts {
		return it.corrupt("entry offset out of range")
	}
	p := off
	var shared, unshared, vlen int
	if p+3 <= it.restarts && it.data[p]|it.data[p+1]|it.data[p+2] < 0x80 {
		shared, unshared, vlen = int(it.data[p]), int(it.data[p+1]), int(it.data[p+2])
		p += 3
	} else {
		var ok bool
		if shared, p, ok = it.uvarint(p); !ok {
			return false
		}
		if unshared, p, ok = it.uvarint(p); !ok {
			return false
		}
		if vlen, p, ok = it.uvarint(p); !ok {
			return false
		}
	}
	if unshared > it.restarts-p || vlen > it.restarts-p-unshared {
		return it.corrupt("entry overruns block")
	}
	if shared > 0 {
		if atRestart || shared > len(it.key) {
			return it.corrupt("bad shared key prefix")
		}
		if it.aliased {
			it.keyBuf = append(it.keyBuf[:0], it.key[:shared]...)
		} else {
			it.keyBuf = it.keyBuf[:shared]
		}
		it.keyBuf = append(it.keyBuf, it.data[p:p+unshared]...)
		it.key = it.keyBuf
		it.aliased = false
	} else {
		it.key = it.data[p : p+unshared : p+unshared]
		it.aliased = true
	}
	p += unshared
	it.val = it.data[p : p+vlen : p+vlen]
	it.offset = off
	it.nextOffset = p + vlen
	if it.internal {
		n := len(it.key) - 8
		if n < 0 {
			return it.corrupt("internal key too short")
		}
		it.ikey = base.InternalKey{UserKey: it.key[:n:n], Trailer: base.Trailer(binary.LittleEndian.Uint64(it.key[n:]))}
		if k := it.ikey.Kind(); it.points && k != base.KindSet && k != base.KindDelete {
			return it.corrupt(fmt.Sprintf("%v entry in a data block", k))
		}
	}
	return true
}

func (it *blockIter) uvarint(p int) (int, int, bool) {
	v, n := binary.Uvarint(it.data[p:it.restarts])
	if n <= 0 || v > uint64(it.restarts) {
		return 0, 0, it.corrupt("bad varint")
	}
	return int(v), p + n, true
}

// keyAtRestart returns the full key stored at restart point i.
func (it *blockIter) keyAtRestart(i int) ([]byte, bool) {
	off := it.restart(i)
	if !it.decodeAt(off, true) {
		return nil, false
	}
	return it.key, true
}

// cmp compares the current key with (ukey, trailer) in internal order, or
// bytewise with ukey for name blocks.
func (it *blockIter) cmp(ukey []byte, trailer base.Trailer) int {
	if !it.internal {
		return bytes.Compare(it.key, ukey)
	}
	if c := bytes.Compare(it.ikey.UserKey, ukey); c != 0 {
		return c
	}
	switch {
	case it.ikey.Trailer > trailer:
		return -1
	case it.ikey.Trailer < trailer:
		return 1
	}
	return 0
}

// seekRestart finds the last restart point whose key is < target (or 0).
func (it *blockIter) seekRestart(ukey []byte, trailer base.Trailer) (int, bool) {
	lo, hi := 0, it.numRestarts-1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if _, ok := it.keyAtRestart(mid); !ok {
			return 0, false
		}
		if it.cmp(ukey, trailer) < 0 {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo, true
}

// seekStart positions at the last restart point whose key is < (ukey,
// trailer), or at the first entry; false for an empty or damaged block.
func (it *blockIter) seekStart(ukey []byte, trailer base.Trailer) bool {
	if it.restarts == 0 {
		it.offset = -1
		return false // empty block
	}
	r, ok := it.seekRestart(ukey, trailer)
	return ok && it.decodeAt(it.restart(r), true)
}

// seekGE positions at the first entry >= (ukey, trailer).
func (it *blockIter) seekGE(ukey []byte, trailer base.Trailer) bool {
	if !it.seekStart(ukey, trailer) {
		return false
	}
	for {
		if it.cmp(ukey, trailer) >= 0 {
			return true
		}
		if !it.next() {
			return false
		}
	}
}

// seekLT positions at the last entry < (ukey, trailer).
func (it *blockIter) seekLT(ukey []byte, trailer base.Trailer) bool {
	if !it.seekStart(ukey, trailer) {
		return false
	}
	if it.cmp(ukey, trailer) >= 0 {
		// Only possible at restart 0: nothing is smaller.
		it.offset = -1
		return false
	}
	for {
		cur := it.offset
		if it.nextOffset >= it.restarts {
			return true
		}
		if !it.decodeAt(it.nextOffset, false) {
			return false
		}
		if it.cmp(ukey, trailer) >= 0 {
			return it.repositionAt(cur)
		}
	}
}

// repositionAt moves back to the entry at target by scanning from its
// restart point (keys are prefix-compressed, so entries decode forwards only).
func (it *blockIter) repositionAt(target int) bool {
	r := it.restartBefore(target + 1)
	if !it.decodeAt(it.restart(r), true) {
		return false
	}
	for it.offset < target {
		if it.nextOffset >= it.restarts || !it.decodeAt(it.nextOffset, false) {
			return it.corrupt("entry chain broken")
		}
	}
	if it.offset != target {
		return it.corrupt("entry chain broken")
	}
	return true
}

// restartBefore returns the last restart point with offset < off.
func (it *blockIter) restartBefore(off int) int {
	lo, hi := 0, it.numRestarts-1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if it.restart(mid) < off {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

func (it *blockIter) first() bool {
	if it.restarts == 0 {
		it.offset = -1
		return false // empty block
	}
	return it.decodeAt(it.restart(0), true)
}

func (it *blockIter) last() bool {
	if it.restarts == 0 {
		it.offset = -1
		return false
	}
	if !it.decodeAt(it.restart(it.numRestarts-1), true) {
		return false
	}
	for it.nextOffset < it.restarts {
		if !it.decodeAt(it.nextOffset, false) {
			return false
		}
	}
	return true
}

func (it *blockIter) next() bool {
	if it.offset < 0 {
		return false
	}
	if it.nextOffset >= it.restarts {
		it.offset = -1
		return false
	}
	return it.decodeAt(it.nextOffset, false)
}

func (it *blockIter) prev() bool {
	if it.offset <= 0 {
		it.offset = -1
		return false
	}
	cur := it.offset
	r := it.restartBefore(cur)
	if !it.decodeAt(it.restart(r), true) {
		return false
	}
	for it.nextOffset < cur {
		if !it.decodeAt(it.nextOffset, false) {
			return false
		}
	}
	if it.nextOffset != cur {
		return it.corrupt("entry chain broken")
	}
	return true
}

func (it *blockIter) valid() bool { return it.offset >= 0 }
