package btree

import (
	"fmt"

	"github.com/warpkit/warpkit/internal/blinknode"
)

// Node layout: blink.cuh's Lay<S, false>, whose host view is
// internal/blinknode. A node is 128 bytes when keys and values are both
// 32-bit and 256 bytes when either is 64-bit; both hold nodeCap pairs.
const (
	nodeCap   = 14             // pairs per node
	splitAt   = 7              // a split keeps [0, 7) and moves [7, 14)
	linkNone  = blinknode.None // no right sibling
	latchBit  = blinknode.LatchBit
	buildFill = 10 // pairs per leaf after a bulk build (room for 4 inserts before a split)
	buildFan  = 12 // children per internal node after a bulk build
)

// layout and hostNode are the shared host view of blink.cuh's nodes
// (unversioned).
type (
	layout   = blinknode.Layout
	hostNode = blinknode.Node
)

func layoutFor(keyBytes, valBytes int) layout { return blinknode.LayoutFor(keyBytes, valBytes, false) }

func makeMeta(count, level int) uint32 { return blinknode.MakeMeta(count, level) }

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
	if used < 1 || len(pool) < used*l.NodeBytes {
		return nil, nil, fmt.Errorf("pool of %d bytes for %d used nodes", len(pool), used)
	}
	get := func(i uint32) (hostNode, error) {
		if int(i) >= used {
			return hostNode{}, fmt.Errorf("node index %d outside the %d used nodes", i, used)
		}
		return l.Decode(pool[int(i)*l.NodeBytes:]), nil
	}
	root, _ := get(0)
	if root.Link != linkNone || root.Low != 0 {
		return nil, nil, fmt.Errorf("root: link %d low %d, want none and 0", root.Link, root.Low)
	}
	seen := make(map[uint32]bool)
	level := []uint32{0} // nodes of the current level, left to right, per their parents
	for lv := root.Level(); ; lv-- {
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
			if n.Latched() {
				return nil, nil, fmt.Errorf("%s is latched", where)
			}
			if n.Level() != lv {
				return nil, nil, fmt.Errorf("%s has level %d", where, n.Level())
			}
			c := n.Count()
			if c > nodeCap || (lv > 0 && c < 1) {
				return nil, nil, fmt.Errorf("%s has count %d", where, c)
			}
			if i == 0 && n.Low != 0 {
				return nil, nil, fmt.Errorf("%s is leftmost but has low %d", where, n.Low)
			}
			if i+1 < len(level) {
				if n.Link != level[i+1] {
					return nil, nil, fmt.Errorf("%s links to %d, want %d", where, n.Link, level[i+1])
				}
				r, err := get(n.Link)
				if err != nil {
					return nil, nil, err
				}
				if r.Low != n.High {
					return nil, nil, fmt.Errorf("%s has high %d but its sibling %d has low %d", where, n.High, n.Link, r.Low)
				}
				if n.High <= n.Low {
					return nil, nil, fmt.Errorf("%s has high %d <= low %d", where, n.High, n.Low)
				}
			} else if n.Link != linkNone {
				return nil, nil, fmt.Errorf("%s is rightmost but links to %d", where, n.Link)
			}
			hasHigh := n.Link != linkNone
			for j := 0; j < c; j++ {
				k := n.Keys[j]
				if k < n.Low || (hasHigh && k >= n.High) {
					return nil, nil, fmt.Errorf("%s: key %d outside [%d, %d)", where, k, n.Low, n.High)
				}
				if j > 0 && k <= n.Keys[j-1] {
					return nil, nil, fmt.Errorf("%s: keys not increasing at %d", where, j)
				}
			}
			if lv == 0 {
				if len(keys) > 0 && c > 0 && n.Keys[0] <= keys[len(keys)-1] {
					return nil, nil, fmt.Errorf("%s: first key %d not above the previous leaf's last %d", where, n.Keys[0], keys[len(keys)-1])
				}
				keys = append(keys, n.Keys[:c]...)
				vals = append(vals, n.Vals[:c]...)
				continue
			}
			if n.Keys[0] != n.Low {
				return nil, nil, fmt.Errorf("%s: first pivot %d is not its low %d", where, n.Keys[0], n.Low)
			}
			for j := 0; j < c; j++ {
				ch, err := get(uint32(n.Vals[j]))
				if err != nil {
					return nil, nil, fmt.Errorf("%s entry %d: %w", where, j, err)
				}
				if ch.Low != n.Keys[j] {
					return nil, nil, fmt.Errorf("%s entry %d: pivot %d but child %d has low %d", where, j, n.Keys[j], n.Vals[j], ch.Low)
				}
				next = append(next, uint32(n.Vals[j]))
			}
		}
		if lv == 0 {
			break
		}
		level = next
	}
	return keys, vals, nil
}
