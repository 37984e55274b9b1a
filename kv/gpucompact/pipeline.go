package gpucompact

import (
	"context"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/warpkit/warpkit/internal/hostpar"
	"github.com/warpkit/warpkit/kv/compaction"
	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/internal/rangedel"
	"github.com/warpkit/warpkit/kv/manifest"
	"github.com/warpkit/warpkit/kv/sstable"
	"github.com/warpkit/warpkit/kv/vfs"
)

// blockJob is one planned data block: kept[start:end] of output table t
// (whose first entry is kept[tableStart]), size bytes of contents going to
// raw[rawAt:], room to compress it at sealed[sealedAt:] (-1: none
// reserved); full says it ended for reaching the block size.
type blockJob struct {
	t                     *outTable
	start, end            int
	tableStart            int
	size, rawAt, sealedAt int
	full                  bool
}

// outTable is one output table while the job runs: its file, its range of
// the job's blocks, and what its writer made of it.
type outTable struct {
	num          base.FileNum
	f            vfs.File
	start        int    // its first kept entry
	lower, upper []byte // bounds of its range tombstones (upper set at its end)
	firstBlock   int
	endEntry     int          // one past its last kept entry (set by the walk at its end)
	endBlock     atomic.Int64 // one past its last block; -1 while the plan is in it
	// With the CUDA engine and bloom filters: the table's filter, built on
	// the device once the table has ended (nil: no keys), and whether it
	// has been (set before a wake-up of notify).
	filter     []byte
	filterDone atomic.Bool
	notify     chan struct{} // a block of the table got ready, the table ended, or the job stops
	meta       *manifest.FileMetadata
	err        error
}

// pipeline runs the last part of a job: the plan walk (on the caller's
// goroutine) hands each block, as soon as it is planned, to encoders on
// every core, and each output table, as soon as it starts, to a writer
// goroutine that writes its blocks in order as they are encoded. The walk,
// the encoding and the writing overlap; the walk is the job's one
// sequential pass, and the cores encode behind it.
//
// It is the plan's sink (planSink). Blocks are published to the encoders
// in groups (under mu); encoders and writers read a block only after it is
// published, and an encoded block only after its ready flag.
type pipeline struct {
	sealAt   []int // encodeBlocks' scratch: its blocks' sealedAt
	ctx      context.Context
	s        *inputSet
	job      *compaction.Job
	opts     sstable.WriterOptions
	kept     []uint32
	outSpans []rangedel.Span
	failAt   func(stage string) error
	raw      []byte
	sealed   []byte
	hashes   []uint32
	// dev, for the CUDA engine, encodes the blocks (deviceEncode); the
	// encoders then seal them.
	dev *devEngine

	// The walk's own state.
	nb              int // blocks planned
	rawAt, sealedAt int
	cur             *outTable
	tables          []*outTable // appended by the walk under mu (tablesSoFar)

	// The planned blocks, in chunks the walk adds as it goes (from ws,
	// kept between jobs). Blocks below published are readable by every
	// goroutine; a block's encoding once its ready flag is set.
	chunks []*blockChunk
	ws     *workspace

	mu        sync.Mutex
	cond      *sync.Cond   // published moved, the plan ended, or the job stops
	published int          // guarded by mu
	pub       atomic.Int64 // published, for the writers
	planned   bool         // guarded by mu: the walk has ended
	// With dev: the walk hands its blocks to deviceEncode (walked), which
	// publishes them encoded, and says when it has published its last
	// (devEnded), or failed (devErr).
	walked   int        // guarded by mu
	ended    int        // guarded by mu: tables the walk has ended (deviceEncode builds their filters)
	devEnded bool       // guarded by mu
	devCond  *sync.Cond // walked moved, the plan ended, or the job stops
	devErr   error
	// deviceEncode's own account (read after the encoders are done): the
	// time in its batches, how many, and when the last ended.
	encTime    time.Duration
	encBatches int
	encEnd     time.Time

	next     atomic.Int64  // the next block to encode
	stop     atomic.Bool   // a failure or the context: encode and write no more
	stopped  chan struct{} // closed with stop (once: stopOnce)
	stopOnce sync.Once
	// open holds a token per output table created and not yet written:
	// the walk waits for one before it creates a table, so at most
	// cap(open) files are open at once however far it runs ahead.
	open     chan struct{}
	encDone  atomic.Bool // the encoders have returned
	encoders sync.WaitGroup
	writers  sync.WaitGroup
}

