package sstable

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/warpkit/warpkit/kv/cache"
	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/internal/rangedel"
	"github.com/warpkit/warpkit/kv/record"
)

// ReadableFile is what a Reader reads: positioned reads, a size, Close.
type ReadableFile interface {
	io.ReaderAt
	io.Closer
	Size() (int64, error)
}

// ReaderOptions configure a Reader.
type ReaderOptions struct {
	// Cache holds data blocks; nil reads every block from the file.
	Cache *cache.Cache
	// FileName labels errors.
	FileName string
}

// Reader reads a table. The index, filter, range tombstones and properties
// are loaded at open and held in memory; data blocks go through the cache.
// It is safe for concurrent use.
type Reader struct {
	f       ReadableFile
	name    string
	size    uint64
	cache   *cache.Cache
	cacheID uint64

	index     []byte
	filter    []byte
	rangeDels *rangedel.Set
	props     Properties

	// Counters for metrics.
	stats readerStats
}

var errClosed = errors.New("sstable: reader closed")

// NewReader opens a table. On error the file is not closed.
func NewReader(f ReadableFile, opts ReaderOptions) (*Reader, error) {
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("sstable: %s: %w", opts.FileName, err)
	}
	r := &Reader{f: f, name: opts.FileName, size: uint64(size), cache: opts.Cache}
	if opts.Cache != nil {
		r.cacheID = opts.Cache.NewID()
	}
	if err := r.open(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Reader) corrupt(off uint64, format string, args ...any) error {
	return base.Corruptf(r.name, int64(off), format, args...)
}

func (r *Reader) open() error {
	if r.size < footerLen {
		return r.corrupt(0, "file of %d bytes is too short for a table", r.size)
	}
	var footer [footerLen]byte
	footerOff := r.size - footerLen
	if err := r.readAt(footer[:], footerOff); err != nil {
		return err
	}
	if binary.LittleEndian.Uint64(footer[handlesLen+8:]) != tableMagic {
		return r.corrupt(footerOff, "bad magic number: not a table")
	}
	if v := binary.LittleEndian.Uint32(footer[handlesLen:]); v != formatVersion {
		return r.corrupt(footerOff, "unsupported format version %d", v)
	}
	if record.MaskCRC(record.CRC(footer[:handlesLen+4])) != binary.LittleEndian.Uint32(footer[handlesLen+4:]) {
		return r.corrupt(footerOff, "footer checksum mismatch")
	}
	mh, n, ok := decodeHandle(footer[:handlesLen])
	if !ok {
		return r.corrupt(footerOff, "bad metaindex handle")
	}
	ih, _, ok := decodeHandle(footer[n:handlesLen])
	if !ok {
		return r.corrupt(footerOff, "bad index handle")
	}
	var err error
	if r.index, err = r.readBlock(ih, false); err != nil {
		return err
	}
	var it blockIter
	if !it.init(r.index, true, r.name, int64(ih.offset)) {
		return it.err
	}
	meta, err := r.readBlock(mh, false)
	if err != nil {
		return err
	}
	if !it.init(meta, false, r.name, int64(mh.offset)) {
		return it.err
	}
	handles := map[string]handle{}
	for ok := it.first(); ok; ok = it.next() {
		h, _, ok := decodeHandle(it.val)
		if !ok {
			return r.corrupt(mh.offset, "bad handle in metaindex")
		}
		handles[string(it.key)] = h
	}
	if it.err != nil {
		return it.err
	}
	if h, ok := handles[metaFilter]; ok {
		if r.filter, err = r.readBlock(h, false); err != nil {
			return err
		}
	}
	if h, ok := handles[metaProperties]; ok {
		b, err := r.readBlock(h, false)
		if err != nil {
			return err
		}
		if !it.init(b, false, r.name, int64(h.offset)) {
			return it.err
		}
		if err := r.props.decode(&it); err != nil {
			return base.WithFile(r.corrupt(h.offset, "%v", err), r.name)
		}
	}
	if h, ok := handles[metaRangeDel]; ok {
		b, err := r.readBlock(h, false)
		if err != nil {
			return err
		}
		if !it.init(b, true, r.name, int64(h.offset)) {
			return it.err
		}
		var ts []rangedel.Tombstone
		for ok := it.first(); ok; ok = it.next() {
			if it.ikey.Kind() != base.KindRangeDelete {
				return r.corrupt(h.offset, "range-del block holds a %v entry", it.ikey.Kind())
			}
			ts = append(ts, rangedel.Tombstone{
				Start: append([]byte(nil), it.ikey.UserKey...),
				End:   append([]byte(nil), it.val...),
				Seq:   it.ikey.SeqNum(),
			})
		}
		if it.err != nil {
			return it.err
		}
		r.rangeDels = rangedel.NewSet(ts)
	}
	return nil
}

