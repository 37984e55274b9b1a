package lsm

import (
	"context"
	"math/bits"
	"slices"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/internal/sorteddict"
	"github.com/warpkit/warpkit/prim"
)

const slotMask = sorteddict.SlotMask

func isTomb(tag uint32) bool { return sorteddict.IsTomb(tag) }

// cpuLSM is the pure-Go backend. It runs the GPU algorithms step for step
// (same batch preparation, stable sort, fix-up, merges, cleanup layout), so
// its levels and staging run equal the GPU backend's entry for entry. Sorts,
// merges and selections are prim's host twins of the GPU primitives.
type cpuLSM[K, V warpkit.Word] struct {
	sorteddict.CPUDevice[K, V]
	levelState
	keys   [][]K // level i: b<<i keys, allocated when first reached
	tags   [][]uint32
	stageK []K // the staging run: levelState.s entries
	stageT []uint32
	log    []V
}

// run is one sorted run a query sees: the staging run or a full level.
type run[K warpkit.Word] struct {
	keys []K
	tags []uint32
}

// runs returns the non-empty runs newest first: the staging run, then the
// full levels from level 0 up.
func (c *cpuLSM[K, V]) runs() []run[K] {
	var rs []run[K]
	if c.s > 0 {
		rs = append(rs, run[K]{c.stageK, c.stageT})
	}
	for _, lv := range c.levels() {
		k, t := c.level(lv)
		rs = append(rs, run[K]{k, t})
	}
	return rs
}

func newCPU[K, V warpkit.Word](b int) *cpuLSM[K, V] {
	return &cpuLSM[K, V]{levelState: levelState{b: b}}
}

func (c *cpuLSM[K, V]) state() levelState { return c.levelState }
func (c *cpuLSM[K, V]) Close() error {
	c.keys, c.tags, c.stageK, c.stageT, c.log = nil, nil, nil, nil, nil
	return nil
}

func (c *cpuLSM[K, V]) level(lv int) ([]K, []uint32) {
	for len(c.keys) <= lv {
		n := c.b << len(c.keys)
		c.keys = append(c.keys, make([]K, n))
		c.tags = append(c.tags, make([]uint32, n))
	}
	return c.keys[lv], c.tags[lv]
}

func (c *cpuLSM[K, V]) Update(ctx context.Context, keys []K, vals []V, dels []bool, kind sorteddict.UpdateKind) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m := len(keys)
	if m == 0 {
		return nil
	}
	if err := c.checkRoom(m, kind); err != nil {
		return err
	}
	chunks, rem := c.plan(m)
	bk, bt := sorteddict.SortBatchHost(keys, dels, kind, c.logged, m)
	if kind != sorteddict.DeletesOnly { // tombstones' slots are never read: a deletions-only batch logs nothing
		c.log = append(c.log, vals...)
		c.logged += m
	}
	if c.s > 0 { // the batch is newer than the staging run
		tk, tt := make([]K, c.s+m), make([]uint32, c.s+m)
		prim.MergePairsHost(bk, bt, c.stageK, c.stageT, tk, tt, prim.MergeOptions[K]{})
		bk, bt = tk, tt
	}
	// The chunks go in last-first, and the staging run keeps the lowest keys:
	// a key's segment may span runs, and its head (the entry that decides)
	// must end up in the newest of them.
	for ch := chunks - 1; ch >= 0; ch-- {
		lo := rem + ch*c.b
		c.insertSorted(bk[lo:lo+c.b], bt[lo:lo+c.b])
	}
	c.stageK, c.stageT, c.s = slices.Clone(bk[:rem]), slices.Clone(bt[:rem]), rem
	return nil
}

// insertSorted adds one sorted, fixed-up batch of b entries: merge it down
// through the full levels to the first empty one.
func (c *cpuLSM[K, V]) insertSorted(ak []K, at []uint32) {
	t := bits.TrailingZeros64(^c.r)
	for i := 0; i < t; i++ {
		lk, lt := c.level(i)
		n := len(ak) + len(lk)
		ok, ot := make([]K, n), make([]uint32, n)
		prim.MergePairsHost(ak, at, lk, lt, ok, ot, prim.MergeOptions[K]{})
		ak, at = ok, ot
	}
	dk, dt := c.level(t)
	copy(dk, ak)
	copy(dt, at)
	c.r++
}

func (c *cpuLSM[K, V]) Cleanup(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	rs := c.runs()
	if len(rs) == 0 {
		return nil
	}
	mk, mt := rs[0].keys, rs[0].tags
	for _, r := range rs[1:] {
		ok, ot := make([]K, len(mk)+len(r.keys)), make([]uint32, len(mk)+len(r.keys))
		prim.MergePairsHost(mk, mt, r.keys, r.tags, ok, ot, prim.MergeOptions[K]{})
		mk, mt = ok, ot
	}
	flags := make([]uint8, len(mk))
	for i := range mk {
		if valid(mk, mt, i) {
			flags[i] = 1
		}
	}
	ck, ct := make([]K, len(mk)), make([]uint32, len(mk))
	m := prim.SelectFlaggedPairsHost(mk, mt, flags, ck, ct)
	ck, ct = ck[:m], ct[:m]
	r2, rem := uint64(m/c.b), m%c.b
	newlog := make([]V, m)
	for j, t := range ct {
		newlog[j] = c.log[t&slotMask]
		ct[j] = uint32(j)
	}
	c.stageK, c.stageT = ck[:rem:rem], ct[:rem:rem]
	j := rem
	for lv := 0; r2>>lv != 0; lv++ {
		if r2>>lv&1 == 0 {
			continue
		}
		lk, lt := c.level(lv)
		j += copy(lk, ck[j:])
		copy(lt, ct[j-len(lk):])
	}
	c.r, c.s, c.log, c.logged = r2, rem, newlog, m
	return nil
}

