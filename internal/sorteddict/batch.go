package sorteddict

import (
	"slices"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/prim"
)

// Tag layout, as in internal/devcode/lsm_sorted.cuh: bit 31 marks a
// tombstone, bits 0..30 hold a slot.
const (
	TombBit  = 1 << 31
	SlotMask = TombBit - 1
)

// IsTomb reports whether a tag marks a tombstone.
func IsTomb(tag uint32) bool { return tag&TombBit != 0 }

// SortBatchHost is the host twin of the batch preparation both dictionaries
// run on the GPU (prep_batch, a stable radix sort, fixup_tombstones): it
// returns the batch's keys reversed (so the last insertion of a key sorts
// first), padded to p >= len(keys) with copies of keys[0], tagged with slot
// base+index and the tombstone bit for deletions, sorted stably by key, with
// the head of every key segment that holds a tombstone made a tombstone.
func SortBatchHost[K warpkit.Word](keys []K, dels []bool, kind UpdateKind, base, p int) ([]K, []uint32) {
	m := len(keys)
	bk, bt := make([]K, p), make([]uint32, p)
	for i := range p {
		src := 0
		if i < m {
			src = m - 1 - i
		}
		tag := uint32(base+src) & SlotMask
		if kind == DeletesOnly || (kind == Mixed && dels[src]) {
			tag |= TombBit
		}
		bk[i], bt[i] = keys[src], tag
	}
	prim.SortPairsHost(bk, bt, prim.SortOptions{})
	for i := range bk {
		if IsTomb(bt[i]) && i > 0 && bk[i-1] == bk[i] {
			head, _ := slices.BinarySearch(bk[:i], bk[i])
			bt[head] |= TombBit
		}
	}
	return bk, bt
}
