package gpucompact

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/sstable"
)

// entry is one decoded point entry of the job's inputs. Its user key is
// keys[keyOff:keyOff+keyLen] of its inputSet, its value arena[valOff:
// valOff+valLen]; k0 is its merge key (setK0).
type entry struct {
	trailer        base.Trailer
	k0             uint64
	keyOff, keyLen uint32
	valOff, valLen uint32
}

// errTooLarge says a job's inputs do not fit the engine's 32-bit offsets
// (the job then goes to the fallback compactor).
var errTooLarge = errors.New("gpucompact: inputs over 4 GiB")

// inputSet holds a job's decoded inputs: the input tables' uncompressed data
// blocks, back to back (values are read from here, never copied), the user
// keys, and the entries, grouped in sorted runs.
type inputSet struct {
	arena []byte
	keys  []byte
	ents  []entry
	runs  []run

	// While loading: the arena is a piece's place in the job's arena,
	// starting arenaBase bytes in, and has room for exactly its blocks
	// (fixedArena).
	arenaBase  uint32
	fixedArena bool

	workers int // bounds the goroutines of its host loops (workspace.workers)
}

// run is a sorted run of entries: ents[start:end].
type run struct{ start, end int }

// regionLen is how many bytes readBlocks reads for some consecutive data
// blocks of one table: from the first one's start to the last one's end,
// trailer included.
func regionLen(name string, blocks []sstable.BlockHandle) (int, error) {
	if len(blocks) == 0 {
		return 0, nil
	}
	lo := blocks[0].Offset
	last := blocks[len(blocks)-1]
	hi := last.Offset + last.Length + sstable.BlockTrailerLen
	if hi < lo || hi-lo > math.MaxUint32 {
		return 0, fmt.Errorf("gpucompact: %s: data region [%d, %d): %w", name, lo, hi, errTooLarge)
	}
	return int(hi - lo), nil
}

// readBlocks reads the stored bytes of some consecutive data blocks of one
// input table into region (regionLen bytes) in one call, and returns the
// total length of the blocks' contents (what decodeBlocks puts in the
// arena).
func readBlocks(r *sstable.Reader, f io.ReaderAt, name string, blocks []sstable.BlockHandle, region []byte) (rawLen uint64, err error) {
	if len(blocks) == 0 {
		return 0, nil // a table of range tombstones only
	}
	lo := blocks[0].Offset
	hi := lo + uint64(len(region))
	if _, err := f.ReadAt(region, int64(lo)); err != nil {
		return 0, fmt.Errorf("gpucompact: read %s: %w", name, err)
	}
	for _, h := range blocks {
		if h.Offset < lo || h.Offset+h.Length+sstable.BlockTrailerLen > hi {
			return 0, base.WithFile(&base.CorruptionError{Offset: int64(h.Offset), Reason: "data blocks out of order in the index"}, name)
		}
		n, err := r.DecodedLen(h, region[h.Offset-lo:h.Offset-lo+h.Length+sstable.BlockTrailerLen])
		if err != nil {
			return 0, err
		}
		rawLen += uint64(n)
	}
	return rawLen, nil
}

// readDirect reads the stored bytes of some consecutive data blocks of a
// table stored uncompressed into region (regionLen bytes: their place in
// the arena) in one call, unchecked but for their lengths and type bytes:
// a block stored compressed after all gives its corruption error if
// DecodeBlock finds it damaged, else errIrregularBlock (the job goes to
// the fallback compactor).
func readDirect(r *sstable.Reader, f io.ReaderAt, name string, blocks []sstable.BlockHandle, region []byte) error {
	if len(blocks) == 0 {
		return nil
	}
	lo := blocks[0].Offset
	hi := lo + uint64(len(region))
	if _, err := f.ReadAt(region, int64(lo)); err != nil {
		return fmt.Errorf("gpucompact: read %s: %w", name, err)
	}
	for _, h := range blocks {
		if h.Offset < lo || h.Offset+h.Length+sstable.BlockTrailerLen > hi {
			return base.WithFile(&base.CorruptionError{Offset: int64(h.Offset), Reason: "data blocks out of order in the index"}, name)
		}
		stored := region[h.Offset-lo : h.Offset-lo+h.Length+sstable.BlockTrailerLen]
		if _, _, ok := sstable.RawUnchecked(h, stored); !ok {
			if _, err := r.DecodeBlock(h, stored, nil); err != nil {
				return err
			}
			return fmt.Errorf("%s at %d: a compressed block in a table stored uncompressed: %w", name, h.Offset, errIrregularBlock)
		}
	}
	return nil
}

// pieceShare estimates, from a table's properties, how many entries and
// user-key bytes some of its blocks hold (their share of its blocks, plus a
// little); ok is false for a table written before the properties existed.
func pieceShare(r *sstable.Reader, blocks, tableBlocks int) (ents, keys int, ok bool) {
	p := r.Properties()
	if p.NumEntries == 0 || p.NumEntries >= math.MaxUint32 || tableBlocks == 0 || p.RawKeySize < 8*p.NumEntries {
		return 0, 0, false
	}
	share := func(v uint64) int {
		return int(min(v*uint64(blocks)/uint64(tableBlocks)+v/64+16, math.MaxUint32))
	}
	return share(p.NumEntries), share(p.RawKeySize - 8*p.NumEntries), true
}

