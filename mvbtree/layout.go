package mvbtree

import (
	"encoding/binary"
	"fmt"
)

// Node layout, mirrored from internal/devcode/blink.cuh (Lay<S, true>): a
// node is one SlabAlloc unit of 128 bytes when keys and values are both
// 32-bit (13 pairs) and 256 bytes when either is 64-bit (14 pairs).
//
//	128 B: meta u32, link u32, low u32, high u32, ts u32, prev u32, 13 pairs of u32
//	256 B: meta u32, link u32, low u64, high u64, ts u32, prev u32, 14 pairs of u64
const (
	addrNone  = 0xffffffff // no node (a link, a prev): SlabAlloc's null address
	latchBit  = 1 << 31    // a head being written; set for good in a version's copy
	buildFill = 10         // pairs per leaf after a bulk build
	buildFan  = 12         // children per internal node after a bulk build
	maxLevels = 64         // a walk deeper than this is a broken tree
)

// layout describes where the fields of a node are for one slot width.
type layout struct {
	wide      bool
	nodeBytes int
	cap       int // pairs per node
	pairBase  int // byte offset of pair 0
	slotBytes int
}

func layoutFor(keyBytes, valBytes int) layout {
	if keyBytes == 8 || valBytes == 8 {
		return layout{wide: true, nodeBytes: 256, cap: 14, pairBase: 32, slotBytes: 8}
	}
	return layout{nodeBytes: 128, cap: 13, pairBase: 24, slotBytes: 4}
}

// hostNode is a decoded node.
type hostNode struct {
	meta, link uint32
	low, high  uint64
	ts, prev   uint32
	keys, vals [14]uint64
}

func (n *hostNode) count() int    { return int(n.meta & 0xff) }
func (n *hostNode) level() int    { return int(n.meta>>8) & 0xff }
func (n *hostNode) latched() bool { return n.meta&latchBit != 0 }

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

// offsets of low, high, ts and prev
func (l layout) fields() (low, high, ts, prev int) {
	if l.wide {
		return 8, 16, 24, 28
	}
	return 8, 12, 16, 20
}

func (l layout) decode(b []byte) hostNode {
	var n hostNode
	lo, hi, ts, prev := l.fields()
	n.meta = binary.LittleEndian.Uint32(b[0:])
	n.link = binary.LittleEndian.Uint32(b[4:])
	n.low = l.slot(b[lo:])
	n.high = l.slot(b[hi:])
	n.ts = binary.LittleEndian.Uint32(b[ts:])
	n.prev = binary.LittleEndian.Uint32(b[prev:])
	for j := 0; j < l.cap; j++ {
		o := l.pairBase + 2*j*l.slotBytes
		n.keys[j] = l.slot(b[o:])
		n.vals[j] = l.slot(b[o+l.slotBytes:])
	}
	return n
}

func (l layout) encode(b []byte, n *hostNode) {
	clear(b[:l.nodeBytes])
	lo, hi, ts, prev := l.fields()
	binary.LittleEndian.PutUint32(b[0:], n.meta)
	binary.LittleEndian.PutUint32(b[4:], n.link)
	l.putSlot(b[lo:], n.low)
	l.putSlot(b[hi:], n.high)
	binary.LittleEndian.PutUint32(b[ts:], n.ts)
	binary.LittleEndian.PutUint32(b[prev:], n.prev)
	for j := 0; j < l.cap; j++ {
		o := l.pairBase + 2*j*l.slotBytes
		l.putSlot(b[o:], n.keys[j])
		l.putSlot(b[o+l.slotBytes:], n.vals[j])
	}
}

// buildPlan is the shape of a bulk-built tree of m pairs: per level (leaves
// first) the number of nodes, the index of the level's first node in the
// build's address array, and the pairs one node of the level covers. The
// last node is the root.
type buildPlan struct {
	m      int
	counts []int
	bases  []int
	spans  []int
	nodes  int
}

func planBuild(m int) buildPlan {
	p := buildPlan{m: m}
	n, span := max((m+buildFill-1)/buildFill, 1), buildFill
	for {
		p.counts = append(p.counts, n)
		p.spans = append(p.spans, span)
		if n == 1 {
			break
		}
		n, span = (n+buildFan-1)/buildFan, span*buildFan
	}
	p.bases = make([]int, len(p.counts))
	for l := range p.counts {
		p.bases[l] = p.nodes
		p.nodes += p.counts[l]
	}
	return p
}

// nodeSource returns the decoded node at a unit address, or an error when
// the address names no allocated unit.
type nodeSource func(addr uint32) (hostNode, error)

