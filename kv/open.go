package kv

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/manifest"
	"github.com/warpkit/warpkit/kv/record"
	"github.com/warpkit/warpkit/kv/vfs"
)

// Opening a store happens in three steps, and only the last writes anything
// the store had before:
//
//  1. look: list the directory and decide, without writing, whether it holds
//     a store (CURRENT), nothing of one (a new store may be created), or
//     traces of one without CURRENT (refused: ErrCorruption, nothing touched);
//  2. recover: load the manifest (manifest.Load writes nothing), prove it
//     consistent with the files present (every listed table exists with its
//     recorded size, every log holding unflushed writes exists), replay the
//     logs into new L0 tables and start a new log; a failure here removes
//     what this Open created and leaves every earlier file as it was;
//  3. commit: VersionSet.Activate writes a new manifest and points CURRENT at
//     it. Only then are unexplained files moved to lost/ and provably
//     obsolete ones deleted.

// lostDir is the subdirectory where Open keeps files it found and could
// neither use nor prove obsolete.
const lostDir = "lost"

// openUndo lists what a failing Open did, to undo it. It never lists LOCK:
// removing a lock file another process may be about to lock would let two
// writers in (LOCK is empty and harmless, and an interrupted creation's
// leftover that Open accepts).
type openUndo struct {
	files []string    // paths created, removed in reverse order
	moved [][2]string // renames done (from, to), reversed in reverse order
	dirs  []string    // directories Open created, deepest first
}

// run undoes, while the caller still holds the store's lock and after it
// closed every file this Open opened.
func (u *openUndo) run(fs vfs.FS) {
	for i := len(u.moved) - 1; i >= 0; i-- {
		fs.Rename(u.moved[i][1], u.moved[i][0])
	}
	for i := len(u.files) - 1; i >= 0; i-- {
		fs.Remove(u.files[i])
	}
	for _, d := range u.dirs {
		fs.Remove(d) // fails, harmlessly, if something else is in it
	}
	*u = openUndo{}
}

// open does everything of Open before the background goroutines start. On
// error the caller closes what open opened, runs undo, then releases the
// lock.
func (d *DB) open(undo *openUndo) (err error) {
	fs, dir, ro := d.fs, d.dir, d.opts.ReadOnly
	if ro && d.opts.ErrorIfExists {
		return fmt.Errorf("%w: ErrorIfExists with ReadOnly", ErrInvalidArgument)
	}
	// Step 1, before taking the lock: fail without creating anything.
	names, err := listIfExists(fs, dir)
	if err != nil {
		return err
	}
	if _, err := d.classifyDir(names); err != nil {
		return err
	}

	lockPath := fs.PathJoin(dir, base.MakeFilename(base.FileTypeLock, 0))
	if ro {
		lock, err := fs.LockShared(lockPath)
		switch {
		case err == nil:
			d.lock = lock
		case errors.Is(err, os.ErrNotExist):
			// No writer has ever opened this copy of the store (every
			// writer creates LOCK and none removes it); a read-only Open
			// creates nothing, so it reads without a lock.
		case errors.Is(err, vfs.ErrLocked):
			return fmt.Errorf("%w: %s (a writer has it open)", ErrLocked, dir)
		default:
			return fmt.Errorf("kv: lock %s: %w", dir, err)
		}
	} else {
		undo.dirs, err = mkdirAllDurable(fs, dir)
		if err != nil {
			return err
		}
		lock, err := fs.Lock(lockPath)
		if err != nil {
			if errors.Is(err, vfs.ErrLocked) {
				return fmt.Errorf("%w: %s", ErrLocked, dir)
			}
			return fmt.Errorf("kv: lock %s: %w", dir, err)
		}
		d.lock = lock
	}
	// Decide again under the lock: another process may have changed the
	// directory in between.
	if names, err = fs.List(dir); err != nil {
		return fmt.Errorf("kv: list %s: %w", dir, err)
	}
	isNew, err := d.classifyDir(names)
	if err != nil {
		return err
	}
	d.tables = newTableCache(fs, dir, d.blocks, d.opts.MaxOpenFiles)
	mopts := manifest.Options{
		FS: fs, Dir: dir, MaxManifestSize: d.opts.MaxManifestSize,
		OnObsolete:         d.onObsoleteTables,
		OnObsoleteManifest: func(n base.FileNum) { d.addObsoleteFile(base.MakeFilename(base.FileTypeManifest, n)) },
	}
	if isNew {
		d.vs = manifest.New(mopts)
	} else if d.vs, err = manifest.Load(mopts); err != nil {
		return err
	}
	plan, err := d.planRecovery(names, isNew)
	if err != nil {
		return err
	}
	d.recovery.Unexplained = plan.unexplained
	if err := d.recover(plan, isNew, undo); err != nil {
		return err
	}
	if !ro {
		d.deleteObsoleteAtOpen(plan.obsolete)
	}
	return nil
}

