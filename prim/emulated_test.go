package prim

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/emu"
)

// TestEmulatedDevice: on an emulated device (no prim kernel runs there) every
// operation runs its host twin on the device memory, so that structures
// whose CUDA backends use prim can be tested on the emulation.
func TestEmulatedDevice(t *testing.T) {
	dev := emu.Device(t, emu.Options{})
	e, err := NewEngine(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	r := rand.New(rand.NewPCG(1, 2))
	const n = 1000
	keys, vals, flags := make([]uint64, n), make([]uint32, n), make([]uint8, n)
	for i := range keys {
		keys[i], vals[i], flags[i] = r.Uint64()%97, uint32(i), uint8(r.IntN(2))
	}
	dk, _ := cuda.FromHost(dev, keys)
	dv, _ := cuda.FromHost(dev, vals)
	if err := SortPairs(e, nil, dk, dv, SortOptions{}); err != nil {
		t.Fatal(err)
	}
	wk, wv := slices.Clone(keys), slices.Clone(vals)
	SortPairsHost(wk, wv, SortOptions{})
	if gk, _ := dk.ToHost(); !slices.Equal(gk, wk) {
		t.Fatal("SortPairs keys differ from the host twin")
	}
	if gv, _ := dv.ToHost(); !slices.Equal(gv, wv) {
		t.Fatal("SortPairs values differ from the host twin")
	}

	df, _ := cuda.FromHost(dev, flags)
	sk, _ := cuda.Alloc[uint64](dev, n)
	sv, _ := cuda.Alloc[uint32](dev, n)
	cnt, _ := cuda.Alloc[uint32](dev, 1)
	dk.CopyFromHost(keys)
	dv.CopyFromHost(vals)
	if err := SelectFlaggedPairs(e, nil, dk, dv, df, sk, sv, cnt); err != nil {
		t.Fatal(err)
	}
	ok, ov := make([]uint64, n), make([]uint32, n)
	m := SelectFlaggedPairsHost(keys, vals, flags, ok, ov)
	gc, _ := cnt.ToHost()
	gk, _ := sk.ToHost()
	if int(gc[0]) != m || !slices.Equal(gk[:m], ok[:m]) {
		t.Fatalf("SelectFlaggedPairs: %d selected, want %d", gc[0], m)
	}

	in, _ := cuda.FromHost(dev, vals)
	out, _ := cuda.Alloc[uint32](dev, n)
	tot, _ := cuda.Alloc[uint32](dev, 1)
	if err := ExclusiveScan(e, nil, in, out, tot); err != nil {
		t.Fatal(err)
	}
	want := make([]uint32, n)
	sum := ExclusiveScanHost(vals, want)
	if g, _ := out.ToHost(); !slices.Equal(g, want) {
		t.Fatal("ExclusiveScan differs from the host twin")
	}
	if g, _ := tot.ToHost(); g[0] != sum {
		t.Fatalf("scan total %d, want %d", g[0], sum)
	}

	a, b := []uint32{1, 3, 5, 7}, []uint32{2, 3, 6}
	da, _ := cuda.FromHost(dev, a)
	db, _ := cuda.FromHost(dev, b)
	dm, _ := cuda.Alloc[uint32](dev, 7)
	if err := MergeKeys(e, nil, da, db, dm, MergeOptions[uint32]{}); err != nil {
		t.Fatal(err)
	}
	if g, _ := dm.ToHost(); !slices.Equal(g, []uint32{1, 2, 3, 3, 5, 6, 7}) {
		t.Fatalf("MergeKeys = %v", g)
	}
}
