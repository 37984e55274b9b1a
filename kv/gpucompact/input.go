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
}

// run is a sorted run of entries: ents[start:end].
type run struct{ start, end int }

// readBlocks reads the stored bytes of some consecutive data blocks of one
// input table in one call, and returns them with the total length of the
// blocks' contents (what decodeBlocks puts in the arena).
func readBlocks(r *sstable.Reader, f io.ReaderAt, name string, blocks []sstable.BlockHandle) (region []byte, rawLen uint64, err error) {
	if len(blocks) == 0 {
		return nil, 0, nil // a table of range tombstones only
	}
	lo := blocks[0].Offset
	last := blocks[len(blocks)-1]
	hi := last.Offset + last.Length + sstable.BlockTrailerLen
	if hi < lo || hi-lo > math.MaxUint32 {
		return nil, 0, fmt.Errorf("gpucompact: %s: data region [%d, %d): %w", name, lo, hi, errTooLarge)
	}
	region = make([]byte, hi-lo)
	if _, err := f.ReadAt(region, int64(lo)); err != nil {
		return nil, 0, fmt.Errorf("gpucompact: read %s: %w", name, err)
	}
	for _, h := range blocks {
		if h.Offset < lo || h.Offset+h.Length+sstable.BlockTrailerLen > hi {
			return nil, 0, base.WithFile(&base.CorruptionError{Offset: int64(h.Offset), Reason: "data blocks out of order in the index"}, name)
		}
		n, err := r.DecodedLen(h, region[h.Offset-lo:h.Offset-lo+h.Length+sstable.BlockTrailerLen])
		if err != nil {
			return nil, 0, err
		}
		rawLen += uint64(n)
	}
	return region, rawLen, nil
}

// decodeBlocks appends the entries of blocks, whose stored bytes readBlocks
// read into region: each block checked and decompressed into the arena
// (a damaged block gives the same *base.CorruptionError as reading the
// table would), each entry decoded; values stay in the arena. With
// fixedArena the arena has room for exactly these blocks' contents (its
// place in the job's arena, which starts arenaBase bytes in), else it grows.
// tableBlocks is how many blocks the whole table has, to size the arrays
// from its properties. It does not start a new run: callers group tables
// into runs.
func (s *inputSet) decodeBlocks(r *sstable.Reader, name string, blocks []sstable.BlockHandle, region []byte, tableBlocks int) error {
	if len(blocks) == 0 {
		return nil
	}
	// Size the arrays from the table's properties, in proportion to the
	// share of its blocks (a table written before RawDataSize existed grows
	// them as it goes).
	if p := r.Properties(); p.NumEntries > 0 && p.NumEntries < math.MaxUint32 && tableBlocks > 0 {
		share := func(v uint64) int {
			return int(min(v*uint64(len(blocks))/uint64(tableBlocks)+v/64, math.MaxUint32))
		}
		if !s.fixedArena {
			s.arena = slices.Grow(s.arena, share(p.RawDataSize))
		}
		s.ents = slices.Grow(s.ents, share(p.NumEntries))
		if p.RawKeySize >= 8*p.NumEntries {
			s.keys = slices.Grow(s.keys, share(p.RawKeySize-8*p.NumEntries))
		}
	}
	lo := blocks[0].Offset
	for _, h := range blocks {
		stored := region[h.Offset-lo : h.Offset-lo+h.Length+sstable.BlockTrailerLen]
		at := len(s.arena)
		raw, err := r.DecodeBlock(h, stored, s.arena[at:cap(s.arena)])
		if err != nil {
			return err
		}
		switch {
		case uint64(s.arenaBase)+uint64(at)+uint64(len(raw)) > math.MaxUint32:
			return fmt.Errorf("gpucompact: %s: %w", name, errTooLarge)
		case len(raw) > 0 && at+len(raw) <= cap(s.arena) && &s.arena[:at+1][at] == &raw[0]:
			s.arena = s.arena[:at+len(raw)] // decompressed in place
		case s.fixedArena && at+len(raw) > cap(s.arena):
			return base.WithFile(&base.CorruptionError{Offset: int64(h.Offset), Reason: "block decodes past its decoded length"}, name)
		default:
			s.arena = append(s.arena, raw...)
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

// newRun closes the run of the entries added since the last one.
func (s *inputSet) newRun() {
	if start := s.runEnd(); start < len(s.ents) {
		s.runs = append(s.runs, run{start, len(s.ents)})
	}
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