// versionAt returns the version of the node headed at addr that stamp at
// sees (at = latest: the head), and the chain's addresses it walked.
func versionAt(get nodeSource, addr, at uint32) (hostNode, error) {
	n, err := get(addr)
	if err != nil {
		return n, err
	}
	for steps := 0; n.ts > at; steps++ {
		if n.prev == addrNone || steps > 1<<20 {
			return n, fmt.Errorf("node %#x has no version at stamp %d (oldest %d)", addr, at, n.ts)
		}
		p := n.prev
		if n, err = get(p); err != nil {
			return n, fmt.Errorf("node %#x's older version: %w", addr, err)
		}
	}
	return n, nil
}

// checkVersion verifies the tree as stamp at sees it (latest: the heads)
// from root, and returns its pairs in key order and the heads it reached:
// counts within capacity; keys strictly increasing within and across the
// nodes of a level and inside [low, high); side links and high keys
// consistent (a node's high is its right sibling's low, the last node has no
// link, the first has low 0); every internal entry names the child whose low
// is the entry's pivot, one level down, in order, so that the children of a
// level, read left to right, are exactly the level's side-link chain.
func checkVersion(l layout, get nodeSource, root, at uint32) (keys, vals []uint64, heads []uint32, err error) {
	rn, err := versionAt(get, root, at)
	if err != nil {
		return nil, nil, nil, err
	}
	if rn.link != addrNone || rn.low != 0 {
		return nil, nil, nil, fmt.Errorf("root: link %#x low %d, want none and 0", rn.link, rn.low)
	}
	if rn.level() >= maxLevels {
		return nil, nil, nil, fmt.Errorf("root has level %d", rn.level())
	}
	seen := map[uint32]bool{}
	level := []uint32{root}
	for lv := rn.level(); ; lv-- {
		var next []uint32
		for i, a := range level {
			if seen[a] {
				return nil, nil, nil, fmt.Errorf("node %#x reached twice", a)
			}
			seen[a] = true
			heads = append(heads, a)
			n, err := versionAt(get, a, at)
			if err != nil {
				return nil, nil, nil, err
			}
			where := fmt.Sprintf("node %#x (level %d, #%d, stamp %d)", a, lv, i, n.ts)
			if n.level() != lv {
				return nil, nil, nil, fmt.Errorf("%s has level %d", where, n.level())
			}
			c := n.count()
			if c > l.cap || (lv > 0 && c < 1) {
				return nil, nil, nil, fmt.Errorf("%s has count %d", where, c)
			}
			if i == 0 && n.low != 0 {
				return nil, nil, nil, fmt.Errorf("%s is leftmost but has low %d", where, n.low)
			}
			if i+1 < len(level) {
				if n.link != level[i+1] {
					return nil, nil, nil, fmt.Errorf("%s links to %#x, want %#x", where, n.link, level[i+1])
				}
				r, err := versionAt(get, n.link, at)
				if err != nil {
					return nil, nil, nil, err
				}
				if r.low != n.high || n.high <= n.low {
					return nil, nil, nil, fmt.Errorf("%s has [%d, %d) but its sibling %#x has low %d", where, n.low, n.high, n.link, r.low)
				}
			} else if n.link != addrNone {
				return nil, nil, nil, fmt.Errorf("%s is rightmost but links to %#x", where, n.link)
			}
			hasHigh := n.link != addrNone
			for j := 0; j < c; j++ {
				k := n.keys[j]
				if k < n.low || (hasHigh && k >= n.high) {
					return nil, nil, nil, fmt.Errorf("%s: key %d outside [%d, %d)", where, k, n.low, n.high)
				}
				if j > 0 && k <= n.keys[j-1] {
					return nil, nil, nil, fmt.Errorf("%s: keys not increasing at %d", where, j)
				}
			}
			if lv == 0 {
				if len(keys) > 0 && c > 0 && n.keys[0] <= keys[len(keys)-1] {
					return nil, nil, nil, fmt.Errorf("%s: first key %d not above the previous leaf's last %d", where, n.keys[0], keys[len(keys)-1])
				}
				keys = append(keys, n.keys[:c]...)
				vals = append(vals, n.vals[:c]...)
				continue
			}
			if n.keys[0] != n.low {
				return nil, nil, nil, fmt.Errorf("%s: first pivot %d is not its low %d", where, n.keys[0], n.low)
			}
			for j := 0; j < c; j++ {
				ch, err := versionAt(get, uint32(n.vals[j]), at)
				if err != nil {
					return nil, nil, nil, fmt.Errorf("%s entry %d: %w", where, j, err)
				}
				if ch.low != n.keys[j] {
					return nil, nil, nil, fmt.Errorf("%s entry %d: pivot %d but child %#x has low %d", where, j, n.keys[j], n.vals[j], ch.low)
				}
				next = append(next, uint32(n.vals[j]))
			}
		}
		if lv == 0 {
			break
		}
		level = next
	}
	return keys, vals, heads, nil
}
