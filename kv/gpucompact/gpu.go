package gpucompact

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/gpurt"
	"github.com/warpkit/warpkit/internal/hostpar"
	"github.com/warpkit/warpkit/kv/compaction"
	"github.com/warpkit/warpkit/kv/internal/rangedel"
	"github.com/warpkit/warpkit/kv/record"
	"github.com/warpkit/warpkit/kv/sstable"
	"github.com/warpkit/warpkit/prim"
)

// deviceBlock is the kernels' block size (kBlock in gpucompact.cu) and
// mergeTileItems the outputs of one merge tile (kBlock * kMergeIPT).
const (
	deviceBlock    = 256
	mergeTileItems = deviceBlock * 11
)

// devEngine is the CUDA engine's device side: the kernels, prim's engine,
// one stream, pinned staging and device arrays, all kept from one job to
// the next (the device counterpart of the workspace). The Compactor's
// engine slot gives it one job at a time.
//
// The device decodes the blocks the host read and decompressed, merges,
// collects garbage (the host decides the positions only it can: range
// tombstones, tombstone elision against the levels below), sizes the kept
// entries and the blocks that would start at each, and encodes the blocks
// the host's walk plans; the host seals and writes them (doc.go, "The CUDA
// engine").
type devEngine struct {
	dev    *cuda.Device
	own    bool // dev was opened by New: Close closes it
	prim   *prim.Engine
	stream *cuda.Stream
	fn     struct {
		merge, gc, apply, sizes, encode, blockEnds *cuda.Function
		intervals, scan, decode                    *cuda.Function
		radixKey, valueLens, moveValues, inflate   *cuda.Function
		encodeSeal, seal                           *cuda.Function // seal: the flush sealer's
	}
	// radix, moveValues and deviceSeal are Options.Sort == SortRadix,
	// Options.MoveValues and Options.Sealing (on the device); pinLimit bounds
	// the workspace's pinned arrays (Options.PinnedBytes less the ring and
	// the staging's share; negative: no limit). configure sets them.
	opts                          Options
	radix, moveValues, deviceSeal bool
	pinLimit                      int64
	bufs                          devBufs
	sealAtHost                    []uint64 // planSeal's places, kept from batch to batch
	// editPlan, in tests, alters a batch's planned blocks before they go
	// up: a plan encode_blocks does not agree with sets its status word.
	editPlan func([]blockDesc)
	// The job's arrays on the device, from stages to the last encodeBatch.
	cur struct {
		ents                      cuda.Slice[uint64]
		keys, arena, newKept, raw cuda.Slice[uint8]
		kept, plan, shared        cuda.Slice[uint32]
		order                     cuda.Slice[uint32] // the ids in input order (decode_intervals), the merge's first source
		fresh                     []bool             // newKept on the host (pinned: the workspace's keptFresh)
		prefix                    int                // the job's common key prefix's length (jobPrefix)
		restartInterval           int32
		crc                       bool // the blocks are stored as they are: the device checksums them
		seal                      bool // the blocks are Snappy-compressed: the device seals them (encode_seal_blocks)
	}
}

// devBufs are the device arrays and the staging, freed together
// (gpurt.FreeAll).
type devBufs struct {
	stage                                 gpurt.Staging
	ring                                  gpurt.Ring        // the copies of the workspace's arrays in plain memory (Options.PinnedBytes)
	ents                                  gpurt.Buf[uint64] // 4 words per entry (input.go's entry)
	keys, arena, raw                      gpurt.Buf[uint8]
	snaps, pairs, bound, descs, stats     gpurt.Buf[uint64]
	src, dst, pos, sel, kept, plan        gpurt.Buf[uint32]
	count, shared                         gpurt.Buf[uint32]
	blocks, meta, nint, ibase, lcp        gpurt.Buf[uint32] // decode
	jumpEnd, jumpSize                     gpurt.Buf[uint32]
	crcTable, crcs                        gpurt.Buf[uint32] // record's CRC table; block_intervals' checksums
	filterDescs, filterWords              gpurt.Buf[uint32] // encode_blocks' filters
	stored                                gpurt.Buf[uint8]  // inflate_blocks: the stored bytes of Snappy tables
	sealAt                                gpurt.Buf[uint64] // encode_seal_blocks: each block's place in sealed
	sealed                                gpurt.Buf[uint8]  // encode_seal_blocks: a batch's sealed blocks
	inflate                               gpurt.Buf[uint32] // inflate_blocks: its blocks
	radixKeys                             gpurt.Buf[uint64] // Options.Sort = SortRadix: one pass's keys
	valLens, valOffs                      gpurt.Buf[uint32] // Options.MoveValues
	moved                                 gpurt.Buf[uint8]  // Options.MoveValues: the values in their new order
	ikeys, keyBase                        gpurt.Buf[uint64] // decode: intervals' counts and their scan
	keep, newKey, check, keptNew, v, newK gpurt.Buf[uint8]
}

func newDevEngine(dev *cuda.Device, own bool, opts Options) (*devEngine, error) {
	return newDevEngineAt(dev, own, opts, 0)
}

// newDevEngineAt is newDevEngine with its stream at a priority
// (cuda.Device.NewPriorityStream; 0 is NewStream's).
func newDevEngineAt(dev *cuda.Device, own bool, opts Options, priority int) (*devEngine, error) {
	d := &devEngine{dev: dev, own: own}
	d.configure(opts)
	fail := func(err error) (*devEngine, error) {
		d.close()
		return nil, fmt.Errorf("gpucompact: CUDA engine: %w", err)
	}
	mod, err := dev.LoadModule(gpucompactPTX)
	if err != nil {
		return fail(err)
	}
	for _, k := range []struct {
		dst  **cuda.Function
		name string
	}{{&d.fn.merge, "merge_round"}, {&d.fn.gc, "gc_flags"}, {&d.fn.apply, "apply_checks"}, {&d.fn.sizes, "entry_sizes"}, {&d.fn.encode, "encode_blocks"},
		{&d.fn.intervals, "block_intervals"}, {&d.fn.scan, "scan_intervals"}, {&d.fn.decode, "decode_intervals"},
		{&d.fn.blockEnds, "block_ends"},
		{&d.fn.radixKey, "radix_key"}, {&d.fn.valueLens, "value_lens"}, {&d.fn.moveValues, "move_values"},
		{&d.fn.inflate, "inflate_blocks"}, {&d.fn.encodeSeal, "encode_seal_blocks"}, {&d.fn.seal, "seal_blocks"}} {
		if *k.dst, err = mod.Function(k.name); err != nil {
			return fail(err)
		}
	}
	// The sealing kernels' hash tables (past the 48 KiB a launch gets unasked).
	for _, f := range []*cuda.Function{d.fn.encodeSeal, d.fn.seal} {
		if err = f.SetMaxDynamicShared(sealWarps * sealTableBytes); err != nil {
			return fail(err)
		}
	}
	if d.prim, err = prim.NewEngine(dev); err != nil {
		return fail(err)
	}
	if priority == 0 {
		d.stream, err = dev.NewStream()
	} else {
		d.stream, err = dev.NewPriorityStream(priority)
	}
	if err != nil {
		return fail(err)
	}
	return d, nil
}

