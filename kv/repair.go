package kv

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/warpkit/warpkit/kv/cache"
	"github.com/warpkit/warpkit/kv/compaction"
	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/internal/memtable"
	"github.com/warpkit/warpkit/kv/manifest"
	"github.com/warpkit/warpkit/kv/sstable"
	"github.com/warpkit/warpkit/kv/vfs"
)

// RepairReport says what Repair found and did.
type RepairReport struct {
	// Tables are the tables read, verified and merged into the rebuilt
	// store.
	Tables []string
	// Logs are the logs replayed, with damaged records skipped.
	Logs []string
	// Damage lists each damaged log region skipped and each torn log end
	// ignored: the log, the offset and what was wrong.
	Damage []CorruptionError
	// Lost lists files that could not be read (a damaged table, a file with
	// a table's name that is not one): Repair moved them to lost/.
	Lost []LostFile
	// Outputs are the rebuilt store's tables, all in the bottom level.
	Outputs []string
	// EntriesIn counts the point entries read (tables and logs); EntriesOut
	// those written after dropping overwritten and deleted ones.
	EntriesIn, EntriesOut uint64
	// LastSeq is the highest sequence number found.
	LastSeq uint64
}

// LostFile is a file Repair could not use, and why.
type LostFile struct {
	Name   string
	Reason string
}

// Repair rebuilds the store in dir from the tables and logs present, for a
// store Open refuses as damaged (CURRENT missing or wrong, a manifest
// truncated or listing missing tables, a log missing). It is explicit and
// never automatic: Open never repairs.
//
// Repair ignores CURRENT and every manifest. It takes the store's lock,
// replays every log (skipping damaged records, as WALSalvage does), reads
// and verifies every table (a table that fails is moved to lost/ and
// reported), merges all of it with the store's Compactor into new tables in
// the bottom level (newer entries shadow older ones by sequence number;
// deleted entries are dropped), and writes a new manifest and CURRENT. It
// deletes nothing: the next Open removes the tables and logs the rebuilt
// store no longer lists, as obsolete. Files in lost/ are not read; move one
// back into dir to include it.
//
// What Repair cannot restore: writes only a damaged or missing file held,
// and deletions whose tombstones were in such a file (the older value they
// deleted may reappear). Likewise a table a crash kept from being deleted
// (the store deletes a compaction's inputs right after installing its
// outputs, and syncs the directory) is read like any other and may bring
// back a value that compaction dropped. A failed Repair removes the files it created and
// leaves the rest as it was.
func Repair(dir string, opts *Options) (*RepairReport, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if o.ReadOnly {
		return nil, fmt.Errorf("%w: Repair with ReadOnly", ErrInvalidArgument)
	}
	o.WALRecovery = WALSalvage
	fs := o.FS
	names, err := fs.List(dir)
	if err != nil {
		return nil, fmt.Errorf("kv: repair %s: %w", dir, err)
	}
	if !slices.ContainsFunc(names, base.IsStoreTrace) {
		return nil, fmt.Errorf("%w: %s holds no store to repair", ErrInvalidArgument, dir)
	}
	lock, err := fs.Lock(fs.PathJoin(dir, base.MakeFilename(base.FileTypeLock, 0)))
	if err != nil {
		if errors.Is(err, vfs.ErrLocked) {
			return nil, fmt.Errorf("%w: %s", ErrLocked, dir)
		}
		return nil, fmt.Errorf("kv: lock %s: %w", dir, err)
	}
	defer lock.Close()

	r := &repairer{
		d:   &DB{dir: dir, opts: o, fs: fs, blocks: cache.New(o.BlockCacheSize)},
		rep: &RepairReport{},
	}
	r.d.tables = newTableCache(fs, dir, r.d.blocks, o.MaxOpenFiles)
	defer r.d.tables.close()
	r.d.vs = manifest.New(manifest.Options{FS: fs, Dir: dir, MaxManifestSize: o.MaxManifestSize})
	defer r.d.vs.Close()
	if err := r.run(names); err != nil {
		r.undo.run(fs)
		for i := len(r.created) - 1; i >= 0; i-- {
			fs.Remove(fs.PathJoin(dir, r.created[i]))
		}
		return nil, err
	}
	return r.rep, nil
}

