package slabhash

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/gputest"
)

// stressTable is a Map, Set or MultiMap under stress, seen through one
// interface.
type stressTable[K, V warpkit.Word] struct {
	kd    kind
	apply func(ctx context.Context, ops []Op, keys []K, vals []V, res []Result, counts []uint32) error
	// contents returns each key's values (Map: at most one; Set: a zero
	// value for a present key; MultiMap: oldest first).
	contents func(ctx context.Context, keys []K) ([][]V, error)
	snapshot func(ctx context.Context) ([]K, error)
	length   func() int
	close    func() error
}

func stressMap[K, V warpkit.Word](opts Options) (*stressTable[K, V], error) {
	m, err := NewMap[K, V](opts)
	if err != nil {
		return nil, err
	}
	return &stressTable[K, V]{
		kd: kindMap,
		apply: func(ctx context.Context, ops []Op, keys []K, vals []V, res []Result, _ []uint32) error {
			return m.Apply(ctx, ops, keys, vals, res)
		},
		contents: func(ctx context.Context, keys []K) ([][]V, error) {
			vals := make([]V, len(keys))
			res := make([]Result, len(keys))
			if err := m.Lookup(ctx, keys, vals, res); err != nil {
				return nil, err
			}
			out := make([][]V, len(keys))
			for i, r := range res {
				if r == Found {
					out[i] = []V{vals[i]}
				}
			}
			return out, nil
		},
		snapshot: func(ctx context.Context) ([]K, error) {
			k, _, err := m.Pairs(ctx)
			return k, err
		},
		length: lenFunc(m), close: m.Close,
	}, nil
}

func stressSet[K warpkit.Word](opts Options) (*stressTable[K, uint32], error) {
	s, err := NewSet[K](opts)
	if err != nil {
		return nil, err
	}
	return &stressTable[K, uint32]{
		kd: kindSet,
		apply: func(ctx context.Context, ops []Op, keys []K, _ []uint32, res []Result, _ []uint32) error {
			return s.Apply(ctx, ops, keys, res)
		},
		contents: func(ctx context.Context, keys []K) ([][]uint32, error) {
			res := make([]Result, len(keys))
			if err := s.Lookup(ctx, keys, res); err != nil {
				return nil, err
			}
			out := make([][]uint32, len(keys))
			for i, r := range res {
				if r == Found {
					out[i] = []uint32{0}
				}
			}
			return out, nil
		},
		snapshot: s.Keys, length: lenFunc(s), close: s.Close,
	}, nil
}

func stressMulti[K, V warpkit.Word](opts Options) (*stressTable[K, V], error) {
	m, err := NewMultiMap[K, V](opts)
	if err != nil {
		return nil, err
	}
	return &stressTable[K, V]{
		kd: kindMulti, apply: m.Apply,
		contents: func(ctx context.Context, keys []K) ([][]V, error) {
			offs, vals, err := m.LookupAll(ctx, keys)
			if err != nil {
				return nil, err
			}
			out := make([][]V, len(keys))
			for i := range keys {
				out[i] = vals[offs[i]:offs[i+1]]
			}
			return out, nil
		},
		snapshot: func(ctx context.Context) ([]K, error) {
			k, _, err := m.Pairs(ctx)
			return k, err
		},
		length: lenFunc(m), close: m.Close,
	}, nil
}

// stressValue encodes a written value: its writer and the writer's
// sequence number (fits 32 bits).
func stressValue[V warpkit.Word](worker int, seq uint64) V { return V(uint64(worker+1)<<20 | seq) }

func stressWriter[V warpkit.Word](v V) (worker int, seq uint64) {
	return int(uint64(v)>>20) - 1, uint64(v) & (1<<20 - 1)
}

