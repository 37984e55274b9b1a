package sortedarray

import (
	"context"
	"fmt"
	"slices"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/internal/sorteddict"
	"github.com/warpkit/warpkit/prim"
)

// cpuSA is the pure-Go backend: the GPU algorithm step for step on Go slices,
// with prim's host twins for sorting, selecting and merging.
type cpuSA[K, V warpkit.Word] struct {
	sorteddict.CPUDevice[K, V]
	keys []K
	vals []V
}

func (c *cpuSA[K, V]) len() int     { return len(c.keys) }
func (c *cpuSA[K, V]) Close() error { c.keys, c.vals = nil, nil; return nil }

func (c *cpuSA[K, V]) Update(ctx context.Context, keys []K, vals []V, dels []bool, kind sorteddict.UpdateKind) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m := len(keys)
	if m == 0 {
		return nil
	}
	if len(c.keys)+m > MaxLen {
		return fmt.Errorf("%w: %d keys plus a batch of %d exceed %d", warpkit.ErrInvalidArgument, len(c.keys), m, MaxLen)
	}
	bk, bt := sorteddict.SortBatchHost(keys, dels, kind, 0, m)
	// Heads of key segments decide: insert regular ones, and drop the array
	// entries they replace or delete.
	keepB := make([]uint8, m)
	var keepA []uint8
	for i, k := range bk {
		if i > 0 && bk[i-1] == k {
			continue
		}
		if !sorteddict.IsTomb(bt[i]) {
			keepB[i] = 1
		}
		if p, ok := slices.BinarySearch(c.keys, k); ok {
			if keepA == nil {
				keepA = make([]uint8, len(c.keys))
				for j := range keepA {
					keepA[j] = 1
				}
			}
			keepA[p] = 0
		}
	}
	ck, ct := make([]K, m), make([]uint32, m)
	cb := prim.SelectFlaggedPairsHost(bk, bt, keepB, ck, ct)
	cv := make([]V, cb)
	for i, t := range ct[:cb] {
		cv[i] = vals[t&sorteddict.SlotMask]
	}
	ak, av := c.keys, c.vals
	if keepA != nil {
		ak, av = make([]K, len(c.keys)), make([]V, len(c.keys))
		na := prim.SelectFlaggedPairsHost(c.keys, c.vals, keepA, ak, av)
		ak, av = ak[:na], av[:na]
	}
	nk, nv := make([]K, cb+len(ak)), make([]V, cb+len(ak))
	prim.MergePairsHost(ck[:cb], cv, ak, av, nk, nv, prim.MergeOptions[K]{})
	c.keys, c.vals = nk, nv
	return nil
}

func (c *cpuSA[K, V]) Lookup(ctx context.Context, keys []K, vals []V, found []bool) error {
	for i, k := range keys {
		p, ok := slices.BinarySearch(c.keys, k)
		vals[i], found[i] = 0, ok
		if ok {
			vals[i] = c.vals[p]
		}
	}
	return ctx.Err()
}

// bounds returns the positions [l, u) of the keys in [lo, hi).
func (c *cpuSA[K, V]) bounds(lo, hi K) (int, int) {
	if lo >= hi {
		return 0, 0
	}
	l, _ := slices.BinarySearch(c.keys, lo)
	u, _ := slices.BinarySearch(c.keys, hi)
	return l, u
}

func (c *cpuSA[K, V]) Count(ctx context.Context, lo, hi []K, counts []uint32) error {
	for i := range lo {
		l, u := c.bounds(lo[i], hi[i])
		counts[i] = uint32(u - l)
	}
	return ctx.Err()
}

func (c *cpuSA[K, V]) Range(ctx context.Context, lo, hi []K) (*warpkit.Ranges[K, V], error) {
	res := &warpkit.Ranges[K, V]{Offsets: make([]int, len(lo)+1)}
	for i := range lo {
		l, u := c.bounds(lo[i], hi[i])
		res.Keys = append(res.Keys, c.keys[l:u]...)
		res.Vals = append(res.Vals, c.vals[l:u]...)
		res.Offsets[i+1] = len(res.Keys)
	}
	return res, ctx.Err()
}

func (c *cpuSA[K, V]) Neighbor(ctx context.Context, keys, outKeys []K, outVals []V, found []bool, succ bool) error {
	for i, k := range keys {
		p, hit := slices.BinarySearch(c.keys, k)
		if succ && hit {
			p++
		}
		if !succ {
			p--
		}
		found[i] = p >= 0 && p < len(c.keys)
		outKeys[i], outVals[i] = 0, 0
		if found[i] {
			outKeys[i], outVals[i] = c.keys[p], c.vals[p]
		}
	}
	return ctx.Err()
}
