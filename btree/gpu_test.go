package btree

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/gputest"
	"github.com/warpkit/warpkit/internal/kernelgen/ptxcheck"
)

func TestPTXUpToDate(t *testing.T) { ptxcheck.Check(t, "btree.ptx") }

// newGPUTree opens a tree on the test's device; at cleanup it runs the
// structural checker (every GPU test ends with it) and closes the tree.
func newGPUTree[K, V warpkit.Word](t *testing.T, dev *cuda.Device, opts Options) *Tree[K, V] {
	t.Helper()
	opts.Backend, opts.Device = warpkit.CUDA, dev
	tr, err := New[K, V](opts)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Backend() != warpkit.CUDA {
		t.Fatalf("backend %v", tr.Backend())
	}
	t.Cleanup(func() {
		if err := tr.Check(context.Background()); err != nil && !errors.Is(err, warpkit.ErrClosed) {
			t.Errorf("structural check after the test: %v", err)
		}
		tr.Close()
	})
	return tr
}

func TestGPUSemantics(t *testing.T) {
	dev := gputest.Device(t)
	t.Run("u32u32", func(t *testing.T) { testSemantics(t, newGPUTree[uint32, uint32](t, dev, Options{})) })
	t.Run("u64u64", func(t *testing.T) { testSemantics(t, newGPUTree[uint64, uint64](t, dev, Options{})) })
	t.Run("u32u64", func(t *testing.T) { testSemantics(t, newGPUTree[uint32, uint64](t, dev, Options{})) })
	t.Run("u64u32", func(t *testing.T) { testSemantics(t, newGPUTree[uint64, uint32](t, dev, Options{})) })
}

// TestGPUBuildLayout checks the device bulk build byte for byte against the
// host layout (which TestCheckAcceptsBuiltTrees verifies).
func TestGPUBuildLayout(t *testing.T) {
	dev := gputest.Device(t)
	ctx := context.Background()
	for _, wide := range []bool{false, true} {
		for _, m := range []int{0, 1, 10, 11, 121, 5000, 200000} {
			t.Run(fmt.Sprintf("wide=%v/m=%d", wide, m), func(t *testing.T) {
				var pool []byte
				var want []byte
				if wide {
					tr := newGPUTree[uint64, uint64](t, dev, Options{})
					l := layoutFor(8, 8)
					want = wantLayout(t, l, m)
					ks, vs := layoutPairs[uint64, uint64](t, l, m)
					if err := tr.Build(ctx, ks, vs); err != nil {
						t.Fatal(err)
					}
					pool = downloadPool(t, tr.gpu)
				} else {
					tr := newGPUTree[uint32, uint32](t, dev, Options{})
					l := layoutFor(4, 4)
					want = wantLayout(t, l, m)
					ks, vs := layoutPairs[uint32, uint32](t, l, m)
					if err := tr.Build(ctx, ks, vs); err != nil {
						t.Fatal(err)
					}
					pool = downloadPool(t, tr.gpu)
				}
				if !slices.Equal(pool, want) {
					for i := range want {
						if pool[i] != want[i] {
							t.Fatalf("pool differs from the host layout at byte %d (node %d)", i, i/(len(want)/planBuild(m).nodes))
						}
					}
					t.Fatalf("pool has %d bytes, host layout %d", len(pool), len(want))
				}
			})
		}
	}
}

func wantLayout(t *testing.T, l layout, m int) []byte {
	pool, _, _, _ := buildHost(t, l, m, uint64(m))
	return pool
}

func layoutPairs[K, V warpkit.Word](t *testing.T, l layout, m int) ([]K, []V) {
	_, _, wk, wv := buildHost(t, l, m, uint64(m))
	ks, vs := make([]K, m), make([]V, m)
	for i := range wk {
		ks[i], vs[i] = K(wk[i]), V(wv[i])
	}
	// Shuffle: Build sorts.
	rand.New(rand.NewPCG(5, 5)).Shuffle(m, func(i, j int) { ks[i], ks[j] = ks[j], ks[i]; vs[i], vs[j] = vs[j], vs[i] })
	return ks, vs
}

func downloadPool[K, V warpkit.Word](t *testing.T, g *gpuTree[K, V]) []byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	used, err := g.used()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, used*g.lay.NodeBytes)
	if err := g.poolBytes(0, len(buf)).CopyToHost(buf); err != nil {
		t.Fatal(err)
	}
	return buf
}

