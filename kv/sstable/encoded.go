package sstable

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/klauspost/compress/s2"

	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/record"
)

// This file holds the hooks of a compactor that builds data blocks in bulk
// (kv/gpucompact: decode, merge and encode on a GPU, or on many goroutines)
// and hands them to a Writer, which lays out the table around them exactly
// as if the entries had been added one by one: the same bytes for the same
// blocks. The compactor must cut blocks where Add would (a block ends after
// the entry that brings the builder's size, entries + 4 bytes per restart +
// 4, to BlockSize or more) and build each block's bytes exactly as Add's
// block builder does (restart every RestartInterval entries, uvarint shared /
// unshared / value lengths, shared prefixes of whole internal keys).

// EncodedBlock is a data block built outside the Writer, with what the
// Writer would have learnt from adding its entries one by one.
type EncodedBlock struct {
	// Raw is the block's uncompressed contents: entries, restart offsets
	// and restart count, as Add's block builder lays them out. The Writer
	// compresses it as its options say, unless Sealed is set. With Sealed
	// set, Raw may be nil and RawSize its length: a block sealed where its
	// contents were made (a device), which the caller never holds.
	Raw []byte
	// RawSize is the contents' length when Raw is nil (ignored otherwise).
	RawSize int
	// Sealed, if not nil, is Raw sealed by SealBlock with the Writer's
	// compression (sealing in parallel is what it is for): the Writer
	// writes it as is.
	Sealed *SealedBlock
	// First and Last are the block's first and last keys.
	First, Last InternalKey
	// Entries and Deletions count its entries and its KindDelete entries;
	// RawKeySize and RawValueSize sum their encoded internal keys' and
	// values' lengths (the table properties of the same names).
	Entries, Deletions       uint64
	RawKeySize, RawValueSize uint64
	// SmallestSeq and LargestSeq bound its entries' sequence numbers.
	SmallestSeq, LargestSeq SeqNum
	// Hashes are BloomHash of the user key of every entry whose user key
	// differs from the previous entry's in the table (the first entry of the
	// table included), in order; unused without a filter or after
	// SetFilter.
	Hashes []uint32
}

// SealedBlock is a block's stored form: its bytes, the compression type
// they are in and the masked CRC-32C of both (the block trailer's).
type SealedBlock struct {
	Stored []byte
	Type   Compression
	CRC    uint32
}

// SealBlock compresses a block as a Writer with compression c would (raw if
// compression saves less than an eighth, or the block is too large) and
// computes its trailer's checksum. The result aliases dst's memory when it
// is large enough, and raw when stored uncompressed.
func SealBlock(c Compression, dst, raw []byte) SealedBlock {
	stored, typ := compress(c, dst, raw)
	return SealedBlock{Stored: stored, Type: typ, CRC: blockCRC(stored, typ)}
}

// SealBound is the most room SealBlock needs in dst to compress a block of
// rawLen bytes with c without allocating (0 when it stores the block as
// it is).
func SealBound(c Compression, rawLen int) int {
	if c == NoCompression || rawLen > maxCompressedBlockSize {
		return 0
	}
	return max(s2.MaxEncodedLen(rawLen), 0)
}

// blockCRC is the masked CRC-32C of a stored block and its type byte.
func blockCRC(stored []byte, typ Compression) uint32 {
	return record.MaskCRC(record.ExtendCRC(record.CRC(stored), []byte{byte(typ)}))
}

// BloomHash is the hash the table's bloom filter sets and probes for a user
// key (EncodedBlock.Hashes).
func BloomHash(userKey []byte) uint32 { return bloomHash(userKey) }

// BuildFilter returns the filter block a Writer with bitsPerKey builds from
// hashes (for checking a filter built elsewhere).
func BuildFilter(hashes []uint32, bitsPerKey int) []byte {
	return buildBloom(nil, hashes, bitsPerKey)
}

// vectorWriter is vfs.VectorWriter (not imported: vfs is below sstable's
// callers, not sstable).
type vectorWriter interface {
	WriteVectors(bufs [][]byte) (int64, error)
}

