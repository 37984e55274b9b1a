package cuda

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warpkit/warpkit/internal/kernelgen/ptxcheck"
)

func TestPTXUpToDate(t *testing.T) { ptxcheck.Check(t, "selftest.ptx") }

func TestNoDeviceWhenLibraryAbsent(t *testing.T) {
	useDriver(t, func() (*driverAPI, error) { return nil, errors.New("libcuda.so.1: cannot open shared object file") })
	if _, err := Devices(); !errors.Is(err, ErrNoDevice) || !strings.Contains(err.Error(), "libcuda") {
		t.Fatalf("Devices: got %v, want ErrNoDevice naming libcuda", err)
	}
	if _, err := Open(0); !errors.Is(err, ErrNoDevice) {
		t.Fatalf("Open: got %v, want ErrNoDevice", err)
	}
}

func TestNoDeviceWhenInitReportsNoDevice(t *testing.T) {
	f := newFakeGPU()
	f.initResult = resultNoDevice
	useDriver(t, func() (*driverAPI, error) { return f.driver(), nil })
	if _, err := Open(0); !errors.Is(err, ErrNoDevice) {
		t.Fatalf("got %v, want ErrNoDevice", err)
	}
}

func TestNoDeviceWhenZeroDevices(t *testing.T) {
	f := newFakeGPU()
	f.devices = 0
	useDriver(t, func() (*driverAPI, error) { return f.driver(), nil })
	if _, err := Devices(); !errors.Is(err, ErrNoDevice) {
		t.Fatalf("Devices: got %v, want ErrNoDevice", err)
	}
	if _, err := Open(0); !errors.Is(err, ErrNoDevice) {
		t.Fatalf("Open: got %v, want ErrNoDevice", err)
	}
}

func TestInitFailureIsDriverError(t *testing.T) {
	f := newFakeGPU()
	f.initResult = 999
	useDriver(t, func() (*driverAPI, error) { return f.driver(), nil })
	_, err := Open(0)
	var e *Error
	if !errors.As(err, &e) || e.Code != 999 || e.Op != "cuInit" || errors.Is(err, ErrNoDevice) {
		t.Fatalf("got %v, want a cuInit *Error with code 999", err)
	}
}

func TestOpenBadOrdinal(t *testing.T) {
	openFake(t, newFakeGPU())
	if _, err := Open(3); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Open(3) on one device: got %v", err)
	}
}

func TestErrorMapping(t *testing.T) {
	f := newFakeGPU()
	drv := f.driver()
	cases := []struct {
		r      result
		name   string
		target error
	}{
		{resultOutOfMemory, "CUDA_ERROR_OUT_OF_MEMORY", ErrOutOfMemory},
		{resultNoDevice, "CUDA_ERROR_NO_DEVICE", ErrNoDevice},
		{resultDeinitialized, "CUDA_ERROR_DEINITIALIZED", ErrClosed},
		{700, "CUDA_ERROR_ILLEGAL_ADDRESS", nil},
		{4242, "CUDA_ERROR", nil},
	}
	for _, c := range cases {
		err := check(drv, "cuOp", c.r)
		var e *Error
		if !errors.As(err, &e) || e.Name != c.name || e.Code != int(c.r) || e.Op != "cuOp" {
			t.Errorf("code %d: got %#v", c.r, err)
			continue
		}
		if c.target != nil && !errors.Is(err, c.target) {
			t.Errorf("code %d: errors.Is(%v) false", c.r, c.target)
		}
		if !IsCode(err, int(c.r)) {
			t.Errorf("IsCode(%d) false", c.r)
		}
		if !strings.Contains(err.Error(), "cuOp") || !strings.Contains(err.Error(), c.name) {
			t.Errorf("message %q lacks op or name", err)
		}
	}
	if err := check(drv, "x", resultSuccess); err != nil {
		t.Errorf("success mapped to %v", err)
	}
	// 222 reads plainly.
	err := check(drv, "cuModuleLoadDataEx", resultUnsupportedPTXVer)
	if !strings.Contains(err.Error(), "CUDA_ERROR_UNSUPPORTED_PTX_VERSION") || !strings.Contains(err.Error(), "update the NVIDIA driver") {
		t.Errorf("222 message: %q", err)
	}
	// Without a driver to ask, names come from the table.
	if e := newError(nil, "op", resultOutOfMemory); e.Name != "CUDA_ERROR_OUT_OF_MEMORY" {
		t.Errorf("fallback name %q", e.Name)
	}
}