// stagingShare is what Options.PinnedBytes leaves the staging (the small
// transfers: descriptors, stats, counts), besides the ring.
const stagingShare = 8 << 20

// configure takes the options that shape the engine (newDevEngine's, for
// each engine slot and second lane; zero sizes are the defaults).
func (d *devEngine) configure(opts Options) {
	if opts.PinnedBytes == 0 {
		opts.PinnedBytes = DefaultPinnedBytes
	}
	if opts.ChunkBytes == 0 {
		opts.ChunkBytes = DefaultChunkBytes
	}
	d.opts = opts
	d.radix, d.moveValues = opts.Sort == SortRadix, opts.MoveValues
	d.deviceSeal = opts.Sealing == SealOnDevice || opts.Sealing == SealAuto && hostSealsAsDevice()
	d.bufs.ring.Init(d.dev, 2, int(opts.ChunkBytes))
	d.pinLimit = -1
	if opts.PinnedBytes >= 0 {
		d.pinLimit = max(1, opts.PinnedBytes-2*opts.ChunkBytes-stagingShare)
	}
}

// pinnedBytes is the pinned memory of the engine's ring and staging.
func (d *devEngine) pinnedBytes() int64 {
	return int64(d.bufs.ring.Bytes()) + int64(d.bufs.stage.Bytes())
}

// release frees the device arrays and the staging (after a failure, or to
// give the memory back); the next job allocates them again.
func (d *devEngine) release() {
	if d.stream != nil {
		d.stream.Synchronize()
	}
	gpurt.FreeAll(&d.bufs)
	// prim keeps its scratch (select's and sort's temporary storage) per
	// stream between calls; a failed or cancelled job leaves nothing held,
	// so it goes too (after the work on its stream, as FreeAll's arrays).
	if d.prim != nil {
		d.prim.ReleaseScratch()
	}
}

// heldBytes is the device memory the engine keeps between jobs (every
// device array of bufs).
func (d *devEngine) heldBytes() int64 { return gpurt.DeviceBytes(&d.bufs) }

func (d *devEngine) close() {
	if d.stream != nil {
		gpurt.Release(d.stream, &d.bufs)
		d.stream = nil
	}
	if d.prim != nil {
		d.prim.Close()
	}
	if d.own && d.dev != nil {
		d.dev.Close()
	}
}

// syncOnError synchronizes the stream when *err is set: a failed call
// returns with nothing of its still running (its copies into pinned host
// memory, which the caller may free or reuse, above all).
func (d *devEngine) syncOnError(err *error) {
	if *err != nil {
		d.stream.Synchronize()
	}
}

// blocksFor is the number of blocks of a grid-stride kernel whose blocks
// take per of n items each, at least one and at most most (the stride
// loop takes the rest).
func blocksFor(n, per, most int) int { return max(1, min((n+per-1)/per, most)) }

// grid is the launch grid of a grid-stride kernel over n items.
func (d *devEngine) grid(n int) cuda.Dim3 { return cuda.D1(blocksFor(n, deviceBlock, 1<<16)) }

// warpGrid is the number of blocks of a grid-stride kernel that gives each
// of n items a warp.
func warpGrid(n int) int { return blocksFor(n, deviceBlock/32, 1<<16) }

// devicePtr is s for a kernel argument, nil when s is empty (a zero Slice
// is no buffer).
func devicePtr[T cuda.Elem](s cuda.Slice[T]) any {
	if s.Len() == 0 {
		return nil
	}
	return s
}