func (r *Reader) readAt(buf []byte, off uint64) error {
	n, err := r.f.ReadAt(buf, int64(off))
	if n == len(buf) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return r.corrupt(off, "file truncated")
	}
	return fmt.Errorf("sstable: read %s at %d: %w", r.name, off, err)
}

// readBlock reads, checks and decompresses a block; data blocks (useCache)
// go through the block cache.
func (r *Reader) readBlock(h handle, useCache bool) ([]byte, error) {
	if useCache {
		if b := r.cache.Get(r.cacheID, h.offset); b != nil {
			return b, nil
		}
	}
	return r.readBlockFromFile(h, useCache)
}

// readBlockFromFile reads a block with one positioned read.
func (r *Reader) readBlockFromFile(h handle, fillCache bool) ([]byte, error) {
	if err := r.checkHandle(h); err != nil {
		return nil, err
	}
	buf := make([]byte, h.length+blockTrailerLen)
	if err := r.readAt(buf, h.offset); err != nil {
		return nil, err
	}
	r.stats.blockReads.Add(1)
	r.stats.bytesRead.Add(int64(len(buf)))
	b, err := r.checkBlock(h, buf, nil)
	if err != nil {
		return nil, err
	}
	if fillCache {
		r.cache.Set(r.cacheID, h.offset, b)
	}
	return b, nil
}

// checkHandle checks that a block and its trailer lie within the file,
// which bounds what reading it allocates.
func (r *Reader) checkHandle(h handle) error {
	if h.offset > r.size || h.length > r.size || h.length+blockTrailerLen > r.size-h.offset {
		return r.corrupt(h.offset, "block handle (offset %d, length %d) outside the file", h.offset, h.length)
	}
	return nil
}

// checkBlock verifies a stored block (with its trailer) and returns its
// contents, decompressing into dst when it has room.
func (r *Reader) checkBlock(h handle, stored, dst []byte) ([]byte, error) {
	body, trailer := stored[:h.length], stored[h.length:]
	crc := record.ExtendCRC(record.CRC(body), trailer[:1])
	if record.MaskCRC(crc) != binary.LittleEndian.Uint32(trailer[1:]) {
		return nil, r.corrupt(h.offset, "block checksum mismatch")
	}
	b, err := decompress(Compression(trailer[0]), body, dst)
	if err != nil {
		return nil, r.corrupt(h.offset, "decompress: %v", err)
	}
	return b, nil
}

// seqReader serves blocks from a read-ahead window: for compaction
// iterators (reused buffers, no cache) and for long forward scans (blocks
// copied out and cached).
type seqReader struct {
	r      *Reader
	window []byte
	start  uint64 // file offset of window[0]
	dst    []byte // decompression buffer, reused (compaction mode)
	size   uint64 // current read-ahead size; grows while the scan goes on
}

const (
	minReadAhead = 64 << 10
	maxReadAhead = 512 << 10
)

