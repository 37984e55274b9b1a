// Package arenaskl is a lock-free skiplist of internal keys whose nodes, keys
// and values live in one preallocated byte arena, in the manner of RocksDB's
// InlineSkipList and Pebble's arenaskl.
//
// Concurrency: Add may be called from many goroutines at once (nodes are
// linked bottom-up with compare-and-swap), and any number of iterators may
// read concurrently with writers. Nodes are never removed. A reader sees a
// node once it is linked at level 0; the kv store hides entries that are
// linked but not yet committed by their sequence numbers.
//
// Memory: the arena is a []byte with no Go pointers, so the garbage collector
// never scans it; offsets (uint32) stand in for pointers, 0 meaning nil.
// Keys and values returned by iterators alias the arena and stay valid as
// long as the Skiplist is reachable.
package arenaskl

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"unsafe"

	"github.com/warpkit/warpkit/kv/internal/base"
)

const (
	// MaxHeight bounds tower heights; with branching factor 4 it suits up to
	// about 4^MaxHeight entries.
	MaxHeight = 16
	pBranch   = 4 // a node reaches level i+1 with probability 1/pBranch

	nodeAlign = 8
)

// node is the header of an arena-resident node. Only the first height
// entries of tower are allocated; the rest belongs to the key and value.
type node struct {
	trailer   uint64
	keyOffset uint32
	keySize   uint32
	valueSize uint32
	tower     [MaxHeight]uint32
}

const (
	maxNodeSize = int(unsafe.Sizeof(node{}))
	towerSlot   = int(unsafe.Sizeof(uint32(0)))
)

// ErrArenaFull is returned by Add when the arena has no room for the entry.
var ErrArenaFull = errors.New("arenaskl: arena full")

// ErrRecordExists is returned by Add for an internal key already present.
var ErrRecordExists = errors.New("arenaskl: record with this key already exists")

// Arena is a bump allocator over a fixed byte slice.
type Arena struct {
	buf []byte
	n   atomic.Uint64 // bytes allocated; may exceed len(buf) after a failed allocation
	cap uint32        // usable bytes (buf has maxNodeSize of slack beyond cap)
}

// MaxCapacity is the largest arena capacity: offsets are 32-bit, and the
// arena keeps a node's worth of slack beyond its capacity.
const MaxCapacity = math.MaxUint32 - maxNodeSize - nodeAlign

// NewArena returns an arena of the given capacity, at most MaxCapacity
// (a larger one is reduced to it).
func NewArena(capacity int) *Arena {
	capacity = min(capacity, MaxCapacity)
	a := &Arena{buf: make([]byte, capacity+maxNodeSize+nodeAlign), cap: uint32(capacity)}
	a.n.Store(nodeAlign) // offset 0 means nil
	return a
}

// Size returns the bytes allocated so far.
func (a *Arena) Size() int { return int(min(a.n.Load(), uint64(a.cap))) }

// Capacity returns the arena's usable size.
func (a *Arena) Capacity() int { return int(a.cap) }

// alloc reserves size bytes aligned to align (a power of two).
func (a *Arena) alloc(size, align int) (uint32, bool) {
	padded := uint64(size + align - 1)
	end := a.n.Add(padded)
	if end > uint64(a.cap) {
		return 0, false
	}
	off := (end - padded + uint64(align-1)) &^ uint64(align-1)
	return uint32(off), true
}

func (a *Arena) node(off uint32) *node {
	if off == 0 {
		return nil
	}
	return (*node)(unsafe.Pointer(&a.buf[off]))
}

func (a *Arena) bytes(off, size uint32) []byte {
	return a.buf[off : off+size : off+size]
}

// NodeOverhead bounds the arena bytes an entry needs beyond its key and
// value; callers use it to check that a batch will fit.
const NodeOverhead = maxNodeSize + nodeAlign

// Skiplist is a sorted set of internal keys with values.
type Skiplist struct {
	arena  *Arena
	head   uint32
	height atomic.Uint32
	count  atomic.Int64
}

// New returns an empty skiplist in the arena (several skiplists may share
// one arena).
func New(arena *Arena) (*Skiplist, error) {
	s := &Skiplist{arena: arena}
	head, ok := s.newNode(nil, 0, nil, MaxHeight)
	if !ok {
		return nil, ErrArenaFull
	}
	s.head = head
	s.height.Store(1)
	return s, nil
}

// Arena returns the skiplist's arena.
func (s *Skiplist) Arena() *Arena { return s.arena }

// Len returns the number of entries.
func (s *Skiplist) Len() int { return int(s.count.Load()) }

func (s *Skiplist) newNode(key []byte, trailer uint64, value []byte, height int) (uint32, bool) {
	off, ok := s.arena.alloc(nodeBytes(len(key), len(value), height), nodeAlign)
	if !ok {
		return 0, false
	}
	nd := s.arena.node(off)
	nd.trailer = trailer
	nd.keyOffset = off + uint32(towerBytes(height))
	nd.keySize = uint32(len(key))
	nd.valueSize = uint32(len(value)) // the tower is zero: arena memory starts zeroed
	copy(s.arena.buf[nd.keyOffset:], key)
	copy(s.arena.buf[nd.keyOffset+nd.keySize:], value)
	return off, true
}

// towerBytes is the size of a node's header and tower of the given height.
func towerBytes(height int) int { return maxNodeSize - (MaxHeight-height)*towerSlot }

// nodeBytes is the size of a node of the given height holding a key and a
// value, without its alignment.
func nodeBytes(keyLen, valueLen, height int) int { return towerBytes(height) + keyLen + valueLen }

