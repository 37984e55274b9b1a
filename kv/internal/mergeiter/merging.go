// Package mergeiter combines internal iterators: Merging interleaves any
// number of them in internal-key order (a heap), Level concatenates the
// disjoint, sorted tables of one level, opening each only when reached.
// Both move in either direction, and switch direction by repositioning the
// children around the current key, as LevelDB's MergingIterator does.
package mergeiter

import (
	"github.com/warpkit/warpkit/kv/internal/base"
)

// Merging is a heap over child iterators. It is not safe for concurrent use.
type Merging struct {
	children []base.InternalIterator
	heap     []int // indexes of valid children; heap[0] is current
	forward  bool
	err      error
}

// NewMerging merges children; it closes them on Close.
func NewMerging(children ...base.InternalIterator) *Merging {
	m := &Merging{}
	m.Init(children)
	return m
}

// Init (re)initialises m over children, reusing its memory.
func (m *Merging) Init(children []base.InternalIterator) {
	heap := m.heap[:0]
	if cap(heap) < len(children) {
		heap = make([]int, 0, len(children))
	}
	*m = Merging{children: children, heap: heap}
}

func (m *Merging) less(a, b int) bool {
	c := base.CompareInternal(m.children[a].Key(), m.children[b].Key())
	if m.forward {
		return c < 0
	}
	return c > 0
}

func (m *Merging) down(i int) {
	h := m.heap
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		j := l
		if r := l + 1; r < n && m.less(h[r], h[l]) {
			j = r
		}
		if !m.less(h[j], h[i]) {
			return
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
}

// build collects valid children into the heap; valid[i] says whether child
// i is positioned.
func (m *Merging) build(valid func(i int) bool) bool {
	m.heap = m.heap[:0]
	for i, c := range m.children {
		if valid(i) {
			m.heap = append(m.heap, i)
		} else if err := c.Error(); err != nil && m.err == nil {
			m.err = err
		}
	}
	for i := len(m.heap)/2 - 1; i >= 0; i-- {
		m.down(i)
	}
	if m.err != nil {
		m.heap = m.heap[:0]
		return false
	}
	return len(m.heap) > 0
}

// SeekGE implements base.InternalIterator.
func (m *Merging) SeekGE(key []byte) bool {
	m.forward = true
	return m.build(func(i int) bool { return m.children[i].SeekGE(key) })
}

// SeekLT implements base.InternalIterator.
func (m *Merging) SeekLT(key []byte) bool {
	m.forward = false
	return m.build(func(i int) bool { return m.children[i].SeekLT(key) })
}

// First implements base.InternalIterator.
func (m *Merging) First() bool {
	m.forward = true
	return m.build(func(i int) bool { return m.children[i].First() })
}

// Last implements base.InternalIterator.
func (m *Merging) Last() bool {
	m.forward = false
	return m.build(func(i int) bool { return m.children[i].Last() })
}

// advance moves the current child in the heap's direction.
func (m *Merging) advance(move func(base.InternalIterator) bool) bool {
	top := m.heap[0]
	c := m.children[top]
	if move(c) {
		m.down(0)
		return true
	}
	if err := c.Error(); err != nil {
		m.err = err
		m.heap = m.heap[:0]
		return false
	}
	n := len(m.heap) - 1
	m.heap[0] = m.heap[n]
	m.heap = m.heap[:n]
	if n > 0 {
		m.down(0)
	}
	return n > 0
}

// Next implements base.InternalIterator.
func (m *Merging) Next() bool {
	if len(m.heap) == 0 {
		return false
	}
	if !m.forward {
		// Put every other child just after the current key.
		cur := m.children[m.heap[0]].Key().Clone()
		top := m.heap[0]
		m.forward = true
		ok := m.build(func(i int) bool {
			c := m.children[i]
			if i == top {
				return true
			}
			v := c.SeekGE(cur.UserKey)
			for v && base.CompareInternal(c.Key(), cur) <= 0 {
				v = c.Next()
			}
			return v
		})
		if !ok {
			return false
		}
	}
	return m.advance(base.InternalIterator.Next)
}

// Prev implements base.InternalIterator.
func (m *Merging) Prev() bool {
	if len(m.heap) == 0 {
		return false
	}
	if m.forward {
		// Put every other child just before the current key.
		cur := m.children[m.heap[0]].Key().Clone()
		top := m.heap[0]
		m.forward = false
		ok := m.build(func(i int) bool {
			c := m.children[i]
			if i == top {
				return true
			}
			v := c.SeekGE(cur.UserKey)
			for v && base.CompareInternal(c.Key(), cur) < 0 {
				v = c.Next()
			}
			if c.Error() != nil {
				return false
			}
			if v {
				return c.Prev()
			}
			return c.Last()
		})
		if !ok {
			return false
		}
	}
	return m.advance(base.InternalIterator.Prev)
}

// Valid reports whether the iterator is at an entry.
func (m *Merging) Valid() bool { return len(m.heap) > 0 }

// Key implements base.InternalIterator.
func (m *Merging) Key() base.InternalKey { return m.children[m.heap[0]].Key() }

// Value implements base.InternalIterator.
func (m *Merging) Value() []byte { return m.children[m.heap[0]].Value() }

// Error implements base.InternalIterator.
func (m *Merging) Error() error { return m.err }

// Close closes every child and returns the first error.
func (m *Merging) Close() error {
	err := m.err
	for _, c := range m.children {
		if cerr := c.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	m.heap = m.heap[:0]
	return err
}
