//go:build !unix

package vfs

import (
	"io"
	"os"
	"path/filepath"
	"sync"
)

// Without flock, locks only exclude other opens in this process.
var procLocks lockTable

type heldLock struct {
	f      *os.File
	key    string
	shared bool
	once   sync.Once
}

func (l *heldLock) Close() error {
	l.once.Do(func() { procLocks.release(l.key, l.shared) })
	return l.f.Close()
}

// lockKey names a file the same way however it was spelt when opened.
func lockKey(name string) string {
	if abs, err := filepath.Abs(name); err == nil {
		return abs
	}
	return filepath.Clean(name)
}

func lockFile(f *os.File, shared bool) (io.Closer, error) {
	key := lockKey(f.Name())
	if !procLocks.acquire(key, shared) {
		return nil, ErrLocked
	}
	return &heldLock{f: f, key: key, shared: shared}, nil
}
