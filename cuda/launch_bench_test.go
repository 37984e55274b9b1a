package cuda

import "testing"

// BenchmarkLaunchFake measures Launch's host-side cost on the fake driver: the
// argument marshalling, the checks before the driver call and the call itself
// (the fake records the launch). It runs without a GPU, so a change to the
// launch path can be measured anywhere.
func BenchmarkLaunchFake(b *testing.B) {
	f := newFakeGPU()
	d := openFake(b, f)
	m, err := d.LoadModule(selftestPTX)
	if err != nil {
		b.Fatal(err)
	}
	k, err := m.Function("probe_args")
	if err != nil {
		b.Fatal(err)
	}
	out, err := Alloc[uint64](d, 8)
	if err != nil {
		b.Fatal(err)
	}
	s, err := d.NewStream()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := k.Launch(D1(1), D1(32), 0, s, int32(-1), uint32(2), int64(-3), uint64(4), float32(0.5), float64(0.25), false, out); err != nil {
			b.Fatal(err)
		}
		if i%1024 == 0 { // keep the fake's launch record from growing without bound
			f.mu.Lock()
			f.launches = f.launches[:0]
			f.mu.Unlock()
		}
	}
}
