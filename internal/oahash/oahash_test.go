package oahash

import (
	"errors"
	"testing"

	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/errs"
	"github.com/warpkit/warpkit/internal/gputest"
	"github.com/warpkit/warpkit/internal/kernelgen/ptxcheck"
)

func TestPTXUpToDate(t *testing.T) { ptxcheck.Check(t, "oahash.ptx") }

func TestGPUInsertFind(t *testing.T) {
	dev := gputest.Device(t)
	const n = 1 << 16
	tab, err := New(dev, n*2)
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	keys := make([]uint32, 0, 2*n)
	for i := uint32(0); len(keys) < 2*n; i++ {
		keys = append(keys, i*2654435761)
	}
	vals := make([]uint32, n)
	for i := range vals {
		vals[i] = uint32(i) + 1
	}
	dk, _ := cuda.FromHost(dev, keys[:n])
	dv, _ := cuda.FromHost(dev, vals)
	defer dk.Free()
	defer dv.Free()
	if err := tab.Insert(dk, dv); err != nil {
		t.Fatal(err)
	}
	q, _ := cuda.FromHost(dev, keys)
	out, _ := cuda.Alloc[uint32](dev, 2*n)
	defer q.Free()
	defer out.Free()
	if err := tab.Find(q, out); err != nil {
		t.Fatal(err)
	}
	got, _ := out.ToHost()
	for i, v := range got {
		want := Absent
		if i < n {
			want = vals[i]
		}
		if v != want {
			t.Fatalf("key %d: %#x, want %#x", i, v, want)
		}
	}
	small, err := New(dev, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	if err := small.Insert(dk.Sub(0, 9), dv.Sub(0, 9)); !errors.Is(err, errs.ErrRetryLimit) {
		t.Fatalf("overfull table: %v", err)
	}
}

// TestGPUApply runs a mixed batch (finds, deletes, inserts of new keys and
// replaces) on a built table and checks every result, then that deleted keys
// are gone and inserted ones there.
func TestGPUApply(t *testing.T) {
	dev := gputest.Device(t)
	const n = 1 << 14
	tab, err := New(dev, 4*n)
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	key := func(i int) uint32 { return uint32(i) * 2654435761 }
	keys, vals := make([]uint32, n), make([]uint32, n)
	for i := range keys {
		keys[i], vals[i] = key(i), uint32(i)+1
	}
	dk, _ := cuda.FromHost(dev, keys)
	dv, _ := cuda.FromHost(dev, vals)
	defer dk.Free()
	defer dv.Free()
	if err := tab.Insert(dk, dv); err != nil {
		t.Fatal(err)
	}
	// Element j: j%5 = 0 find present, 1 find absent, 2 delete present,
	// 3 insert new, 4 replace present. Every key appears once.
	var ops []uint8
	var mk, mv []uint32
	var want []uint8
	for j := 0; j < n; j++ {
		switch j % 5 {
		case 0:
			ops, mk, mv, want = append(ops, 0), append(mk, key(j)), append(mv, 0), append(want, 1)
		case 1:
			ops, mk, mv, want = append(ops, 0), append(mk, key(n+j)), append(mv, 0), append(want, 0)
		case 2:
			ops, mk, mv, want = append(ops, 2), append(mk, key(j)), append(mv, 0), append(want, 4)
		case 3:
			ops, mk, mv, want = append(ops, 1), append(mk, key(2*n+j)), append(mv, 7), append(want, 2)
		case 4:
			ops, mk, mv, want = append(ops, 1), append(mk, key(j)), append(mv, 9), append(want, 3)
		}
	}
	do, _ := cuda.FromHost(dev, ops)
	dmk, _ := cuda.FromHost(dev, mk)
	dmv, _ := cuda.FromHost(dev, mv)
	dr, _ := cuda.Alloc[uint8](dev, n)
	defer do.Free()
	defer dmk.Free()
	defer dmv.Free()
	defer dr.Free()
	if err := tab.Apply(do, dmk, dmv, dr); err != nil {
		t.Fatal(err)
	}
	res, _ := dr.ToHost()
	got, _ := dmv.ToHost()
	for j := range res {
		if res[j] != want[j] {
			t.Fatalf("element %d (op %d): result %d, want %d", j, ops[j], res[j], want[j])
		}
		if j%5 == 0 && got[j] != uint32(j)+1 {
			t.Fatalf("element %d: found %d, want %d", j, got[j], j+1)
		}
	}
	// Afterwards: deleted keys absent, new keys and replaced values there.
	out, _ := cuda.Alloc[uint32](dev, n)
	defer out.Free()
	if err := tab.Find(dmk, out); err != nil {
		t.Fatal(err)
	}
	after, _ := out.ToHost()
	for j, v := range after {
		w := map[int]uint32{0: uint32(j) + 1, 1: Absent, 2: Absent, 3: 7, 4: 9}[j%5]
		if v != w {
			t.Fatalf("after the batch, element %d's key holds %#x, want %#x", j, v, w)
		}
	}
	if err := tab.Apply(do, dmk, dmv.Sub(0, 1), dr); !errors.Is(err, errs.ErrInvalidArgument) {
		t.Fatalf("mismatched lengths: %v", err)
	}
}
