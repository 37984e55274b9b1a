package sstable

import (
	"encoding/binary"
	"fmt"
)

// Properties describe a table; they are stored in its properties block.
type Properties struct {
	NumEntries        uint64 // point entries (sets and deletes)
	NumDeletions      uint64 // point tombstones
	NumRangeDeletions uint64 // range tombstone entries (fragment × seq)
	RawKeySize        uint64 // sum of encoded internal key lengths
	RawValueSize      uint64 // sum of value lengths
	DataSize          uint64 // bytes of data blocks, trailers included
	IndexSize         uint64
	FilterSize        uint64
	NumDataBlocks     uint64
	SmallestSeq       uint64
	LargestSeq        uint64
	FilterBitsPerKey  uint64 // 0: no filter
	Compression       string
	Creator           string
}

type propField struct {
	name string
	num  func(p *Properties) *uint64
	str  func(p *Properties) *string
}

// propFields are sorted by name, as block keys must be.
var propFields = []propField{
	{name: "compression", str: func(p *Properties) *string { return &p.Compression }},
	{name: "creator", str: func(p *Properties) *string { return &p.Creator }},
	{name: "data.blocks", num: func(p *Properties) *uint64 { return &p.NumDataBlocks }},
	{name: "data.size", num: func(p *Properties) *uint64 { return &p.DataSize }},
	{name: "filter.bits-per-key", num: func(p *Properties) *uint64 { return &p.FilterBitsPerKey }},
	{name: "filter.size", num: func(p *Properties) *uint64 { return &p.FilterSize }},
	{name: "index.size", num: func(p *Properties) *uint64 { return &p.IndexSize }},
	{name: "num.deletions", num: func(p *Properties) *uint64 { return &p.NumDeletions }},
	{name: "num.entries", num: func(p *Properties) *uint64 { return &p.NumEntries }},
	{name: "num.range-deletions", num: func(p *Properties) *uint64 { return &p.NumRangeDeletions }},
	{name: "raw.key.size", num: func(p *Properties) *uint64 { return &p.RawKeySize }},
	{name: "raw.value.size", num: func(p *Properties) *uint64 { return &p.RawValueSize }},
	{name: "seq.largest", num: func(p *Properties) *uint64 { return &p.LargestSeq }},
	{name: "seq.smallest", num: func(p *Properties) *uint64 { return &p.SmallestSeq }},
}

func (p *Properties) encode(w *blockWriter) {
	var num []byte
	for _, f := range propFields {
		if f.num != nil {
			num = binary.AppendUvarint(num[:0], *f.num(p))
			w.add([]byte(f.name), num)
		} else {
			w.add([]byte(f.name), []byte(*f.str(p)))
		}
	}
}

func (p *Properties) decode(it *blockIter) error {
	byName := make(map[string]propField, len(propFields))
	for _, f := range propFields {
		byName[f.name] = f
	}
	for ok := it.first(); ok; ok = it.next() {
		f, known := byName[string(it.key)]
		if !known {
			continue // written by a newer version; ignore
		}
		if f.num != nil {
			v, n := binary.Uvarint(it.val)
			if n != len(it.val) {
				return fmt.Errorf("property %s: bad number", f.name)
			}
			*f.num(p) = v
		} else {
			*f.str(p) = string(it.val)
		}
	}
	return it.err
}
