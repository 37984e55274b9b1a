package sstable

import (
	"github.com/warpkit/warpkit/kv/internal/base"
)

// Iter walks a table's point entries; it implements base.InternalIterator.
// It is not safe for concurrent use.
type Iter struct {
	r     *Reader
	index blockIter
	data  blockIter
	err   error
	seq   *seqReader // compaction iterators: sequential reads, no cache

	// Forward scans switch to read-ahead after a run of consecutive blocks.
	ahead   *seqReader
	nextOff uint64 // offset just past the last block loaded
	run     int    // consecutive blocks loaded in file order
}

// readAheadAfter is the number of consecutive block loads after which a
// scan reads ahead.
const readAheadAfter = 4

// NewIter returns an unpositioned iterator over the point entries.
func (r *Reader) NewIter() *Iter {
	it := &Iter{}
	r.InitIter(it)
	return it
}

// InitIter (re)initialises it as an iterator over r, reusing its buffers,
// so that callers can pool iterators.
func (r *Reader) InitIter(it *Iter) {
	index, data, ahead := it.index.keyBuf, it.data.keyBuf, it.ahead
	*it = Iter{r: r}
	it.index.keyBuf, it.data.keyBuf = index, data
	if ahead != nil {
		*ahead = seqReader{r: r, window: ahead.window[:0]} // keep the window's memory
		it.ahead = ahead
	}
	if !it.index.init(r.index, true, r.name, 0) {
		it.err = it.index.err
	}
}

// NewCompactionIter returns an iterator for reading the whole table once, in
// order, as a compaction does: it reads the file in large sequential chunks
// and bypasses the block cache (a compaction's blocks would only evict
// blocks that readers use). A block's memory is reused when the iterator
// moves to the next one, so Key and Value follow the usual rule: valid until
// the next move.
func (r *Reader) NewCompactionIter() *Iter {
	it := r.NewIter()
	it.seq = &seqReader{r: r}
	return it
}

// loadBlock reads the block the index iterator points at.
func (it *Iter) loadBlock() bool {
	h, _, ok := decodeHandle(it.index.val)
	if !ok {
		return it.fail(it.r.corrupt(0, "bad block handle in index"))
	}
	var b []byte
	var err error
	if it.seq != nil {
		b, err = it.seq.block(h, false)
	} else {
		b, err = it.cachedBlock(h)
	}
	if err != nil {
		return it.fail(err)
	}
	if !it.data.initData(b, it.r.name, int64(h.offset)) {
		return it.fail(it.data.err)
	}
	return true
}

// cachedBlock returns a block through the cache; on a miss during a long
// forward scan it reads ahead.
func (it *Iter) cachedBlock(h handle) ([]byte, error) {
	r := it.r
	if h.offset == it.nextOff {
		it.run++
	} else {
		it.run = 0
	}
	it.nextOff = h.offset + h.length + blockTrailerLen
	if b := r.cache.Get(r.cacheID, h.offset); b != nil {
		return b, nil
	}
	if it.run < readAheadAfter {
		return r.readBlockFromFile(h, true)
	}
	if it.ahead == nil {
		it.ahead = &seqReader{r: r}
	}
	b, err := it.ahead.block(h, true)
	if err != nil {
		return nil, err
	}
	r.cache.Set(r.cacheID, h.offset, b)
	return b, nil
}

// fail records err (if any) and leaves the iterator unpositioned.
func (it *Iter) fail(err error) bool {
	if err != nil && it.err == nil {
		it.err = err
	}
	it.data.offset = -1
	return false
}

// skipForward moves to the first entry of the next non-empty block.
func (it *Iter) skipForward() bool {
	for {
		if !it.index.next() {
			return it.fail(it.index.err)
		}
		if !it.loadBlock() {
			return false
		}
		if it.data.first() {
			return true
		}
		if it.data.err != nil {
			return it.fail(it.data.err)
		}
	}
}

// skipBackward moves to the last entry of the previous non-empty block.
func (it *Iter) skipBackward() bool {
	for {
		if !it.index.prev() {
			return it.fail(it.index.err)
		}
		if !it.loadBlock() {
			return false
		}
		if it.data.last() {
			return true
		}
		if it.data.err != nil {
			return it.fail(it.data.err)
		}
	}
}

// position finishes a positioning call once the index iterator has moved
// (indexOK): it loads that block, positions in it with inBlock, and when the
// block holds no suitable entry goes on to the next block in the direction
// of the move.
func (it *Iter) position(indexOK bool, inBlock func(*blockIter) bool, forward bool) bool {
	if !indexOK {
		return it.fail(it.index.err)
	}
	if !it.loadBlock() {
		return false
	}
	if inBlock(&it.data) {
		return true
	}
	if it.data.err != nil {
		return it.fail(it.data.err)
	}
	if forward {
		return it.skipForward()
	}
	return it.skipBackward()
}

// SeekGE implements base.InternalIterator.
func (it *Iter) SeekGE(key []byte) bool { return it.SeekInternalGE(key, base.TrailerSeek) }

// SeekInternalGE moves to the first entry >= (key, trailer).
func (it *Iter) SeekInternalGE(key []byte, trailer base.Trailer) bool {
	if it.err != nil {
		return false
	}
	return it.position(it.index.seekGE(key, trailer), func(b *blockIter) bool { return b.seekGE(key, trailer) }, true)
}

// SeekLT implements base.InternalIterator.
func (it *Iter) SeekLT(key []byte) bool {
	if it.err != nil {
		return false
	}
	if !it.index.seekGE(key, base.TrailerSeek) && it.index.err == nil {
		return it.Last() // every key precedes the target
	}
	return it.position(it.index.valid(), func(b *blockIter) bool { return b.seekLT(key, base.TrailerSeek) }, false)
}

// First implements base.InternalIterator.
func (it *Iter) First() bool {
	if it.err != nil {
		return false
	}
	return it.position(it.index.first(), (*blockIter).first, true)
}

// Last implements base.InternalIterator.
func (it *Iter) Last() bool {
	if it.err != nil {
		return false
	}
	return it.position(it.index.last(), (*blockIter).last, false)
}

// Next implements base.InternalIterator.
func (it *Iter) Next() bool {
	if it.err != nil || !it.data.valid() {
		return false
	}
	if it.data.next() {
		return true
	}
	if it.data.err != nil {
		return it.fail(it.data.err)
	}
	return it.skipForward()
}

// Prev implements base.InternalIterator.
func (it *Iter) Prev() bool {
	if it.err != nil || !it.data.valid() {
		return false
	}
	if it.data.prev() {
		return true
	}
	if it.data.err != nil {
		return it.fail(it.data.err)
	}
	return it.skipBackward()
}

// Key implements base.InternalIterator.
func (it *Iter) Key() base.InternalKey { return it.data.ikey }

// Value implements base.InternalIterator.
func (it *Iter) Value() []byte { return it.data.val }

// Error implements base.InternalIterator.
func (it *Iter) Error() error { return it.err }

// Close implements base.InternalIterator.
func (it *Iter) Close() error {
	it.data.offset = -1
	return it.err
}
