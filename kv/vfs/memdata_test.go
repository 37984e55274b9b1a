package vfs

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestMemDataMatchesSlice appends writes of every size (empty, within a
// chunk, across several, larger than the largest chunk) and reads back at
// random offsets and lengths, against one plain slice.
func TestMemDataMatchesSlice(t *testing.T) {
	src := rand.NewChaCha8([32]byte{1})
	rng := rand.New(src)
	buf := make([]byte, 2*memChunkMax)
	for round := range 20 {
		var d memData
		var want []byte
		for range rng.IntN(40) {
			var n int
			switch rng.IntN(4) {
			case 0:
				n = rng.IntN(16)
			case 1:
				n = rng.IntN(5000)
			case 2:
				n = rng.IntN(3 * memChunkMax)
			default:
				n = memChunkMax - len(want)%memChunkMax // to a chunk boundary, or near
			}
			p := make([]byte, n)
			src.Read(p)
			d.append(p)
			want = append(want, p...)
			if d.len() != len(want) {
				t.Fatalf("round %d: len %d, want %d", round, d.len(), len(want))
			}
		}
		for range 50 {
			off := rng.IntN(len(want) + 10)
			p := buf[:rng.IntN(len(buf))]
			n := d.readAt(p, off)
			exp := 0
			if off < len(want) {
				exp = min(len(p), len(want)-off)
			}
			if n != exp || !bytes.Equal(p[:n], want[min(off, len(want)):min(off, len(want))+n]) {
				t.Fatalf("round %d: readAt(%d bytes, %d) = %d bytes, want %d, or the bytes differ", round, len(p), off, n, exp)
			}
		}
		if k := rng.IntN(len(want) + 1); !bytes.Equal(d.prefix(k), want[:k]) {
			t.Fatalf("round %d: prefix(%d) differs", round, k)
		}
	}
}