func TestPackArgs(t *testing.T) {
	s := Slice[uint32]{buf: &Buffer{ptr: 0x1000, freed: new(atomic.Bool)}, off: 8, n: 1}
	args := []any{int32(-2), uint32(3), int64(-4), uint64(1 << 40), float32(1.5), float64(-2.25), true, DevicePtr(0xabc), s, nil}
	slots, params, err := packArgs(args)
	if err != nil {
		t.Fatal(err)
	}
	want := []uint64{uint64(uint32(0xfffffffe)), 3, uint64(0xfffffffffffffffc), 1 << 40,
		uint64(math.Float32bits(1.5)), math.Float64bits(-2.25), 1, 0xabc, 0x1008, 0}
	if !slices.Equal(slots, want) {
		t.Fatalf("slots %#x, want %#x", slots, want)
	}
	for i := range params {
		if params[i] == nil || *(*uint64)(params[i]) != want[i] {
			t.Fatalf("param %d does not point at its slot", i)
		}
	}
	for _, bad := range []any{int(1), uint(1), "x", []byte{1}} {
		if _, _, err := packArgs([]any{bad}); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%T accepted", bad)
		}
	}
	freed := &Buffer{ptr: 0x2000, freed: new(atomic.Bool)}
	freed.freed.Store(true)
	for _, bad := range []any{(*Buffer)(nil), freed, Slice[uint32]{buf: freed, n: 1}} {
		if _, _, err := packArgs([]any{bad}); !errors.Is(err, ErrClosed) {
			t.Errorf("%#v accepted as a kernel argument: %v", bad, err)
		}
	}
}

func TestLaunchPassesArguments(t *testing.T) {
	f := newFakeGPU()
	d := openFake(t, f)
	k, m := probeArgs(t, d)
	out, err := Alloc[uint64](d, 8)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Launch(Dim3{2, 3, 1}, D1(64), 128, nil, int32(-1), uint32(2), int64(-3), uint64(4), float32(0.5), float64(0.25), false, out); err != nil {
		t.Fatal(err)
	}
	l := f.launches[len(f.launches)-1]
	want := []uint64{0xffffffff, 2, 0xfffffffffffffffd, 4, uint64(math.Float32bits(0.5)), math.Float64bits(0.25), 0, uint64(out.Ptr())}
	if l.kernel != "probe_args" || l.grid != (Dim3{2, 3, 1}) || l.block != D1(64) || l.shared != 128 || !slices.Equal(l.args, want) {
		t.Fatalf("launch %+v, want args %#x", l, want)
	}
	if err := k.Launch(Dim3{0, 1, 1}, D1(32), 0, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("empty grid accepted: %v", err)
	}
	if _, err := m.Function("no_such_kernel"); !IsCode(err, int(resultNotFound)) {
		t.Errorf("missing kernel: %v", err)
	}
}

