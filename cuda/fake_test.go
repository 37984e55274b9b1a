package cuda

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// fakeGPU is a driver fake backed by Go memory. Device addresses are synthetic
// (never real pointers) and resolved through the allocation table, so device
// memory can only be reached through the driver calls, as on a GPU.
type fakeGPU struct {
	mu          sync.Mutex
	initResult  result
	devices     int32
	totalMem    uint64
	used        uint64
	next        uint64
	allocs      map[uint64][]byte // base address -> memory
	host        map[unsafe.Pointer][]byte
	launches    []fakeLaunch
	kernelArity map[string]int
	functions   map[uintptr]string
	contexts    int                  // retained primary contexts
	threadCtx   sync.Map             // OS thread id -> the context current on it (Linux)
	wrongCtx    atomic.Int32         // calls made on a thread without a retained context current
	syncGate    chan struct{}        // if non-nil, created streams (not stream 0) are busy until it closes
	gcInCopy    bool                 // run the garbage collector (and its cleanups) inside device-to-host copies
	defaultWait atomic.Int32         // queries and synchronizations of stream 0
	gatedSyncs  atomic.Int32         // synchronizations blocked on syncGate now
	gatedPolls  atomic.Int32         // queries that found a syncGate stream busy
	lineInfo    atomic.Int32         // module loads that asked the JIT for line info
	eventFlags  map[uintptr]uint32   // cuEventCreate's flags, by event
	streamPrio  map[uintptr][2]int32 // cuStreamCreateWithPriority's flags and priority, by stream
}

type fakeLaunch struct {
	kernel      string
	grid, block Dim3
	shared      uint32
	args        []uint64
}

func newFakeGPU() *fakeGPU {
	return &fakeGPU{
		devices:     1,
		totalMem:    1 << 30,
		next:        0x7f0000000000,
		allocs:      map[uint64][]byte{},
		host:        map[unsafe.Pointer][]byte{},
		kernelArity: map[string]int{"probe_args": 8, "fill_u64": 3, "copy_v4": 3},
		functions:   map[uintptr]string{},
	}
}

// resolve finds the memory holding [addr, addr+n).
func (f *fakeGPU) resolve(addr, n uint64) ([]byte, bool) {
	for base, mem := range f.allocs {
		if addr >= base && addr+n <= base+uint64(len(mem)) {
			return mem[addr-base : addr-base+n], true
		}
	}
	return nil, false
}

