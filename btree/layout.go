package btree

import (
	"encoding/binary"
	"fmt"
)

// Node layout, mirrored from btree.cu. A node is 128 bytes when keys and values
// are both 32-bit and 256 bytes when either is 64-bit; both hold nodeCap pairs.
const (
	nodeCap   = 14         // pairs per node
	splitAt   = 7          // a split keeps [0, 7) and moves [7, 14)
	linkNone  = 0xffffffff // no right sibling
	latchBit  = 1 << 31
	buildFill = 10 // pairs per leaf after a bulk build (room for 4 inserts before a split)
	buildFan  = 12 // children per internal node after a bulk build
)

// layout describes where the fields of a node are for one slot width.
type layout struct {
	wide      bool // 64-bit slots
	nodeBytes int
	pairBase  int // byte offset of pair 0
	slotBytes int // width of a key or value slot
}

func layoutFor(keyBytes, valBytes int) layout {
	if keyBytes == 8 || valBytes == 8 {
		return layout{wide: true, nodeBytes: 256, pairBase: 32, slotBytes: 8}
	}
	return layout{nodeBytes: 128, pairBase: 16, slotBytes: 4}
}

// hostNode is a decoded node.
type hostNode struct {
	meta      uint32
	link      uint32
	low, high uint64
	keys      [nodeCap]uint64
	vals      [nodeCap]uint64
}

func (n *hostNode) count() int    { return int(n.meta & 0xff) }
func (n *hostNode) level() int    { return int(n.meta>>8) & 0xff }
func (n *hostNode) latched() bool { return n.meta&latchBit != 0 }

func makeMeta(count, level int) uint32 { return uint32(count) | uint32(level)<<8 }

func (l layout) slot(b []byte) uint64 {
	if l.wide {
		return binary.LittleEndian.Uint64(b)
	}
	return uint64(binary.LittleEndian.Uint32(b))
}

func (l layout) putSlot(b []byte, v uint64) {
	if l.wide {
		binary.LittleEndian.PutUint64(b, v)
	} else {
		binary.LittleEndian.PutUint32(b, uint32(v))
	}
}

func (l layout) decode(b []byte) hostNode {
	var n hostNode
	n.meta = binary.LittleEndian.Uint32(b[0:])
	n.link = binary.LittleEndian.Uint32(b[4:])
	if l.wide {
		n.low = binary.LittleEndian.Uint64(b[8:])
		n.high = binary.LittleEndian.Uint64(b[16:])
	} else {
		n.low = uint64(binary.LittleEndian.Uint32(b[8:]))
		n.high = uint64(binary.LittleEndian.Uint32(b[12:]))
	}
	for j := 0; j < nodeCap; j++ {
		o := l.pairBase + 2*j*l.slotBytes
		n.keys[j] = l.slot(b[o:])
		n.vals[j] = l.slot(b[o+l.slotBytes:])
	}
	return n
}

func (l layout) encode(b []byte, n *hostNode) {
	clear(b[:l.nodeBytes])
	binary.LittleEndian.PutUint32(b[0:], n.meta)
	binary.LittleEndian.PutUint32(b[4:], n.link)
	if l.wide {
		binary.LittleEndian.PutUint64(b[8:], n.low)
		binary.LittleEndian.PutUint64(b[16:], n.high)
	} else {
		binary.LittleEndian.PutUint32(b[8:], uint32(n.low))
		binary.LittleEndian.PutUint32(b[12:], uint32(n.high))
	}
	for j := 0; j < nodeCap; j++ {
		o := l.pairBase + 2*j*l.slotBytes
		l.putSlot(b[o:], n.keys[j])
		l.putSlot(b[o+l.slotBytes:], n.vals[j])
	}
}

// buildPlan is the shape of a bulk-built tree of m pairs: per level (leaves
// first) the number of nodes and the index of the first. The top level is the
// root, node 0.
type buildPlan struct {
	m      int
	counts []int // nodes per level
	bases  []int // first node index per level
	spans  []int // pairs covered by one node of the level
	nodes  int   // total nodes used
}

func planBuild(m int) buildPlan {
	p := buildPlan{m: m}
	if m == 0 {
		p.counts, p.bases, p.spans, p.nodes = []int{1}, []int{0}, []int{buildFill}, 1
		return p
	}
	n, span := (m+buildFill-1)/buildFill, buildFill
	for {
		p.counts = append(p.counts, n)
		p.spans = append(p.spans, span)
		if n == 1 {
			break
		}
		n, span = (n+buildFan-1)/buildFan, span*buildFan
	}
	next := 1
	p.bases = make([]int, len(p.counts))
	for l := range p.counts {
		if l == len(p.counts)-1 {
			p.bases[l] = 0
			continue
		}
		p.bases[l] = next
		next += p.counts[l]
	}
	p.nodes = next
	return p
}