// publishEvery is how many planned blocks the walk hands the encoders at
// once.
const publishEvery = 16

// blockSlot is one planned block, its encoding, and whether that is ready.
// With the CUDA engine, dstats is what the device reported of it, and
// noRaw says its contents were not brought back (the device sealed it).
type blockSlot struct {
	job    blockJob
	enc    sstable.EncodedBlock
	err    error
	ready  atomic.Bool
	dstats blockStats
	noRaw  bool
}

// blockChunk holds chunkLen consecutive blocks of a job.
type blockChunk [chunkLen]blockSlot

const chunkLen = 512

// slot returns block i (its chunk exists).
func (p *pipeline) slot(i int) *blockSlot { return &p.chunks[i/chunkLen][i%chunkLen] }

func newPipeline(ctx context.Context, s *inputSet, job *compaction.Job, ws *workspace, dev *devEngine, opts sstable.WriterOptions, kept []uint32, contentsBound int, outSpans []rangedel.Span, failAt func(string) error) *pipeline {
	p := &pipeline{ctx: ctx, s: s, job: job, opts: opts, kept: kept, outSpans: outSpans, failAt: failAt, dev: dev,
		stopped: make(chan struct{}), open: make(chan struct{}, maxOpenTables(ws.workers))}
	p.cond = sync.NewCond(&p.mu)
	p.devCond = sync.NewCond(&p.mu)
	p.ws = ws
	p.chunks = make([]*blockChunk, (len(kept)+1)/chunkLen+1) // every block holds an entry
	p.raw = takePinned(ws, &ws.rawPin, &ws.raw, contentsBound)
	if opts.Compression != sstable.NoCompression {
		// Compressed blocks take a few bytes more than their contents at
		// worst; a block that finds no room left is sealed into new memory.
		// (Pinned when the device seals: its copies land there directly.)
		if dev != nil && dev.deviceSeal && opts.Compression == sstable.SnappyCompression {
			p.sealed = takePinned(ws, &ws.sealedPin, &ws.sealed, contentsBound+contentsBound/16+4096)
		} else {
			p.sealed = take(&ws.sealed, contentsBound+contentsBound/16+4096)
		}
	}
	if dev == nil { // (the device builds the filters itself)
		p.hashes = take(&ws.hashes, len(kept))
	}
	return p
}

// startEncoders starts an encoder per core (and, with dev, deviceEncode,
// and two encoders fewer: they only seal, and the walk and deviceEncode,
// the job's critical path, must not wait for a core).
func (p *pipeline) startEncoders() {
	n := hostpar.Workers(p.ws.workers)
	if p.dev != nil {
		p.encoders.Add(1)
		go p.deviceEncode()
		n = max(1, n-2)
	}
	for range n {
		p.encoders.Add(1)
		go p.encode()
	}
}

// deviceBatchMax is the most blocks deviceEncode encodes in one launch.
const deviceBatchMax = 4096

// deviceEncode (the CUDA engine) encodes the blocks the walk has planned on
// the device, in batches of whatever the walk has handed over since the
// last one (so batches grow while the device works), and publishes each
// batch to the encoders, which seal its blocks.
func (p *pipeline) deviceEncode() {
	defer p.encoders.Done()
	defer func() {
		p.mu.Lock()
		p.devEnded = true
		p.mu.Unlock()
		p.cond.Broadcast()
	}()
	descs := make([]blockDesc, 0, deviceBatchMax)
	stats := make([]blockStats, deviceBatchMax)
	bloom := p.opts.BloomBitsPerKey > 0
	filtered := 0 // tables whose filters are built
	var ended []*outTable
	for done := 0; ; {
		p.mu.Lock()
		for p.walked == done && !p.planned && !p.stop.Load() && (!bloom || p.ended == filtered) {
			p.devCond.Wait()
		}
		end, planned := min(p.walked, done+deviceBatchMax), p.planned
		ended = ended[:0]
		if bloom {
			ended = append(ended, p.tables[filtered:p.ended]...)
		}
		p.mu.Unlock()
		if p.stop.Load() || end == done && planned && len(ended) == 0 {
			return
		}
		if err := p.ctx.Err(); err != nil {
			p.abort()
			return
		}
		// The filters of the tables ended go in the batch's launch: they
		// need the tables' kept entries, not their blocks (their sizes
		// come from the entries' fresh flags).
		if !p.encodeBlocks(done, end, descs, stats, ended) {
			return
		}
		done = end
		filtered += len(ended)
	}
}

