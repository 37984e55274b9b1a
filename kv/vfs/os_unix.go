//go:build unix

package vfs

import (
	"errors"
	"io"
	"os"
	"syscall"
)

// lockFile takes a non-blocking flock on f, shared or exclusive; closing the
// descriptor releases it. A flock belongs to the open file description, so
// two opens of one file in this process conflict exactly as two processes do.
func lockFile(f *os.File, shared bool) (io.Closer, error) {
	how := syscall.LOCK_EX
	if shared {
		how = syscall.LOCK_SH
	}
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == syscall.EINTR {
			continue
		}
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrLocked
		}
		if err != nil {
			return nil, &os.PathError{Op: "flock", Path: f.Name(), Err: err}
		}
		return f, nil
	}
}
