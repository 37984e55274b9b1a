package gpucompact

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/warpkit/warpkit/internal/hostpar"
	"github.com/warpkit/warpkit/kv/compaction"
	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/internal/rangedel"
	"github.com/warpkit/warpkit/kv/sstable"
)

// plannedTable is one output table of the plan: the kept entries
// kept[start:end], cut into data blocks ending (exclusive) at blockEnds, and
// the user-key bounds [lower, upper) of its share of the range tombstones
// (nil: open).
type plannedTable struct {
	start, end   int
	blockEnds    []int
	blockSizes   []int // each block's contents, restart array included
	lower, upper []byte
	// Where each block goes in the workspace's output arrays: its contents
	// and its compressed copy (layoutOutputs).
	rawAt, sealedAt []int
}

// layoutOutputs gives every planned block its place in the workspace's
// output arrays — its contents, and room to compress it — and returns the
// arrays' lengths.
func layoutOutputs(tables []plannedTable, c sstable.Compression) (rawLen, sealedLen int) {
	for i := range tables {
		t := &tables[i]
		t.rawAt, t.sealedAt = make([]int, len(t.blockSizes)), make([]int, len(t.blockSizes))
		for bi, n := range t.blockSizes {
			t.rawAt[bi], t.sealedAt[bi] = rawLen, sealedLen
			rawLen += n
			sealedLen += sstable.SealBound(c, n)
		}
	}
	return rawLen, sealedLen
}

// planEntry is what the plan walk needs of a kept entry, laid out in
// merged order so that the walk reads memory in order: the bytes the entry
// adds to a block at a restart point (its whole encoded internal key: user
// key, then the 8-byte trailer) and off one (only the suffix past the
// prefix it shares with the previous kept entry's key), headers included.
type planEntry struct {
	atRestart, offRestart uint32
}

// planEntries computes every kept entry's planEntry independently, on
// goroutines (a GPU thread per entry), in an array of ws.
func (s *inputSet) planEntries(kept []uint32, ws *workspace) []planEntry {
	pe := take(&ws.plan, len(kept))
	hostpar.ForCores(len(kept), 1024, func(_, lo, hi int) {
		for j := lo; j < hi; j++ {
			e := &s.ents[kept[j]]
			klen, vlen := int(e.keyLen)+8, int(e.valLen)
			tail := uvarintLen(vlen) + vlen
			at := uvarintLen(0) + uvarintLen(klen) + klen + tail
			off := at
			if j > 0 {
				shared := s.encodedLCP(kept[j-1], kept[j])
				off = uvarintLen(shared) + uvarintLen(klen-shared) + klen - shared + tail
			}
			pe[j] = planEntry{atRestart: uint32(at), offRestart: uint32(off)}
		}
	})
	return pe
}

// plan replays, in one walk over the kept entries, the rules by which
// compaction.CPU (one part) and sstable.Writer cut: a data block ends after
// the entry that brings the block builder's size (entries, 4 bytes per
// restart point, 4) to BlockSize; an output ends before a new user key once
// its uncompressed size (sstable.Writer.RawSize) has reached cutLimit, or
// when compaction.GrandparentLimit says so (asked only when no size cut is
// due, exactly where compaction.CPU asks); a job whose entries all went
// but whose range tombstones remain writes one tombstone-only table.
// keptNew says which kept entries start a new user key in the merged order.
func (s *inputSet) plan(pe []planEntry, kept []uint32, keptNew []bool, job *compaction.Job, opts sstable.WriterOptions, cutLimit uint64, outSpans []rangedel.Span) []plannedTable {
	gp := compaction.NewGrandparentLimit(job, nil)
	// Without grandparents to cut at, the walk never needs a key but where
	// it cuts.
	askGP := len(job.Grandparents) > 0 && job.MaxGrandparentOverlap > 0
	var tables []plannedTable
	var cur *plannedTable
	var lower []byte
	splitPending := false
	// The open block: its size as the builder counts it (entries, 4 bytes
	// per restart point, 4), entries since the last restart, entries;
	// rawData: the finished blocks' sizes with their trailers. The loop is
	// the job's one sequential pass, so it keeps to adds and compares.
	var size, since, count int
	var rawData uint64
	blockSize, restartInterval := opts.BlockSize, opts.RestartInterval
	for j := range pe {
		if (splitPending || askGP) && keptNew[j] && cur != nil && (splitPending || gp.Reached(s.key(kept[j]))) {
			if count > 0 {
				cur.blockEnds = append(cur.blockEnds, j)
				cur.blockSizes = append(cur.blockSizes, size)
			}
			uk := s.key(kept[j])
			cur.end, cur.upper = j, uk
			tables = append(tables, *cur)
			cur, lower, splitPending = nil, uk, false
		}
		if cur == nil {
			cur = &plannedTable{start: j, lower: lower}
			count, rawData = 0, 0
		}
		switch {
		case count == 0: // the block's first restart point, and the restart count
			size, since = 8+int(pe[j].atRestart), 0
		case since == restartInterval:
			size, since = size+4+int(pe[j].atRestart), 0
		default:
			size += int(pe[j].offRestart)
		}
		since++
		count++
		if size >= blockSize {
			cur.blockEnds = append(cur.blockEnds, j+1)
			cur.blockSizes = append(cur.blockSizes, size)
			rawData += uint64(size + sstable.BlockTrailerLen)
			count = 0
			splitPending = splitPending || rawData+4 >= cutLimit // an empty block counts 4
		} else if rawData+uint64(size) >= cutLimit {
			splitPending = true
		}
	}
	if cur == nil && len(rangedel.Truncate(outSpans, lower, nil)) > 0 {
		cur = &plannedTable{start: len(kept), lower: lower}
	}
	if cur != nil {
		if count > 0 {
			cur.blockEnds = append(cur.blockEnds, len(kept))
			cur.blockSizes = append(cur.blockSizes, size)
		}
		cur.end = len(kept)
		tables = append(tables, *cur)
	}
	return tables
}

