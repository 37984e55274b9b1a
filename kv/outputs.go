package kv

import (
	"errors"
	"fmt"
	"sync"

	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/manifest"
	"github.com/warpkit/warpkit/kv/vfs"
)

// outputTables tracks the tables one compaction job (of the store, or of
// Repair) creates, so that they can be deleted if the job fails. A
// compactor may create tables from several goroutines (a GPU compactor
// encoding outputs in parallel), and one that leaks a goroutine may call
// CreateTable after Compact returned: such a late call fails instead of
// leaving a table nobody deletes.
type outputTables struct {
	d        *DB
	mu       sync.Mutex
	created  []base.FileNum
	finished bool
}

func (d *DB) newOutputTables() *outputTables { return &outputTables{d: d} }

// errCreateAfterFinish is what a CreateTable after the job's end returns.
var errCreateAfterFinish = errors.New("kv: CreateTable called after the compaction returned")

// create is the job's CreateTable. The number is listed before the file
// exists (so a failed job removes it) and the file is created outside the
// lock (so a compactor's goroutines create theirs in parallel).
func (o *outputTables) create() (base.FileNum, vfs.File, error) {
	d := o.d
	o.mu.Lock()
	if o.finished {
		o.mu.Unlock()
		return 0, nil, errCreateAfterFinish
	}
	num := d.vs.NewFileNum()
	o.created = append(o.created, num)
	o.mu.Unlock()
	name := base.MakeFilename(base.FileTypeTable, num)
	f, err := d.fs.Create(d.fs.PathJoin(d.dir, name))
	if err != nil {
		return 0, nil, fmt.Errorf("kv: create table %s: %w", name, err)
	}
	f = vfs.NewSyncingFile(f, d.opts.BytesPerSync)
	o.mu.Lock()
	late := o.finished
	o.mu.Unlock()
	if late { // the job's cleanup may have run before the file existed
		f.Close()
		d.removeFile(name)
		return 0, nil, errCreateAfterFinish
	}
	return num, f, nil
}

// finish ends the job (a later create fails) and returns the tables it
// created.
func (o *outputTables) finish() []base.FileNum {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.finished = true
	return o.created
}

// settle finishes the job and deals with its tables by its outcome: if the
// job succeeded (jobErr nil), it makes their directory entries durable and
// deletes the tables it created but did not return (a compactor that fell
// back after a failed attempt); if the job or that sync failed, it deletes
// every table the job created and returns the error.
func (o *outputTables) settle(jobErr error, outputs []*manifest.FileMetadata) error {
	d := o.d
	var created []base.FileNum
	err := jobErr
	if err == nil {
		created = o.finishReturned(outputs)
		err = vfs.SyncDir(d.fs, d.dir)
	} else {
		created = o.finish()
	}
	if err != nil {
		for _, n := range created {
			d.removeFile(base.MakeFilename(base.FileTypeTable, n))
		}
	}
	return err
}

// finishReturned finishes a job that succeeded: it deletes the tables the
// job created but did not return in outputs (a compactor that fell back
// after a failed attempt) and returns the ones it created and returned.
func (o *outputTables) finishReturned(outputs []*manifest.FileMetadata) []base.FileNum {
	returned := make(map[base.FileNum]bool, len(outputs))
	for _, m := range outputs {
		returned[m.FileNum] = true
	}
	var kept []base.FileNum
	for _, n := range o.finish() {
		if returned[n] {
			kept = append(kept, n)
		} else {
			o.d.removeFile(base.MakeFilename(base.FileTypeTable, n))
		}
	}
	return kept
}
