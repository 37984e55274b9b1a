package prim

import (
	"fmt"

	"github.com/warpkit/warpkit"
)

// The host twins: the same semantics as the GPU primitives on Go slices. They
// panic on mismatched lengths or an invalid bit range (see the package doc).

// SortKeysHost sorts keys stably on the bits opt selects (LSD radix sort).
func SortKeysHost[K warpkit.Word](keys []K, opt SortOptions) {
	begin, end := mustBitRange[K](opt)
	radixSortHost[K, uint32](keys, nil, begin, end)
}

// SortPairsHost sorts keys stably on the bits opt selects, moving vals with
// their keys. len(vals) must equal len(keys).
func SortPairsHost[K, V warpkit.Word](keys []K, vals []V, opt SortOptions) {
	begin, end := mustBitRange[K](opt)
	mustSameLen("SortPairsHost", len(keys), len(vals))
	radixSortHost(keys, vals, begin, end)
}

// SegmentedSortPairsHost sorts each segment [offsets[i], offsets[i+1]) of the
// pairs independently and stably, on the bits of the optional SortOptions.
func SegmentedSortPairsHost[K, V warpkit.Word](keys []K, vals []V, offsets []uint32, opt ...SortOptions) {
	mustSameLen("SegmentedSortPairsHost", len(keys), len(vals))
	segmentedSortHost(keys, vals, offsets, opt)
}

// SegmentedSortKeysHost sorts each segment of keys independently and stably.
func SegmentedSortKeysHost[K warpkit.Word](keys []K, offsets []uint32, opt ...SortOptions) {
	segmentedSortHost[K, uint32](keys, nil, offsets, opt)
}

func segmentedSortHost[K, V warpkit.Word](keys []K, vals []V, offsets []uint32, opts []SortOptions) {
	opt, err := optionalSortOptions(opts)
	if err != nil {
		panic(err.Error())
	}
	begin, end := mustBitRange[K](opt)
	if err := ValidateOffsets(offsets, len(keys)); err != nil {
		panic(err.Error())
	}
	for i := 0; i+1 < len(offsets); i++ {
		lo, hi := offsets[i], offsets[i+1]
		var v []V
		if vals != nil {
			v = vals[lo:hi]
		}
		radixSortHost(keys[lo:hi], v, begin, end)
	}
}

// MergePairsHost merges the runs A and B, each sorted by (k & KeyMask), stably
// into out ("run A first" on ties). len(out) must be len(A)+len(B).
func MergePairsHost[K, V warpkit.Word](aKeys []K, aVals []V, bKeys []K, bVals []V, outKeys []K, outVals []V, opt MergeOptions[K]) {
	mustSameLen("MergePairsHost: A", len(aKeys), len(aVals))
	mustSameLen("MergePairsHost: B", len(bKeys), len(bVals))
	mustSameLen("MergePairsHost: out keys", len(aKeys)+len(bKeys), len(outKeys))
	mustSameLen("MergePairsHost: out values", len(aKeys)+len(bKeys), len(outVals))
	mergeHost(aKeys, aVals, bKeys, bVals, outKeys, outVals, opt.mask())
}

// MergeKeysHost merges the sorted key runs a and b stably into out.
func MergeKeysHost[K warpkit.Word](a, b, out []K, opt MergeOptions[K]) {
	mustSameLen("MergeKeysHost: out", len(a)+len(b), len(out))
	mergeHost[K, uint32](a, nil, b, nil, out, nil, opt.mask())
}

func mergeHost[K, V warpkit.Word](aKeys []K, aVals []V, bKeys []K, bVals []V, outKeys []K, outVals []V, m K) {
	i, j, o := 0, 0, 0
	for i < len(aKeys) && j < len(bKeys) {
		if aKeys[i]&m <= bKeys[j]&m {
			outKeys[o] = aKeys[i]
			if outVals != nil {
				outVals[o] = aVals[i]
			}
			i++
		} else {
			outKeys[o] = bKeys[j]
			if outVals != nil {
				outVals[o] = bVals[j]
			}
			j++
		}
		o++
	}
	na := copy(outKeys[o:], aKeys[i:])
	copy(outKeys[o+na:], bKeys[j:])
	if outVals != nil {
		copy(outVals[o:], aVals[i:])
		copy(outVals[o+na:], bVals[j:])
	}
}

// ExclusiveScanHost writes out[i] = in[0] + ... + in[i-1] (wrapping) and
// returns the sum of all of in. out may be in itself.
func ExclusiveScanHost[T warpkit.Word](in, out []T) (total T) {
	mustSameLen("ExclusiveScanHost", len(in), len(out))
	for i, v := range in {
		out[i] = total
		total += v
	}
	return total
}

