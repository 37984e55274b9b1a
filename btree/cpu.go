package btree

import (
	"context"
	"fmt"
	"sync"

	tb "github.com/tidwall/btree"

	"github.com/warpkit/warpkit"
)

// cpuTree is the pure-Go backend: a tidwall/btree Map under a reader/writer
// lock. A batch is applied in order, so every CPU batch is one of the orders
// the GPU's semantics allow.
type cpuTree[K, V warpkit.Word] struct {
	mu     sync.RWMutex
	m      *tb.Map[K, V]
	closed bool
}

const cpuDegree = 64

func newCPU[K, V warpkit.Word]() *cpuTree[K, V] {
	return &cpuTree[K, V]{m: tb.NewMap[K, V](cpuDegree)}
}

func (c *cpuTree[K, V]) read(ctx context.Context) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		return nil, warpkit.ErrClosed
	}
	return c.mu.RUnlock, nil
}

func (c *cpuTree[K, V]) write(ctx context.Context) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, warpkit.ErrClosed
	}
	return c.mu.Unlock, nil
}

func (c *cpuTree[K, V]) build(ctx context.Context, keys []K, vals []V) error {
	m := tb.NewMap[K, V](cpuDegree)
	for i, k := range keys {
		m.Set(k, vals[i])
	}
	done, err := c.write(ctx)
	if err != nil {
		return err
	}
	defer done()
	c.m = m
	return nil
}

func (c *cpuTree[K, V]) insert(ctx context.Context, keys []K, vals []V) error {
	done, err := c.write(ctx)
	if err != nil {
		return err
	}
	defer done()
	for i, k := range keys {
		c.m.Set(k, vals[i])
	}
	return nil
}

func (c *cpuTree[K, V]) delete(ctx context.Context, keys []K) error {
	done, err := c.write(ctx)
	if err != nil {
		return err
	}
	defer done()
	for _, k := range keys {
		c.m.Delete(k)
	}
	return nil
}

func (c *cpuTree[K, V]) lookup(ctx context.Context, keys []K, vals []V, found []bool) error {
	done, err := c.read(ctx)
	if err != nil {
		return err
	}
	defer done()
	for i, k := range keys {
		vals[i], found[i] = c.m.Get(k)
	}
	return nil
}

// successor returns the smallest key > k.
func (c *cpuTree[K, V]) successor(k K) (rk K, rv V, ok bool) {
	c.m.Ascend(k, func(key K, v V) bool {
		if key == k {
			return true
		}
		rk, rv, ok = key, v, true
		return false
	})
	return
}

// predecessor returns the largest key < k.
func (c *cpuTree[K, V]) predecessor(k K) (rk K, rv V, ok bool) {
	if k == 0 {
		return
	}
	c.m.Descend(k-1, func(key K, v V) bool {
		rk, rv, ok = key, v, true
		return false
	})
	return
}

func (c *cpuTree[K, V]) countRange(lo, hi K) uint32 {
	var n uint32
	if lo > hi {
		return 0
	}
	c.m.Ascend(lo, func(key K, _ V) bool {
		if key > hi {
			return false
		}
		n++
		return true
	})
	return n
}

func (c *cpuTree[K, V]) neighbor(ctx context.Context, pred bool, keys, outKeys []K, outVals []V, found []bool) error {
	done, err := c.read(ctx)
	if err != nil {
		return err
	}
	defer done()
	for i, k := range keys {
		if pred {
			outKeys[i], outVals[i], found[i] = c.predecessor(k)
		} else {
			outKeys[i], outVals[i], found[i] = c.successor(k)
		}
	}
	return nil
}

func (c *cpuTree[K, V]) count(ctx context.Context, lo, hi []K, counts []uint32) error {
	done, err := c.read(ctx)
	if err != nil {
		return err
	}
	defer done()
	for i := range lo {
		counts[i] = c.countRange(lo[i], hi[i])
	}
	return nil
}

func (c *cpuTree[K, V]) rangeQuery(ctx context.Context, lo, hi []K) (*Ranges[K, V], error) {
	done, err := c.read(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	r := &Ranges[K, V]{Offsets: make([]uint32, len(lo)+1)}
	for i := range lo {
		if lo[i] <= hi[i] {
			c.m.Ascend(lo[i], func(key K, v V) bool {
				if key > hi[i] {
					return false
				}
				r.Keys = append(r.Keys, key)
				r.Vals = append(r.Vals, v)
				return true
			})
		}
		if len(r.Keys) > 1<<32-1 {
			return nil, fmt.Errorf("%w: more than 2^32-1 range results", warpkit.ErrInvalidArgument)
		}
		r.Offsets[i+1] = uint32(len(r.Keys))
	}
	return r, nil
}

func (c *cpuTree[K, V]) apply(ctx context.Context, ops []Op[K, V], results []Result[K, V]) error {
	done, err := c.write(ctx)
	if err != nil {
		return err
	}
	defer done()
	for i, op := range ops {
		var r Result[K, V]
		switch op.Kind {
		case OpLookup:
			r.Value, r.Found = c.m.Get(op.Key)
			if r.Found {
				r.Key = op.Key
			}
		case OpInsert:
			c.m.Set(op.Key, op.Value)
		case OpDelete:
			c.m.Delete(op.Key)
		case OpSuccessor:
			r.Key, r.Value, r.Found = c.successor(op.Key)
		case OpPredecessor:
			r.Key, r.Value, r.Found = c.predecessor(op.Key)
		case OpCount:
			r.Count = c.countRange(op.Key, op.Hi)
		}
		results[i] = r
	}
	return nil
}

func (c *cpuTree[K, V]) stats(ctx context.Context) (Stats, error) {
	done, err := c.read(ctx)
	if err != nil {
		return Stats{}, err
	}
	defer done()
	return Stats{Keys: c.m.Len()}, nil
}

func (c *cpuTree[K, V]) compact(ctx context.Context) error {
	done, err := c.write(ctx)
	if err != nil {
		return err
	}
	defer done()
	c.m = c.m.Copy()
	return nil
}

func (c *cpuTree[K, V]) check(ctx context.Context) error {
	done, err := c.read(ctx)
	if err != nil {
		return err
	}
	defer done()
	var prev K
	n, bad := 0, false
	c.m.Scan(func(k K, _ V) bool {
		if n > 0 && k <= prev {
			bad = true
			return false
		}
		prev, n = k, n+1
		return true
	})
	if bad || n != c.m.Len() {
		return fmt.Errorf("the Go B-tree is out of order")
	}
	return nil
}

func (c *cpuTree[K, V]) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return warpkit.ErrClosed
	}
	c.closed = true
	c.m = nil
	return nil
}