// listIfExists lists dir; a missing directory gives nil names and no error.
func listIfExists(fs vfs.FS, dir string) ([]string, error) {
	names, err := fs.List(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("kv: list %s: %w", dir, err)
	}
	return names, nil
}

// classifyDir decides from a directory listing whether Open may create a new
// store there (isNew), opens an existing one, or must refuse.
func (d *DB) classifyDir(names []string) (isNew bool, err error) {
	if slices.Contains(names, "CURRENT") {
		if d.opts.ErrorIfExists {
			return false, fmt.Errorf("%w: store %s exists", ErrInvalidArgument, d.dir)
		}
		return false, nil
	}
	var traces []string
	for _, name := range names {
		if base.IsStoreTrace(name) && !d.creationLeftover(name) {
			traces = append(traces, name)
		}
	}
	if len(traces) > 0 {
		slices.Sort(traces)
		return false, &CorruptionError{File: "CURRENT", Offset: -1, Reason: fmt.Sprintf(
			"missing, but %s holds files of a store (%s); Open creates a store only where there is none, and changed nothing (kv.Repair rebuilds a store from its tables and logs)",
			d.dir, summarize(traces, 10))}
	}
	if d.opts.ReadOnly || d.opts.ErrorIfNotExists {
		return false, fmt.Errorf("%w: store %s does not exist", ErrInvalidArgument, d.dir)
	}
	return true, nil
}

// creationLeftover reports whether a file is one that the creation of a new
// store writes before CURRENT, holding nothing: LOCK, an empty log, the
// temporary file that becomes CURRENT, or a manifest describing an empty
// store. A directory holding only these is a creation a crash interrupted.
func (d *DB) creationLeftover(name string) bool {
	typ, _, ok := base.ParseFilename(name)
	if !ok {
		return false
	}
	path := d.fs.PathJoin(d.dir, name)
	switch typ {
	case base.FileTypeLock, base.FileTypeTemp:
		return true
	case base.FileTypeLog:
		st, err := d.fs.Stat(path)
		return err == nil && st.Size() == 0
	case base.FileTypeManifest:
		return manifestIsEmptyStore(d.fs, path)
	}
	return false
}

// manifestIsEmptyStore reports whether a manifest's every record is intact
// and describes a store without tables or writes.
func manifestIsEmptyStore(fs vfs.FS, path string) bool {
	f, err := fs.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	r := record.NewReader(f, path)
	n := 0
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return n > 0
		}
		if err != nil {
			return false
		}
		var e manifest.VersionEdit
		if e.Decode(rec) != nil || len(e.NewFiles) > 0 || e.LastSeq != 0 || (n == 0 && e.Comparator != manifest.Comparator) {
			return false
		}
		n++
	}
}

// summarize joins up to max names, saying how many more there are.
func summarize(names []string, max int) string {
	if len(names) <= max {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:max], ", "), len(names)-max)
}

