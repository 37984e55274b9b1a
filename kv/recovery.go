package kv

import (
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/internal/batchrepr"
	"github.com/warpkit/warpkit/kv/internal/memtable"
	"github.com/warpkit/warpkit/kv/manifest"
	"github.com/warpkit/warpkit/kv/record"
)

// recover replays the logs the manifest does not cover into L0 tables, then
// starts a fresh log and memtable.
func (d *DB) recover() error {
	names, err := d.fs.List(d.dir)
	if err != nil {
		return fmt.Errorf("kv: list %s: %w", d.dir, err)
	}
	minLog := d.vs.LogNum()
	var logs []base.FileNum
	for _, name := range names {
		typ, num, ok := base.ParseFilename(name)
		if !ok {
			continue
		}
		d.vs.MarkFileNumUsed(num)
		if typ == base.FileTypeLog && num >= minLog {
			logs = append(logs, num)
		}
	}
	sort.Slice(logs, func(i, j int) bool { return logs[i] < logs[j] })

	lastSeq := d.vs.LastSeq()
	edit := &manifest.VersionEdit{}
	var mem *memtable.MemTable
	flush := func() error {
		if mem == nil || mem.Empty() {
			return nil
		}
		meta, err := d.writeL0(mem)
		if err != nil {
			return err
		}
		if meta != nil { // nil: the memtable held only empty range deletions
			edit.NewFiles = append(edit.NewFiles, manifest.NewFile{Level: 0, Meta: meta})
		}
		mem = nil
		return nil
	}
	// A log whose end is torn (or zeroed) ends the log sequence: the store
	// syncs a log whole before it writes to the next one, so a torn end
	// followed by a later log holding records is damage, not a crash's cut.
	// (A crash between creating a log and syncing the one before leaves the
	// new log empty, or with only torn records.)
	var torn []*tornTail // torn ends of the logs since the last one with records
	for _, num := range logs {
		res, err := d.replayLog(num, &mem, flush)
		if err != nil {
			return err
		}
		if res.records > 0 && len(torn) > 0 {
			if d.opts.WALRecovery != WALSalvage {
				return fmt.Errorf("%w (not a torn tail: a later log holds records; open with WALRecovery: WALSalvage to skip the damaged records)", torn[0].err)
			}
			for _, t := range torn {
				d.m.salvaged.Add(1)
				d.opts.logf("kv: log %s: skipped the damaged end of a log followed by more logs: %v", t.name, t.err)
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
		d.opts.logf("kv: log %s: ignored torn tail (%v)", t.name, t.err)
	}
	if err := flush(); err != nil {
		return err
	}

	wal, err := d.newWAL()
	if err != nil {
		return err
	}
	d.wal = wal
	edit.LogNum = wal.num
	edit.LastSeq = lastSeq
	if err := d.vs.LogAndApply(edit); err != nil {
		return err
	}
	for _, num := range logs {
		d.addObsoleteFile(base.MakeFilename(base.FileTypeLog, num))
	}
	d.lastSeq = lastSeq
	d.visibleSeq.Store(uint64(lastSeq))
	d.mem = memtable.New(d.opts.MemTableSize, wal.num)
	d.mu.Lock()
	d.updateReadStateLocked()
	d.mu.Unlock()
	return nil
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
// A torn end is returned, not reported: whether it is a crash's cut depends
// on the logs after it.
func (d *DB) replayLog(num base.FileNum, mem **memtable.MemTable, flush func() error) (replayResult, error) {
	var res replayResult
	name := base.MakeFilename(base.FileTypeLog, num)
	f, err := d.fs.Open(d.fs.PathJoin(d.dir, name))
	if err != nil {
		return res, fmt.Errorf("kv: open log %s: %w", name, err)
	}
	defer f.Close()
	r := record.NewReader(f, name)
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
			if !after {
				// Zeros, or a record cut short, up to the end of the log.
				res.torn = &tornTail{name: name, err: err}
				return res, nil
			}
			if d.opts.WALRecovery != WALSalvage {
				return res, fmt.Errorf("%w (open with WALRecovery: WALSalvage to skip the damaged records)", err)
			}
			d.m.salvaged.Add(1)
			d.opts.logf("kv: log %s: skipped damaged records: %v", name, err)
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
		if err := (*mem).Apply(rec); err != nil {
			return res, base.Corruptf(name, r.Offset(), "bad batch: %v", err)
		}
		res.last = max(res.last, seq+base.SeqNum(count)-1)
	}
}
