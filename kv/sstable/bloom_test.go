package sstable

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
)

// TestFastMod: x % d without a division, for edge and random x and d.
func TestFastMod(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	ds := []uint32{1, 2, 3, 7, 64, 65, 1000, 1<<31 - 1, 1 << 31, math.MaxUint32 - 1, math.MaxUint32}
	for range 200 {
		ds = append(ds, rng.Uint32()|1, rng.Uint32N(1<<20)+1)
	}
	for _, d := range ds {
		m := newFastMod(d)
		xs := []uint32{0, 1, d - 1, d, d + 1, math.MaxUint32, math.MaxUint32 - 1, 2 * d, 2*d - 1}
		for range 500 {
			xs = append(xs, rng.Uint32())
		}
		for _, x := range xs {
			if got, want := m.mod(x), x%d; got != want {
				t.Fatalf("%d %% %d = %d, want %d", x, d, got, want)
			}
		}
	}
}

// TestBuildBloomAsLevelDB: the filter's bits are LevelDB's (a remainder
// per probe), for filters of many sizes.
func TestBuildBloomAsLevelDB(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{0, 1, 5, 100, 1000, 75000} {
		for _, bpk := range []int{1, 10, 20} {
			hashes := make([]uint32, n)
			for i := range hashes {
				hashes[i] = rng.Uint32()
			}
			// The reference: LevelDB's loop, with its division.
			nbits := max(n*bpk, 64)
			nbytes := (nbits + 7) / 8
			nbits = nbytes * 8
			k := bloomProbes(bpk)
			want := make([]byte, nbytes, nbytes+1)
			for _, h := range hashes {
				delta := h>>17 | h<<15
				for range k {
					pos := h % uint32(nbits)
					want[pos/8] |= 1 << (pos % 8)
					h += delta
				}
			}
			want = append(want, byte(k))
			got := buildBloom(nil, hashes, bpk)
			if !bytes.Equal(got, want) {
				t.Fatalf("%d keys, %d bits a key: the filter differs from LevelDB's", n, bpk)
			}
			for _, h := range hashes {
				if !bloomMayContain(got, h) {
					t.Fatalf("%d keys, %d bits a key: a key's hash %#x not found", n, bpk, h)
				}
			}
		}
	}
}

func BenchmarkBuildBloom(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	hashes := make([]uint32, 75000)
	for i := range hashes {
		hashes[i] = rng.Uint32()
	}
	var dst []byte
	b.SetBytes(int64(len(hashes)))
	for b.Loop() {
		dst = buildBloom(dst[:0], hashes, 10)
	}
}