// stages runs the stages between the load and the plan on the device:
// decode (decode), merge, gc and sizes. It returns the job's inputs on the
// host (the entries and keys brought back, for the plan, the blocks' first
// and last keys and the host's checks) and what the host's plan needs: the
// kept ids in order, which of them start a new user key, their plan
// entries, the bound on the blocks' contents, and the gc counts. The
// arrays returned are ws's; stage ends each stage (its time, the context,
// injected failures).
func (d *devEngine) stages(ctx context.Context, in *deviceInput, job *compaction.Job, spans []rangedel.Span, ws *workspace, stage func(string, error) error) (s *inputSet, kept []uint32, keptNew []bool, pe []planEntry, jumps *blockJumps, bound int, st gcStats, err error) {
	defer d.syncOnError(&err)
	s, lcp, err := d.decode(in, ws)
	if err != nil {
		return
	}
	if err = stage("load", nil); err != nil {
		return
	}
	n := len(s.ents)
	st.entriesIn = uint64(n)
	if n == 0 {
		return s, nil, nil, nil, nil, 0, st, stage("sizes", nil)
	}
	b, str := &d.bufs, d.stream
	dev := d.dev
	ents, keys := d.cur.ents, d.cur.keys
	snaps, err := b.snaps.Get(dev, str, len(job.Snapshots))
	if err != nil {
		return
	}
	snapWords := unsafe.Slice((*uint64)(unsafe.SliceData(job.Snapshots)), len(job.Snapshots))
	pairWords, rounds := mergePlan(s.runs)
	pairs, err := b.pairs.Get(dev, str, len(pairWords))
	if err != nil {
		return
	}
	if err = d.reserve(gpurt.Bytes[uint64](len(snapWords)) + gpurt.Bytes[uint64](len(pairWords))); err != nil {
		return
	}
	if err = gpurt.Upload(&b.stage, str, snaps, snapWords); err != nil {
		return
	}
	if err = gpurt.Upload(&b.stage, str, pairs, pairWords); err != nil {
		return
	}
	// Merge: from the ids in input order (decode_intervals wrote them), a
	// launch per round.
	src := d.cur.order.Sub(0, n)
	dst, err := b.dst.Get(dev, str, n)
	if err != nil {
		return
	}
	if d.radix {
		if err = d.radixSort(s, src, lcp); err != nil {
			return
		}
	} else {
		for _, r := range rounds {
			p := pairs.Sub(r.first*3, (r.first+r.pairs)*3)
			if err = d.fn.merge.Launch(cuda.D1(r.tiles), cuda.D1(deviceBlock), 0, str, src, dst, p, int32(r.pairs), ents, keys, lcp); err != nil {
				return
			}
			src, dst = dst, src
			if err = d.moveValuesAfter(src, len(s.arena)); err != nil {
				return
			}
		}
	}
	order := src
	if err = stage("merge", str.Synchronize()); err != nil {
		return
	}
	// Garbage collection: flags per position, the host's checks, then the
	// kept positions selected.
	keep, err := b.keep.Get(dev, str, n)
	if err != nil {
		return
	}
	newKey, err := b.newKey.Get(dev, str, n)
	if err != nil {
		return
	}
	check, err := b.check.Get(dev, str, n)
	if err != nil {
		return
	}
	pos, err := b.pos.Get(dev, str, n)
	if err != nil {
		return
	}
	sel, err := b.sel.Get(dev, str, n)
	if err != nil {
		return
	}
	count, err := b.count.Get(dev, str, 1)
	if err != nil {
		return
	}
	status, err := b.meta.Get(dev, str, 8)
	if err != nil {
		return
	}
	if err = status.Zero(str); err != nil {
		return
	}
	if err = d.fn.gc.Launch(d.grid(n), cuda.D1(deviceBlock), 0, str, order, int64(n), ents, keys, lcp, devicePtr(snaps),
		int32(len(job.Snapshots)), boolInt(len(spans) > 0), keep, newKey, check, pos, status); err != nil {
		return
	}
	// gc_flags' status: the order's check, and how many positions only the
	// host can decide.
	var gcStatus [3]uint32
	if err = copyBack(d, gcStatus[:], status.Sub(0, 3)); err != nil {
		return
	}
	if gcStatus[0] != 0 {
		err = errInputOrder
		return
	}
	if m := int(gcStatus[2]); m > 0 {
		// The positions only the host can decide: their entries' ids
		// selected with them, brought back, decided, and the verdicts
		// written into keep.
		ids, err2 := b.kept.Get(dev, str, n)
		if err = err2; err != nil {
			return
		}
		if err = prim.SelectFlaggedPairs(d.prim, str, pos, order, check, sel, ids, count); err != nil {
			return
		}
		hostIDs := make([]uint32, m)
		if err = copyBack(d, hostIDs, ids.Sub(0, m)); err != nil {
			return
		}
		verdict := make([]uint8, m)
		st.elided = s.checkPositions(hostIDs, verdict, job, spans)
		st.tombstonesElided = uint64(len(st.elided))
		v, err2 := b.v.Get(dev, str, m)
		if err = err2; err != nil {
			return
		}
		if err = gpurt.RingUpload(&b.ring, str, v, verdict); err != nil {
			return
		}
		if err = d.fn.apply.Launch(d.grid(m), cuda.D1(deviceBlock), 0, str, sel.Sub(0, m), v, int64(m), keep); err != nil {
			return
		}
	}
	if err = prim.SelectFlagged(d.prim, str, pos, keep, sel, count); err != nil {
		return
	}
	k, err := d.readCount(count)
	if err != nil {
		return
	}
	st.entriesOut = uint64(k)
	if err = stage("gc", nil); err != nil {
		return
	}
	kept = takePinned(ws, &ws.keptPin, &ws.kept, k)
	keptNew = takePinned(ws, &ws.keptNewPin, &ws.keptNew, k)
	pe = takePinned(ws, &ws.planPin, &ws.plan, k)
	jumps = &blockJumps{end: takePinned(ws, &ws.jumpEndPin, &ws.jumpEnd, k), size: takePinned(ws, &ws.jumpSizePin, &ws.jumpSize, k)}
	if k == 0 {
		return s, kept, keptNew, pe, jumps, 0, st, stage("sizes", nil)
	}
	// Sizes, the blocks that would start at each kept entry, and the kept
	// entries with their plan entries brought back.
	dKept, err := b.kept.Get(dev, str, k)
	if err != nil {
		return
	}
	dNew, err := b.keptNew.Get(dev, str, k)
	if err != nil {
		return
	}
	dPlan, err := b.plan.Get(dev, str, 2*k)
	if err != nil {
		return
	}
	dBound, err := b.bound.Get(dev, str, 1)
	if err != nil {
		return
	}
	dShared, err := b.shared.Get(dev, str, k)
	if err != nil {
		return
	}
	dNewKept, err := b.newK.Get(dev, str, k)
	if err != nil {
		return
	}
	dEnd, err := b.jumpEnd.Get(dev, str, k)
	if err != nil {
		return
	}
	dSize, err := b.jumpSize.Get(dev, str, k)
	if err != nil {
		return
	}
	if err = dBound.Zero(str); err != nil {
		return
	}
	opts := job.Env.WriterOptions.WithDefaults()
	if err = d.fn.sizes.Launch(d.grid(k), cuda.D1(deviceBlock), 0, str, sel.Sub(0, k), int64(k), order, newKey, ents, keys,
		dKept, dNew, dPlan, dShared, dNewKept, dBound); err != nil {
		return
	}
	if err = d.fn.blockEnds.Launch(d.grid(k), cuda.D1(deviceBlock), 0, str, dPlan, int64(k), uint32(opts.BlockSize), int32(opts.RestartInterval), dEnd, dSize); err != nil {
		return
	}
	// Which kept entries' user keys differ from the previous kept entry's
	// (those a table's filter holds, with its first): the host sizes each
	// table's filter from them (pipeline.encodeBlocks).
	fresh := takePinned(ws, &ws.keptFreshPin, &ws.keptFresh, k)
	var boundWord [1]uint64
	for _, e := range []error{
		download(d, &ws.keptPin, kept, dKept),
		download(d, &ws.keptNewPin, asBytes(keptNew), dNew),
		download(d, &ws.planPin, unsafe.Slice((*uint32)(unsafe.Pointer(&pe[0])), 2*k), dPlan),
		download(d, &ws.jumpEndPin, jumps.end, dEnd),
		download(d, &ws.jumpSizePin, jumps.size, dSize),
		download(d, &ws.keptFreshPin, asBytes(fresh), dNewKept),
		copyBack(d, boundWord[:], dBound), // (synchronizes the stream)
	} {
		if err = e; err != nil {
			return
		}
	}
	if boundWord[0] > math.MaxUint32 {
		err = errTooLarge
		return
	}
	c := &d.cur
	c.newKept, c.fresh = dNewKept, fresh
	c.kept, c.plan, c.shared = dKept, dPlan, dShared
	c.restartInterval = int32(opts.RestartInterval)
	c.crc = opts.Compression == sstable.NoCompression
	c.seal = opts.Compression == sstable.SnappyCompression && d.deviceSeal
	// (8 bytes more: the sealing reads a block's last bytes as the aligned
	// words that hold them, snappy.cuh's kReadPad.)
	if c.raw, err = b.raw.Get(dev, str, int(boundWord[0])+8); err != nil {
		return
	}
	return s, kept, keptNew, pe, jumps, int(boundWord[0]), st, stage("sizes", nil)
}

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