// encodedLCP is the length of the common prefix of two entries' encoded
// internal keys (user key, then the trailer, 8 bytes little-endian).
func (s *inputSet) encodedLCP(a, b uint32) int {
	ka, kb := s.key(a), s.key(b)
	var ta, tb [8]byte
	binary.LittleEndian.PutUint64(ta[:], uint64(s.ents[a].trailer))
	binary.LittleEndian.PutUint64(tb[:], uint64(s.ents[b].trailer))
	at := func(k []byte, t *[8]byte, p int) byte {
		if p < len(k) {
			return k[p]
		}
		return t[p-len(k)]
	}
	n, la, lb := 0, len(ka)+8, len(kb)+8
	for n < la && n < lb && at(ka, &ta, n) == at(kb, &tb, n) {
		n++
	}
	return n
}

func uvarintLen(v int) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// encodeBlock builds block bi of a planned table with bb
// (sstable.BlockBuilder: the Writer's own block code) into its place in
// raw, seals it into its place in sealed (its checksum, and compressed when
// the table is), puts its bloom hashes in hashes (one slot per kept entry),
// and checks it ends where the Writer would end it and is as long as
// planned: the plan and the builder must agree. Blocks are independent: a
// GPU thread block (here a goroutine) builds each.
func (s *inputSet) encodeBlock(bb *sstable.BlockBuilder, t *plannedTable, bi int, kept []uint32, opts sstable.WriterOptions, raw, sealed []byte, hashes []uint32) (sstable.EncodedBlock, error) {
	start := t.start
	if bi > 0 {
		start = t.blockEnds[bi-1]
	}
	end := t.blockEnds[bi]
	b := sstable.EncodedBlock{SmallestSeq: base.SeqNumMax, Hashes: hashes[start:start:end]}
	bb.Reset()
	for j := start; j < end; j++ {
		if j > start && bb.EstimatedSize() >= opts.BlockSize {
			return b, fmt.Errorf("gpucompact: plan and block builder disagree: block %d of a table full before entry %d", bi, j)
		}
		id := kept[j]
		k := s.internalKey(id)
		bb.Add(k, s.value(id))
		if j == start {
			b.First = k
		}
		b.Entries++
		if k.Kind() == base.KindDelete {
			b.Deletions++
		}
		b.RawKeySize += uint64(k.Size())
		b.RawValueSize += uint64(s.ents[id].valLen)
		b.SmallestSeq = min(b.SmallestSeq, k.SeqNum())
		b.LargestSeq = max(b.LargestSeq, k.SeqNum())
		if opts.BloomBitsPerKey > 0 && (j == t.start || !bytes.Equal(s.key(kept[j-1]), k.UserKey)) {
			b.Hashes = append(b.Hashes, sstable.BloomHash(k.UserKey))
		}
	}
	if bi < len(t.blockEnds)-1 && bb.EstimatedSize() < opts.BlockSize {
		return b, fmt.Errorf("gpucompact: plan and block builder disagree: block %d of a table ends short (%d of %d bytes)", bi, bb.EstimatedSize(), opts.BlockSize)
	}
	b.Last = s.internalKey(kept[end-1])
	finished := bb.Finish()
	if len(finished) != t.blockSizes[bi] {
		return b, fmt.Errorf("gpucompact: plan and block builder disagree: block %d of a table is %d bytes, planned %d", bi, len(finished), t.blockSizes[bi])
	}
	at := t.rawAt[bi]
	b.Raw = raw[at : at+len(finished) : at+len(finished)]
	copy(b.Raw, finished)
	// Sealed here, while the block is in this core's cache.
	z := t.sealedAt[bi]
	sb := sstable.SealBlock(opts.Compression, sealed[z:z:z+sstable.SealBound(opts.Compression, len(b.Raw))], b.Raw)
	b.Sealed = &sb
	return b, nil
}
