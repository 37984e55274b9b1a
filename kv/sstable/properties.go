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
	// RawDataSize is the data blocks' size before compression, trailers
	// included: the sum over data blocks of the uncompressed block length
	// plus 5. It equals DataSize when no block is compressed. A table
	// written before the property existed reads with RawDataSize =
	// DataSize (ratio 1).
	RawDataSize      uint64
	IndexSize        uint64
	FilterSize       uint64
	NumDataBlocks    uint64
	SmallestSeq      uint64
	LargestSeq       uint64
	FilterBitsPerKey uint64 // 0: no filter
	Compression      string
	Creator          string
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
	{name: propRawDataSize, num: func(p *Properties) *uint64 { return &p.RawDataSize }},
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

// encode writes the properties; omitRaw leaves RawDataSize out (tests of
// tables from before it existed).
func (p *Properties) encode(w *blockWriter, omitRaw bool) {
	var num []byte
	for _, f := range propFields {
		if omitRaw && f.name == propRawDataSize {
			continue
		}
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
	haveRaw := false
	for ok := it.first(); ok; ok = it.next() {
		f, known := byName[string(it.key)]
		if !known {
			continue // written by a newer version; ignore
		}
		if f.name == propRawDataSize {
			haveRaw = true
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
	if it.err == nil && !haveRaw {
		// A table from before the property: take its data as stored
		// uncompressed (ratio 1).
		p.RawDataSize = p.DataSize
	}
	return it.err
}

// propRawDataSize names the RawDataSize property.
const propRawDataSize = "data.raw-size"

// CompressionRatio is RawDataSize / DataSize: how many bytes of block
// contents (trailers included) each stored byte of the data blocks holds; 1
// for a table without data blocks.
func (p *Properties) CompressionRatio() float64 {
	if p.DataSize == 0 || p.RawDataSize == 0 {
		return 1
	}
	return float64(p.RawDataSize) / float64(p.DataSize)
}
