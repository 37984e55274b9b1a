// Package blinknode is the host's view of the B-link nodes of
// internal/devcode/blink.cuh (Lay<S, Versioned>), shared by btree and
// mvbtree: the byte layout of a node of either slot width, versioned or
// not, and its encoding, for bulk-build tests and for the checkers that
// read a tree's nodes back from the device; and the rounds both trees run
// an insert batch that is large against the tree in (Rounds, rounds.go).
//
// A node is 32 slots of 4 bytes (keys and values both 32-bit) or of 8 bytes
// (either 64-bit): a header of meta (count | level << 8 | latch), link, low
// and high, then (key, value) pairs — blink.cuh's kHeader and kCap. The
// versioned layout adds ts and prev (u32 each): the narrow node's last two
// slots (13 pairs before them), the wide node's fourth header slot (14 pairs
// after it) — blink.cuh's kVersionByte.
//
// The package's tests also run blink.cuh's node code itself on single nodes
// of every layout, on the CPU emulation of the GPU (testdata/nodes.cu): the
// descents' child search and the leaf shifts, whose mistakes the trees'
// own tests cannot all see (a wrong child costs a walk along the links; a
// stale slot is read only by a torn reader).
package blinknode

import "encoding/binary"

const (
	// None is the empty link (and, in mvbtree, the empty prev).
	None = 0xffffffff
	// LatchBit in meta: a node being written (in mvbtree also the mark of a
	// version's copy).
	LatchBit = 1 << 31
	// MaxCap is the most pairs any layout holds.
	MaxCap = 14
)

// Layout says where the fields of a node are.
type Layout struct {
	Wide      bool // 8-byte slots
	Versioned bool // carries ts and prev (at VersionAt)
	NodeBytes int
	Cap       int // pairs per node
	PairBase  int // byte offset of pair 0
	SlotBytes int // width of a key or value slot
	VersionAt int // byte offset of ts (prev follows it); versioned layouts only
}

// LayoutFor returns the layout of nodes with keys and values of the given
// widths in bytes (4 or 8).
func LayoutFor(keyBytes, valBytes int, versioned bool) Layout {
	slot := 4
	if keyBytes == 8 || valBytes == 8 {
		slot = 8
	}
	l := Layout{Wide: slot == 8, Versioned: versioned, NodeBytes: 32 * slot, Cap: 14, PairBase: 4 * slot, SlotBytes: slot}
	switch {
	case versioned && slot == 4:
		l.Cap, l.VersionAt = 13, 120
	case versioned:
		l.VersionAt = 24
	}
	return l
}

// Node is a decoded node.
type Node struct {
	Meta, Link uint32
	Low, High  uint64
	TS, Prev   uint32 // versioned layouts only
	Keys, Vals [MaxCap]uint64
}

// MakeMeta is the meta word of an unlatched node.
func MakeMeta(count, level int) uint32 { return uint32(count) | uint32(level)<<8 }

func (n *Node) Count() int    { return int(n.Meta & 0xff) }
func (n *Node) Level() int    { return int(n.Meta>>8) & 0xff }
func (n *Node) Latched() bool { return n.Meta&LatchBit != 0 }

func (l Layout) slot(b []byte) uint64 {
	if l.Wide {
		return binary.LittleEndian.Uint64(b)
	}
	return uint64(binary.LittleEndian.Uint32(b))
}

func (l Layout) putSlot(b []byte, v uint64) {
	if l.Wide {
		binary.LittleEndian.PutUint64(b, v)
	} else {
		binary.LittleEndian.PutUint32(b, uint32(v))
	}
}

// offsets of low, high and (versioned) ts and prev; meta and link are at
// 0 and 4.
func (l Layout) fields() (low, high, ts, prev int) {
	return 8, 8 + l.SlotBytes, l.VersionAt, l.VersionAt + 4
}

// Decode reads the node at the start of b.
func (l Layout) Decode(b []byte) Node {
	var n Node
	lo, hi, ts, prev := l.fields()
	n.Meta = binary.LittleEndian.Uint32(b[0:])
	n.Link = binary.LittleEndian.Uint32(b[4:])
	n.Low = l.slot(b[lo:])
	n.High = l.slot(b[hi:])
	if l.Versioned {
		n.TS = binary.LittleEndian.Uint32(b[ts:])
		n.Prev = binary.LittleEndian.Uint32(b[prev:])
	}
	for j := 0; j < l.Cap; j++ {
		o := l.PairBase + 2*j*l.SlotBytes
		n.Keys[j] = l.slot(b[o:])
		n.Vals[j] = l.slot(b[o+l.SlotBytes:])
	}
	return n
}

// Encode writes n over the first NodeBytes of b (bytes no field holds are
// zero).
func (l Layout) Encode(b []byte, n *Node) {
	clear(b[:l.NodeBytes])
	lo, hi, ts, prev := l.fields()
	binary.LittleEndian.PutUint32(b[0:], n.Meta)
	binary.LittleEndian.PutUint32(b[4:], n.Link)
	l.putSlot(b[lo:], n.Low)
	l.putSlot(b[hi:], n.High)
	if l.Versioned {
		binary.LittleEndian.PutUint32(b[ts:], n.TS)
		binary.LittleEndian.PutUint32(b[prev:], n.Prev)
	}
	for j := 0; j < l.Cap; j++ {
		o := l.PairBase + 2*j*l.SlotBytes
		l.putSlot(b[o:], n.Keys[j])
		l.putSlot(b[o+l.SlotBytes:], n.Vals[j])
	}
}
