package kv

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/warpkit/warpkit/kv/compaction"
	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/internal/memtable"
	"github.com/warpkit/warpkit/kv/manifest"
	"github.com/warpkit/warpkit/kv/sstable"
	"github.com/warpkit/warpkit/kv/vfs"
)

// flushLoop writes immutable memtables to L0, oldest first.
func (d *DB) flushLoop() {
	defer d.bgWG.Done()
	for {
		select {
		case <-d.bgCtx.Done():
			return
		case <-d.flushCh:
		}
		for d.flushOne() {
		}
	}
}

// flushOne flushes the oldest immutable memtable; it reports whether there
// may be more to do.
func (d *DB) flushOne() bool {
	d.mu.Lock()
	if len(d.mu.imm) == 0 || d.mu.bgErr != nil || d.bgCtx.Err() != nil {
		d.mu.Unlock()
		return false
	}
	mem := d.mu.imm[0]
	// Writers given the memtable before it was switched out may still be
	// applying their batches; once the last has finished, every batch in it
	// is visible (lastSeq below covers them).
	for mem.Writing() {
		d.mu.cond.Wait()
	}
	if d.mu.bgErr != nil || d.bgCtx.Err() != nil {
		d.mu.Unlock()
		return false
	}
	// Logs from the next memtable on are still needed after this flush.
	nextLog := d.mu.mem.LogNum()
	if len(d.mu.imm) > 1 {
		nextLog = d.mu.imm[1].LogNum()
	}
	d.mu.flushing = true
	lastSeq := base.SeqNum(d.visibleSeq.Load())
	d.mu.Unlock()

	ev := d.events()
	info := FlushInfo{JobID: d.nextJobID(), InputBytes: uint64(mem.Size())}
	if ev.FlushBegin != nil {
		ev.FlushBegin(info)
	}
	start := time.Now()
	meta, err := d.writeL0(mem)
	edit := &manifest.VersionEdit{LogNum: nextLog, LastSeq: lastSeq}
	if err == nil && meta != nil {
		edit.NewFiles = []manifest.NewFile{{Level: 0, Meta: meta}}
	}
	if err == nil {
		// On failure the edit may still be durable: keep the table (if the
		// next Open finds no version listing it, it moves it to lost/).
		err = d.vs.LogAndApply(edit)
	}
	elapsed := time.Since(start)
	if err != nil {
		err = fmt.Errorf("kv: flush of log %s: %w", mem.LogNum(), err)
	}
	info.Duration, info.Err = elapsed, err
	if err == nil && meta != nil {
		ti := tableInfo(meta)
		info.Output = &ti
	}
	// The End comes before the flush's result is published, so that a
	// Flush call returns after it.
	if ev.FlushEnd != nil {
		ev.FlushEnd(info)
	}
	if err == nil {
		var table FileNum
		var size uint64
		if meta != nil {
			table, size = meta.FileNum, meta.Size
		}
		d.opts.logger().Debug("kv: flush", "job", info.JobID, "log", mem.LogNum(), "memtable bytes", info.InputBytes,
			"table", table, "table bytes", size, "duration", elapsed)
	}

	d.mu.Lock()
	defer d.unlockReport()
	d.mu.flushing = false
	if err != nil {
		d.setBackgroundErrorLocked(err)
		return false
	}
	d.mu.imm = d.mu.imm[1:]
	d.updateReadStateLocked()
	d.m.flushes.Add(1)
	d.m.flushNanos.Add(int64(elapsed))
	if meta != nil {
		d.m.flushBytes.Add(int64(meta.Size))
		d.m.levels[0].bytesIn.Add(int64(meta.Size))
	}
	// The memtable's log holds nothing unflushed any more. If it is still
	// being synced and closed (a switch of logs does not wait for that),
	// its closer removes it when done.
	if _, closing := d.mu.closingLogs[mem.LogNum()]; closing {
		d.mu.closingLogs[mem.LogNum()] = true
	} else {
		d.addObsoleteFile(base.MakeFilename(base.FileTypeLog, mem.LogNum()))
	}
	d.mu.cond.Broadcast()
	d.maybeScheduleCompaction()
	return len(d.mu.imm) > 0
}

