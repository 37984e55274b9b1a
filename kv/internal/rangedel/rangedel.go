// Package rangedel fragments range tombstones and answers "which tombstones
// cover this key" for the kv store.
//
// A tombstone [Start, End)#Seq deletes every entry of a user key in
// [Start, End) whose sequence number is below Seq, for reads at snapshots at
// or above Seq. Overlapping tombstones are split into fragments: spans with
// identical bounds whose key ranges do not overlap, each carrying the
// sequence numbers of every tombstone that covers it (newest first). That is
// also how they are stored in SSTables, one entry per (span, seq).
package rangedel

import (
	"bytes"
	"slices"
	"sort"

	"github.com/warpkit/warpkit/kv/internal/base"
)

// Tombstone is one range deletion.
type Tombstone struct {
	Start, End []byte
	Seq        base.SeqNum
}

// Span is a fragment: [Start, End) covered by tombstones with sequence
// numbers Seqs, in descending order without duplicates.
type Span struct {
	Start, End []byte
	Seqs       []base.SeqNum
}

// MaxVisible returns the largest sequence number <= snap, or 0.
func (s *Span) MaxVisible(snap base.SeqNum) base.SeqNum {
	for _, q := range s.Seqs {
		if q <= snap {
			return q
		}
	}
	return 0
}

// Fragment splits tombstones into sorted, non-overlapping spans. Empty
// tombstones (Start >= End) are dropped. The input is not modified; spans
// alias the input's keys.
func Fragment(ts []Tombstone) []Span {
	live := make([]Tombstone, 0, len(ts))
	for _, t := range ts {
		if bytes.Compare(t.Start, t.End) < 0 {
			live = append(live, t)
		}
	}
	if len(live) == 0 {
		return nil
	}
	sort.Slice(live, func(i, j int) bool { return bytes.Compare(live[i].Start, live[j].Start) < 0 })
	bounds := make([][]byte, 0, 2*len(live))
	for _, t := range live {
		bounds = append(bounds, t.Start, t.End)
	}
	slices.SortFunc(bounds, bytes.Compare)
	bounds = slices.CompactFunc(bounds, bytes.Equal)

	var spans []Span
	var active []Tombstone
	next := 0
	for i := 0; i+1 < len(bounds); i++ {
		b, e := bounds[i], bounds[i+1]
		// Drop tombstones that end at or before b; add those starting at b.
		kept := active[:0]
		for _, t := range active {
			if bytes.Compare(t.End, b) > 0 {
				kept = append(kept, t)
			}
		}
		active = kept
		for next < len(live) && bytes.Equal(live[next].Start, b) {
			active = append(active, live[next])
			next++
		}
		if len(active) == 0 {
			continue
		}
		seqs := make([]base.SeqNum, len(active))
		for j, t := range active {
			seqs[j] = t.Seq
		}
		slices.SortFunc(seqs, func(a, b base.SeqNum) int {
			switch {
			case a > b:
				return -1
			case a < b:
				return 1
			}
			return 0
		})
		spans = append(spans, Span{Start: b, End: e, Seqs: slices.Compact(seqs)})
	}
	return spans
}

// Set is an immutable, fragmented set of tombstones.
type Set struct {
	spans []Span
}

// NewSet fragments ts into a Set.
func NewSet(ts []Tombstone) *Set { return &Set{spans: Fragment(ts)} }

// Empty reports whether the set holds no tombstone.
func (s *Set) Empty() bool { return s == nil || len(s.spans) == 0 }

// Spans returns the fragments (do not modify them).
func (s *Set) Spans() []Span {
	if s == nil {
		return nil
	}
	return s.spans
}

// Find returns the span covering key, or nil.
func (s *Set) Find(key []byte) *Span {
	if s == nil {
		return nil
	}
	i := sort.Search(len(s.spans), func(i int) bool { return bytes.Compare(s.spans[i].End, key) > 0 })
	if i < len(s.spans) && bytes.Compare(s.spans[i].Start, key) <= 0 {
		return &s.spans[i]
	}
	return nil
}

// MaxCovering returns the largest sequence number <= snap of a tombstone
// covering key, or 0 if none does. An entry of key with sequence number q is
// deleted at snapshot snap iff q < MaxCovering(key, snap).
func (s *Set) MaxCovering(key []byte, snap base.SeqNum) base.SeqNum {
	if sp := s.Find(key); sp != nil {
		return sp.MaxVisible(snap)
	}
	return 0
}

// Tombstones flattens spans back into tombstones (one per span and seq).
func Tombstones(spans []Span) []Tombstone {
	var ts []Tombstone
	for _, sp := range spans {
		for _, q := range sp.Seqs {
			ts = append(ts, Tombstone{Start: sp.Start, End: sp.End, Seq: q})
		}
	}
	return ts
}

// Truncate returns the parts of spans inside [lo, hi); a nil bound is open.
func Truncate(spans []Span, lo, hi []byte) []Span {
	var out []Span
	for _, sp := range spans {
		s, e := sp.Start, sp.End
		if lo != nil && bytes.Compare(s, lo) < 0 {
			s = lo
		}
		if hi != nil && bytes.Compare(e, hi) > 0 {
			e = hi
		}
		if bytes.Compare(s, e) < 0 {
			out = append(out, Span{Start: s, End: e, Seqs: sp.Seqs})
		}
	}
	return out
}