func TestMemoryRoundTripFake(t *testing.T) {
	d := openFake(t, newFakeGPU())
	src := []uint32{1, 2, 3, 4, 5, 6, 7, 8}
	s, err := FromHost(d, src)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.ToHost()
	if err != nil || !slices.Equal(got, src) {
		t.Fatalf("round trip %v %v", got, err)
	}
	// Sub views address the right elements.
	sub := s.Sub(2, 5)
	part, _ := sub.ToHost()
	if !slices.Equal(part, []uint32{3, 4, 5}) {
		t.Fatalf("Sub: %v", part)
	}
	dst, _ := Alloc[uint32](d, 3)
	if err := dst.CopyFrom(sub); err != nil {
		t.Fatal(err)
	}
	if v, _ := dst.ToHost(); !slices.Equal(v, []uint32{3, 4, 5}) {
		t.Fatalf("CopyFrom: %v", v)
	}
	if err := dst.CopyFrom(s); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("length mismatch: %v", err)
	}
	if err := dst.CopyFromHost(src); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("overlong host copy: %v", err)
	}
	if _, err := View[uint64](s.Buffer(), 3, 2); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("view past the end: %v", err)
	}
	testFill(t, d, uint8(0xab))
	testFill(t, d, int16(-3))
	testFill(t, d, float32(2.5))
	testFill(t, d, uint64(0x0123456789abcdef))
}

func testFill[T Elem](t *testing.T, d *Device, v T) {
	t.Helper()
	s, err := Alloc[T](d, 33)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Free()
	if err := Fill(s, v, nil); err != nil {
		t.Fatal(err)
	}
	got, _ := s.ToHost()
	for i, x := range got {
		if x != v {
			t.Fatalf("Fill[%T] element %d = %v, want %v", v, i, x, v)
		}
	}
}

func TestOutOfMemoryFake(t *testing.T) {
	f := newFakeGPU()
	d := openFake(t, f)
	_, err := d.Alloc(int64(f.totalMem) + 1)
	if !errors.Is(err, ErrOutOfMemory) || !strings.Contains(err.Error(), "requested") {
		t.Fatalf("got %v, want ErrOutOfMemory naming the size", err)
	}
	b, err := d.Alloc(1 << 20)
	if err != nil {
		t.Fatalf("device unusable after OOM: %v", err)
	}
	b.Free()
	if _, err := d.Alloc(0); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("zero-size alloc: %v", err)
	}
}

func TestUseAfterFreeAndClose(t *testing.T) {
	f := newFakeGPU()
	useDriver(t, func() (*driverAPI, error) { return f.driver(), nil })
	d, err := Open(0)
	if err != nil {
		t.Fatal(err)
	}
	d2, err := Open(0) // a second handle on the same device
	if err != nil {
		t.Fatal(err)
	}
	s, _ := Alloc[uint32](d, 4)
	if err := s.Free(); err != nil {
		t.Fatal(err)
	}
	if err := s.Free(); !errors.Is(err, ErrClosed) {
		t.Errorf("double free: %v", err)
	}
	if err := s.CopyFromHost([]uint32{1}); !errors.Is(err, ErrClosed) {
		t.Errorf("copy after free: %v", err)
	}
	live, _ := Alloc[uint32](d2, 4)
	stream, _ := d2.NewStream()
	ev, _ := d2.NewEvent()
	pinned, _ := AllocPinned[uint32](d2, 4)

	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("double close: %v", err)
	}
	if _, err := d.Alloc(8); !errors.Is(err, ErrClosed) {
		t.Errorf("alloc on closed handle: %v", err)
	}
	// The device lives on through d2.
	if err := live.CopyFromHost([]uint32{9}); err != nil {
		t.Fatalf("buffer of a live handle: %v", err)
	}
	if err := d2.Close(); err != nil {
		t.Fatal(err)
	}
	// Last handle gone: everything made through it is closed.
	if err := live.CopyFromHost([]uint32{9}); !errors.Is(err, ErrClosed) {
		t.Errorf("buffer after device close: %v", err)
	}
	if err := stream.Synchronize(); !errors.Is(err, ErrClosed) {
		t.Errorf("stream after device close: %v", err)
	}
	if err := ev.Record(nil); !errors.Is(err, ErrClosed) {
		t.Errorf("event after device close: %v", err)
	}
	if err := pinned.Free(); !errors.Is(err, ErrClosed) {
		t.Errorf("pinned free after device close: %v", err)
	}
	if f.contexts != 0 {
		t.Errorf("%d primary contexts still retained", f.contexts)
	}
	d3, err := Open(0)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	d3.Close()
}

