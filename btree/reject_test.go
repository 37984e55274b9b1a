package btree

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/internal/gputest"
)

// TestGPUApplyDeviceRejectsUnknownKinds passes mixed batches holding a kind
// above OpCount: ApplyDevice must fail with ErrInvalidArgument, apply none of
// the batch's inserts and deletes, and write no result. The same batch with the
// kind fixed then runs, so a rejection does not stick to the lane.
func TestGPUApplyDeviceRejectsUnknownKinds(t *testing.T) {
	dev := gputest.Device(t)
	ctx := context.Background()
	tr := newGPUTree[uint32, uint32](t, dev, Options{Streams: 1})
	base := make([]uint32, 5000)
	for i := range base {
		base[i] = uint32(i) * 4
	}
	if err := tr.Build(ctx, base, base); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		n, bad int
		kind   uint8
	}{{1, 0, 6}, {64, 0, 255}, {64, 63, 7}, {50000, 31337, 6}, {50000, 49999, 200}} {
		t.Run(fmt.Sprintf("n=%d/at=%d/kind=%d", tc.n, tc.bad, tc.kind), func(t *testing.T) {
			kinds, keys, vals := make([]uint8, tc.n), make([]uint32, tc.n), make([]uint32, tc.n)
			for i := range kinds {
				kinds[i] = uint8(OpInsert)
				keys[i], vals[i] = uint32(i)*4+1, 7 // new keys
				switch i % 3 {
				case 1:
					kinds[i], keys[i] = uint8(OpDelete), uint32(i%len(base))*4 // stored keys
				case 2:
					kinds[i], keys[i] = uint8(OpLookup), uint32(i%len(base))*4
				}
			}
			kinds[tc.bad] = tc.kind
			canary8 := make([]uint8, tc.n)
			canary32 := make([]uint32, tc.n)
			for i := range canary8 {
				canary8[i], canary32[i] = 0xee, 0xdeadbeef
			}
			ops := DeviceOps[uint32, uint32]{Kinds: onDevice(t, dev, kinds), Keys: onDevice(t, dev, keys), Vals: onDevice(t, dev, vals)}
			res := DeviceResults[uint32, uint32]{Found: onDevice(t, dev, canary8), Keys: onDevice(t, dev, canary32), Vals: onDevice(t, dev, canary32), Counts: onDevice(t, dev, canary32)}
			before, bv, err := tr.gpu.pairs(ctx)
			if err != nil {
				t.Fatal(err)
			}
			err = tr.ApplyDevice(ctx, ops, res)
			if !errors.Is(err, warpkit.ErrInvalidArgument) {
				t.Fatalf("ApplyDevice with kind %d at %d: %v, want ErrInvalidArgument", tc.kind, tc.bad, err)
			}
			after, av, err := tr.gpu.pairs(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(before, after) || !slices.Equal(bv, av) {
				t.Fatalf("a rejected batch changed the tree: %d pairs before, %d after", len(before), len(after))
			}
			if n, err := tr.Len(ctx); err != nil || n != len(before) {
				t.Fatalf("Len %d (%v) after a rejected batch, want %d", n, err, len(before))
			}
			if !slices.Equal(onHost(t, res.Found), canary8) || !slices.Equal(onHost(t, res.Keys), canary32) ||
				!slices.Equal(onHost(t, res.Vals), canary32) || !slices.Equal(onHost(t, res.Counts), canary32) {
				t.Fatal("a rejected batch wrote results")
			}
			// Fixed, the batch runs (and the lane's status word was reset).
			kinds[tc.bad] = uint8(OpLookup)
			ops.Kinds = onDevice(t, dev, kinds)
			if err := tr.ApplyDevice(ctx, ops, res); err != nil {
				t.Fatalf("the batch with the kind fixed: %v", err)
			}
			f := onHost(t, res.Found)
			for i := range kinds {
				if f[i] > 1 {
					t.Fatalf("found[%d] = %d after a valid batch", i, f[i])
				}
			}
			// Restore the base pairs for the next case.
			if err := tr.Build(ctx, base, base); err != nil {
				t.Fatal(err)
			}
		})
	}
	// Host batches are checked on the host, before anything reaches the device.
	res := Results[uint32, uint32]{Counts: make([]uint32, 1)}
	if err := tr.Apply(ctx, Ops[uint32, uint32]{Kinds: []OpKind{OpCount + 1}, Keys: []uint32{1}}, res); !errors.Is(err, warpkit.ErrInvalidArgument) {
		t.Fatalf("Apply with an unknown kind: %v", err)
	}
}

