package slabhash

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/gputest"
	"github.com/warpkit/warpkit/internal/kernelgen/ptxcheck"
)

func TestPTXUpToDate(t *testing.T) {
	for _, f := range []string{"kv32x32.ptx", "kv32x64.ptx", "kv64x32.ptx", "kv64x64.ptx", "set.ptx"} {
		ptxcheck.Check(t, f)
	}
}

// unique is a Map or Set under test, seen through one interface.
type unique[K, V warpkit.Word] struct {
	kd       kind
	apply    func(ctx context.Context, ops []Op, keys []K, vals []V, res []Result) error
	lookup   func(ctx context.Context, keys []K) (map[K]state[V], error)
	snapshot func(ctx context.Context) ([]K, []V, error)
	flush    func(ctx context.Context) error
	length   func() int
	close    func() error
	backend  warpkit.Backend
}

func openMap[K, V warpkit.Word](opts Options) (*unique[K, V], error) {
	m, err := NewMap[K, V](opts)
	if err != nil {
		return nil, err
	}
	return &unique[K, V]{
		kd: kindMap, apply: m.Apply,
		lookup: func(ctx context.Context, keys []K) (map[K]state[V], error) {
			vals := make([]V, len(keys))
			res := make([]Result, len(keys))
			if err := m.Lookup(ctx, keys, vals, res); err != nil {
				return nil, err
			}
			out := map[K]state[V]{}
			for i, k := range keys {
				out[k] = state[V]{res[i] == Found, vals[i]}
			}
			return out, nil
		},
		snapshot: m.Pairs, flush: m.Compact, length: lenFunc(m), close: m.Close, backend: m.Backend(),
	}, nil
}

func openSet[K warpkit.Word](opts Options) (*unique[K, uint32], error) {
	s, err := NewSet[K](opts)
	if err != nil {
		return nil, err
	}
	return &unique[K, uint32]{
		kd: kindSet,
		apply: func(ctx context.Context, ops []Op, keys []K, _ []uint32, res []Result) error {
			return s.Apply(ctx, ops, keys, res)
		},
		lookup: func(ctx context.Context, keys []K) (map[K]state[uint32], error) {
			res := make([]Result, len(keys))
			if err := s.Lookup(ctx, keys, res); err != nil {
				return nil, err
			}
			out := map[K]state[uint32]{}
			for i, k := range keys {
				out[k] = state[uint32]{present: res[i] == Found}
			}
			return out, nil
		},
		snapshot: func(ctx context.Context) ([]K, []uint32, error) {
			k, err := s.Keys(ctx)
			return k, make([]uint32, len(k)), err
		},
		flush: s.Compact, length: lenFunc(s), close: s.Close, backend: s.Backend(),
	}, nil
}

// compareSnapshot checks a full snapshot against the model: no lost key, no
// duplicate, no stale value.
func compareSnapshot[K, V warpkit.Word](u *unique[K, V], model map[K]V) error {
	keys, vals, err := u.snapshot(context.Background())
	if err != nil {
		return err
	}
	if len(keys) != len(model) || u.length() != len(model) {
		return fmt.Errorf("snapshot has %d entries, Len %d, the model %d", len(keys), u.length(), len(model))
	}
	seen := map[K]bool{}
	for i, k := range keys {
		if seen[k] {
			return fmt.Errorf("key %#x twice in the snapshot", uint64(k))
		}
		seen[k] = true
		want, ok := model[k]
		if !ok {
			return fmt.Errorf("key %#x in the snapshot but not in the model", uint64(k))
		}
		if u.kd == kindMap && vals[i] != want {
			return fmt.Errorf("key %#x holds %#x, the model %#x", uint64(k), uint64(vals[i]), uint64(want))
		}
	}
	return nil
}

