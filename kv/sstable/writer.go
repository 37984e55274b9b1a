package sstable

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/internal/rangedel"
	"github.com/warpkit/warpkit/kv/record"
)

// Aliases for the key types in this package's API.
type (
	// InternalKey is a user key with a sequence number and kind.
	InternalKey = base.InternalKey
	// SeqNum is a sequence number.
	SeqNum = base.SeqNum
	// Span is a range-tombstone fragment: [Start, End) at sequence numbers Seqs.
	Span = rangedel.Span
)

// WriterOptions configure a Writer. Zero fields take the defaults.
type WriterOptions struct {
	BlockSize       int         // target uncompressed data block size; default 4096
	RestartInterval int         // entries between restart points; default 16
	BloomBitsPerKey int         // bloom filter bits per user key; 0 means none
	Compression     Compression // data block compression; default none
	// CompressionWorkers, when above 1 (and Compression is on), compresses
	// finished data blocks on up to that many goroutines while the caller
	// adds the next entries; blocks are still written in order, so the
	// table is byte-identical to a sequential writer's (compression is
	// deterministic, and every offset and index entry follows from the
	// compressed blocks in order).
	CompressionWorkers int
}

// WithDefaults returns the options with the defaults filled in, as a Writer
// uses them.
func (o WriterOptions) WithDefaults() WriterOptions { return o.withDefaults() }

func (o WriterOptions) withDefaults() WriterOptions {
	if o.BlockSize <= 0 {
		o.BlockSize = 4096
	}
	if o.RestartInterval <= 0 {
		o.RestartInterval = 16
	}
	return o
}

// Metadata describes a finished table.
type Metadata struct {
	Size uint64
	// Smallest and Largest bound every key in the table, range tombstones
	// included; Largest may be an exclusive sentinel (a tombstone's end).
	Smallest, Largest InternalKey
	SmallestSeq       SeqNum
	LargestSeq        SeqNum
	HasPoints         bool
	HasRangeDels      bool
	Properties        Properties
}

// Writer writes one table. Add keys in strictly increasing internal-key
// order, add range tombstones (fragmented, in order) with AddRangeDel, then
// call Finish. Finish does not sync or close the file.
type Writer struct {
	out    *bufio.Writer
	dst    io.Writer // what out writes to
	opts   WriterOptions
	offset uint64
	err    error

	data  blockWriter
	index blockWriter

	pending       bool // a data block was written; its index entry waits for the next key
	pendingHandle handle
	lastKey       []byte // encoded last internal key
	lastUserKey   []byte
	sepBuf        []byte
	handleBuf     []byte
	compressBuf   []byte

	hashes []uint32
	filter []byte // set by SetFilter: written instead of one built from hashes
	spans  []rangedel.Span
	meta   Metadata
	props  Properties

	// inflight are the finished data blocks not yet written, oldest first
	// (CompressionWorkers > 1); unindexed is the last written block when
	// its index entry waits for the next key's separator.
	inflight  []*pendingBlock
	unindexed *pendingBlock
	spare     [][]byte // buffers of written in-flight blocks, for the next ones

	// vec holds the sealed blocks and trailers of an AddEncodedBlocks call
	// while it runs (vectors: writeSealed appends to them rather than to
	// out), written in one WriteVectors at its end; trailers backs theirs.
	vectors        bool
	vec            [][]byte
	trailers       []byte
	minVectorBytes int // AddEncodedBlocks' least sealed bytes for vectors (64 KiB; tests: less)

	// omitRawDataSize writes no RawDataSize property, as tables written
	// before it existed (tests only).
	omitRawDataSize bool
}

// NewWriter returns a Writer appending to w.
func NewWriter(w io.Writer, opts WriterOptions) *Writer {
	opts = opts.withDefaults()
	wr := &Writer{out: bufio.NewWriterSize(w, 256<<10), dst: w, opts: opts, minVectorBytes: 64 << 10}
	wr.data.restartInterval = opts.RestartInterval
	wr.index.restartInterval = 1
	wr.meta.SmallestSeq = base.SeqNumMax
	return wr
}

