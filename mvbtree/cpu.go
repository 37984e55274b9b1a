package mvbtree

import (
	"context"
	"iter"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/internal/ordmap"
)

// cpuTree is the CPU backend (the oracle of the CUDA one):
// internal/ordmap's map, whose snapshots are copy-on-write copies — O(1) to
// take, each later write copying the nodes it changes while a snapshot
// holds them.
type cpuTree[K, V warpkit.Word] struct {
	m *ordmap.Map[K, V]
}

func newCPU[K, V warpkit.Word]() *cpuTree[K, V] { return &cpuTree[K, V]{m: ordmap.New[K, V]()} }

func (c *cpuTree[K, V]) build(ctx context.Context, keys []K, vals []V) error {
	return c.m.Build(ctx, keys, vals)
}

func (c *cpuTree[K, V]) insert(ctx context.Context, keys []K, vals []V) error {
	return c.m.Insert(ctx, keys, vals)
}

func (c *cpuTree[K, V]) delete(ctx context.Context, keys []K) error { return c.m.Delete(ctx, keys) }

func (c *cpuTree[K, V]) latest() reader[K, V] { return cpuLatest[K, V]{c.m} }

func (c *cpuTree[K, V]) snapshot(context.Context) (view[K, V], error) {
	return &cpuView[K, V]{c.m.Snapshot()}, nil
}

func (c *cpuTree[K, V]) stats(context.Context) (st Stats, err error) {
	err = c.m.Read(func(v ordmap.View[K, V]) error {
		st = Stats{Backend: warpkit.CPU, Keys: v.Len(), Height: v.Height()}
		return nil
	})
	return st, err
}

func (c *cpuTree[K, V]) compact(ctx context.Context) error { return c.m.Compact(ctx) }

func (c *cpuTree[K, V]) check(ctx context.Context) error {
	return c.m.Read(func(v ordmap.View[K, V]) error { return v.Check(ctx) })
}

func (c *cpuTree[K, V]) vacuum(context.Context) error  { return nil }
func (c *cpuTree[K, V]) restamp(context.Context) error { return nil }

func (c *cpuTree[K, V]) close() error {
	c.m.Release()
	return nil
}

// cpuLatest reads the map's latest version, each call under its read lock
// (so that every query of a call sees one version).
type cpuLatest[K, V warpkit.Word] struct{ m *ordmap.Map[K, V] }

func (l cpuLatest[K, V]) lookup(ctx context.Context, keys []K, vals []V, found []bool) error {
	return l.m.Read(func(v ordmap.View[K, V]) error { return v.Lookup(ctx, keys, vals, found) })
}

func (l cpuLatest[K, V]) neighbor(ctx context.Context, pred bool, keys, outKeys []K, outVals []V, found []bool) error {
	return l.m.Read(func(v ordmap.View[K, V]) error { return v.Neighbor(ctx, pred, keys, outKeys, outVals, found) })
}

func (l cpuLatest[K, V]) count(ctx context.Context, lo, hi []K, counts []uint32) error {
	return l.m.Read(func(v ordmap.View[K, V]) error { return v.Count(ctx, lo, hi, counts) })
}

func (l cpuLatest[K, V]) rangeQ(ctx context.Context, lo, hi []K) (r *warpkit.Ranges[K, V], err error) {
	err = l.m.Read(func(v ordmap.View[K, V]) error {
		r, err = v.Range(ctx, lo, hi)
		return err
	})
	return r, err
}

func (l cpuLatest[K, V]) length(context.Context) (n int, err error) {
	err = l.m.Read(func(v ordmap.View[K, V]) error { n = v.Len(); return nil })
	return n, err
}

// ascend walks a snapshot taken now: a loop may update the tree it iterates.
func (l cpuLatest[K, V]) ascend(_ context.Context, lo, hi K, all bool, alive func() bool) iter.Seq2[K, V] {
	return (&cpuView[K, V]{l.m.Snapshot()}).ascend(nil, lo, hi, all, alive)
}

// cpuView is a snapshot: a frozen copy-on-write view.
type cpuView[K, V warpkit.Word] struct{ v ordmap.View[K, V] }

func (c *cpuView[K, V]) lookup(ctx context.Context, keys []K, vals []V, found []bool) error {
	return c.v.Lookup(ctx, keys, vals, found)
}

func (c *cpuView[K, V]) neighbor(ctx context.Context, pred bool, keys, outKeys []K, outVals []V, found []bool) error {
	return c.v.Neighbor(ctx, pred, keys, outKeys, outVals, found)
}

func (c *cpuView[K, V]) count(ctx context.Context, lo, hi []K, counts []uint32) error {
	return c.v.Count(ctx, lo, hi, counts)
}

func (c *cpuView[K, V]) rangeQ(ctx context.Context, lo, hi []K) (*warpkit.Ranges[K, V], error) {
	return c.v.Range(ctx, lo, hi)
}

func (c *cpuView[K, V]) length(context.Context) (int, error) { return c.v.Len(), nil }

func (c *cpuView[K, V]) ascend(_ context.Context, lo, hi K, all bool, alive func() bool) iter.Seq2[K, V] {
	seq := c.v.Ascend(lo, hi, all)
	return func(yield func(K, V) bool) {
		seq(func(k K, v V) bool { return alive() && yield(k, v) })
	}
}

func (c *cpuView[K, V]) check(ctx context.Context) error { return c.v.Check(ctx) }

// release drops the view (the front keeps queries out from here on;
// iterators hold the view they started with).
func (c *cpuView[K, V]) release() error {
	c.v = ordmap.View[K, V]{}
	return nil
}
