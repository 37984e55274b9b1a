package btree

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/gputest"
)

// Benchmarks on a bulk-built tree of benchKeys 32-bit keys, device-resident
// batches (go test -bench GPU); `warp bench btree` runs the full set of the
// paper's experiments.
const benchKeys = 1 << 22

type benchTree struct {
	t      *Tree[uint32, uint32]
	sorted []uint32
	keys   cuda.Slice[uint32] // every key, random order
	vals   cuda.Slice[uint32]
	found  cuda.Slice[uint8]
}

func newBenchTree(b *testing.B) *benchTree {
	dev := gputest.Device(b)
	t, err := New[uint32, uint32](Options{Backend: warpkit.CUDA, Device: dev})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { t.Close() })
	r := rand.New(rand.NewPCG(1, 1))
	set := make(map[uint32]bool, benchKeys)
	for len(set) < benchKeys {
		set[r.Uint32()] = true
	}
	keys := make([]uint32, 0, benchKeys)
	for k := range set {
		keys = append(keys, k)
	}
	if err := t.Build(context.Background(), keys, keys); err != nil {
		b.Fatal(err)
	}
	bt := &benchTree{t: t, sorted: slices.Sorted(func(yield func(uint32) bool) {
		for _, k := range keys {
			if !yield(k) {
				return
			}
		}
	})}
	for _, s := range []*cuda.Slice[uint32]{&bt.keys, &bt.vals} {
		if *s, err = cuda.Alloc[uint32](dev, benchKeys); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Free() })
	}
	if bt.found, err = cuda.Alloc[uint8](dev, benchKeys); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bt.found.Free() })
	if err := bt.keys.CopyFromHost(keys); err != nil {
		b.Fatal(err)
	}
	return bt
}

func report(b *testing.B, ops int) {
	b.ReportMetric(float64(ops)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gops/s")
}

func BenchmarkGPULookup(b *testing.B) {
	bt := newBenchTree(b)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		if err := bt.t.LookupDevice(ctx, bt.keys, bt.vals, bt.found); err != nil {
			b.Fatal(err)
		}
	}
	report(b, benchKeys)
}

func BenchmarkGPUSuccessor(b *testing.B) {
	bt := newBenchTree(b)
	ctx := context.Background()
	out, err := cuda.Alloc[uint32](gputest.Device(b), benchKeys)
	if err != nil {
		b.Fatal(err)
	}
	defer out.Free()
	b.ResetTimer()
	for range b.N {
		if err := bt.t.SuccessorDevice(ctx, bt.keys, out, bt.vals, bt.found); err != nil {
			b.Fatal(err)
		}
	}
	report(b, benchKeys)
}

func BenchmarkGPURange8(b *testing.B) {
	bt := newBenchTree(b)
	ctx := context.Background()
	dev := gputest.Device(b)
	q := benchKeys
	lo, hi, offs := make([]uint32, q), make([]uint32, q), make([]uint32, q+1)
	r := rand.New(rand.NewPCG(2, 2))
	for i := range lo {
		p := r.IntN(len(bt.sorted) - 8)
		lo[i], hi[i], offs[i] = bt.sorted[p], bt.sorted[p+7], uint32(8*i)
	}
	offs[q] = uint32(8 * q)
	dl, _ := cuda.FromHost(dev, lo)
	dh, _ := cuda.FromHost(dev, hi)
	do, _ := cuda.FromHost(dev, offs)
	ok, _ := cuda.Alloc[uint32](dev, 8*q)
	ov, _ := cuda.Alloc[uint32](dev, 8*q)
	dc, _ := cuda.Alloc[uint32](dev, q)
	for _, s := range []cuda.Slice[uint32]{dl, dh, do, ok, ov, dc} {
		defer s.Free()
	}
	b.ResetTimer()
	for range b.N {
		if err := bt.t.RangeDevice(ctx, dl, dh, do, ok, ov, dc); err != nil {
			b.Fatal(err)
		}
	}
	report(b, q)
}

func BenchmarkGPUInsert(b *testing.B) {
	dev := gputest.Device(b)
	ctx := context.Background()
	const batch = 1 << 20
	r := rand.New(rand.NewPCG(3, 3))
	keys := make([]uint32, batch)
	for i := range keys {
		keys[i] = r.Uint32()
	}
	dk, err := cuda.FromHost(dev, keys)
	if err != nil {
		b.Fatal(err)
	}
	defer dk.Free()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		t, err := New[uint32, uint32](Options{Backend: warpkit.CUDA, Device: dev, InitialNodes: batch})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := t.InsertDevice(ctx, dk, dk); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		t.Close()
		b.StartTimer()
	}
	report(b, batch)
}

func BenchmarkGPUMixedAlpha06(b *testing.B) {
	bt := newBenchTree(b)
	ctx := context.Background()
	dev := gputest.Device(b)
	n := benchKeys
	r := rand.New(rand.NewPCG(4, 4))
	kinds, keys := make([]uint8, n), make([]uint32, n)
	for i := range kinds {
		p := r.IntN(len(bt.sorted) - 8)
		keys[i] = bt.sorted[p]
		switch {
		case r.Float64() < 0.3:
			kinds[i], keys[i] = uint8(OpInsert), r.Uint32()
		case r.Float64() < 0.43:
			kinds[i] = uint8(OpDelete)
		default:
			kinds[i] = uint8(r.IntN(2)) * uint8(OpSuccessor) // lookup or successor
		}
	}
	var ops DeviceOps[uint32, uint32]
	ops.Kinds, _ = cuda.FromHost(dev, kinds)
	ops.Keys, _ = cuda.FromHost(dev, keys)
	ops.Vals = ops.Keys
	res := DeviceResults[uint32, uint32]{Found: bt.found, Vals: bt.vals}
	defer ops.Kinds.Free()
	defer ops.Keys.Free()
	b.ResetTimer()
	for range b.N {
		if err := bt.t.ApplyDevice(ctx, ops, res); err != nil {
			b.Fatal(err)
		}
	}
	report(b, n)
}