// AddEncodedBlocks appends finished data blocks, as AddEncodedBlock on each
// in order would, with the same file bytes. Where the file writes vectors
// (vfs.VectorWriter: writev(2), MemFS) the sealed blocks among them, with
// their trailers, go to it from the caller's memory, each run of them
// between blocks the Writer compresses in one call (writev's 1024 buffers
// a system call), rather than each copied into the Writer's buffer first;
// their memory is the caller's again when it returns. Calls with less than
// 64 KiB of sealed bytes take the buffered path: a write call each would
// cost more than the copies (the buffer writes 256 KiB a call); so do
// sealed blocks behind blocks still being compressed (CompressionWorkers).
func (w *Writer) AddEncodedBlocks(bs []EncodedBlock) error {
	vw, ok := w.dst.(vectorWriter)
	if ok {
		sealed := 0
		for _, b := range bs {
			if b.Sealed != nil {
				sealed += len(b.Sealed.Stored)
			}
		}
		ok = sealed >= w.minVectorBytes
	}
	if !ok {
		for _, b := range bs {
			if err := w.AddEncodedBlock(b); err != nil {
				return err
			}
		}
		return nil
	}
	w.trailers = slices.Grow(w.trailers[:0], blockTrailerLen*len(bs))
	for _, b := range bs {
		// A block to compress here, or written behind blocks still being
		// compressed, takes the buffered path, after the vectors so far.
		w.vectors = b.Sealed != nil && len(w.inflight) == 0
		if !w.vectors {
			w.writeVectors(vw)
		}
		err := w.AddEncodedBlock(b)
		w.vectors = false
		if err != nil {
			clear(w.vec)
			w.vec = w.vec[:0]
			return err
		}
	}
	w.writeVectors(vw)
	return w.err
}

// writeVectors writes the blocks AddEncodedBlocks gathered, after what the
// buffer holds.
func (w *Writer) writeVectors(vw vectorWriter) {
	if len(w.vec) == 0 {
		return
	}
	if w.err == nil {
		if err := w.out.Flush(); err != nil {
			w.fail(err)
		} else if _, err := vw.WriteVectors(w.vec); err != nil {
			w.fail(err)
		}
	}
	clear(w.vec)
	w.vec = w.vec[:0]
}

// AddEncodedBlock appends a finished data block. The Writer's own open block
// must be empty (no Add since the last block ended), and the block's first
// key must follow the last key added.
func (w *Writer) AddEncodedBlock(b EncodedBlock) error {
	if w.err != nil {
		return w.err
	}
	switch {
	case w.data.count > 0:
		return w.fail(errors.New("sstable: AddEncodedBlock with entries of Add still in the open block"))
	case b.Raw == nil && b.Sealed == nil:
		return w.fail(errors.New("sstable: AddEncodedBlock without the block's contents or its sealed bytes"))
	case b.Entries == 0 || b.rawSize() < 4:
		return w.fail(errors.New("sstable: AddEncodedBlock of an empty block"))
	case b.Deletions > b.Entries:
		return w.fail(fmt.Errorf("sstable: encoded block of %d entries with %d deletions", b.Entries, b.Deletions))
	case base.CompareInternal(b.First, b.Last) > 0:
		return w.fail(fmt.Errorf("sstable: encoded block's first key %v after its last %v", b.First, b.Last))
	case b.Sealed != nil && b.Sealed.Type != NoCompression && b.Sealed.Type != w.opts.Compression:
		return w.fail(fmt.Errorf("sstable: block sealed with %v for a %v table", b.Sealed.Type, w.opts.Compression))
	}
	if b.Raw != nil {
		if n := binary.LittleEndian.Uint32(b.Raw[len(b.Raw)-4:]); n == 0 || uint64(n) > uint64(len(b.Raw)-4)/4 {
			return w.fail(fmt.Errorf("sstable: encoded block with %d restart points in %d bytes", n, len(b.Raw)))
		}
	} else if n, err := decodedLen(b.Sealed.Type, b.Sealed.Stored); err != nil || n != b.RawSize {
		// Sealed bytes alone: their length (or header) must say RawSize,
		// which the table's properties count.
		return w.fail(fmt.Errorf("sstable: sealed block of %d stored bytes decodes to %d bytes (%v), RawSize says %d", len(b.Sealed.Stored), n, err, b.RawSize))
	}
	if err := w.next(b.First); err != nil {
		return err
	}
	if w.opts.BloomBitsPerKey > 0 && w.filter == nil {
		w.hashes = append(w.hashes, b.Hashes...)
	}
	w.lastKey = b.Last.Append(w.lastKey[:0])
	w.lastUserKey = append(w.lastUserKey[:0], b.Last.UserKey...)
	w.noteSeq(b.SmallestSeq)
	w.noteSeq(b.LargestSeq)
	w.props.NumEntries += b.Entries
	w.props.NumDeletions += b.Deletions
	w.props.RawKeySize += b.RawKeySize
	w.props.RawValueSize += b.RawValueSize
	w.writeData(b.Raw, b.rawSize(), b.Sealed)
	return w.err
}

