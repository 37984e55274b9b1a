package mvbtree

import (
	"context"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/internal/ordmap"
)

// cpuTree is the CPU backend (the oracle of the CUDA one to come):
// internal/ordmap's map, whose snapshots are copy-on-write copies — O(1) to
// take, each later write copying the nodes it changes while a snapshot
// holds them, as the CUDA backend's copy rule does.
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

func (c *cpuTree[K, V]) read(f func(v ordmap.View[K, V]) error) error { return c.m.Read(f) }

func (c *cpuTree[K, V]) snapshot() ordmap.View[K, V] { return c.m.Snapshot() }

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

func (c *cpuTree[K, V]) close() error {
	c.m.Release()
	return nil
}
