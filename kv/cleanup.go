package kv

import (
	"cmp"
	"errors"
	"os"
	"slices"

	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/manifest"
	"github.com/warpkit/warpkit/kv/vfs"
)

// Obsolete files are deleted by one background goroutine: tables when no
// version lists them (manifest's OnObsolete), logs once their memtable is
// flushed, manifests once CURRENT names a newer one.

func (d *DB) onObsoleteTables(files []*manifest.FileMetadata) {
	d.obsoleteMu.Lock()
	for _, f := range files {
		d.obsoleteTables = append(d.obsoleteTables, f.FileNum)
	}
	d.obsoleteMu.Unlock()
	if d.cleanCh != nil {
		d.signal(d.cleanCh)
	}
}

func (d *DB) addObsoleteFile(name string) {
	d.obsoleteMu.Lock()
	d.obsoleteFiles = append(d.obsoleteFiles, name)
	d.obsoleteMu.Unlock()
	if d.cleanCh != nil {
		d.signal(d.cleanCh)
	}
}

func (d *DB) cleanLoop() {
	defer d.bgWG.Done()
	for {
		select {
		case <-d.bgCtx.Done():
			return
		case <-d.cleanCh:
			d.deleteObsolete()
		}
	}
}

// deleteObsolete removes the files queued so far, then syncs the directory
// so that the deletions survive a crash: a retired table that a crash
// brought back would be read by Repair (which ignores the manifest), and
// could return what the compactions that retired it dropped (a deleted
// value whose tombstone was elided at the bottom).
func (d *DB) deleteObsolete() {
	d.cleanMu.Lock()
	defer d.cleanMu.Unlock()
	d.obsoleteMu.Lock()
	tables, files := d.obsoleteTables, d.obsoleteFiles
	d.obsoleteTables, d.obsoleteFiles = nil, nil
	d.obsoleteMu.Unlock()
	if len(tables) > 0 && !d.opts.ReadOnly {
		defer func() {
			if err := vfs.SyncDir(d.fs, d.dir); err != nil {
				d.m.deleteErrors.Add(1)
				d.opts.logger().Warn("kv: cannot sync the directory after removing obsolete tables", "err", err)
			}
		}()
	}
	for _, n := range tables {
		d.tables.evict(n)
		d.tableTombsMu.Lock()
		delete(d.tableTombs, n)
		d.tableTombsMu.Unlock()
		err := d.removeFile(base.MakeFilename(base.FileTypeTable, n))
		d.m.tablesDeleted.Add(1)
		if f := d.events().TableDeleted; f != nil {
			f(TableDeleteInfo{FileNum: n, Err: err})
		}
	}
	for _, name := range files {
		d.removeReport(name)
	}
}

// removeReport removes an obsolete file and reports the deletion of a log
// to the listener.
func (d *DB) removeReport(name string) {
	err := d.removeFile(name)
	if typ, n, ok := base.ParseFilename(name); ok && typ == base.FileTypeLog {
		if f := d.events().WALDeleted; f != nil {
			f(WALInfo{FileNum: n, Err: err})
		}
	}
}

// removeFile deletes a file of the store; a failure only leaves garbage that
// the next Open removes, so it is counted (and returned only for the
// events). A read-only store never removes anything.
func (d *DB) removeFile(name string) error {
	if d.opts.ReadOnly {
		return nil
	}
	err := d.fs.Remove(d.fs.PathJoin(d.dir, name))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		d.m.deleteErrors.Add(1)
		d.opts.logger().Warn("kv: cannot remove an obsolete file", "file", name, "err", err)
		return err
	}
	return nil
}

// deleteObsoleteAtOpen removes what a crash or failed deletion left, as
// planRecovery proved obsolete: tables no version lists numbered below the
// manifest's next file number, temporary files, old manifests and flushed or
// replayed logs. Logs go in ascending order, as the cleaner deletes them, so
// that a later Open finding a log missing can tell that every older log's
// deletion was recorded first.
func (d *DB) deleteObsoleteAtOpen(names []string) {
	num := func(name string) base.FileNum {
		_, n, _ := base.ParseFilename(name)
		return n
	}
	names = slices.Clone(names)
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(num(a), num(b)) })
	for _, name := range names {
		typ, n, ok := base.ParseFilename(name)
		if !ok {
			continue
		}
		if typ == base.FileTypeTable {
			d.tables.evict(n)
			d.m.tablesDeleted.Add(1)
			err := d.removeFile(name)
			if f := d.events().TableDeleted; f != nil {
				f(TableDeleteInfo{FileNum: n, Err: err})
			}
			continue
		}
		d.removeReport(name)
	}
	d.deleteObsolete()
}
