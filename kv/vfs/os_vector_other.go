//go:build !linux

package vfs

// vectorOS says whether OS files write vectors (VectorWriter): only Linux's
// use writev(2) here; elsewhere sstable's Writer buffers.
const vectorOS = false