// encodeBlocks encodes blocks [done, end) on the device and publishes them
// to the encoders, and builds the filters of tables in the same launch and
// hands each to its table's writer (false: it failed, and aborted the job).
func (p *pipeline) encodeBlocks(done, end int, descs []blockDesc, stats []blockStats, tables []*outTable) bool {
	descs = descs[:0]
	p.sealAt = p.sealAt[:0]
	for i := done; i < end; i++ {
		b := &p.slot(i).job
		descs = append(descs, blockDesc{rawAt: uint64(b.rawAt), start: int32(b.start), end: int32(b.end), tableStart: int32(b.tableStart), size: uint32(b.size)})
		p.sealAt = append(p.sealAt, b.sealedAt)
	}
	fds := make([]filterDesc, 0, len(tables))
	for _, t := range tables {
		// The keys the Writer would hash: the table's first, and each
		// whose user key differs from the previous kept entry's.
		nh := 0
		if t.endEntry > t.start {
			nh = 1 + countTrue(p.dev.cur.fresh[t.start+1:t.endEntry])
		}
		nbytes, probes := sstable.FilterShape(nh, p.opts.BloomBitsPerKey)
		if nh == 0 {
			nbytes = 0 // no filter
		}
		fds = append(fds, filterDesc{start: uint32(t.start), end: uint32(t.endEntry), nbits: uint32(8 * nbytes), probes: uint32(probes)})
	}
	seal := &sealTarget{buf: p.sealed, pin: &p.ws.sealedPin, at: p.sealAt}
	t0 := time.Now()
	filters, rawBack, err := p.dev.encodeBatch(descs, stats[:len(descs)], p.raw, &p.ws.rawPin, seal, fds)
	p.encEnd = time.Now()
	p.encTime += p.encEnd.Sub(t0)
	p.encBatches++
	if err != nil {
		p.devErr = err
		p.abort()
		return false
	}
	for i := done; i < end; i++ {
		sl := p.slot(i)
		sl.dstats, sl.noRaw = stats[i-done], !rawBack
	}
	for i, t := range tables {
		t.filter = filters[i]
		t.filterDone.Store(true)
		wake(t.notify)
	}
	if end > done {
		p.mu.Lock()
		p.published = end
		p.pub.Store(int64(end))
		p.mu.Unlock()
		p.cond.Broadcast()
	}
	return true
}

// countTrue counts the true elements of b (bools are bytes of 0 or 1: a
// word's set bits are its true bytes).
func countTrue(b []bool) int {
	n := 0
	words := len(b) / 8
	if words > 0 {
		for _, w := range unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), words) {
			n += bits.OnesCount64(w)
		}
	}
	for _, v := range b[8*words:] {
		if v {
			n++
		}
	}
	return n
}

// finalLocked says no more blocks will be published (under mu).
func (p *pipeline) finalLocked() bool {
	if p.dev != nil {
		return p.devEnded
	}
	return p.planned
}

// encode takes published blocks in order and encodes each.
func (p *pipeline) encode() {
	defer p.encoders.Done()
	bb := sstable.NewBlockBuilder(p.opts.RestartInterval)
	for {
		i := int(p.next.Add(1) - 1)
		// A block already published is taken without the lock (pub is
		// stored after the block's slot is written): with the device
		// encoding, sealing a block is so little work that the encoders
		// otherwise queue on mu.
		if int64(i) >= p.pub.Load() || p.stop.Load() {
			p.mu.Lock()
			for i >= p.published && !p.finalLocked() && !p.stop.Load() {
				p.cond.Wait()
			}
			ok := i < p.published && !p.stop.Load()
			p.mu.Unlock()
			if !ok {
				return
			}
		}
		sl := p.slot(i)
		b := &sl.job
		if p.dev != nil {
			sl.enc, sl.err = p.s.sealDeviceBlock(sl, p.kept, p.opts, p.raw, p.sealed)
		} else {
			sl.enc, sl.err = p.s.encodeBlock(bb, b, p.kept, p.opts, p.raw, p.sealed, p.hashes)
		}
		if p.failAt != nil && sl.err == nil && b.start <= len(p.kept)/2 && len(p.kept)/2 < b.end {
			sl.err = p.failAt("encode") // the block in the middle of the job
		}
		if sl.err != nil || i%64 == 0 && p.ctx.Err() != nil {
			p.abort()
			return
		}
		sl.ready.Store(true)
		wake(b.t.notify)
	}
}

