package kv

import (
	"errors"
	"fmt"
	"io"

	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/internal/batchrepr"
	"github.com/warpkit/warpkit/kv/internal/memtable"
	"github.com/warpkit/warpkit/kv/manifest"
	"github.com/warpkit/warpkit/kv/record"
	"github.com/warpkit/warpkit/kv/sstable"
	"github.com/warpkit/warpkit/kv/vfs"
)

// recover replays the logs of the plan into L0 tables (kept in memory by a
// read-only Open), then starts a fresh log and memtable and commits the
// result (manifest.VersionSet.Activate). Files it creates are recorded in
// undo, so that a failure leaves the directory as it was.
func (d *DB) recover(plan *recoveryPlan, isNew bool, undo *openUndo) error {
	ro := d.opts.ReadOnly
	lastSeq := d.vs.LastSeq()
	edit := &manifest.VersionEdit{}
	var mem *memtable.MemTable
	var replayed []*memtable.MemTable // read-only: the recovered memtables
	flush := func() error {
		if mem == nil || mem.Empty() {
			return nil
		}
		if ro {
			replayed = append(replayed, mem)
			mem = nil
			return nil
		}
		meta, err := d.writeL0(mem)
		if err != nil {
			return err
		}
		if meta != nil { // nil: the memtable held only empty range deletions
			undo.files = append(undo.files, d.fs.PathJoin(d.dir, base.MakeFilename(base.FileTypeTable, meta.FileNum)))
			edit.NewFiles = append(edit.NewFiles, manifest.NewFile{Level: 0, Meta: meta})
		}
		mem = nil
		return nil
	}
	// A log whose end is torn (or zeroed) ends the log sequence: the store
	// syncs a log whole before it writes to the next one, so a torn end
	// followed by a later log holding records is damage, not a crash's cut.
	// (A crash between creating a log and syncing the one before leaves the
	// new log empty, or with only torn records.) A sealed log has no torn
	// end: it was complete.
	var torn []*tornTail // torn ends of the logs since the last one with records
	for _, l := range plan.logs {
		res, err := d.replayLog(l, &mem, flush)
		if err != nil {
			return err
		}
		if res.records > 0 && len(torn) > 0 {
			if d.opts.WALRecovery != WALSalvage {
				return fmt.Errorf("%w (not a torn tail: a later log holds records; open with WALRecovery: WALSalvage to skip the damaged records)", torn[0].err)
			}
			for _, t := range torn {
				d.noteSalvaged(t.err, "skipped the damaged end of a log followed by more logs")
			}
			torn = nil
		}
		if res.torn != nil {
			torn = append(torn, res.torn)
		}
		lastSeq = max(lastSeq, res.last)
	}
	for _, t := range torn {
		// The end of a write a crash interrupted, which was never
		// acknowledged as durable.
		d.m.tornTails.Add(1)
		var ce *CorruptionError
		if errors.As(t.err, &ce) {
			d.recovery.Damage = append(d.recovery.Damage, *ce)
		}
		d.opts.logger().Warn("kv: ignored the torn tail of a log", "log", t.name, "err", t.err)
	}
	if err := flush(); err != nil {
		return err
	}
	// Files kept aside (lost/) may hold writes newer than any replayed:
	// new writes must not reuse their sequence numbers, or a file moved
	// back (for Repair) could not be ordered against them.
	for _, name := range plan.unexplained {
		lastSeq = max(lastSeq, largestSeqIn(d.fs, d.fs.PathJoin(d.dir, name), name))
	}

	if ro {
		d.mu.imm = replayed
		d.mu.mem = memtable.New(memtable.MinCapacity, 0) // never written
	} else {
		// The new log, and a spare for the first memtable switch: both
		// recorded before anything is written to them.
		logs, err := d.createLogs(2)
		if err != nil {
			return err
		}
		for _, l := range logs {
			undo.files = append(undo.files, d.fs.PathJoin(d.dir, base.MakeFilename(base.FileTypeLog, l.num)))
		}
		wal := &walFile{num: logs[0].num, file: logs[0].file, w: record.NewLogWriter(logs[0].file)}
		d.mu.wal = wal
		d.spare = make(chan spareLog, 1)
		d.spare <- logs[1]
		edit.LogNum = wal.num
		edit.LastSeq = lastSeq
		edit.WALs = []base.FileNum{logs[0].num, logs[1].num}
		// Unexplained files leave the directory before the new manifest,
		// whose next file number is above them, makes them look obsolete.
		if err := moveToLost(d.fs, d.dir, plan.unexplained, undo, d.opts.logger()); err != nil {
			return err
		}
		if err := d.vs.Activate(edit); err != nil {
			if !errors.Is(err, manifest.ErrCurrentUnchanged) {
				// CURRENT names the new manifest (the directory sync that
				// would make the rename durable failed): the store is the
				// new one now, consistent with the files this Open made,
				// so they stay; a new store holds nothing and goes whole.
				if isNew {
					undo.files = append(undo.files,
						d.fs.PathJoin(d.dir, base.MakeFilename(base.FileTypeManifest, d.vs.ManifestNum())),
						d.fs.PathJoin(d.dir, "CURRENT"))
				} else {
					*undo = openUndo{}
				}
			}
			return err
		}
		// Committed: CURRENT names the new manifest; nothing to undo.
		*undo = openUndo{}
		d.mu.mem = memtable.New(d.opts.MemTableSize, wal.num)
	}
	d.mu.lastSeq = lastSeq
	d.visibleSeq.Store(uint64(lastSeq))
	d.mu.Lock()
	d.updateReadStateLocked()
	d.mu.Unlock()
	return nil
}