// Add appends a point entry (KindSet or KindDelete).
func (w *Writer) Add(k InternalKey, value []byte) error {
	if w.err != nil {
		return w.err
	}
	if kind := k.Kind(); kind != base.KindSet && kind != base.KindDelete {
		return w.fail(fmt.Errorf("sstable: Add of a %v entry", kind))
	}
	if err := w.next(k); err != nil {
		return err
	}
	w.lastKey = k.Append(w.lastKey[:0])
	w.data.add(w.lastKey, value)
	if w.opts.BloomBitsPerKey > 0 && (len(w.hashes) == 0 || !bytes.Equal(w.lastUserKey, k.UserKey)) {
		w.hashes = append(w.hashes, bloomHash(k.UserKey))
	}
	w.lastUserKey = append(w.lastUserKey[:0], k.UserKey...)
	w.noteSeq(k.SeqNum())
	w.props.NumEntries++
	if k.Kind() == base.KindDelete {
		w.props.NumDeletions++
	}
	w.props.RawKeySize += uint64(k.Size())
	w.props.RawValueSize += uint64(len(value))
	if w.data.estimatedSize() >= w.opts.BlockSize {
		w.flushData()
	}
	return w.err
}

// next admits k as the next point key (of Add, or the first of an encoded
// block): it must follow the last one; it completes the previous block's
// index entry, which waits for the next key, and records the table's
// smallest key.
func (w *Writer) next(k InternalKey) error {
	if w.meta.HasPoints {
		prev, _ := base.DecodeInternalKey(w.lastKey)
		if base.CompareInternal(prev, k) >= 0 {
			return w.fail(fmt.Errorf("sstable: keys out of order: %v after %v", k, prev))
		}
	}
	if w.pending {
		w.addIndexEntry(k.UserKey)
	}
	if !w.meta.HasPoints {
		w.meta.Smallest = k.Clone()
		w.meta.HasPoints = true
	}
	return nil
}

func (w *Writer) noteSeq(s SeqNum) {
	w.meta.SmallestSeq = min(w.meta.SmallestSeq, s)
	w.meta.LargestSeq = max(w.meta.LargestSeq, s)
}

// AddRangeDel adds a range-tombstone fragment. Fragments must not overlap
// and must come in key order (kv/internal/rangedel.Fragment output).
func (w *Writer) AddRangeDel(sp Span) error {
	if w.err != nil {
		return w.err
	}
	if bytes.Compare(sp.Start, sp.End) >= 0 || len(sp.Seqs) == 0 {
		return w.fail(fmt.Errorf("sstable: empty range tombstone [%q, %q)", sp.Start, sp.End))
	}
	for i := 1; i < len(sp.Seqs); i++ {
		if sp.Seqs[i] >= sp.Seqs[i-1] {
			return w.fail(errors.New("sstable: range tombstone sequence numbers not descending"))
		}
	}
	if n := len(w.spans); n > 0 && bytes.Compare(w.spans[n-1].End, sp.Start) > 0 {
		return w.fail(fmt.Errorf("sstable: range tombstone [%q, %q) overlaps or precedes the previous one", sp.Start, sp.End))
	}
	w.spans = append(w.spans, Span{
		Start: append([]byte(nil), sp.Start...),
		End:   append([]byte(nil), sp.End...),
		Seqs:  append([]SeqNum(nil), sp.Seqs...),
	})
	for _, s := range sp.Seqs {
		w.noteSeq(s)
	}
	w.props.NumRangeDeletions += uint64(len(sp.Seqs))
	return nil
}