// block returns block h. With owned, the result is fresh memory (it is going
// into the cache); otherwise it may alias buffers reused by the next call.
func (s *seqReader) block(h handle, owned bool) ([]byte, error) {
	r := s.r
	if err := r.checkHandle(h); err != nil {
		return nil, err
	}
	need := h.length + blockTrailerLen
	if h.offset < s.start || h.offset+need > s.start+uint64(len(s.window)) {
		s.size = min(max(s.size*2, minReadAhead), maxReadAhead)
		n := min(max(need, s.size), r.size-h.offset)
		if uint64(cap(s.window)) < n {
			s.window = make([]byte, n)
		}
		s.window = s.window[:n]
		if err := r.readAt(s.window, h.offset); err != nil {
			s.window = s.window[:0]
			return nil, err
		}
		s.start = h.offset
		r.stats.bytesRead.Add(int64(n))
	}
	r.stats.blockReads.Add(1)
	off := h.offset - s.start
	stored := s.window[off : off+need]
	compressed := Compression(stored[h.length]) != NoCompression
	if owned {
		b, err := r.checkBlock(h, stored, nil)
		if err != nil {
			return nil, err
		}
		if !compressed {
			b = append([]byte(nil), b...) // do not cache the window
		}
		return b, nil
	}
	b, err := r.checkBlock(h, stored, s.dst)
	if err != nil {
		return nil, err
	}
	if compressed {
		s.dst = b[:cap(b)] // decoded into s.dst, or into a larger buffer to keep
	}
	return b, nil
}

// Properties returns the table's properties.
func (r *Reader) Properties() *Properties { return &r.props }

// RangeDels returns the table's range tombstones (nil if none).
func (r *Reader) RangeDels() *rangedel.Set { return r.rangeDels }

// Size returns the file size.
func (r *Reader) Size() uint64 { return r.size }

// getIters is pooled scratch for Get.
type getIters struct {
	index, data blockIter
}

var getPool = sync.Pool{New: func() any { return new(getIters) }}

// Get returns the newest point entry of ukey with sequence number <= snap.
// The value aliases an immutable block: it stays valid, but holding it keeps
// the whole block alive, so callers that hand it on should copy it. found is
// false when the table has no such entry (the bloom filter may answer this
// without reading). Range tombstones are not consulted.
func (r *Reader) Get(ukey []byte, snap SeqNum) (value []byte, kind base.Kind, seq SeqNum, found bool, err error) {
	if r.filter != nil && !bloomMayContain(r.filter, bloomHash(ukey)) {
		r.stats.bloomNegatives.Add(1)
		return nil, 0, 0, false, nil
	}
	g := getPool.Get().(*getIters)
	defer getPool.Put(g)
	trailer := base.MakeTrailer(snap, base.KindMax)
	if !g.index.init(r.index, true, r.name, 0) {
		return nil, 0, 0, false, g.index.err
	}
	if !g.index.seekGE(ukey, trailer) {
		return nil, 0, 0, false, g.index.err
	}
	for first := true; ; first = false {
		h, _, ok := decodeHandle(g.index.val)
		if !ok {
			return nil, 0, 0, false, r.corrupt(0, "bad block handle in index")
		}
		b, err := r.readBlock(h, true)
		if err != nil {
			return nil, 0, 0, false, err
		}
		if !g.data.initData(b, r.name, int64(h.offset)) {
			return nil, 0, 0, false, g.data.err
		}
		var at bool
		if first {
			at = g.data.seekGE(ukey, trailer)
		} else {
			at = g.data.first()
		}
		if g.data.err != nil {
			return nil, 0, 0, false, g.data.err
		}
		if at {
			if string(g.data.ikey.UserKey) != string(ukey) {
				if r.filter != nil {
					r.stats.bloomFalsePositives.Add(1)
				}
				return nil, 0, 0, false, nil
			}
			return g.data.val, g.data.ikey.Kind(), g.data.ikey.SeqNum(), true, nil
		}
		// The block's keys all precede the target (its index key was a
		// shortened separator); the answer, if any, starts the next block.
		if !g.index.next() {
			return nil, 0, 0, false, g.index.err
		}
	}
}

// ValidateChecksums reads every data block and verifies its checksum.
func (r *Reader) ValidateChecksums() error {
	var it blockIter
	if !it.init(r.index, true, r.name, 0) {
		return it.err
	}
	for ok := it.first(); ok; ok = it.next() {
		h, _, ok := decodeHandle(it.val)
		if !ok {
			return r.corrupt(0, "bad block handle in index")
		}
		if _, err := r.readBlock(h, false); err != nil {
			return err
		}
	}
	return it.err
}

// Close closes the file.
func (r *Reader) Close() error {
	if r.f == nil {
		return errClosed
	}
	err := r.f.Close()
	r.f = nil
	return err
}
