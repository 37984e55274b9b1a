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
