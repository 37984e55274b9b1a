package sstable

import (
	"github.com/warpkit/warpkit/kv/internal/base"
)

// includeSpans widens the bounds to cover range-tombstone fragments (in key
// order, none empty): the first fragment's start at its newest sequence
// number, and the last fragment's end as an exclusive sentinel.
func (m *Metadata) includeSpans(spans []Span) {
	if len(spans) == 0 {
		return
	}
	first := spans[0]
	lo := base.MakeInternalKey(first.Start, first.Seqs[0], base.KindRangeDelete)
	if !m.HasPoints || base.CompareInternal(lo, m.Smallest) < 0 {
		m.Smallest = lo.Clone()
	}
	hi := base.MakeSentinel(spans[len(spans)-1].End)
	if !m.HasPoints || base.CompareInternal(hi, m.Largest) > 0 {
		m.Largest = hi.Clone()
	}
}

// ReadMetadata reads a whole table, verifying every block's checksum and the
// order of its keys, and returns the metadata its Writer returned when it
// was written: what a store needs to list a table it has no record of (a
// repair). A damaged table gives a *base.CorruptionError.
func ReadMetadata(r *Reader) (Metadata, error) {
	if err := r.ValidateChecksums(); err != nil {
		return Metadata{}, err
	}
	m := Metadata{Size: r.Size(), SmallestSeq: base.SeqNumMax, Properties: *r.Properties()}
	it := r.NewCompactionIter()
	defer it.Close()
	var last base.InternalKey
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if m.HasPoints && base.CompareInternal(last, k) >= 0 {
			return Metadata{}, base.Corruptf("", -1, "keys out of order: %v then %v", last, k)
		}
		if !m.HasPoints {
			m.Smallest = k.Clone()
			m.HasPoints = true
		}
		last = k.Clone()
		m.SmallestSeq = min(m.SmallestSeq, k.SeqNum())
		m.LargestSeq = max(m.LargestSeq, k.SeqNum())
	}
	if err := it.Error(); err != nil {
		return Metadata{}, err
	}
	if m.HasPoints {
		m.Largest = last
	}
	spans := r.RangeDels().Spans()
	for _, sp := range spans {
		if len(sp.Seqs) == 0 {
			return Metadata{}, base.Corruptf("", -1, "range tombstone [%q, %q) without sequence numbers", sp.Start, sp.End)
		}
		for _, s := range sp.Seqs {
			m.SmallestSeq = min(m.SmallestSeq, s)
			m.LargestSeq = max(m.LargestSeq, s)
		}
	}
	m.HasRangeDels = len(spans) > 0
	m.includeSpans(spans)
	if !m.HasPoints && !m.HasRangeDels {
		return Metadata{}, base.Corruptf("", -1, "empty table")
	}
	if uint64(m.SmallestSeq) != m.Properties.SmallestSeq || uint64(m.LargestSeq) != m.Properties.LargestSeq {
		return Metadata{}, base.Corruptf("", -1, "sequence numbers [%d, %d], but the properties say [%d, %d]",
			m.SmallestSeq, m.LargestSeq, m.Properties.SmallestSeq, m.Properties.LargestSeq)
	}
	return m, nil
}
