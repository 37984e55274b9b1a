//go:build !unix

package vfs

import (
	"io"
	"os"
	"sync"
)

// Without flock, locks only exclude other opens in this process.
var (
	lockMu   sync.Mutex
	lockHeld = map[string]bool{}
)

type heldLock struct {
	f    *os.File
	once sync.Once
}

func (l *heldLock) Close() error {
	l.once.Do(func() {
		lockMu.Lock()
		delete(lockHeld, l.f.Name())
		lockMu.Unlock()
	})
	return l.f.Close()
}

func lockFile(f *os.File) (io.Closer, error) {
	lockMu.Lock()
	defer lockMu.Unlock()
	if lockHeld[f.Name()] {
		return nil, ErrLocked
	}
	lockHeld[f.Name()] = true
	return &heldLock{f: f}, nil
}
