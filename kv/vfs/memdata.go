package vfs

import (
	"sort"
	"sync"
)

// memData is a MemFS file's contents: chunks that are appended to and never
// moved. A file grown by copying into a doubled slice touches about three
// times its size in fresh memory (each fresh page a fault on the first
// write: in a virtual machine the larger part of writing a table to
// MemFS); chunks touch it once.
//
// Chunk capacities double from memChunkMin to memChunkMax, so small files
// stay small and large ones take a chunk per MiB. The MemFS keeps the
// full-size chunks of files nothing refers to any more for its next
// writes (chunkPool): fresh memory is what costs, not the copy.
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

// append adds p at the end; a new chunk of capacity c comes from
// alloc(c) (nil: a fresh one).
func (d *memData) append(p []byte, alloc func(c int) []byte) {
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
			var chunk []byte
			if alloc != nil {
				chunk = alloc(c)
			} else {
				chunk = make([]byte, 0, c)
			}
			d.chunks = append(d.chunks, chunk)
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

// chunkPool holds full-size chunks (memChunkMax) of files that nothing
// refers to any more, for new chunks: a write into a fresh chunk faults in
// every page of it (and the Go heap hands back to the OS what a GC freed,
// so fresh it stays), where a reused chunk is warm memory. On the 2-core
// development machine 64 MiB written in 64 KiB writes ran at 1.0-2.2 GB/s
// into fresh 1 MiB chunks and 11-20 GB/s into reused ones; the CUDA
// compaction engine's host time per job was mostly such MemFS writes.
type chunkPool struct {
	mu     sync.Mutex
	chunks [][]byte
}

// chunkPoolMax bounds the memory a pool holds (in chunks: 256 MiB).
const chunkPoolMax = 256

// poisonReused makes put fill every chunk it keeps with 0xA5 (tests: a
// file read after its chunks went back would show it).
var poisonReused = false

// get returns a chunk of capacity c and length 0: a kept one when c is
// the full size and one is kept, else a fresh one.
func (p *chunkPool) get(c int) []byte {
	if c == memChunkMax {
		p.mu.Lock()
		if k := len(p.chunks); k > 0 {
			b := p.chunks[k-1]
			p.chunks[k-1] = nil
			p.chunks = p.chunks[:k-1]
			p.mu.Unlock()
			return b[:0]
		}
		p.mu.Unlock()
	}
	return make([]byte, 0, c)
}

// put keeps d's full-size chunks (up to chunkPoolMax in all); d must be
// unreachable: no file refers to it.
func (p *chunkPool) put(d *memData) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range d.chunks {
		if cap(c) != memChunkMax || len(p.chunks) >= chunkPoolMax {
			continue
		}
		if poisonReused {
			c = c[:cap(c)]
			for i := range c {
				c[i] = 0xA5
			}
		}
		p.chunks = append(p.chunks, c[:0])
	}
}
