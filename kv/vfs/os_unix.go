//go:build unix

package vfs

import (
	"errors"
	"io"
	"os"
	"syscall"
)

// lockFile takes a flock; closing the descriptor releases it.
func lockFile(f *os.File) (io.Closer, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return nil, ErrLocked
	}
	if err != nil {
		return nil, err
	}
	return f, nil
}
