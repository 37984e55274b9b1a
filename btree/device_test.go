package btree

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/gputest"
)

// deviceChecker compares the device-resident query methods (LookupDevice,
// SuccessorDevice, PredecessorDevice, CountDevice) of a GPU tree element by
// element with the CPU backend holding the same pairs. Inputs go up and results
// come down through onDevice and onHost.
type deviceChecker[K, V warpkit.Word] struct {
	t            *testing.T
	ctx          context.Context
	dev          *cuda.Device
	subj, oracle *Tree[K, V]
}

// flag reports whether a device found flag is set, failing on anything but 0
// or 1 (the documented values).
func (c *deviceChecker[K, V]) flag(what string, i int, f uint8) bool {
	c.t.Helper()
	if f > 1 {
		c.t.Fatalf("%s: found[%d] = %d, want 0 or 1", what, i, f)
	}
	return f == 1
}

func (c *deviceChecker[K, V]) check(what string, qs []K) {
	c.t.Helper()
	ctx, n := c.ctx, len(qs)
	must := func(err error) {
		c.t.Helper()
		if err != nil {
			c.t.Fatalf("%s: %v", what, err)
		}
	}
	// Outputs start as garbage so that a result the kernel did not write shows.
	junk := uint64(0x5a5a5a5a5a5a5a5a)
	junkK, junkV, junkF := make([]K, n), make([]V, n), make([]uint8, n)
	for i := range junkK {
		junkK[i], junkV[i], junkF[i] = K(junk), V(^junk), 0xee
	}
	dq := onDevice(c.t, c.dev, qs)

	dv, df := onDevice(c.t, c.dev, junkV), onDevice(c.t, c.dev, junkF)
	must(c.subj.LookupDevice(ctx, dq, dv, df))
	gv, gf := onHost(c.t, dv), onHost(c.t, df)
	wv, wf := make([]V, n), make([]bool, n)
	must(c.oracle.Lookup(ctx, qs, wv, wf))
	for i, q := range qs {
		if c.flag(what+": lookup", i, gf[i]) != wf[i] || gv[i] != wv[i] {
			c.t.Fatalf("%s: LookupDevice %d (#%d of %d) = (%d, %d), oracle (%d, %v)", what, q, i, n, gv[i], gf[i], wv[i], wf[i])
		}
	}

	for _, pred := range []bool{false, true} {
		dk, dv, df := onDevice(c.t, c.dev, junkK), onDevice(c.t, c.dev, junkV), onDevice(c.t, c.dev, junkF)
		wk := make([]K, n)
		if pred {
			must(c.subj.PredecessorDevice(ctx, dq, dk, dv, df))
			must(c.oracle.Predecessor(ctx, qs, wk, wv, wf))
		} else {
			must(c.subj.SuccessorDevice(ctx, dq, dk, dv, df))
			must(c.oracle.Successor(ctx, qs, wk, wv, wf))
		}
		gk, gv, gf := onHost(c.t, dk), onHost(c.t, dv), onHost(c.t, df)
		for i, q := range qs {
			if c.flag(what+": neighbor", i, gf[i]) != wf[i] || gk[i] != wk[i] || gv[i] != wv[i] {
				c.t.Fatalf("%s: neighbor device (pred=%v) of %d (#%d of %d) = (%d, %d, %d), oracle (%d, %d, %v)",
					what, pred, q, i, n, gk[i], gv[i], gf[i], wk[i], wv[i], wf[i])
			}
		}
	}

	// Counts over [q, q+span) for a few spans (span 0: empty), inverted
	// intervals and intervals to the top of the key range (a few: they walk
	// every leaf to the end).
	var top K
	top--
	hi := make([]K, n)
	for i, q := range qs {
		switch {
		case i%5 == 0:
			hi[i] = q - 1 // lo > hi unless q is 0
		case i%5 == 1 && i < 64:
			hi[i] = top
		default:
			hi[i] = q + K(i%97)*(top/K(1<<20)+1)
			if hi[i] < q {
				hi[i] = top
			}
		}
	}
	junkC := make([]uint32, n)
	for i := range junkC {
		junkC[i] = 0xdeadbeef
	}
	dh, dc := onDevice(c.t, c.dev, hi), onDevice(c.t, c.dev, junkC)
	must(c.subj.CountDevice(ctx, dq, dh, dc))
	gc, wc := onHost(c.t, dc), make([]uint32, n)
	must(c.oracle.Count(ctx, qs, hi, wc))
	for i := range qs {
		if gc[i] != wc[i] {
			c.t.Fatalf("%s: CountDevice [%d, %d) (#%d of %d) = %d, oracle %d", what, qs[i], hi[i], i, n, gc[i], wc[i])
		}
	}
}

// markWriter makes the tree's query batches run validated (as when a writer
// runs beside them) until the returned function is called.
func markWriter[K, V warpkit.Word](t *testing.T, g *gpuTree[K, V]) func() {
	g.phase.BeginWrite()
	if fast := g.phase.BeginQuery(); fast {
		t.Fatal("a query joined as phased while a writer was marked")
	}
	return g.phase.EndWrite
}

