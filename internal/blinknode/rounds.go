package blinknode

// Insert rounds. A B-link tree takes an insert batch as one kernel launch in
// which every operation descends at once; into a tree much smaller than the
// batch, they queue on the latches of its few leaves, and those leaves split
// one operation at a time (on an H200, a 2^20-key batch into an empty tree
// ran its kernel for 3.5-4.4 ms where the next 2^20 keys took 0.9-1.2 ms).
// Rounds runs such a batch as consecutive launches on one stream, each at
// most RoundGrowth times the keys the tree is estimated to hold before it:
// the tree has grown enough leaves for the next round's operations before
// that round starts. The launches are the same kernel on consecutive parts
// of the batch; the batch's semantics do not change (operations of one
// launch already run in any order, and a later round's operations follow
// the earlier ones, as in the CPU backend's order).

// Schedule constants (measured: docs/benchmarks.md, "insert batches in
// rounds").
const (
	// RoundGrowth bounds the keys of a tree after a round by this many
	// times those before it.
	RoundGrowth = 8
	// RoundFirst is the most keys a round may take from a tree of fewer
	// than RoundFirst / RoundGrowth keys (the first round of an empty tree).
	RoundFirst = 256
	// KeysPerNode estimates a tree's keys from its nodes: leaves are
	// between half and fully filled (7 to 14 pairs) and internal nodes
	// few.
	KeysPerNode = 8
)

// Rounds returns the ends of the rounds an insert batch of n keys runs in,
// in a tree of about nodes nodes: ends[i-1] (0 for i = 0) to ends[i] is
// round i, and the last end is n. A batch that is not large against the
// tree runs in one round ([]int{n}). The last round may take up to a
// quarter more than the bound rather than leave a round of a few keys.
func Rounds(n, nodes int) []int {
	have := max(nodes, 1) * KeysPerNode
	var ends []int
	done := 0
	for done < n {
		limit := max(RoundFirst, RoundGrowth*(have+done)) - have
		if limit+limit/4 >= n {
			break
		}
		ends = append(ends, limit) // limit > done: RoundGrowth > 1
		done = limit
	}
	return append(ends, n)
}