// repairer holds a Repair's state. Its DB is a shell: the directory, the
// options, the file system, a table cache and a version set, enough for the
// log replay and table writing that Open uses.
type repairer struct {
	d       *DB
	rep     *RepairReport
	inputs  []*manifest.FileMetadata
	created []string // files this Repair wrote, removed if it fails
	undo    openUndo // its moves to lost/, reversed if it fails
	lastSeq base.SeqNum
}

func (r *repairer) run(names []string) error {
	d := r.d
	var logs, tables []base.FileNum
	for _, name := range names {
		typ, num, ok := base.ParseFilename(name)
		if !ok {
			continue
		}
		if typ != base.FileTypeCurrent && typ != base.FileTypeLock {
			d.vs.MarkFileNumUsed(num)
		}
		switch typ {
		case base.FileTypeLog:
			logs = append(logs, num)
		case base.FileTypeTable:
			tables = append(tables, num)
		}
	}
	slices.Sort(logs)
	slices.Sort(tables)

	// Tables first: a log's replay writes new tables, which are not inputs
	// to verify.
	var lost []LostFile
	for _, num := range tables {
		name := base.MakeFilename(base.FileTypeTable, num)
		meta, entries, err := r.readTable(num)
		if err != nil {
			if !errors.Is(err, base.ErrCorruption) {
				return fmt.Errorf("kv: repair: read table %s: %w", name, err)
			}
			lost = append(lost, LostFile{Name: name, Reason: err.Error()})
			continue
		}
		r.inputs = append(r.inputs, meta)
		r.rep.Tables = append(r.rep.Tables, name)
		r.rep.EntriesIn += entries
	}
	for _, num := range logs {
		if err := r.replayLog(num); err != nil {
			return err
		}
		r.rep.Logs = append(r.rep.Logs, base.MakeFilename(base.FileTypeLog, num))
	}

	edit := &manifest.VersionEdit{}
	if len(r.inputs) > 0 {
		res, err := r.merge()
		if err != nil {
			return err
		}
		for _, o := range res.Outputs {
			edit.NewFiles = append(edit.NewFiles, manifest.NewFile{Level: manifest.NumLevels - 1, Meta: o})
			r.rep.Outputs = append(r.rep.Outputs, base.MakeFilename(base.FileTypeTable, o.FileNum))
		}
		r.rep.EntriesOut = res.Stats.EntriesOut
	}
	for _, f := range r.inputs {
		r.lastSeq = max(r.lastSeq, f.LargestSeq)
	}
	// New writes must not reuse a sequence number that any file of the
	// store may hold: the ones read here, but also whatever a manifest
	// recorded (an Open raises it past files it set aside) and the files
	// in lost/ (which may be moved back for a later Repair).
	r.lastSeq = max(r.lastSeq, r.seqFloor(names))
	// Every log present is replayed: the log number passes them all, so the
	// next Open deletes them as flushed.
	edit.LogNum = d.vs.NewFileNum()
	edit.LastSeq = r.lastSeq
	if err := vfs.SyncDir(d.fs, d.dir); err != nil {
		return fmt.Errorf("kv: repair: sync %s: %w", d.dir, err)
	}
	// Unreadable tables leave the directory before the new manifest, whose
	// next file number is above them, would make them look obsolete.
	var lostNames []string
	for _, l := range lost {
		lostNames = append(lostNames, l.Name)
		d.opts.logger().Warn("kv: repair: cannot read a file", "file", l.Name, "reason", l.Reason)
	}
	if err := moveToLost(d.fs, d.dir, lostNames, &r.undo, d.opts.logger()); err != nil {
		return fmt.Errorf("kv: repair: %w", err)
	}
	if err := d.vs.Activate(edit); err != nil {
		if !errors.Is(err, manifest.ErrCurrentUnchanged) {
			r.created, r.undo = nil, openUndo{} // CURRENT names the new manifest
		}
		return fmt.Errorf("kv: repair: %w", err)
	}
	r.created, r.undo = nil, openUndo{} // committed
	r.rep.LastSeq = uint64(r.lastSeq)
	r.rep.Lost = lost
	r.rep.Damage = d.recovery.Damage
	return nil
}