// decodeBlocks appends the entries of blocks, whose stored bytes readBlocks
// read into region: each block checked and decompressed into the arena
// (a damaged block gives the same *base.CorruptionError as reading the
// table would), each entry decoded; values stay in the arena. With
// fixedArena the arena has room for exactly these blocks' contents (its
// place in the job's arena, which starts arenaBase bytes in), else it grows.
// tableBlocks is how many blocks the whole table has: arrays without room
// yet are sized from its properties. It does not start a new run: callers
// group tables into runs.
func (s *inputSet) decodeBlocks(r *sstable.Reader, name string, blocks []sstable.BlockHandle, region []byte, tableBlocks int) error {
	if len(blocks) == 0 {
		return nil
	}
	if cap(s.ents) == 0 {
		if ents, keys, ok := pieceShare(r, len(blocks), tableBlocks); ok {
			s.ents = make([]entry, 0, ents)
			s.keys = make([]byte, 0, keys)
		}
	}
	lo := blocks[0].Offset
	for _, h := range blocks {
		raw, at, err := s.placeBlock(r, name, h, region[h.Offset-lo:h.Offset-lo+h.Length+sstable.BlockTrailerLen])
		if err != nil {
			return err
		}
		valBase := s.arenaBase + uint32(at)
		err = sstable.BlockEntries(raw, name, h.Offset, func(k base.InternalKey, valOff, valLen int) error {
			if uint64(len(s.keys))+uint64(len(k.UserKey)) > math.MaxUint32 {
				return fmt.Errorf("gpucompact: %s: keys: %w", name, errTooLarge)
			}
			s.ents = append(s.ents, entry{
				trailer: k.Trailer,
				keyOff:  uint32(len(s.keys)), keyLen: uint32(len(k.UserKey)),
				valOff: valBase + uint32(valOff), valLen: uint32(valLen),
			})
			s.keys = append(s.keys, k.UserKey...)
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// placeBlock decodes a stored block (checksum, decompression) into the
// arena's next bytes, and returns its contents and where they start in the
// arena.
func (s *inputSet) placeBlock(r *sstable.Reader, name string, h sstable.BlockHandle, stored []byte) ([]byte, int, error) {
	at := len(s.arena)
	raw, err := r.DecodeBlock(h, stored, s.arena[at:cap(s.arena)])
	if err != nil {
		return nil, 0, err
	}
	switch {
	case uint64(s.arenaBase)+uint64(at)+uint64(len(raw)) > math.MaxUint32:
		return nil, 0, fmt.Errorf("gpucompact: %s: %w", name, errTooLarge)
	case len(raw) > 0 && at+len(raw) <= cap(s.arena) && &s.arena[:at+1][at] == &raw[0]:
		s.arena = s.arena[:at+len(raw)] // decompressed in place
	case s.fixedArena && at+len(raw) > cap(s.arena):
		return nil, 0, base.WithFile(&base.CorruptionError{Offset: int64(h.Offset), Reason: "block decodes past its decoded length"}, name)
	default:
		s.arena = append(s.arena, raw...)
	}
	return raw, at, nil
}

// placeRaw copies the contents of a block stored uncompressed into the
// arena's next bytes, unchecked (the CUDA engine checks its checksum on the
// device: block_intervals), and returns where they start in the arena.
func (s *inputSet) placeRaw(name string, h sstable.BlockHandle, raw []byte) (int, error) {
	at, err := s.reserve(name, h, len(raw))
	if err == nil {
		copy(s.arena[at:], raw)
	}
	return at, err
}

// reserve extends the arena by the n bytes of block h's contents, which the
// caller (or the device: inflate_blocks) fills, and returns where they
// start; a fixed arena without room for them means the block decodes past
// the length its table's blocks were placed for.
func (s *inputSet) reserve(name string, h sstable.BlockHandle, n int) (int, error) {
	at := len(s.arena)
	switch {
	case uint64(s.arenaBase)+uint64(at)+uint64(n) > math.MaxUint32:
		return 0, fmt.Errorf("gpucompact: %s: %w", name, errTooLarge)
	case s.fixedArena && at+n > cap(s.arena):
		return 0, base.WithFile(&base.CorruptionError{Offset: int64(h.Offset), Reason: "block decodes past its decoded length"}, name)
	}
	s.arena = slices.Grow(s.arena, n)[:at+n]
	return at, nil
}

// runEnd is where the last run ends (0 before the first).
func (s *inputSet) runEnd() int {
	if n := len(s.runs); n > 0 {
		return s.runs[n-1].end
	}
	return 0
}

func (s *inputSet) key(i uint32) []byte {
	e := &s.ents[i]
	return s.keys[e.keyOff : e.keyOff+e.keyLen]
}

func (s *inputSet) value(i uint32) []byte {
	e := &s.ents[i]
	return s.arena[e.valOff : e.valOff+e.valLen]
}

func (s *inputSet) internalKey(i uint32) base.InternalKey {
	return base.InternalKey{UserKey: s.key(i), Trailer: s.ents[i].trailer}
}