// wake sends c a wake-up unless one is pending.
func wake(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// maxOpenTables is how many output tables a job may have open at once:
// enough that the writers never wait for the walk, within the job's bound
// on its goroutines (Options.HostWorkers).
func maxOpenTables(workers int) int { return max(2, 2*hostpar.Workers(workers)) }

// abort stops the encoders, the writers and the walk.
func (p *pipeline) abort() {
	p.stop.Store(true)
	p.stopOnce.Do(func() { close(p.stopped) })
	p.mu.Lock()
	p.cond.Broadcast()
	p.devCond.Broadcast()
	p.mu.Unlock()
	for _, t := range p.tablesSoFar() {
		wake(t.notify)
	}
}

// tablesSoFar returns the tables the walk has started so far (under mu: an
// encoder that fails aborts while the walk may still be adding tables).
func (p *pipeline) tablesSoFar() []*outTable {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*outTable(nil), p.tables...)
}

// table starts an output table: its file (created in key order, so that
// file numbers ascend as compaction.CPU's do) and its writer.
func (p *pipeline) table(j int, lower []byte) error {
	// Wait for a table slot; the blocks planned so far go to the encoders
	// first, so the tables that hold the slots can finish.
	p.publish()
	select {
	case p.open <- struct{}{}:
	case <-p.stopped:
		return errSkipped
	}
	if p.stop.Load() {
		<-p.open
		return errSkipped
	}
	num, f, err := p.job.Env.CreateTable()
	if err != nil {
		<-p.open
		return err
	}
	t := &outTable{num: num, f: f, start: j, lower: lower, firstBlock: p.nb, notify: make(chan struct{}, 1)}
	t.endBlock.Store(-1)
	p.cur = t
	p.mu.Lock()
	p.tables = append(p.tables, t)
	p.mu.Unlock()
	p.writers.Add(1)
	go p.write(t)
	return nil
}

// block plans a data block of the open table.
func (p *pipeline) block(start, end, size int, full bool) {
	sealedAt := -1
	if bound := sstable.SealBound(p.opts.Compression, size); bound > 0 && p.sealedAt+bound <= len(p.sealed) {
		sealedAt = p.sealedAt
		p.sealedAt += bound
	}
	c := p.nb / chunkLen
	if p.chunks[c] == nil {
		if c < len(p.ws.chunks) {
			p.chunks[c] = p.ws.chunks[c]
		} else {
			p.chunks[c] = new(blockChunk)
			p.ws.chunks = append(p.ws.chunks, p.chunks[c])
		}
	}
	sl := p.slot(p.nb)
	sl.job = blockJob{t: p.cur, start: start, end: end, tableStart: p.cur.start, size: size, rawAt: p.rawAt, sealedAt: sealedAt, full: full}
	sl.err = nil
	sl.ready.Store(false)
	p.rawAt += size
	p.nb++
	if p.nb%publishEvery == 0 {
		p.publish()
	}
}

// end ends the open table.
func (p *pipeline) end(j int, upper []byte) {
	t := p.cur
	t.upper, t.endEntry = upper, j
	t.endBlock.Store(int64(p.nb))
	p.publish()
	// deviceEncode learns the table ended after its blocks are handed over
	// (it builds the filter in its next launch).
	p.mu.Lock()
	p.ended++
	p.mu.Unlock()
	p.devCond.Signal()
	wake(t.notify)
	p.cur = nil
}

// publish hands the planned blocks to the encoders (with dev, to
// deviceEncode).
func (p *pipeline) publish() {
	p.mu.Lock()
	if p.dev != nil {
		// Only deviceEncode waits for the walk: the encoders wait for it.
		p.walked = p.nb
		p.mu.Unlock()
		p.devCond.Signal()
		return
	}
	p.published = p.nb
	p.pub.Store(int64(p.nb))
	p.mu.Unlock()
	p.cond.Broadcast()
}

// planEnded says the walk is over (with err, when it failed): encoders
// drain what is published and return.
func (p *pipeline) planEnded(err error) {
	if err != nil {
		p.abort()
	}
	p.mu.Lock()
	p.planned = true
	if p.dev != nil {
		p.walked = p.nb
	} else {
		p.published = p.nb
		p.pub.Store(int64(p.nb))
	}
	p.mu.Unlock()
	p.cond.Broadcast()
	p.devCond.Broadcast()
}

