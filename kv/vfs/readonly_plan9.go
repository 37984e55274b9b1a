//go:build plan9

package vfs

import "syscall"

// errReadOnly is the error NewReadOnly's file systems fail with; Plan 9's
// syscall package has no EROFS.
var errReadOnly error = syscall.ErrorString("read-only file system")