func (c *cpuLSM[K, V]) Lookup(ctx context.Context, keys []K, vals []V, found []bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	rs := c.runs()
	for i, k := range keys {
		vals[i], found[i] = 0, false
		for _, r := range rs {
			if p, ok := slices.BinarySearch(r.keys, k); ok {
				if t := r.tags[p]; !isTomb(t) {
					vals[i], found[i] = c.log[t&slotMask], true
				}
				break
			}
		}
	}
	return nil
}

// candidates runs stages 1-4 of count/range for one query: the entries of
// every run in [lo, hi), newest run first, stably sorted by key.
func candidates[K warpkit.Word](rs []run[K], lo, hi K) ([]K, []uint32) {
	if lo >= hi {
		return nil, nil
	}
	var ck []K
	var ct []uint32
	for _, r := range rs {
		l, _ := slices.BinarySearch(r.keys, lo)
		u, _ := slices.BinarySearch(r.keys, hi)
		ck, ct = append(ck, r.keys[l:u]...), append(ct, r.tags[l:u]...)
	}
	prim.SortPairsHost(ck, ct, prim.SortOptions{})
	return ck, ct
}

func upperBound[K warpkit.Word](a []K, k K) int {
	lo, hi := 0, len(a)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if a[mid] <= k {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// valid is stage 5: entry e of a sorted candidate list counts when it is the
// first of its key and not a tombstone.
func valid[K warpkit.Word](ck []K, ct []uint32, e int) bool {
	return (e == 0 || ck[e] != ck[e-1]) && !isTomb(ct[e])
}

func (c *cpuLSM[K, V]) Count(ctx context.Context, lo, hi []K, counts []uint32) error {
	rs := c.runs()
	for i := range lo {
		if i%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		ck, ct := candidates(rs, lo[i], hi[i])
		n := uint32(0)
		for e := range ck {
			if valid(ck, ct, e) {
				n++
			}
		}
		counts[i] = n
	}
	return nil
}

func (c *cpuLSM[K, V]) Range(ctx context.Context, lo, hi []K) (*warpkit.Ranges[K, V], error) {
	rs := c.runs()
	res := &warpkit.Ranges[K, V]{Offsets: make([]int, len(lo)+1)}
	for i := range lo {
		if i%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		ck, ct := candidates(rs, lo[i], hi[i])
		for e := range ck {
			if valid(ck, ct, e) {
				res.Keys = append(res.Keys, ck[e])
				res.Vals = append(res.Vals, c.log[ct[e]&slotMask])
			}
		}
		res.Offsets[i+1] = len(res.Keys)
	}
	return res, nil
}

// neighbor mirrors the successor and predecessor kernels: a cursor per run,
// skipping keys whose newest entry is a tombstone.
func (c *cpuLSM[K, V]) Neighbor(ctx context.Context, keys, outKeys []K, outVals []V, found []bool, succ bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	rs := c.runs()
	pos := make([]int, len(rs))
	for i, k := range keys {
		outKeys[i], outVals[i], found[i] = 0, 0, false
		if (succ && k == ^K(0)) || (!succ && k == 0) {
			continue
		}
		for j, r := range rs {
			lk := r.keys
			if succ {
				pos[j] = upperBound(lk, k)
			} else {
				pos[j], _ = slices.BinarySearch(lk, k)
			}
		}
		for {
			any, cand := false, K(0)
			for j, r := range rs {
				lk := r.keys
				if succ && pos[j] < len(lk) && (!any || lk[pos[j]] < cand) {
					cand, any = lk[pos[j]], true
				}
				if !succ && pos[j] > 0 && (!any || lk[pos[j]-1] > cand) {
					cand, any = lk[pos[j]-1], true
				}
			}
			if !any {
				break
			}
			decided, tag := false, uint32(0)
			for j, r := range rs {
				lk, lt := r.keys, r.tags
				switch {
				case succ && pos[j] < len(lk) && lk[pos[j]] == cand:
					if !decided {
						tag, decided = lt[pos[j]], true
					}
					pos[j] += upperBound(lk[pos[j]:], cand)
				case !succ && pos[j] > 0 && lk[pos[j]-1] == cand:
					h, _ := slices.BinarySearch(lk[:pos[j]], cand)
					if !decided {
						tag, decided = lt[h], true
					}
					pos[j] = h
				}
			}
			if !isTomb(tag) {
				outKeys[i], outVals[i], found[i] = cand, c.log[tag&slotMask], true
				break
			}
		}
	}
	return nil
}

func (c *cpuLSM[K, V]) snapshot() (*snapshot[K, V], error) {
	s := &snapshot[K, V]{state: c.levelState, keys: map[int][]K{}, tags: map[int][]uint32{}, log: slices.Clone(c.log),
		stageK: slices.Clone(c.stageK), stageT: slices.Clone(c.stageT)}
	for _, lv := range c.levels() {
		lk, lt := c.level(lv)
		s.keys[lv], s.tags[lv] = slices.Clone(lk), slices.Clone(lt)
	}
	return s, nil
}