// rawSize is the length of the block's contents.
func (b *EncodedBlock) rawSize() int {
	if b.Raw == nil {
		return b.RawSize
	}
	return len(b.Raw)
}

// SetFilter makes Finish write filter as the table's bloom filter instead
// of building one from the keys' hashes; it must be the filter a Writer with
// these options would build (BuildFilter of the table's hashes, possibly
// computed elsewhere). Only a Writer with BloomBitsPerKey > 0 takes one.
func (w *Writer) SetFilter(filter []byte) error {
	if w.err != nil {
		return w.err
	}
	if w.opts.BloomBitsPerKey <= 0 {
		return w.fail(errors.New("sstable: SetFilter on a Writer without a bloom filter"))
	}
	if len(filter) < 1 {
		return w.fail(errors.New("sstable: SetFilter of an empty filter"))
	}
	w.filter = bytes.Clone(filter)
	w.hashes = nil
	return nil
}

// BlockHandle locates a data block: its stored bytes (its trailer of
// blockTrailerLen bytes follows them).
type BlockHandle struct {
	Offset, Length uint64
}

// BlockTrailerLen is the length of the trailer (type byte, masked CRC-32C)
// after every block.
const BlockTrailerLen = blockTrailerLen

// DataBlocks returns the table's data blocks in key order, from the index
// the Reader holds in memory.
func (r *Reader) DataBlocks() ([]BlockHandle, error) {
	var it blockIter
	if !it.init(r.index, true, r.name, 0) {
		return nil, it.err
	}
	var out []BlockHandle
	for ok := it.first(); ok; ok = it.next() {
		h, _, ok := decodeHandle(it.val)
		if !ok {
			return nil, r.corrupt(0, "bad block handle in index")
		}
		if err := r.checkHandle(h); err != nil {
			return nil, err
		}
		out = append(out, BlockHandle{Offset: h.offset, Length: h.length})
	}
	return out, it.err
}

// DataBlockBounds returns the table's data blocks in key order, as
// DataBlocks does, and with each the user key of its index entry: every key
// of block i has a user key at most upper[i], and every key of the blocks
// after it a user key at least upper[i] (a block's index key is at or past
// its last key and before the next block's first). A compactor that reads part of a table's key range
// (kv/gpucompact's partitions) selects its blocks by them.
func (r *Reader) DataBlockBounds() (blocks []BlockHandle, upper [][]byte, err error) {
	var it blockIter
	if !it.init(r.index, true, r.name, 0) {
		return nil, nil, it.err
	}
	// The keys are copied into one array (the iterator reuses its key's
	// memory), and sliced from it at the end; a first pass sizes the
	// arrays (an index of a large table has many thousands of entries).
	n, size := 0, 0
	for ok := it.first(); ok; ok = it.next() {
		n, size = n+1, size+len(it.ikey.UserKey)
	}
	if it.err != nil {
		return nil, nil, it.err
	}
	blocks = make([]BlockHandle, 0, n)
	keys := make([]byte, 0, size)
	ends := make([]int, 0, n)
	for ok := it.first(); ok; ok = it.next() {
		h, _, ok := decodeHandle(it.val)
		if !ok {
			return nil, nil, r.corrupt(0, "bad block handle in index")
		}
		if err := r.checkHandle(h); err != nil {
			return nil, nil, err
		}
		blocks = append(blocks, BlockHandle{Offset: h.offset, Length: h.length})
		keys = append(keys, it.ikey.UserKey...)
		ends = append(ends, len(keys))
	}
	if it.err != nil {
		return nil, nil, it.err
	}
	upper = make([][]byte, len(ends))
	start := 0
	for i, end := range ends {
		upper[i] = keys[start:end:end]
		start = end
	}
	return blocks, upper, nil
}

// DecodeBlock checks a stored block (its bytes and trailer, as read from
// the file at h) and returns its uncompressed contents, decoding into dst
// when it has room. Damage gives a *base.CorruptionError naming the block.
func (r *Reader) DecodeBlock(h BlockHandle, stored, dst []byte) ([]byte, error) {
	if uint64(len(stored)) != h.Length+blockTrailerLen {
		return nil, r.corrupt(h.Offset, "block of %d bytes with its trailer, handle says %d", len(stored), h.Length+blockTrailerLen)
	}
	return r.checkBlock(handle{offset: h.Offset, length: h.Length}, stored, dst)
}

