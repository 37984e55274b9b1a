package gpurt

import (
	"fmt"
	"unsafe"

	"github.com/warpkit/warpkit/cuda"
)

// Layout places typed arrays in one scratch buffer, each at a 16-byte
// boundary, so that a worker needing several arrays at once takes one
// allocation and grows one buffer: on the device a cuMemAlloc costs 25–40 µs
// (and a Buf that grows waits for its stream first), which a fresh
// structure's first batch paid once per array.
//
//	var l gpurt.Layout
//	cols := gpurt.Place[uint32](&l, entries)
//	nb := gpurt.Place[uint64](&l, movers+1)
//	buf, err := l.Get(&w.scratch, dev, stream)
//	c, b := cols.In(buf), nb.In(buf)
type Layout struct{ bytes int64 }

// Part is where a Layout placed n elements of T.
type Part[T cuda.Elem] struct {
	off int64 // bytes
	n   int
}

// Place reserves n elements of T in l (n == 0: an empty part).
func Place[T cuda.Elem](l *Layout, n int) Part[T] {
	if n < 0 {
		n = 0
	}
	var z T
	p := Part[T]{off: l.bytes, n: n}
	l.bytes += (int64(n)*int64(unsafe.Sizeof(z)) + 15) &^ 15
	return p
}

// Words returns the 8-byte words the layout spans (at least one).
func (l *Layout) Words() int { return int(max(l.bytes, 8) / 8) }

// Get returns the scratch buffer b grown to the layout (Buf.Get: the
// contents are not kept when it grows).
func (l *Layout) Get(b *Buf[uint64], dev *cuda.Device, stream *cuda.Stream) (*cuda.Buffer, error) {
	s, err := b.Get(dev, stream, l.Words())
	if err != nil {
		return nil, err
	}
	return s.Buffer(), nil
}

// In returns the part's view of buf, a buffer of the part's Layout (Get).
// Like cuda.Slice.Sub it panics on a buffer too small for the part: the
// layout and the buffer disagree, a bug of the caller.
func (p Part[T]) In(buf *cuda.Buffer) cuda.Slice[T] {
	var z T
	s, err := cuda.View[T](buf, int(p.off/int64(unsafe.Sizeof(z))), p.n)
	if err != nil {
		panic(fmt.Sprintf("gpurt: a layout's part [%d bytes at %d] outside its buffer: %v", int64(p.n)*int64(unsafe.Sizeof(z)), p.off, err))
	}
	return s
}

// Len returns the part's element count.
func (p Part[T]) Len() int { return p.n }
