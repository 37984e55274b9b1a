package btree

import (
	"context"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/internal/ordmap"
)

// cpuTree is the pure-Go backend: internal/ordmap's ordered map (a
// tidwall/btree Map under a reader/writer lock; the Tree's front runs
// batches side by side, so writers take the lock exclusively there). A batch
// is applied in order, so every CPU batch is one of the orders the GPU's
// semantics allow. The front refuses every call after Close, so the backend
// keeps no closed state of its own.
type cpuTree[K, V warpkit.Word] struct {
	m *ordmap.Map[K, V]
}

func newCPU[K, V warpkit.Word]() *cpuTree[K, V] {
	return &cpuTree[K, V]{m: ordmap.New[K, V]()}
}

// build fills a new map and swaps it in: a cancelled build leaves the old one.
func (c *cpuTree[K, V]) build(ctx context.Context, keys []K, vals []V) error {
	return c.m.Build(ctx, keys, vals)
}

// insert applies the pairs in order; a cancelled batch applied a prefix.
func (c *cpuTree[K, V]) insert(ctx context.Context, keys []K, vals []V) error {
	return c.m.Insert(ctx, keys, vals)
}

func (c *cpuTree[K, V]) delete(ctx context.Context, keys []K) error {
	return c.m.Delete(ctx, keys)
}

func (c *cpuTree[K, V]) lookup(ctx context.Context, keys []K, vals []V, found []bool) error {
	return c.m.Read(func(v ordmap.View[K, V]) error { return v.Lookup(ctx, keys, vals, found) })
}

func (c *cpuTree[K, V]) neighbor(ctx context.Context, pred bool, keys, outKeys []K, outVals []V, found []bool) error {
	return c.m.Read(func(v ordmap.View[K, V]) error { return v.Neighbor(ctx, pred, keys, outKeys, outVals, found) })
}

func (c *cpuTree[K, V]) count(ctx context.Context, lo, hi []K, counts []uint32) error {
	return c.m.Read(func(v ordmap.View[K, V]) error { return v.Count(ctx, lo, hi, counts) })
}

func (c *cpuTree[K, V]) rangeQuery(ctx context.Context, lo, hi []K) (r *warpkit.Ranges[K, V], err error) {
	err = c.m.Read(func(v ordmap.View[K, V]) error {
		r, err = v.Range(ctx, lo, hi)
		return err
	})
	return r, err
}

// apply runs the batch in order; a cancelled batch applied a prefix of it, and
// the results past that prefix are not written.
func (c *cpuTree[K, V]) apply(ctx context.Context, ops Ops[K, V], res Results[K, V]) error {
	return c.m.Update(ctx, func(w ordmap.Writer[K, V], tk *ordmap.Ticker) error {
		m := w.View()
		for i, kind := range ops.Kinds {
			if !tk.Tick() {
				return tk.Err()
			}
			key := ops.Keys[i]
			var (
				found bool
				rk    K
				rv    V
				cnt   uint32
			)
			switch kind {
			case OpLookup:
				if rv, found = m.Get(key); found {
					rk = key
				}
			case OpInsert:
				var v V
				if ops.Vals != nil {
					v = ops.Vals[i]
				}
				w.Set(key, v)
			case OpDelete:
				w.Delete(key)
			case OpSuccessor:
				rk, rv, found = m.Successor(key)
			case OpPredecessor:
				rk, rv, found = m.Predecessor(key)
			case OpCount:
				var hi K
				if ops.His != nil {
					hi = ops.His[i]
				}
				if cnt = m.CountRange(tk, key, hi); tk.Err() != nil {
					return tk.Err()
				}
			}
			if res.Found != nil {
				res.Found[i] = found
			}
			if res.Keys != nil {
				res.Keys[i] = rk
			}
			if res.Vals != nil {
				res.Vals[i] = rv
			}
			if res.Counts != nil {
				res.Counts[i] = cnt
			}
		}
		return nil
	})
}

func (c *cpuTree[K, V]) stats(context.Context) (st Stats, err error) {
	err = c.m.Read(func(v ordmap.View[K, V]) error {
		st = Stats{Keys: v.Len(), Height: v.Height()}
		return nil
	})
	return st, err
}

// compact reloads the pairs, in order, into a new map (full nodes); a
// cancelled compaction leaves the old one.
func (c *cpuTree[K, V]) compact(ctx context.Context) error { return c.m.Compact(ctx) }

func (c *cpuTree[K, V]) check(ctx context.Context) error {
	return c.m.Read(func(v ordmap.View[K, V]) error { return v.Check(ctx) })
}

func (c *cpuTree[K, V]) close() error {
	c.m.Release()
	return nil
}
