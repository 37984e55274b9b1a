package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// builtinKernel returns one of the package's own kernels (selftest.cu).
func builtinKernel(st *deviceState, name string) (*Function, error) {
	m, err := (&Device{st: st}).LoadModule(selftestPTX)
	if err != nil {
		return nil, err
	}
	return m.Function(name)
}

// SelfTestReport is the outcome of SelfTest.
type SelfTestReport struct {
	Device Properties
	Checks []SelfTestCheck
	// CopyBytes is the size of the buffer copied in the bandwidth probes.
	CopyBytes int64
	// Bandwidths count bytes read plus bytes written per second.
	MemcpyBandwidth      float64 // cuMemcpyDtoDAsync
	KernelCopyBandwidth  float64 // the copy_v4 kernel
	TheoreticalBandwidth float64 // from the memory clock and bus width
}

// SelfTestCheck is one verified kernel result.
type SelfTestCheck struct {
	Name   string
	OK     bool
	Detail string
}

// Passed reports whether every check passed.
func (r SelfTestReport) Passed() bool {
	for _, c := range r.Checks {
		if !c.OK {
			return false
		}
	}
	return len(r.Checks) > 0
}

// BestBandwidth returns the larger of the two measured copy bandwidths.
func (r SelfTestReport) BestBandwidth() float64 { return max(r.MemcpyBandwidth, r.KernelCopyBandwidth) }

// SelfTest runs the fill, copy and saxpy kernels on random data, checks their
// results on the host, and measures device-to-device copy bandwidth with copies
// of copyBytes (0: 1 GiB, or a quarter of free memory if less). A failed check
// is reported in the report, not as an error; errors are driver failures.
func SelfTest(d *Device, copyBytes int64) (SelfTestReport, error) {
	rep := SelfTestReport{Device: d.Properties(), TheoreticalBandwidth: d.Properties().TheoreticalBandwidth()}
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	const n = 1 << 22
	add := func(name string, ok bool, detail string) {
		rep.Checks = append(rep.Checks, SelfTestCheck{Name: name, OK: ok, Detail: detail})
	}

	// fill_u64 through Fill, on a random pattern.
	buf, err := Alloc[uint64](d, n)
	if err != nil {
		return rep, err
	}
	defer buf.Free()
	pat := rng.Uint64()
	if err := Fill(buf, pat, nil); err != nil {
		return rep, err
	}
	got, err := buf.ToHost()
	if err != nil {
		return rep, err
	}
	add("fill_u64", countMismatch(got, func(int) uint64 { return pat }) == 0, fmt.Sprintf("%d elements of %#x", n, pat))

	// copy_v4 of random data.
	src := make([]uint32, n)
	for i := range src {
		src[i] = rng.Uint32()
	}
	a, err := FromHost(d, src)
	if err != nil {
		return rep, err
	}
	defer a.Free()
	b, err := Alloc[uint32](d, n)
	if err != nil {
		return rep, err
	}
	defer b.Free()
	cp, err := builtinKernel(d.st, "copy_v4")
	if err != nil {
		return rep, err
	}
	if err := cp.Launch(GridFor(n/4, 256), D1(256), 0, nil, b, a, uint64(n/4)); err != nil {
		return rep, err
	}
	out, err := b.ToHost()
	if err != nil {
		return rep, err
	}
	bad := countMismatch(out, func(i int) uint32 { return src[i] })
	add("copy_v4", bad == 0, fmt.Sprintf("%d random words, %d wrong", n, bad))

	// saxpy on random floats against a float64 reference.
	x := make([]float32, n)
	y := make([]float32, n)
	for i := range x {
		x[i], y[i] = rng.Float32()*2-1, rng.Float32()*2-1
	}
	alpha := rng.Float32() * 4
	dx, err := FromHost(d, x)
	if err != nil {
		return rep, err
	}
	defer dx.Free()
	dy, err := FromHost(d, y)
	if err != nil {
		return rep, err
	}
	defer dy.Free()
	sx, err := builtinKernel(d.st, "saxpy")
	if err != nil {
		return rep, err
	}
	if err := sx.Launch(GridFor(n, 256), D1(256), 0, nil, alpha, dx, dy, uint64(n)); err != nil {
		return rep, err
	}
	res, err := dy.ToHost()
	if err != nil {
		return rep, err
	}
	var num, den float64
	for i := range res {
		ref := float64(alpha)*float64(x[i]) + float64(y[i])
		num += (float64(res[i]) - ref) * (float64(res[i]) - ref)
		den += ref * ref
	}
	relErr := math.Sqrt(num / den)
	add("saxpy", relErr < 1e-6 && !math.IsNaN(relErr), fmt.Sprintf("relative error %.2e over %d elements", relErr, n))

	if err := bandwidth(d, copyBytes, &rep); err != nil {
		return rep, err
	}
	return rep, nil
}

func countMismatch[T comparable](got []T, want func(int) T) int {
	bad := 0
	for i, v := range got {
		if v != want(i) {
			bad++
		}
	}
	return bad
}

// bandwidth times repeated device-to-device copies with events.
func bandwidth(d *Device, size int64, rep *SelfTestReport) error {
	if size <= 0 {
		free, _, err := d.MemInfo()
		if err != nil {
			return err
		}
		size = min(1<<30, int64(free)/4)
	}
	size &^= 15
	rep.CopyBytes = size
	src, err := Alloc[uint8](d, int(size))
	if err != nil {
		return err
	}
	defer src.Free()
	dst, err := Alloc[uint8](d, int(size))
	if err != nil {
		return err
	}
	defer dst.Free()
	if err := src.FillBytes(0x5a, nil); err != nil {
		return err
	}
	stream, err := d.NewStream()
	if err != nil {
		return err
	}
	defer stream.Close()
	start, err := d.NewEvent()
	if err != nil {
		return err
	}
	defer start.Close()
	end, err := d.NewEvent()
	if err != nil {
		return err
	}
	defer end.Close()
	const reps = 20
	timeIt := func(op func() error) (float64, error) {
		if err := op(); err != nil { // warm-up
			return 0, err
		}
		if err := start.Record(stream); err != nil {
			return 0, err
		}
		for range reps {
			if err := op(); err != nil {
				return 0, err
			}
		}
		if err := end.Record(stream); err != nil {
			return 0, err
		}
		if err := end.Synchronize(); err != nil {
			return 0, err
		}
		el, err := Elapsed(start, end)
		if err != nil {
			return 0, err
		}
		return 2 * float64(size) * reps / el.Seconds(), nil
	}
	rep.MemcpyBandwidth, err = timeIt(func() error { return CopyAsync(dst, src, stream) })
	if err != nil {
		return err
	}
	cp, err := builtinKernel(d.st, "copy_v4")
	if err != nil {
		return err
	}
	blocks, err := cp.MaxActiveBlocksPerSM(256, 0)
	if err != nil {
		return err
	}
	grid := D1(max(1, blocks) * d.Properties().Multiprocessors)
	rep.KernelCopyBandwidth, err = timeIt(func() error {
		return cp.Launch(grid, D1(256), 0, stream, dst, src, uint64(size/16))
	})
	return err
}