// SelectFlaggedHost copies in[i] where flags[i] != 0 to the front of out, in
// order, and returns how many were selected. Elements beyond len(out) are
// dropped but counted. out must not overlap in.
func SelectFlaggedHost[T warpkit.Word](in []T, flags []uint8, out []T) int {
	mustSameLen("SelectFlaggedHost", len(in), len(flags))
	n := 0
	for i, f := range flags {
		if f != 0 {
			if n < len(out) {
				out[n] = in[i]
			}
			n++
		}
	}
	return n
}

// SelectFlaggedPairsHost is SelectFlaggedHost for key/value pairs.
func SelectFlaggedPairsHost[K, V warpkit.Word](keys []K, vals []V, flags []uint8, outKeys []K, outVals []V) int {
	mustSameLen("SelectFlaggedPairsHost: values", len(keys), len(vals))
	mustSameLen("SelectFlaggedPairsHost: flags", len(keys), len(flags))
	mustSameLen("SelectFlaggedPairsHost: outputs", len(outKeys), len(outVals))
	n := 0
	for i, f := range flags {
		if f != 0 {
			if n < len(outKeys) {
				outKeys[n], outVals[n] = keys[i], vals[i]
			}
			n++
		}
	}
	return n
}

// Multisplit2PairsHost splits the pairs stably into two buckets: flag 0 first,
// then non-zero flags; it returns the size of bucket 0. The outputs have
// len(keys) and must not overlap the inputs.
func Multisplit2PairsHost[K, V warpkit.Word](keys []K, vals []V, flags []uint8, outKeys []K, outVals []V) (count0 int) {
	n := len(keys)
	mustSameLen("Multisplit2PairsHost: values", n, len(vals))
	mustSameLen("Multisplit2PairsHost: flags", n, len(flags))
	mustSameLen("Multisplit2PairsHost: out keys", n, len(outKeys))
	mustSameLen("Multisplit2PairsHost: out values", n, len(outVals))
	for _, f := range flags {
		if f == 0 {
			count0++
		}
	}
	z, o := 0, count0
	for i, f := range flags {
		if f == 0 {
			outKeys[z], outVals[z] = keys[i], vals[i]
			z++
		} else {
			outKeys[o], outVals[o] = keys[i], vals[i]
			o++
		}
	}
	return count0
}

// insertionSortMax is the length up to which radixSortHost sorts by insertion.
const insertionSortMax = 48

// radixSortHost sorts keys (and vals, when non-nil) stably on bits [begin,
// end): 8-bit LSD passes through a scratch buffer, skipping passes in which
// every key has the same digit.
func radixSortHost[K, V warpkit.Word](keys []K, vals []V, begin, end int) {
	n := len(keys)
	if n < 2 {
		return
	}
	if n <= insertionSortMax {
		insertionSortHost(keys, vals, begin, end)
		return
	}
	tmpKeys := make([]K, n)
	var tmpVals []V
	if vals != nil {
		tmpVals = make([]V, n)
	}
	srcK, dstK, srcV, dstV := keys, tmpKeys, vals, tmpVals
	for bit := begin; bit < end; bit += 8 {
		width := min(8, end-bit)
		mask := K(1)<<width - 1
		var count [256]int
		for _, k := range srcK {
			count[(k>>bit)&mask]++
		}
		if count[(srcK[0]>>bit)&mask] == n {
			continue // one digit everywhere: the pass would not move anything
		}
		sum := 0
		for d := range count {
			count[d], sum = sum, sum+count[d]
		}
		for i, k := range srcK {
			d := (k >> bit) & mask
			p := count[d]
			count[d]++
			dstK[p] = k
			if srcV != nil {
				dstV[p] = srcV[i]
			}
		}
		srcK, dstK, srcV, dstV = dstK, srcK, dstV, srcV
	}
	if &srcK[0] != &keys[0] {
		copy(keys, srcK)
		if vals != nil {
			copy(vals, srcV)
		}
	}
}

// insertionSortHost is a stable insertion sort on bits [begin, end).
func insertionSortHost[K, V warpkit.Word](keys []K, vals []V, begin, end int) {
	digits := func(k K) K {
		k >>= begin
		if w := end - begin; w < keyBits[K]() {
			k &= K(1)<<w - 1
		}
		return k
	}
	for i := 1; i < len(keys); i++ {
		k := keys[i]
		dk := digits(k)
		j := i
		for j > 0 && digits(keys[j-1]) > dk {
			j--
		}
		if j == i {
			continue
		}
		copy(keys[j+1:i+1], keys[j:i])
		keys[j] = k
		if vals != nil {
			v := vals[i]
			copy(vals[j+1:i+1], vals[j:i])
			vals[j] = v
		}
	}
}

func mustBitRange[K warpkit.Word](opt SortOptions) (begin, end int) {
	begin, end, err := bitRange[K](opt)
	if err != nil {
		panic(err.Error())
	}
	return begin, end
}

func mustSameLen(what string, want, got int) {
	if want != got {
		panic(fmt.Sprintf("prim: %s: length %d, want %d", what, got, want))
	}
}
