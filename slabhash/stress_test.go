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

// stress runs goroutines that apply random mixed batches over one shared,
// small key set at the same time (on the GPU each batch holds its own
// stream). Every value written is unique and names its writer. Afterwards:
//   - per key, Inserted results minus Removed results equals its presence
//     (no lost key, no duplicate insert);
//   - a present key holds the last value its writer wrote to it (no stale
//     value), and every value a find returned was written to that key;
//   - the snapshot has each key once and Len agrees.
func stress[K, V warpkit.Word](t *testing.T, m *Map[K, V], workers, rounds, batch, keyCount int) {
	t.Helper()
	ctx := context.Background()
	keys := keySpace[K](keyCount)
	type writeKey struct {
		worker int
		key    K
	}
	var mu sync.Mutex
	net := map[K]int{}
	last := map[writeKey]V{} // each worker's last value written per key
	writer := map[V]K{}      // the key every value was written to
	var found []struct {
		k K
		v V
	}
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
					ops[i] = Op(rng.IntN(3))
					seq++
					vs[i] = V(uint64(w+1)<<20 | seq) // unique per writer and write (fits 32 bits)
				}
				in := append([]V(nil), vs...)
				res := make([]Result, batch)
				if err := m.Apply(ctx, ops, ks, vs, res); err != nil {
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
					case res[i] == Removed:
						net[k]--
					case ops[i] == OpFind && res[i] == Found:
						found = append(found, struct {
							k K
							v V
						}{k, vs[i]})
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
	vals := make([]V, len(keys))
	res := make([]Result, len(keys))
	if err := m.Find(ctx, keys, vals, res); err != nil {
		t.Fatal(err)
	}
	present := 0
	for i, k := range keys {
		in := res[i] == Found
		if net[k] != map[bool]int{false: 0, true: 1}[in] {
			t.Fatalf("key %#x: %d more inserts than removals, present %v", uint64(k), net[k], in)
		}
		if !in {
			continue
		}
		present++
		v := vals[i]
		w := int(uint64(v)>>20) - 1
		if writer[v] != k || last[writeKey{w, k}] != v {
			t.Fatalf("key %#x holds %#x, which is not the last value its writer (%d) wrote to it", uint64(k), uint64(v), w)
		}
	}
	snapKeys, _, err := m.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[K]bool{}
	for _, k := range snapKeys {
		if seen[k] {
			t.Fatalf("key %#x twice in the snapshot", uint64(k))
		}
		seen[k] = true
	}
	if len(snapKeys) != present || m.Len() != present {
		t.Fatalf("snapshot %d keys, Len %d, present %d", len(snapKeys), m.Len(), present)
	}
}

func TestConcurrentStress(t *testing.T) {
	t.Run("CPU", func(t *testing.T) {
		m, err := NewMap[uint32, uint32](Options{Backend: warpkit.CPU})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		stress(t, m, 4, 20, 200, 300)
	})
	for _, l := range []Layout{LayoutTile8, LayoutTile16, LayoutPaper} {
		t.Run("GPU-32x32-"+l.String(), func(t *testing.T) {
			dev := gputest.Device(t)
			m, err := NewMap[uint32, uint32](Options{Backend: warpkit.CUDA, Device: dev, Layout: l, Buckets: 7, Streams: 8})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			stress(t, m, 8, 60, 400, 500)
		})
	}
	for _, l := range []Layout{LayoutTile8, LayoutTile16} {
		t.Run("GPU-64x64-"+l.String(), func(t *testing.T) {
			dev := gputest.Device(t)
			m, err := NewMap[uint64, uint64](Options{Backend: warpkit.CUDA, Device: dev, Layout: l, Buckets: 7, Streams: 8})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			stress(t, m, 8, 60, 400, 500)
		})
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
	if len(in) == 0 || len(failed) == 0 || m.Len() != len(in) {
		t.Fatalf("%d inserted, %d failed, Len %d", len(in), len(failed), m.Len())
	}
	got := make([]Result, len(in))
	if err := m.Find(ctx, in, make([]uint32, len(in)), got); err != nil {
		t.Fatal(err)
	}
	for i, r := range got {
		if r != Found {
			t.Fatalf("inserted key %#x not found after the failure", in[i])
		}
	}
	got = make([]Result, len(failed))
	if err := m.Find(ctx, failed, make([]uint32, len(failed)), got); err != nil {
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
	if err := m.Flush(ctx); err != nil {
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
	if m.Len() != len(in)/2 {
		t.Fatalf("Len %d, want %d", m.Len(), len(in)/2)
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
			keys, _, err := m.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(keys) != 200 || m.Len() != 200 {
				t.Fatalf("%s: %d keys stored, Len %d, want 200", l, len(keys), m.Len())
			}
			if err := m.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if keys, _, err = m.Snapshot(ctx); err != nil || len(keys) != 200 {
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
	if m.Len() != n || after.PoolGrowths <= before.PoolGrowths || after.Reruns <= before.Reruns {
		t.Fatalf("Len %d (want %d); pool growths %d -> %d, reruns %d -> %d (want both to grow)", m.Len(), n,
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
	if st.Tombstones != n/2 || m.Len() != n/2 {
		t.Fatalf("%d tombstones, Len %d after deleting %d of %d", st.Tombstones, m.Len(), n/2, n)
	}
	if err := m.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err = m.Stats(ctx); err != nil || st.Tombstones != 0 {
		t.Fatalf("%d tombstones after Flush (%v)", st.Tombstones, err)
	}
}