func TestMalformedPTXCarriesJITLog(t *testing.T) {
	d := openFake(t, newFakeGPU())
	_, err := d.LoadModule([]byte("garbage"))
	var e *Error
	if !errors.As(err, &e) || e.Code != int(resultInvalidPTX) || !strings.Contains(e.Detail, "JIT log: ptxas fatal") {
		t.Fatalf("got %v, want CUDA_ERROR_INVALID_PTX with the JIT log", err)
	}
}

// TestLineInfoKeptThroughJIT: PTX built with line info (.file directives)
// is loaded with the JIT's line-info option, so a profiler can map SASS to
// source lines; the embedded PTX, built without it, is not.
func TestLineInfoKeptThroughJIT(t *testing.T) {
	g := newFakeGPU()
	d := openFake(t, g)
	if _, err := d.LoadModule(selftestPTX); err != nil {
		t.Fatal(err)
	}
	if n := g.lineInfo.Load(); n != 0 {
		t.Fatalf("the embedded PTX asked the JIT for line info (%d loads)", n)
	}
	withLines := append(bytes.Clone(selftestPTX), "\n\t.file\t1 \"/src/selftest.cu\"\n"...) // where nvcc puts them
	if _, err := d.LoadModule(withLines); err != nil {
		t.Fatal(err)
	}
	if n := g.lineInfo.Load(); n != 1 {
		t.Fatalf("PTX with .file directives: %d loads asked for line info, want 1", n)
	}
}

func TestModulesAreCached(t *testing.T) {
	d := openFake(t, newFakeGPU())
	m1, err := d.LoadModule(selftestPTX)
	if err != nil {
		t.Fatal(err)
	}
	m2, _ := d.LoadModule(bytes.Clone(selftestPTX))
	if m1 != m2 {
		t.Fatal("same PTX loaded twice")
	}
	// The cache compares content, not length or address: PTX of the same
	// length that differs (here in a comment) is another module, and a
	// caller's buffer changed after a load does not change what it names.
	buf := bytes.Clone(selftestPTX)
	i := bytes.LastIndex(buf, []byte("//"))
	if i < 0 {
		t.Fatal("selftest PTX has no comment to change")
	}
	buf[i+2] ^= 1
	m3, err := d.LoadModule(buf)
	if err != nil {
		t.Fatal(err)
	}
	if m3 == m1 {
		t.Fatal("different PTX of the same length took the cached module")
	}
	copy(buf, selftestPTX)
	if m4, _ := d.LoadModule(buf); m4 != m1 {
		t.Fatal("the first PTX, in a buffer that held other PTX, is not the first module")
	}
	k1, _ := m1.Function("copy_v4")
	k2, _ := m1.Function("copy_v4")
	if k1 != k2 {
		t.Fatal("function looked up twice")
	}
}

func TestPinnedAsyncFake(t *testing.T) {
	d := openFake(t, newFakeGPU())
	p, err := AllocPinned[uint64](d, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Free()
	for i := range p.Data() {
		p.Data()[i] = uint64(i * i)
	}
	s, _ := Alloc[uint64](d, 8)
	st, _ := d.NewStream()
	defer st.Close()
	if err := CopyToDeviceAsync(s, p, 8, st); err != nil {
		t.Fatal(err)
	}
	if err := CopyToHostAsync(p, 0, s, st); err != nil {
		t.Fatal(err)
	}
	if err := st.Synchronize(); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		if p.Data()[i] != uint64((i+8)*(i+8)) {
			t.Fatalf("element %d = %d", i, p.Data()[i])
		}
	}
	if err := CopyToDeviceAsync(s, p, 9, st); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("pinned range overrun: %v", err)
	}
}

