//go:build !plan9

package vfs

import "syscall"

// errReadOnly is the error NewReadOnly's file systems fail with.
var errReadOnly error = syscall.EROFS
