package kv

import (
	"bytes"
	"iter"
	"sync"

	"github.com/warpkit/warpkit/kv/internal/arenaskl"
	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/internal/mergeiter"
	"github.com/warpkit/warpkit/kv/internal/rangedel"
	"github.com/warpkit/warpkit/kv/manifest"
	"github.com/warpkit/warpkit/kv/sstable"
)

// Iterator walks the store's keys in order, at the sequence number it was
// created at (or its snapshot's), within optional bounds.
//
// Positioning methods (SeekGE, SeekLT, First, Last, Next, Prev) return
// whether the iterator is at a key. Key and Value return slices valid only
// until the next positioning call or Close; copy what you keep. When a
// positioning method returns false, Error tells the end of the range from a
// failure. An Iterator is not safe for concurrent use; close it when done (it
// pins the tables it reads).
//
// As in Pebble and goleveldb, an iterator that runs out of keys remembers
// which end it ran off. It is after the end when Next, First or SeekGE found
// no key (none at or above the position within the bounds), and before the
// start when Prev, Last or SeekLT found none. Prev from after the end moves to
// the last key (Last); Next from before the start moves to the first key
// (First). Moving further off the same end stays there and returns false. A
// new iterator, not yet positioned, is at neither end: Next and Prev return
// false until a positioning call. An iterator that failed (Error non-nil)
// stays invalid, and a closed one returns false from every move.
type Iterator struct {
	alloc        *iterAlloc
	db           *DB
	rs           *readState
	snap         base.SeqNum
	iter         *mergeiter.Merging
	tombs        []*rangedel.Set
	lower, upper []byte

	valid   bool
	reverse bool    // the internal iterator is before the current entry
	key     []byte  // current key in reverse mode (owned)
	value   []byte  // current value in reverse mode (owned)
	skip    []byte  // forward: user key whose remaining entries are skipped
	end     iterEnd // when !valid: which end the iterator ran off
	err     error
	closed  bool
}

// iterEnd records where an exhausted iterator is: Prev from after the end
// and Next from before the start step back onto the keys.
type iterEnd int8

const (
	endNone     iterEnd = iota // positioned at a key, or never positioned
	afterEnd                   // ran off the end: Prev moves to Last
	beforeStart                // ran off the start: Next moves to First
)

// NewIter returns an iterator over the current state.
func (d *DB) NewIter(opts *IterOptions) (*Iterator, error) {
	return d.newIter(opts, nil)
}

// iterAlloc is an Iterator with the memory of its parts, pooled: creating
// an iterator is then allocation-free in the steady state.
type iterAlloc struct {
	merging  mergeiter.Merging
	children []base.InternalIterator
	mems     []arenaskl.Iterator
	levels   []mergeiter.Level
	tombs    []*rangedel.Set
	lower    []byte
	upper    []byte
	key      []byte
	value    []byte
	skip     []byte
}

var iterAllocPool = sync.Pool{New: func() any { return new(iterAlloc) }}

// newIter returns an iterator at snapshot s, or at the newest state for s
// nil.
func (d *DB) newIter(opts *IterOptions, s *Snapshot) (*Iterator, error) {
	if opts != nil {
		if err := boundsOrdered(opts.LowerBound, opts.UpperBound); err != nil {
			return nil, err
		}
	}
	rs, snap := d.beginRead(s)
	if rs == nil {
		return nil, ErrClosed
	}
	tt, err := d.tableTombstones(rs)
	if err != nil {
		rs.unref()
		return nil, err
	}
	a := iterAllocPool.Get().(*iterAlloc)
	var lower, upper []byte
	if opts != nil {
		// A bound is set when non-nil, even empty: an empty upper bound
		// admits no key. (Appending nothing to a nil slice would leave it
		// nil, an open bound, so the copy starts from a non-nil slice.)
		if opts.LowerBound != nil {
			if a.lower == nil {
				a.lower = make([]byte, 0, len(opts.LowerBound))
			}
			a.lower = append(a.lower[:0], opts.LowerBound...)
			lower = a.lower
		}
		if opts.UpperBound != nil {
			if a.upper == nil {
				a.upper = make([]byte, 0, len(opts.UpperBound))
			}
			a.upper = append(a.upper[:0], opts.UpperBound...)
			upper = a.upper
		}
	}
	// The Iterator itself is not pooled, so that a stale pointer to a closed
	// iterator can never reach another iterator's state.
	it := &Iterator{db: d, rs: rs, snap: snap, lower: lower, upper: upper, alloc: a,
		key: a.key[:0], value: a.value[:0], skip: a.skip[:0]}
	children := a.children[:0]
	tombs := a.tombs[:0]
	nmem := 1 + len(rs.imm)
	if cap(a.mems) < nmem {
		a.mems = make([]arenaskl.Iterator, nmem)
	}
	a.mems = a.mems[:nmem]
	for i := range nmem {
		m := rs.mem
		if i > 0 {
			m = rs.imm[len(rs.imm)-i] // newest first
		}
		m.InitIter(&a.mems[i])
		children = append(children, &a.mems[i])
		if rd := m.RangeDels(); !rd.Empty() {
			tombs = append(tombs, rd)
		}
	}
	v := rs.version
	nlevels := len(v.Levels[0]) + manifest.NumLevels - 1
	if cap(a.levels) < nlevels {
		a.levels = make([]mergeiter.Level, nlevels)
	}
	a.levels = a.levels[:0]
	addLevel := func(files []*manifest.FileMetadata) {
		a.levels = a.levels[:len(a.levels)+1]
		l := &a.levels[len(a.levels)-1]
		l.Init(files, d.openTableIterFn, lower, upper)
		children = append(children, l)
	}
	for i := len(v.Levels[0]) - 1; i >= 0; i-- {
		f := v.Levels[0][i]
		if f.SmallestSeq > snap || !f.Overlaps(lower, nil) || (upper != nil && bytes.Compare(f.Smallest.UserKey, upper) >= 0) {
			continue
		}
		addLevel(v.Levels[0][i : i+1])
	}
	for level := 1; level < manifest.NumLevels; level++ {
		if len(v.Levels[level]) > 0 {
			addLevel(v.Levels[level])
		}
	}
	if !tt.Empty() {
		tombs = append(tombs, tt)
	}
	a.children, a.tombs = children, tombs
	a.merging.Init(children)
	it.iter = &a.merging
	it.tombs = tombs
	d.openIters.Add(1)
	return it, nil
}