// TestPriorityStreamFake: the range comes from the driver, a priority
// stream is created non-blocking with the priority asked for, and it works
// as any stream.
func TestPriorityStreamFake(t *testing.T) {
	f := newFakeGPU()
	d := openFake(t, f)
	least, greatest, err := d.StreamPriorities()
	if err != nil || least != 0 || greatest != -5 {
		t.Fatalf("StreamPriorities = %d, %d, %v; want 0, -5", least, greatest, err)
	}
	st, err := d.NewPriorityStream(greatest)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	got := f.streamPrio[st.h]
	f.mu.Unlock()
	if got != [2]int32{streamNonBlocking, -5} {
		t.Errorf("cuStreamCreateWithPriority got flags, priority %v; want [%d -5]", got, streamNonBlocking)
	}
	plain, _ := d.NewStream()
	defer plain.Close()
	for _, c := range []struct {
		s    *Stream
		want int
	}{{st, -5}, {plain, 0}, {nil, 0}} {
		if p, err := c.s.Priority(); err != nil || p != c.want {
			t.Errorf("Priority = %d, %v; want %d", p, err, c.want)
		}
	}
	buf, _ := Alloc[uint32](d, 4)
	defer buf.Free()
	if err := buf.Zero(st); err != nil {
		t.Fatal(err)
	}
	if err := st.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.NewPriorityStream(1 << 40); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("a priority past int32: %v, want ErrInvalidArgument", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Priority(); !errors.Is(err, ErrClosed) {
		t.Errorf("Priority of a closed stream: %v", err)
	}
	d.Close()
	if _, err := d.NewPriorityStream(0); !errors.Is(err, ErrClosed) {
		t.Errorf("NewPriorityStream after Close: %v", err)
	}
	if _, _, err := d.StreamPriorities(); !errors.Is(err, ErrClosed) {
		t.Errorf("StreamPriorities after Close: %v", err)
	}
}

// TestBlockingEventFake: a blocking event asks the driver for blocking
// synchronization without timing, waits like any event, refuses Elapsed,
// and a plain event keeps its timing.
func TestBlockingEventFake(t *testing.T) {
	f := newFakeGPU()
	d := openFake(t, f)
	st, _ := d.NewStream()
	defer st.Close()
	ev, err := d.NewBlockingEvent()
	if err != nil {
		t.Fatal(err)
	}
	timed, err := d.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	got, gotTimed := f.eventFlags[ev.h], f.eventFlags[timed.h]
	f.mu.Unlock()
	if got != 0x3 || gotTimed != 0 {
		t.Errorf("cuEventCreate flags: blocking %#x (want 0x3: CU_EVENT_BLOCKING_SYNC|CU_EVENT_DISABLE_TIMING), timed %#x (want 0)", got, gotTimed)
	}
	for _, e := range []*Event{ev, timed} {
		if err := e.Record(st); err != nil {
			t.Fatal(err)
		}
		if err := e.Synchronize(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Elapsed(timed, ev); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Elapsed to a blocking event: %v, want ErrInvalidArgument", err)
	}
	if _, err := Elapsed(ev, timed); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Elapsed from a blocking event: %v, want ErrInvalidArgument", err)
	}
	if _, err := Elapsed(timed, timed); err != nil {
		t.Errorf("Elapsed of timed events: %v", err)
	}
	ev.Close()
	if err := ev.Synchronize(); !errors.Is(err, ErrClosed) {
		t.Errorf("Synchronize after Close: %v", err)
	}
	timed.Close()
}

func TestConcurrentCallsFake(t *testing.T) {
	d := openFake(t, newFakeGPU())
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				v := []uint32{uint32(g), uint32(i)}
				s, err := FromHost(d, v)
				if err != nil {
					errs <- err
					return
				}
				got, err := s.ToHost()
				if err != nil || !slices.Equal(got, v) {
					errs <- errors.New("round trip mismatch")
					return
				}
				s.Free()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestTheoreticalBandwidth(t *testing.T) {
	// An H100 SXM: 2619 MHz HBM3, 5120-bit bus: 3.35 TB/s.
	p := Properties{MemoryClockKHz: 2619000, MemoryBusWidth: 5120}
	if got := p.TheoreticalBandwidth(); math.Abs(got-3.352e12) > 1e9 {
		t.Fatalf("got %.4g", got)
	}
	if s := (Properties{DriverVersion: 13000}).DriverVersionString(); s != "13.0" {
		t.Fatalf("driver version %q", s)
	}
}

// TestSymbolsBound checks that every driver symbol the bindings call is in
// the list resolved at load time, and that the list has no extras.
func TestSymbolsBound(t *testing.T) {
	src, err := os.ReadFile("libcuda.go")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, m := range regexp.MustCompile(`b\.call(?:Keep|1p)?\("(cu\w+)"`).FindAllStringSubmatch(string(src), -1) {
		used[m[1]] = true
	}
	listed := map[string]bool{}
	for _, s := range libcudaSymbols {
		listed[s] = true
		if !used[s] {
			t.Errorf("%s is resolved but never called", s)
		}
	}
	for s := range used {
		if !listed[s] {
			t.Errorf("%s is called but not in libcudaSymbols", s)
		}
	}
}

// TestBlockingCallsDoNotHoldOthers checks that while one goroutine waits in
// Stream.Synchronize, in its polling phase or blocked in the driver on its
// own thread, others still allocate and copy; that closing the device waits
// for a call blocked in the driver; and that a goroutine still polling when
// the device closes gets ErrClosed.
func TestBlockingCallsDoNotHoldOthers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		window time.Duration
	}{{"polling", time.Hour}, {"blocked", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(w time.Duration) { pollWindow = w }(pollWindow)
			pollWindow = tc.window
			f := newFakeGPU()
			f.syncGate = make(chan struct{})
			useDriver(t, func() (*driverAPI, error) { return f.driver(), nil })
			d, err := Open(0)
			if err != nil {
				t.Fatal(err)
			}
			s, _ := d.NewStream()
			synced := make(chan error, 1)
			go func() { synced <- s.Synchronize() }()
			// Wait until the synchronization is polling or blocked in the
			// driver.
			for start := time.Now(); (tc.window == 0 && f.gatedSyncs.Load() == 0) || (tc.window > 0 && f.gatedPolls.Load() == 0); {
				if time.Since(start) > 10*time.Second {
					t.Fatal("the synchronization never reached the driver")
				}
				time.Sleep(100 * time.Microsecond)
			}
			for i := range 20 { // all of this runs while the synchronization waits
				buf, err := FromHost(d, []uint32{uint32(i)})
				if err != nil {
					t.Fatal(err)
				}
				if got, err := buf.ToHost(); err != nil || got[0] != uint32(i) {
					t.Fatalf("copy during a wait: %v %v", got, err)
				}
				buf.Free()
			}
			select {
			case err := <-synced:
				t.Fatalf("Synchronize returned before the work was done: %v", err)
			default:
			}
			closed := make(chan error, 1)
			go func() { closed <- d.Close() }()
			if tc.window == 0 {
				select {
				case err := <-closed:
					t.Fatalf("Close returned while a call was blocked in the driver: %v", err)
				case <-time.After(20 * time.Millisecond):
				}
				close(f.syncGate)
				if err := <-synced; err != nil {
					t.Fatalf("Synchronize: %v", err)
				}
			} else {
				if err := <-synced; !errors.Is(err, ErrClosed) {
					t.Fatalf("Synchronize polling across Close: %v, want ErrClosed", err)
				}
				close(f.syncGate)
			}
			if err := <-closed; err != nil {
				t.Fatalf("Close: %v", err)
			}
			if err := s.Synchronize(); !errors.Is(err, ErrClosed) {
				t.Fatalf("Synchronize after Close: %v", err)
			}
		})
	}
}

