package btree

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// hostBuild lays out the nodes of a bulk-built tree for sorted, distinct keys,
// byte for byte as the build_level kernel does, into out (plan.nodes nodes).
func hostBuild(l layout, keys, vals []uint64, p buildPlan, out []byte) {
	if p.m == 0 {
		n := hostNode{Meta: makeMeta(0, 0), Link: linkNone}
		l.Encode(out, &n)
		return
	}
	for lv := range p.counts {
		nodes, base, span := p.counts[lv], p.bases[lv], p.spans[lv]
		for j := 0; j < nodes; j++ {
			var n hostNode
			var cnt int
			if lv == 0 {
				cnt = min(buildFill, p.m-j*buildFill)
				for s := 0; s < cnt; s++ {
					n.Keys[s], n.Vals[s] = keys[j*buildFill+s], vals[j*buildFill+s]
				}
			} else {
				children, childSpan, childBase := p.counts[lv-1], p.spans[lv-1], p.bases[lv-1]
				cnt = min(buildFan, children-j*buildFan)
				for s := 0; s < nodeCap; s++ {
					c := j*buildFan + min(s, cnt-1)
					if c > 0 {
						n.Keys[s] = keys[c*childSpan]
					}
					n.Vals[s] = uint64(childBase + c)
				}
			}
			if j > 0 {
				n.Low = keys[j*span]
			}
			n.Link = linkNone
			if j+1 < nodes {
				n.High = keys[(j+1)*span]
				n.Link = uint32(base + j + 1)
			}
			n.Meta = makeMeta(cnt, lv)
			idx := base + j
			l.Encode(out[idx*l.NodeBytes:], &n)
		}
	}
}

// buildHost returns a host-built pool for m sorted distinct random keys.
func buildHost(t *testing.T, l layout, m int, seed uint64) ([]byte, buildPlan, []uint64, []uint64) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	set := map[uint64]bool{}
	keys := make([]uint64, 0, m)
	for len(keys) < m {
		k := r.Uint64()
		if !l.Wide {
			k &= 0xffffffff
		}
		if !set[k] {
			set[k] = true
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	vals := make([]uint64, m)
	for i := range vals {
		vals[i] = keys[i] ^ 0x5555
	}
	p := planBuild(m)
	pool := make([]byte, p.nodes*l.NodeBytes)
	hostBuild(l, keys, vals, p, pool)
	return pool, p, keys, vals
}

func TestPlanBuild(t *testing.T) {
	for _, c := range []struct{ m, nodes, height int }{
		{0, 1, 1}, {1, 1, 1}, {10, 1, 1}, {11, 3, 2}, {120, 13, 2}, {121, 16, 3},
	} {
		p := planBuild(c.m)
		if p.nodes != c.nodes || len(p.counts) != c.height {
			t.Errorf("m=%d: %d nodes, height %d; want %d, %d", c.m, p.nodes, len(p.counts), c.nodes, c.height)
		}
	}
}

func TestCheckAcceptsBuiltTrees(t *testing.T) {
	for _, l := range []layout{layoutFor(4, 4), layoutFor(8, 8), layoutFor(4, 8)} {
		for _, m := range []int{0, 1, 9, 10, 11, 119, 120, 121, 1441, 20000} {
			pool, p, keys, vals := buildHost(t, l, m, uint64(m))
			gk, gv, err := checkTree(l, pool, p.nodes)
			if err != nil {
				t.Fatalf("wide=%v m=%d: %v", l.Wide, m, err)
			}
			if !slices.Equal(gk, keys) || !slices.Equal(gv, vals) {
				t.Fatalf("wide=%v m=%d: pairs differ", l.Wide, m)
			}
		}
	}
}

// TestCheckRejectsCorruption damages a valid tree in each way the checker must
// notice and expects an error naming the damage.
func TestCheckRejectsCorruption(t *testing.T) {
	l := layoutFor(4, 4)
	base, p, _, _ := buildHost(t, l, 3000, 7)
	leaf := p.bases[0] + 5 // a leaf in the middle
	inner := p.bases[1] + 1
	first := p.bases[1] // the leftmost node one level above the leaves
	if len(p.counts) < 3 {
		t.Fatalf("the tree has %d levels; the cases need a root above level 1", len(p.counts))
	}
	cases := []struct {
		name, want string
		damage     func(n map[int]*hostNode)
	}{
		{"latched", "latched", func(n map[int]*hostNode) { n[leaf].Meta |= latchBit }},
		{"unsorted", "not increasing", func(n map[int]*hostNode) { n[leaf].Keys[2], n[leaf].Keys[3] = n[leaf].Keys[3], n[leaf].Keys[2] }},
		{"key above high", "outside", func(n map[int]*hostNode) { n[leaf].Keys[n[leaf].Count()-1] = n[leaf].High }},
		{"wrong high", "sibling", func(n map[int]*hostNode) { n[leaf].High-- }},
		{"broken link", "links to", func(n map[int]*hostNode) { n[leaf].Link++ }},
		{"bad pivot", "pivot", func(n map[int]*hostNode) { n[inner].Keys[1]++ }},
		{"duplicate child", "pivot", func(n map[int]*hostNode) { n[inner].Vals[2] = n[inner].Vals[1] }},
		// The leftmost level-1 node's first entry points back to the root, whose
		// low (0) matches the entry's pivot: only the reachability check notices.
		{"child twice", "node 0 reached twice", func(n map[int]*hostNode) { n[first].Vals[0] = 0 }},
		{"wrong level", "level", func(n map[int]*hostNode) { n[leaf].Meta = makeMeta(n[leaf].Count(), 1) }},
		{"count", "count", func(n map[int]*hostNode) { n[inner].Meta = makeMeta(15, 1) }},
		{"root link", "root", func(n map[int]*hostNode) { n[0].Link = 3 }},
	}
	for _, c := range cases {
		pool := slices.Clone(base)
		nodes := map[int]*hostNode{}
		for _, i := range []int{0, leaf, inner, first} {
			d := l.Decode(pool[i*l.NodeBytes:])
			nodes[i] = &d
		}
		c.damage(nodes)
		for i, n := range nodes {
			l.Encode(pool[i*l.NodeBytes:], n)
		}
		_, _, err := checkTree(l, pool, p.nodes)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

func TestSortUnique(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 2, 1000, 100000} {
		keys := make([]uint64, n)
		vals := make([]uint32, n)
		want := map[uint64]uint32{}
		for i := range keys {
			keys[i] = r.Uint64() >> (r.IntN(4) * 16) % uint64(n+1)
			if i%3 == 0 {
				keys[i] = r.Uint64()
			}
			vals[i] = uint32(i)
			want[keys[i]] = uint32(i) // the last occurrence wins
		}
		sk, sv := sortUnique(keys, vals)
		if len(sk) != len(want) || !slices.IsSorted(sk) {
			t.Fatalf("n=%d: %d keys (sorted %v), want %d", n, len(sk), slices.IsSorted(sk), len(want))
		}
		for i, k := range sk {
			if i > 0 && sk[i-1] == k {
				t.Fatalf("n=%d: duplicate %d", n, k)
			}
			if sv[i] != want[k] {
				t.Fatalf("n=%d: key %d has value %d, want %d", n, k, sv[i], want[k])
			}
		}
	}
}
