// Package vfs is the file-system layer under the kv store: every file the
// store touches goes through an FS. Four implementations ship with it:
//
//   - Default, the operating system's file system;
//   - NewMem, an in-memory file system that also models durability: data
//     written to a file becomes durable only when the file is synced, and a
//     directory entry (create, rename, remove) only when its directory is
//     synced. CrashClone returns the file system as a crash at that instant
//     would leave it, optionally keeping a random prefix of unsynced data;
//   - NewFault, a wrapper that injects I/O errors chosen by an Injector;
//   - NewReadOnly, a wrapper that presents an FS as a read-only mount would:
//     every operation that would change it, and every sync, fails with an
//     error matching syscall.EROFS.
//
// Files are written sequentially (Create, Write, Sync, Close) and read with
// Read or ReadAt; the store never overwrites a file in place.
//
// All implementations are safe for concurrent use by multiple goroutines;
// a single File is safe for concurrent ReadAt calls, and for one writer.
package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// File is an open file.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.Closer
	// Sync makes the data written so far durable.
	Sync() error
	// Size returns the file's current length in bytes.
	Size() (int64, error)
}

// VectorWriter is implemented by files that write several buffers in one
// call, as one Write of their concatenation would, without joining them
// first: writev(2) on Linux, and MemFS appends each. sstable.Writer writes
// runs of blocks sealed elsewhere through it (Writer.AddEncodedBlocks),
// saving the copy into its buffer. A partial write returns the bytes
// written and the error.
type VectorWriter interface {
	WriteVectors(bufs [][]byte) (int64, error)
}

// FS is a file system.
type FS interface {
	// Create creates (or truncates) a file for writing.
	Create(name string) (File, error)
	// Open opens a file for reading.
	Open(name string) (File, error)
	// OpenDir opens a directory so that it can be synced, which makes the
	// creations, renames and removals of its entries durable.
	OpenDir(name string) (File, error)
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// Rename renames a file, replacing newname if it exists; atomic.
	Rename(oldname, newname string) error
	// MkdirAll creates a directory and any missing parents.
	MkdirAll(dir string, perm os.FileMode) error
	// List returns the names (not paths) of the entries of a directory.
	List(dir string) ([]string, error)
	// Stat returns information about a file.
	Stat(name string) (os.FileInfo, error)
	// Lock takes an exclusive lock on the named file, creating it if needed.
	// It fails without waiting, wrapping ErrLocked, while any other holder
	// exists, exclusive (Lock) or shared (LockShared), in this process or
	// another. Closing the returned Closer releases the lock.
	Lock(name string) (io.Closer, error)
	// LockShared takes a shared lock on the named file, which must exist (it is
	// opened read-only and never created: a missing file is an error matching
	// os.ErrNotExist). Several shared holders may coexist, in this process or
	// others, but none beside an exclusive holder (Lock); it fails without
	// waiting, wrapping ErrLocked. Closing the returned Closer releases it.
	LockShared(name string) (io.Closer, error)
	// PathJoin joins path elements with the file system's separator.
	PathJoin(elem ...string) string
	// PathBase returns the last element of a path.
	PathBase(path string) string
}

// ErrLocked is returned (wrapped) by Lock and LockShared when a lock of a
// conflicting kind is held.
var ErrLocked = errors.New("vfs: lock held")

// ReadFile reads a whole file.
func ReadFile(fs FS, name string) ([]byte, error) {
	f, err := fs.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, size)
	if _, err := io.ReadFull(f, buf); err != nil {
		return nil, fmt.Errorf("vfs: read %s: %w", name, err)
	}
	return buf, nil
}

// WriteFile creates name with the given contents and syncs it. It does not
// sync the directory.
func WriteFile(fs FS, name string, data []byte) error {
	f, err := fs.Create(name)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// SyncDir opens and syncs a directory.
func SyncDir(fs FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}
