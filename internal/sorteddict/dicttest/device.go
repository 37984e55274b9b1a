package dicttest

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
)

// DeviceDict is the device-resident API both dictionaries offer.
type DeviceDict[K, V warpkit.Word] interface {
	Dict[K, V]
	UpdateDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V], dels cuda.Slice[uint8]) error
	InsertDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V]) error
	DeleteDevice(ctx context.Context, keys cuda.Slice[K]) error
	LookupDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V], found cuda.Slice[uint8]) error
	CountDevice(ctx context.Context, lo, hi cuda.Slice[K], counts cuda.Slice[uint32]) error
	RangeDevice(ctx context.Context, lo, hi cuda.Slice[K]) (*warpkit.DeviceRanges[K, V], error)
	SuccessorDevice(ctx context.Context, keys, outKeys cuda.Slice[K], outVals cuda.Slice[V], found cuda.Slice[uint8]) error
	PredecessorDevice(ctx context.Context, keys, outKeys cuda.Slice[K], outVals cuda.Slice[V], found cuda.Slice[uint8]) error
}

// FromHost copies h to a new device slice freed at the end of the test.
func FromHost[T cuda.Elem](t testing.TB, dev *cuda.Device, h []T) cuda.Slice[T] {
	t.Helper()
	s, err := cuda.FromHost(dev, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Free() })
	return s
}

// Alloc allocates n device elements freed at the end of the test, filled
// with the byte 0xa5 so that an output a query leaves unwritten shows.
func Alloc[T cuda.Elem](t testing.TB, dev *cuda.Device, n int) cuda.Slice[T] {
	t.Helper()
	s, err := cuda.Alloc[T](dev, n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Free() })
	// The dictionaries' streams do not wait for the legacy stream: finish
	// the fill before they run.
	if err := errors.Join(s.FillBytes(0xa5, nil), dev.Synchronize()); err != nil {
		t.Fatal(err)
	}
	return s
}

// ToHost copies a device slice to the host.
func ToHost[T cuda.Elem](t testing.TB, s cuda.Slice[T]) []T {
	t.Helper()
	h, err := s.ToHost()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func flags(b []bool) []uint8 {
	f := make([]uint8, len(b))
	for i, v := range b {
		if v {
			f[i] = 1
		}
	}
	return f
}

// DeviceRun applies mixed, insert-only and delete-only batches through the
// device-resident methods and checks every device-resident query kind
// against the oracle.
func DeviceRun[K, V warpkit.Word](t *testing.T, dev *cuda.Device, d DeviceDict[K, V], seed uint64) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 2))
	w := Workload{Space: 500, DeleteFrac: 0.3}
	o := NewOracle[K, V]()
	for range 10 {
		keys, vals, dels := Batch[K, V](rng, w, 100)
		if err := d.UpdateDevice(ctx, FromHost(t, dev, keys), FromHost(t, dev, vals), FromHost(t, dev, flags(dels))); err != nil {
			t.Fatal(err)
		}
		o.Apply(keys, vals, dels)
	}
	ins, insV, _ := Batch[K, V](rng, w, 50)
	if err := d.InsertDevice(ctx, FromHost(t, dev, ins), FromHost(t, dev, insV)); err != nil {
		t.Fatal(err)
	}
	o.Apply(ins, insV, nil)
	del, _, _ := Batch[K, V](rng, w, 50)
	if err := d.DeleteDevice(ctx, FromHost(t, dev, del)); err != nil {
		t.Fatal(err)
	}
	all := make([]bool, len(del))
	for i := range all {
		all[i] = true
	}
	o.Apply(del, make([]V, len(del)), all)

	q := Queries(rng, w, o, 300)
	dq := FromHost(t, dev, q)
	vals, found, keys := Alloc[V](t, dev, len(q)), Alloc[uint8](t, dev, len(q)), Alloc[K](t, dev, len(q))
	if err := d.LookupDevice(ctx, dq, vals, found); err != nil {
		t.Fatal(err)
	}
	hv, hf := ToHost(t, vals), ToHost(t, found)
	for i, k := range q {
		if v, ok := o.Lookup(k); (hf[i] == 1) != ok || hv[i] != v {
			t.Fatalf("lookup(%#x) = %#x, %d; want %#x, %v", k, hv[i], hf[i], v, ok)
		}
	}
	for _, succ := range []bool{true, false} {
		f, want := d.SuccessorDevice, o.Successor
		if !succ {
			f, want = d.PredecessorDevice, o.Predecessor
		}
		if err := f(ctx, dq, keys, vals, found); err != nil {
			t.Fatal(err)
		}
		hk, hv, hf := ToHost(t, keys), ToHost(t, vals), ToHost(t, found)
		for i, k := range q {
			if wk, wv, wf := want(k); (hf[i] == 1) != wf || hk[i] != wk || hv[i] != wv {
				t.Fatalf("succ=%v (%#x) = %#x, %#x, %d; want %#x, %#x, %v", succ, k, hk[i], hv[i], hf[i], wk, wv, wf)
			}
		}
	}
	hi := make([]K, len(q))
	for i, k := range q {
		hi[i] = k + rangeWidth[K](w, uint64(rng.IntN(20)))
		if hi[i] < k {
			hi[i] = Max[K]()
		}
	}
	dh := FromHost(t, dev, hi)
	counts := Alloc[uint32](t, dev, len(q))
	if err := d.CountDevice(ctx, dq, dh, counts); err != nil {
		t.Fatal(err)
	}
	dr, err := d.RangeDevice(ctx, dq, dh)
	if err != nil {
		t.Fatal(err)
	}
	defer dr.Free()
	rr, err := dr.ToHost()
	if err != nil {
		t.Fatal(err)
	}
	hc := ToHost(t, counts)
	for i := range q {
		want := o.Range(q[i], hi[i])
		if int(hc[i]) != len(want) || rr.Count(i) != len(want) {
			t.Fatalf("count/range(%#x, %#x) = %d, %d; want %d", q[i], hi[i], hc[i], rr.Count(i), len(want))
		}
		j := 0
		for k, v := range rr.Query(i) {
			if wv, _ := o.Lookup(want[j]); k != want[j] || v != wv {
				t.Fatalf("range(%#x, %#x)[%d] = %#x, %#x; want %#x, %#x", q[i], hi[i], j, k, v, want[j], wv)
			}
			j++
		}
	}
}

