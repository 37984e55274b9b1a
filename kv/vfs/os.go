package vfs

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// Default is the operating system's file system.
var Default FS = osFS{}

type osFS struct{}

type osFile struct{ *os.File }

func (f osFile) Size() (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (f osFile) Sync() error { return syncData(f.File) }

func (osFS) Create(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Open(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) OpenDir(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return osDir{f}, nil
}

// osDir syncs with a full fsync: fdatasync on a directory is not enough on
// every file system.
type osDir struct{ *os.File }

func (d osDir) Sync() error { return d.File.Sync() }
func (d osDir) Size() (int64, error) {
	return 0, fmt.Errorf("vfs: size of directory %s", d.Name())
}

func (osFS) Remove(name string) error                    { return os.Remove(name) }
func (osFS) Rename(oldname, newname string) error        { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }
func (osFS) Stat(name string) (os.FileInfo, error)       { return os.Stat(name) }
func (osFS) PathJoin(elem ...string) string              { return filepath.Join(elem...) }
func (osFS) PathBase(path string) string                 { return filepath.Base(path) }

func (osFS) List(dir string) ([]string, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Readdirnames(-1)
}

func (osFS) Lock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	c, err := lockFile(f, false)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("vfs: lock %s: %w", name, err)
	}
	return c, nil
}

// LockShared opens the file read-only, so it never creates it. A directory
// is refused, as Lock's read-write open refuses one, so that the two agree
// with MemFS.
func (osFS) LockShared(name string) (io.Closer, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || fi.IsDir() {
		f.Close()
		if err == nil {
			err = &os.PathError{Op: "lock", Path: name, Err: syscall.EISDIR}
		}
		return nil, err
	}
	c, err := lockFile(f, true)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("vfs: lock %s: %w", name, err)
	}
	return c, nil
}
