package compaction

import (
	"bytes"
	"sort"

	"github.com/warpkit/warpkit/kv/manifest"
)

// Cutter is the rule that ends every compactor's outputs (see "What a
// compactor must do"). A compactor asks Cut at each new user key while an
// output is open, with the output's size so far, and ends the output before
// that key when it says so. The rule, with L the job's cut limit (CutLimit):
//
//   - Extended to the key, the output would overlap more than
//     MaxGrandparentOverlap bytes of the grandparents (LevelDB's rule).
//   - Below L/2 nothing else ends an output.
//   - At 2L the output ends.
//   - At the first key at or past a grandparent's smallest key (a grandparent
//     boundary) the output ends once its size has reached 50% of L plus 5%
//     for each earlier boundary it has passed, at most 90% (RocksDB's and
//     Pebble's rule): outputs then end where the grandparents begin, so that
//     compacting one into the level below later rewrites only the
//     grandparents it covers, not the two it would otherwise half overlap.
//   - At L, when no grandparent boundary is left before the part's upper
//     bound, the output ends.
//
// Both conditions are monotone in the key, and Quiet says where a stretch
// of keys can neither move the rule's state nor end an output below L: a
// bulk compactor binary-searches for the next key that is not quiet
// instead of asking at every key.
type Cutter struct {
	gp         []*manifest.FileMetadata
	limit      uint64
	maxOverlap uint64
	index      int    // the next grandparent the overlap rule counts
	overlap    uint64 // grandparent bytes the open output has passed
	next       int    // the next grandparent boundary ahead
	end        int    // grandparents from end on start at or past the part's upper bound
	passed     int    // boundaries the open output has passed
}

// NewCutter starts the rule for the part [lo, hi) of job (nil: unbounded)
// whose outputs end at limit bytes.
func NewCutter(job *Job, limit uint64, lo, hi []byte) *Cutter {
	gp := job.Grandparents
	c := &Cutter{gp: gp, limit: limit, maxOverlap: job.MaxGrandparentOverlap, end: len(gp)}
	if hi != nil {
		c.end = sort.Search(len(gp), func(i int) bool { return bytes.Compare(gp[i].Smallest.UserKey, hi) >= 0 })
	}
	if lo != nil {
		c.Start(lo)
	}
	return c
}

// Start says an output begins at user key k: the grandparents k has passed
// and the boundaries at or below it are behind it.
func (c *Cutter) Start(k []byte) {
	for c.index < len(c.gp) && c.passes(k, c.index) {
		c.index++
	}
	for c.next < c.end && bytes.Compare(c.gp[c.next].Smallest.UserKey, k) <= 0 {
		c.next++
	}
	c.overlap, c.passed = 0, 0
}

// Cut reports whether the open output, of size bytes so far, ends before
// user key k (the next new user key, in order). When it does, the next
// output begins at k.
func (c *Cutter) Cut(k []byte, size uint64) bool {
	for c.index < len(c.gp) && c.passes(k, c.index) {
		c.overlap += c.gp[c.index].Size
		c.index++
	}
	crossed := 0
	for c.next < c.end && bytes.Compare(c.gp[c.next].Smallest.UserKey, k) <= 0 {
		c.next++
		crossed++
	}
	c.passed += crossed
	var cut bool
	switch {
	case c.maxOverlap > 0 && c.overlap > c.maxOverlap:
		cut = true
	case size < c.limit/2:
	case size >= 2*c.limit:
		cut = true
	case crossed > 0:
		cut = size >= uint64(50+5*min(c.passed-1, 8))*c.limit/100
	default:
		cut = c.next == c.end && size >= c.limit
	}
	if cut {
		c.overlap, c.passed = 0, 0
	}
	return cut
}

// Quiet reports whether Cut(k, size), asked next, would leave the rule's
// state as it is and could end the output only at size ≥ L: k passes no
// grandparent and meets no boundary. The keys for which it is false are
// the keys from some key on.
func (c *Cutter) Quiet(k []byte) bool {
	if c.index < len(c.gp) && c.passes(k, c.index) {
		return false
	}
	return c.next >= c.end || bytes.Compare(c.gp[c.next].Smallest.UserKey, k) > 0
}

// passes says key k is past grandparent i.
func (c *Cutter) passes(k []byte, i int) bool {
	return c.gp[i].EndsBefore(k)
}
