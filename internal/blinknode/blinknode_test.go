package blinknode

import (
	"encoding/binary"
	"testing"
)

// TestLayouts: the four layouts match blink.cuh's Lay (kNodeBytes, kCap,
// the header's slots), and a node round-trips through Encode and Decode
// with every field where the device reads it.
func TestLayouts(t *testing.T) {
	for _, c := range []struct {
		k, v      int
		versioned bool
		want      Layout
	}{
		{4, 4, false, Layout{NodeBytes: 128, Cap: 14, PairBase: 16, SlotBytes: 4}},
		{8, 4, false, Layout{Wide: true, NodeBytes: 256, Cap: 14, PairBase: 32, SlotBytes: 8}},
		{4, 4, true, Layout{Versioned: true, NodeBytes: 128, Cap: 13, PairBase: 16, SlotBytes: 4, VersionAt: 120}},
		{4, 8, true, Layout{Wide: true, Versioned: true, NodeBytes: 256, Cap: 14, PairBase: 32, SlotBytes: 8, VersionAt: 24}},
	} {
		l := LayoutFor(c.k, c.v, c.versioned)
		if l != c.want {
			t.Fatalf("LayoutFor(%d, %d, %v) = %+v, want %+v", c.k, c.v, c.versioned, l, c.want)
		}
		n := Node{Meta: MakeMeta(l.Cap, 3) | LatchBit, Link: 77, Low: 5, High: 900}
		if l.Versioned {
			n.TS, n.Prev = 12, 34
		}
		for j := range l.Cap {
			n.Keys[j], n.Vals[j] = uint64(10+j), uint64(100+j)
		}
		b := make([]byte, l.NodeBytes)
		l.Encode(b, &n)
		if got := l.Decode(b); got != n {
			t.Fatalf("%+v: round trip %+v, want %+v", l, got, n)
		}
		if n.Count() != l.Cap || n.Level() != 3 || !n.Latched() {
			t.Fatalf("meta %#x: count %d level %d latched %v", n.Meta, n.Count(), n.Level(), n.Latched())
		}
		// The pairs run to the node's end, or to the version where it follows them.
		end, want := l.PairBase+2*l.Cap*l.SlotBytes, l.NodeBytes
		if l.Versioned && l.VersionAt >= l.PairBase {
			want = l.VersionAt
		}
		if end != want || l.slot(b[end-l.SlotBytes:]) != uint64(100+l.Cap-1) {
			t.Fatalf("%+v: the pairs end at %d, want %d", l, end, want)
		}
		if l.Versioned {
			_, _, ts, prev := l.fields()
			if binary.LittleEndian.Uint32(b[ts:]) != 12 || binary.LittleEndian.Uint32(b[prev:]) != 34 {
				t.Fatalf("%+v: ts and prev not at %d", l, ts)
			}
			if inHeader, atEnd := prev+4 <= l.PairBase && ts >= 8+2*l.SlotBytes, ts == end && prev+4 == l.NodeBytes; !inHeader && !atEnd {
				t.Fatalf("%+v: the version at %d overlaps the header or the pairs", l, ts)
			}
		}
	}
}
