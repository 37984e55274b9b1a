package gpucompact

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync/atomic"

	"github.com/warpkit/warpkit/internal/hostpar"
	"github.com/warpkit/warpkit/kv/compaction"
	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/internal/rangedel"
	"github.com/warpkit/warpkit/kv/record"
	"github.com/warpkit/warpkit/kv/sstable"
)

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
//
// It also returns a bound on the output blocks' contents: every block is at
// most 4 bytes plus, per entry, its size at a restart point and 4.
func (s *inputSet) planEntries(kept []uint32, ws *workspace) ([]planEntry, int) {
	pe := take(&ws.plan, len(kept))
	var bound atomic.Int64
	hostpar.ForWorkers(len(kept), 1024, s.workers, func(_, lo, hi int) {
		sum := 0
		defer func() { bound.Add(int64(sum)) }()
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
			sum += at + 8
		}
	})
	return pe, int(bound.Load())
}

// blockJumps is, for every kept entry j, the block that would start there
// (gpucompact.cu's block_ends): kept entries [j, end[j]) of size[j] bytes.
type blockJumps struct{ end, size []uint32 }

// planSink takes the plan as the walk makes it, in key order.
type planSink interface {
	// table starts an output table at kept entry j; lower bounds its share
	// of the range tombstones (nil: open). An error stops the walk.
	table(j int, lower []byte) error
	// block ends a data block of the open table: kept[start:end], of size
	// bytes of contents; full says it ended for reaching the block size
	// (not at a cut or at the end of the job).
	block(start, end, size int, full bool)
	// end ends the open table before kept entry j; upper bounds its share
	// of the range tombstones (nil: open).
	end(j int, upper []byte)
}