func boolInt(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

// readCount synchronizes the stream and returns count[0].
func (d *devEngine) readCount(count cuda.Slice[uint32]) (int, error) {
	var c [1]uint32
	if err := copyBack(d, c[:], count); err != nil {
		return 0, err
	}
	return int(c[0]), nil
}

// reserve synchronizes the stream, so that no staged copy is pending, and
// reserves total bytes of the staging (which may replace its memory).
func (d *devEngine) reserve(total int) error {
	if err := d.stream.Synchronize(); err != nil {
		return err
	}
	return d.bufs.stage.Reserve(d.dev, total)
}

// smallCopy is the most a copy of a job's own arrays takes of the staging:
// larger ones go through the ring, so that the staging's pinned memory stays
// small however large the job (Options.PinnedBytes).
const smallCopy = 64 << 10

// copyBack copies src into dst through the staging (or, past smallCopy,
// the ring), synchronously.
func copyBack[T cuda.Elem](d *devEngine, dst []T, src cuda.Slice[T]) error {
	if gpurt.Bytes[T](len(dst)) > smallCopy { // (the staging stays small)
		return gpurt.RingDownload(&d.bufs.ring, d.stream, dst, src)
	}
	if err := d.reserve(gpurt.Bytes[T](len(dst))); err != nil {
		return err
	}
	p, err := gpurt.Download(&d.bufs.stage, d.stream, dst, src)
	if err != nil {
		return err
	}
	if err := d.stream.Synchronize(); err != nil {
		return err
	}
	p.Finish()
	return nil
}

// checkPositions decides the positions the device left to the host, by the
// Go engine's rules (survives): verdict 1 for the entries that stay; it
// returns the entries elided. ids are the entries, in merged order.
func (s *inputSet) checkPositions(ids []uint32, verdict []uint8, job *compaction.Job, spans []rangedel.Span) []uint32 {
	snaps := job.Snapshots
	var elided atomic.Uint64
	hostpar.ForWorkers(len(ids), 1024, s.workers, func(_, lo, hi int) {
		var n uint64
		defer func() { elided.Add(n) }()
		for c := lo; c < hi; c++ {
			k := s.internalKey(ids[c])
			keep, elided := survives(k, compaction.StripeOf(snaps, k.SeqNum()), job, spans)
			verdict[c] = boolByte(keep)
			if elided {
				verdict[c] = 2 // (gathered below, then 0: dropped)
				n++
			}
		}
	})
	var out []uint32
	if n := elided.Load(); n > 0 {
		out = make([]uint32, 0, n)
		for c, v := range verdict {
			if v == 2 {
				out = append(out, ids[c])
				verdict[c] = 0
			}
		}
	}
	return out
}

// mergeRound is one launch of merge_round: pairs pairs from the pair
// list's entry first, over tiles tiles.
type mergeRound struct{ first, pairs, tiles int }

// mergePlan lays out every round of merging the runs pairwise (runs stay
// adjacent: a pair's output takes both ranges), as merge does: the pair
// list, 3 words a pair (start; na | nb<<32; first tile) as gpucompact.cu's
// MergePair, and the rounds.
func mergePlan(runs []run) ([]uint64, []mergeRound) {
	var words []uint64
	var rounds []mergeRound
	cur := append([]run(nil), runs...)
	for len(cur) > 1 {
		r := mergeRound{first: len(words) / 3}
		var next []run
		for i := 0; i < len(cur); i += 2 {
			a := cur[i]
			nb, end := 0, a.end
			if i+1 < len(cur) {
				nb, end = cur[i+1].end-cur[i+1].start, cur[i+1].end
			}
			na := a.end - a.start
			words = append(words, uint64(a.start), uint64(uint32(na))|uint64(uint32(nb))<<32, uint64(r.tiles))
			r.tiles += (na + nb + mergeTileItems - 1) / mergeTileItems
			r.pairs++
			next = append(next, run{a.start, end})
		}
		rounds = append(rounds, r)
		cur = next
	}
	return words, rounds
}

// deviceFatal says a device error left the context unusable (a kernel
// fault is sticky in CUDA: cuda.Error.Sticky): the engine turns itself off.
// Other driver errors (out of memory, a launch out of resources, an invalid
// value) fail the job alone, which falls back, and count toward
// MaxEngineFailures.
func deviceFatal(err error) bool {
	return cuda.IsSticky(err)
}

// blockDesc is gpucompact.cu's BlockDesc: one planned block for
// encode_blocks.
type blockDesc struct {
	rawAt                  uint64
	start, end, tableStart int32
	size                   uint32
}

// blockStats is gpucompact.cu's BlockStats: what encode_blocks reports of a
// block besides its bytes.
type blockStats struct {
	rawKeySize, rawValueSize, minSeq, maxSeq uint64
	deletions, status, crc                   uint32 // crc: unmasked, when the device checksums the stored block
	stored, typ                              uint32 // sealing: the stored length and compression (0: not sealed)
	_                                        uint32
}

// statWords is a blockStats in 8-byte words.
const statWords = int(unsafe.Sizeof(blockStats{}) / 8)

// radixSort orders the ids in order (the job's entries, in input order) as
// base.CompareInternal orders their keys with LSD radix passes of prim's
// stable sort (Options.Sort = SortRadix): the trailer (descending), the
// key's length past the common prefix, then each 8 bytes past it, last
// first (radix_key).
func (d *devEngine) radixSort(s *inputSet, order cuda.Slice[uint32], lcp cuda.Slice[uint32]) error {
	b, str, n := &d.bufs, d.stream, order.Len()
	prefix := [1]uint32{uint32(d.cur.prefix)}
	maxLen := uint32(0)
	for i := range s.ents {
		maxLen = max(maxLen, s.ents[i].keyLen)
	}
	words := max(1, (int(maxLen)-int(prefix[0])+7)/8)
	keys, err := b.radixKeys.Get(d.dev, str, n)
	if err != nil {
		return err
	}
	passes := []int{-2, -1}
	for w := words - 1; w >= 0; w-- {
		passes = append(passes, w)
	}
	for _, which := range passes {
		if err := d.fn.radixKey.Launch(d.grid(n), cuda.D1(deviceBlock), 0, str, order, int64(n), d.cur.ents, d.cur.keys, lcp, int32(which), keys); err != nil {
			return err
		}
		opt := prim.SortOptions{}
		if which == -1 {
			opt = prim.SortOptions{BeginBit: 0, EndBit: 32} // lengths fit 32 bits
		}
		if err := prim.SortPairs(d.prim, str, keys, order, opt); err != nil {
			return err
		}
		if err := d.moveValuesAfter(order, len(s.arena)); err != nil {
			return err
		}
	}
	return nil
}

// moveValuesAfter, with Options.MoveValues, copies every value into a new
// array in order's order (the ablation of key-value separation: what an
// engine that moves values with their keys does after each merge round).
// arenaLen bounds the values' bytes.
func (d *devEngine) moveValuesAfter(order cuda.Slice[uint32], arenaLen int) error {
	if !d.moveValues {
		return nil
	}
	b, str, n := &d.bufs, d.stream, order.Len()
	lens, err := b.valLens.Get(d.dev, str, n)
	if err != nil {
		return err
	}
	offs, err := b.valOffs.Get(d.dev, str, n+1)
	if err != nil {
		return err
	}
	dst, err := b.moved.Get(d.dev, str, max(1, arenaLen))
	if err != nil {
		return err
	}
	if err := d.fn.valueLens.Launch(d.grid(n), cuda.D1(deviceBlock), 0, str, order, int64(n), d.cur.ents, lens); err != nil {
		return err
	}
	if err := prim.ExclusiveScan(d.prim, str, lens, offs.Sub(0, n), offs.Sub(n, n+1)); err != nil {
		return err
	}
	grid := cuda.D1(max(1, min((n+deviceBlock/32-1)/(deviceBlock/32), 1<<16)))
	return d.fn.moveValues.Launch(grid, cuda.D1(deviceBlock), 0, str, order, int64(n), d.cur.ents, d.cur.arena, offs, dst)
}

// filterDesc is gpucompact.cu's FilterDesc: an output table's kept entries
// [start, end) and its filter's bits (nbits: 0 for a table without keys)
// and probes; tableFilters sets base and wordOff.
type filterDesc struct {
	start, end, base, wordOff, nbits, probes uint32
}

// filterPlan is a batch's share of the bloom filters: the tables listed
// (those with keys), their words and threads in all.
type filterPlan struct {
	descs        []filterDesc
	listed       []filterDesc
	words, total uint32
}

// planFilters lays out the filters of descs for one launch.
func planFilters(descs []filterDesc) filterPlan {
	fp := filterPlan{descs: descs}
	for _, f := range descs {
		if f.nbits == 0 || f.end <= f.start {
			continue
		}
		f.base, f.wordOff = fp.total, fp.words
		fp.total += f.end - f.start
		fp.words += (f.nbits + 31) / 32
		fp.listed = append(fp.listed, f)
	}
	return fp
}

// filters returns each table's filter as sstable's Writer lays it out —
// its bits, then the probes byte — or nil for a table without keys, from
// the launch's words.
func (fp *filterPlan) filters(host []uint32) [][]byte {
	out := make([][]byte, len(fp.descs))
	bits := asBytes(host)
	k := 0
	for i, f := range fp.descs {
		if f.nbits == 0 || f.end <= f.start {
			continue
		}
		at := 4 * int(fp.listed[k].wordOff)
		filter := make([]byte, f.nbits/8+1)
		copy(filter, bits[at:at+int(f.nbits/8)])
		filter[len(filter)-1] = byte(f.probes)
		out[i] = filter
		k++
	}
	return out
}

// crcTable returns record's CRC table on the device (uploaded once, and
// again after release). It may reserve the staging: call it before the
// caller's own reserve.
func (d *devEngine) crcTable() (cuda.Slice[uint32], error) {
	b := &d.bufs
	if b.crcTable.Cap() >= 256 {
		return b.crcTable.View(256), nil
	}
	t, err := b.crcTable.Get(d.dev, d.stream, 256)
	if err != nil {
		return t, err
	}
	if err := d.reserve(gpurt.Bytes[uint32](256)); err != nil {
		return t, err
	}
	table := record.CRCTable()
	return t, gpurt.Upload(&b.stage, d.stream, t, table[:])
}

// sealTarget is where encodeBatch's blocks are sealed (Snappy tables): the
// host's buffer for sealed blocks, its pinned memory if any, and each
// block's place in it (-1: none planned, the host seals it).
type sealTarget struct {
	buf []byte
	pin *pinned
	at  []int
}

// encode_seal_blocks runs blocks of sealWarps warps (deviceBlock threads),
// each of which seals the block it has just encoded with a hash table of
// sealTableBytes in shared memory (gpucompact.cu's kSealTableBytes: 4096
// uint16 positions, the table s2 uses for blocks under sealMaxBlock bytes,
// snappy.cuh's variant_for). Larger blocks (an entry past 16 KiB) are
// sealed on the host; the device checks the bound too (status 4).
const (
	sealWarps      = deviceBlock / 32
	sealTableBytes = 8192
	sealMaxBlock   = 16 << 10
)

// encodeBatch encodes planned blocks on the device (encode_blocks, a warp a
// block) and brings their bytes back into raw (at the same offsets as on
// the device), and their stats into stats. The blocks are consecutive:
// their bytes and their entries are each one range. When the job compresses with
// Snappy and seal is given, the device also seals the blocks it has room
// for (encode_seal_blocks: each warp seals the block it has just built, in
// the same launch) into seal.buf — every block's stored bytes, compressed
// or not — and their stats say so (stored > 0); when it seals every block
// of the batch, their contents are not brought back (rawBack false: the
// host writes the sealed bytes only).
// In the same launch it builds the bloom filters of the tables in filters
// (a thread per kept entry, atomicOr into zeroed words whose little-endian
// bytes are the Writer's filter) and returns them in their order, each
// nil for a table without keys; there may be no blocks, or no filters.
// stages must have run.
func (d *devEngine) encodeBatch(descs []blockDesc, stats []blockStats, raw []byte, rawPin *pinned, seal *sealTarget, filters []filterDesc) (_ [][]byte, rawBack bool, err error) {
	defer d.syncOnError(&err)
	b, str, dev, c := &d.bufs, d.stream, d.dev, &d.cur
	nb := len(descs)
	fp := planFilters(filters)
	if nb == 0 && len(fp.listed) == 0 {
		return fp.filters(nil), false, nil
	}
	var rawLo, rawHi uint64
	if nb > 0 {
		first, last := descs[0], descs[nb-1]
		rawLo, rawHi = first.rawAt, last.rawAt+uint64(last.size)
	}
	if rawHi+8 > uint64(c.raw.Len()) {
		return nil, false, fmt.Errorf("gpucompact: planned blocks past the device array (%d of %d bytes)", rawHi, c.raw.Len())
	}
	dDescs, err := b.descs.Get(dev, str, max(1, 3*nb))
	if err != nil {
		return nil, false, err
	}
	dStats, err := b.stats.Get(dev, str, statWords*max(1, nb))
	if err != nil {
		return nil, false, err
	}
	if nb > 0 {
		if err := dStats.Zero(str); err != nil {
			return nil, false, err
		}
	}
	var fDescs, fWords cuda.Slice[uint32]
	var fHost []uint32
	if len(fp.listed) > 0 {
		if fDescs, err = b.filterDescs.Get(dev, str, 6*len(fp.listed)); err != nil {
			return nil, false, err
		}
		if fWords, err = b.filterWords.Get(dev, str, int(fp.words)); err != nil {
			return nil, false, err
		}
		if err := fWords.Zero(str); err != nil {
			return nil, false, err
		}
		fHost = make([]uint32, fp.words)
	}
	var descWords, statsHost []uint64
	if nb > 0 {
		descWords = unsafe.Slice((*uint64)(unsafe.Pointer(&descs[0])), 3*nb)
		statsHost = unsafe.Slice((*uint64)(unsafe.Pointer(&stats[0])), statWords*nb)
	}
	sp, err := d.planSeal(descs, seal)
	if err != nil {
		return nil, false, err
	}
	// The CRC table for encode_blocks (blocks stored as they are) and
	// encode_seal_blocks; none when the host seals every block.
	var crcTable, encodeCRC cuda.Slice[uint32]
	if nb > 0 && (c.crc || sp.n > 0) {
		if crcTable, err = d.crcTable(); err != nil { // (before the staging is reserved: it may upload)
			return nil, false, err
		}
	}
	if nb > 0 && c.crc {
		encodeCRC = crcTable
	}
	pinnedRaw := rawPin.holds(raw)
	// (Filters larger than a small copy come back through the ring.)
	ringWords := gpurt.Bytes[uint32](int(fp.words)) > smallCopy
	staged := gpurt.Bytes[uint64](3*nb) + gpurt.Bytes[uint64](statWords*nb) + sp.staged() +
		gpurt.Bytes[uint32](6*len(fp.listed))
	if !ringWords {
		staged += gpurt.Bytes[uint32](int(fp.words))
	}
	if err := d.reserve(staged); err != nil {
		return nil, false, err
	}
	if nb > 0 {
		if d.editPlan != nil {
			d.editPlan(descs)
		}
		if err := gpurt.Upload(&b.stage, str, dDescs, descWords); err != nil {
			return nil, false, err
		}
	}
	if len(fp.listed) > 0 {
		if err := gpurt.Upload(&b.stage, str, fDescs, unsafe.Slice((*uint32)(unsafe.Pointer(&fp.listed[0])), 6*len(fp.listed))); err != nil {
			return nil, false, err
		}
	}
	// The launch's blocks: a warp a block to encode, then a thread a kept
	// entry of the filters.
	encodeGrid := 0
	if nb > 0 {
		encodeGrid = warpGrid(nb)
	}
	filterGrid := 0
	if fp.total > 0 {
		filterGrid = max(1, min((int(fp.total)+deviceBlock-1)/deviceBlock, 1<<16))
	}
	// The CRC table: to checksum blocks stored as they are, or to seal.
	crcArg := devicePtr(encodeCRC)
	if sp.n > 0 {
		crcArg = crcTable
	}
	args := []any{devicePtr(dDescs.Sub(0, 3*nb)), int32(nb), c.kept, c.plan, c.shared, c.newKept,
		c.ents, c.keys, c.arena, c.restartInterval, c.raw, dStats, crcArg,
		int32(encodeGrid), devicePtr(fDescs), int32(len(fp.listed)), int64(fp.total), devicePtr(fWords)}
	var pend [3]gpurt.Pending
	if sp.n == 0 {
		err = d.fn.encode.Launch(cuda.D1(encodeGrid+filterGrid), cuda.D1(deviceBlock), 0, str, args...)
	} else {
		pend[1], err = d.encodeSealed(&sp, encodeGrid+filterGrid, args)
	}
	if err != nil {
		return nil, false, err
	}
	rawBack = nb > 0 && sp.n < nb
	if nb > 0 {
		if pend[0], err = gpurt.Download(&b.stage, str, statsHost, dStats); err != nil {
			return nil, false, err
		}
	}
	if rawBack {
		if pinnedRaw {
			err = cuda.CopyToHostAsync(rawPin.mem, int(rawLo), c.raw.Sub(int(rawLo), int(rawHi)), str)
		} else {
			err = gpurt.RingDownload(&b.ring, str, raw[rawLo:rawHi], c.raw.Sub(int(rawLo), int(rawHi)))
		}
		if err != nil {
			return nil, false, err
		}
	}
	if len(fp.listed) > 0 {
		if ringWords {
			err = gpurt.RingDownload(&b.ring, str, fHost, fWords)
		} else {
			pend[2], err = gpurt.Download(&b.stage, str, fHost, fWords)
		}
		if err != nil {
			return nil, false, err
		}
	}
	if err := str.Synchronize(); err != nil {
		return nil, false, err
	}
	for _, p := range pend {
		p.Finish()
	}
	return fp.filters(fHost), rawBack, nil
}

// sealPlan is the device's share of a batch's sealing: n blocks, placed in
// the device's sealed buffer at at[i] (~0: the host's), which is the host's
// seal.buf[lo:hi].
type sealPlan struct {
	n      int
	at     []uint64
	lo, hi int
	target *sealTarget
	pinned bool
}

// staged is what the plan moves through the staging.
func (sp *sealPlan) staged() int {
	if sp.n == 0 {
		return 0
	}
	return gpurt.Bytes[uint64](len(sp.at))
}

// planSeal picks the blocks of a batch the device seals: with Snappy, those
// the walk planned room for and whose hash table fits the device's.
func (d *devEngine) planSeal(descs []blockDesc, seal *sealTarget) (sealPlan, error) {
	var sp sealPlan
	if !d.cur.seal || seal == nil {
		return sp, nil
	}
	if len(seal.at) != len(descs) {
		return sp, fmt.Errorf("gpucompact: %d seal places for %d blocks", len(seal.at), len(descs))
	}
	sp.target, sp.lo, sp.hi = seal, -1, -1
	sp.at = d.sealAtHost[:0]
	for i, bd := range descs {
		a := seal.at[i]
		if a < 0 || bd.size >= sealMaxBlock {
			sp.at = append(sp.at, ^uint64(0))
			continue
		}
		end := a + sstable.SealBound(sstable.SnappyCompression, int(bd.size))
		if end > len(seal.buf) {
			return sealPlan{}, fmt.Errorf("gpucompact: a block's seal place [%d, %d) past the buffer's %d bytes", a, end, len(seal.buf))
		}
		if sp.lo < 0 {
			sp.lo = a
		}
		if a < sp.hi { // (the walk places them one after another)
			return sealPlan{}, fmt.Errorf("gpucompact: seal places overlap (%d before the last one's end %d)", a, sp.hi)
		}
		sp.hi = end
		sp.at = append(sp.at, uint64(a))
		sp.n++
	}
	d.sealAtHost = sp.at
	if sp.n == 0 {
		return sealPlan{}, nil
	}
	for i := range sp.at {
		if sp.at[i] != ^uint64(0) {
			sp.at[i] -= uint64(sp.lo)
		}
	}
	sp.pinned = seal.pin.holds(seal.buf)
	return sp, nil
}

// encodeSealed launches encode_seal_blocks over a batch (args: encode_blocks'
// arguments, the CRC table given) and enqueues the copy of its sealed blocks
// back into the host's buffer.
func (d *devEngine) encodeSealed(sp *sealPlan, grid int, args []any) (gpurt.Pending, error) {
	b, str, dev := &d.bufs, d.stream, d.dev
	var none gpurt.Pending
	dAt, err := b.sealAt.Get(dev, str, len(sp.at))
	if err != nil {
		return none, err
	}
	dSealed, err := b.sealed.Get(dev, str, sp.hi-sp.lo)
	if err != nil {
		return none, err
	}
	if err := gpurt.Upload(&b.stage, str, dAt, sp.at); err != nil {
		return none, err
	}
	args = append(args, dAt, dSealed, uint32(sstable.SnappyCompression))
	shared := sealWarps * sealTableBytes
	if d.dev.Emulated() {
		shared = 0 // (the CPU emulation has static shared memory only: gpucompact.cu declares the tables so)
	}
	if err := d.fn.encodeSeal.Launch(cuda.D1(grid), cuda.D1(deviceBlock), shared, str, args...); err != nil {
		return none, err
	}
	if sp.pinned { // (holds: buf starts the pinned memory)
		return none, cuda.CopyToHostAsync(sp.target.pin.mem, sp.lo, dSealed, str)
	}
	return none, gpurt.RingDownload(&b.ring, str, sp.target.buf[sp.lo:sp.hi], dSealed)
}

// upload enqueues the copy of src, an array of the workspace, into dst on
// the engine's stream: straight from pin's memory when src lives there,
// else through the ring (src may be reused when it returns).
func upload[T cuda.Elem](d *devEngine, pin *pinned, dst cuda.Slice[T], src []T) error {
	if len(src) == 0 {
		return nil
	}
	if !pin.holds(asBytes(src)) {
		return gpurt.RingUpload(&d.bufs.ring, d.stream, dst, src)
	}
	db, err := cuda.View[uint8](dst.Buffer(), int(dst.Ptr()-dst.Buffer().Ptr()), int(dst.Bytes()))
	if err != nil {
		return err
	}
	return cuda.CopyToDeviceAsync(db, pin.mem, 0, d.stream)
}

// arenaUpload sends a job's arena up to the device range by range as the
// host fills it, on a goroutine of its own, so that the copies overlap the
// reading of the rest; adjacent ranges that are ready together go in one
// copy: by DMA from the arena when it is pinned, else through the engine's
// ring (which nothing else uses until decode). decode then finds the arena
// there.
type arenaUpload struct {
	d     *devEngine
	pin   *pinned // nil: the arena is in plain memory
	arena []byte
	dst   cuda.Slice[uint8]
	mu    sync.Mutex
	todo  [][2]uint32 // guarded by mu: ranges ready to go
	shut  bool        // guarded by mu: no more ranges
	wake  chan struct{}
	exit  chan struct{}
	err   error // the first failed copy (read after exit)
}

// startArenaUpload starts sending arena up (nil for an empty one).
func (d *devEngine) startArenaUpload(ws *workspace, arena []byte) (*arenaUpload, error) {
	var pin *pinned
	if ws.arenaPin.holds(arena) {
		pin = &ws.arenaPin
	}
	return d.startUpload(&d.bufs.arena, arena, pin)
}

// startUpload starts sending src up into buf's first len(src) elements, by
// DMA from pin's memory (which holds src) or else through the ring (nil
// for an empty src).
func (d *devEngine) startUpload(buf *gpurt.Buf[uint8], src []byte, pin *pinned) (*arenaUpload, error) {
	if len(src) == 0 {
		return nil, nil
	}
	dst, err := buf.Get(d.dev, d.stream, len(src))
	if err != nil {
		return nil, err
	}
	u := &arenaUpload{d: d, arena: src, dst: dst, pin: pin, wake: make(chan struct{}, 1), exit: make(chan struct{})}
	go u.run()
	return u, nil
}

// piece says arena[lo:hi] is ready.
func (u *arenaUpload) piece(lo, hi uint32) {
	u.mu.Lock()
	u.todo = append(u.todo, [2]uint32{lo, hi})
	u.mu.Unlock()
	select {
	case u.wake <- struct{}{}:
	default:
	}
}

func (u *arenaUpload) run() {
	defer close(u.exit)
	var batch [][2]uint32
	for {
		u.mu.Lock()
		batch, u.todo = append(batch[:0], u.todo...), u.todo[:0]
		shut := u.shut
		u.mu.Unlock()
		slices.SortFunc(batch, func(a, b [2]uint32) int { return cmp.Compare(a[0], b[0]) })
		for i := 0; i < len(batch) && u.err == nil; {
			lo, hi := batch[i][0], batch[i][1]
			for i++; i < len(batch) && batch[i][0] == hi; i++ {
				hi = batch[i][1]
			}
			if u.pin != nil { // (holds: arena starts the pinned memory)
				u.err = cuda.CopyToDeviceAsync(u.dst.Sub(int(lo), int(hi)), u.pin.mem, int(lo), u.d.stream)
			} else {
				u.err = gpurt.RingUpload(&u.d.bufs.ring, u.d.stream, u.dst.Sub(int(lo), int(hi)), u.arena[lo:hi])
			}
		}
		if shut && len(batch) == 0 {
			return
		}
		if !shut {
			<-u.wake
		}
	}
}

// finish waits until every range reported has been sent (enqueued on the
// engine's stream), and with sync until the copies are done (the job
// failed: the arena may be reused). It returns the first failed copy's
// error.
func (u *arenaUpload) finish(sync bool) error {
	u.mu.Lock()
	u.shut = true
	u.mu.Unlock()
	select {
	case u.wake <- struct{}{}:
	default:
	}
	<-u.exit
	if sync {
		if err := u.d.stream.Synchronize(); err != nil && u.err == nil {
			u.err = err
		}
	}
	return u.err
}

// decode decodes the job's input blocks on the device (gpucompact.cu's
// decode kernels): the arena goes up, the blocks' restart intervals are
// counted, scanned and decoded into the entries and keys, the runs laid
// out, the merge keys set; the entries and keys come back into ws's
// (pinned) arrays for the host. It returns the inputs and the job's common
// prefix length on the device. A block the device flags is decoded again on
// the host (deviceInput.recheck): its corruption error, or
// errIrregularBlock.
func (d *devEngine) decode(in *deviceInput, ws *workspace) (_ *inputSet, _ cuda.Slice[uint32], err error) {
	b, str, dev := &d.bufs, d.stream, d.dev
	defer d.syncOnError(&err)
	var none cuda.Slice[uint32]
	nb := len(in.blocks) / 2
	s := &inputSet{workers: ws.workers, arena: in.arena}
	arena, err := b.arena.Get(dev, str, max(1, len(in.arena)))
	if err != nil {
		return nil, none, err
	}
	meta, err := b.meta.Get(dev, str, 8) // status, least flagged block, intervals, -, -, a stray key, the key bytes (64 bits)
	if err != nil {
		return nil, none, err
	}
	// The job's common key prefix, from its tables' bounds, for the merge
	// keys decode_intervals sets: its length, then its bytes.
	prefix := jobPrefix(in)
	lcpWords := make([]uint32, 1+(len(prefix)+3)/4)
	lcpWords[0] = uint32(len(prefix))
	copy(asBytes(lcpWords[1:]), prefix)
	d.cur.prefix = len(prefix)
	lcp, err := b.lcp.Get(dev, str, len(lcpWords))
	if err != nil {
		return nil, none, err
	}
	d.cur.arena = arena
	blocks, err := b.blocks.Get(dev, str, max(2, len(in.blocks)))
	if err != nil {
		return nil, none, err
	}
	var table cuda.Slice[uint32] // record's CRC table, for block_intervals and inflate_blocks (loaded before the staging is reserved)
	if len(in.crcs) > 0 || len(in.inflate) > 0 {
		if table, err = d.crcTable(); err != nil {
			return nil, none, err
		}
	}
	staged := gpurt.Bytes[uint32](8) + gpurt.Bytes[uint32](len(lcpWords))
	if err := d.reserve(staged); err != nil {
		return nil, none, err
	}
	sendArena := func() error {
		if in.uploaded {
			return nil // (arenaUpload sent it while it was loaded)
		}
		return upload(d, &ws.arenaPin, arena.Sub(0, len(in.arena)), in.arena)
	}
	for _, err := range []error{
		sendArena(),
		gpurt.RingUpload(&b.ring, str, blocks.Sub(0, len(in.blocks)), in.blocks), // (the places, and below the checksums' and inflations' lists: the job's size, through the ring)
		gpurt.Upload(&b.stage, str, meta, []uint32{0, math.MaxUint32, 0, 0, 0, 0, 0, 0}),
		gpurt.Upload(&b.stage, str, lcp, lcpWords),
	} {
		if err != nil {
			return nil, none, err
		}
	}
	if ni := len(in.inflate) / 7; ni > 0 {
		// The blocks of tables stored with Snappy: their stored bytes go
		// up (by DMA when pinned, else through the ring), and the device
		// checks and decompresses them into
		// their places in the arena; a mismatch or a block that does not
		// decode flags it, as damage the decoding finds does.
		stored, err := b.stored.Get(dev, str, len(in.regions))
		if err != nil {
			return nil, none, err
		}
		if !in.regionsUploaded { // (else they went up as they were read)
			if err := upload(d, &ws.regionsPin, stored, in.regions); err != nil {
				return nil, none, err
			}
		}
		infl, err := b.inflate.Get(dev, str, len(in.inflate))
		if err != nil {
			return nil, none, err
		}
		if err := gpurt.RingUpload(&b.ring, str, infl, in.inflate); err != nil {
			return nil, none, err
		}
		if err := d.fn.inflate.Launch(cuda.D1(warpGrid(ni)), cuda.D1(deviceBlock), 0, str, infl, int32(ni), stored, arena, table, meta); err != nil {
			return nil, none, err
		}
	}
	var crcs cuda.Slice[uint32]
	if nc := len(in.crcs); nc > 0 {
		// The checksums of the blocks the host copied unchecked, which
		// block_intervals checks: a mismatch flags the block, as damage
		// the decoding finds does.
		if crcs, err = b.crcs.Get(dev, str, nc); err != nil {
			return nil, none, err
		}
		if err := gpurt.RingUpload(&b.ring, str, crcs, in.crcs); err != nil {
			return nil, none, err
		}
	}
	var m [8]uint32
	// check reads the meta words back and rechecks the least flagged block.
	check := func() error {
		if err := copyBack(d, m[:], meta); err != nil {
			return err
		}
		if m[0] != 0 {
			return in.recheck(int(m[1]))
		}
		if m[5] != 0 {
			return errInputOrder
		}
		return nil
	}
	var n, ni int
	var keyBytes uint64
	var ibaseHost []uint32
	var baseHost []uint64
	if nb > 0 {
		nint, err := b.nint.Get(dev, str, nb)
		if err != nil {
			return nil, none, err
		}
		ibase, err := b.ibase.Get(dev, str, nb)
		if err != nil {
			return nil, none, err
		}
		if err := d.fn.intervals.Launch(d.grid(max(nb, len(in.crcs)/4)), cuda.D1(deviceBlock), 0, str, blocks, int32(nb), arena, nint,
			devicePtr(crcs), int32(len(in.crcs)/4), devicePtr(table), meta); err != nil {
			return nil, none, err
		}
		if err := prim.ExclusiveScan(d.prim, str, nint, ibase, meta.Sub(2, 3)); err != nil {
			return nil, none, err
		}
		if err := check(); err != nil {
			return nil, none, err
		}
		ni = int(m[2])
		if ni > 0 {
			// Each interval's entries and key bytes as one word (low and
			// high half), scanned once: its first entry and key byte.
			counts, err := b.ikeys.Get(dev, str, ni)
			if err != nil {
				return nil, none, err
			}
			base, err := b.keyBase.Get(dev, str, ni+1)
			if err != nil {
				return nil, none, err
			}
			if err := d.fn.scan.Launch(d.grid(ni), cuda.D1(deviceBlock), 0, str, blocks, int32(nb), ibase, int64(ni), arena, counts, meta); err != nil {
				return nil, none, err
			}
			if err := prim.ExclusiveScan(d.prim, str, counts, base.Sub(0, ni), base.Sub(ni, ni+1)); err != nil {
				return nil, none, err
			}
			if err := check(); err != nil {
				return nil, none, err
			}
			if keyBytes = uint64(m[6]) | uint64(m[7])<<32; keyBytes > math.MaxUint32 {
				return nil, none, errTooLarge
			}
			ibaseHost, baseHost = make([]uint32, nb), make([]uint64, ni+1)
			if err := copyBack(d, ibaseHost, ibase); err != nil {
				return nil, none, err
			}
			if err := copyBack(d, baseHost, base); err != nil {
				return nil, none, err
			}
			if n = int(uint32(baseHost[ni])); n > math.MaxInt32 {
				return nil, none, errTooLarge
			}
			if d.cur.ents, err = b.ents.Get(dev, str, 4*max(1, n)); err != nil {
				return nil, none, err
			}
			if d.cur.keys, err = b.keys.Get(dev, str, max(1, int(keyBytes))); err != nil {
				return nil, none, err
			}
			if d.cur.order, err = b.src.Get(dev, str, max(1, n)); err != nil {
				return nil, none, err
			}
			if err := d.fn.decode.Launch(d.grid(ni), cuda.D1(deviceBlock), 0, str, blocks, int32(nb), ibase, int64(ni), arena,
				base, lcp, d.cur.ents, d.cur.keys, d.cur.order, meta); err != nil {
				return nil, none, err
			}
		}
	}
	// The runs, in entries: a run ends where the entries of the block after
	// its last begin.
	entryAt := func(blk int) int {
		if n == 0 || blk >= nb || int(ibaseHost[blk]) >= ni {
			return n
		}
		return int(uint32(baseHost[ibaseHost[blk]]))
	}
	start := 0
	for _, e := range in.runEnds {
		if end := entryAt(e); end > start {
			s.runs = append(s.runs, run{start, end})
			start = end
		}
	}
	s.ents = takePinned(ws, &ws.entsPin, &ws.ents, n)
	s.keys = takePinned(ws, &ws.keysPin, &ws.keys, int(keyBytes))
	if n == 0 {
		return s, lcp, check()
	}
	// The entries and keys come back for the host.
	words := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(s.ents))), 4*n)
	if err := download(d, &ws.entsPin, words, d.cur.ents.Sub(0, 4*n)); err != nil {
		return nil, none, err
	}
	if err := download(d, &ws.keysPin, s.keys, d.cur.keys.Sub(0, len(s.keys))); err != nil {
		return nil, none, err
	}
	return s, lcp, check()
}

