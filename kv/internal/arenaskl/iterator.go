package arenaskl

import "github.com/warpkit/warpkit/kv/internal/base"

// Iterator walks a Skiplist; it implements base.InternalIterator. Keys and
// values alias the arena (see the package doc). Prev is a search from the
// top, O(log n), as in LevelDB.
type Iterator struct {
	s   *Skiplist
	off uint32
	key base.InternalKey
}

// NewIter returns an unpositioned iterator.
func (s *Skiplist) NewIter() *Iterator { return &Iterator{s: s} }

// InitIter makes it an unpositioned iterator over s (for pooled iterators).
func (s *Skiplist) InitIter(it *Iterator) { *it = Iterator{s: s} }

func (it *Iterator) load(off uint32) bool {
	it.off = off
	if off == 0 {
		it.key = base.InternalKey{}
		return false
	}
	nd := it.s.arena.node(off)
	it.key = base.InternalKey{UserKey: it.s.key(nd), Trailer: base.Trailer(nd.trailer)}
	return true
}

// SeekGE implements base.InternalIterator.
func (it *Iterator) SeekGE(key []byte) bool {
	return it.load(it.s.seekGE(key, uint64(base.TrailerSeek)))
}

// SeekInternalGE moves to the first entry >= (key, trailer).
func (it *Iterator) SeekInternalGE(key []byte, trailer base.Trailer) bool {
	return it.load(it.s.seekGE(key, uint64(trailer)))
}

// SeekLT implements base.InternalIterator.
func (it *Iterator) SeekLT(key []byte) bool {
	return it.load(it.s.seekLT(key, uint64(base.TrailerSeek)))
}

// First implements base.InternalIterator.
func (it *Iterator) First() bool { return it.load(it.s.next(it.s.head, 0)) }

// Last implements base.InternalIterator.
func (it *Iterator) Last() bool { return it.load(it.s.last()) }

// Next implements base.InternalIterator.
func (it *Iterator) Next() bool {
	if it.off == 0 {
		return false
	}
	return it.load(it.s.next(it.off, 0))
}

// Prev implements base.InternalIterator.
func (it *Iterator) Prev() bool {
	if it.off == 0 {
		return false
	}
	return it.load(it.s.seekLT(it.key.UserKey, uint64(it.key.Trailer)))
}

// Valid reports whether the iterator is at an entry.
func (it *Iterator) Valid() bool { return it.off != 0 }

// Key implements base.InternalIterator.
func (it *Iterator) Key() base.InternalKey { return it.key }

// Value implements base.InternalIterator.
func (it *Iterator) Value() []byte {
	if it.off == 0 {
		return nil
	}
	return it.s.value(it.s.arena.node(it.off))
}

// Error implements base.InternalIterator; a skiplist cannot fail to read.
func (it *Iterator) Error() error { return nil }

// Close implements base.InternalIterator.
func (it *Iterator) Close() error { it.off = 0; return nil }
