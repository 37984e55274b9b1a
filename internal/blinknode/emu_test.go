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
	dk, dv, dq := upload(t, dev, keys), upload(t, dev, vals), upload(t, dev, qs)
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

// pair is a node's pair in the shift tests.
type pair struct{ k, v uint64 }

// TestEmulatedShifts runs blink.cuh's leaf shifts (insert_at, remove_at: the
// neighbour shuffles of unversioned narrow nodes, pair() elsewhere) on single
// nodes of every layout, at every count and position, and compares every
// pair slot with the shifted list — the slots past the new count included,
// which must repeat its last pair (a torn reader takes them for real pairs;
// nothing else in the trees' tests looks at them).
func TestEmulatedShifts(t *testing.T) {
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
			f, err := m.Function("nodes_shift_" + c.name)
			if err != nil {
				t.Fatal(err)
			}
			l := LayoutFor(4, 4, c.ver)
			if c.wide {
				l = LayoutFor(8, 8, c.ver)
			}
			for count := 0; count <= l.Cap; count++ {
				pairs := make([]pair, count)
				for i := range pairs {
					pairs[i] = pair{uint64(10 * (i + 1)), uint64(1000 + i)}
				}
				slots := func(list []pair) []pair { // the Cap slots of a node holding list
					out := make([]pair, l.Cap)
					for s := range out {
						if len(list) > 0 {
							out[s] = list[min(s, len(list)-1)]
						}
					}
					return out
				}
				old := slots(pairs)
				check := func(what string, pos int, want []pair, gk, gv []uint64) {
					for s := range want {
						if gk[s] != want[s].k || gv[s] != want[s].v {
							t.Fatalf("%s at %d of %d pairs: slot %d holds (%d, %d), want (%d, %d)", what, pos, count, s, gk[s], gv[s], want[s].k, want[s].v)
						}
					}
				}
				if count < l.Cap {
					for pos := 0; pos <= count; pos++ {
						nk := pair{uint64(10*pos + 5), 7777}
						list := append(append(append([]pair{}, pairs[:pos]...), nk), pairs[pos:]...)
						gk, gv := runShift(t, dev, f, c.wide, pairs, pos, true, nk.k, nk.v, l.Cap)
						check("insert", pos, slots(list), gk, gv)
					}
				}
				for pos := 0; pos < count; pos++ {
					want := make([]pair, l.Cap)
					for s := range want {
						src := s
						if s >= pos {
							src = s + 1
						}
						want[s] = old[min(src, l.Cap-1)]
					}
					gk, gv := runShift(t, dev, f, c.wide, pairs, pos, false, 0, 0, l.Cap)
					check("remove", pos, want, gk, gv)
				}
			}
		})
	}
}

// runShift runs one shift launch over the node of pairs and returns its
// slots' keys and values.
func runShift(t *testing.T, dev *cuda.Device, f *cuda.Function, wide bool, pairs []pair, pos int, insert bool, k, v uint64, slots int) ([]uint64, []uint64) {
	t.Helper()
	keys, vals := make([]uint64, max(1, len(pairs))), make([]uint64, max(1, len(pairs)))
	for i, p := range pairs {
		keys[i], vals[i] = p.k, p.v
	}
	ins := uint32(0)
	if insert {
		ins = 1
	}
	if wide {
		return launchShift(t, dev, f, keys, vals, len(pairs), pos, ins, k, v, slots)
	}
	n32 := func(s []uint64) []uint32 {
		out := make([]uint32, len(s))
		for i, v := range s {
			out[i] = uint32(v)
		}
		return out
	}
	gk, gv := launchShift(t, dev, f, n32(keys), n32(vals), len(pairs), pos, ins, uint32(k), uint32(v), slots)
	w := func(s []uint32) []uint64 {
		out := make([]uint64, len(s))
		for i, v := range s {
			out[i] = uint64(v)
		}
		return out
	}
	return w(gk), w(gv)
}

func launchShift[S uint32 | uint64](t *testing.T, dev *cuda.Device, f *cuda.Function, keys, vals []S, count, pos int, insert uint32, k, v S, slots int) ([]S, []S) {
	t.Helper()
	dk, dv := upload(t, dev, keys), upload(t, dev, vals)
	ok, ov := upload(t, dev, make([]S, slots)), upload(t, dev, make([]S, slots))
	if err := f.Launch(cuda.D1(1), cuda.D1(32), 0, nil, dk, dv, uint32(count), uint32(pos), insert, k, v, ok, ov); err != nil {
		t.Fatal(err)
	}
	gk, err := ok.ToHost()
	if err != nil {
		t.Fatal(err)
	}
	gv, err := ov.ToHost()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []cuda.Slice[S]{dk, dv, ok, ov} {
		s.Buffer().Free()
	}
	return gk, gv
}

// upload copies s into a new device slice.
func upload[S uint32 | uint64](t *testing.T, dev *cuda.Device, s []S) cuda.Slice[S] {
	t.Helper()
	d, err := cuda.Alloc[S](dev, len(s))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.CopyFromHost(s); err != nil {
		t.Fatal(err)
	}
	return d
}
