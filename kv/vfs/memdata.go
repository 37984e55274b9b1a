package vfs

import "sort"

// memData is a MemFS file's contents: chunks that are appended to and never
// moved. A file grown by copying into a doubled slice touches about three
// times its size in fresh memory (each fresh page a fault on the first
// write: in a virtual machine the larger part of writing a table to
// MemFS); chunks touch it once.
//
// Chunk capacities double from memChunkMin to memChunkMax, so small files
// stay small and large ones take a chunk per MiB.
type memData struct {
	chunks [][]byte // every chunk but the last is full
	starts []int    // starts[i] is the file offset of chunks[i]
	size   int
}

const (
	memChunkMin = 512
	memChunkMax = 1 << 20
)

// len returns the file's size.
func (d *memData) len() int { return d.size }

// append adds p at the end.
func (d *memData) append(p []byte) {
	for len(p) > 0 {
		if n := len(d.chunks); n == 0 || len(d.chunks[n-1]) == cap(d.chunks[n-1]) {
			c := memChunkMin
			if n > 0 {
				c = min(2*cap(d.chunks[n-1]), memChunkMax)
			}
			if n == 0 && len(p) > c {
				// One large first write (a whole table written at once)
				// takes a chunk of its own size.
				c = min(len(p), memChunkMax)
			}
			d.chunks = append(d.chunks, make([]byte, 0, c))
			d.starts = append(d.starts, d.size)
		}
		last := &d.chunks[len(d.chunks)-1]
		k := min(len(p), cap(*last)-len(*last))
		*last = append(*last, p[:k]...)
		d.size += k
		p = p[k:]
	}
}

// readAt copies the bytes at off into p and returns how many it copied
// (fewer than len(p) only at the end of the file).
func (d *memData) readAt(p []byte, off int) int {
	if off >= d.size {
		return 0
	}
	i := sort.SearchInts(d.starts, off+1) - 1 // the chunk holding off
	n := 0
	for ; i < len(d.chunks) && n < len(p); i++ {
		c := d.chunks[i]
		if at := off + n - d.starts[i]; at < len(c) {
			n += copy(p[n:], c[at:])
		}
	}
	return n
}

// prefix returns a copy of the first n bytes.
func (d *memData) prefix(n int) []byte {
	out := make([]byte, n)
	d.readAt(out, 0)
	return out
}

// memDataOf returns contents holding b (not copied).
func memDataOf(b []byte) memData {
	if len(b) == 0 {
		return memData{}
	}
	return memData{chunks: [][]byte{b[:len(b):len(b)]}, starts: []int{0}, size: len(b)}
}
