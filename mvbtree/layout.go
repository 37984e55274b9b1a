package mvbtree

import (
	"fmt"

	"github.com/warpkit/warpkit/internal/blinknode"
)

// Node layout: internal/devcode/blink.cuh's Lay<S, true>, whose host view is
// internal/blinknode: a node is one SlabAlloc unit of 128 bytes when keys
// and values are both 32-bit (13 pairs) and 256 bytes when either is 64-bit
// (14 pairs).
//
//	128 B: meta u32, link u32, low u32, high u32, 13 pairs of u32, ts u32, prev u32
//	256 B: meta u32, link u32, low u64, high u64, ts u32, prev u32, 14 pairs of u64
//
// (the narrow node's version follows its pairs so that they start at a lane
// boundary: see blink.cuh)
const (
	addrNone  = blinknode.None // no node (a link, a prev): SlabAlloc's null address
	buildFill = 10             // pairs per leaf after a bulk build
	buildFan  = 12             // children per internal node after a bulk build
	maxLevels = 64             // a walk deeper than this is a broken tree
)

// layout and hostNode are the shared host view of blink.cuh's nodes
// (versioned).
type (
	layout   = blinknode.Layout
	hostNode = blinknode.Node
)

func layoutFor(keyBytes, valBytes int) layout { return blinknode.LayoutFor(keyBytes, valBytes, true) }

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
	for steps := 0; n.TS > at; steps++ {
		if n.Prev == addrNone || steps > 1<<20 {
			return n, fmt.Errorf("node %#x has no version at stamp %d (oldest %d)", addr, at, n.TS)
		}
		p := n.Prev
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
	if rn.Link != addrNone || rn.Low != 0 {
		return nil, nil, nil, fmt.Errorf("root: link %#x low %d, want none and 0", rn.Link, rn.Low)
	}
	if rn.Level() >= maxLevels {
		return nil, nil, nil, fmt.Errorf("root has level %d", rn.Level())
	}
	seen := map[uint32]bool{}
	level := []uint32{root}
	for lv := rn.Level(); ; lv-- {
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
			where := fmt.Sprintf("node %#x (level %d, #%d, stamp %d)", a, lv, i, n.TS)
			if n.Level() != lv {
				return nil, nil, nil, fmt.Errorf("%s has level %d", where, n.Level())
			}
			c := n.Count()
			if c > l.Cap || (lv > 0 && c < 1) {
				return nil, nil, nil, fmt.Errorf("%s has count %d", where, c)
			}
			if i == 0 && n.Low != 0 {
				return nil, nil, nil, fmt.Errorf("%s is leftmost but has low %d", where, n.Low)
			}
			if i+1 < len(level) {
				if n.Link != level[i+1] {
					return nil, nil, nil, fmt.Errorf("%s links to %#x, want %#x", where, n.Link, level[i+1])
				}
				r, err := versionAt(get, n.Link, at)
				if err != nil {
					return nil, nil, nil, err
				}
				if r.Low != n.High || n.High <= n.Low {
					return nil, nil, nil, fmt.Errorf("%s has [%d, %d) but its sibling %#x has low %d", where, n.Low, n.High, n.Link, r.Low)
				}
			} else if n.Link != addrNone {
				return nil, nil, nil, fmt.Errorf("%s is rightmost but links to %#x", where, n.Link)
			}
			hasHigh := n.Link != addrNone
			for j := 0; j < c; j++ {
				k := n.Keys[j]
				if k < n.Low || (hasHigh && k >= n.High) {
					return nil, nil, nil, fmt.Errorf("%s: key %d outside [%d, %d)", where, k, n.Low, n.High)
				}
				if j > 0 && k <= n.Keys[j-1] {
					return nil, nil, nil, fmt.Errorf("%s: keys not increasing at %d", where, j)
				}
			}
			if lv == 0 {
				if len(keys) > 0 && c > 0 && n.Keys[0] <= keys[len(keys)-1] {
					return nil, nil, nil, fmt.Errorf("%s: first key %d not above the previous leaf's last %d", where, n.Keys[0], keys[len(keys)-1])
				}
				keys = append(keys, n.Keys[:c]...)
				vals = append(vals, n.Vals[:c]...)
				continue
			}
			if n.Keys[0] != n.Low {
				return nil, nil, nil, fmt.Errorf("%s: first pivot %d is not its low %d", where, n.Keys[0], n.Low)
			}
			for j := 0; j < c; j++ {
				ch, err := versionAt(get, uint32(n.Vals[j]), at)
				if err != nil {
					return nil, nil, nil, fmt.Errorf("%s entry %d: %w", where, j, err)
				}
				if ch.Low != n.Keys[j] {
					return nil, nil, nil, fmt.Errorf("%s entry %d: pivot %d but child %#x has low %d", where, j, n.Keys[j], n.Vals[j], ch.Low)
				}
				next = append(next, uint32(n.Vals[j]))
			}
		}
		if lv == 0 {
			break
		}
		level = next
	}
	return keys, vals, heads, nil
}

// checkIndex verifies a head's version index (mvbtree.cu, "Version
// indexes") against the versions of its chain, newest first (the stamps
// closed when it was built, in its link's high bits, are not checked): the least
// power-of-two stride s at which the capacity holds the chain; entry j the
// stamp and address of version j*s, one entry a position at that stride;
// low the last version and high the stamp of the version before it; at
// least indexMin versions.
func checkIndex(l layout, get nodeSource, ix hostNode, chain []uint32) error {
	s, c := int(ix.Link&indexStrideMask), ix.Count()
	if s < 1 || s&(s-1) != 0 {
		return fmt.Errorf("stride %d", s)
	}
	if len(chain) < indexMin {
		return fmt.Errorf("an index over %d versions (fewer than %d)", len(chain), indexMin)
	}
	if c > l.Cap || c != (len(chain)+s-1)/s || (s > 1 && (len(chain)+s/2-1)/(s/2) <= l.Cap) {
		return fmt.Errorf("%d entries at stride %d over %d versions (capacity %d)", c, s, len(chain), l.Cap)
	}
	stampOf := func(a uint32) (uint32, error) {
		v, err := get(a)
		return v.TS, err
	}
	for j := 0; j < c; j++ {
		a := chain[j*s]
		ts, err := stampOf(a)
		if err != nil {
			return err
		}
		if uint32(ix.Vals[j]) != a || uint32(ix.Keys[j]) != ts || ix.Vals[j] > 0xffffffff || ix.Keys[j] > 0xffffffff {
			return fmt.Errorf("entry %d is (%d, %#x), version %d of the chain is (%d, %#x)", j, ix.Keys[j], ix.Vals[j], j*s, ts, a)
		}
	}
	last := len(chain) - 1
	upper, err := stampOf(chain[last-1])
	if err != nil {
		return err
	}
	if ix.Low != uint64(chain[last]) || ix.High != uint64(upper) {
		return fmt.Errorf("last version (%#x, stamp before it %d), the chain's is (%#x, %d)", ix.Low, ix.High, chain[last], upper)
	}
	return nil
}