// OutOfMemory fills the device, checks that a large device-resident update
// fails with ErrOutOfMemory and leaves the dictionary answering as before,
// and that the update succeeds once the memory is back. shape describes the
// dictionary's state (it must not change across the failed update).
func OutOfMemory[K, V warpkit.Word](t *testing.T, dev *cuda.Device, d DeviceDict[K, V], shape func() string) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 6))
	w := Workload{Space: 1 << 20, DeleteFrac: 0.1}
	o := NewOracle[K, V]()
	for range 3 {
		keys, vals, dels := Batch[K, V](rng, w, 1<<12)
		if err := d.Update(ctx, keys, vals, dels); err != nil {
			t.Fatal(err)
		}
		o.Apply(keys, vals, dels)
	}
	Check(t, ctx, d, o, rng, w, 500) // also warms the query streams' scratch
	before := shape()
	keys, vals, dels := Batch[K, V](rng, w, 1<<24)
	dk, dv, df := FromHost(t, dev, keys), FromHost(t, dev, vals), FromHost(t, dev, flags(dels))
	free, _, err := dev.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	hog, err := cuda.Alloc[uint8](dev, int(free)-(192<<20))
	if err != nil {
		t.Skipf("cannot take the device's free memory: %v", err)
	}
	t.Cleanup(func() { hog.Free() }) // freeing twice is harmless
	err = d.UpdateDevice(ctx, dk, dv, df)
	if !errors.Is(err, warpkit.ErrOutOfMemory) {
		t.Fatalf("update with the device full: %v, want ErrOutOfMemory", err)
	}
	if after := shape(); after != before {
		t.Fatalf("failed update changed the shape: %s -> %s", before, after)
	}
	Check(t, ctx, d, o, rng, w, 500)
	hog.Free()
	if err := d.UpdateDevice(ctx, dk, dv, df); err != nil {
		t.Fatal(err)
	}
	o.Apply(keys, vals, dels)
	Check(t, ctx, d, o, rng, w, 500)
}
