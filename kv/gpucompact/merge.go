package gpucompact

import (
	"bytes"
	"encoding/binary"
	"sync/atomic"

	"github.com/warpkit/warpkit/internal/hostpar"
)

// setK0 gives every entry its merge key: the 8 bytes of its user key after
// the prefix every key of the job shares (the common prefix of the smallest
// and the largest), big-endian, zero-padded. Comparing K0 first orders all
// entries whose keys differ within those 8 bytes with one integer
// comparison; only K0 ties need the key bytes. It returns the length of
// the common prefix, or errInputOrder when a key does not start with it:
// the runs' first and last keys bound every key only when the runs are
// sorted, and K0 orders correctly only keys that share the prefix.
func (s *inputSet) setK0() (int, error) {
	if len(s.ents) == 0 {
		return 0, nil
	}
	var lo, hi []byte
	for i, r := range s.runs {
		first, last := s.key(uint32(r.start)), s.key(uint32(r.end-1))
		if i == 0 || bytes.Compare(first, lo) < 0 {
			lo = first
		}
		if i == 0 || bytes.Compare(last, hi) > 0 {
			hi = last
		}
	}
	lcp := 0
	for lcp < len(lo) && lcp < len(hi) && lo[lcp] == hi[lcp] {
		lcp++
	}
	prefix := lo[:lcp]
	var stray atomic.Bool
	hostpar.ForWorkers(len(s.ents), 1<<14, s.workers, func(_, lo, hi int) {
		var buf [8]byte
		for i := lo; i < hi; i++ {
			k := s.key(uint32(i))
			if !bytes.HasPrefix(k, prefix) {
				stray.Store(true)
			}
			n := 0
			if lcp < len(k) {
				n = copy(buf[:], k[lcp:])
			}
			clear(buf[n:])
			s.ents[i].k0 = binary.BigEndian.Uint64(buf[:])
		}
	})
	if stray.Load() {
		return 0, errInputOrder
	}
	return lcp, nil
}

// less orders entries as base.CompareInternal orders their internal keys:
// user key ascending (K0 first), then trailer descending.
func (s *inputSet) less(a, b uint32) bool {
	ea, eb := &s.ents[a], &s.ents[b]
	if ea.k0 != eb.k0 {
		return ea.k0 < eb.k0
	}
	if c := bytes.Compare(s.key(a), s.key(b)); c != 0 {
		return c < 0
	}
	return ea.trailer > eb.trailer
}

// merge returns the ids of every entry in internal-key order, merging the
// sorted runs pairwise, ceil(log2 runs) rounds. Each round's pairs are cut
// along merge paths into pieces of about mergePiece outputs, merged on
// goroutines (a GPU does the same with one merge-path launch per round), so
// the last rounds, with one or two large pairs, use every core too. setK0
// must have run. The id arrays come from ws.
func (s *inputSet) merge(ws *workspace) []uint32 {
	n := len(s.ents)
	src := take(&ws.src, n)
	hostpar.ForWorkers(n, 1<<16, s.workers, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			src[i] = uint32(i)
		}
	})
	if len(s.runs) <= 1 {
		return src
	}
	dst := take(&ws.dst, n)
	runs := append([]run(nil), s.runs...)
	type piece struct {
		out, a, b []uint32
	}
	for len(runs) > 1 {
		next := make([]run, 0, (len(runs)+1)/2)
		var pieces []piece
		for i := 0; i < len(runs); i += 2 {
			if i+1 == len(runs) {
				r := runs[i]
				pieces = append(pieces, piece{dst[r.start:r.end], src[r.start:r.end], nil})
				next = append(next, r)
				continue
			}
			ra, rb := runs[i], runs[i+1]
			// Runs stay adjacent: a pair's output takes both ranges.
			next = append(next, run{ra.start, rb.end})
			a, b, out := src[ra.start:ra.end], src[rb.start:rb.end], dst[ra.start:rb.end]
			k := max(1, (len(out)+mergePiece-1)/mergePiece)
			prevD, prevI := 0, 0
			for p := 1; p <= k; p++ {
				d := len(out) * p / k
				i := s.coRank(d, a, b)
				pieces = append(pieces, piece{out[prevD:d], a[prevI:i], b[prevD-prevI : d-i]})
				prevD, prevI = d, i
			}
		}
		hostpar.ForWorkers(len(pieces), 1, s.workers, func(_, lo, hi int) {
			for _, p := range pieces[lo:hi] {
				s.mergePair(p.out, p.a, p.b)
			}
		})
		src, dst, runs = dst, src, next
	}
	return src
}

// mergePiece is about how many outputs one piece of a merge round holds
// (tests make it small, to cut pairs into many pieces).
var mergePiece = 1 << 16

// coRank returns how many of the first d outputs of merging a and b come
// from a (ties: a first), by binary search along the merge path.
func (s *inputSet) coRank(d int, a, b []uint32) int {
	lo, hi := max(0, d-len(b)), min(d, len(a))
	for lo < hi {
		i := (lo + hi) / 2
		if j := d - i; j > 0 && !s.less(b[j-1], a[i]) {
			lo = i + 1 // a[i] goes before b[j-1]: more of a
		} else {
			hi = i
		}
	}
	return lo
}

// mergePair merges two sorted id lists into out. On a tie (never between
// distinct entries of one job: sequence numbers are unique) a's entry goes
// first.
func (s *inputSet) mergePair(out, a, b []uint32) {
	i, j, k := 0, 0, 0
	for i < len(a) && j < len(b) {
		if s.less(b[j], a[i]) {
			out[k] = b[j]
			j++
		} else {
			out[k] = a[i]
			i++
		}
		k++
	}
	k += copy(out[k:], a[i:])
	copy(out[k:], b[j:])
}
