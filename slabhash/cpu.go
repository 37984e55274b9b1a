package slabhash

import (
	"context"
	"slices"
	"sync"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
)

// cpuShards is the number of independently locked parts of a CPU table.
const cpuShards = 64

// cpuTable is the pure-Go backend: Go maps in 64 shards, each behind its own
// mutex. A batch applies its elements in index order, each under its shard's
// lock, so every element is atomic and a batch is one of the orders the GPU
// may produce.
type cpuTable[K, V warpkit.Word] struct {
	kind   kind
	shards [cpuShards]cpuShard[K, V]
}

type cpuShard[K, V warpkit.Word] struct {
	mu    sync.Mutex
	one   map[K]V   // Map and Set
	multi map[K][]V // MultiMap, oldest first
	_     [40]byte  // keep shards on separate cache lines
}

func newCPU[K, V warpkit.Word](kd kind) *cpuTable[K, V] {
	c := &cpuTable[K, V]{kind: kd}
	for i := range c.shards {
		if kd == kindMulti {
			c.shards[i].multi = map[K][]V{}
		} else {
			c.shards[i].one = map[K]V{}
		}
	}
	return c
}

func (c *cpuTable[K, V]) shard(k K) *cpuShard[K, V] {
	h := uint64(k) * 0x9e3779b97f4a7c15
	return &c.shards[h>>58]
}

// ctxEvery is how many elements the CPU backend applies between checks of
// the context.
const ctxEvery = 1 << 14

func (c *cpuTable[K, V]) apply(ctx context.Context, b *batch[K, V]) (int64, error) {
	var delta int64
	for i, k := range b.keys {
		if i%ctxEvery == 0 && i > 0 {
			if err := ctx.Err(); err != nil {
				// Elements from i on are not applied: say so (contract, "Context").
				markFailed(b.res[min(i, len(b.res)):], b.counts[min(i, len(b.counts)):])
				return delta, err
			}
		}
		op := b.op
		if b.ops != nil {
			op = b.ops[i]
		}
		var v V
		if op == OpInsert && b.vals != nil {
			v = b.vals[i]
		}
		s := c.shard(k)
		s.mu.Lock()
		r, out, cnt := c.one(s, op, k, v)
		s.mu.Unlock()
		switch r {
		case Inserted:
			delta++
		case Removed:
			delta -= int64(cnt)
		}
		if b.res != nil {
			b.res[i] = r
		}
		if op == OpFind && c.kind == kindMap && b.vals != nil {
			b.vals[i] = out
		}
		if b.counts != nil {
			b.counts[i] = cnt
		}
	}
	return delta, nil
}

// one applies one element under its shard's lock.
func (c *cpuTable[K, V]) one(s *cpuShard[K, V], op Op, k K, v V) (Result, V, uint32) {
	var zero V
	if c.kind == kindMulti {
		vs := s.multi[k]
		switch op {
		case OpInsert:
			s.multi[k] = append(vs, v)
			return Inserted, zero, 0
		case OpFind:
			if len(vs) == 0 {
				return NotFound, zero, 0
			}
			return Found, zero, uint32(len(vs))
		case OpDelete:
			if len(vs) == 0 {
				return NotFound, zero, 0
			}
			if len(vs) == 1 {
				delete(s.multi, k)
			} else {
				s.multi[k] = slices.Delete(vs, 0, 1)
			}
			return Removed, zero, 1
		default: // OpDeleteAll
			if len(vs) == 0 {
				return NotFound, zero, 0
			}
			delete(s.multi, k)
			return Removed, zero, uint32(len(vs))
		}
	}
	old, ok := s.one[k]
	switch op {
	case OpInsert:
		if ok {
			if c.kind == kindMap {
				s.one[k] = v
			}
			return Present, zero, 0
		}
		s.one[k] = v
		return Inserted, zero, 0
	case OpFind:
		if !ok {
			return NotFound, zero, 0
		}
		return Found, old, 0
	default: // OpDelete
		if !ok {
			return NotFound, zero, 0
		}
		delete(s.one, k)
		return Removed, zero, 1
	}
}

func (c *cpuTable[K, V]) applyDevice(ctx context.Context, b *devBatch[K, V]) (int64, error) {
	return 0, errCPUDevice
}

func (c *cpuTable[K, V]) findAllDevice(ctx context.Context, keys cuda.Slice[K], offs cuda.Slice[uint64], vals cuda.Slice[V], counts cuda.Slice[uint32]) error {
	return errCPUDevice
}

func (c *cpuTable[K, V]) findAll(ctx context.Context, keys []K) ([]int, []V, error) {
	offsets := make([]int, len(keys)+1)
	var vals []V
	for i, k := range keys {
		s := c.shard(k)
		s.mu.Lock()
		vals = append(vals, s.multi[k]...)
		s.mu.Unlock()
		offsets[i+1] = len(vals)
	}
	return offsets, vals, nil
}

func (c *cpuTable[K, V]) snapshot(ctx context.Context) ([]K, []V, error) {
	var keys []K
	var vals []V
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for k, v := range s.one {
			keys = append(keys, k)
			vals = append(vals, v)
		}
		for k, vs := range s.multi {
			for _, v := range vs {
				keys = append(keys, k)
				vals = append(vals, v)
			}
		}
		s.mu.Unlock()
	}
	if c.kind == kindSet {
		vals = nil
	}
	return keys, vals, nil
}

// flush has nothing to compact: Go maps drop deleted entries themselves.
func (c *cpuTable[K, V]) flush(ctx context.Context, live int) error { return nil }

func (c *cpuTable[K, V]) stats(ctx context.Context, n int) (Stats, error) {
	return Stats{Layout: "Go maps in 64 locked shards"}, nil
}

func (c *cpuTable[K, V]) close() error {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		s.one, s.multi = nil, nil
		s.mu.Unlock()
	}
	return nil
}
