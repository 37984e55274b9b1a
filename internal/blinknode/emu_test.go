package blinknode

import (
	"os"
	"testing"

	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/emu"
)

// TestEmulatedChildSearch runs blink.cuh's child search (value_le, the one
// child_for takes in every descent) on single nodes of every layout, on the
// CPU emulation of the GPU: the value of the last pair whose key is <= the
// query, for every count, with junk in the slots past the count and in the
// version. A search that picks another child is not an error the trees'
// tests see (a descent moves right along links to the right node; only
// slower), so it is tested here.
func TestEmulatedChildSearch(t *testing.T) {
	dev := emu.Device(t, emu.Options{TotalMemory: 64 << 20}, "testdata/nodes.cu")
	ptx, err := os.ReadFile("testdata/nodes.ptx")
	if err != nil {
		t.Fatal(err)
	}
	m, err := dev.LoadModule(ptx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		wide, ver bool
	}{{"u32", false, false}, {"u32v", false, true}, {"u64", true, false}, {"u64v", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			f, err := m.Function("nodes_child_" + c.name)
			if err != nil {
				t.Fatal(err)
			}
			l := LayoutFor(4, 4, c.ver)
			if c.wide {
				l = LayoutFor(8, 8, c.ver)
			}
			for count := 1; count <= l.Cap; count++ {
				keys, vals := make([]uint64, count), make([]uint64, count)
				var qs []uint64
				for i := range keys {
					keys[i], vals[i] = uint64(10*(i+1)), uint64(1000+i)
					qs = append(qs, keys[i]-1, keys[i], keys[i]+1)
				}
				qs = append(qs, 0, 1<<31)
				got := childSearch(t, dev, f, c.wide, keys, vals, qs)
				for j, q := range qs {
					want := ^uint64(0)
					for i := range keys {
						if keys[i] <= q {
							want = vals[i]
						}
					}
					if !c.wide {
						want &= 0xffffffff
					}
					if got[j] != want {
						t.Fatalf("count %d: query %d found %#x, want %#x", count, q, got[j], want)
					}
				}
			}
		})
	}
}

// childSearch runs one child_search launch and returns its answers.
func childSearch(t *testing.T, dev *cuda.Device, f *cuda.Function, wide bool, keys, vals, qs []uint64) []uint64 {
	t.Helper()
	if wide {
		return launchChild(t, dev, f, keys, vals, qs)
	}
	n32 := func(s []uint64) []uint32 {
		out := make([]uint32, len(s))
		for i, v := range s {
			out[i] = uint32(v)
		}
		return out
	}
	got := launchChild(t, dev, f, n32(keys), n32(vals), n32(qs))
	out := make([]uint64, len(got))
	for i, v := range got {
		out[i] = uint64(v)
	}
	return out
}

func launchChild[S uint32 | uint64](t *testing.T, dev *cuda.Device, f *cuda.Function, keys, vals, qs []S) []S {
	t.Helper()
	up := func(s []S) cuda.Slice[S] {
		d, err := cuda.Alloc[S](dev, len(s))
		if err != nil {
			t.Fatal(err)
		}
		if err := d.CopyFromHost(s); err != nil {
			t.Fatal(err)
		}
		return d
	}
	dk, dv, dq := up(keys), up(vals), up(qs)
	out, err := cuda.Alloc[S](dev, len(qs))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Launch(cuda.D1(1), cuda.D1(32), 0, nil, dk, dv, uint32(len(keys)), dq, uint32(len(qs)), out); err != nil {
		t.Fatal(err)
	}
	got, err := out.ToHost()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []cuda.Slice[S]{dk, dv, dq, out} {
		s.Buffer().Free()
	}
	return got
}