// noteSalvaged counts and reports a damaged log region WALSalvage skipped.
func (d *DB) noteSalvaged(err error, what string) {
	d.m.salvaged.Add(1)
	var ce *CorruptionError
	if errors.As(err, &ce) {
		d.recovery.Damage = append(d.recovery.Damage, *ce)
	}
	d.opts.logger().Warn("kv: skipped a damaged log region", "what", what, "err", err)
}

// replayResult is what replayLog found in one log.
type replayResult struct {
	last    base.SeqNum // the last sequence number replayed
	records int         // intact records read
	torn    *tornTail   // the log's torn end, if any
}

// tornTail is damage with no intact chunk after it in its log.
type tornTail struct {
	name string
	err  error // the *base.CorruptionError at the damage
}

// replayLog applies one log's batches to *mem, flushing it to L0 when full.
// A torn end of a log that was not sealed is returned, not reported: whether
// it is a crash's cut depends on the logs after it. In a sealed log every
// damage is corruption, and so is a length other than the sealed one.
func (d *DB) replayLog(l logToReplay, mem **memtable.MemTable, flush func() error) (replayResult, error) {
	var res replayResult
	num := l.num
	name := base.MakeFilename(base.FileTypeLog, num)
	f, err := d.fs.Open(d.fs.PathJoin(d.dir, name))
	if err != nil {
		return res, fmt.Errorf("kv: open log %s: %w", name, err)
	}
	defer f.Close()
	salvage := d.opts.WALRecovery == WALSalvage
	var src io.Reader = f
	if l.sealed >= 0 {
		size, err := f.Size()
		if err != nil {
			return res, fmt.Errorf("kv: size of log %s: %w", name, err)
		}
		if size != l.sealed {
			err := base.Corruptf(name, min(size, l.sealed), "log is %d bytes, but was sealed at %d when the store closed it", size, l.sealed)
			if !salvage {
				return res, fmt.Errorf("%w (open with WALRecovery: WALSalvage to keep what is readable)", err)
			}
			d.noteSalvaged(err, "log "+name)
		}
		src = io.LimitReader(f, l.sealed)
	}
	r := record.NewReader(src, name)
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return res, nil
		}
		if err != nil {
			if !errors.Is(err, base.ErrCorruption) {
				return res, fmt.Errorf("kv: read log %s: %w", name, err)
			}
			after, serr := r.SkipCorruption()
			if serr != nil {
				return res, fmt.Errorf("kv: read log %s: %w", name, serr)
			}
			if !after && l.sealed < 0 {
				// Zeros, or a record cut short, up to the end of the log.
				res.torn = &tornTail{name: name, err: err}
				return res, nil
			}
			if !salvage {
				why := "damage followed by intact records"
				if !after {
					why = "damage in a log the store closed cleanly, so not a torn tail"
				}
				return res, fmt.Errorf("%w (%s; open with WALRecovery: WALSalvage to skip the damaged records)", err, why)
			}
			d.noteSalvaged(err, "log "+name+": skipped damaged records")
			if !after {
				return res, nil
			}
			continue
		}
		res.records++
		seq, count, ok := batchrepr.Header(rec)
		if !ok || count == 0 {
			if !ok {
				return res, base.Corruptf(name, r.Offset(), "log record too short for a batch")
			}
			continue
		}
		need := memtable.NeededBytes(len(rec), count)
		if *mem != nil && !(*mem).Reserve(need) {
			if err := flush(); err != nil {
				return res, err
			}
		}
		if *mem == nil {
			*mem = memtable.New(max(d.opts.MemTableSize, int(need)+memtable.MinCapacity), num)
			(*mem).Reserve(need)
		}
		if err := (*mem).ApplyReserved(rec, need); err != nil {
			return res, base.Corruptf(name, r.Offset(), "bad batch: %v", err)
		}
		res.last = max(res.last, seq+base.SeqNum(count)-1)
	}
}

// largestSeqIn returns the largest sequence number a file of the store (at
// path, named name) holds, as far as it can be read: a table's properties,
// or every intact batch header of a log (damaged records skipped). 0 if
// nothing is readable.
func largestSeqIn(fs vfs.FS, path, name string) base.SeqNum {
	typ, _, ok := base.ParseFilename(name)
	if !ok {
		return 0
	}
	f, err := fs.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	var last base.SeqNum
	switch typ {
	case base.FileTypeTable:
		r, err := sstable.NewReader(f, sstable.ReaderOptions{FileName: name})
		if err != nil {
			return 0
		}
		return base.SeqNum(r.Properties().LargestSeq) // closing f closes r's file
	case base.FileTypeLog:
		r := record.NewReader(f, name)
		for {
			rec, err := r.Next()
			if err == io.EOF {
				return last
			}
			if err != nil {
				if !errors.Is(err, base.ErrCorruption) {
					return last
				}
				if after, serr := r.SkipCorruption(); serr != nil || !after {
					return last
				}
				continue
			}
			if seq, count, ok := batchrepr.Header(rec); ok && count > 0 {
				last = max(last, seq+base.SeqNum(count)-1)
			}
		}
	}
	return 0
}
