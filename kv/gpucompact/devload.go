package gpucompact

import (
	"context"
	"errors"
	"fmt"

	"github.com/warpkit/warpkit/kv/compaction"
	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/sstable"
)

// deviceInput is a job's inputs as the CUDA engine takes them: every data
// block's contents in the arena, in job order, and their places, with the
// runs as ranges of blocks. The device decodes the entries.
type deviceInput struct {
	arena  []byte
	blocks []uint32 // per block: its contents' offset in the arena, and length (gpucompact.cu's BlockIn)
	crcs   []uint32 // per block stored uncompressed: block, offset, length, checksum (gpucompact.cu's CrcIn)
	// uploaded says the arena went up piece by piece while it was loaded
	// (arenaUpload), regionsUploaded the stored bytes of the pieces the
	// device inflates: decode does not send them.
	uploaded, regionsUploaded bool
	// inflate lists the blocks the device checks and decompresses from
	// regions (the stored bytes, pinned): block, offset in regions, stored
	// length, type, place in the arena, decoded length, checksum
	// (gpucompact.cu's InflateIn).
	inflate []uint32
	regions []byte
	refs    []blockRef // per block: where it came from, to decode it on the host
	runEnds []int      // per run: one past its last block
}

// blockRef is where an input block came from.
type blockRef struct {
	p *loadPiece
	h sstable.BlockHandle
}

// errIrregularBlock says an input block is laid out otherwise than
// sstable's writer lays blocks out (its restart points are not where its
// entry chain has them) without being damaged: the CUDA engine, which
// decodes by restart interval, gives such a job to the fallback compactor.
var errIrregularBlock = errors.New("gpucompact: an input block's restart points do not match its entries")