func diffRounds() int {
	if testing.Short() {
		return 24
	}
	return 64
}

func TestGPUDifferential(t *testing.T) {
	dev := gputest.Device(t)
	t.Run("u32u32", func(t *testing.T) { runDiff(t, newGPUTree[uint32, uint32](t, dev, Options{}), 11, diffRounds()) })
	t.Run("u64u64", func(t *testing.T) { runDiff(t, newGPUTree[uint64, uint64](t, dev, Options{}), 12, diffRounds()) })
	t.Run("u32u64", func(t *testing.T) { runDiff(t, newGPUTree[uint32, uint64](t, dev, Options{}), 13, diffRounds()/2) })
	t.Run("u64u32", func(t *testing.T) { runDiff(t, newGPUTree[uint64, uint32](t, dev, Options{}), 14, diffRounds()/2) })
}

// TestGPUDifferentialAfterBuild starts from a bulk-built tree, so that inserts
// split built nodes and ranges cross many leaves.
func TestGPUDifferentialAfterBuild(t *testing.T) {
	dev := gputest.Device(t)
	for _, seed := range []uint64{21, 22} {
		tr := newGPUTree[uint32, uint32](t, dev, Options{InitialNodes: 64})
		d := newDiffer(t, tr, seed)
		ks := d.keys(100000)
		vs := make([]uint32, len(ks))
		for i, k := range ks {
			vs[i] = d.value(k)
		}
		d.must(tr.Build(d.ctx, ks, vs), "build")
		d.must(d.oracle.Build(d.ctx, ks, vs), "oracle build")
		d.compareAll()
		for i := 0; i < diffRounds(); i++ {
			d.step()
		}
		d.compareAll()
	}
}

