package cuda

import (
	"errors"
	"slices"
	"testing"
)

// TestVirtualRangeEmulated runs the virtual memory checks on the emulated
// device (every `go test`); TestGPUVirtualRange on a GPU.
func TestVirtualRangeEmulated(t *testing.T) {
	d, err := OpenEmulated(EmulatorOptions{TotalMemory: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	checkVirtualRange(t, d)
	// The emulated device's memory bound holds for mapped parts too.
	r, err := d.ReserveRange(256 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Map(0, 128<<20); !errors.Is(err, ErrOutOfMemory) {
		t.Fatalf("mapping past the device's memory: %v, want ErrOutOfMemory", err)
	}
	if r.Mapped() != 0 {
		t.Fatalf("a failed mapping left %d bytes mapped", r.Mapped())
	}
	if err := r.Free(); err != nil {
		t.Fatal(err)
	}
}

func TestGPUVirtualRange(t *testing.T) { checkVirtualRange(t, gpu(t)) }

func checkVirtualRange(t *testing.T, d *Device) {
	t.Helper()
	if !d.VirtualMemorySupported() {
		t.Fatal("no virtual memory management")
	}
	g, err := d.Granularity()
	if err != nil || g == 0 {
		t.Fatalf("Granularity: %d, %v", g, err)
	}
	if _, err := d.ReserveRange(0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("ReserveRange(0): %v", err)
	}
	r, err := d.ReserveRange(4*g - 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Size() != 4*g || uint64(r.Base())%g != 0 || r.Granularity() != g {
		t.Fatalf("range of %d bytes at %#x (granularity %d)", r.Size(), r.Base(), g)
	}
	free0, _, err := d.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	// Parts 1 (one and a half granules, rounded up to two) and 3.
	a, err := r.Map(g, g+g/2)
	if err != nil {
		t.Fatal(err)
	}
	if a.Ptr() != r.Base()+DevicePtr(g) || a.Size() != int64(g+g/2) || r.Mapped() != 2*g {
		t.Fatalf("part at %#x, %d bytes, %d mapped", a.Ptr(), a.Size(), r.Mapped())
	}
	b, err := r.Map(3*g, g)
	if err != nil {
		t.Fatal(err)
	}
	if free1, _, err := d.MemInfo(); err != nil || free0-free1 < 3*g {
		t.Fatalf("free memory %d → %d after mapping %d bytes (%v)", free0, free1, 3*g, err)
	}
	for _, c := range []struct{ off, size uint64 }{{0, 2 * g}, {2 * g, g}, {3 * g, g}, {g / 2, g}, {4 * g, g}, {2 * g, 3 * g}} {
		if p, err := r.Map(c.off, c.size); !errors.Is(err, ErrInvalidArgument) {
			if p != nil {
				p.Free()
			}
			t.Fatalf("Map(%d, %d) over [g, 3g) and [3g, 4g): %v, want ErrInvalidArgument", c.off/g, c.size/g, err)
		}
	}
	// Both parts hold data; a kernel-free check through copies.
	sa, err := View[uint32](a, 0, int(a.Size()/4))
	if err != nil {
		t.Fatal(err)
	}
	sb, err := View[uint32](b, 0, int(b.Size()/4))
	if err != nil {
		t.Fatal(err)
	}
	want := make([]uint32, sa.Len())
	for i := range want {
		want[i] = uint32(i)*2654435761 + 1
	}
	if err := sa.CopyFromHost(want); err != nil {
		t.Fatal(err)
	}
	if err := Fill(sb, 0xabcdef01, nil); err != nil {
		t.Fatal(err)
	}
	if err := sb.Sub(0, 1024).CopyFrom(sa.Sub(0, 1024)); err != nil {
		t.Fatal(err)
	}
	got := make([]uint32, sa.Len())
	if err := sa.CopyToHost(got); err != nil || !slices.Equal(got, want) {
		t.Fatalf("part 1 round trip: %v", err)
	}
	gotB := make([]uint32, sb.Len())
	if err := sb.CopyToHost(gotB); err != nil || !slices.Equal(gotB[:1024], want[:1024]) || gotB[1024] != 0xabcdef01 {
		t.Fatalf("part 3: %v", err)
	}
	// The parts adjoin ([g, 3g) and [3g, 4g)): one view spans them, and
	// copies and fills cross the seam; a view over unmapped bytes or past
	// the range is refused, and freeing a view releases nothing.
	v, err := r.View(g, 3*g)
	if err != nil {
		t.Fatal(err)
	}
	if v.Ptr() != a.Ptr() || v.Size() != int64(3*g) {
		t.Fatalf("view at %#x of %d bytes", v.Ptr(), v.Size())
	}
	seam := int(2 * g / 4) // the first word of part 3
	sv, err := View[uint32](v, seam-8, 16)
	if err != nil {
		t.Fatal(err)
	}
	if err := Fill(sv, 0x5ea40007, nil); err != nil {
		t.Fatal(err)
	}
	across := make([]uint32, 16)
	if err := sv.CopyToHost(across); err != nil {
		t.Fatal(err)
	}
	back := make([]uint32, 8)
	if err := sb.Sub(0, 8).CopyToHost(back); err != nil {
		t.Fatal(err)
	}
	for i, x := range across {
		if x != 0x5ea40007 || (i < 8 && back[i] != x) {
			t.Fatalf("across the seam: word %d = %#x (part 3 holds %#x)", i, x, back)
		}
	}
	for _, c := range []struct{ off, size uint64 }{{0, 2 * g}, {g, 4 * g}, {2 * g, 0}} {
		if _, err := r.View(c.off, c.size); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("View(%d, %d): %v, want ErrInvalidArgument", c.off/g, c.size/g, err)
		}
	}
	if err := v.Free(); err != nil || r.Mapped() != 3*g {
		t.Fatalf("freeing the view: %v, %d bytes mapped", err, r.Mapped())
	}
	if err := sa.CopyToHost(got); err != nil || !slices.Equal(got, want) {
		t.Fatalf("part 1 after the view: %v", err)
	}
	if err := r.Free(); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("freeing a range with parts mapped: %v", err)
	}
	if err := a.Free(); err != nil {
		t.Fatal(err)
	}
	if err := a.Free(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Free: %v", err)
	}
	// The freed part's room maps again.
	c, err := r.Map(0, 3*g)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*Buffer{b, c} {
		if err := p.Free(); err != nil {
			t.Fatal(err)
		}
	}
	if r.Mapped() != 0 {
		t.Fatalf("%d bytes still mapped", r.Mapped())
	}
	if free2, _, err := d.MemInfo(); err != nil || free2+g < free0 {
		t.Fatalf("free memory %d → %d after unmapping everything (%v)", free0, free2, err)
	}
	if err := r.Free(); err != nil {
		t.Fatal(err)
	}
	if err := r.Free(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second range Free: %v", err)
	}
	if _, err := r.Map(0, g); !errors.Is(err, ErrClosed) {
		t.Fatalf("Map on a freed range: %v", err)
	}
}