// checkTree verifies the structural invariants of a quiescent tree held in
// pool (the first used nodes, node 0 the root) and returns its pairs in key
// order. It checks: no node latched; counts within capacity; keys strictly
// increasing within and across nodes of a level; every key of a node in
// [low, high); side links and high keys consistent (a node's high is its right
// sibling's low, the last node has no link, the first has low 0); every
// internal entry points to the child whose low is the entry's pivot, one level
// down, in order, so that the children of a level's nodes, read left to right,
// are exactly that level's side-link chain (every node reachable from the root,
// none twice).
func checkTree(l layout, pool []byte, used int) (keys, vals []uint64, err error) {
	if used < 1 || len(pool) < used*l.nodeBytes {
		return nil, nil, fmt.Errorf("pool of %d bytes for %d used nodes", len(pool), used)
	}
	get := func(i uint32) (hostNode, error) {
		if int(i) >= used {
			return hostNode{}, fmt.Errorf("node index %d outside the %d used nodes", i, used)
		}
		return l.decode(pool[int(i)*l.nodeBytes:]), nil
	}
	root, _ := get(0)
	if root.link != linkNone || root.low != 0 {
		return nil, nil, fmt.Errorf("root: link %d low %d, want none and 0", root.link, root.low)
	}
	seen := make(map[uint32]bool)
	level := []uint32{0} // nodes of the current level, left to right, per their parents
	for lv := root.level(); ; lv-- {
		// The side-link chain must be exactly the children list.
		var next []uint32
		for i, idx := range level {
			if seen[idx] {
				return nil, nil, fmt.Errorf("node %d reached twice", idx)
			}
			seen[idx] = true
			n, err := get(idx)
			if err != nil {
				return nil, nil, err
			}
			where := fmt.Sprintf("node %d (level %d, #%d)", idx, lv, i)
			if n.latched() {
				return nil, nil, fmt.Errorf("%s is latched", where)
			}
			if n.level() != lv {
				return nil, nil, fmt.Errorf("%s has level %d", where, n.level())
			}
			c := n.count()
			if c > nodeCap || (lv > 0 && c < 1) {
				return nil, nil, fmt.Errorf("%s has count %d", where, c)
			}
			if i == 0 && n.low != 0 {
				return nil, nil, fmt.Errorf("%s is leftmost but has low %d", where, n.low)
			}
			if i+1 < len(level) {
				if n.link != level[i+1] {
					return nil, nil, fmt.Errorf("%s links to %d, want %d", where, n.link, level[i+1])
				}
				r, err := get(n.link)
				if err != nil {
					return nil, nil, err
				}
				if r.low != n.high {
					return nil, nil, fmt.Errorf("%s has high %d but its sibling %d has low %d", where, n.high, n.link, r.low)
				}
				if n.high <= n.low {
					return nil, nil, fmt.Errorf("%s has high %d <= low %d", where, n.high, n.low)
				}
			} else if n.link != linkNone {
				return nil, nil, fmt.Errorf("%s is rightmost but links to %d", where, n.link)
			}
			hasHigh := n.link != linkNone
			for j := 0; j < c; j++ {
				k := n.keys[j]
				if k < n.low || (hasHigh && k >= n.high) {
					return nil, nil, fmt.Errorf("%s: key %d outside [%d, %d)", where, k, n.low, n.high)
				}
				if j > 0 && k <= n.keys[j-1] {
					return nil, nil, fmt.Errorf("%s: keys not increasing at %d", where, j)
				}
			}
			if lv == 0 {
				if len(keys) > 0 && c > 0 && n.keys[0] <= keys[len(keys)-1] {
					return nil, nil, fmt.Errorf("%s: first key %d not above the previous leaf's last %d", where, n.keys[0], keys[len(keys)-1])
				}
				keys = append(keys, n.keys[:c]...)
				vals = append(vals, n.vals[:c]...)
				continue
			}
			if n.keys[0] != n.low {
				return nil, nil, fmt.Errorf("%s: first pivot %d is not its low %d", where, n.keys[0], n.low)
			}
			for j := 0; j < c; j++ {
				ch, err := get(uint32(n.vals[j]))
				if err != nil {
					return nil, nil, fmt.Errorf("%s entry %d: %w", where, j, err)
				}
				if ch.low != n.keys[j] {
					return nil, nil, fmt.Errorf("%s entry %d: pivot %d but child %d has low %d", where, j, n.keys[j], n.vals[j], ch.low)
				}
				next = append(next, uint32(n.vals[j]))
			}
		}
		if lv == 0 {
			break
		}
		level = next
	}
	return keys, vals, nil
}
