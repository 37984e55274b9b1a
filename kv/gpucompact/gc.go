package gpucompact

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync/atomic"

	"github.com/warpkit/warpkit/internal/hostpar"
	"github.com/warpkit/warpkit/kv/compaction"
	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/internal/rangedel"
	"github.com/warpkit/warpkit/kv/manifest"
	"github.com/warpkit/warpkit/kv/sstable"
	"github.com/warpkit/warpkit/kv/vfs"
)

// loadTable is an input table while its job loads.
type loadTable struct {
	f       *manifest.FileMetadata
	level   int
	r       *sstable.Reader
	file    vfs.File
	release func()
	blocks  []sstable.BlockHandle // the data blocks read: all, or a partition's
	all     int                   // the table's data blocks
	rawLen  uint64                // its blocks' contents, as their headers say
	err     error
}

// loadPiece is some consecutive data blocks of a table, read, decoded and
// (for the Go engine) decoded into entries together.
type loadPiece struct {
	t                *loadTable
	blocks           []sstable.BlockHandle
	region           []byte // the blocks' stored bytes
	rawLen           uint64 // the length of their contents
	entsCap, keysCap int    // room reserved for the piece's entries and keys
	s                inputSet
	// direct (the CUDA engine, a table stored uncompressed): the piece is
	// read straight into its place in the arena, trailers and all (region
	// is that place), and its blocks are neither copied nor checked on the
	// host (loadJobBlocks).
	direct bool
	// devSnappy (the CUDA engine, a table stored with Snappy): the device
	// checks and decompresses the piece's blocks
	// (inflate_blocks); region is at regionOff in the job's regions.
	devSnappy bool
	regionOff int
	places    []uint32 // for the CUDA engine: each block's contents' offset in the arena and length
	crcs      []uint32 // for the CUDA engine: its blocks stored uncompressed (deviceInput.crcs, blocks counted in the piece)
	inflate   []uint32 // for the CUDA engine, devSnappy: its blocks (deviceInput.inflate, blocks counted in the piece)
	err       error
}

// loaded is a job's input tables open and their data blocks read into
// pieces, with the arena sized for their contents.
type loaded struct {
	tables    []*loadTable
	pieces    []*loadPiece
	regions   []byte // the pieces' stored bytes (all but the direct ones')
	arena     []byte
	eachPiece func(func(*loadPiece) error) error // runs on every piece, on goroutines
	// pieceDone, when set (the CUDA engine), is told a piece's range of
	// the arena once its bytes are there (done), to send them up: each
	// piece read straight into the arena as it is read, the others once all
	// are decompressed (loadJobBlocks).
	pieceDone func(lo, hi uint32)
}

// done reports piece p's bytes in place in the arena (to pieceDone).
func (l *loaded) done(p *loadPiece) {
	if l.pieceDone != nil && p.rawLen > 0 {
		l.pieceDone(p.s.arenaBase, p.s.arenaBase+uint32(p.rawLen))
	}
}

// close closes the tables.
func (l *loaded) close() {
	for _, t := range l.tables {
		if t.file != nil {
			t.file.Close()
		}
		if t.release != nil {
			t.release()
		}
	}
}