// seqFloor returns the largest sequence number recorded by any readable
// manifest in the directory or held by any readable file in lost/.
func (r *repairer) seqFloor(names []string) base.SeqNum {
	d := r.d
	var floor base.SeqNum
	for _, name := range names {
		if typ, _, ok := base.ParseFilename(name); ok && typ == base.FileTypeManifest {
			floor = max(floor, manifest.LastSeqOf(d.fs, d.fs.PathJoin(d.dir, name)))
		}
	}
	lost := d.fs.PathJoin(d.dir, lostDir)
	if names, err := d.fs.List(lost); err == nil {
		for _, name := range names {
			// lost/ may hold NAME.1 for a second NAME: read it by content.
			orig := name
			if i := strings.LastIndexByte(name, '.'); i > 0 && strings.Trim(name[i+1:], "0123456789") == "" {
				orig = name[:i]
			}
			floor = max(floor, largestSeqIn(d.fs, d.fs.PathJoin(lost, name), orig))
		}
	}
	return floor
}

// readTable opens, verifies and describes table num, and counts its point
// entries. A table that is damaged (or not a table) gives a corruption
// error.
func (r *repairer) readTable(num base.FileNum) (*manifest.FileMetadata, uint64, error) {
	d := r.d
	name := base.MakeFilename(base.FileTypeTable, num)
	f, err := d.fs.Open(d.fs.PathJoin(d.dir, name))
	if err != nil {
		return nil, 0, err
	}
	rd, err := sstable.NewReader(f, sstable.ReaderOptions{FileName: name})
	if err != nil {
		f.Close()
		return nil, 0, base.WithFile(err, name)
	}
	defer rd.Close()
	m, err := sstable.ReadMetadata(rd)
	if err != nil {
		return nil, 0, base.WithFile(err, name)
	}
	return &manifest.FileMetadata{
		FileNum: num, Size: m.Size, Smallest: m.Smallest, Largest: m.Largest,
		SmallestSeq: m.SmallestSeq, LargestSeq: m.LargestSeq, HasRangeDels: m.HasRangeDels,
	}, m.Properties.NumEntries, nil
}

// replayLog turns one log into tables, skipping damaged records.
func (r *repairer) replayLog(num base.FileNum) error {
	d := r.d
	var mem *memtable.MemTable
	flush := func() error {
		if mem == nil || mem.Empty() {
			return nil
		}
		meta, err := d.writeL0(mem)
		if err != nil {
			return err
		}
		if meta != nil {
			r.created = append(r.created, base.MakeFilename(base.FileTypeTable, meta.FileNum))
			r.inputs = append(r.inputs, meta)
			r.rep.EntriesIn += uint64(mem.Count())
		}
		mem = nil
		return nil
	}
	res, err := d.replayLog(logToReplay{num: num, sealed: -1}, &mem, flush)
	if err != nil {
		return fmt.Errorf("kv: repair: %w", err)
	}
	if res.torn != nil {
		var ce *CorruptionError
		if errors.As(res.torn.err, &ce) {
			d.recovery.Damage = append(d.recovery.Damage, *ce)
		}
	}
	r.lastSeq = max(r.lastSeq, res.last)
	return flush()
}

// merge compacts every input into the bottom level.
func (r *repairer) merge() (*compaction.Result, error) {
	d := r.d
	inputs := slices.Clone(r.inputs)
	slices.SortFunc(inputs, func(a, b *manifest.FileMetadata) int { return cmp.Compare(a.LargestSeq, b.LargestSeq) })
	outs := d.newOutputTables()
	job := &compaction.Job{
		Inputs:                []compaction.Input{{Level: 0, Files: inputs}},
		OutputLevel:           manifest.NumLevels - 1,
		TargetFileSize:        uint64(d.opts.TargetFileSize),
		MaxGrandparentOverlap: uint64(d.opts.MaxGrandparentOverlap),
		Env:                   d.compactionEnv(outs),
	}
	res, err := d.opts.Compactor.Compact(context.Background(), job)
	var created []base.FileNum
	if err == nil {
		created = outs.finishReturned(res.Outputs)
	} else {
		created = outs.finish()
	}
	for _, n := range created {
		r.created = append(r.created, base.MakeFilename(base.FileTypeTable, n))
	}
	if err != nil {
		return nil, fmt.Errorf("kv: repair: merge: %w", err)
	}
	return res, nil
}