// tableIter is a pooled table iterator holding its table-cache reference.
type tableIter struct {
	sstable.Iter
	tables *tableCache
	entry  *tableEntry
}

var tableIterPool = sync.Pool{New: func() any { return new(tableIter) }}

// openTableIter opens a table's iterator for a level iterator.
func (d *DB) openTableIter(f *manifest.FileMetadata) (base.InternalIterator, error) {
	e, err := d.tables.acquire(f)
	if err != nil {
		return nil, err
	}
	t := tableIterPool.Get().(*tableIter)
	e.reader.InitIter(&t.Iter)
	t.tables, t.entry = d.tables, e
	return t, nil
}

func (t *tableIter) Close() error {
	err := t.Iter.Close()
	t.tables.release(t.entry)
	t.tables, t.entry = nil, nil
	tableIterPool.Put(t)
	return err
}

// deleted reports whether a range tombstone visible at the iterator's
// sequence number covers entry k.
func (it *Iterator) deleted(k base.InternalKey) bool {
	for _, s := range it.tombs {
		if s.MaxCovering(k.UserKey, it.snap) > k.SeqNum() {
			return true
		}
	}
	return false
}

func (it *Iterator) fail() bool {
	if err := it.iter.Error(); err != nil && it.err == nil {
		it.err = err
	}
	it.valid = false
	return false
}

// findNext moves forward to the newest visible live entry of the next user
// key (skipping the entries of it.skip when skipping is set).
func (it *Iterator) findNext(skipping bool) bool {
	it.reverse = false
	for ok := true; ok; ok = it.iter.Next() {
		if !it.iter.Valid() {
			break
		}
		k := it.iter.Key()
		if it.upper != nil && bytes.Compare(k.UserKey, it.upper) >= 0 {
			break
		}
		if k.SeqNum() > it.snap {
			continue
		}
		if skipping && bytes.Equal(k.UserKey, it.skip) {
			continue
		}
		if k.Kind() == base.KindSet && !it.deleted(k) {
			it.valid = true
			it.end = endNone
			return true
		}
		// The newest visible entry is a deletion: skip the key.
		it.skip = append(it.skip[:0], k.UserKey...)
		skipping = true
	}
	it.end = afterEnd
	return it.fail()
}

// findPrev moves backward to the newest visible live entry of the previous
// user key, saving it (the internal iterator ends up before its entries).
func (it *Iterator) findPrev() bool {
	it.reverse = true
	haveValue := false
	for it.iter.Valid() {
		k := it.iter.Key()
		if it.lower != nil && bytes.Compare(k.UserKey, it.lower) < 0 {
			break
		}
		if k.SeqNum() <= it.snap {
			if haveValue && bytes.Compare(k.UserKey, it.key) < 0 {
				break // the saved key's entries are done; it is the answer
			}
			if k.Kind() == base.KindSet && !it.deleted(k) {
				it.key = append(it.key[:0], k.UserKey...)
				it.value = append(it.value[:0], it.iter.Value()...)
				haveValue = true
			} else {
				haveValue = false
			}
		}
		it.iter.Prev()
	}
	if err := it.iter.Error(); err != nil {
		return it.fail()
	}
	it.valid = haveValue
	if haveValue {
		it.end = endNone
	} else {
		it.end = beforeStart
	}
	return haveValue
}

// SeekGE moves to the first key >= key (and >= the lower bound). Finding
// none leaves the iterator after the end: a Prev then moves to the last key.
func (it *Iterator) SeekGE(key []byte) bool {
	if it.err != nil || it.closed {
		return false
	}
	if it.lower != nil && bytes.Compare(key, it.lower) < 0 {
		key = it.lower
	}
	it.iter.SeekGE(key)
	return it.findNext(false)
}