// randomHeight draws a tower height: level i+1 with probability 1/pBranch
// of level i. The runtime's generator is per-thread, so concurrent writers
// share no state here (a CAS-advanced generator in the skiplist was one
// contended cache line for every insert).
func (s *Skiplist) randomHeight() int {
	r := rand.Uint64()
	h := 1
	for h < MaxHeight && r&(pBranch-1) == 0 {
		h++
		r >>= 2
	}
	return h
}

func (s *Skiplist) next(off uint32, level int) uint32 {
	return atomic.LoadUint32(&s.arena.node(off).tower[level])
}

func (s *Skiplist) key(nd *node) []byte { return s.arena.bytes(nd.keyOffset, nd.keySize) }

func (s *Skiplist) value(nd *node) []byte {
	return s.arena.bytes(nd.keyOffset+nd.keySize, nd.valueSize)
}

// compare orders (key, trailer) against node off; off must not be head.
func (s *Skiplist) compare(key []byte, trailer uint64, off uint32) int {
	nd := s.arena.node(off)
	if c := bytes.Compare(key, s.key(nd)); c != 0 {
		return c
	}
	switch {
	case trailer > nd.trailer:
		return -1
	case trailer < nd.trailer:
		return 1
	}
	return 0
}

// findSplice returns the nodes around (key, trailer) at one level, starting
// the walk at start (which must sort before the key).
func (s *Skiplist) findSplice(key []byte, trailer uint64, level int, start uint32) (prev, next uint32, found bool) {
	prev = start
	for {
		next = s.next(prev, level)
		if next == 0 {
			return prev, 0, false
		}
		c := s.compare(key, trailer, next)
		if c == 0 {
			return prev, next, true
		}
		if c < 0 {
			return prev, next, false
		}
		prev = next
	}
}

// Add inserts an entry. It is safe to call concurrently with other Adds and
// with readers.
func (s *Skiplist) Add(ikey base.InternalKey, value []byte) error {
	_, err := s.AddSized(ikey, value)
	return err
}

// AddSized is Add, also returning the arena bytes the entry took (its node
// with alignment: what Arena.Size grew by), so that a caller that reserved
// room for the worst case can return the rest. An entry that was not added
// took none, but for ErrRecordExists from a concurrent Add of the same key,
// whose unlinked node keeps its bytes.
func (s *Skiplist) AddSized(ikey base.InternalKey, value []byte) (int, error) {
	key, trailer := ikey.UserKey, uint64(ikey.Trailer)
	height := s.randomHeight()
	listHeight := int(s.height.Load())
	for height > listHeight {
		if s.height.CompareAndSwap(uint32(listHeight), uint32(height)) {
			listHeight = height
			break
		}
		listHeight = int(s.height.Load())
	}
	var prevs, nexts [MaxHeight]uint32
	prev := s.head
	for level := listHeight - 1; level >= 0; level-- {
		p, n, found := s.findSplice(key, trailer, level, prev)
		if found {
			return 0, ErrRecordExists
		}
		prevs[level], nexts[level] = p, n
		prev = p
	}
	off, ok := s.newNode(key, trailer, value, height)
	if !ok {
		return 0, ErrArenaFull
	}
	size := nodeBytes(len(key), len(value), height) + nodeAlign - 1
	nd := s.arena.node(off)
	for level := range height {
		for {
			atomic.StoreUint32(&nd.tower[level], nexts[level])
			pn := s.arena.node(prevs[level])
			if atomic.CompareAndSwapUint32(&pn.tower[level], nexts[level], off) {
				break
			}
			// Someone linked a node between prev and next; search again from prev.
			p, n, found := s.findSplice(key, trailer, level, prevs[level])
			if found {
				if level == 0 {
					return size, ErrRecordExists // a concurrent Add of the same key won; our node stays unlinked
				}
				panic("arenaskl: duplicate key above level 0")
			}
			prevs[level], nexts[level] = p, n
		}
	}
	s.count.Add(1)
	return size, nil
}

// seekGE returns the first node >= (key, trailer), or 0.
func (s *Skiplist) seekGE(key []byte, trailer uint64) uint32 {
	prev := s.head
	var next uint32
	for level := int(s.height.Load()) - 1; level >= 0; level-- {
		prev, next, _ = s.findSplice(key, trailer, level, prev)
	}
	return next
}

// seekLT returns the last node < (key, trailer), or 0.
func (s *Skiplist) seekLT(key []byte, trailer uint64) uint32 {
	prev := s.head
	for level := int(s.height.Load()) - 1; level >= 0; level-- {
		prev, _, _ = s.findSplice(key, trailer, level, prev)
	}
	if prev == s.head {
		return 0
	}
	return prev
}

// last returns the last node, or 0.
func (s *Skiplist) last() uint32 {
	cur := s.head
	for level := int(s.height.Load()) - 1; level >= 0; level-- {
		for {
			n := s.next(cur, level)
			if n == 0 {
				break
			}
			cur = n
		}
	}
	if cur == s.head {
		return 0
	}
	return cur
}

// SeekGE returns the first entry >= (key, trailer) without allocating an
// iterator. The key and value alias the arena.
func (s *Skiplist) SeekGE(key []byte, trailer base.Trailer) (base.InternalKey, []byte, bool) {
	off := s.seekGE(key, uint64(trailer))
	if off == 0 {
		return base.InternalKey{}, nil, false
	}
	nd := s.arena.node(off)
	return base.InternalKey{UserKey: s.key(nd), Trailer: base.Trailer(nd.trailer)}, s.value(nd), true
}
