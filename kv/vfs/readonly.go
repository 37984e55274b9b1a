package vfs

import (
	"io"
	"os"
)

// NewReadOnly returns fs as a read-only mount would present it. Create,
// Remove, Rename, MkdirAll and Lock fail, and so do Write and Sync on every
// File that Open or OpenDir returns, with an *os.PathError whose Err is
// syscall.EROFS, so that errors.Is(err, syscall.EROFS) holds (Plan 9, whose
// syscall package has no EROFS, gets an error of its own); none of them
// reaches fs. Lock fails because on a real read-only mount its read-write
// open of the lock file does; a reader takes LockShared instead. Open,
// OpenDir, List, Stat, LockShared, PathJoin and PathBase pass through to fs.
//
// It is stricter than a real mount in two ways, both on purpose: the
// mutating operations fail whether or not their target exists (os.MkdirAll
// of an existing directory, for one, would succeed), and Sync fails even on
// a file or directory opened for reading, where fsync would succeed. So a
// store that works over it provably writes, and syncs, nothing. Tests use it
// to check read-only opens of a store, and opens of a backup or snapshot
// that must be left untouched: the wrapped FS (a MemFS, say) can be compared
// before and after.
func NewReadOnly(fs FS) FS { return readOnlyFS{fs: fs} }

type readOnlyFS struct{ fs FS }

func erofs(op, name string) error {
	return &os.PathError{Op: op, Path: name, Err: errReadOnly}
}

// The operations that would change the file system fail and reach nothing.
// Rename's error is an *os.PathError naming oldname, not the *os.LinkError
// os.Rename returns.

func (readOnlyFS) Create(name string) (File, error)         { return nil, erofs("create", name) }
func (readOnlyFS) Remove(name string) error                 { return erofs("remove", name) }
func (readOnlyFS) Rename(oldname, newname string) error     { return erofs("rename", oldname) }
func (readOnlyFS) MkdirAll(dir string, _ os.FileMode) error { return erofs("mkdir", dir) }
func (readOnlyFS) Lock(name string) (io.Closer, error)      { return nil, erofs("lock", name) }

// The rest pass through.

func (r readOnlyFS) LockShared(name string) (io.Closer, error) { return r.fs.LockShared(name) }
func (r readOnlyFS) List(dir string) ([]string, error)         { return r.fs.List(dir) }
func (r readOnlyFS) Stat(name string) (os.FileInfo, error)     { return r.fs.Stat(name) }
func (r readOnlyFS) PathJoin(elem ...string) string            { return r.fs.PathJoin(elem...) }
func (r readOnlyFS) PathBase(path string) string               { return r.fs.PathBase(path) }

func (r readOnlyFS) Open(name string) (File, error) {
	f, err := r.fs.Open(name)
	if err != nil {
		return nil, err
	}
	return readOnlyFile{File: f, name: name}, nil
}

func (r readOnlyFS) OpenDir(name string) (File, error) {
	f, err := r.fs.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return readOnlyFile{File: f, name: name}, nil
}

// readOnlyFile passes reads, Size and Close through to File.
type readOnlyFile struct {
	File
	name string
}

func (f readOnlyFile) Write([]byte) (int, error) { return 0, erofs("write", f.name) }
func (f readOnlyFile) Sync() error               { return erofs("sync", f.name) }