// readJob opens every input table of job (through job.Env: OpenTable for
// the index, OpenTableFile for the data), cuts its data blocks into
// pieces of loadPieceBytes of stored data, reads them on up to ws.workers
// goroutines (Options.HostWorkers; each piece with its checksums
// checked), checks the blocks' decoded lengths against the tables'
// properties and sizes the arena for them. decode says the pieces will be decoded into entries on the host
// (their arrays are reserved). With part, only the blocks that may hold
// keys of its range are read (partition.blocks). Every array comes from
// ws. The caller closes what it returns.
func readJob(ctx context.Context, job *compaction.Job, ws *workspace, part *partition, decode bool, onArena, onRegions func(b []byte) (pieceDone func(lo, hi uint32), err error)) (_ *loaded, err error) {
	var tables []*loadTable
	for _, in := range job.Inputs {
		for _, f := range in.Files {
			tables = append(tables, &loadTable{f: f, level: in.Level})
		}
	}
	l := &loaded{tables: tables}
	defer func() {
		if err != nil {
			l.close()
		}
	}()
	hostpar.ForWorkers(len(tables), 1, ws.workers, func(_, lo, hi int) {
		for _, t := range tables[lo:hi] {
			if t.err = ctx.Err(); t.err != nil {
				return
			}
			if t.r, t.release, t.err = job.Env.OpenTable(t.f); t.err != nil {
				continue
			}
			switch {
			case part == nil:
				t.blocks, t.err = t.r.DataBlocks()
				t.all = len(t.blocks)
			case part.excludes(t.f):
				// No key of the partition's: the table keeps its place in
				// its run, with no blocks, and is neither indexed nor read.
				t.all = 0
				continue
			default:
				var upper [][]byte
				t.blocks, upper, t.err = part.tableBounds(t.r, t.f)
				t.all = len(t.blocks)
				if t.err == nil && !slices.IsSortedFunc(upper, bytes.Compare) {
					t.err = fmt.Errorf("%s: index keys out of order: %w", t.f.FileNum, errPartitionEntries)
					continue
				}
				from, to := part.blocks(upper)
				t.blocks = t.blocks[from:to]
			}
			if t.err != nil {
				continue
			}
			t.file, t.err = job.Env.OpenTableFile(t.f)
		}
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var pieces []*loadPiece
	for _, t := range tables {
		if t.err != nil {
			return nil, t.err
		}
		start, size := 0, uint64(0)
		compression := t.r.Properties().Compression
		direct := !decode && compression == sstable.NoCompression.String()
		devSnappy := !decode && compression == sstable.SnappyCompression.String()
		for i, h := range t.blocks {
			size += h.Length
			if size >= loadPieceBytes || i == len(t.blocks)-1 {
				pieces = append(pieces, &loadPiece{t: t, blocks: t.blocks[start : i+1], direct: direct, devSnappy: devSnappy})
				start, size = i+1, 0
			}
		}
		if len(t.blocks) == 0 {
			pieces = append(pieces, &loadPiece{t: t}) // keeps the table's place in its run
		}
	}
	// Every piece's place in the regions and its room for entries and keys
	// (the last piece's arrays grow past theirs if the properties were
	// short; a table without them starts with none).
	var regionsLen, entsLen, keysLen int
	regionAt := make([][2]int, len(pieces)) // each piece's place in regions
	for i, p := range pieces {
		n, err := regionLen(p.t.f.FileNum.String(), p.blocks)
		if err != nil {
			return nil, err
		}
		if p.direct {
			p.rawLen = uint64(n) // its place in the arena: read there, later
			continue
		}
		regionAt[i] = [2]int{regionsLen, regionsLen + n}
		regionsLen += n
		if decode {
			p.entsCap, p.keysCap, _ = pieceShare(p.t.r, len(p.blocks), p.t.all)
		}
		entsLen += p.entsCap
		keysLen += p.keysCap
	}
	regions := takePinned(ws, &ws.regionsPin, &ws.regions, regionsLen)
	l.regions = regions
	pieceEnts, pieceKeys := take(&ws.pieceEnts, entsLen), take(&ws.pieceKeys, keysLen)
	entsLen, keysLen = 0, 0
	inflated := false // some piece's blocks the device inflates
	for i, p := range pieces {
		if !p.direct {
			p.region, p.regionOff = regions[regionAt[i][0]:regionAt[i][1]], regionAt[i][0]
			p.devSnappy = p.devSnappy && inflateFrom(ws, regions)
			inflated = inflated || p.devSnappy && len(p.region) > 0
		}
		p.s.ents = pieceEnts[entsLen : entsLen : entsLen+p.entsCap]
		p.s.keys = pieceKeys[keysLen : keysLen : keysLen+p.keysCap]
		entsLen += p.entsCap
		keysLen += p.keysCap
	}
	// With onRegions (the CUDA engine), the stored bytes of the pieces the
	// device inflates go up as each piece is read.
	var regionDone func(lo, hi uint32)
	if onRegions != nil && inflated {
		if regionDone, err = onRegions(regions); err != nil {
			return nil, err
		}
	}
	// Read every piece, learning the length of its blocks' contents; then
	// give each its place in one arena and decode into it.
	var next atomic.Int64
	eachPiece := func(f func(p *loadPiece) error) error {
		next.Store(0)
		hostpar.ForWorkers(len(pieces), 1, ws.workers, func(_, _, _ int) {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(pieces) {
					return
				}
				p := pieces[i]
				if p.err = ctx.Err(); p.err != nil {
					return
				}
				p.err = f(p)
			}
		})
		if err := ctx.Err(); err != nil {
			return err
		}
		for _, p := range pieces {
			if p.err != nil {
				return p.err
			}
		}
		return nil
	}
	err = eachPiece(func(p *loadPiece) (err error) {
		if p.direct {
			return nil
		}
		p.rawLen, err = readBlocks(p.t.r, p.t.file, p.t.f.FileNum.String(), p.blocks, p.region)
		if err == nil && regionDone != nil && p.devSnappy && len(p.region) > 0 {
			regionDone(uint32(p.regionOff), uint32(p.regionOff+len(p.region)))
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	// The blocks' lengths come from headers the checksums have not yet
	// vouched for: before the arena is sized by them, each table's must
	// agree with its properties, else a damaged block is found (and named
	// as reading it would) rather than trusted.
	for _, p := range pieces {
		if !p.direct {
			p.t.rawLen += p.rawLen
		}
	}
	for _, t := range tables {
		props := t.r.Properties()
		if want := props.RawDataSize - min(props.RawDataSize, uint64(t.all)*sstable.BlockTrailerLen); props.RawDataSize == 0 || t.rawLen <= want {
			continue
		}
		for _, q := range pieces {
			if q.t != t || len(q.blocks) == 0 {
				continue
			}
			lo := q.blocks[0].Offset
			for _, h := range q.blocks {
				if _, err := t.r.DecodeBlock(h, q.region[h.Offset-lo:h.Offset-lo+h.Length+sstable.BlockTrailerLen], nil); err != nil {
					return nil, err
				}
			}
		}
		return nil, base.WithFile(&base.CorruptionError{Reason: fmt.Sprintf("data blocks decode to %d bytes, more than the table's raw data size", t.rawLen)}, t.f.FileNum.String())
	}
	var arenaLen uint64
	for _, p := range pieces {
		if arenaLen+p.rawLen > math.MaxUint32 {
			return nil, errTooLarge
		}
		p.s.arenaBase, p.s.fixedArena = uint32(arenaLen), true
		arenaLen += p.rawLen
	}
	l.arena = takePinned(ws, &ws.arenaPin, &ws.arena, int(arenaLen))
	l.pieces, l.eachPiece = pieces, eachPiece
	if onArena != nil {
		if l.pieceDone, err = onArena(l.arena); err != nil {
			return nil, err
		}
	}
	err = eachPiece(func(p *loadPiece) error {
		if !p.direct {
			return nil
		}
		p.region = l.arena[p.s.arenaBase : uint64(p.s.arenaBase)+p.rawLen]
		if err := readDirect(p.t.r, p.t.file, p.t.f.FileNum.String(), p.blocks, p.region); err != nil {
			return err
		}
		l.done(p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

// inflateFrom says whether the device can inflate Snappy blocks from
// regions: with a device (they go up by DMA when pinned, else through the
// engine's ring). A variable: tests of the loader without a device set it.
var inflateFrom = func(ws *workspace, regions []byte) bool { return ws.pinDev != nil }

// loadJob reads every input table of job into one inputSet: each L0 table
// a run of its own, each deeper level's tables (sorted, disjoint) one run.
// The pieces readJob read are decoded on goroutines, each into arrays of
// its own, and gathered in job order. With part, only the blocks that may
// hold its keys are read.
func loadJob(ctx context.Context, job *compaction.Job, ws *workspace, part *partition) (*inputSet, error) {
	l, err := readJob(ctx, job, ws, part, true, nil, nil)
	if err != nil {
		return nil, err
	}
	defer l.close()
	pieces, arena, eachPiece := l.pieces, l.arena, l.eachPiece
	err = eachPiece(func(p *loadPiece) error {
		p.s.arena = arena[p.s.arenaBase : p.s.arenaBase : uint64(p.s.arenaBase)+p.rawLen]
		name := p.t.f.FileNum.String()
		if err := p.s.decodeBlocks(p.t.r, name, p.blocks, p.region, p.t.all); err != nil {
			return err
		}
		if uint64(len(p.s.arena)) != p.rawLen {
			return base.WithFile(&base.CorruptionError{Offset: int64(p.blocks[0].Offset), Reason: "blocks decode short of their decoded length"}, name)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// The keys and entries gathered, pieces copied into their places on
	// goroutines.
	var keys, ents uint64
	for _, p := range pieces {
		keys += uint64(len(p.s.keys))
		ents += uint64(len(p.s.ents))
	}
	if keys > math.MaxUint32 {
		return nil, errTooLarge
	}
	s := &inputSet{workers: ws.workers, arena: arena, keys: takePinned(ws, &ws.keysPin, &ws.keys, int(keys)), ents: takePinned(ws, &ws.entsPin, &ws.ents, int(ents))}
	type place struct{ k, n int }
	places := make([]place, len(pieces))
	var k, n int
	for i, p := range pieces {
		places[i] = place{k, n}
		k, n = k+len(p.s.keys), n+len(p.s.ents)
		t := p.t
		lastOfTable := i == len(pieces)-1 || pieces[i+1].t != t
		if lastOfTable && (t.level == 0 || i == len(pieces)-1 || pieces[i+1].t.level != t.level) {
			s.runs = append(s.runs, run{start: s.runEnd(), end: n})
		}
	}
	hostpar.ForWorkers(len(pieces), 1, s.workers, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			p, at := pieces[i], places[i]
			copy(s.keys[at.k:], p.s.keys)
			for j, e := range p.s.ents {
				e.keyOff += uint32(at.k)
				s.ents[at.n+j] = e
			}
		}
	})
	for i := 0; i < len(s.runs); i++ { // a table of range tombstones only makes an empty run
		if s.runs[i].start == s.runs[i].end {
			s.runs = append(s.runs[:i], s.runs[i+1:]...)
			i--
		}
	}
	return s, nil
}

// loadPieceBytes is about how many stored bytes of data blocks one piece of
// the input stage reads and decodes (tests make it small).
var loadPieceBytes uint64 = 256 << 10

// gcStats count what the garbage-collection stage saw and dropped; elided
// are the elided tombstones' entries (a partition counts those in its
// range).
type gcStats struct {
	entriesIn, entriesOut, tombstonesElided uint64
	elided                                  []uint32
}

// errInputOrder says the job's inputs are not in strictly ascending
// internal-key order within a run (damaged input that the checksums did
// not catch). Compaction.CPU's Writer refuses such keys when it meets them
// out of order, which a merge may not reproduce, so the job goes to the
// fallback compactor, whose result (an error, or tables) stands.
var errInputOrder = errors.New("gpucompact: input entries out of order")

// gc returns the entries of the merged order that survive the compaction,
// in order: it decides every position independently — as a GPU thread per
// entry would — by compaction.CPU's rules, with the same helpers:
//
//   - shadowed: the previous entry has the same user key and its snapshot
//     stripe (compaction.StripeOf) is the same, so no snapshot can tell the
//     two apart and the older one goes;
//   - covered: a range tombstone of the job's fragmented spans
//     (compaction.CollectSpans) over the key is newer than the entry and in
//     its stripe (compaction.CoveredInStripe);
//   - elided: a point tombstone in stripe 0 where no level below the output
//     can hold the key (Job.ElideTombstone).
//
// The positions are split among goroutines; each decision needs only the
// entry and its predecessor.
//
// Besides the kept ids it returns, for each, whether its user key differs
// from the previous entry's in the merged order (kept or not): outputs are
// cut only there, as compaction.CPU cuts. A merged order that is not
// strictly ascending returns errInputOrder: an input run was not sorted
// (a merge keeps each run's order, so the merged order is strictly
// ascending exactly when every run is, and then it is the order any merge
// gives).
func (s *inputSet) gc(order []uint32, job *compaction.Job, spans []rangedel.Span, ws *workspace) ([]uint32, []bool, gcStats, error) {
	n := len(order)
	flags := take(&ws.flags, 3*n)
	keep, newKey, elided := flags[:n], flags[n:2*n], flags[2*n:]
	snaps := job.Snapshots
	var disorder atomic.Bool
	hostpar.ForWorkers(n, 4096, s.workers, func(_, lo, hi int) {
		// The predecessor's stripe: computed for the part's first entry,
		// carried along after.
		prevStripe := -1
		if lo > 0 {
			prevStripe = compaction.StripeOf(snaps, s.ents[order[lo-1]].trailer.SeqNum())
		}
		for i := lo; i < hi; i++ {
			keep[i], elided[i] = false, false // the workspace holds the last job's flags
			id := order[i]
			k := s.internalKey(id)
			q := k.SeqNum()
			stripe := compaction.StripeOf(snaps, q)
			samePrev := prevStripe == stripe
			prevStripe = stripe
			newKey[i] = true
			if i > 0 && !s.less(order[i-1], id) {
				disorder.Store(true)
			}
			if i > 0 && bytes.Equal(s.key(order[i-1]), k.UserKey) {
				newKey[i] = false
				if samePrev {
					continue // shadowed
				}
			}
			keep[i], elided[i] = survives(k, stripe, job, spans)
		}
	})
	if disorder.Load() {
		return nil, nil, gcStats{}, errInputOrder
	}
	// Select the kept ids (a GPU does this with a flagged select): each
	// part of the positions counts its kept entries, then writes them from
	// its offset.
	st := gcStats{entriesIn: uint64(n)}
	parts := max(1, min(n>>14, hostpar.Workers(s.workers)))
	bounds := func(part int) (int, int) { return part * n / parts, (part + 1) * n / parts }
	offsets := make([]int, parts+1)
	elidedIn := make([]uint64, parts)
	hostpar.ForWorkers(parts, 1, s.workers, func(_, plo, phi int) {
		for part := plo; part < phi; part++ {
			lo, hi := bounds(part)
			for i := lo; i < hi; i++ {
				if keep[i] {
					offsets[part+1]++
				} else if elided[i] {
					elidedIn[part]++
				}
			}
		}
	})
	for part := range parts {
		offsets[part+1] += offsets[part]
		st.tombstonesElided += elidedIn[part]
	}
	if st.tombstonesElided > 0 {
		st.elided = make([]uint32, 0, st.tombstonesElided)
		for i := range n {
			if elided[i] && !keep[i] {
				st.elided = append(st.elided, order[i])
			}
		}
	}
	kept := take(&ws.kept, offsets[parts])
	keptNew := take(&ws.keptNew, offsets[parts])
	hostpar.ForWorkers(parts, 1, s.workers, func(_, plo, phi int) {
		for part := plo; part < phi; part++ {
			lo, hi := bounds(part)
			j := offsets[part]
			for i := lo; i < hi; i++ {
				if keep[i] {
					kept[j], keptNew[j] = order[i], newKey[i]
					j++
				}
			}
		}
	})
	st.entriesOut = uint64(len(kept))
	return kept, keptNew, st, nil
}

// survives decides an entry that no newer version of its key shadows (k
// in snapshot stripe stripe): covered by a range tombstone of the job's
// spans in its stripe, it goes; a point tombstone in stripe 0 that no level
// below can hold goes too (elided); else it stays. The Go engine's gc and
// the CUDA engine's host checks both decide by it.
func survives(k base.InternalKey, stripe int, job *compaction.Job, spans []rangedel.Span) (keep, elided bool) {
	if sp := spanAt(spans, k.UserKey); sp != nil && compaction.CoveredInStripe(sp, k.SeqNum(), stripe, job.Snapshots) {
		return false, false
	}
	if k.Kind() == base.KindDelete && stripe == 0 && job.ElideTombstone(k.UserKey) {
		return false, true
	}
	return true, false
}

// spanAt returns the fragment of spans (sorted, disjoint) holding key, or
// nil.
func spanAt(spans []rangedel.Span, key []byte) *rangedel.Span {
	i := sort.Search(len(spans), func(i int) bool { return bytes.Compare(spans[i].End, key) > 0 })
	if i < len(spans) && bytes.Compare(spans[i].Start, key) <= 0 {
		return &spans[i]
	}
	return nil
}
