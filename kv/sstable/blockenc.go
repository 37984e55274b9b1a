package sstable

import (
	"bytes"
	"fmt"

	"github.com/warpkit/warpkit/kv/internal/base"
)

// Entry is a point entry (KindSet or KindDelete) for a BlockEncoder.
type Entry struct {
	Key   InternalKey
	Value []byte
}

// BlockEncoder builds and seals the data blocks of a run of a table's point
// entries on the caller's goroutine, as a Writer's Add would from an empty
// block: the same cuts (a block ends after the entry that brings it to
// BlockSize or more), the same bytes, trailers and statistics. A writer of
// a table whose entries are all in memory (a memtable flush) splits them
// into runs, encodes the runs on as many goroutines, and adds their blocks
// to the Writer in order with AddEncodedBlocks; the table then differs from
// one built with Add only where a run's first block begins (Add would have
// gone on filling the block before it).
//
// An encoder's memory is reused: the blocks an Encode returns (their bytes
// and hashes) are valid until its next Encode or Reset. The entries' keys
// and values are referenced, not copied, by First and Last.
type BlockEncoder struct {
	opts   WriterOptions
	bb     BlockBuilder
	chunks [][]byte // the memory of sealed blocks, encChunkBytes or more each
	used   int      // chunks[:used] hold this Encode's blocks
	cur    []byte   // chunks[used-1]'s free room (its length)
	blocks []EncodedBlock
	sealed []SealedBlock
	hashes []uint32
	spans  [][2]int // each block's hashes: hashes[spans[i][0]:spans[i][1]]
}

// encChunkBytes is the size of an encoder's memory chunks.
const encChunkBytes = 256 << 10

// NewBlockEncoder returns an encoder for a table with the given options
// (those of the Writer its blocks go to).
func NewBlockEncoder(opts WriterOptions) *BlockEncoder {
	e := &BlockEncoder{opts: opts.withDefaults()}
	e.bb.w.restartInterval = e.opts.RestartInterval
	return e
}

// Encode encodes entries, which must be in strictly increasing order of
// internal key and follow prev, the table's entry before them (nil for
// the table's first run): prev decides whether the first entry's user key
// is new to the table, and so takes a bloom hash. The blocks' Sealed bytes
// are set and their Raw is nil (RawSize gives its length).
func (e *BlockEncoder) Encode(entries []Entry, prev *InternalKey) ([]EncodedBlock, error) {
	return e.encode(entries, prev, true)
}

// EncodeRaw is Encode without the sealing: the blocks' Raw holds their
// contents (in the encoder's memory, valid as Encode's blocks are) and
// Sealed is nil, for a caller that seals them elsewhere (a
// compaction.BlockSealer) or with SealBlock.
func (e *BlockEncoder) EncodeRaw(entries []Entry, prev *InternalKey) ([]EncodedBlock, error) {
	return e.encode(entries, prev, false)
}

func (e *BlockEncoder) encode(entries []Entry, prev *InternalKey, seal bool) ([]EncodedBlock, error) {
	e.Reset()
	if len(entries) == 0 {
		return nil, nil
	}
	filter := e.opts.BloomBitsPerKey > 0
	var lastUser []byte
	havePrev := prev != nil
	if havePrev {
		lastUser = prev.UserKey
	}
	var b EncodedBlock
	open := false
	hashStart := 0
	finish := func() {
		fin := e.bb.Finish()
		if seal {
			stored := e.alloc(SealBound(e.opts.Compression, len(fin)))
			sb := SealBlock(e.opts.Compression, stored, fin)
			if sb.Type == NoCompression { // stored as it is: fin is the builder's, copy it out
				sb.Stored = append(e.alloc(len(fin)), fin...)
			}
			e.cur = e.cur[len(sb.Stored):] // (sb.Stored is at e.cur's start)
			e.sealed = append(e.sealed, sb)
		} else {
			b.Raw = append(e.alloc(len(fin)), fin...) // (fin is the builder's)
			e.cur = e.cur[len(b.Raw):]
		}
		b.RawSize = len(fin)
		e.blocks = append(e.blocks, b)
		e.spans = append(e.spans, [2]int{hashStart, len(e.hashes)})
		e.bb.Reset()
		open = false
	}
	for i := range entries {
		k, v := entries[i].Key, entries[i].Value
		if kind := k.Kind(); kind != base.KindSet && kind != base.KindDelete {
			return nil, fmt.Errorf("sstable: BlockEncoder given a %v entry", kind)
		}
		if i > 0 || havePrev {
			p := prev
			if i > 0 {
				p = &entries[i-1].Key
			}
			if base.CompareInternal(*p, k) >= 0 {
				return nil, fmt.Errorf("sstable: keys out of order: %v after %v", k, *p)
			}
		}
		if !open {
			b = EncodedBlock{First: k, SmallestSeq: base.SeqNumMax}
			hashStart = len(e.hashes)
			open = true
		}
		e.bb.Add(k, v)
		if filter && (!havePrev || !bytes.Equal(lastUser, k.UserKey)) {
			e.hashes = append(e.hashes, bloomHash(k.UserKey))
		}
		lastUser, havePrev = k.UserKey, true
		s := k.SeqNum()
		b.SmallestSeq, b.LargestSeq = min(b.SmallestSeq, s), max(b.LargestSeq, s)
		b.Last = k
		b.Entries++
		if k.Kind() == base.KindDelete {
			b.Deletions++
		}
		b.RawKeySize += uint64(k.Size())
		b.RawValueSize += uint64(len(v))
		if e.bb.EstimatedSize() >= e.opts.BlockSize {
			finish()
		}
	}
	if open {
		finish()
	}
	for i := range e.blocks {
		if seal {
			e.blocks[i].Sealed = &e.sealed[i]
		}
		if filter {
			s := e.spans[i]
			e.blocks[i].Hashes = e.hashes[s[0]:s[1]:s[1]]
		}
	}
	return e.blocks, nil
}

// Reset forgets the last Encode's blocks (their memory is reused).
func (e *BlockEncoder) Reset() {
	e.bb.Reset()
	e.used, e.cur = 0, nil
	clear(e.blocks)
	e.blocks, e.sealed, e.hashes, e.spans = e.blocks[:0], e.sealed[:0], e.hashes[:0], e.spans[:0]
}

// alloc returns room for n bytes at e.cur's start (length 0, capacity n)
// in the encoder's chunks; the caller takes what it uses off e.cur.
func (e *BlockEncoder) alloc(n int) []byte {
	if len(e.cur) < n {
		if e.used < len(e.chunks) && len(e.chunks[e.used]) >= n {
			e.cur = e.chunks[e.used]
		} else {
			c := make([]byte, max(n, encChunkBytes))
			if e.used < len(e.chunks) {
				e.chunks[e.used] = c // too small for n: replaced
			} else {
				e.chunks = append(e.chunks, c)
			}
			e.cur = c
		}
		e.used++
	}
	return e.cur[:0:n]
}
