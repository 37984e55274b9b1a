package gpurt

import "testing"

type probe struct{ freed *int }

func (p *probe) Free()      { *p.freed++ }
func (*probe) scratch()     {}
func newProbe(n *int) probe { return probe{freed: n} }

// TestFreeAll: every scratch field is freed — plain, in arrays, in nested
// structs, unexported or not — and what pointers and slices hold is not.
func TestFreeAll(t *testing.T) {
	var n, other int
	type inner struct{ c probe }
	type owner struct {
		a   probe
		B   probe
		arr [2]probe
		in  inner
		ptr *probe
		sl  []probe
	}
	p := newProbe(&other)
	o := owner{a: newProbe(&n), B: newProbe(&n), arr: [2]probe{newProbe(&n), newProbe(&n)}, in: inner{newProbe(&n)},
		ptr: &p, sl: []probe{newProbe(&other)}}
	FreeAll(&o)
	if n != 5 || other != 0 {
		t.Fatalf("freed %d of 5 owned buffers and %d not owned", n, other)
	}
	var b Buf[uint32]
	FreeAll(&struct{ b *Buf[uint32] }{&b}) // a pointer: not followed, and no panic
	defer func() {
		if recover() == nil {
			t.Fatal("FreeAll of a non-pointer did not panic")
		}
	}()
	FreeAll(o)
}

type sized struct{ n int64 }

func (*sized) Free()                {}
func (*sized) scratch()             {}
func (s *sized) deviceBytes() int64 { return s.n }

// TestDeviceBytes: the same walk as FreeAll sums what each buffer holds;
// buffers without device memory (probe, like Staging) count nothing.
func TestDeviceBytes(t *testing.T) {
	var n int
	type owner struct {
		a   sized
		arr [2]sized
		in  struct{ b sized }
		p   probe
		ptr *sized
	}
	o := owner{a: sized{1}, arr: [2]sized{{10}, {100}}, in: struct{ b sized }{sized{1000}}, p: newProbe(&n), ptr: &sized{10000}}
	if got := DeviceBytes(&o); got != 1111 {
		t.Fatalf("DeviceBytes = %d, want 1111", got)
	}
	var b Buf[uint64]
	if got := DeviceBytes(&struct{ b Buf[uint64] }{b}); got != 0 {
		t.Fatalf("an empty Buf holds %d bytes", got)
	}
}