// jobPrefix is the common prefix of the least smallest and the greatest
// largest user key of the job's input tables: every key of a table lies
// between its bounds, so every key the job decodes starts with it
// (decode_intervals flags one that does not). The Go engine's setK0 takes
// the prefix from the runs' first and last keys, which the device has only
// after decoding; this one may be shorter, which orders the same.
func jobPrefix(in *deviceInput) []byte {
	var lo, hi []byte
	var last *loadTable
	first := true
	for _, r := range in.refs {
		t := r.p.t
		if t == last {
			continue
		}
		last = t
		if a := t.f.Smallest.UserKey; first || bytes.Compare(a, lo) < 0 {
			lo = a
		}
		if z := t.f.Largest.UserKey; first || bytes.Compare(z, hi) > 0 {
			hi = z
		}
		first = false
	}
	n := 0
	for n < len(lo) && n < len(hi) && lo[n] == hi[n] {
		n++
	}
	return lo[:n]
}

// download enqueues the copy of src into dst, an array of the workspace,
// on the engine's stream: straight into pin's memory when dst lives there
// (read it after the stream is synchronized), else through the ring,
// synchronously.
func download[T cuda.Elem](d *devEngine, pin *pinned, dst []T, src cuda.Slice[T]) error {
	if len(dst) == 0 {
		return nil
	}
	if !pin.holds(asBytes(dst)) {
		return gpurt.RingDownload(&d.bufs.ring, d.stream, dst, src)
	}
	sb, err := cuda.View[uint8](src.Buffer(), int(src.Ptr()-src.Buffer().Ptr()), int(src.Bytes()))
	if err != nil {
		return err
	}
	return cuda.CopyToHostAsync(pin.mem, 0, sb, d.stream)
}