// loadJobBlocks reads the job's input tables as loadJob does, and
// decompresses every data block into its place in the arena (checking its
// checksum) on goroutines, without decoding entries. Blocks stored
// uncompressed are not checked on the host — tables stored uncompressed are
// read straight into the arena, other such blocks copied there — and the
// device checks their checksums (deviceInput.crcs, block_intervals), which on the
// host were most of the load's CPU time. With dev, the arena goes up to the
// device as it is filled (arenaUpload). The caller closes the tables (the
// second result) after the device has decoded the blocks: a block the device
// finds damaged is decoded again on the host (recheck). With part, only the
// blocks that may hold its keys are read.
func loadJobBlocks(ctx context.Context, job *compaction.Job, ws *workspace, part *partition, dev *devEngine, failAt func(stage string) error) (in *deviceInput, l *loaded, err error) {
	// With dev, each piece goes up to the device as soon as its bytes are
	// in the arena, while the host reads and decompresses the others; and
	// each piece the device inflates, as soon as its stored bytes are read
	// (when they are pinned: the ring is the arena's).
	var up, rup *arenaUpload
	defer func() {
		loadErr := err
		for _, u := range []*arenaUpload{up, rup} {
			if u == nil {
				continue
			}
			if uerr := u.finish(loadErr != nil); err == nil && uerr != nil {
				err = &stageError{"device", uerr}
			}
		}
		if err == nil && failAt != nil && (up != nil || rup != nil) {
			if ferr := failAt("upload"); ferr != nil { // (tests: a copy that failed)
				err = &stageError{"device", ferr}
			}
		}
		if loadErr == nil && err != nil {
			// The load succeeded and an upload failed: the other's copies
			// may still run (finished without waiting), and the tables
			// the load opened are this function's to close.
			_ = dev.stream.Synchronize() // (its error is the next call's too)
			l.close()
			in, l = nil, nil
		}
	}()
	var onArena, onRegions func([]byte) (func(lo, hi uint32), error)
	if dev != nil {
		onArena = func(arena []byte) (func(lo, hi uint32), error) {
			var err error
			up, err = dev.startArenaUpload(ws, arena)
			if err != nil || up == nil {
				return nil, err
			}
			return up.piece, nil
		}
		onRegions = func(regions []byte) (func(lo, hi uint32), error) {
			if !ws.regionsPin.holds(regions) {
				return nil, nil // (decode sends them)
			}
			var err error
			rup, err = dev.startUpload(&dev.bufs.stored, regions, &ws.regionsPin)
			if err != nil || rup == nil {
				return nil, err
			}
			return rup.piece, nil
		}
	}
	l, err = readJob(ctx, job, ws, part, false, onArena, onRegions)
	if err != nil {
		return nil, nil, err
	}
	err = l.eachPiece(func(p *loadPiece) error {
		p.s.arena = l.arena[p.s.arenaBase : p.s.arenaBase : uint64(p.s.arenaBase)+p.rawLen]
		p.places, p.crcs, p.inflate = p.places[:0], p.crcs[:0], p.inflate[:0]
		if len(p.blocks) == 0 {
			return nil
		}
		name := p.t.f.FileNum.String()
		lo := p.blocks[0].Offset
		if p.direct {
			// Read into its place: every block is where it lies, its
			// checksum the device's to check.
			for i, h := range p.blocks {
				stored := p.region[h.Offset-lo : h.Offset-lo+h.Length+sstable.BlockTrailerLen]
				_, crc, _ := sstable.RawUnchecked(h, stored) // (readDirect checked each is)
				at := p.s.arenaBase + uint32(h.Offset-lo)
				p.crcs = append(p.crcs, uint32(i), at, uint32(h.Length), crc)
				p.places = append(p.places, at, uint32(h.Length))
			}
			return nil
		}
		for i, h := range p.blocks {
			stored := p.region[h.Offset-lo : h.Offset-lo+h.Length+sstable.BlockTrailerLen]
			if p.devSnappy {
				// The device checks and decompresses the block into its
				// place (inflate_blocks); the host only places it, from its
				// header.
				n, err := p.t.r.DecodedLen(h, stored)
				if err != nil {
					return err
				}
				c, crc, _ := sstable.BlockTrailer(h, stored) // (DecodedLen checked its length)
				at, err := p.s.reserve(name, h, n)
				if err != nil {
					return err
				}
				dst := p.s.arenaBase + uint32(at)
				p.inflate = append(p.inflate, uint32(i), uint32(p.regionOff)+uint32(h.Offset-lo), uint32(h.Length), uint32(c), dst, uint32(n), crc)
				p.places = append(p.places, dst, uint32(n))
				continue
			}
			if raw, crc, ok := sstable.RawUnchecked(h, stored); ok {
				at, err := p.s.placeRaw(name, h, raw)
				if err != nil {
					return err
				}
				p.crcs = append(p.crcs, uint32(i), p.s.arenaBase+uint32(at), uint32(len(raw)), crc)
				p.places = append(p.places, p.s.arenaBase+uint32(at), uint32(len(raw)))
				continue
			}
			raw, at, err := p.s.placeBlock(p.t.r, name, h, stored)
			if err != nil {
				return err
			}
			p.places = append(p.places, p.s.arenaBase+uint32(at), uint32(len(raw)))
		}
		if uint64(len(p.s.arena)) != p.rawLen {
			return base.WithFile(&base.CorruptionError{Offset: int64(p.blocks[0].Offset), Reason: "blocks decode short of their decoded length"}, name)
		}
		return nil
	})
	if err != nil {
		l.close()
		return nil, nil, err
	}
	// The decompressed pieces go up together, after the host's work (sent
	// piece by piece they measured no faster, at times slower, where
	// decompression is the load's work: docs/benchmarks.md); the pieces read
	// straight into the arena went up as each was read (readJob).
	for _, p := range l.pieces {
		if !p.direct && !p.devSnappy { // (the device fills devSnappy pieces' places)
			l.done(p)
		}
	}
	in = &deviceInput{arena: l.arena, uploaded: up != nil, regionsUploaded: rup != nil, regions: l.regions}
	for i, p := range l.pieces {
		first := uint32(len(in.refs)) // the piece's first block, in the job
		for c := 0; c < len(p.crcs); c += 4 {
			in.crcs = append(in.crcs, first+p.crcs[c], p.crcs[c+1], p.crcs[c+2], p.crcs[c+3])
		}
		for c := 0; c < len(p.inflate); c += 7 {
			in.inflate = append(in.inflate, first+p.inflate[c])
			in.inflate = append(in.inflate, p.inflate[c+1:c+7]...)
		}
		in.blocks = append(in.blocks, p.places...)
		for _, h := range p.blocks {
			in.refs = append(in.refs, blockRef{p, h})
		}
		t := p.t
		lastOfTable := i == len(l.pieces)-1 || l.pieces[i+1].t != t
		if lastOfTable && (t.level == 0 || i == len(l.pieces)-1 || l.pieces[i+1].t.level != t.level) {
			in.runEnds = append(in.runEnds, len(in.refs))
		}
	}
	return in, l, nil
}

// recheck decodes input block i on the host, as the Go engine would: its
// corruption error if it is damaged, else errIrregularBlock (the device
// flagged a block it cannot decode by restart interval).
func (in *deviceInput) recheck(i int) error {
	if i < 0 || i >= len(in.refs) {
		return fmt.Errorf("gpucompact: the device flagged input block %d of %d", i, len(in.refs))
	}
	ref := in.refs[i]
	t := ref.p.t
	lo := ref.p.blocks[0].Offset
	stored := ref.p.region[ref.h.Offset-lo : ref.h.Offset-lo+ref.h.Length+sstable.BlockTrailerLen]
	name := t.f.FileNum.String()
	raw, err := t.r.DecodeBlock(ref.h, stored, nil)
	if err != nil {
		return err
	}
	if err := sstable.BlockEntries(raw, name, ref.h.Offset, func(base.InternalKey, int, int) error { return nil }); err != nil {
		return err
	}
	return fmt.Errorf("%s at %d: %w", name, ref.h.Offset, errIrregularBlock)
}