// stress runs goroutines that apply random mixed batches over one shared,
// small key set at the same time (on the GPU each batch holds its own
// stream). Every value written is unique and names its writer. Afterwards:
//   - per key, the pairs its elements reported added minus those they
//     reported removed equals what it holds (no lost key or pair, no
//     duplicate insert; a Map or Set key holds at most one);
//   - every value held or found was written to that key, and none is held
//     twice;
//   - a Map key holds the last value its writer wrote to it (no stale
//     value); a MultiMap key holds each writer's values in the order
//     written (oldest first);
//   - the snapshot holds every entry (Map and Set: each key once) and Len
//     agrees.
func stress[K, V warpkit.Word](t *testing.T, m *stressTable[K, V], workers, rounds, batch, keyCount int) {
	t.Helper()
	ctx := context.Background()
	keys := keySpace[K](keyCount)
	type writeKey struct {
		worker int
		key    K
	}
	type pair struct {
		k K
		v V
	}
	var mu sync.Mutex
	net := map[K]int{}
	last := map[writeKey]V{} // each worker's last value written per key
	writer := map[V]K{}      // the key every value was written to
	var found []pair
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 99))
			seq := uint64(0)
			for r := 0; r < rounds; r++ {
				// One element per key per batch, so each worker's writes to a
				// key are ordered by its own program order.
				perm := rng.Perm(len(keys))[:batch]
				ops := make([]Op, batch)
				ks := make([]K, batch)
				vs := make([]V, batch)
				for i, p := range perm {
					ks[i] = keys[p]
					ops[i] = Op(rng.IntN(int(m.kd.maxOp()) + 1))
					if m.kd == kindMulti && rng.IntN(3) == 0 {
						ops[i] = OpInsert // keys gather several pairs
					}
					seq++
					vs[i] = stressValue[V](w, seq)
				}
				in := append([]V(nil), vs...)
				res := make([]Result, batch)
				counts := make([]uint32, batch)
				if err := m.apply(ctx, ops, ks, vs, res, counts); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for i, k := range ks {
					switch {
					case ops[i] == OpInsert:
						last[writeKey{w, k}] = in[i]
						writer[in[i]] = k
						if res[i] == Inserted {
							net[k]++
						}
					case res[i] == Removed && m.kd == kindMulti:
						net[k] -= int(counts[i])
					case res[i] == Removed:
						net[k]--
					case ops[i] == OpFind && res[i] == Found && m.kd == kindMap:
						found = append(found, pair{k, vs[i]})
					}
				}
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, f := range found {
		if wk, ok := writer[f.v]; !ok || wk != f.k {
			t.Fatalf("a find of %#x returned %#x, which was never written to it", uint64(f.k), uint64(f.v))
		}
	}
	held, err := m.contents(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	seen := map[V]bool{}
	for i, k := range keys {
		vs := held[i]
		total += len(vs)
		if net[k] != len(vs) {
			t.Fatalf("key %#x: %d more pairs reported added than removed, %d held", uint64(k), net[k], len(vs))
		}
		if m.kd == kindSet {
			continue
		}
		lastSeq := map[int]uint64{}
		for _, v := range vs {
			w, seq := stressWriter(v)
			if writer[v] != k || seen[v] {
				t.Fatalf("key %#x holds %#x, which was not written to it or is held twice", uint64(k), uint64(v))
			}
			seen[v] = true
			if m.kd == kindMap && last[writeKey{w, k}] != v {
				t.Fatalf("key %#x holds %#x, which is not the last value its writer (%d) wrote to it", uint64(k), uint64(v), w)
			}
			if seq <= lastSeq[w] {
				t.Fatalf("key %#x holds writer %d's values out of the order written: %v", uint64(k), w, vs)
			}
			lastSeq[w] = seq
		}
	}
	snapKeys, err := m.snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m.kd != kindMulti {
		once := map[K]bool{}
		for _, k := range snapKeys {
			if once[k] {
				t.Fatalf("key %#x twice in the snapshot", uint64(k))
			}
			once[k] = true
		}
	}
	if len(snapKeys) != total || m.length() != total {
		t.Fatalf("snapshot %d entries, Len %d, held %d", len(snapKeys), m.length(), total)
	}
}

// stressCase is one table type of TestConcurrentStress.
type stressCase struct {
	name string
	run  func(t *testing.T, opts Options, workers, rounds, batch, keyCount int)
	// layouts are the layouts the type supports.
	layouts []Layout
}

func stressCaseOf[K, V warpkit.Word](name string, kd kind, open func(Options) (*stressTable[K, V], error)) stressCase {
	return stressCase{
		name: name, layouts: layoutsFor[K, V](kd),
		run: func(t *testing.T, opts Options, workers, rounds, batch, keyCount int) {
			m, err := open(opts)
			if err != nil {
				t.Fatal(err)
			}
			defer m.close()
			stress(t, m, workers, rounds, batch, keyCount)
		},
	}
}

// TestConcurrentStress runs stress on every table type: Maps of each width
// pair, Sets, MultiMaps, on the CPU and on every GPU layout (with 7 buckets,
// so the workers meet on long lists).
func TestConcurrentStress(t *testing.T) {
	cases := []stressCase{
		stressCaseOf("Map-32x32", kindMap, stressMap[uint32, uint32]),
		stressCaseOf("Map-32x64", kindMap, stressMap[uint32, uint64]),
		stressCaseOf("Map-64x32", kindMap, stressMap[uint64, uint32]),
		stressCaseOf("Map-64x64", kindMap, stressMap[uint64, uint64]),
		stressCaseOf("Set-32", kindSet, stressSet[uint32]),
		stressCaseOf("Set-64", kindSet, stressSet[uint64]),
		stressCaseOf("MultiMap-32x32", kindMulti, stressMulti[uint32, uint32]),
		stressCaseOf("MultiMap-64x64", kindMulti, stressMulti[uint64, uint64]),
	}
	for _, c := range cases {
		t.Run("CPU-"+c.name, func(t *testing.T) {
			c.run(t, Options{Backend: warpkit.CPU}, 4, 20, 200, 300)
		})
	}
	for _, c := range cases {
		for _, l := range c.layouts {
			t.Run("GPU-"+c.name+"-"+l.String(), func(t *testing.T) {
				dev := gputest.Device(t)
				c.run(t, Options{Backend: warpkit.CUDA, Device: dev, Layout: l, Buckets: 7, Streams: 8}, 8, 60, 400, 500)
			})
		}
	}
}

// TestPoolExhaustion fills a table whose allocator may hold a few slabs
// only: inserts fail with ErrPoolExhausted, the failed elements are marked,
// what was applied is there, and after deletes and a Flush the freed slabs
// take new keys.
func TestPoolExhaustion(t *testing.T) {
	dev := gputest.Device(t)
	ctx := context.Background()
	m, err := NewMap[uint32, uint32](Options{Backend: warpkit.CUDA, Device: dev, Buckets: 4, MaxPoolBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	keys := keySpace[uint32](20000)
	vals := make([]uint32, len(keys))
	for i := range vals {
		vals[i] = uint32(i)
	}
	res := make([]Result, len(keys))
	err = m.Insert(ctx, keys, vals, res)
	if !errors.Is(err, warpkit.ErrPoolExhausted) {
		t.Fatalf("inserting past the pool: %v", err)
	}
	var in, failed []uint32
	for i, r := range res {
		switch r {
		case Inserted:
			in = append(in, keys[i])
		case Failed:
			failed = append(failed, keys[i])
		default:
			t.Fatalf("result %v after a failed batch", r)
		}
	}
	if len(in) == 0 || len(failed) == 0 || lenOf(t, m) != len(in) {
		t.Fatalf("%d inserted, %d failed, Len %d", len(in), len(failed), lenOf(t, m))
	}
	got := make([]Result, len(in))
	if err := m.Lookup(ctx, in, make([]uint32, len(in)), got); err != nil {
		t.Fatal(err)
	}
	for i, r := range got {
		if r != Found {
			t.Fatalf("inserted key %#x not found after the failure", in[i])
		}
	}
	got = make([]Result, len(failed))
	if err := m.Lookup(ctx, failed, make([]uint32, len(failed)), got); err != nil {
		t.Fatal(err)
	}
	for i, r := range got {
		if r != NotFound {
			t.Fatalf("failed key %#x is present", failed[i])
		}
	}
	st, err := m.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Delete(ctx, in, nil); err != nil {
		t.Fatal(err)
	}
	if err := m.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	after, err := m.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.PoolSlabs != 0 || st.PoolSlabs == 0 {
		t.Fatalf("pool slabs %d before, %d after deleting everything and flushing", st.PoolSlabs, after.PoolSlabs)
	}
	if err := m.Insert(ctx, failed[:len(in)/2], vals[:len(in)/2], nil); err != nil {
		t.Fatalf("inserting after the flush freed slabs: %v", err)
	}
	if lenOf(t, m) != len(in)/2 {
		t.Fatalf("Len %d, want %d", lenOf(t, m), len(in)/2)
	}
}

// TestIssue27Scenario replays the duplicate-key race of the public SlabHash
// (its issue #27): a bucket holding A, a delete of A and several inserts of
// B in one concurrent batch. Exactly one insert of B may report Inserted,
// and B must be stored once.
func TestIssue27Scenario(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		ctx := context.Background()
		opts.Buckets = 1
		layouts := []Layout{LayoutAuto}
		if opts.Backend == warpkit.CUDA {
			layouts = []Layout{LayoutTile8, LayoutTile16, LayoutPaper}
		}
		for _, l := range layouts {
			opts.Layout = l
			m, err := NewMap[uint32, uint32](opts)
			if err != nil {
				t.Fatal(err)
			}
			for round := uint32(0); round < 200; round++ {
				a, bkey := 2*round+1, 2*round+2
				if err := m.Insert(ctx, []uint32{a}, []uint32{1}, nil); err != nil {
					t.Fatal(err)
				}
				ops := []Op{OpDelete}
				keys := []uint32{a}
				for i := 0; i < 31; i++ {
					ops, keys = append(ops, OpInsert), append(keys, bkey)
				}
				res := make([]Result, len(keys))
				if err := m.Apply(ctx, ops, keys, make([]uint32, len(keys)), res); err != nil {
					t.Fatal(err)
				}
				inserted := 0
				for _, r := range res[1:] {
					if r == Inserted {
						inserted++
					}
				}
				if res[0] != Removed || inserted != 1 {
					t.Fatalf("%s round %d: delete %v, %d inserts of B reported Inserted", l, round, res[0], inserted)
				}
			}
			keys, _, err := m.Pairs(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(keys) != 200 || lenOf(t, m) != 200 {
				t.Fatalf("%s: %d keys stored, Len %d, want 200", l, len(keys), lenOf(t, m))
			}
			if err := m.Compact(ctx); err != nil {
				t.Fatal(err)
			}
			if keys, _, err = m.Pairs(ctx); err != nil || len(keys) != 200 {
				t.Fatalf("%s: %d keys after Flush (%v)", l, len(keys), err)
			}
			m.Close()
		}
	})
}

// TestDeviceOutOfMemory asks for bucket heads no GPU holds: the error is
// ErrOutOfMemory, and the device keeps working for the next table.
func TestDeviceOutOfMemory(t *testing.T) {
	dev := gputest.Device(t)
	ctx := context.Background()
	_, err := NewMap[uint32, uint32](Options{Backend: warpkit.CUDA, Device: dev, Buckets: 4_000_000_000})
	if !errors.Is(err, warpkit.ErrOutOfMemory) {
		t.Fatalf("256 GB of buckets: %v", err)
	}
	m, err := NewMap[uint32, uint32](Options{Backend: warpkit.CUDA, Device: dev})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	res := make([]Result, 1)
	if err := m.Insert(ctx, []uint32{5}, []uint32{6}, res); err != nil || res[0] != Inserted {
		t.Fatalf("after the failed allocation: %v %v", res, err)
	}
}

// TestMixedDeviceBatchOutgrowsReservation: a mixed device batch whose ops the
// host does not see, all inserts into a table sized for far fewer, outruns
// the pool it reserved: the kernel reports exhaustion, the host grows the
// pool and reruns just the failed elements, and every insert applies once.
// Then deletes leave tombstones that Stats counts until Flush.
func TestMixedDeviceBatchOutgrowsReservation(t *testing.T) {
	dev := gputest.Device(t)
	ctx := context.Background()
	m, err := NewMap[uint32, uint32](Options{Backend: warpkit.CUDA, Device: dev, ExpectedSize: 1000, Buckets: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	const n = 80000
	keys := keySpace[uint32](2 * n)
	ops := make([]uint8, n)
	vals := make([]uint32, n)
	for i := range ops {
		ops[i] = uint8(OpInsert)
		vals[i] = uint32(i) + 1
	}
	dOps, _ := cuda.FromHost(dev, ops)
	dKeys, _ := cuda.FromHost(dev, keys[:n])
	dVals, _ := cuda.FromHost(dev, vals)
	dRes, _ := cuda.Alloc[uint8](dev, n)
	defer dOps.Free()
	defer dKeys.Free()
	defer dVals.Free()
	defer dRes.Free()
	before, err := m.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.ApplyDevice(ctx, dOps, dKeys, dVals, dRes); err != nil {
		t.Fatal(err)
	}
	res, _ := dRes.ToHost()
	for i, r := range res {
		if Result(r) != Inserted {
			t.Fatalf("element %d: %v, want inserted", i, Result(r))
		}
	}
	after, err := m.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lenOf(t, m) != n || after.PoolGrowths <= before.PoolGrowths || after.Reruns <= before.Reruns {
		t.Fatalf("Len %d (want %d); pool growths %d -> %d, reruns %d -> %d (want both to grow)", lenOf(t, m), n,
			before.PoolGrowths, after.PoolGrowths, before.Reruns, after.Reruns)
	}
	// Delete every other key in a mixed batch with finds of absent keys.
	mixedKeys := make([]uint32, n)
	for i := range ops {
		if i%2 == 0 {
			ops[i], mixedKeys[i] = uint8(OpDelete), keys[i]
		} else {
			ops[i], mixedKeys[i] = uint8(OpFind), keys[n+i]
		}
	}
	if err := dOps.CopyFromHost(ops); err != nil {
		t.Fatal(err)
	}
	if err := dKeys.CopyFromHost(mixedKeys); err != nil {
		t.Fatal(err)
	}
	if err := m.ApplyDevice(ctx, dOps, dKeys, dVals, dRes); err != nil {
		t.Fatal(err)
	}
	res, _ = dRes.ToHost()
	for i, r := range res {
		want := Removed
		if i%2 == 1 {
			want = NotFound
		}
		if Result(r) != want {
			t.Fatalf("element %d: %v, want %v", i, Result(r), want)
		}
	}
	st, err := m.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Tombstones != n/2 || lenOf(t, m) != n/2 {
		t.Fatalf("%d tombstones, Len %d after deleting %d of %d", st.Tombstones, lenOf(t, m), n/2, n)
	}
	if err := m.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err = m.Stats(ctx); err != nil || st.Tombstones != 0 {
		t.Fatalf("%d tombstones after Flush (%v)", st.Tombstones, err)
	}
}
