package blinknode

import (
	"slices"
	"testing"
)

func TestRounds(t *testing.T) {
	for _, c := range []struct {
		n, nodes int
		want     []int
	}{
		{0, 1, []int{0}},
		{1, 1, []int{1}},
		{RoundFirst - KeysPerNode, 1, []int{RoundFirst - KeysPerNode}},
		{(RoundFirst - KeysPerNode) * 5 / 4, 1, []int{(RoundFirst - KeysPerNode) * 5 / 4}},
		{(RoundFirst-KeysPerNode)*5/4 + 1, 1, []int{RoundFirst - KeysPerNode, (RoundFirst-KeysPerNode)*5/4 + 1}},
		// An empty tree (its root) and 2^20 keys: x8 from 256 keys, the
		// last round 917,512 keys into 131,072 (not 8 into 2^20).
		{1 << 20, 1, []int{248, 2040, 16376, 131064, 1 << 20}},
		{1 << 20, 0, []int{248, 2040, 16376, 131064, 1 << 20}},
		// A tree of about 2^20 keys takes 2^20 more in one round, and up
		// to seven times its keys (a quarter more in a last round).
		{1 << 20, 1 << 17, []int{1 << 20}},
		{7 << 20, 1 << 17, []int{7 << 20}},
		{8 << 20, 1 << 17, []int{8 << 20}},
		{9 << 20, 1 << 17, []int{7 << 20, 9 << 20}},
	} {
		if got := Rounds(c.n, c.nodes); !slices.Equal(got, c.want) {
			t.Errorf("Rounds(%d, %d) = %v, want %v", c.n, c.nodes, got, c.want)
		}
	}
	// Every schedule ends at n, rises strictly, and keeps each round within
	// the growth bound.
	for _, nodes := range []int{0, 1, 3, 100, 1 << 12} {
		for n := 1; n < 1<<24; n = n*3 + 1 {
			ends := Rounds(n, nodes)
			if ends[len(ends)-1] != n {
				t.Fatalf("Rounds(%d, %d) = %v: does not end at n", n, nodes, ends)
			}
			have, prev := max(nodes, 1)*KeysPerNode, 0
			for _, e := range ends {
				if e <= prev {
					t.Fatalf("Rounds(%d, %d) = %v: not rising", n, nodes, ends)
				}
				if limit := max(RoundFirst, RoundGrowth*(have+prev)) - have; e > limit+limit/4 {
					t.Fatalf("Rounds(%d, %d) = %v: round to %d grows the tree past the bound", n, nodes, ends, e)
				}
				prev = e
			}
		}
	}
}