// write writes table t: its blocks in order as they are encoded, then its
// index, filter and footer (compaction.FinishOutput).
func (p *pipeline) write(t *outTable) {
	defer p.writers.Done()
	defer func() { <-p.open }() // the table's slot
	w := sstable.NewWriter(t.f, p.job.Env.WriterOptions)
	// The table's bloom hashes are gathered at the start of its range of
	// p.hashes (each block's lie at its first entry: they only move down,
	// over the table's own blocks, already written) and its filter built
	// from them at the end, rather than appended block by block to the
	// Writer's growing array.
	bitsPerKey := p.job.Env.WriterOptions.BloomBitsPerKey
	devFilter := bitsPerKey > 0 && p.dev != nil // the device builds the filter (buildFilters)
	nh := 0
	var batch []sstable.EncodedBlock
	// encDone is read before the block's state is read again: the
	// encoders may have finished block k between a look at it and the look
	// at encDone, and only a look after encDone is final.
	for k := t.firstBlock; ; k++ {
		for {
			final := p.encDone.Load()
			if end := t.endBlock.Load(); end >= 0 && int64(k) >= end {
				var filter []byte
				switch {
				case devFilter:
					for !t.filterDone.Load() {
						if p.stop.Load() || final && !t.filterDone.Load() {
							t.f.Close()
							t.err = errSkipped
							return
						}
						<-t.notify
						final = p.encDone.Load()
					}
					filter = t.filter
				case bitsPerKey > 0 && nh > 0:
					filter = sstable.BuildFilter(p.hashes[t.start:t.start+nh], bitsPerKey)
				}
				if filter != nil {
					if err := w.SetFilter(filter); err != nil {
						t.f.Close()
						t.err = &stageError{"write", err}
						return
					}
				}
				var err error
				t.meta, err = compaction.FinishOutput(w, t.f, t.num, p.outSpans, t.lower, t.upper)
				if err != nil {
					t.err = &stageError{"write", err}
				}
				return
			}
			if int64(k) < p.pub.Load() && p.slot(k).ready.Load() { // (a later block's slot may hold the last job's)
				break
			}
			if p.stop.Load() || final {
				t.f.Close()
				t.err = errSkipped
				return
			}
			<-t.notify
		}
		// Block k and the table's ready blocks after it go in one call:
		// where the file writes vectors, the sealed bytes go to it from
		// where they lie, without the Writer's copy into its buffer.
		batch = batch[:0]
		for j := k; len(batch) < writeBatch; j++ {
			if j > k && (int64(j) >= p.pub.Load() || !p.slot(j).ready.Load() || p.slot(j).job.t != t) {
				break
			}
			enc := p.slot(j).enc
			if bitsPerKey > 0 {
				if !devFilter {
					nh += copy(p.hashes[t.start+nh:], enc.Hashes)
				}
				enc.Hashes = nil
			}
			batch = append(batch, enc)
		}
		if err := w.AddEncodedBlocks(batch); err != nil {
			t.f.Close()
			t.err = &stageError{"write", err}
			p.abort()
			return
		}
		k += len(batch) - 1
	}
}

// writeBatch is the most blocks a table's writer hands its Writer at once
// (two buffers each: 512 of writev's 1024).
const writeBatch = 256

// wait waits for the encoders and the writers, and returns the tables in
// key order, or the job's error: the first failure (an encoding error
// before the writes it stopped).
func (p *pipeline) wait() ([]*outTable, error) {
	p.encoders.Wait()
	p.encDone.Store(true)
	tables := p.tablesSoFar()
	for _, t := range tables {
		wake(t.notify)
	}
	p.writers.Wait()
	defer p.clearSlots()
	if p.devErr != nil && p.ctx.Err() == nil {
		return nil, &stageError{"device", p.devErr}
	}
	for i := range p.nb {
		if err := p.slot(i).err; err != nil {
			if isCorruption(err) || p.ctx.Err() != nil {
				return nil, err
			}
			return nil, &stageError{"encode", err}
		}
	}
	if err := p.ctx.Err(); err != nil {
		return nil, err
	}
	var skipped error
	for _, t := range tables {
		switch {
		case t.err == errSkipped:
			skipped = &stageError{"write", errSkipped}
		case t.err != nil:
			return nil, t.err
		}
	}
	if skipped != nil {
		return nil, skipped // (never: a table is skipped only after another failure, returned above)
	}
	return tables, nil
}

// clearSlots drops what the job's block slots point to (encoded blocks'
// keys and sealed copies, the tables), so that the workspace keeps no more
// than its arrays until the next job.
func (p *pipeline) clearSlots() {
	for i := range p.nb {
		sl := p.slot(i)
		sl.enc, sl.job.t = sstable.EncodedBlock{}, nil
	}
}