// TestGPUConcurrentStress runs writers on disjoint key sets and readers of a
// stable key set from several goroutines (separate streams) at once. Readers
// must always find every stable key; at the end the contents must equal what
// each writer's sequence of batches implies.
func TestGPUConcurrentStress(t *testing.T) {
	dev := gputest.Device(t)
	ctx := context.Background()
	tr := newGPUTree[uint32, uint32](t, dev, Options{InitialNodes: 256, Streams: 6})
	const stable = 50000
	sk, sv := make([]uint32, stable), make([]uint32, stable)
	for i := range sk {
		sk[i], sv[i] = uint32(i)*8, uint32(i)^0xabcdef
	}
	if err := tr.Build(ctx, sk, sv); err != nil {
		t.Fatal(err)
	}
	writers, rounds := 4, 30
	if testing.Short() {
		rounds = 12
	}
	final := make([]map[uint32]uint32, writers)
	var wg sync.WaitGroup
	errs := make(chan error, 2*writers)
	for w := 0; w < writers; w++ {
		final[w] = map[uint32]uint32{}
		wg.Add(2)
		go func(w int) { // writer: keys 8i+1+w, never stable ones
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			mine := final[w]
			for round := 0; round < rounds; round++ {
				n := 1 + r.IntN(20000)
				ks, vs := make([]uint32, n), make([]uint32, n)
				for i := range ks {
					ks[i] = uint32(r.IntN(stable+1000))*8 + 1 + uint32(w)
					vs[i] = ks[i] + uint32(round)
				}
				var err error
				if r.IntN(3) == 0 {
					err = tr.Delete(ctx, ks)
					for _, k := range ks {
						delete(mine, k)
					}
				} else {
					// Distinct keys within a batch keep the expected value defined.
					seen := map[uint32]bool{}
					ks2, vs2 := ks[:0], vs[:0]
					for i, k := range ks {
						if !seen[k] {
							seen[k] = true
							ks2, vs2 = append(ks2, k), append(vs2, vs[i])
						}
					}
					err = tr.Insert(ctx, ks2, vs2)
					for i, k := range ks2 {
						mine[k] = vs2[i]
					}
				}
				if err != nil {
					errs <- fmt.Errorf("writer %d round %d: %w", w, round, err)
					return
				}
			}
		}(w)
		go func(w int) { // reader: stable keys are always there
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 8))
			for round := 0; round < rounds; round++ {
				n := 1 + r.IntN(20000)
				ks := make([]uint32, n)
				for i := range ks {
					ks[i] = uint32(r.IntN(stable)) * 8
				}
				vs, fs := make([]uint32, n), make([]bool, n)
				if err := tr.Lookup(ctx, ks, vs, fs); err != nil {
					errs <- fmt.Errorf("reader %d: %w", w, err)
					return
				}
				for i, k := range ks {
					if !fs[i] || vs[i] != (k/8)^0xabcdef {
						errs <- fmt.Errorf("reader %d round %d: stable key %d = (%d, %v)", w, round, k, vs[i], fs[i])
						return
					}
				}
				counts := make([]uint32, 1)
				lo, hi := uint32(r.IntN(stable))*8, uint32(0)
				hi = lo + 8*99 + 7
				if err := tr.Count(ctx, []uint32{lo}, []uint32{hi}, counts); err != nil {
					errs <- fmt.Errorf("reader %d count: %w", w, err)
					return
				}
				if counts[0] < 100 && lo/8+100 <= stable {
					errs <- fmt.Errorf("reader %d: count [%d, %d) = %d, below the 100 stable keys in it", w, lo, hi, counts[0])
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	want := map[uint32]uint32{}
	for i := range sk {
		want[sk[i]] = sv[i]
	}
	for _, m := range final {
		for k, v := range m {
			want[k] = v
		}
	}
	keys, vals, err := tr.gpu.pairs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != len(want) {
		t.Fatalf("tree holds %d keys, want %d", len(keys), len(want))
	}
	for i, k := range keys {
		if v, ok := want[k]; !ok || v != vals[i] {
			t.Fatalf("key %d = %d, want (%d, %v)", k, vals[i], v, ok)
		}
	}
}

// TestGPUMixedKeepsUntouchedKeys checks the §5.6 guarantee under load: mixed
// batches full of inserts and deletes that split the very leaves being read
// must still find every pre-existing key they do not update.
func TestGPUMixedKeepsUntouchedKeys(t *testing.T) {
	dev := gputest.Device(t)
	ctx := context.Background()
	tr := newGPUTree[uint64, uint64](t, dev, Options{})
	const stable = 40000
	sk, sv := make([]uint64, stable), make([]uint64, stable)
	for i := range sk {
		sk[i], sv[i] = uint64(i)<<40, uint64(i)*3
	}
	if err := tr.Build(ctx, sk, sv); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	rounds := 10
	if testing.Short() {
		rounds = 4
	}
	for round := 0; round < rounds; round++ {
		const n = 60000
		ops := Ops[uint64, uint64]{Kinds: make([]OpKind, n), Keys: make([]uint64, n), Vals: make([]uint64, n)}
		for i := range n {
			base := uint64(r.IntN(stable)) << 40
			switch r.IntN(3) {
			case 0:
				ops.Kinds[i], ops.Keys[i] = OpLookup, base
			case 1:
				k := base + 1 + uint64(r.IntN(1<<20))
				ops.Kinds[i], ops.Keys[i], ops.Vals[i] = OpInsert, k, k
			case 2:
				ops.Kinds[i], ops.Keys[i] = OpDelete, base+1+uint64(r.IntN(1<<20))
			}
		}
		res := Results[uint64, uint64]{Found: make([]bool, n), Vals: make([]uint64, n)}
		if err := tr.Apply(ctx, ops, res); err != nil {
			t.Fatal(err)
		}
		for i, kind := range ops.Kinds {
			if k := ops.Keys[i]; kind == OpLookup && (!res.Found[i] || res.Vals[i] != (k>>40)*3) {
				t.Fatalf("round %d: untouched key %d gave (%d, %v)", round, k, res.Vals[i], res.Found[i])
			}
		}
		if err := tr.Check(ctx); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
}

// TestGPUPoolExhausted fills a capped pool: the batch fails with
// ErrPoolExhausted, the tree stays valid, and what it holds is exactly the
// earlier pairs plus some of the batch's.
func TestGPUPoolExhausted(t *testing.T) {
	dev := gputest.Device(t)
	ctx := context.Background()
	tr := newGPUTree[uint32, uint32](t, dev, Options{InitialNodes: 8, MaxNodes: 40})
	base := []uint32{1, 2, 3}
	if err := tr.Insert(ctx, base, base); err != nil {
		t.Fatal(err)
	}
	n := 5000
	ks, vs := make([]uint32, n), make([]uint32, n)
	for i := range ks {
		ks[i] = uint32(i)*7919 + 10
		vs[i] = ks[i] * 3
	}
	err := tr.Insert(ctx, ks, vs)
	if !errors.Is(err, warpkit.ErrPoolExhausted) {
		t.Fatalf("insert into a full pool: %v", err)
	}
	if err := tr.Check(ctx); err != nil {
		t.Fatal(err)
	}
	keys, vals, err := tr.gpu.pairs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) < 100 { // 40 nodes hold at least 7 keys per leaf
		t.Fatalf("only %d keys stored", len(keys))
	}
	for i, k := range keys {
		if k <= 3 {
			if vals[i] != k {
				t.Fatalf("earlier key %d = %d", k, vals[i])
			}
		} else if vals[i] != k*3 || (k-10)%7919 != 0 {
			t.Fatalf("stray pair (%d, %d)", k, vals[i])
		}
	}
	// The tree still works: lookups, deletes, and a build that does not fit.
	fs, lv := make([]bool, 3), make([]uint32, 3)
	if err := tr.Lookup(ctx, base, lv, fs); err != nil || !fs[0] || !fs[2] || lv[1] != 2 {
		t.Fatalf("lookup after exhaustion: %v %v %v", lv, fs, err)
	}
	if err := tr.Delete(ctx, keys[:10]); err != nil {
		t.Fatal(err)
	}
	if err := tr.Build(ctx, ks, vs); !errors.Is(err, warpkit.ErrPoolExhausted) {
		t.Fatalf("build past MaxNodes: %v", err)
	}
	if got, err := tr.Len(ctx); err != nil || got != len(keys)-10 {
		t.Fatalf("len %d (%v), want %d", got, err, len(keys)-10)
	}
}

// TestGPUPoolGrows inserts far more than the initial pool holds.
func TestGPUPoolGrows(t *testing.T) {
	dev := gputest.Device(t)
	ctx := context.Background()
	tr := newGPUTree[uint64, uint32](t, dev, Options{InitialNodes: 2})
	n := 300000
	ks, vs := make([]uint64, n), make([]uint32, n)
	for i := range ks {
		ks[i], vs[i] = uint64(n-i)*0x100000001, uint32(i)
	}
	if err := tr.Insert(ctx, ks, vs); err != nil {
		t.Fatal(err)
	}
	st, err := tr.Stats(ctx)
	if err != nil || st.Keys != n || st.NodeBytes != 256 || st.Height < 4 {
		t.Fatalf("stats %+v, %v", st, err)
	}
}

// TestGPURangeWindows checks RangeDevice with fixed windows: true counts are
// reported and only the first window-size pairs are written.
func TestGPURangeWindows(t *testing.T) {
	dev := gputest.Device(t)
	ctx := context.Background()
	tr := newGPUTree[uint32, uint32](t, dev, Options{})
	n := 10000
	ks := make([]uint32, n)
	for i := range ks {
		ks[i] = uint32(i) * 2
	}
	if err := tr.Build(ctx, ks, ks); err != nil {
		t.Fatal(err)
	}
	lo := []uint32{0, 100, 19990, 5}
	hi := []uint32{40, 101, 30000, 4} // half-open: 40 is not counted
	const L = 8
	offsets := []uint32{0, L, 2 * L, 3 * L, 4 * L}
	dl, dh, do := onDevice(t, dev, lo), onDevice(t, dev, hi), onDevice(t, dev, offsets)
	ok, ov, dc := onDevice(t, dev, make([]uint32, 4*L)), onDevice(t, dev, make([]uint32, 4*L)), onDevice(t, dev, make([]uint32, 4))
	if err := tr.RangeDevice(ctx, dl, dh, do, ok, ov, dc); err != nil {
		t.Fatal(err)
	}
	counts, keys := onHost(t, dc), onHost(t, ok)
	if !slices.Equal(counts, []uint32{20, 1, 5, 0}) {
		t.Fatalf("counts %v", counts)
	}
	if !slices.Equal(keys[:L], []uint32{0, 2, 4, 6, 8, 10, 12, 14}) || keys[L] != 100 || !slices.Equal(keys[2*L:2*L+5], []uint32{19990, 19992, 19994, 19996, 19998}) {
		t.Fatalf("window contents %v", keys)
	}
}

// onDevice copies src to a new device buffer that the test frees at cleanup.
func onDevice[T cuda.Elem](t *testing.T, dev *cuda.Device, src []T) cuda.Slice[T] {
	t.Helper()
	s, err := cuda.FromHost(dev, src)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Free() })
	return s
}