// EstimatedSize is the table size so far, including the open data block
// (and, with CompressionWorkers, the blocks still being compressed, at
// their uncompressed size).
func (w *Writer) EstimatedSize() uint64 {
	n := w.offset + uint64(w.data.estimatedSize())
	for _, b := range w.inflight {
		n += uint64(len(b.raw) + blockTrailerLen)
	}
	return n
}

// RawSize is the data so far before compression: the finished data blocks'
// uncompressed lengths plus their 5-byte trailers (Properties.RawDataSize so
// far), plus the open data block's size. With compression off it equals
// EstimatedSize until Finish. Compactors cut outputs on it, so that where a
// table ends does not depend on how well its blocks compress.
func (w *Writer) RawSize() uint64 {
	return w.props.RawDataSize + uint64(w.data.estimatedSize())
}

func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	return w.err
}

// addIndexEntry adds the pending block's index entry, shortened against the
// next block's first user key (nil at the end of the table).
func (w *Writer) addIndexEntry(nextUserKey []byte) {
	last, _ := base.DecodeInternalKey(w.lastKey)
	var sep []byte
	if nextUserKey != nil {
		sep = base.Separator(w.sepBuf[:0], last.UserKey, nextUserKey)
	} else {
		sep = base.Successor(w.sepBuf[:0], last.UserKey)
	}
	w.sepBuf = sep
	var ik InternalKey
	if bytes.Compare(sep, last.UserKey) > 0 {
		ik = InternalKey{UserKey: sep, Trailer: base.TrailerSeek}
	} else {
		ik = last
	}
	enc := ik.Append(nil)
	w.pending = false
	switch {
	case w.unindexed != nil: // the block was written before its separator was known
		w.addIndex(enc, w.unindexed.h)
		w.unindexed = nil
	case len(w.inflight) > 0: // the newest in-flight block: indexed when written
		w.inflight[len(w.inflight)-1].index = enc
	default:
		w.addIndex(enc, w.pendingHandle)
	}
}

func (w *Writer) flushData() {
	if w.data.count == 0 {
		return
	}
	raw := w.data.finish()
	w.writeData(raw, len(raw), nil)
	w.data.reset()
}

// writeData writes a finished data block (raw: its contents, of size
// bytes, nil when sealed is given without them; sealed, if not nil: its
// stored form, sealed elsewhere) in file order: compressed on
// a goroutine when CompressionWorkers allow, behind the blocks still in
// flight, else at once. The block's index entry waits for the next key.
func (w *Writer) writeData(raw []byte, size int, sealed *SealedBlock) {
	w.props.RawDataSize += uint64(size + blockTrailerLen)
	w.props.NumDataBlocks++
	switch {
	case sealed == nil && w.opts.CompressionWorkers > 1 && w.opts.Compression != NoCompression:
		w.flushDataAsync(raw)
		return
	case sealed != nil && len(w.inflight) > 0:
		done := make(chan struct{})
		close(done)
		buf := append(w.takeBuf(len(sealed.Stored)), sealed.Stored...)
		w.inflight = append(w.inflight, &pendingBlock{stored: buf, typ: sealed.Type, crc: sealed.CRC, raw: buf, done: done})
		w.pending = true
		for len(w.inflight) > w.opts.CompressionWorkers {
			w.writeOldest()
		}
		return
	}
	var h handle
	var n uint64
	if sealed != nil {
		h, n = w.writeSealed(sealed.Stored, sealed.Type, sealed.CRC)
	} else {
		h, n = w.writeBlock(raw, w.opts.Compression)
	}
	w.props.DataSize += n
	w.pendingHandle = h
	w.pending = true
}

// pendingBlock is a data block being compressed beside the writer.
type pendingBlock struct {
	raw, stored []byte
	dst         []byte // the buffer stored was compressed into (reused once written)
	typ         Compression
	crc         uint32 // the stored block's checksum, computed beside the writer too
	done        chan struct{}
	h           handle
	written     bool
	index       []byte // its encoded index key, once known
}