// TestCloseRacingModuleLoads closes the device while other goroutines load
// modules: Close must neither deadlock with a load in flight nor leave a
// module loaded after it returns.
func TestCloseRacingModuleLoads(t *testing.T) {
	for round := range 50 {
		f := newFakeGPU()
		useDriver(t, func() (*driverAPI, error) { return f.driver(), nil })
		d, err := Open(0)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					ptx := fmt.Appendf(nil, "// Code generated for round %d, loader %d, load %d\n", round, g, i)
					if _, err := d.LoadModule(ptx); err != nil {
						if !errors.Is(err, ErrClosed) {
							t.Errorf("load: %v", err)
						}
						return
					}
				}
			}()
		}
		time.Sleep(time.Duration(round%5) * 100 * time.Microsecond)
		done := make(chan error, 1)
		go func() { done <- d.Close() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Close deadlocked with module loads in flight")
		}
		wg.Wait()
	}
}

// TestBufferLivesThroughItsCopy drops the last reference to a buffer while a
// large copy out of it runs (the fake collects garbage inside the copy): its
// cleanup must not free it mid-copy.
func TestBufferLivesThroughItsCopy(t *testing.T) {
	f := newFakeGPU()
	d := openFake(t, f)
	s, err := Alloc[byte](d, 2<<20) // a large copy
	if err != nil {
		t.Fatal(err)
	}
	f.gcInCopy = true
	defer func() { f.gcInCopy = false }()
	if _, err := s.ToHost(); err != nil { // the last use of s
		t.Fatalf("copy out of a buffer whose last reference is the copy: %v", err)
	}
}