func (f *fakeGPU) driver() *driverAPI {
	d := &driverAPI{}
	d.init = func(uint32) result { return f.initResult }
	d.driverGetVersion = func(v *int32) result { *v = 12080; return 0 }
	d.deviceGetCount = func(n *int32) result { *n = f.devices; return 0 }
	d.deviceGet = func(dev *int32, ordinal int32) result {
		if ordinal < 0 || ordinal >= f.devices {
			return resultInvalidDevice
		}
		*dev = ordinal
		return 0
	}
	d.deviceGetName = func(name *byte, n int32, dev int32) result {
		copy(unsafe.Slice(name, n), "Fake GPU\x00")
		return 0
	}
	d.deviceTotalMem = func(b *uint64, dev int32) result { *b = f.totalMem; return 0 }
	d.deviceGetAttribute = func(v *int32, attr int32, dev int32) result {
		switch attr {
		case attrMultiprocessorCount:
			*v = 4
		case attrMemoryClockRate:
			*v = 1000000
		case attrGlobalMemoryBusWidth:
			*v = 256
		default:
			*v = 1
		}
		return 0
	}
	d.primaryCtxRetain = func(ctx *uintptr, dev int32) result {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.contexts++
		*ctx = uintptr(100 + dev)
		return 0
	}
	d.primaryCtxRelease = func(dev int32) result {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.contexts--
		if f.contexts == 0 {
			f.allocs = map[uint64][]byte{} // the context's memory goes with it
			f.used = 0
		}
		return 0
	}
	d.ctxSetCurrent = func(ctx uintptr) result {
		if tid := threadID(); tid >= 0 {
			f.threadCtx.Store(tid, ctx)
		}
		return 0
	}
	d.ctxSynchronize = func() result { return 0 }
	d.memHostGetDevPtr = func(dp *uint64, p unsafe.Pointer, _ uint32) result {
		f.mu.Lock()
		defer f.mu.Unlock()
		if _, ok := f.host[p]; !ok {
			return 1 // CUDA_ERROR_INVALID_VALUE: not pinned memory of this context
		}
		*dp = uint64(uintptr(p))
		return 0
	}
	d.memGetInfo = func(free, total *uint64) result {
		f.mu.Lock()
		defer f.mu.Unlock()
		*free, *total = f.totalMem-f.used, f.totalMem
		return 0
	}
	d.memAlloc = func(p *uint64, size uint64) result {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.used+size > f.totalMem {
			return resultOutOfMemory
		}
		f.used += size
		f.allocs[f.next] = make([]byte, size)
		*p = f.next
		f.next += (size + 4095) &^ 4095
		return 0
	}
	d.memFree = func(p uint64) result {
		f.mu.Lock()
		defer f.mu.Unlock()
		mem, ok := f.allocs[p]
		if !ok {
			return 1 // CUDA_ERROR_INVALID_VALUE
		}
		f.used -= uint64(len(mem))
		delete(f.allocs, p)
		return 0
	}
	d.memAllocHost = func(p *unsafe.Pointer, size uint64) result {
		f.mu.Lock()
		defer f.mu.Unlock()
		mem := make([]byte, size)
		*p = unsafe.Pointer(&mem[0])
		f.host[*p] = mem
		return 0
	}
	d.memFreeHost = func(p unsafe.Pointer) result {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.host, p)
		return 0
	}
	copyIn := func(dst uint64, src []byte) result {
		f.mu.Lock()
		defer f.mu.Unlock()
		mem, ok := f.resolve(dst, uint64(len(src)))
		if !ok {
			return 1
		}
		copy(mem, src)
		return 0
	}
	copyOut := func(dst []byte, src uint64) result {
		if f.gcInCopy {
			runtime.GC()
			runtime.GC()
			time.Sleep(10 * time.Millisecond) // let cleanups run
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		mem, ok := f.resolve(src, uint64(len(dst)))
		if !ok {
			return 1
		}
		copy(dst, mem)
		return 0
	}
	d.memcpyHtoD = func(dst uint64, src unsafe.Pointer, n uint64) result {
		return copyIn(dst, unsafe.Slice((*byte)(src), n))
	}
	d.memcpyDtoH = func(dst unsafe.Pointer, src uint64, n uint64) result {
		return copyOut(unsafe.Slice((*byte)(dst), n), src)
	}
	d.memcpyHtoDAsync = func(dst uint64, src unsafe.Pointer, n uint64, _ uintptr) result {
		return d.memcpyHtoD(dst, src, n)
	}
	d.memcpyDtoHAsync = func(dst unsafe.Pointer, src uint64, n uint64, _ uintptr) result {
		return d.memcpyDtoH(dst, src, n)
	}
	d.memcpyDtoD = func(dst, src, n uint64) result {
		tmp := make([]byte, n)
		if r := copyOut(tmp, src); r != 0 {
			return r
		}
		return copyIn(dst, tmp)
	}
	d.memcpyDtoDAsync = func(dst, src, n uint64, _ uintptr) result { return d.memcpyDtoD(dst, src, n) }
	d.memsetD8Async = func(dst uint64, v uint8, n uint64, _ uintptr) result {
		return copyIn(dst, bytes.Repeat([]byte{v}, int(n)))
	}
	d.memsetD16Async = func(dst uint64, v uint16, n uint64, _ uintptr) result {
		return copyIn(dst, bytes.Repeat([]byte{byte(v), byte(v >> 8)}, int(n)))
	}
	d.memsetD32Async = func(dst uint64, v uint32, n uint64, _ uintptr) result {
		return copyIn(dst, bytes.Repeat([]byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)}, int(n)))
	}
	handles := uintptr(1)
	newHandle := func() uintptr { f.mu.Lock(); defer f.mu.Unlock(); handles++; return handles }
	d.streamCreate = func(s *uintptr, _ uint32) result { *s = newHandle(); return 0 }
	d.streamCreatePrio = func(s *uintptr, flags uint32, priority int32) result {
		*s = newHandle()
		f.mu.Lock()
		if f.streamPrio == nil {
			f.streamPrio = map[uintptr][2]int32{}
		}
		f.streamPrio[*s] = [2]int32{int32(flags), priority}
		f.mu.Unlock()
		return 0
	}
	d.streamPriority = func(s uintptr, priority *int32) result {
		f.mu.Lock()
		*priority = f.streamPrio[s][1] // (0 for a stream made without one)
		f.mu.Unlock()
		return 0
	}
	d.streamPrioRange = func(least, greatest *int32) result { *least, *greatest = 0, -5; return 0 }
	d.streamDestroy = func(uintptr) result { return 0 }
	d.streamSynchronize = func(h uintptr) result {
		if h == 0 {
			f.defaultWait.Add(1)
		}
		if f.syncGate != nil && h != 0 {
			f.gatedSyncs.Add(1)
			<-f.syncGate
			f.gatedSyncs.Add(-1)
		}
		return 0
	}
	d.streamQuery = func(h uintptr) result {
		if h == 0 {
			f.defaultWait.Add(1)
		}
		if f.syncGate != nil && h != 0 {
			select {
			case <-f.syncGate:
			default:
				f.gatedPolls.Add(1)
				return resultNotReady
			}
		}
		return 0
	}
	d.eventQuery = func(uintptr) result { return 0 }
	d.eventCreate = func(e *uintptr, flags uint32) result {
		*e = newHandle()
		f.mu.Lock()
		if f.eventFlags == nil {
			f.eventFlags = map[uintptr]uint32{}
		}
		f.eventFlags[*e] = flags
		f.mu.Unlock()
		return 0
	}
	d.eventRecord = func(e, s uintptr) result { return 0 }
	d.eventSynchronize = func(uintptr) result { return 0 }
	d.eventElapsedTime = func(ms *float32, a, b uintptr) result { *ms = 1.5; return 0 }
	d.eventDestroy = func(uintptr) result { return 0 }
	d.moduleLoadDataEx = func(m *uintptr, image unsafe.Pointer, nOpts uint32, opts *int32, vals *uintptr) result {
		img := []byte(cString((*byte)(image)))
		if !bytes.HasPrefix(img, []byte("// Code generated")) && !bytes.HasPrefix(img, []byte(".version")) {
			o := unsafe.Slice(opts, nOpts)
			v := unsafe.Slice((*unsafe.Pointer)(unsafe.Pointer(vals)), nOpts)
			for i, opt := range o {
				if opt == jitErrorLogBuffer {
					copy(unsafe.Slice((*byte)(v[i]), jitLogBytes), "ptxas fatal   : Unexpected token 'garbage'\x00")
				}
			}
			return resultInvalidPTX
		}
		for _, opt := range unsafe.Slice(opts, nOpts) {
			if opt == jitGenerateLineInfo {
				f.lineInfo.Add(1)
			}
		}
		*m = newHandle()
		return 0
	}
	d.moduleUnload = func(uintptr) result { return 0 }
	d.moduleGetFunction = func(fn *uintptr, m uintptr, name *byte) result {
		n := cString(name)
		if _, ok := f.kernelArity[n]; !ok {
			return resultNotFound
		}
		*fn = newHandle()
		f.mu.Lock()
		f.functions[*fn] = n
		f.mu.Unlock()
		return 0
	}
	d.funcGetAttribute = func(v *int32, attr int32, fn uintptr) result { *v = 32; return 0 }
	d.funcSetAttribute = func(fn uintptr, attr int32, v int32) result { return 0 }
	d.occupancyMaxBlocks = func(n *int32, fn uintptr, bs int32, smem uint64) result { *n = 8; return 0 }
	d.launchKernel = func(fn uintptr, gx, gy, gz, bx, by, bz, smem uint32, s uintptr, params *unsafe.Pointer) result {
		f.mu.Lock()
		defer f.mu.Unlock()
		name := f.functions[fn]
		l := fakeLaunch{kernel: name, grid: Dim3{gx, gy, gz}, block: Dim3{bx, by, bz}, shared: smem}
		if n := f.kernelArity[name]; n > 0 {
			for _, p := range unsafe.Slice(params, n) {
				l.args = append(l.args, *(*uint64)(p))
			}
		}
		f.launches = append(f.launches, l)
		if name == "fill_u64" { // emulate it, so Fill of 8-byte elements works on the fake
			mem, ok := f.resolve(l.args[0], l.args[2]*8)
			if !ok {
				return 700
			}
			for i := uint64(0); i < l.args[2]; i++ {
				binary.LittleEndian.PutUint64(mem[i*8:], l.args[1])
			}
		}
		return 0
	}
	d.getErrorName = func(r result, s **byte) result {
		name, ok := knownResults[r]
		if !ok {
			return 1
		}
		b := append([]byte(name), 0)
		*s = &b[0]
		return 0
	}
	d.getErrorString = func(r result, s **byte) result {
		b := []byte(fmt.Sprintf("fake description of %d\x00", r))
		*s = &b[0]
		return 0
	}
	// Calls that need a context check that one of the retained contexts is
	// current on the calling OS thread, as the real driver requires (on
	// Linux, where the thread's id is known).
	ok := func() bool {
		tid := threadID()
		if tid < 0 {
			return true
		}
		v, found := f.threadCtx.Load(tid)
		if !found || v.(uintptr) < 100 || v.(uintptr) >= uintptr(100+f.devices) {
			f.wrongCtx.Add(1)
			return false
		}
		return true
	}
	const resultInvalidContext = 201
	memAlloc, memcpyHtoD, memcpyDtoH := d.memAlloc, d.memcpyHtoD, d.memcpyDtoH
	launch, syncStream, query := d.launchKernel, d.streamSynchronize, d.streamQuery
	d.memAlloc = func(p *uint64, size uint64) result {
		if !ok() {
			return resultInvalidContext
		}
		return memAlloc(p, size)
	}
	d.memcpyHtoD = func(dst uint64, src unsafe.Pointer, n uint64) result {
		if !ok() {
			return resultInvalidContext
		}
		return memcpyHtoD(dst, src, n)
	}
	d.memcpyDtoH = func(dst unsafe.Pointer, src uint64, n uint64) result {
		if !ok() {
			return resultInvalidContext
		}
		return memcpyDtoH(dst, src, n)
	}
	d.launchKernel = func(fn uintptr, gx, gy, gz, bx, by, bz, smem uint32, s uintptr, params *unsafe.Pointer) result {
		if !ok() {
			return resultInvalidContext
		}
		return launch(fn, gx, gy, gz, bx, by, bz, smem, s, params)
	}
	d.streamSynchronize = func(h uintptr) result {
		if !ok() {
			return resultInvalidContext
		}
		return syncStream(h)
	}
	d.streamQuery = func(h uintptr) result {
		if !ok() {
			return resultInvalidContext
		}
		return query(h)
	}
	return d
}

// useDriver installs a driver loader for the duration of the test, with a
// fresh driver-init state and device registry, and restores the real ones.
func useDriver(t testing.TB, load func() (*driverAPI, error)) {
	t.Helper()
	driverMu.Lock()
	oldLoad, oldOnce := loadDriver, driverOnce
	loadDriver, driverOnce = load, nil
	driverMu.Unlock()
	registryMu.Lock()
	oldRegistry := registry
	registry = map[int]*deviceState{}
	registryMu.Unlock()
	t.Cleanup(func() {
		driverMu.Lock()
		loadDriver, driverOnce = oldLoad, oldOnce
		driverMu.Unlock()
		registryMu.Lock()
		registry = oldRegistry
		registryMu.Unlock()
	})
}

// openFake installs f and opens its device 0.
func openFake(t testing.TB, f *fakeGPU) *Device {
	t.Helper()
	useDriver(t, func() (*driverAPI, error) { return f.driver(), nil })
	d, err := Open(0)
	if err != nil {
		t.Fatalf("Open on the fake: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}