// writeL0 writes a memtable to a new table; nil metadata for an empty one.
func (d *DB) writeL0(mem *memtable.MemTable) (*manifest.FileMetadata, error) {
	if mem.Empty() {
		return nil, nil
	}
	it := mem.NewIter()
	if !it.First() && mem.RangeDels().Empty() {
		return nil, nil // only empty range deletions
	}
	num := d.vs.NewFileNum()
	meta, err := d.writeTable(num, func(w *sstable.Writer) error {
		sealer := d.flushSealer()
		if runs := min(d.opts.FlushWorkers, mem.Size()/flushRunBytes); runs > 1 || sealer != nil {
			if err := d.addRuns(w, it, max(runs, 1), sealer); err != nil {
				return err
			}
		} else {
			for ok := it.First(); ok; ok = it.Next() {
				if err := w.Add(it.Key(), it.Value()); err != nil {
					return err
				}
			}
		}
		for _, sp := range mem.RangeDels().Spans() {
			if err := w.AddRangeDel(sp); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := vfs.SyncDir(d.fs, d.dir); err != nil {
		d.removeFile(base.MakeFilename(base.FileTypeTable, num))
		return nil, fmt.Errorf("kv: sync directory: %w", err)
	}
	return meta, nil
}

// flushRunBytes is the least memtable a run of writeL0's takes: a flush
// encodes its memtable in min(FlushWorkers, memtable size / flushRunBytes)
// runs. (A variable: tests lower it.)
var flushRunBytes = 256 << 10

// addRuns adds a memtable's point entries to w as k runs of about equal
// bytes, each encoded and compressed on a goroutine of
// its own (sstable.BlockEncoder; the first on this one), the runs' blocks
// added in order as they are done. A flush of 4 MiB of 1 KiB values spends
// most of its encoding in Snappy; handing each 4 KiB block to a goroutine
// cost more than it saved (the Writer's CompressionWorkers), a run a
// goroutine does not. When the Compactor is a compaction.BlockSealer (and
// the tables are compressed), the runs are encoded without sealing and
// their blocks sealed by it in one batch, once every run is done (on the
// host here if it declines or fails: the same bytes either way).
func (d *DB) addRuns(w *sstable.Writer, it base.InternalIterator, k int, sealer compaction.BlockSealer) error {
	fb := &d.flushBuf
	fb.Lock()
	defer fb.Unlock()
	es := fb.entries[:0]
	total := 0
	for ok := it.First(); ok; ok = it.Next() {
		key, v := it.Key(), it.Value()
		es = append(es, sstable.Entry{Key: key, Value: v})
		total += len(key.UserKey) + len(v)
	}
	if err := it.Error(); err != nil {
		return err
	}
	fb.entries = es
	defer clear(es) // (they reference the memtable's arena)
	k = min(k, max(len(es), 1))
	for len(fb.encs) < k {
		fb.encs = append(fb.encs, sstable.NewBlockEncoder(d.opts.writerOptions()))
	}
	// Run r is es[bounds[r]:bounds[r+1]], cut where the bytes so far pass
	// r/k of the total.
	bounds := make([]int, 1, k+1)
	sum := 0
	for i, e := range es {
		if len(bounds) < k && sum*k >= total*len(bounds) && i > bounds[len(bounds)-1] {
			bounds = append(bounds, i)
		}
		sum += len(e.Key.UserKey) + len(e.Value)
	}
	bounds = append(bounds, len(es))
	runs := len(bounds) - 1
	results := make([]runResult, runs)
	done := make([]chan struct{}, runs)
	encode := func(r int) {
		lo, hi := bounds[r], bounds[r+1]
		var prev *sstable.InternalKey
		if lo > 0 {
			prev = &es[lo-1].Key
		}
		if sealer != nil {
			results[r].blocks, results[r].err = fb.encs[r].EncodeRaw(es[lo:hi], prev)
		} else {
			results[r].blocks, results[r].err = fb.encs[r].Encode(es[lo:hi], prev)
		}
	}
	for r := 1; r < runs; r++ {
		done[r] = make(chan struct{})
		go func() {
			defer close(done[r])
			encode(r)
		}()
	}
	encode(0)
	if sealer != nil {
		return d.sealRuns(w, sealer, results, done)
	}
	var err error
	for r := range runs {
		if r > 0 {
			<-done[r] // every run's goroutine is waited for, also after an error
		}
		if err == nil {
			err = results[r].err
		}
		if err == nil {
			err = w.AddEncodedBlocks(results[r].blocks)
		}
		fb.encs[r].Reset()
	}
	return err
}

// flushSealer returns the Compactor as the flush's sealer when it is a
// compaction.BlockSealer that would seal the tables' blocks now (nil
// otherwise).
func (d *DB) flushSealer() compaction.BlockSealer {
	s, ok := d.opts.Compactor.(compaction.BlockSealer)
	if !ok || d.opts.Compression == sstable.NoCompression || !s.SealsBlocks(d.opts.Compression) {
		return nil
	}
	return s
}

// runResult is one of addRuns' runs: its blocks, or why it failed.
type runResult struct {
	blocks []sstable.EncodedBlock
	err    error
}

// sealRuns waits for every run addRuns encoded without sealing, has the
// sealer seal all their blocks in one batch (or seals them here when it
// declines or fails), and adds them to w in order.
func (d *DB) sealRuns(w *sstable.Writer, sealer compaction.BlockSealer, results []runResult, done []chan struct{}) error {
	fb := &d.flushBuf
	var err error
	all := fb.blocks[:0]
	for r := range results {
		if r > 0 {
			<-done[r] // every run's goroutine is waited for, also after an error
		}
		if err == nil {
			err = results[r].err
		}
		all = append(all, results[r].blocks...)
	}
	fb.blocks = all
	defer func() {
		clear(fb.blocks) // (they reference the encoders' memory and the memtable's keys)
		for r := range results {
			fb.encs[r].Reset()
		}
	}()
	if err != nil {
		return err
	}
	release, serr := sealer.SealBlocks(context.Background(), d.opts.Compression, all)
	if serr != nil {
		if !errors.Is(serr, compaction.ErrNotSealed) {
			d.opts.logger().Warn("kv: flush: the compactor did not seal the blocks; sealing them on the host", "err", serr)
		}
		for i := range all {
			sb := sstable.SealBlock(d.opts.Compression, nil, all[i].Raw)
			all[i].Sealed = &sb
		}
		release = func() {}
	}
	err = w.AddEncodedBlocks(all)
	release()
	return err
}

// writeTable creates table num, fills it, syncs and closes it; on error the
// file is removed.
func (d *DB) writeTable(num base.FileNum, fill func(*sstable.Writer) error) (*manifest.FileMetadata, error) {
	name := base.MakeFilename(base.FileTypeTable, num)
	f, err := d.fs.Create(d.fs.PathJoin(d.dir, name))
	if err != nil {
		return nil, fmt.Errorf("kv: create table %s: %w", name, err)
	}
	f = vfs.NewSyncingFile(f, d.opts.BytesPerSync)
	fail := func(err error) (*manifest.FileMetadata, error) {
		f.Close()
		d.removeFile(name)
		return nil, err
	}
	w := sstable.NewWriter(f, d.opts.writerOptions())
	if err := fill(w); err != nil {
		return fail(err)
	}
	m, err := w.Finish()
	if err != nil {
		return fail(fmt.Errorf("kv: write table %s: %w", name, err))
	}
	if err := f.Sync(); err != nil {
		return fail(fmt.Errorf("kv: sync table %s: %w", name, err))
	}
	if err := f.Close(); err != nil {
		d.removeFile(name)
		return nil, fmt.Errorf("kv: close table %s: %w", name, err)
	}
	return &manifest.FileMetadata{
		FileNum: num, Size: m.Size, Smallest: m.Smallest, Largest: m.Largest,
		SmallestSeq: m.SmallestSeq, LargestSeq: m.LargestSeq, HasRangeDels: m.HasRangeDels,
	}, nil
}
