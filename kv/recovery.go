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
	for _, num := range logs {
		seq, err := d.replayLog(num, &mem, flush)
		if err != nil {
			return err
		}
		lastSeq = max(lastSeq, seq)
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

// replayLog applies one log's batches to *mem, flushing it to L0 when full.
// It returns the last sequence number it saw.
func (d *DB) replayLog(num base.FileNum, mem **memtable.MemTable, flush func() error) (base.SeqNum, error) {
	name := base.MakeFilename(base.FileTypeLog, num)
	f, err := d.fs.Open(d.fs.PathJoin(d.dir, name))
	if err != nil {
		return 0, fmt.Errorf("kv: open log %s: %w", name, err)
	}
	defer f.Close()
	r := record.NewReader(f, name)
	var last base.SeqNum
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return last, nil
		}
		if err != nil {
			if !errors.Is(err, base.ErrCorruption) {
				return 0, fmt.Errorf("kv: read log %s: %w", name, err)
			}
			after, serr := r.SkipCorruption()
			if serr != nil {
				return 0, fmt.Errorf("kv: read log %s: %w", name, serr)
			}
			if !after {
				// A torn tail: the end of a write a crash interrupted, which
				// was never acknowledged as durable.
				d.m.tornTails.Add(1)
				d.opts.logf("kv: log %s: ignored torn tail (%v)", name, err)
				return last, nil
			}
			if d.opts.WALRecovery != WALSalvage {
				return 0, fmt.Errorf("%w (open with WALRecovery: WALSalvage to skip the damaged records)", err)
			}
			d.m.salvaged.Add(1)
			d.opts.logf("kv: log %s: skipped damaged records: %v", name, err)
			continue
		}
		seq, count, ok := batchrepr.Header(rec)
		if !ok || count == 0 {
			if !ok {
				return 0, base.Corruptf(name, r.Offset(), "log record too short for a batch")
			}
			continue
		}
		need := memtable.NeededBytes(len(rec), count)
		if *mem != nil && !(*mem).Reserve(need) {
			if err := flush(); err != nil {
				return 0, err
			}
		}
		if *mem == nil {
			*mem = memtable.New(max(d.opts.MemTableSize, int(need)+memtable.MinCapacity), num)
			(*mem).Reserve(need)
		}
		if err := (*mem).Apply(rec); err != nil {
			return 0, base.Corruptf(name, r.Offset(), "bad batch: %v", err)
		}
		last = max(last, seq+base.SeqNum(count)-1)
	}
}