// onHost copies s to the host.
func onHost[T cuda.Elem](t *testing.T, s cuda.Slice[T]) []T {
	t.Helper()
	out, err := s.ToHost()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGPUClose: every method but Backend returns ErrClosed after Close, a
// second Close included.
func TestGPUClose(t *testing.T) {
	dev := gputest.Device(t)
	tr, err := New[uint32, uint32](Options{Backend: warpkit.CUDA, Device: dev})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Insert(context.Background(), []uint32{1}, []uint32{1}); err != nil {
		t.Fatal(err)
	}
	testClosed(t, tr, dev)
}

// TestGPUCancelledAtEntry: a cancelled context stops every method before it
// applies anything, the Device methods included.
func TestGPUCancelledAtEntry(t *testing.T) {
	dev := gputest.Device(t)
	testCancelledAtEntry(t, newGPUTree[uint64, uint32](t, dev, Options{}), dev)
}

// TestGPUBuildDevice builds from device buffers (prim's sort, duplicates kept
// last) and compares with the CPU backend's Build of the same pairs.
func TestGPUBuildDevice(t *testing.T) {
	dev := gputest.Device(t)
	ctx := context.Background()
	for _, n := range []int{1, 1000, 300000} {
		tr := newGPUTree[uint64, uint32](t, dev, Options{})
		d := newDiffer(t, tr, uint64(n))
		ks := d.keys(n)
		vs := make([]uint32, n)
		for i := range vs {
			vs[i] = uint32(i) // duplicates carry different values: the last must win
		}
		dk, err := cuda.FromHost(dev, ks)
		if err != nil {
			t.Fatal(err)
		}
		dv, err := cuda.FromHost(dev, vs)
		if err != nil {
			t.Fatal(err)
		}
		d.must(tr.BuildDevice(ctx, dk, dv), "build device")
		dk.Free()
		dv.Free()
		d.must(d.oracle.Build(ctx, ks, vs), "oracle build")
		d.compareAll()
	}
}

// TestGPUApplyDeviceEmptyViews passes empty views of real buffers as the
// optional fields of a mixed batch: inserts must store the zero value (not
// read the buffer behind the empty Vals), and no result may be written into
// the buffers behind the empty result views.
func TestGPUApplyDeviceEmptyViews(t *testing.T) {
	dev := gputest.Device(t)
	ctx := context.Background()
	tr := newGPUTree[uint32, uint32](t, dev, Options{})
	const n = 64
	kinds, keys := make([]uint8, n), make([]uint32, n)
	for i := range kinds {
		kinds[i], keys[i] = uint8(OpInsert), uint32(i)+1
		if i%2 == 1 {
			kinds[i] = uint8(OpLookup) // of the previous insert's key or an absent one
		}
	}
	fill32 := make([]uint32, n)
	fill8 := make([]uint8, n)
	for i := range fill32 {
		fill32[i], fill8[i] = 0xdeadbeef, 0xee
	}
	canary32, canary8 := onDevice(t, dev, fill32), onDevice(t, dev, fill8)
	ops := DeviceOps[uint32, uint32]{Kinds: onDevice(t, dev, kinds), Keys: onDevice(t, dev, keys), Vals: canary32.Sub(0, 0), His: canary32.Sub(0, 0)}
	res := DeviceResults[uint32, uint32]{Found: canary8.Sub(0, 0), Keys: canary32.Sub(0, 0), Vals: canary32.Sub(0, 0), Counts: canary32.Sub(0, 0)}
	if err := tr.ApplyDevice(ctx, ops, res); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(onHost(t, canary32), fill32) || !slices.Equal(onHost(t, canary8), fill8) {
		t.Fatal("ApplyDevice wrote into the buffers behind empty result views")
	}
	var ins []uint32
	for i, k := range keys {
		if kinds[i] == uint8(OpInsert) {
			ins = append(ins, k)
		}
	}
	vals, found := make([]uint32, len(ins)), make([]bool, len(ins))
	if err := tr.Lookup(ctx, ins, vals, found); err != nil {
		t.Fatal(err)
	}
	for i, k := range ins {
		if !found[i] || vals[i] != 0 {
			t.Fatalf("key %d inserted with empty Vals: (%d, %v), want (0, true)", k, vals[i], found[i])
		}
	}
}

// TestGPUConcurrentGrowth runs writers that exhaust a tiny pool at the same
// time: batches that ran out of the same pool must grow it once, not once
// each. A pool is grown only when the nodes in use (or a batch's reserve) pass
// it, to at most twice that, so its final size stays within twice the nodes in
// use plus one batch's reserve.
func TestGPUConcurrentGrowth(t *testing.T) {
	dev := gputest.Device(t)
	ctx := context.Background()
	tr := newGPUTree[uint32, uint32](t, dev, Options{InitialNodes: 16, Streams: 8})
	const writers, rounds, batch = 8, 6, 4000
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range rounds {
				ks := make([]uint32, batch)
				for i := range ks {
					ks[i] = uint32((round*batch+i)*writers + w)
				}
				if err := tr.Insert(ctx, ks, ks); err != nil {
					errs <- fmt.Errorf("writer %d round %d: %w", w, round, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st, err := tr.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Keys != writers*rounds*batch {
		t.Fatalf("%d keys, want %d", st.Keys, writers*rounds*batch)
	}
	poolNodes := int(st.PoolBytes / int64(st.NodeBytes))
	if limit := 2*(st.Nodes+insertReserve(batch)) + 2; poolNodes > limit {
		t.Fatalf("pool of %d nodes for %d in use: grown more than once per exhaustion (limit %d)", poolNodes, st.Nodes, limit)
	}
}

// TestGPUBuildDeviceRacesClose closes the tree while BuildDevice runs: the
// build either finishes or fails with ErrClosed, and nothing uses the tree's
// streams or sort engine after Close freed them.
func TestGPUBuildDeviceRacesClose(t *testing.T) {
	dev := gputest.Device(t)
	ctx := context.Background()
	for _, delay := range []time.Duration{0, 100 * time.Microsecond, time.Millisecond} {
		tr := newGPUTree[uint32, uint32](t, dev, Options{})
		const n = 1 << 20
		ks := make([]uint32, n)
		for i := range ks {
			ks[i] = uint32(i) * 2654435761
		}
		dk, dv := onDevice(t, dev, ks), onDevice(t, dev, ks)
		done := make(chan error, 1)
		go func() { done <- tr.BuildDevice(ctx, dk, dv) }()
		time.Sleep(delay)
		if err := tr.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil && !errors.Is(err, warpkit.ErrClosed) {
			t.Fatalf("delay %v: BuildDevice beside Close: %v", delay, err)
		}
	}
}

// testInsertRounds: an insert batch large against the tree runs in rounds
// (blinknode.Rounds) and lands whole, every key with its value; a batch
// small against the tree runs in one launch.
func testInsertRounds(t *testing.T, open func() *Tree[uint32, uint32]) {
	ctx := context.Background()
	tr := open()
	const n = 3000
	keys, vals := make([]uint32, n+n/2), make([]uint32, n+n/2)
	for i := range keys { // distinct (an odd multiplier is a bijection), in no key order
		keys[i], vals[i] = uint32(i)*2654435761+99, uint32(i)^0x5bd1e995
	}
	insert := func(lo, hi int) (rounds int64) {
		before := tr.gpu.rounds.Load()
		if err := tr.Insert(ctx, keys[lo:hi], vals[lo:hi]); err != nil {
			t.Fatal(err)
		}
		return tr.gpu.rounds.Load() - before
	}
	holds := func(what string, m int) {
		t.Helper()
		got, found := make([]uint32, len(keys)), make([]bool, len(keys))
		if err := tr.Lookup(ctx, keys, got, found); err != nil {
			t.Fatal(err)
		}
		for i := range keys {
			if found[i] != (i < m) || found[i] && got[i] != vals[i] {
				t.Fatalf("%s: key %d of %d: found %v value %#x, want found %v value %#x", what, i, len(keys), found[i], got[i], i < m, vals[i])
			}
		}
	}
	if r := insert(0, n); r == 0 {
		t.Fatalf("%d keys into an empty tree ran in one launch", n)
	}
	holds("after a batch in rounds", n)
	if r := insert(n, len(keys)); r != 0 {
		t.Fatalf("%d keys into a tree of %d ran in %d launches", len(keys)-n, n, r+1)
	}
	holds("after a batch in one launch", len(keys))
	if err := tr.Check(ctx); err != nil {
		t.Fatal(err)
	}
	// A fresh tree built: its nodes count.
	tr = open()
	if err := tr.Build(ctx, keys[:n], vals[:n]); err != nil {
		t.Fatal(err)
	}
	if r := insert(n, len(keys)); r != 0 {
		t.Fatalf("%d keys into a built tree of %d ran in %d launches", len(keys)-n, n, r+1)
	}
	holds("after Build and a batch", len(keys))
}

func TestGPUInsertRounds(t *testing.T) {
	dev := gputest.Device(t)
	testInsertRounds(t, func() *Tree[uint32, uint32] { return newGPUTree[uint32, uint32](t, dev, Options{}) })
}

// TestGPUReplaceInFullLeaves: replacing values in full leaves needs no room
// (the leaf is not split first), so a batch of pure updates succeeds in a pool
// at its cap, while a new key still fails with ErrPoolExhausted.
func TestGPUReplaceInFullLeaves(t *testing.T) {
	testReplaceInFullLeaves(t, newGPUTree[uint32, uint32](t, gputest.Device(t), Options{InitialNodes: 3, MaxNodes: 3}))
}

// testReplaceInFullLeaves fills a pool of three nodes (a root over two full
// leaves), then replaces every value, in one batch and through Apply.
func testReplaceInFullLeaves(t *testing.T, tr *Tree[uint32, uint32]) {
	t.Helper()
	ctx := context.Background()
	// 10..140 fill the root leaf; 150, alone, splits it: left 10..70, right
	// 80..150 (one batch of all 15 would split whichever 14 came first).
	// Then 11..17 and 81..86 fill both leaves to 14 pairs.
	var ks []uint32
	for k := uint32(10); k <= 140; k += 10 {
		ks = append(ks, k)
	}
	if err := tr.Insert(ctx, ks, ks); err != nil {
		t.Fatalf("setup, 10..140: %v", err)
	}
	if err := tr.Insert(ctx, []uint32{150}, []uint32{150}); err != nil {
		t.Fatalf("setup, 150: %v", err)
	}
	ks = append(ks, 150)
	var more []uint32
	for k := uint32(11); k <= 17; k++ {
		more = append(more, k)
	}
	for k := uint32(81); k <= 86; k++ {
		more = append(more, k)
	}
	if err := tr.Insert(ctx, more, more); err != nil {
		t.Fatalf("setup, filling the leaves: %v", err)
	}
	ks = append(ks, more...)
	st, err := tr.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Nodes != 3 || st.Height != 2 {
		t.Fatalf("setup: %d nodes, height %d; want a root over two full leaves", st.Nodes, st.Height)
	}
	if err := tr.Insert(ctx, []uint32{1000}, []uint32{1}); !errors.Is(err, warpkit.ErrPoolExhausted) {
		t.Fatalf("a new key in a full pool: %v", err)
	}
	vs := make([]uint32, len(ks))
	for i, k := range ks {
		vs[i] = k * 3
	}
	if err := tr.Insert(ctx, ks, vs); err != nil {
		t.Fatalf("replacing values in full leaves: %v", err)
	}
	ops := Ops[uint32, uint32]{Kinds: make([]OpKind, len(ks)), Keys: ks, Vals: make([]uint32, len(ks))}
	for i, k := range ks {
		ops.Kinds[i], ops.Vals[i] = OpInsert, k*5
	}
	if err := tr.Apply(ctx, ops, Results[uint32, uint32]{}); err != nil {
		t.Fatalf("replacing values in full leaves through Apply: %v", err)
	}
	got, found := make([]uint32, len(ks)), make([]bool, len(ks))
	if err := tr.Lookup(ctx, ks, got, found); err != nil {
		t.Fatal(err)
	}
	for i, k := range ks {
		if !found[i] || got[i] != k*5 {
			t.Fatalf("key %d: (%d, %v), want %d", k, got[i], found[i], k*5)
		}
	}
	if st, err := tr.Stats(ctx); err != nil || st.Nodes != 3 || st.Keys != len(ks) {
		t.Fatalf("after the updates: %+v %v", st, err)
	}
}