// RawUnchecked returns the contents of a stored block (its bytes and
// trailer) that is stored uncompressed, without checking them, and the
// CRC-32C its trailer records, unmasked (of the contents, then the type
// byte: record.ExtendCRC(record.CRC(raw), []byte{0})). ok is false for a
// compressed block, or one whose length disagrees with h. For a caller that
// checks the checksum elsewhere (kv/gpucompact's kernels): DecodeBlock gives
// the error a mismatch is reported with.
func RawUnchecked(h BlockHandle, stored []byte) (raw []byte, crc uint32, ok bool) {
	if c, crc, ok := BlockTrailer(h, stored); ok && c == NoCompression {
		return stored[:h.Length], crc, true
	}
	return nil, 0, false
}

// BlockTrailer returns what a stored block's trailer records, unchecked:
// how the block is stored and the CRC-32C of its bytes then its type byte,
// unmasked. ok is false when the block's length disagrees with h.
func BlockTrailer(h BlockHandle, stored []byte) (c Compression, crc uint32, ok bool) {
	if uint64(len(stored)) != h.Length+blockTrailerLen {
		return 0, 0, false
	}
	return Compression(stored[h.Length]), record.UnmaskCRC(binary.LittleEndian.Uint32(stored[h.Length+1:])), true
}

// DecodedLen returns how many bytes DecodeBlock will return for a stored
// block (its bytes and trailer), from the compression header alone, so that
// a bulk reader can place every block's contents before decoding any. A
// header it cannot read gives the error DecodeBlock gives for the block.
func (r *Reader) DecodedLen(h BlockHandle, stored []byte) (int, error) {
	if uint64(len(stored)) != h.Length+blockTrailerLen {
		return 0, r.corrupt(h.Offset, "block of %d bytes with its trailer, handle says %d", len(stored), h.Length+blockTrailerLen)
	}
	n, err := decodedLen(Compression(stored[h.Length]), stored[:h.Length])
	if err != nil {
		if _, derr := r.DecodeBlock(h, stored, nil); derr != nil {
			return 0, derr
		}
		return 0, r.corrupt(h.Offset, "decompress: %v", err)
	}
	return n, nil
}

// BlockEntries calls fn for each entry of a data block's contents (as
// DecodeBlock returns them), in order, with its internal key (valid only
// during the call) and where its value lies in raw. Damage gives a
// *base.CorruptionError naming file and the block's offset blockOff, as
// reading the table would; an error from fn stops the walk and is returned.
func BlockEntries(raw []byte, file string, blockOff uint64, fn func(k InternalKey, valOff, valLen int) error) error {
	var it blockIter
	if !it.initData(raw, file, int64(blockOff)) {
		return it.err
	}
	for ok := it.first(); ok; ok = it.next() {
		if err := fn(it.ikey, it.nextOffset-len(it.val), len(it.val)); err != nil {
			return err
		}
	}
	return it.err
}

// BlockBuilder builds a data block exactly as a Writer's Add does (the
// same code): entries in order, a restart point every RestartInterval
// entries, prefix-compressed encoded internal keys. A bulk compactor builds
// its blocks with it, on many goroutines, for AddEncodedBlock.
type BlockBuilder struct {
	w      blockWriter
	keyBuf []byte
}

// NewBlockBuilder returns a builder with the given restart interval (0:
// the Writer's default).
func NewBlockBuilder(restartInterval int) *BlockBuilder {
	b := &BlockBuilder{}
	b.w.restartInterval = WriterOptions{RestartInterval: restartInterval}.withDefaults().RestartInterval
	return b
}

// Add appends an entry; keys must increase.
func (b *BlockBuilder) Add(k InternalKey, value []byte) {
	b.keyBuf = k.Append(b.keyBuf[:0])
	b.w.add(b.keyBuf, value)
}

// EstimatedSize is the size Finish would return; a Writer ends a block
// after the entry that brings it to BlockSize or more.
func (b *BlockBuilder) EstimatedSize() int { return b.w.estimatedSize() }

// Finish appends the restart array and returns the block, valid until
// Reset.
func (b *BlockBuilder) Finish() []byte { return b.w.finish() }

// Reset empties the builder for the next block.
func (b *BlockBuilder) Reset() { b.w.reset() }
