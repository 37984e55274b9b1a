//go:build linux

package vfs

import (
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
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

// vectorOS says whether OS files write vectors (VectorWriter).
const vectorOS = true

// iovMax is the most buffers one writev(2) takes (IOV_MAX).
const iovMax = 1024

// WriteVectors writes bufs with writev(2), IOV_MAX buffers a call, going on
// after short writes (VectorWriter).
func (f osFile) WriteVectors(bufs [][]byte) (int64, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var total int64
	for {
		for len(bufs) > 0 && len(bufs[0]) == 0 {
			bufs = bufs[1:]
		}
		if len(bufs) == 0 {
			return total, nil
		}
		part := bufs[:min(len(bufs), iovMax)]
		var n int
		var werr error
		if err := rc.Write(func(fd uintptr) bool {
			for {
				n, werr = unix.Writev(int(fd), part)
				if werr != unix.EINTR {
					return werr != unix.EAGAIN // (not ready: the poller waits)
				}
			}
		}); err != nil {
			return total, err
		}
		if werr != nil {
			return total, &os.PathError{Op: "writev", Path: f.Name(), Err: werr}
		}
		if n == 0 {
			return total, &os.PathError{Op: "writev", Path: f.Name(), Err: io.ErrShortWrite}
		}
		total += int64(n)
		// Drop what was written: whole buffers, then the start of one.
		for n > 0 && len(bufs) > 0 {
			if n >= len(bufs[0]) {
				n -= len(bufs[0])
				bufs = bufs[1:]
			} else { // (a new slice: the caller's stays as it was)
				bufs = append([][]byte{bufs[0][n:]}, bufs[1:]...)
				n = 0
			}
		}
	}
}

// StartWriteback starts the writeback of the file's first upTo bytes
// (WritebackStarter): sync_file_range(2) waits for the writeback already
// under way in the range (which bounds the dirty data a writer runs ahead
// by) and starts it for the pages still dirty, without a sync of the
// device's cache or of metadata.
func (f osFile) StartWriteback(upTo int64) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			serr = unix.SyncFileRange(int(fd), 0, upTo, unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE)
			if serr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "sync_file_range", Path: f.Name(), Err: serr}
	}
	return nil
}