// SeekLT moves to the last key < key (and < the upper bound). Finding none
// leaves the iterator before the start: a Next then moves to the first key.
func (it *Iterator) SeekLT(key []byte) bool {
	if it.err != nil || it.closed {
		return false
	}
	if it.upper != nil && bytes.Compare(key, it.upper) > 0 {
		key = it.upper
	}
	it.iter.SeekLT(key)
	return it.findPrev()
}

// First moves to the first key (the first >= the lower bound). Finding none
// leaves the iterator after the end.
func (it *Iterator) First() bool {
	if it.err != nil || it.closed {
		return false
	}
	if it.lower != nil {
		it.iter.SeekGE(it.lower)
	} else {
		it.iter.First()
	}
	return it.findNext(false)
}

// Last moves to the last key (the last < the upper bound). Finding none
// leaves the iterator before the start.
func (it *Iterator) Last() bool {
	if it.err != nil || it.closed {
		return false
	}
	if it.upper != nil {
		it.iter.SeekLT(it.upper)
	} else {
		it.iter.Last()
	}
	return it.findPrev()
}

// Next moves to the next key. Past the last key (within the bounds) it
// returns false and leaves the iterator after the end, where further Next
// calls return false and Prev moves to the last key. From before the start
// (a Prev, Last or SeekLT that found no key) Next moves to the first key, as
// First does. On a new, unpositioned, failed or closed iterator it returns
// false.
func (it *Iterator) Next() bool {
	if it.err != nil || it.closed {
		return false
	}
	if !it.valid {
		if it.end == beforeStart {
			return it.First()
		}
		return false
	}
	if it.reverse {
		// The internal iterator is just before the current key's entries.
		it.skip = append(it.skip[:0], it.key...)
		if it.iter.Valid() {
			it.iter.Next()
		} else {
			it.iter.First()
		}
		if it.iter.Error() != nil {
			return it.fail()
		}
		return it.findNext(true)
	}
	it.skip = append(it.skip[:0], it.iter.Key().UserKey...)
	it.iter.Next()
	return it.findNext(true)
}

// Prev moves to the previous key. Before the first key (within the bounds)
// it returns false and leaves the iterator before the start, where further
// Prev calls return false and Next moves to the first key. From after the end
// (a Next, First or SeekGE that found no key) Prev moves to the last key, as
// Last does. On a new, unpositioned, failed or closed iterator it returns
// false.
func (it *Iterator) Prev() bool {
	if it.err != nil || it.closed {
		return false
	}
	if !it.valid {
		if it.end == afterEnd {
			return it.Last()
		}
		return false
	}
	if !it.reverse {
		// Step back over every entry of the current key.
		cur := append(it.key[:0], it.iter.Key().UserKey...)
		it.key = cur
		for it.iter.Prev() {
			if bytes.Compare(it.iter.Key().UserKey, cur) < 0 {
				break
			}
		}
		if it.iter.Error() != nil {
			return it.fail()
		}
	}
	return it.findPrev()
}

// Valid reports whether the iterator is at a key.
func (it *Iterator) Valid() bool { return it.valid }

// Key returns the current key (valid until the next move).
func (it *Iterator) Key() []byte {
	if !it.valid {
		return nil
	}
	if it.reverse {
		return it.key
	}
	return it.iter.Key().UserKey
}

// Value returns the current value (valid until the next move).
func (it *Iterator) Value() []byte {
	if !it.valid {
		return nil
	}
	if it.reverse {
		return it.value
	}
	return it.iter.Value()
}

// Error returns the error that stopped the iterator, if any.
func (it *Iterator) Error() error { return it.err }

// Close releases the iterator's tables and memtables. Closing twice returns
// ErrClosed.
func (it *Iterator) Close() error {
	if it.closed {
		return ErrClosed
	}
	it.closed = true
	it.valid = false
	err := it.iter.Close()
	it.rs.unref()
	it.db.openIters.Add(-1)
	// Return the memory to the pool without keeping anything alive.
	a := it.alloc
	clear(a.children)
	clear(a.tombs)
	for i := range a.mems {
		a.mems[i] = arenaskl.Iterator{}
	}
	for i := range a.levels {
		a.levels[i] = mergeiter.Level{}
	}
	a.merging.Init(nil)
	a.key, a.value, a.skip = it.key[:0], it.value[:0], it.skip[:0]
	*it = Iterator{closed: true}
	iterAllocPool.Put(a)
	return err
}

// All ranges over every key-value pair from First, in order. The slices are
// valid only within one step of the loop. After the loop, Error reports
// whether it ended early on a failure.
func (it *Iterator) All() iter.Seq2[[]byte, []byte] {
	return func(yield func([]byte, []byte) bool) {
		for ok := it.First(); ok; ok = it.Next() {
			if !yield(it.Key(), it.Value()) {
				return
			}
		}
	}
}
