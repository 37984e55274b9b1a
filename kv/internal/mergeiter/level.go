package mergeiter

import (
	"bytes"
	"sort"

	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/manifest"
)

// OpenFunc opens a table's point iterator. The iterator's Close releases
// whatever the open acquired.
type OpenFunc func(*manifest.FileMetadata) (base.InternalIterator, error)

// Level iterates over one level's sorted, disjoint tables, opening a table
// only when the iteration reaches it and closing it when it leaves. Tables
// entirely outside [lower, upper) (user keys; nil is open) are skipped.
type Level struct {
	files        []*manifest.FileMetadata
	open         OpenFunc
	lower, upper []byte

	idx  int // index of the open table; -1 or len(files) when none
	iter base.InternalIterator
	err  error
}

// NewLevel returns an unpositioned level iterator.
func NewLevel(files []*manifest.FileMetadata, open OpenFunc, lower, upper []byte) *Level {
	l := &Level{}
	l.Init(files, open, lower, upper)
	return l
}

// Init (re)initialises l.
func (l *Level) Init(files []*manifest.FileMetadata, open OpenFunc, lower, upper []byte) {
	*l = Level{files: files, open: open, lower: lower, upper: upper, idx: -1}
}

// inBounds reports whether table i can hold keys in [lower, upper).
func (l *Level) inBounds(i int) bool {
	f := l.files[i]
	if l.upper != nil && bytes.Compare(f.Smallest.UserKey, l.upper) >= 0 {
		return false
	}
	return l.lower == nil || !f.EndsBefore(l.lower)
}

// load opens table i (closing the previous one); false on error or when i
// is out of range.
func (l *Level) load(i int) bool {
	if i == l.idx && l.iter != nil {
		return true
	}
	if l.iter != nil {
		if err := l.iter.Close(); err != nil && l.err == nil {
			l.err = err
		}
		l.iter = nil
	}
	l.idx = i
	if i < 0 || i >= len(l.files) || l.err != nil {
		return false
	}
	it, err := l.open(l.files[i])
	if err != nil {
		l.err = err
		return false
	}
	l.iter = it
	return true
}

func (l *Level) failed() bool {
	if l.iter != nil {
		if err := l.iter.Error(); err != nil && l.err == nil {
			l.err = err
		}
	}
	return l.err != nil
}

// forwardFrom positions at the first entry of table i or a later one.
func (l *Level) forwardFrom(i int, first func(base.InternalIterator) bool) bool {
	for ; i < len(l.files); i++ {
		if !l.inBounds(i) {
			if l.upper != nil && bytes.Compare(l.files[i].Smallest.UserKey, l.upper) >= 0 {
				break
			}
			continue
		}
		if !l.load(i) {
			return false
		}
		if first(l.iter) {
			return true
		}
		if l.failed() {
			return false
		}
		first = base.InternalIterator.First
	}
	l.load(len(l.files))
	return false
}

// backwardFrom positions at the last entry of table i or an earlier one.
func (l *Level) backwardFrom(i int, last func(base.InternalIterator) bool) bool {
	for ; i >= 0; i-- {
		if !l.inBounds(i) {
			if l.lower != nil && !l.files[i].Overlaps(l.lower, nil) {
				break
			}
			continue
		}
		if !l.load(i) {
			return false
		}
		if last(l.iter) {
			return true
		}
		if l.failed() {
			return false
		}
		last = base.InternalIterator.Last
	}
	l.load(-1)
	return false
}

// SeekGE implements base.InternalIterator.
func (l *Level) SeekGE(key []byte) bool {
	if l.err != nil {
		return false
	}
	i := sort.Search(len(l.files), func(i int) bool { return l.files[i].Overlaps(key, nil) })
	return l.forwardFrom(i, func(it base.InternalIterator) bool { return it.SeekGE(key) })
}

// SeekLT implements base.InternalIterator.
func (l *Level) SeekLT(key []byte) bool {
	if l.err != nil {
		return false
	}
	// The last table whose smallest key is below key.
	i := sort.Search(len(l.files), func(i int) bool { return bytes.Compare(l.files[i].Smallest.UserKey, key) >= 0 }) - 1
	return l.backwardFrom(i, func(it base.InternalIterator) bool { return it.SeekLT(key) })
}

// First implements base.InternalIterator.
func (l *Level) First() bool {
	if l.err != nil {
		return false
	}
	i := 0
	if l.lower != nil {
		return l.SeekGE(l.lower)
	}
	return l.forwardFrom(i, base.InternalIterator.First)
}

// Last implements base.InternalIterator.
func (l *Level) Last() bool {
	if l.err != nil {
		return false
	}
	if l.upper != nil {
		return l.SeekLT(l.upper)
	}
	return l.backwardFrom(len(l.files)-1, base.InternalIterator.Last)
}

// Next implements base.InternalIterator.
func (l *Level) Next() bool {
	if l.err != nil || l.iter == nil {
		return false
	}
	if l.iter.Next() {
		return true
	}
	if l.failed() {
		return false
	}
	return l.forwardFrom(l.idx+1, base.InternalIterator.First)
}

// Prev implements base.InternalIterator.
func (l *Level) Prev() bool {
	if l.err != nil || l.iter == nil {
		return false
	}
	if l.iter.Prev() {
		return true
	}
	if l.failed() {
		return false
	}
	return l.backwardFrom(l.idx-1, base.InternalIterator.Last)
}

// Key implements base.InternalIterator.
func (l *Level) Key() base.InternalKey { return l.iter.Key() }

// Value implements base.InternalIterator.
func (l *Level) Value() []byte { return l.iter.Value() }

// Error implements base.InternalIterator.
func (l *Level) Error() error { return l.err }

// Close implements base.InternalIterator.
func (l *Level) Close() error {
	l.load(-1)
	return l.err
}