// TestGPUDeviceMethods checks the device-resident methods against the CPU
// backend on the same data: LookupDevice, SuccessorDevice, PredecessorDevice
// and CountDevice in each query mode (phased, phased with device-sorted
// batches, validated), element by element; InsertDevice and DeleteDevice by
// the whole contents and Len afterwards. newGPUTree runs the structural
// checker at the end.
func TestGPUDeviceMethods(t *testing.T) {
	dev := gputest.Device(t)
	t.Run("u32u32", func(t *testing.T) { testDeviceMethods[uint32, uint32](t, dev, 31) })
	t.Run("u64u64", func(t *testing.T) { testDeviceMethods[uint64, uint64](t, dev, 32) })
	t.Run("u32u64", func(t *testing.T) { testDeviceMethods[uint32, uint64](t, dev, 33) })
	t.Run("u64u32", func(t *testing.T) { testDeviceMethods[uint64, uint32](t, dev, 34) })
}

func testDeviceMethods[K, V warpkit.Word](t *testing.T, dev *cuda.Device, seed uint64) {
	for _, sortMode := range []int{0, 1} {
		t.Run(fmt.Sprintf("sort=%v", sortMode > 0), func(t *testing.T) {
			tr := newGPUTree[K, V](t, dev, Options{SortQueries: sortMode, InitialNodes: 64})
			d := newDiffer(t, tr, seed+uint64(sortMode)*100)
			c := &deviceChecker[K, V]{t: t, ctx: d.ctx, dev: dev, subj: tr, oracle: d.oracle}
			r := rand.New(rand.NewPCG(seed, uint64(sortMode)))

			c.check("empty tree", queryBatch[K](r, nil, 100, false))

			// Grow the tree from empty with InsertDevice (splits, pool growth),
			// replace some values, then delete with DeleteDevice.
			for round := range 6 {
				d.round = round
				n := 1 + r.IntN(20000)
				ks := d.keys(n)
				if round%2 == 1 {
					ks = d.present(n) // many replacements of stored keys
				}
				vs := make([]V, n)
				for i, k := range ks {
					vs[i] = d.value(k) // a key repeated in the batch carries one value
				}
				d.must(tr.InsertDevice(d.ctx, onDevice(t, dev, ks), onDevice(t, dev, vs)), "InsertDevice")
				d.must(d.oracle.Insert(d.ctx, ks, vs), "oracle insert")
				d.compareAll()
				if round%3 == 2 {
					del := d.present(1 + r.IntN(8000))
					d.must(tr.DeleteDevice(d.ctx, onDevice(t, dev, del)), "DeleteDevice")
					d.must(d.oracle.Delete(d.ctx, del), "oracle delete")
					d.compareAll()
				}
			}
			// Empty batches are no-ops.
			d.must(tr.InsertDevice(d.ctx, cuda.Slice[K]{}, cuda.Slice[V]{}), "empty InsertDevice")
			d.must(tr.DeleteDevice(d.ctx, cuda.Slice[K]{}), "empty DeleteDevice")
			d.must(tr.LookupDevice(d.ctx, cuda.Slice[K]{}, cuda.Slice[V]{}, cuda.Slice[uint8]{}), "empty LookupDevice")
			d.compareAll()

			ks := d.contents(d.oracle).keys
			for _, b := range []int{1, 9, 17, 3000} {
				c.check(fmt.Sprintf("phased, batch %d", b), queryBatch(r, ks, b, false))
			}
			c.check("phased, sorted batch", queryBatch(r, ks, 3000, true))
			release := markWriter(t, tr.gpu)
			for _, b := range []int{1, 9, 3000} {
				c.check(fmt.Sprintf("validated, batch %d", b), queryBatch(r, ks, b, b > 1000))
			}
			release()

			// Delete a contiguous run of stored keys (empty leaves in a row) and
			// query around them.
			if len(ks) > 300 {
				run := ks[len(ks)/3 : len(ks)/3+len(ks)/4]
				d.must(tr.DeleteDevice(d.ctx, onDevice(t, dev, run)), "DeleteDevice of a run")
				d.must(d.oracle.Delete(d.ctx, run), "oracle delete")
				d.compareAll()
				c.check("after deleting a run", queryBatch(r, ks, 3000, false))
			}
			if err := tr.Check(d.ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestGPUDeviceUpdatesMatchHost runs the same insert and delete batches
// through InsertDevice/DeleteDevice on one GPU tree and Insert/Delete on
// another: both must end with the same pairs as the CPU backend.
func TestGPUDeviceUpdatesMatchHost(t *testing.T) {
	dev := gputest.Device(t)
	ctx := context.Background()
	viaDevice := newGPUTree[uint64, uint64](t, dev, Options{InitialNodes: 16})
	viaHost := newGPUTree[uint64, uint64](t, dev, Options{InitialNodes: 16})
	d := newDiffer(t, viaDevice, 41)
	for round := range 8 {
		d.round = round
		n := 1 + d.r.IntN(30000)
		ks := d.keys(n)
		vs := make([]uint64, n)
		for i, k := range ks {
			vs[i] = d.value(k)
		}
		d.must(viaDevice.InsertDevice(ctx, onDevice(t, dev, ks), onDevice(t, dev, vs)), "InsertDevice")
		d.must(viaHost.Insert(ctx, ks, vs), "Insert")
		d.must(d.oracle.Insert(ctx, ks, vs), "oracle insert")
		del := d.present(1 + d.r.IntN(10000))
		d.must(viaDevice.DeleteDevice(ctx, onDevice(t, dev, del)), "DeleteDevice")
		d.must(viaHost.Delete(ctx, del), "Delete")
		d.must(d.oracle.Delete(ctx, del), "oracle delete")
	}
	d.compareAll()
	a, b := d.contents(viaDevice), d.contents(viaHost)
	if !slices.Equal(a.keys, b.keys) || !slices.Equal(a.vals, b.vals) {
		t.Fatalf("device and host batches left different trees: %s", firstDiff(a, b))
	}
}
