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
}

// run is a sorted run of entries: ents[start:end].
type run struct{ start, end int }

// addTable appends one input table's entries: the data region read from f
// in one call, each block checked and decompressed into the arena (a
// damaged block gives the same *base.CorruptionError as reading the table
// would), each entry decoded. It does not start a new run: callers group
// tables into runs (newRun).
func (s *inputSet) addTable(r *sstable.Reader, f io.ReaderAt, name string) error {
	blocks, err := r.DataBlocks()
	if err != nil {
		return err
	}
	if len(blocks) == 0 {
		return nil // a table of range tombstones only
	}
	lo := blocks[0].Offset
	last := blocks[len(blocks)-1]
	hi := last.Offset + last.Length + sstable.BlockTrailerLen
	if hi < lo || hi-lo > math.MaxUint32 {
		return fmt.Errorf("gpucompact: %s: data region [%d, %d): %w", name, lo, hi, errTooLarge)
	}
	// Size the arrays from the table's properties (a table written before
	// RawDataSize existed grows them as it goes).
	if p := r.Properties(); p.NumEntries > 0 && p.NumEntries < math.MaxUint32 {
		s.arena = slices.Grow(s.arena, int(min(p.RawDataSize, math.MaxUint32)))
		s.ents = slices.Grow(s.ents, int(p.NumEntries))
		if p.RawKeySize >= 8*p.NumEntries {
			s.keys = slices.Grow(s.keys, int(min(p.RawKeySize-8*p.NumEntries, math.MaxUint32)))
		}
	}
	region := make([]byte, hi-lo)
	if _, err := f.ReadAt(region, int64(lo)); err != nil {
		return fmt.Errorf("gpucompact: read %s: %w", name, err)
	}
	for _, h := range blocks {
		if h.Offset < lo || h.Offset+h.Length+sstable.BlockTrailerLen > hi {
			return base.WithFile(&base.CorruptionError{Offset: int64(h.Offset), Reason: "data blocks out of order in the index"}, name)
		}
		stored := region[h.Offset-lo : h.Offset-lo+h.Length+sstable.BlockTrailerLen]
		raw, err := r.DecodeBlock(h, stored, nil)
		if err != nil {
			return err
		}
		base0 := len(s.arena)
		if uint64(base0)+uint64(len(raw)) > math.MaxUint32 {
			return fmt.Errorf("gpucompact: %s: %w", name, errTooLarge)
		}
		s.arena = append(s.arena, raw...)
		err = sstable.BlockEntries(raw, name, h.Offset, func(k base.InternalKey, valOff, valLen int) error {
			if k.Kind() != base.KindSet && k.Kind() != base.KindDelete {
				return base.WithFile(&base.CorruptionError{Offset: int64(h.Offset), Reason: fmt.Sprintf("%v entry in a data block", k.Kind())}, name)
			}
			if uint64(len(s.keys))+uint64(len(k.UserKey)) > math.MaxUint32 {
				return fmt.Errorf("gpucompact: %s: keys: %w", name, errTooLarge)
			}
			s.ents = append(s.ents, entry{
				trailer: k.Trailer,
				keyOff:  uint32(len(s.keys)), keyLen: uint32(len(k.UserKey)),
				valOff: uint32(base0 + valOff), valLen: uint32(valLen),
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