// differential runs random mixed batches on u, checks each for per-key
// linearizability, compares the deterministic results with twin (a CPU
// table given the same batches, resynchronized where the GPU chose a
// different order), flushes now and then and compares snapshots.
func differential[K, V warpkit.Word](t *testing.T, u, twin *unique[K, V], rounds, batchSize, keyCount int, seed uint64) {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 7))
	keys := keySpace[K](keyCount)
	model := map[K]V{}
	mixes := [][3]int{{6, 2, 2}, {3, 3, 4}, {2, 5, 3}, {1, 1, 8}}
	for round := 0; round < rounds; round++ {
		ops, ks, vs := randomBatch[K, V](rng, keys, batchSize, 5, mixes[round%len(mixes)])
		in := slices.Clone(vs)
		res := make([]Result, len(ks))
		if err := u.apply(ctx, ops, ks, vs, res); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		post, err := u.lookup(ctx, uniqueKeys(ks))
		if err != nil {
			t.Fatal(err)
		}
		pre := maps(model)
		if err := checkBatch(u.kd, model, ks, ops, in, res, vs, post); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if twin != nil {
			tvs := slices.Clone(in)
			tres := make([]Result, len(ks))
			if err := twin.apply(ctx, ops, ks, tvs, tres); err != nil {
				t.Fatal(err)
			}
			count := map[K]int{}
			for _, k := range ks {
				count[k]++
			}
			for i, k := range ks {
				if count[k] == 1 && (tres[i] != res[i] || (ops[i] == OpFind && tvs[i] != vs[i])) {
					t.Fatalf("round %d: key %#x (%v, before %v): CPU %v %#x, GPU %v %#x", round, uint64(k), ops[i],
						pre[k], tres[i], uint64(tvs[i]), res[i], uint64(vs[i]))
				}
			}
			if err := resync(ctx, twin, model, uniqueKeys(ks)); err != nil {
				t.Fatal(err)
			}
		}
		if round%7 == 6 {
			if err := u.flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if round%5 == 4 || round == rounds-1 {
			if err := compareSnapshot(u, model); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
}

func maps[K comparable, V any](m map[K]V) map[K]V {
	c := make(map[K]V, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

func uniqueKeys[K warpkit.Word](ks []K) []K {
	u := slices.Clone(ks)
	slices.Sort(u)
	return slices.Compact(u)
}

// resync makes the twin hold the model's state for keys.
func resync[K, V warpkit.Word](ctx context.Context, twin *unique[K, V], model map[K]V, keys []K) error {
	var ops []Op
	var ks []K
	var vs []V
	for _, k := range keys {
		if v, ok := model[k]; ok {
			ops, ks, vs = append(ops, OpInsert), append(ks, k), append(vs, v)
		} else {
			ops, ks, vs = append(ops, OpDelete), append(ks, k), append(vs, 0)
		}
	}
	return twin.apply(ctx, ops, ks, vs, make([]Result, len(ks)))
}

type openFn[K, V warpkit.Word] func(Options) (*unique[K, V], error)

// layoutsFor lists the layouts a kind and widths support.
func layoutsFor[K, V warpkit.Word](kd kind) []Layout {
	out := []Layout{LayoutTile8, LayoutTile16}
	if _, err := resolveGeometry[K, V](kd, LayoutPaper); err == nil {
		out = append(out, LayoutPaper)
	}
	return out
}

func runUnique[K, V warpkit.Word](t *testing.T, kd kind, open openFn[K, V]) {
	t.Run("CPU", func(t *testing.T) {
		u, err := open(Options{Backend: warpkit.CPU})
		if err != nil {
			t.Fatal(err)
		}
		defer u.close()
		differential(t, u, nil, 12, 1500, 1200, 1)
	})
	for _, l := range layoutsFor[K, V](kd) {
		t.Run("GPU-"+l.String(), func(t *testing.T) {
			dev := gputest.Device(t)
			rounds := 40
			if testing.Short() {
				rounds = 12
			}
			// Long lists, the sized default, then the default with host
			// batches cut into 5 chunks (the pipelined staging path).
			for pass, buckets := range []int{13, 0, 0} {
				if pass == 2 {
					defer func(c int) { hostChunk = c }(hostChunk)
					hostChunk = 900
				}
				u, err := open(Options{Backend: warpkit.CUDA, Device: dev, Layout: l, Buckets: buckets, ExpectedSize: 4000})
				if err != nil {
					t.Fatal(err)
				}
				twin, err := open(Options{Backend: warpkit.CPU})
				if err != nil {
					t.Fatal(err)
				}
				differential(t, u, twin, rounds, 4000, 3000, uint64(buckets+pass)+2)
				if err := u.close(); err != nil {
					t.Fatal(err)
				}
				twin.close()
			}
		})
	}
}

func TestMapDifferential(t *testing.T) {
	t.Run("32x32", func(t *testing.T) { runUnique(t, kindMap, openMap[uint32, uint32]) })
	t.Run("32x64", func(t *testing.T) { runUnique(t, kindMap, openMap[uint32, uint64]) })
	t.Run("64x32", func(t *testing.T) { runUnique(t, kindMap, openMap[uint64, uint32]) })
	t.Run("64x64", func(t *testing.T) { runUnique(t, kindMap, openMap[uint64, uint64]) })
}

func TestSetDifferential(t *testing.T) {
	t.Run("32", func(t *testing.T) { runUnique(t, kindSet, openSet[uint32]) })
	t.Run("64", func(t *testing.T) { runUnique(t, kindSet, openSet[uint64]) })
}

// TestReservedKeys: a batch holding a sentinel fails before anything applies,
// from Go slices and from device slices.
func TestReservedKeys(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		ctx := context.Background()
		m, err := NewMap[uint64, uint64](opts)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		for _, bad := range []uint64{EmptyKey64, TombKey64} {
			err := m.Insert(ctx, []uint64{1, 2, bad, 3}, []uint64{1, 2, 3, 4}, nil)
			if !errors.Is(err, warpkit.ErrReservedKey) {
				t.Fatalf("key %#x: %v", bad, err)
			}
		}
		if lenOf(t, m) != 0 {
			t.Fatalf("Len %d after rejected batches", lenOf(t, m))
		}
		s, err := NewSet[uint32](opts)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Apply(ctx, []Op{OpInsert, OpInsert}, []uint32{5, TombKey32}, nil); !errors.Is(err, warpkit.ErrReservedKey) {
			t.Fatalf("set: %v", err)
		}
		if err := s.Apply(ctx, []Op{OpInsert, 7}, []uint32{5, 6}, nil); !errors.Is(err, warpkit.ErrInvalidArgument) {
			t.Fatalf("bad op: %v", err)
		}
		res := make([]Result, 1)
		if err := s.Lookup(ctx, []uint32{5}, res); err != nil || res[0] != NotFound {
			t.Fatalf("rejected batches applied something: %v %v", res, err)
		}
		if opts.Backend != warpkit.CUDA {
			return
		}
		dk, _ := cuda.FromHost(opts.Device, []uint64{10, 11, EmptyKey64})
		dv, _ := cuda.FromHost(opts.Device, []uint64{1, 2, 3})
		defer dk.Free()
		defer dv.Free()
		if err := m.InsertDevice(ctx, dk, dv, cuda.Slice[uint8]{}); !errors.Is(err, warpkit.ErrReservedKey) {
			t.Fatalf("device batch: %v", err)
		}
		got := make([]Result, 2)
		if err := m.Lookup(ctx, []uint64{10, 11}, make([]uint64, 2), got); err != nil || got[0] != NotFound || got[1] != NotFound || lenOf(t, m) != 0 {
			t.Fatalf("rejected device batch applied something: %v %v Len %d", got, err, lenOf(t, m))
		}
		// Device finds check their keys in the find kernel itself (no scan).
		out, _ := cuda.Alloc[uint64](opts.Device, 3)
		defer out.Free()
		if err := m.LookupDevice(ctx, dk, out, cuda.Slice[uint8]{}); !errors.Is(err, warpkit.ErrReservedKey) {
			t.Fatalf("device find of a sentinel: %v", err)
		}
		sk, _ := cuda.FromHost(opts.Device, []uint32{5, TombKey32})
		defer sk.Free()
		if err := s.LookupDevice(ctx, sk, cuda.Slice[uint8]{}); !errors.Is(err, warpkit.ErrReservedKey) {
			t.Fatalf("device contains of a sentinel: %v", err)
		}
		if err := m.LookupDevice(ctx, dk.Sub(0, 2), out.Sub(0, 2), cuda.Slice[uint8]{}); err != nil {
			t.Fatalf("device find after a rejected one: %v", err)
		}
		ops, _ := cuda.FromHost(opts.Device, []uint8{1, 9, 1})
		defer ops.Free()
		dk2, _ := cuda.FromHost(opts.Device, []uint64{10, 11, 12})
		defer dk2.Free()
		if err := m.ApplyDevice(ctx, ops, dk2, dv, cuda.Slice[uint8]{}); !errors.Is(err, warpkit.ErrInvalidArgument) || lenOf(t, m) != 0 {
			t.Fatalf("device batch with a bad op: %v, Len %d", err, lenOf(t, m))
		}
	})
}

func forEachBackend(t *testing.T, f func(t *testing.T, opts Options)) {
	t.Run("CPU", func(t *testing.T) { f(t, Options{Backend: warpkit.CPU}) })
	t.Run("GPU", func(t *testing.T) {
		dev := gputest.Device(t)
		f(t, Options{Backend: warpkit.CUDA, Device: dev})
	})
}

func TestArgumentsAndClose(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		ctx := context.Background()
		m, err := NewMap[uint32, uint32](opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Insert(ctx, []uint32{1, 2}, []uint32{1}, nil); !errors.Is(err, warpkit.ErrInvalidArgument) {
			t.Fatalf("short values: %v", err)
		}
		if err := m.Lookup(ctx, []uint32{1}, []uint32{0}, make([]Result, 2)); !errors.Is(err, warpkit.ErrInvalidArgument) {
			t.Fatalf("long results: %v", err)
		}
		if err := m.Insert(ctx, nil, nil, nil); err != nil {
			t.Fatalf("empty batch: %v", err)
		}
		if opts.Backend == warpkit.CPU {
			if err := m.LookupDevice(ctx, cuda.Slice[uint32]{}, cuda.Slice[uint32]{}, cuda.Slice[uint8]{}); !errors.Is(err, warpkit.ErrInvalidArgument) {
				t.Fatalf("device slices on the CPU: %v", err)
			}
		}
		mm, err := NewMultiMap[uint32, uint32](opts)
		if err != nil {
			t.Fatal(err)
		}
		defer mm.Close()
		// Count and CountDevice both need somewhere to put the counts.
		if err := mm.Count(ctx, nil, nil); !errors.Is(err, warpkit.ErrInvalidArgument) {
			t.Fatalf("count without counts: %v", err)
		}
		if err := mm.CountDevice(ctx, cuda.Slice[uint32]{}, cuda.Slice[uint32]{}); !errors.Is(err, warpkit.ErrInvalidArgument) {
			t.Fatalf("device count without counts: %v", err)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		if err := m.Insert(ctx, []uint32{1}, []uint32{1}, nil); !errors.Is(err, warpkit.ErrClosed) {
			t.Fatalf("insert after Close: %v", err)
		}
		if _, _, err := m.Pairs(ctx); !errors.Is(err, warpkit.ErrClosed) {
			t.Fatalf("snapshot after Close: %v", err)
		}
		if err := m.Compact(ctx); !errors.Is(err, warpkit.ErrClosed) {
			t.Fatalf("flush after Close: %v", err)
		}
		if err := m.Close(); !errors.Is(err, warpkit.ErrClosed) {
			t.Fatalf("second Close: %v", err)
		}
		if _, err := m.All(ctx); !errors.Is(err, warpkit.ErrClosed) {
			t.Fatalf("All after Close: %v", err)
		}
		if _, err := m.Len(ctx); !errors.Is(err, warpkit.ErrClosed) {
			t.Fatalf("Len after Close: %v", err)
		}
	})
	if _, err := NewMap[uint64, uint32](Options{Backend: warpkit.CPU, Layout: LayoutPaper}); err == nil {
		// The CPU backend ignores layouts, but they are still validated.
		t.Fatal("the paper's layout was accepted for 64-bit keys")
	}
	if _, err := NewMap[uint32, uint32](Options{Backend: warpkit.CPU, Utilization: 1.5}); !errors.Is(err, warpkit.ErrInvalidArgument) {
		t.Fatalf("utilization 1.5: %v", err)
	}
	if _, err := NewMap[uint32, uint32](Options{Backend: warpkit.Backend(7)}); !errors.Is(err, warpkit.ErrInvalidArgument) {
		t.Fatalf("unknown backend: %v", err)
	}
}

// TestContextMidBatch: a batch whose context ends while it runs stops, marks
// the elements it did not apply Failed, and leaves the table consistent (the
// contract's "Context" section). The CPU backend checks between elements,
// the CUDA backend between chunks.
func TestContextMidBatch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		defer func(c int) { hostChunk = c }(hostChunk)
		hostChunk = 1 << 12
		m, err := NewMap[uint32, uint32](opts)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		n := 1 << 18
		keys, vals := make([]uint32, n), make([]uint32, n)
		for i := range keys {
			keys[i], vals[i] = uint32(i), uint32(i)
		}
		res := make([]Result, n)
		ctx := &endsAfter{Context: context.Background()}
		ctx.left.Store(3) // passes the entry check and two more
		err = m.Insert(ctx, keys, vals, res)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v, want context.Canceled", err)
		}
		applied := 0
		for _, r := range res {
			if r == Inserted {
				applied++
			} else if r != Failed {
				t.Fatalf("result %v: want Inserted or Failed", r)
			}
		}
		if applied == 0 || applied == n {
			t.Fatalf("%d of %d applied: the batch did not stop midway", applied, n)
		}
		if got := lenOf(t, m); got != applied {
			t.Fatalf("Len %d, %d results say Inserted", got, applied)
		}
		t.Logf("%d of %d applied before the cancellation took (err %v)", applied, n, err)
	})
}

// endsAfter is a context whose Err is nil for its first left calls and
// context.Canceled after them: it ends at a known point of a batch.
type endsAfter struct {
	context.Context
	left atomic.Int32
}

func (c *endsAfter) Err() error {
	if c.left.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}
