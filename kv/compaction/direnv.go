package compaction

import (
	"errors"
	"os"
	"sync"

	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/manifest"
	"github.com/warpkit/warpkit/kv/sstable"
	"github.com/warpkit/warpkit/kv/vfs"
)

// DirEnv is an Env over one directory of a file system, for running jobs
// outside a store (tests and benchmarks of compactors): tables are named
// <file number>.sst and numbered from 1, each opened once and its reader
// shared, and the readers handed out are counted until released. A store
// gives its compactions its own Env.
type DirEnv struct {
	fs  vfs.FS
	dir string

	// CreateHook, when set, is called before each CreateTable; an error it
	// returns fails that CreateTable (fault injection).
	CreateHook func() error

	mu      sync.Mutex // a job's parts call OpenTable and CreateTable concurrently
	next    base.FileNum
	readers map[base.FileNum]*sstable.Reader
	held    int
	created []base.FileNum
}

// NewDirEnv returns a DirEnv over dir of fs (it must exist), holding no
// table yet.
func NewDirEnv(fs vfs.FS, dir string) *DirEnv {
	return &DirEnv{fs: fs, dir: dir, next: 1, readers: map[base.FileNum]*sstable.Reader{}}
}

// FS returns the file system the tables live in.
func (e *DirEnv) FS() vfs.FS { return e.fs }

// Path returns where table n lives.
func (e *DirEnv) Path(n base.FileNum) string { return e.fs.PathJoin(e.dir, n.String()+".sst") }

// Env returns the compaction.Env of the directory, whose output tables are
// written with opts.
func (e *DirEnv) Env(opts sstable.WriterOptions) Env {
	return Env{
		OpenTable:     e.openTable,
		OpenTableFile: func(f *manifest.FileMetadata) (vfs.File, error) { return e.fs.Open(e.Path(f.FileNum)) },
		CreateTable:   e.createTable,
		WriterOptions: opts,
	}
}

func (e *DirEnv) openTable(f *manifest.FileMetadata) (*sstable.Reader, func(), error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.readers[f.FileNum]
	if !ok {
		file, err := e.fs.Open(e.Path(f.FileNum))
		if err != nil {
			return nil, nil, err
		}
		if r, err = sstable.NewReader(file, sstable.ReaderOptions{FileName: f.FileNum.String()}); err != nil {
			file.Close()
			return nil, nil, err
		}
		e.readers[f.FileNum] = r
	}
	e.held++
	var once sync.Once
	return r, func() {
		once.Do(func() {
			e.mu.Lock()
			e.held--
			e.mu.Unlock()
		})
	}, nil
}

func (e *DirEnv) createTable() (base.FileNum, vfs.File, error) {
	if e.CreateHook != nil {
		if err := e.CreateHook(); err != nil {
			return 0, nil, err
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	n := e.next
	e.next++
	e.created = append(e.created, n)
	f, err := e.fs.Create(e.Path(n))
	return n, f, err
}

// Held returns how many readers OpenTable handed out are not released.
func (e *DirEnv) Held() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.held
}

// TakeCreated returns the tables created since the last call (a job's
// outputs, or the inputs written before it).
func (e *DirEnv) TakeCreated() []base.FileNum {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.created
	e.created = nil
	return c
}

// Remove closes the readers and removes every table the DirEnv created.
func (e *DirEnv) Remove() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for n, r := range e.readers {
		r.Close()
		delete(e.readers, n)
	}
	var errs []error
	for n := base.FileNum(1); n < e.next; n++ {
		if err := e.fs.Remove(e.Path(n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
