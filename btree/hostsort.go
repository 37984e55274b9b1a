package btree

import "github.com/warpkit/warpkit"

// sortUnique returns the distinct keys in increasing order with, for each, the
// value of its last occurrence: a stable LSD radix sort (16-bit digits) of the
// pairs by key, then a pass keeping the last of each run. Build from Go slices
// falls back to it on the CUDA backend when the device sort cannot run (more
// pairs than prim handles, or too little device memory); it is what the device
// path (prim's stable radix sort, then the last pair of each key) computes.
func sortUnique[K, V warpkit.Word](keys []K, vals []V) ([]K, []V) {
	n := len(keys)
	k0, v0 := make([]K, n), make([]V, n)
	copy(k0, keys)
	copy(v0, vals)
	k1, v1 := make([]K, n), make([]V, n)
	var maxKey K
	for _, k := range keys {
		maxKey = max(maxKey, k)
	}
	var counts [1 << 16]int
	for shift := uint(0); shift < 64 && (shift == 0 || uint64(maxKey)>>shift != 0); shift += 16 {
		clear(counts[:])
		for _, k := range k0 {
			counts[(uint64(k)>>shift)&0xffff]++
		}
		sum := 0
		for d, c := range counts {
			counts[d] = sum
			sum += c
		}
		for i, k := range k0 {
			d := (uint64(k) >> shift) & 0xffff
			k1[counts[d]], v1[counts[d]] = k, v0[i]
			counts[d]++
		}
		k0, k1, v0, v1 = k1, k0, v1, v0
	}
	m := 0
	for i := 0; i < n; i++ {
		if i+1 < n && k0[i] == k0[i+1] {
			continue
		}
		k0[m], v0[m] = k0[i], v0[i]
		m++
	}
	return k0[:m], v0[:m]
}
