package gpurt_test

import (
	"testing"

	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/emu"
	"github.com/warpkit/warpkit/internal/gpurt"
)

// TestLayout: the parts of a layout lie in one buffer at 16-byte
// boundaries without overlapping, an empty part takes no room, a buffer too
// small for a part is refused, and the buffer grows only when a layout needs
// more than it holds.
func TestLayout(t *testing.T) {
	dev := emu.Device(t, emu.Options{})
	s, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var l gpurt.Layout
	a := gpurt.Place[uint8](&l, 3)
	b := gpurt.Place[uint64](&l, 5)
	e := gpurt.Place[uint32](&l, 0)
	c := gpurt.Place[uint32](&l, 7)
	if w := l.Words(); w != (16+48+0+32)/8 {
		t.Fatalf("Words = %d, want 12", w)
	}
	var buf gpurt.Buf[uint64]
	defer buf.Free()
	mem, err := l.Get(&buf, dev, s)
	if err != nil {
		t.Fatal(err)
	}
	av, bv, ev, cv := a.In(mem), b.In(mem), e.In(mem), c.In(mem)
	if av.Len() != 3 || bv.Len() != 5 || ev.Len() != 0 || cv.Len() != 7 {
		t.Fatalf("lengths %d %d %d %d", av.Len(), bv.Len(), ev.Len(), cv.Len())
	}
	base := mem.Ptr()
	for i, want := range []struct {
		ptr cuda.DevicePtr
		off int
	}{{av.Ptr(), 0}, {bv.Ptr(), 16}, {cv.Ptr(), 64}} {
		if got := int(want.ptr - base); got != want.off {
			t.Errorf("part %d at byte %d, want %d", i, got, want.off)
		}
	}
	// Written through each part, read back whole: no part overlaps another.
	if err := av.CopyFromHost([]uint8{0xaa, 0xaa, 0xaa}); err != nil {
		t.Fatal(err)
	}
	if err := bv.CopyFromHost([]uint64{1, 1, 1, 1, 1}); err != nil {
		t.Fatal(err)
	}
	if err := cv.CopyFromHost([]uint32{2, 2, 2, 2, 2, 2, 2}); err != nil {
		t.Fatal(err)
	}
	all, err := cuda.View[uint8](mem, 0, 96)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]uint8, 96)
	if err := all.CopyToHost(got); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		want := uint8(0)
		switch {
		case i < 3:
			want = 0xaa
		case i >= 16 && i < 56:
			if (i-16)%8 == 0 {
				want = 1
			}
		case i >= 64 && i < 92:
			if (i-64)%4 == 0 {
				want = 2
			}
		default:
			continue // padding: not written
		}
		if v != want {
			t.Fatalf("byte %d = %#x, want %#x", i, v, want)
		}
	}
	// A smaller layout reuses the buffer; a larger one grows it.
	var small gpurt.Layout
	gpurt.Place[uint64](&small, 2)
	if m2, err := small.Get(&buf, dev, s); err != nil || m2 != mem {
		t.Fatalf("a smaller layout got a new buffer (%v)", err)
	}
	var big gpurt.Layout
	p := gpurt.Place[uint64](&big, 100)
	m3, err := big.Get(&buf, dev, s)
	if err != nil || m3 == mem || p.In(m3).Len() != 100 {
		t.Fatalf("a larger layout: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a part outside its buffer did not panic")
		}
	}()
	p.In(mem) // freed by the growth, and too small
}