// TestNilStreamIsSynchronous checks that operations given the nil stream wait
// for the legacy default stream before returning, and that host-to-device
// copies wait for their DMA.
func TestNilStreamIsSynchronous(t *testing.T) {
	f := newFakeGPU()
	d := openFake(t, f)
	a, _ := FromHost(d, []uint32{1, 2, 3, 4})
	b, _ := Alloc[uint32](d, 4)
	for name, op := range map[string]func() error{
		"CopyFromHost": func() error { return a.CopyFromHost([]uint32{5, 6, 7, 8}) },
		"CopyFrom":     func() error { return b.CopyFrom(a) },
		"Zero":         func() error { return b.Zero(nil) },
		"Fill":         func() error { return Fill(b, 9, nil) },
		"Fill64":       func() error { s, _ := Alloc[uint64](d, 2); return Fill(s, 9, nil) },
	} {
		before := f.defaultWait.Load()
		if err := op(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if f.defaultWait.Load() == before {
			t.Errorf("%s on the nil stream returned without waiting for it", name)
		}
	}
	s, _ := d.NewStream()
	defer s.Close()
	before := f.defaultWait.Load()
	if err := b.Zero(s); err != nil {
		t.Fatal(err)
	}
	if f.defaultWait.Load() != before {
		t.Error("an operation on a created stream waited for the default stream")
	}
}

func TestPinnedDataDiesWithTheDevice(t *testing.T) {
	f := newFakeGPU()
	useDriver(t, func() (*driverAPI, error) { return f.driver(), nil })
	d, _ := Open(0)
	p, err := AllocPinned[uint32](d, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Data()) != 4 {
		t.Fatal("no data while the device is open")
	}
	d.Close()
	if p.Data() != nil {
		t.Fatal("pinned memory still handed out after the device closed")
	}
}

func TestJITLogWithoutTerminator(t *testing.T) {
	if got := jitLog([]byte("ptxas error, no NUL")); got != "ptxas error, no NUL" {
		t.Fatalf("got %q", got)
	}
	if got := jitLog([]byte("line\x00garbage")); got != "line" {
		t.Fatalf("got %q", got)
	}
}

func TestPinnedDevicePtrFake(t *testing.T) {
	d := openFake(t, newFakeGPU())
	p, err := AllocPinned[uint64](d, 4)
	if err != nil {
		t.Fatal(err)
	}
	dp, err := p.DevicePtr()
	if err != nil || dp == 0 {
		t.Fatalf("DevicePtr: %#x, %v", dp, err)
	}
	p.Free()
	if _, err := p.DevicePtr(); !errors.Is(err, ErrClosed) {
		t.Fatalf("DevicePtr after Free: %v", err)
	}
}

// TestCallsCounted: Device.Calls counts each kind of driver work once, on
// every handle of the device, and a closed device's counts stay readable.
func TestCallsCounted(t *testing.T) {
	f := newFakeGPU()
	d := openFake(t, f)
	k, _ := probeArgs(t, d)
	st, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	before := d.Calls()
	out, err := Alloc[uint64](d, 8) // one alloc
	if err != nil {
		t.Fatal(err)
	}
	p, err := AllocPinned[uint64](d, 8) // one alloc
	if err != nil {
		t.Fatal(err)
	}
	for range 3 { // three launches on a stream: no wait
		if err := k.Launch(D1(1), D1(32), 0, st, probeArgValues(out)...); err != nil {
			t.Fatal(err)
		}
	}
	if err := out.Zero(st); err != nil { // one memset
		t.Fatal(err)
	}
	if err := CopyToHostAsync(p, 0, out, st); err != nil { // one async copy
		t.Fatal(err)
	}
	if err := st.Synchronize(); err != nil { // one wait
		t.Fatal(err)
	}
	host := make([]uint64, 8)
	if err := out.CopyToHost(host); err != nil { // one synchronous copy
		t.Fatal(err)
	}
	if err := p.Free(); err != nil { // one free
		t.Fatal(err)
	}
	if err := out.Free(); err != nil { // one free
		t.Fatal(err)
	}
	want := Calls{Launches: 3, Memsets: 1, Copies: 2, SyncCopies: 1, Waits: 1, Allocs: 2, Frees: 2}
	if got := d.Calls().Sub(before); got != want {
		t.Fatalf("calls %+v, want %+v", got, want)
	}
	if len(f.launches) < 3 {
		t.Fatalf("the fake saw %d launches", len(f.launches))
	}
	// A second handle sees the same device's counts; a launch on the nil
	// stream waits for it.
	d2, err := Open(0)
	if err != nil {
		t.Fatal(err)
	}
	mid := d2.Calls()
	out2, err := Alloc[uint64](d2, 8)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Launch(D1(1), D1(32), 0, nil, probeArgValues(out2)...); err != nil {
		t.Fatal(err)
	}
	if got := d.Calls().Sub(mid); got.Launches != 1 || got.Waits != 1 {
		t.Fatalf("nil-stream launch counted %+v, want one launch and one wait", got)
	}
	if err := d2.Close(); err != nil {
		t.Fatal(err)
	}
	if got := d2.Calls(); got.Launches < 4 {
		t.Fatalf("a closed handle's counts: %+v", got)
	}
}

// probeArgs loads the selftest module and returns its probe_args kernel.
func probeArgs(t *testing.T, d *Device) (*Function, *Module) {
	t.Helper()
	m, err := d.LoadModule(selftestPTX)
	if err != nil {
		t.Fatal(err)
	}
	k, err := m.Function("probe_args")
	if err != nil {
		t.Fatal(err)
	}
	return k, m
}

// probeArgValues is an argument list probe_args accepts, writing to out.
func probeArgValues(out Slice[uint64]) []any {
	return []any{int32(-1), uint32(2), int64(-3), uint64(4), float32(0.5), float64(0.25), false, out}
}

// TestErrorSticky: the kernel faults and lost contexts are sticky, out of
// memory and a launch's resources or arguments are not, and IsSticky sees
// through wrapping.
func TestErrorSticky(t *testing.T) {
	for code, want := range map[int]bool{700: true, 719: true, 716: true, 999: true, 201: true, 2: false, 701: false, 1: false, 400: false} {
		e := &Error{Op: "cuLaunchKernel", Code: code}
		if e.Sticky() != want {
			t.Errorf("code %d: Sticky %v, want %v", code, e.Sticky(), want)
		}
		if got := IsSticky(fmt.Errorf("job: %w", e)); got != want {
			t.Errorf("code %d wrapped: IsSticky %v, want %v", code, got, want)
		}
	}
	if IsSticky(errors.New("not a driver error")) {
		t.Error("IsSticky of a plain error")
	}
}
