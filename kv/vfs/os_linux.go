//go:build linux

package vfs

import (
	"os"
	"syscall"
)

// syncData uses fdatasync: the store's files only grow, and their sizes are
// recorded in the data they hold, so metadata such as mtime need not be synced.
func syncData(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}
