package cuda

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// gpu opens device 0 or skips the test.
func gpu(t *testing.T) *Device {
	t.Helper()
	d, err := Open(0)
	if errors.Is(err, ErrNoDevice) {
		t.Skip("no CUDA device")
	}
	if err != nil {
		t.Fatalf("Open(0): %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func kernel(t *testing.T, d *Device, name string) *Function {
	t.Helper()
	m, err := d.LoadModule(selftestPTX)
	if err != nil {
		t.Fatalf("loading selftest.ptx: %v", err)
	}
	f, err := m.Function(name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestGPUDevices(t *testing.T) {
	d := gpu(t)
	devs, err := Devices()
	if err != nil || len(devs) == 0 {
		t.Fatalf("Devices: %v %v", devs, err)
	}
	p := d.Properties()
	if p.Multiprocessors == 0 || p.TotalMemory == 0 || p.TheoreticalBandwidth() == 0 || p.ComputeMajor < 7 {
		t.Fatalf("implausible properties %+v", p)
	}
	t.Logf("%s: cc %s, %d SMs, %.1f GiB, L2 %d MiB, bus %d bits @ %d MHz (%.0f GB/s), driver %s",
		p.Name, p.ComputeCapability(), p.Multiprocessors, float64(p.TotalMemory)/(1<<30), p.L2CacheBytes>>20,
		p.MemoryBusWidth, p.MemoryClockKHz/1000, p.TheoreticalBandwidth()/1e9, p.DriverVersionString())
}

func roundTrip[T Elem](t *testing.T, d *Device, n int, gen func(*rand.Rand) T) {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	src := make([]T, n)
	for i := range src {
		src[i] = gen(rng)
	}
	s, err := FromHost(d, src)
	if err != nil {
		t.Fatalf("n=%d: %v", n, err)
	}
	defer s.Free()
	// Through a device-to-device copy, then back.
	c, err := Alloc[T](d, n)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Free()
	if err := c.CopyFrom(s); err != nil {
		t.Fatal(err)
	}
	got, err := c.ToHost()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, src) {
		t.Fatalf("%T n=%d: round trip differs", src[0], n)
	}
}

func TestGPURoundTrips(t *testing.T) {
	d := gpu(t)
	for _, n := range []int{1, 3, 4096, 1<<20 + 7, 32 << 20} {
		roundTrip(t, d, n, func(r *rand.Rand) uint8 { return uint8(r.Uint32()) })
		roundTrip(t, d, n, func(r *rand.Rand) uint32 { return r.Uint32() })
		roundTrip(t, d, n, func(r *rand.Rand) uint64 { return r.Uint64() })
	}
}

func TestGPUFill(t *testing.T) {
	d := gpu(t)
	testFill(t, d, uint8(0xab))
	testFill(t, d, int16(-3))
	testFill(t, d, float32(2.5))
	testFill(t, d, uint64(0x0123456789abcdef))
	testFill(t, d, float64(-1.25))
}

func TestGPULaunchArgumentTypes(t *testing.T) {
	d := gpu(t)
	k := kernel(t, d, "probe_args")
	out, err := Alloc[uint64](d, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Free()
	if err := k.Launch(D1(1), D1(32), 0, nil, int32(-7), uint32(0xdeadbeef), int64(-1<<40), uint64(1<<63|5),
		float32(3.25), float64(-1e300), true, out); err != nil {
		t.Fatal(err)
	}
	got, err := out.ToHost()
	if err != nil {
		t.Fatal(err)
	}
	neg7 := int64(-7)
	neg40 := int64(-1 << 40)
	want := []uint64{uint64(neg7), 0xdeadbeef, uint64(neg40), 1<<63 | 5,
		uint64(math.Float32bits(3.25)), math.Float64bits(-1e300), 1, 0}
	if !slices.Equal(got, want) {
		t.Fatalf("kernel read %#x, want %#x", got, want)
	}
}

func TestGPUAsyncCopiesAndEvents(t *testing.T) {
	d := gpu(t)
	const n = 1 << 22
	host, err := AllocPinned[uint32](d, n)
	if err != nil {
		t.Fatal(err)
	}
	defer host.Free()
	for i := range host.Data() {
		host.Data()[i] = uint32(i)
	}
	dev, err := Alloc[uint32](d, n)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Free()
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start, _ := d.NewEvent()
	end, _ := d.NewEvent()
	defer start.Close()
	defer end.Close()
	add := kernel(t, d, "add_u32")
	if err := start.Record(s); err != nil {
		t.Fatal(err)
	}
	if err := CopyToDeviceAsync(dev, host, 0, s); err != nil {
		t.Fatal(err)
	}
	if err := add.Launch(GridFor(n, 256), D1(256), 0, s, dev, uint32(5), uint64(n)); err != nil {
		t.Fatal(err)
	}
	if err := CopyToHostAsync(host, 0, dev, s); err != nil {
		t.Fatal(err)
	}
	if err := end.Record(s); err != nil {
		t.Fatal(err)
	}
	if err := end.Synchronize(); err != nil {
		t.Fatal(err)
	}
	el, err := Elapsed(start, end)
	if err != nil || el <= 0 {
		t.Fatalf("elapsed %v %v", el, err)
	}
	for i, v := range host.Data() {
		if v != uint32(i)+5 {
			t.Fatalf("element %d = %d", i, v)
		}
	}
	done, err := s.Done()
	if err != nil || !done {
		t.Fatalf("Done after sync: %v %v", done, err)
	}
	t.Logf("H2D + kernel + D2H of %d MiB: %v", n*4>>20, el)
}

// TestGPUPriorityStream: the device has a range of priorities, and a
// kernel on its most urgent stream runs as on any other.
func TestGPUPriorityStream(t *testing.T) {
	d := gpu(t)
	least, greatest, err := d.StreamPriorities()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stream priorities: least %d, greatest %d", least, greatest)
	if greatest > least {
		t.Fatalf("greatest priority %d above least %d (lower numbers are more urgent)", greatest, least)
	}
	s, err := d.NewPriorityStream(greatest)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if p, err := s.Priority(); err != nil || p != greatest {
		t.Fatalf("the stream's priority: %d, %v; want %d (the driver was not given it)", p, err, greatest)
	}
	if p, err := d.NewPriorityStream(greatest - 100); err != nil {
		t.Fatal(err)
	} else {
		got, err := p.Priority()
		p.Close()
		if err != nil || got != greatest {
			t.Errorf("a priority past the range: %d, %v; want it clamped to %d", got, err, greatest)
		}
	}
	const n = 1 << 16
	buf, err := FromHost(d, make([]uint32, n))
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	if err := kernel(t, d, "add_u32").Launch(GridFor(n, 256), D1(256), 0, s, buf, uint32(7), uint64(n)); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	got := make([]uint32, n)
	if err := buf.CopyToHost(got); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if v != 7 {
			t.Fatalf("element %d = %d, want 7", i, v)
		}
	}
}

// TestGPUBlockingEvent: a wait on a blocking event gives its processor
// up (the process's CPU time over the wait is a fraction of the wait),
// and the work before the event is done when it returns. The same wait
// through Stream.Synchronize is logged beside it (it spins).
func TestGPUBlockingEvent(t *testing.T) {
	d := gpu(t)
	const n = 1 << 22
	buf, err := Alloc[uint32](d, n)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	if err := buf.Zero(nil); err != nil {
		t.Fatal(err)
	}
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ev, err := d.NewBlockingEvent()
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	add := kernel(t, d, "add_u32")
	const launches = 2000 // tens of milliseconds of device work
	work := func() {
		t.Helper()
		for range launches {
			if err := add.Launch(GridFor(n, 256), D1(256), 0, s, buf, uint32(1), uint64(n)); err != nil {
				t.Fatal(err)
			}
		}
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	wait := func(sync func() error) (wall, used time.Duration) {
		t.Helper()
		work()
		c0, w0 := cpu(), time.Now()
		if err := sync(); err != nil {
			t.Fatal(err)
		}
		return time.Since(w0), cpu() - c0
	}
	wall, used := wait(func() error {
		if err := ev.Record(s); err != nil {
			return err
		}
		return ev.Synchronize()
	})
	spinWall, spinUsed := wait(s.Synchronize)
	got := make([]uint32, n)
	if err := buf.CopyToHost(got); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if v != 2*launches {
			t.Fatalf("element %d = %d after the waits, want %d", i, v, 2*launches)
		}
	}
	t.Logf("blocking event: %v of CPU over a %v wait; Stream.Synchronize: %v over %v", used, wall, spinUsed, spinWall)
	if wall < 5*time.Millisecond {
		t.Skipf("the device work took %v: too short to tell a sleeping wait from a spinning one", wall)
	}
	if used > wall/2 {
		t.Errorf("the blocking event's wait used %v of CPU over %v: it spun", used, wall)
	}
}

func TestGPUOutOfMemory(t *testing.T) {
	d := gpu(t)
	_, err := d.Alloc(int64(d.Properties().TotalMemory) * 2)
	if !errors.Is(err, ErrOutOfMemory) {
		t.Fatalf("allocating twice the device: %v, want ErrOutOfMemory", err)
	}
	// The device still works.
	roundTrip(t, d, 1<<16, func(r *rand.Rand) uint32 { return r.Uint32() })
	k := kernel(t, d, "add_u32")
	s, _ := FromHost(d, []uint32{1, 2, 3})
	defer s.Free()
	if err := k.Launch(D1(1), D1(32), 0, nil, s, uint32(1), uint64(3)); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.ToHost(); !slices.Equal(got, []uint32{2, 3, 4}) {
		t.Fatalf("kernel after OOM: %v", got)
	}
}

func TestGPUMalformedPTX(t *testing.T) {
	d := gpu(t)
	bad := []byte(".version 7.8\n.target sm_70\n.address_size 64\n.visible .entry broken() { this is not ptx; }\n")
	_, err := d.LoadModule(bad)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("malformed PTX loaded: %v", err)
	}
	if !strings.Contains(e.Detail, "JIT log:") {
		t.Fatalf("error carries no JIT log: %v", err)
	}
	t.Logf("%v", err)
	// The device still works.
	kernel(t, d, "add_u32")
}

func TestGPUConcurrentLaunches(t *testing.T) {
	d := gpu(t)
	add := kernel(t, d, "add_u32")
	const goroutines, launches, n = 32, 50, 1 << 16
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := d.NewStream()
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			buf, err := Alloc[uint32](d, n)
			if err != nil {
				errs <- err
				return
			}
			defer buf.Free()
			if err := Fill(buf, uint32(g), s); err != nil {
				errs <- err
				return
			}
			for range launches {
				if err := add.Launch(GridFor(n, 256), D1(256), 0, s, buf, uint32(1), uint64(n)); err != nil {
					errs <- err
					return
				}
			}
			if err := s.Synchronize(); err != nil {
				errs <- err
				return
			}
			got, err := buf.ToHost()
			if err != nil {
				errs <- err
				return
			}
			for i, v := range got {
				if v != uint32(g+launches) {
					errs <- fmt.Errorf("goroutine %d: element %d = %d, want %d", g, i, v, g+launches)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestGPUUseAfterClose(t *testing.T) {
	gpu(t) // skip without a device; keeps one handle open for the test
	d, err := Open(0)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := FromHost(d, []uint32{1, 2})
	if err := s.Free(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ToHost(); !errors.Is(err, ErrClosed) {
		t.Errorf("read after free: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Alloc(16); !errors.Is(err, ErrClosed) {
		t.Errorf("alloc after close: %v", err)
	}
	if _, err := d.LoadModule(selftestPTX); !errors.Is(err, ErrClosed) {
		t.Errorf("load after close: %v", err)
	}
}

func TestGPUSelfTest(t *testing.T) {
	d := gpu(t)
	rep, err := SelfTest(d, 256<<20)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Checks {
		if !c.OK {
			t.Errorf("self-test %s failed: %s", c.Name, c.Detail)
		}
	}
	t.Logf("copy bandwidth: memcpy %.0f GB/s, kernel %.0f GB/s, theoretical %.0f GB/s",
		rep.MemcpyBandwidth/1e9, rep.KernelCopyBandwidth/1e9, rep.TheoreticalBandwidth/1e9)
}

// benchKernel opens device 0 (or skips) and returns it with one of the
// package's kernels and a stream, all released at the end of the benchmark.
func benchKernel(b *testing.B, name string) (*Device, *Function, *Stream) {
	b.Helper()
	d, err := Open(0)
	if errors.Is(err, ErrNoDevice) {
		b.Skip("no CUDA device")
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	m, err := d.LoadModule(selftestPTX)
	if err != nil {
		b.Fatal(err)
	}
	f, err := m.Function(name)
	if err != nil {
		b.Fatal(err)
	}
	s, err := d.NewStream()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return d, f, s
}

// BenchmarkGPULaunch measures the host cost of one asynchronous kernel launch
// (an empty grid-stride loop) on the caller's thread: the fixed overhead every
// batch operation pays per kernel.
func BenchmarkGPULaunch(b *testing.B) {
	d, add, s := benchKernel(b, "add_u32")
	buf, err := Alloc[uint32](d, 32)
	if err != nil {
		b.Fatal(err)
	}
	defer buf.Free()
	i := 0
	for b.Loop() {
		if err := add.Launch(D1(1), D1(32), 0, s, buf, uint32(1), uint64(0)); err != nil {
			b.Fatal(err)
		}
		if i++; i%1024 == 0 {
			s.Synchronize()
		}
	}
	if err := s.Synchronize(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkGPUBatchCall measures the pattern every structure's batch call
// follows: zero a status word, launch, copy the status back asynchronously,
// and synchronize the stream, on a small (2^16) and a larger (2^24) kernel,
// for several polling windows of Synchronize (pollWindow) — the measurement
// the default window was chosen by.
func BenchmarkGPUBatchCall(b *testing.B) {
	d, add, s := benchKernel(b, "add_u32")
	buf, err := Alloc[uint32](d, 1<<24)
	if err != nil {
		b.Fatal(err)
	}
	defer buf.Free()
	host, err := AllocPinned[uint32](d, 1)
	if err != nil {
		b.Fatal(err)
	}
	defer host.Free()
	status := buf.Sub(0, 1)
	defer func(w time.Duration) { pollWindow = w }(pollWindow)
	for _, n := range []int{1 << 16, 1 << 24} {
		for _, w := range []time.Duration{0, 20 * time.Microsecond, 50 * time.Microsecond, 200 * time.Microsecond, 2 * time.Millisecond} {
			b.Run(fmt.Sprintf("n=%d/poll=%v", n, w), func(b *testing.B) {
				pollWindow = w
				for b.Loop() {
					if err := status.Zero(s); err != nil {
						b.Fatal(err)
					}
					if err := add.Launch(GridFor(n, 256), D1(256), 0, s, buf, uint32(1), uint64(n)); err != nil {
						b.Fatal(err)
					}
					if err := CopyToHostAsync(host, 0, status, s); err != nil {
						b.Fatal(err)
					}
					if err := s.Synchronize(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkGPUSmallCopy measures a synchronous 4-byte device-to-host copy.
func BenchmarkGPUSmallCopy(b *testing.B) {
	d, _, _ := benchKernel(b, "add_u32")
	buf, err := Alloc[uint32](d, 1)
	if err != nil {
		b.Fatal(err)
	}
	defer buf.Free()
	out := make([]uint32, 1)
	for b.Loop() {
		if err := buf.CopyToHost(out); err != nil {
			b.Fatal(err)
		}
	}
}

// TestGPUCallsAcrossClose: on the device, 16 goroutines, each on its own
// stream, copy, launch, synchronize and check their data while the device
// is closed under them, five times over. Every call returns its result or
// ErrClosed; no result is wrong, nothing hangs or crashes, and the device
// opens again afterwards.
func TestGPUCallsAcrossClose(t *testing.T) {
	if _, err := Devices(); errors.Is(err, ErrNoDevice) {
		t.Skip("no CUDA device")
	}
	for round := range 5 {
		d, err := Open(0)
		if err != nil {
			t.Fatal(err)
		}
		add := kernel(t, d, "add_u32")
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		started := make(chan struct{}, 16)
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				fail := func(err error) { errs <- err }
				s, err := d.NewStream()
				if err != nil {
					fail(err)
					return
				}
				defer s.Close()
				buf, err := Alloc[uint32](d, 1<<16)
				if err != nil {
					fail(err)
					return
				}
				defer buf.Free()
				host := make([]uint32, 1<<16)
				started <- struct{}{}
				for i := 0; ; i++ {
					for j := range host {
						host[j] = uint32(g*1000 + i + j)
					}
					if err := buf.CopyFromHost(host); err != nil {
						fail(err)
						return
					}
					if err := add.Launch(GridFor(1<<16, 256), D1(256), 0, s, buf, uint32(3), uint64(1<<16)); err != nil {
						fail(err)
						return
					}
					if err := s.Synchronize(); err != nil {
						fail(err)
						return
					}
					got, err := buf.ToHost()
					if err != nil {
						fail(err)
						return
					}
					for j, v := range got {
						if v != host[j]+3 {
							fail(fmt.Errorf("goroutine %d, round %d: element %d is %d, want %d", g, i, j, v, host[j]+3))
							return
						}
					}
				}
			}()
		}
		for range 16 {
			<-started
		}
		time.Sleep(time.Duration(5+5*round) * time.Millisecond)
		if err := d.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if !errors.Is(err, ErrClosed) {
				t.Fatalf("round %d: %v (want results or ErrClosed)", round, err)
			}
		}
	}
	d := gpu(t)
	if _, _, err := d.MemInfo(); err != nil {
		t.Fatalf("the device after five closes: %v", err)
	}
}

// TestGPUKernelWritesPinned: a kernel writes through a pinned buffer's
// device pointer, and the host reads the values after synchronizing, with
// no copy call.
func TestGPUKernelWritesPinned(t *testing.T) {
	d := gpu(t)
	fill := kernel(t, d, "fill_u64")
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p, err := AllocPinned[uint64](d, 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Free()
	dp, err := p.DevicePtr()
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		clear(p.Data())
		v := uint64(0xabcdef0000 + round)
		if err := fill.Launch(D1(4), D1(256), 0, s, dp, v, uint64(1000)); err != nil {
			t.Fatal(err)
		}
		if err := s.Synchronize(); err != nil {
			t.Fatal(err)
		}
		for i, got := range p.Data() {
			if got != v {
				t.Fatalf("round %d: element %d is %#x, want %#x", round, i, got, v)
			}
		}
	}
}

// BenchmarkGPUCopyBandwidth measures large copies between host and device:
// pinned memory with async copies and a stream wait, and pageable Go memory
// with the synchronous copies; SetBytes makes go test print MB/s.
func BenchmarkGPUCopyBandwidth(b *testing.B) {
	d, _, _ := benchKernel(b, "add_u32")
	for _, n := range []int{1 << 20, 1 << 24} { // 4 MiB and 64 MiB of uint32
		buf, err := Alloc[uint32](d, n)
		if err != nil {
			b.Fatal(err)
		}
		pin, err := AllocPinned[uint32](d, n)
		if err != nil {
			b.Fatal(err)
		}
		s, err := d.NewStream()
		if err != nil {
			b.Fatal(err)
		}
		host := make([]uint32, n)
		name := fmt.Sprintf("%dMiB", n*4>>20)
		b.Run("pinned-H2D-"+name, func(b *testing.B) {
			b.SetBytes(int64(4 * n))
			for b.Loop() {
				if err := errors.Join(CopyToDeviceAsync(buf, pin, 0, s), s.Synchronize()); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("pinned-D2H-"+name, func(b *testing.B) {
			b.SetBytes(int64(4 * n))
			for b.Loop() {
				if err := errors.Join(CopyToHostAsync(pin, 0, buf, s), s.Synchronize()); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("pageable-H2D-"+name, func(b *testing.B) {
			b.SetBytes(int64(4 * n))
			for b.Loop() {
				if err := buf.CopyFromHost(host); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("pageable-D2H-"+name, func(b *testing.B) {
			b.SetBytes(int64(4 * n))
			for b.Loop() {
				if err := buf.CopyToHost(host); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("host-copy-into-pinned-"+name, func(b *testing.B) {
			b.SetBytes(int64(4 * n))
			for b.Loop() {
				copy(pin.Data(), host)
			}
		})
		b.Run("host-copy-out-of-pinned-"+name, func(b *testing.B) {
			b.SetBytes(int64(4 * n))
			for b.Loop() {
				copy(host, pin.Data())
			}
		})
		s.Close()
		pin.Free()
		buf.Free()
	}
}