// recoveryPlan is what Open found in the directory and decided to do.
type recoveryPlan struct {
	logs        []logToReplay
	obsolete    []string // provably obsolete files of the store: deleted after the commit
	unexplained []string // kept: moved to lost/ after the commit
}

// logToReplay is a log holding writes the manifest's tables do not.
type logToReplay struct {
	num    base.FileNum
	sealed int64 // its sealed size; -1 if the store did not close it cleanly
}

// planRecovery proves the loaded manifest consistent with the files
// present, and sorts every file of the store into used, obsolete and
// unexplained. It writes nothing.
func (d *DB) planRecovery(names []string, isNew bool) (*recoveryPlan, error) {
	fs, vs := d.fs, d.vs
	rec := vs.Recovered()
	logNum := vs.LogNum()
	tracks := vs.TracksWALs()
	v := vs.Current()
	defer v.Unref()

	present := map[string]bool{}
	for _, name := range names {
		if typ, num, ok := base.ParseFilename(name); ok {
			present[name] = true
			if typ != base.FileTypeCurrent && typ != base.FileTypeLock {
				vs.MarkFileNumUsed(num) // never reuse a number a file has
			}
		}
	}

	var problems []string
	live := map[base.FileNum]bool{}
	for level, files := range v.Levels {
		for _, f := range files {
			live[f.FileNum] = true
			name := base.MakeFilename(base.FileTypeTable, f.FileNum)
			st, err := fs.Stat(fs.PathJoin(d.dir, name))
			switch {
			case errors.Is(err, os.ErrNotExist):
				problems = append(problems, fmt.Sprintf("table %s (L%d) is missing", name, level))
			case err != nil:
				return nil, fmt.Errorf("kv: stat %s: %w", name, err)
			case uint64(st.Size()) != f.Size:
				problems = append(problems, fmt.Sprintf("table %s (L%d) is %d bytes, the manifest says %d", name, level, st.Size(), f.Size))
			}
		}
	}

	plan := &recoveryPlan{}
	replay := map[base.FileNum]bool{}
	if tracks {
		for _, w := range vs.WALs() {
			name := base.MakeFilename(base.FileTypeLog, w.Num)
			if !present[name] {
				problems = append(problems, fmt.Sprintf("log %s, which holds writes not yet in any table, is missing", name))
				continue
			}
			plan.logs = append(plan.logs, logToReplay{num: w.Num, sealed: w.Size})
			replay[w.Num] = true
		}
	} else if logNum != 0 {
		// An older build's manifest records only the log number, and that
		// log exists until a later edit moves the number past it.
		if name := base.MakeFilename(base.FileTypeLog, logNum); !present[name] {
			problems = append(problems, fmt.Sprintf("log %s, which holds writes not yet in any table, is missing", name))
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		manifestName := base.MakeFilename(base.FileTypeManifest, rec.Manifest)
		reason := fmt.Sprintf("the manifest does not match the files present: %s", summarize(problems, 8))
		if rec.TornTail != nil {
			reason += fmt.Sprintf(" (its last record, ignored as torn, may have been a lost edit: %v)", rec.TornTail)
		}
		reason += "; Open changed nothing (kv.Repair rebuilds the manifest from the tables and logs present)"
		return nil, &CorruptionError{File: manifestName, Offset: -1, Reason: reason}
	}

	var lostLogs []string
	for _, name := range names {
		typ, num, ok := base.ParseFilename(name)
		if !ok {
			continue // not a name the store makes: never touched
		}
		switch typ {
		case base.FileTypeTable:
			switch {
			case live[num]:
			case num < rec.NextFileNum && !isNew:
				// A number the store handed out, for a table no version
				// lists: an input of a finished compaction, or the output of
				// a job that failed. (The checks above prove that no lost
				// edit's inputs were deleted, so no lost edit needs it.)
				plan.obsolete = append(plan.obsolete, name)
			default:
				// At or above the next file number: an interrupted flush's
				// or compaction's output, or a table only a lost manifest
				// edit lists.
				plan.unexplained = append(plan.unexplained, name)
			}
		case base.FileTypeLog:
			switch {
			case replay[num]:
				plan.obsolete = append(plan.obsolete, name) // once its writes are in tables
			case num < logNum:
				plan.obsolete = append(plan.obsolete, name) // flushed
			case !tracks && !isNew:
				plan.logs = append(plan.logs, logToReplay{num: num, sealed: -1})
				plan.obsolete = append(plan.obsolete, name)
			default:
				// A log the manifest does not record. The store records a
				// log before writing anything to it, so one of its own is
				// empty (created just before a crash); one holding data
				// proves that the manifest lost an edit, and the writes in
				// it may have been acknowledged.
				st, err := fs.Stat(fs.PathJoin(d.dir, name))
				switch {
				case err != nil:
					return nil, fmt.Errorf("kv: stat %s: %w", name, err)
				case st.Size() == 0:
					plan.obsolete = append(plan.obsolete, name)
				default:
					lostLogs = append(lostLogs, name)
				}
			}
		case base.FileTypeManifest:
			if isNew || num != rec.Manifest { // the loaded one goes through Activate
				plan.obsolete = append(plan.obsolete, name)
			}
		case base.FileTypeTemp:
			plan.obsolete = append(plan.obsolete, name)
		}
	}
	if len(lostLogs) > 0 {
		return nil, &CorruptionError{File: base.MakeFilename(base.FileTypeManifest, rec.Manifest), Offset: -1, Reason: fmt.Sprintf(
			"log %s holds writes, but the manifest does not record it (an edit of the manifest was lost); Open changed nothing (kv.Repair rebuilds the store from its tables and logs, this one included)",
			summarize(lostLogs, 8))}
	}
	slices.SortFunc(plan.logs, func(a, b logToReplay) int { return cmp.Compare(a.num, b.num) })
	return plan, nil
}

// moveToLost moves files to the lost/ subdirectory, where no Open deletes
// or uses them, and makes the moves durable. It runs before the commit
// point (Activate): once the new manifest's next file number is above
// them, they must not be in the directory any more, or a later Open would
// take them for obsolete ones. The renames are recorded in undo.
func moveToLost(fs vfs.FS, dir string, names []string, undo *openUndo, log *slog.Logger) error {
	if len(names) == 0 {
		return nil
	}
	lost := fs.PathJoin(dir, lostDir)
	if st, err := fs.Stat(lost); err == nil && !st.IsDir() {
		return fmt.Errorf("kv: cannot keep %s in %s: it is not a directory", summarize(names, 5), lost)
	}
	if err := fs.MkdirAll(lost, 0o755); err != nil {
		return fmt.Errorf("kv: create %s: %w", lost, err)
	}
	for _, name := range names {
		dst := fs.PathJoin(lost, name)
		for i := 1; ; i++ {
			if _, err := fs.Stat(dst); errors.Is(err, os.ErrNotExist) {
				break
			}
			dst = fs.PathJoin(lost, fmt.Sprintf("%s.%d", name, i))
		}
		src := fs.PathJoin(dir, name)
		if err := fs.Rename(src, dst); err != nil {
			return fmt.Errorf("kv: move %s to %s: %w", name, lost, err)
		}
		undo.moved = append(undo.moved, [2]string{src, dst})
		log.Warn("kv: moved a file no version lists and the manifest cannot explain to lost/", "file", name, "to", dst)
	}
	if err := vfs.SyncDir(fs, lost); err != nil {
		return fmt.Errorf("kv: sync %s: %w", lost, err)
	}
	if err := vfs.SyncDir(fs, dir); err != nil {
		return fmt.Errorf("kv: sync %s: %w", dir, err)
	}
	return nil
}
