package sstable

import (
	"encoding/binary"
	"math/bits"
)

// bloomHash is LevelDB's hash (a Murmur variant) with LevelDB's bloom seed.
func bloomHash(b []byte) uint32 {
	const (
		seed = 0xbc9f1d34
		m    = 0xc6a4a793
	)
	h := uint32(seed) ^ uint32(len(b))*m
	for ; len(b) >= 4; b = b[4:] {
		h += binary.LittleEndian.Uint32(b)
		h *= m
		h ^= h >> 16
	}
	switch len(b) {
	case 3:
		h += uint32(b[2]) << 16
		fallthrough
	case 2:
		h += uint32(b[1]) << 8
		fallthrough
	case 1:
		h += uint32(b[0])
		h *= m
		h ^= h >> 24
	}
	return h
}

// bloomProbes is the number of probes for a bits-per-key setting (ln 2 ×
// bits per key, clamped to [1, 30]).
func bloomProbes(bitsPerKey int) int {
	k := bitsPerKey * 69 / 100
	return max(1, min(30, k))
}

// FilterShape returns the shape of the filter a Writer with bitsPerKey
// builds over nkeys key hashes: nbytes bytes of bits (a key's probes set
// bits hash % (8·nbytes), LevelDB's rule), then one byte holding probes.
// For filters built elsewhere (kv/gpucompact's kernels).
func FilterShape(nkeys, bitsPerKey int) (nbytes, probes int) {
	return (max(nkeys*bitsPerKey, 64) + 7) / 8, bloomProbes(bitsPerKey)
}

// buildBloom returns a filter over the given key hashes.
func buildBloom(dst []byte, hashes []uint32, bitsPerKey int) []byte {
	nbytes, k := FilterShape(len(hashes), bitsPerKey)
	nbits := nbytes * 8
	start := len(dst)
	dst = append(dst, make([]byte, nbytes)...)
	filter := dst[start:]
	m := newFastMod(uint32(nbits))
	for _, h := range hashes {
		delta := h>>17 | h<<15
		for range k {
			pos := m.mod(h)
			filter[pos/8] |= 1 << (pos % 8)
			h += delta
		}
	}
	return append(dst, byte(k))
}

// fastMod computes x % d for 32-bit x without a division (Lemire, Kaser
// and Kurz, "Faster remainder by direct computation", 2019): exact for
// every x and d > 0. A division was most of building a filter (a probe
// per bit set).
type fastMod struct {
	m uint64 // ceil(2^64 / d)
	d uint64
}

func newFastMod(d uint32) fastMod { return fastMod{m: ^uint64(0)/uint64(d) + 1, d: uint64(d)} }

func (f fastMod) mod(x uint32) uint32 {
	hi, _ := bits.Mul64(f.m*uint64(x), f.d)
	return uint32(hi)
}

// bloomMayContain reports whether the filter may hold a key with hash h. A
// malformed filter answers true (it can only cost a read, never a result).
func bloomMayContain(filter []byte, h uint32) bool {
	if len(filter) < 2 {
		return true
	}
	k := int(filter[len(filter)-1])
	if k > 30 {
		return true // reserved for other encodings
	}
	set := filter[:len(filter)-1]
	m := newFastMod(uint32(len(set) * 8))
	delta := h>>17 | h<<15
	for range k {
		pos := m.mod(h)
		if set[pos/8]&(1<<(pos%8)) == 0 {
			return false
		}
		h += delta
	}
	return true
}