// plan replays, in one walk over the kept entries, the rules by which
// compaction.CPU (one part) and sstable.Writer cut: a data block ends after
// the entry that brings the block builder's size (entries, 4 bytes per
// restart point, 4) to BlockSize; an output ends before a new user key when
// compaction.Cutter says so, given the output's uncompressed size
// (sstable.Writer.RawSize: the finished blocks with their trailers and the
// open block, 4 bytes when empty); a job whose entries all went but whose
// range tombstones remain writes one tombstone-only table. keptNew says
// which kept entries start a new user key in the merged order. The tables
// and blocks go to sink as they are made.
//
// The cut rule is asked only where it can matter: at a key where it is not
// quiet (compaction.Cutter.Quiet: the next such key found by binary search)
// or once the output has reached the cut limit (at a quiet key nothing
// below it ends an output). With jumps (the CUDA
// engine: the block that would start at each kept entry, from the device),
// the walk steps over a whole block wherever nothing can cut inside it — the
// table below the cut limit with the block and no key in it that is not
// quiet — and entry by entry elsewhere; the cuts and blocks are the same.
//
// w is the stretch of the kept entries walked: the whole job, or a
// partition's (walk).
func (s *inputSet) plan(pe []planEntry, kept []uint32, keptNew []bool, jumps *blockJumps, job *compaction.Job, opts sstable.WriterOptions, cutLimit uint64, outSpans []rangedel.Span, sink planSink, w walk) error {
	cut := compaction.NewCutter(job, cutLimit, nil, nil)
	// ev is the first new-key kept entry at or after the entry it was found
	// from at which the cut rule is not quiet (w.to: none before it); -1
	// when the rule's state has moved since.
	ev := -1
	event := func(j int) int {
		if ev >= j {
			return ev
		}
		lo, hi := j, w.to
		for lo < hi {
			mid := int(uint(lo+hi) >> 1)
			if !cut.Quiet(s.key(kept[mid])) {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		for lo < w.to && !keptNew[lo] {
			lo++
		}
		ev = lo
		return ev
	}
	open := false
	var lower []byte
	if !w.first && w.from < w.to {
		// The table that starts here started at a cut: its range
		// tombstones are bounded below by its first key.
		lower = s.key(kept[w.from])
	}
	// The open block: where it starts, its size as the builder counts it
	// (entries, 4 bytes per restart point, 4), entries since the last
	// restart, entries; rawData: the open table's finished blocks' sizes
	// with their trailers. The loop is the job's one sequential pass, so it
	// keeps to adds and compares.
	var blockStart, size, since, count int
	var rawData uint64
	blockSize, restartInterval := opts.BlockSize, opts.RestartInterval
	for j := w.from; j < w.to; j++ {
		if keptNew[j] && open {
			raw := rawData + 4 // an empty block counts 4
			if count > 0 {
				raw = rawData + uint64(size)
			}
			if at := event(j) == j; at || raw >= cutLimit {
				uk := s.key(kept[j])
				if cut.Cut(uk, raw) {
					if count > 0 {
						sink.block(blockStart, j, size, false)
					}
					sink.end(j, uk)
					open, lower = false, uk
				}
				if at {
					ev = -1 // the rule moved on
				}
			}
		}
		if !open {
			if j == w.stopAt {
				return nil // the partition's last table ended here
			}
			if err := sink.table(j, lower); err != nil {
				return err
			}
			cut.Start(s.key(kept[j]))
			ev = -1
			open, count, rawData = true, 0, 0
		}
		if jumps != nil && count == 0 {
			end, size := int(jumps.end[j]), int(jumps.size[j])
			if size >= blockSize && rawData+uint64(size) < cutLimit && (j+1 >= end || event(j+1) >= end) {
				// The whole block: as the entries below would end it.
				sink.block(j, end, size, true)
				rawData += uint64(size + sstable.BlockTrailerLen)
				j = end - 1
				continue
			}
		}
		switch {
		case count == 0: // the block's first restart point, and the restart count
			size, since, blockStart = 8+int(pe[j].atRestart), 0, j
		case since == restartInterval:
			size, since = size+4+int(pe[j].atRestart), 0
		default:
			size += int(pe[j].offRestart)
		}
		since++
		count++
		if size >= blockSize {
			sink.block(blockStart, j+1, size, true)
			rawData += uint64(size + sstable.BlockTrailerLen)
			count = 0
		}
	}
	if !w.last {
		return nil // (a dry walk's end: the partition's last table may go on)
	}
	if !open && len(rangedel.Truncate(outSpans, lower, nil)) > 0 {
		if err := sink.table(w.to, lower); err != nil {
			return err
		}
		open, count = true, 0
	}
	if open {
		if count > 0 {
			sink.block(blockStart, w.to, size, false)
		}
		sink.end(w.to, nil)
	}
	return nil
}

// walk is the stretch of a job's kept entries that one plan walk covers:
// kept[from:to], all of them for a job in one piece. A partition's walk
// (partition.go) starts at an output table's first entry (first: the job's
// first table, whose range tombstones have no lower bound) and, unless it
// is the job's last (last), ends at stopAt, before the first entry of a
// table that its dry walk (stopAt -1) saw start: the walk's state there is
// a new table's, whatever came before.
type walk struct {
	from, to, stopAt int
	first, last      bool
}

// wholeJob is the walk over all of a job's n kept entries.
func wholeJob(n int) walk { return walk{from: 0, to: n, stopAt: -1, first: true, last: true} }

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

// encodeBlock builds a planned block with bb (sstable.BlockBuilder: the
// Writer's own block code) into its place in raw, seals it into its place
// in sealed (its checksum, and compressed when the table is; in new memory
// when no place was reserved), puts its bloom hashes in hashes (one slot
// per kept entry), and checks it ends where the Writer would end it and is
// as long as planned: the plan and the builder must agree. Blocks are
// independent: a GPU thread block (here a goroutine) builds each.
func (s *inputSet) encodeBlock(bb *sstable.BlockBuilder, pb *blockJob, kept []uint32, opts sstable.WriterOptions, raw, sealed []byte, hashes []uint32) (sstable.EncodedBlock, error) {
	start, end := pb.start, pb.end
	b := sstable.EncodedBlock{SmallestSeq: base.SeqNumMax, Hashes: hashes[start:start:end]}
	bb.Reset()
	for j := start; j < end; j++ {
		if j > start && bb.EstimatedSize() >= opts.BlockSize {
			return b, fmt.Errorf("gpucompact: plan and block builder disagree: the block at kept entry %d full before entry %d", start, j)
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
		if opts.BloomBitsPerKey > 0 && (j == pb.tableStart || !bytes.Equal(s.key(kept[j-1]), k.UserKey)) {
			b.Hashes = append(b.Hashes, sstable.BloomHash(k.UserKey))
		}
	}
	if pb.full && bb.EstimatedSize() < opts.BlockSize {
		return b, fmt.Errorf("gpucompact: plan and block builder disagree: the block at kept entry %d ends short (%d of %d bytes)", start, bb.EstimatedSize(), opts.BlockSize)
	}
	b.Last = s.internalKey(kept[end-1])
	finished := bb.Finish()
	if len(finished) != pb.size || pb.rawAt+pb.size > len(raw) {
		return b, fmt.Errorf("gpucompact: plan and block builder disagree: the block at kept entry %d is %d bytes, planned %d at %d of %d", start, len(finished), pb.size, pb.rawAt, len(raw))
	}
	b.Raw = raw[pb.rawAt : pb.rawAt+len(finished) : pb.rawAt+len(finished)]
	copy(b.Raw, finished)
	// Sealed here, while the block is in this core's cache.
	b.Sealed = seal(pb, opts, b.Raw, sealed)
	return b, nil
}

// seal seals a planned block's contents into its place in sealed (its
// checksum, and compressed when the table is; in new memory when no place
// was reserved).
func seal(pb *blockJob, opts sstable.WriterOptions, raw, sealed []byte) *sstable.SealedBlock {
	var dst []byte
	if pb.sealedAt >= 0 {
		dst = sealed[pb.sealedAt : pb.sealedAt : pb.sealedAt+sstable.SealBound(opts.Compression, len(raw))]
	}
	sb := sstable.SealBlock(opts.Compression, dst, raw)
	return &sb
}

// sealDeviceBlock is encodeBlock for a block the device encoded (the CUDA
// engine): its bytes are in raw, its stats in the slot; it seals it. It
// carries no bloom hashes: the device builds each table's filter
// (pipeline.buildFilters).
func (s *inputSet) sealDeviceBlock(sl *blockSlot, kept []uint32, opts sstable.WriterOptions, raw, sealed []byte) (sstable.EncodedBlock, error) {
	pb, st := &sl.job, &sl.dstats
	if st.status != 0 {
		return sstable.EncodedBlock{}, fmt.Errorf("gpucompact: device encode and plan disagree: the block at kept entry %d (status %d)", pb.start, st.status)
	}
	b := sstable.EncodedBlock{
		Raw:          raw[pb.rawAt : pb.rawAt+pb.size : pb.rawAt+pb.size],
		First:        s.internalKey(kept[pb.start]),
		Last:         s.internalKey(kept[pb.end-1]),
		Entries:      uint64(pb.end - pb.start),
		Deletions:    uint64(st.deletions),
		RawKeySize:   st.rawKeySize,
		RawValueSize: st.rawValueSize,
		SmallestSeq:  base.SeqNum(st.minSeq),
		LargestSeq:   base.SeqNum(st.maxSeq),
	}
	switch {
	case opts.Compression == sstable.NoCompression:
		// Stored as it is, with the checksum the device computed
		// (encode_blocks).
		b.Sealed = &sstable.SealedBlock{Stored: b.Raw, Type: sstable.NoCompression, CRC: record.MaskCRC(st.crc)}
	case st.stored > 0:
		// Sealed on the device (encode_seal_blocks) into its place in sealed:
		// compressed, or stored as it is when that saved too little. Its
		// contents may not have come back (noRaw): the Writer takes the
		// sealed bytes and the contents' size.
		typ := sstable.Compression(st.typ)
		if typ != sstable.NoCompression && typ != opts.Compression || pb.sealedAt < 0 || pb.sealedAt+int(st.stored) > len(sealed) ||
			int(st.stored) > sstable.SealBound(opts.Compression, pb.size) || // (past its place: into the next block's)
			typ == sstable.NoCompression && int(st.stored) != pb.size {
			return sstable.EncodedBlock{}, fmt.Errorf("gpucompact: the device sealed the block at kept entry %d (%d bytes) as %d bytes of type %d", pb.start, pb.size, st.stored, st.typ)
		}
		stored := sealed[pb.sealedAt : pb.sealedAt+int(st.stored) : pb.sealedAt+int(st.stored)]
		b.Sealed = &sstable.SealedBlock{Stored: stored, Type: typ, CRC: record.MaskCRC(st.crc)}
		if sl.noRaw {
			b.Raw, b.RawSize = nil, pb.size
		}
	case sl.noRaw:
		return sstable.EncodedBlock{}, fmt.Errorf("gpucompact: the device did not seal the block at kept entry %d, whose contents stayed on it", pb.start)
	default:
		b.Sealed = seal(pb, opts, b.Raw, sealed)
	}
	return b, nil
}
