//go:build !linux

package vfs

import "os"

func syncData(f *os.File) error { return f.Sync() }