// flushDataAsync hands the finished block to a compressing goroutine and
// writes the oldest blocks while more than CompressionWorkers are in
// flight. The block's index entry is added when both its handle (known once
// it is written) and its separator (known at the next Add, or at Finish)
// are.
func (w *Writer) flushDataAsync(block []byte) {
	b := &pendingBlock{raw: append(w.takeBuf(len(block)), block...), done: make(chan struct{})}
	b.dst = w.takeBuf(SealBound(w.opts.Compression, len(block)))
	w.data.reset()
	c := w.opts.Compression
	go func() {
		defer close(b.done)
		b.stored, b.typ = compress(c, b.dst, b.raw)
		b.crc = blockCRC(b.stored, b.typ)
	}()
	w.inflight = append(w.inflight, b)
	w.pending = true
	for len(w.inflight) > w.opts.CompressionWorkers {
		w.writeOldest()
	}
}

// writeOldest waits for the oldest in-flight block, writes it and, when its
// separator is known, its index entry.
func (w *Writer) writeOldest() {
	b := w.inflight[0]
	w.inflight = w.inflight[1:]
	<-b.done
	h, n := w.writeSealed(b.stored, b.typ, b.crc)
	w.props.DataSize += n
	b.h, b.written = h, true
	// writeSealed copied the block into the buffer (no vectors are
	// gathered while blocks are in flight): its memory serves the next.
	w.spare = append(w.spare, b.raw[:0])
	if b.dst != nil {
		w.spare = append(w.spare, b.dst[:0])
	}
	b.raw, b.stored, b.dst = nil, nil, nil
	if b.index != nil {
		w.addIndex(b.index, h)
	} else {
		w.unindexed = b // the newest block: its separator comes with the next key
	}
}

// takeBuf returns an empty buffer of at least n bytes' capacity: one a
// written block left (spare), or new memory.
func (w *Writer) takeBuf(n int) []byte {
	if k := len(w.spare); k > 0 {
		b := w.spare[k-1]
		w.spare = w.spare[:k-1]
		if cap(b) >= n {
			return b
		}
	}
	return make([]byte, 0, n)
}

// drain writes every block still in flight.
func (w *Writer) drain() {
	for len(w.inflight) > 0 {
		w.writeOldest()
	}
}

// addIndex appends an index entry.
func (w *Writer) addIndex(key []byte, h handle) {
	w.handleBuf = h.append(w.handleBuf[:0])
	w.index.add(key, w.handleBuf)
}

// writeBlock writes a block and its trailer; it returns the handle and the
// bytes written.
func (w *Writer) writeBlock(block []byte, c Compression) (handle, uint64) {
	if w.err != nil {
		return handle{}, 0
	}
	stored, typ := compress(c, w.compressBuf, block)
	if typ != NoCompression {
		w.compressBuf = stored
	}
	return w.writeStored(stored, typ)
}

// writeStored writes a block already compressed (typ says how) and its
// trailer.
func (w *Writer) writeStored(stored []byte, typ Compression) (handle, uint64) {
	if w.err != nil {
		return handle{}, 0
	}
	return w.writeSealed(stored, typ, blockCRC(stored, typ))
}

// writeSealed writes a stored block and its trailer with a checksum
// already computed (blockCRC).
func (w *Writer) writeSealed(stored []byte, typ Compression, crc uint32) (handle, uint64) {
	if w.err != nil {
		return handle{}, 0
	}
	var trailer [blockTrailerLen]byte
	trailer[0] = byte(typ)
	binary.LittleEndian.PutUint32(trailer[1:], crc)
	h := handle{offset: w.offset, length: uint64(len(stored))}
	if w.vectors {
		w.trailers = append(w.trailers, trailer[:]...) // (room for every block: no move)
		w.vec = append(w.vec, stored, w.trailers[len(w.trailers)-blockTrailerLen:])
	} else {
		if _, err := w.out.Write(stored); err != nil {
			w.fail(err)
			return h, 0
		}
		if _, err := w.out.Write(trailer[:]); err != nil {
			w.fail(err)
			return h, 0
		}
	}
	n := uint64(len(stored) + blockTrailerLen)
	w.offset += n
	return h, n
}