// TestGPURangeDeviceRejectsBadOffsets passes RangeDevice windows that pass the
// end of the output buffers or decrease: the call must fail with
// ErrInvalidArgument and write nothing past the buffers (each is a view of a
// larger buffer whose tail holds a canary), leave the bad windows empty and
// still fill the good windows and every count. Phased, sorted phased and
// validated queries each check their windows.
func TestGPURangeDeviceRejectsBadOffsets(t *testing.T) {
	dev := gputest.Device(t)
	ctx := context.Background()
	const stored = 20000
	ks := make([]uint32, stored)
	for i := range ks {
		ks[i] = uint32(i) * 2
	}
	// 40 queries of [40i, 40i+40): 20 pairs each.
	const nq, per = 40, 20
	lo, hi := make([]uint32, nq), make([]uint32, nq)
	for i := range lo {
		lo[i], hi[i] = uint32(i)*40, uint32(i)*40+40
	}
	const width = nq * per // the output buffers' length
	const guard = 4096
	valid := func() []uint32 {
		o := make([]uint32, nq+1)
		for i := range o {
			o[i] = uint32(i * per)
		}
		return o
	}
	// Window q is valid when offsets[q] <= offsets[q+1] <= width (RangeDevice).
	cases := []struct {
		name string
		off  func() []uint32
	}{
		{"valid", valid},
		{"end past the buffer", func() []uint32 { o := valid(); o[nq] = width + 1; return o }},
		{"huge end", func() []uint32 { o := valid(); o[nq] = 0xffffffff; return o }},
		{"all past the buffer", func() []uint32 {
			o := valid()
			for i := range o {
				o[i] += width
			}
			return o
		}},
		{"decreasing", func() []uint32 { o := valid(); o[10] = o[12] + 5; return o }},
		{"wrapping", func() []uint32 { o := valid(); o[5] = 0xfffffff0; o[6] = 0xffffffff; return o }},
	}
	for _, mode := range []string{"phased", "sorted", "validated"} {
		t.Run(mode, func(t *testing.T) {
			opts := Options{}
			if mode == "sorted" {
				opts.SortQueries = 1
			}
			tr := newGPUTree[uint32, uint32](t, dev, opts)
			if err := tr.Build(ctx, ks, ks); err != nil {
				t.Fatal(err)
			}
			if mode == "validated" {
				defer markWriter(t, tr.gpu)()
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					offsets := c.off()
					bad := map[int]bool{}
					for q := range nq {
						if offsets[q] > offsets[q+1] || offsets[q+1] > width {
							bad[q] = true
						}
					}
					if (len(bad) == 0) != (c.name == "valid") {
						t.Fatalf("case %q has bad windows %v", c.name, bad)
					}
					canary := make([]uint32, width+guard)
					for i := range canary {
						canary[i] = 0xdeadbeef
					}
					bk, bv := onDevice(t, dev, canary), onDevice(t, dev, canary)
					counts := onDevice(t, dev, make([]uint32, nq))
					err := tr.RangeDevice(ctx, onDevice(t, dev, lo), onDevice(t, dev, hi), onDevice(t, dev, offsets),
						bk.Sub(0, width), bv.Sub(0, width), counts)
					if len(bad) == 0 {
						if err != nil {
							t.Fatalf("valid offsets: %v", err)
						}
					} else if !errors.Is(err, warpkit.ErrInvalidArgument) {
						t.Fatalf("offsets %v: %v, want ErrInvalidArgument", offsets, err)
					}
					gotK, gotV, gotC := onHost(t, bk), onHost(t, bv), onHost(t, counts)
					for i := width; i < len(canary); i++ {
						if gotK[i] != 0xdeadbeef || gotV[i] != 0xdeadbeef {
							t.Fatalf("RangeDevice wrote past the output buffers at %d (%d past the end)", i, i-width)
						}
					}
					written := make([]bool, width)
					for q := range nq {
						if gotC[q] != per {
							t.Fatalf("count of query %d = %d, want %d", q, gotC[q], per)
						}
						if bad[q] {
							continue
						}
						for j := range per {
							at := int(offsets[q]) + j
							if want := lo[q] + 2*uint32(j); gotK[at] != want || gotV[at] != want {
								t.Fatalf("query %d pair %d = (%d, %d), want %d", q, j, gotK[at], gotV[at], want)
							}
							written[at] = true
						}
					}
					for i := range width {
						if !written[i] && (gotK[i] != 0xdeadbeef || gotV[i] != 0xdeadbeef) {
							t.Fatalf("output %d, in no valid window, was written: (%d, %d)", i, gotK[i], gotV[i])
						}
					}
				})
			}
		})
	}
}