// Finish writes the remaining blocks and the footer, flushes, and returns the
// table's metadata.
func (w *Writer) Finish() (Metadata, error) {
	if w.err != nil {
		return Metadata{}, w.err
	}
	if !w.meta.HasPoints && len(w.spans) == 0 {
		return Metadata{}, w.fail(errors.New("sstable: empty table"))
	}
	w.flushData()
	if w.pending {
		w.addIndexEntry(nil)
	}
	w.drain()
	if w.meta.HasPoints {
		last, _ := base.DecodeInternalKey(w.lastKey)
		w.meta.Largest = last.Clone()
	}
	var meta blockWriter
	meta.restartInterval = 1
	var hbuf []byte
	if f := w.filter; f != nil || len(w.hashes) > 0 {
		if f == nil {
			f = buildBloom(nil, w.hashes, w.opts.BloomBitsPerKey)
		}
		h, n := w.writeBlock(f, NoCompression)
		w.props.FilterSize = n
		w.props.FilterBitsPerKey = uint64(w.opts.BloomBitsPerKey)
		hbuf = h.append(hbuf[:0])
		meta.add([]byte(metaFilter), hbuf)
	}
	if len(w.spans) > 0 {
		w.meta.HasRangeDels = true
		var rd blockWriter
		rd.restartInterval = 1
		for _, sp := range w.spans {
			for _, s := range sp.Seqs {
				rd.add(base.MakeInternalKey(sp.Start, s, base.KindRangeDelete).Append(nil), sp.End)
			}
		}
		w.meta.includeSpans(w.spans)
		h, _ := w.writeBlock(rd.finish(), NoCompression)
		hbuf = h.append(hbuf[:0])
		meta.add([]byte(metaRangeDel), hbuf)
	}
	w.props.Compression = w.opts.Compression.String()
	w.props.Creator = "warpkit kv"
	w.props.SmallestSeq = uint64(w.meta.SmallestSeq)
	w.props.LargestSeq = uint64(w.meta.LargestSeq)
	// The index size is known only after it is written; properties record the
	// size of the index block before compression, which is what it stays.
	indexBlock := w.index.finish()
	w.props.IndexSize = uint64(len(indexBlock) + blockTrailerLen)
	var pw blockWriter
	pw.restartInterval = 1
	w.props.encode(&pw, w.omitRawDataSize)
	ph, _ := w.writeBlock(pw.finish(), NoCompression)
	meta.add([]byte(metaProperties), ph.append(hbuf[:0]))
	mh, _ := w.writeBlock(meta.finish(), NoCompression)
	ih, _ := w.writeBlock(indexBlock, NoCompression)

	var footer [footerLen]byte
	b := mh.append(footer[:0])
	b = ih.append(b)
	_ = b // handles fit in 40 bytes: four uvarints of at most 10 bytes
	binary.LittleEndian.PutUint32(footer[handlesLen:], formatVersion)
	binary.LittleEndian.PutUint32(footer[handlesLen+4:], record.MaskCRC(record.CRC(footer[:handlesLen+4])))
	binary.LittleEndian.PutUint64(footer[handlesLen+8:], tableMagic)
	if w.err == nil {
		if _, err := w.out.Write(footer[:]); err != nil {
			w.fail(err)
		}
	}
	w.offset += footerLen
	if w.err == nil {
		if err := w.out.Flush(); err != nil {
			w.fail(err)
		}
	}
	if w.err != nil {
		return Metadata{}, w.err
	}
	w.meta.Size = w.offset
	w.meta.Properties = w.props
	return w.meta, nil
}
