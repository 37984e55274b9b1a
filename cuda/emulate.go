package cuda

import (
	"bytes"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
)

// EmulatorOptions configure an emulated device (OpenEmulated).
type EmulatorOptions struct {
	// Libraries are shared libraries built from kernel sources for the CPU
	// emulation of the GPU (package internal/emu builds them: the same .cu
	// files, compiled by the host's C++ compiler against internal/emu/emu.h).
	// A module's kernels are looked up by name in these libraries, in order;
	// a kernel none of them holds loads, and fails when launched.
	Libraries []string
	// TotalMemory is the device memory the emulated device reports and
	// allows (default 4 GiB): allocations past it fail with
	// CUDA_ERROR_OUT_OF_MEMORY, as on a GPU.
	TotalMemory uint64
	// Parallel is how many OS threads run a launch's blocks at once
	// (default GOMAXPROCS).
	Parallel int
}

// OpenEmulated opens a device that runs kernels on the CPU: for tests of
// GPU code on machines without a GPU. Device memory is host memory (mapped
// anonymously), copies are memory copies, every call is synchronous (a
// stream's work is done when its call returns), and a launch runs the
// kernel's host build from opts.Libraries on the emulation of
// internal/emu/emu.h (blocks on OS threads, the threads of a block as
// fibers switched at warp collectives). It checks kernels' logic and the host
// code that drives them, not their speed or the GPU's memory model; kernels
// take integer and pointer parameters only. Each call returns a new,
// independent device; Close frees its memory.
func OpenEmulated(opts EmulatorOptions) (*Device, error) {
	e := &emulator{
		total:    opts.TotalMemory,
		parallel: opts.Parallel,
		funcs:    []emuFunc{{}}, // handle 0 is never valid
		modules:  map[uintptr][]uintptr{},
	}
	if e.total == 0 {
		e.total = 4 << 30
	}
	if e.parallel <= 0 {
		e.parallel = runtime.GOMAXPROCS(0)
	}
	for _, path := range opts.Libraries {
		h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			e.unload()
			return nil, fmt.Errorf("cuda: emulator library %s: %w", path, err)
		}
		launch, err := purego.Dlsym(h, "emu_launch")
		if err != nil {
			e.libs = append(e.libs, emuLib{handle: h})
			e.unload()
			return nil, fmt.Errorf("cuda: emulator library %s has no emu_launch (not built against internal/emu/emu.h): %w", path, err)
		}
		e.libs = append(e.libs, emuLib{handle: h, launch: launch, path: path})
	}
	drv := e.driver()
	props, err := queryProperties(drv, 0)
	if err != nil {
		return nil, err
	}
	props.Ordinal = -1 // not in the registry of real devices
	st := &deviceState{props: props, refs: 1, modules: map[int][]*Module{}}
	st.drv = st.calls.counted(drv)
	if err := check(drv, "cuDevicePrimaryCtxRetain", drv.primaryCtxRetain(&st.ctx, 0)); err != nil {
		return nil, err
	}
	return &Device{st: st}, nil
}

// Emulated reports whether the device is an emulated one (OpenEmulated).
func (d *Device) Emulated() bool { return d != nil && d.st.emulated() }

func (st *deviceState) emulated() bool { return st.props.Ordinal == -1 }

type emuLib struct {
	handle, launch uintptr
	path           string
}

type emuFunc struct {
	name   string
	params []int
	floats bool    // a floating-point parameter: refused (passed in vector registers)
	fn     uintptr // the kernel's host build; 0 if no library holds it
	launch uintptr // its library's emu_launch
}

// emuRegion is one allocation: device memory or pinned host memory, or a
// part of a reserved range that memory is mapped into (mapped: its bytes
// belong to the reservation's mapping).
type emuRegion struct {
	base   uint64
	mem    []byte
	host   bool
	mapped bool
}

// emuReserve is an address range reserved with cuMemAddressReserve: an
// anonymous mapping without access, of which cuMemMap opens parts. Pages
// of an unmapped part stay with the process until the range is freed.
type emuReserve struct {
	base, size uint64
	mem        []byte // the whole mapping (base may sit past its start, for alignment)
}

// emuGranularity is the emulated device's granularity of virtual memory
// mappings (a GPU's is 2 MiB).
const emuGranularity = 64 << 10

// emulatedGreatestPriority is the emulation's most urgent stream priority
// (an H100's and an H200's; the emulation runs every call in order, so a
// priority changes nothing but what Stream.Priority reports).
const emulatedGreatestPriority int32 = -5

type emulator struct {
	total    uint64
	parallel int
	libs     []emuLib

	mu      sync.Mutex
	used    uint64
	regions []emuRegion // sorted by base
	// Virtual memory management: reserved ranges, and physical allocations
	// (cuMemCreate handles) by their sizes.
	reserves   []emuReserve
	handles    map[uint64]uint64
	nextHandle uint64
	funcs      []emuFunc
	modules    map[uintptr][]uintptr // module handle -> its functions
	nextMod    uintptr
	lastErr    []byte // the message of the last failed launch, NUL-terminated
	events     map[uintptr]time.Time
	nextEv     atomic.Uintptr
}

func (e *emulator) unload() {
	for _, l := range e.libs {
		purego.Dlclose(l.handle)
	}
	e.libs = nil
}

const (
	resultInvalidValue  result = 1
	resultLaunchFailed  result = 719
	resultInvalidHandle result = 400
)

// resolve returns the bytes [addr, addr+n) of one region.
func (e *emulator) resolve(addr, n uint64) ([]byte, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	i := sort.Search(len(e.regions), func(i int) bool { return e.regions[i].base > addr }) - 1
	if i < 0 {
		return nil, false
	}
	r := e.regions[i]
	if addr+n < addr {
		return nil, false
	}
	if end := r.base + uint64(len(r.mem)); addr+n > end {
		// Parts mapped side by side in one reserved range are one span of
		// its mapping, as a GPU's copies and fills see them.
		if !r.mapped || addr >= end {
			return nil, false
		}
		for j := i + 1; j < len(e.regions) && end < addr+n; j++ {
			q := e.regions[j]
			if !q.mapped || q.base != end {
				return nil, false
			}
			end = q.base + uint64(len(q.mem))
		}
		v := e.reservation(addr, n)
		if end < addr+n || v < 0 {
			return nil, false
		}
		return e.reserves[v].bytesAt(addr, n), true
	}
	return r.mem[addr-r.base : addr-r.base+n], true
}

func (e *emulator) alloc(size uint64, host bool) (uint64, []byte, result) {
	if size == 0 {
		return 0, nil, resultInvalidValue
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !host && e.used+size > e.total {
		return 0, nil, resultOutOfMemory
	}
	mem, err := syscall.Mmap(-1, 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
	if err != nil {
		return 0, nil, resultOutOfMemory
	}
	base := uint64(uintptr(unsafe.Pointer(&mem[0])))
	e.insertRegion(emuRegion{base: base, mem: mem, host: host})
	if !host {
		e.used += size
	}
	return base, mem, resultSuccess
}

func (e *emulator) free(base uint64, host bool) result {
	e.mu.Lock()
	defer e.mu.Unlock()
	i := sort.Search(len(e.regions), func(i int) bool { return e.regions[i].base >= base })
	if i == len(e.regions) || e.regions[i].base != base || e.regions[i].host != host || e.regions[i].mapped {
		return resultInvalidValue
	}
	r := e.regions[i]
	e.regions = append(e.regions[:i], e.regions[i+1:]...)
	if !host {
		e.used -= uint64(len(r.mem))
	}
	syscall.Munmap(r.mem)
	return resultSuccess
}

func (e *emulator) freeAll() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range e.regions {
		if !r.mapped {
			syscall.Munmap(r.mem)
		}
	}
	for _, v := range e.reserves {
		syscall.Munmap(v.mem)
	}
	e.regions, e.reserves, e.handles = nil, nil, nil
	e.used = 0
}

// insertRegion adds r to the sorted regions (e.mu held).
func (e *emulator) insertRegion(r emuRegion) {
	i := sort.Search(len(e.regions), func(i int) bool { return e.regions[i].base > r.base })
	e.regions = append(e.regions, emuRegion{})
	copy(e.regions[i+1:], e.regions[i:])
	e.regions[i] = r
}

// reserve is cuMemAddressReserve: size bytes of address space, aligned to
// align (0: the granularity), with no access.
func (e *emulator) reserve(size, align uint64) (uint64, result) {
	if align == 0 {
		align = emuGranularity
	}
	if size == 0 || size%emuGranularity != 0 || align&(align-1) != 0 {
		return 0, resultInvalidValue
	}
	mem, err := syscall.Mmap(-1, 0, int(size+align), syscall.PROT_NONE, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
	if err != nil {
		return 0, resultOutOfMemory
	}
	start := uint64(uintptr(unsafe.Pointer(&mem[0])))
	base := (start + align - 1) &^ (align - 1)
	e.mu.Lock()
	e.reserves = append(e.reserves, emuReserve{base: base, size: size, mem: mem})
	e.mu.Unlock()
	return base, resultSuccess
}

// reservation returns the index of the reserved range holding [p, p+n)
// (e.mu held), or -1.
func (e *emulator) reservation(p, n uint64) int {
	for i, v := range e.reserves {
		if p >= v.base && p+n <= v.base+v.size && p+n >= p {
			return i
		}
	}
	return -1
}

// bytesAt views [p, p+n) of reservation v.
func (v emuReserve) bytesAt(p, n uint64) []byte {
	start := uint64(uintptr(unsafe.Pointer(&v.mem[0])))
	return v.mem[p-start : p-start+n : p-start+n]
}

// vmm installs the virtual memory management calls.
func (e *emulator) vmm(d *driverAPI) {
	d.memGetAllocationGranularity = func(g *uint64, _ *memAllocationProp, _ uint32) result {
		*g = emuGranularity
		return resultSuccess
	}
	d.memAddressReserve = func(p *uint64, size, align, addr, _ uint64) result {
		if addr != 0 {
			return resultInvalidValue // no fixed addresses
		}
		base, r := e.reserve(size, align)
		*p = base
		return r
	}
	d.memAddressFree = func(p, size uint64) result {
		e.mu.Lock()
		defer e.mu.Unlock()
		for i, v := range e.reserves {
			if v.base != p || v.size != size {
				continue
			}
			for _, r := range e.regions {
				if r.mapped && r.base >= v.base && r.base < v.base+v.size {
					return resultInvalidValue // still mapped
				}
			}
			syscall.Munmap(v.mem)
			e.reserves = append(e.reserves[:i], e.reserves[i+1:]...)
			return resultSuccess
		}
		return resultInvalidValue
	}
	d.memCreate = func(h *uint64, size uint64, _ *memAllocationProp, _ uint64) result {
		if size == 0 || size%emuGranularity != 0 {
			return resultInvalidValue
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.used+size > e.total {
			return resultOutOfMemory
		}
		if e.handles == nil {
			e.handles = map[uint64]uint64{}
		}
		e.nextHandle++
		e.handles[e.nextHandle] = size
		e.used += size
		*h = e.nextHandle
		return resultSuccess
	}
	d.memRelease = func(h uint64) result {
		e.mu.Lock()
		defer e.mu.Unlock()
		size, found := e.handles[h]
		if !found {
			return resultInvalidHandle
		}
		delete(e.handles, h)
		e.used -= size
		return resultSuccess
	}
	d.memMap = func(p, size, offset, h, _ uint64) result {
		e.mu.Lock()
		defer e.mu.Unlock()
		if hs, found := e.handles[h]; !found || offset != 0 || size != hs || p%emuGranularity != 0 {
			return resultInvalidValue
		}
		i := e.reservation(p, size)
		if i < 0 {
			return resultInvalidValue
		}
		for _, r := range e.regions {
			if r.base < p+size && p < r.base+uint64(len(r.mem)) {
				return resultInvalidValue // overlaps a mapped part
			}
		}
		mem := e.reserves[i].bytesAt(p, size)
		if err := syscall.Mprotect(mem, syscall.PROT_READ|syscall.PROT_WRITE); err != nil {
			return resultOutOfMemory
		}
		e.insertRegion(emuRegion{base: p, mem: mem, mapped: true})
		return resultSuccess
	}
	d.memSetAccess = func(p, size uint64, _ *memAccessDesc, count uint64) result {
		if count == 0 {
			return resultInvalidValue
		}
		if _, found := e.resolve(p, size); !found {
			return resultInvalidValue
		}
		return resultSuccess
	}
	d.memUnmap = func(p, size uint64) result {
		e.mu.Lock()
		defer e.mu.Unlock()
		for i, r := range e.regions {
			if r.mapped && r.base == p && uint64(len(r.mem)) == size {
				syscall.Mprotect(r.mem, syscall.PROT_NONE)
				e.regions = append(e.regions[:i], e.regions[i+1:]...)
				return resultSuccess
			}
		}
		return resultInvalidValue
	}
}

// copyMem copies n bytes between two addresses of regions.
func (e *emulator) copyMem(dst, src, n uint64) result {
	if n == 0 {
		return resultSuccess
	}
	d, ok1 := e.resolve(dst, n)
	s, ok2 := e.resolve(src, n)
	if !ok1 || !ok2 {
		return resultInvalidValue
	}
	copy(d, s)
	return resultSuccess
}

// hostBytes views n bytes of host memory at p: pinned memory of this
// emulator, or Go memory the caller keeps alive for the call.
func hostBytes(p unsafe.Pointer, n uint64) []byte { return unsafe.Slice((*byte)(p), n) }

var (
	emuName      = []byte("warpkit CPU emulation\x00")
	emuNoErr     = []byte("no error\x00")
	emuErrorName = []byte("CUDA_ERROR\x00")
)

func (e *emulator) driver() *driverAPI {
	d := &driverAPI{}
	ok := func() result { return resultSuccess }
	d.init = func(uint32) result { return resultSuccess }
	d.driverGetVersion = func(v *int32) result { *v = 12080; return resultSuccess }
	d.getErrorName = func(r result, s **byte) result {
		if n, found := knownResults[r]; found {
			b := append([]byte(n), 0)
			*s = &b[0]
			return resultSuccess
		}
		*s = &emuErrorName[0]
		return resultSuccess
	}
	d.getErrorString = func(r result, s **byte) result {
		e.mu.Lock()
		defer e.mu.Unlock()
		if r == resultLaunchFailed && e.lastErr != nil {
			*s = &e.lastErr[0]
			return resultSuccess
		}
		if r == resultSuccess {
			*s = &emuNoErr[0]
			return resultSuccess
		}
		b := []byte(fmt.Sprintf("emulated driver result %d\x00", r))
		*s = &b[0]
		return resultSuccess
	}
	d.deviceGetCount = func(n *int32) result { *n = 1; return resultSuccess }
	d.deviceGet = func(dev *int32, ordinal int32) result { *dev = 0; return resultSuccess }
	d.deviceGetName = func(name *byte, n int32, dev int32) result {
		copy(unsafe.Slice(name, n), emuName)
		return resultSuccess
	}
	d.deviceTotalMem = func(b *uint64, dev int32) result { *b = e.total; return resultSuccess }
	d.deviceGetAttribute = func(v *int32, attr int32, dev int32) result {
		switch attr {
		case attrMultiprocessorCount:
			*v = 4
		case attrComputeCapabilityMajor:
			*v = 7
		case attrComputeCapabilityMinor:
			*v = 0
		case attrMemoryClockRate:
			*v = 1000000
		case attrGlobalMemoryBusWidth:
			*v = 256
		case attrClockRate:
			*v = 1000000
		case attrL2CacheSize:
			*v = 4 << 20
		case attrMaxThreadsPerSM:
			*v = 2048
		case attrMaxSharedMemoryPerSM, attrMaxSharedMemPerBlockOpt:
			*v = 48 << 10
		default:
			*v = 1
		}
		return resultSuccess
	}
	d.primaryCtxRetain = func(ctx *uintptr, dev int32) result { *ctx = 1; return resultSuccess }
	d.primaryCtxRelease = func(dev int32) result {
		e.freeAll()
		e.unload()
		return resultSuccess
	}
	d.ctxSetCurrent = func(uintptr) result { return resultSuccess }
	d.ctxSynchronize = ok
	d.memGetInfo = func(free, total *uint64) result {
		e.mu.Lock()
		defer e.mu.Unlock()
		*free, *total = e.total-e.used, e.total
		return resultSuccess
	}
	d.memAlloc = func(p *uint64, size uint64) result {
		base, _, r := e.alloc(size, false)
		*p = base
		return r
	}
	d.memFree = func(p uint64) result { return e.free(p, false) }
	e.vmm(d)
	d.memAllocHost = func(p *unsafe.Pointer, size uint64) result {
		_, mem, r := e.alloc(size, true)
		if r == resultSuccess {
			*p = unsafe.Pointer(&mem[0])
		}
		return r
	}
	d.memFreeHost = func(p unsafe.Pointer) result { return e.free(uint64(uintptr(p)), true) }
	d.memHostGetDevPtr = func(dp *uint64, p unsafe.Pointer, _ uint32) result {
		if _, found := e.resolve(uint64(uintptr(p)), 1); !found {
			return resultInvalidValue
		}
		*dp = uint64(uintptr(p))
		return resultSuccess
	}
	d.memcpyHtoD = func(dst uint64, src unsafe.Pointer, n uint64) result {
		b, found := e.resolve(dst, n)
		if !found {
			return resultInvalidValue
		}
		copy(b, hostBytes(src, n))
		return resultSuccess
	}
	d.memcpyDtoH = func(dst unsafe.Pointer, src uint64, n uint64) result {
		b, found := e.resolve(src, n)
		if !found {
			return resultInvalidValue
		}
		copy(hostBytes(dst, n), b)
		return resultSuccess
	}
	d.memcpyDtoD = func(dst, src, n uint64) result { return e.copyMem(dst, src, n) }
	d.memcpyHtoDAsync = func(dst uint64, src unsafe.Pointer, n uint64, _ uintptr) result {
		return d.memcpyHtoD(dst, src, n)
	}
	d.memcpyDtoHAsync = func(dst unsafe.Pointer, src uint64, n uint64, _ uintptr) result {
		return d.memcpyDtoH(dst, src, n)
	}
	d.memcpyDtoDAsync = func(dst, src, n uint64, _ uintptr) result { return e.copyMem(dst, src, n) }
	d.memsetD8Async = func(dst uint64, v uint8, n uint64, _ uintptr) result {
		b, found := e.resolve(dst, n)
		if !found {
			return resultInvalidValue
		}
		fillPattern(b, []byte{v})
		return resultSuccess
	}
	d.memsetD16Async = func(dst uint64, v uint16, n uint64, _ uintptr) result {
		b, found := e.resolve(dst, 2*n)
		if !found {
			return resultInvalidValue
		}
		fillPattern(b, []byte{byte(v), byte(v >> 8)})
		return resultSuccess
	}
	d.memsetD32Async = func(dst uint64, v uint32, n uint64, _ uintptr) result {
		b, found := e.resolve(dst, 4*n)
		if !found {
			return resultInvalidValue
		}
		fillPattern(b, []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)})
		return resultSuccess
	}

	// Streams and events: every call is synchronous, so a stream is always
	// idle and an event is reached when it is recorded.
	var nextStream atomic.Uintptr
	// Priorities are kept (Stream.Priority reports them) and otherwise
	// ignored.
	var priorities sync.Map // stream handle -> int32
	d.streamCreate = func(s *uintptr, _ uint32) result { *s = nextStream.Add(1); return resultSuccess }
	d.streamCreatePrio = func(s *uintptr, _ uint32, priority int32) result {
		*s = nextStream.Add(1)
		priorities.Store(*s, max(emulatedGreatestPriority, min(0, priority)))
		return resultSuccess
	}
	d.streamPriority = func(s uintptr, priority *int32) result {
		*priority = 0
		if p, ok := priorities.Load(s); ok {
			*priority = p.(int32)
		}
		return resultSuccess
	}
	d.streamPrioRange = func(least, greatest *int32) result {
		*least, *greatest = 0, emulatedGreatestPriority
		return resultSuccess
	}
	d.streamDestroy = func(uintptr) result { return resultSuccess }
	d.streamSynchronize = func(uintptr) result { return resultSuccess }
	d.streamQuery = func(uintptr) result { return resultSuccess }
	d.eventCreate = func(ev *uintptr, _ uint32) result {
		*ev = e.nextEv.Add(1)
		e.mu.Lock()
		if e.events == nil {
			e.events = map[uintptr]time.Time{}
		}
		e.events[*ev] = time.Time{}
		e.mu.Unlock()
		return resultSuccess
	}
	d.eventRecord = func(ev, _ uintptr) result {
		e.mu.Lock()
		defer e.mu.Unlock()
		if _, found := e.events[ev]; !found {
			return resultInvalidHandle
		}
		e.events[ev] = time.Now()
		return resultSuccess
	}
	d.eventSynchronize = func(uintptr) result { return resultSuccess }
	d.eventQuery = func(uintptr) result { return resultSuccess }
	d.eventElapsedTime = func(ms *float32, a, b uintptr) result {
		e.mu.Lock()
		defer e.mu.Unlock()
		ta, ok1 := e.events[a]
		tb, ok2 := e.events[b]
		if !ok1 || !ok2 || ta.IsZero() || tb.IsZero() {
			return resultInvalidHandle
		}
		*ms = float32(tb.Sub(ta).Seconds() * 1e3)
		return resultSuccess
	}
	d.eventDestroy = func(ev uintptr) result {
		e.mu.Lock()
		defer e.mu.Unlock()
		delete(e.events, ev)
		return resultSuccess
	}

	// Modules: a PTX image names its kernels and their parameters; each
	// kernel runs from the first library that exports its name.
	d.moduleLoadDataEx = func(m *uintptr, image unsafe.Pointer, _ uint32, _ *int32, _ *uintptr) result {
		var text []byte
		for p := (*byte)(image); ; p = (*byte)(unsafe.Add(unsafe.Pointer(p), 1)) {
			if *p == 0 {
				break
			}
			text = append(text, *p)
		}
		table, floats, err := parsePTX(text)
		if err != nil {
			return resultInvalidPTX
		}
		names := make([]string, 0, len(table))
		for name := range table {
			names = append(names, name)
		}
		sort.Strings(names)
		e.mu.Lock()
		defer e.mu.Unlock()
		e.nextMod++
		var fs []uintptr
		for _, name := range names {
			f := emuFunc{name: name, params: table[name], floats: floats[name]}
			for _, l := range e.libs {
				if sym, err := purego.Dlsym(l.handle, name); err == nil {
					f.fn, f.launch = sym, l.launch
					break
				}
			}
			e.funcs = append(e.funcs, f)
			fs = append(fs, uintptr(len(e.funcs)-1))
		}
		e.modules[e.nextMod] = fs
		*m = e.nextMod
		return resultSuccess
	}
	d.moduleUnload = func(m uintptr) result {
		e.mu.Lock()
		defer e.mu.Unlock()
		delete(e.modules, m)
		return resultSuccess
	}
	d.moduleGetFunction = func(f *uintptr, m uintptr, name *byte) result {
		n := cString(name)
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, h := range e.modules[m] {
			if e.funcs[h].name == n {
				*f = h
				return resultSuccess
			}
		}
		return resultNotFound
	}
	d.funcGetAttribute = func(v *int32, attr int32, f uintptr) result {
		switch attr {
		case funcAttrMaxThreadsPerBlock:
			*v = 1024
		case funcAttrNumRegs:
			*v = 32
		default:
			*v = 0
		}
		return resultSuccess
	}
	d.funcSetAttribute = func(uintptr, int32, int32) result { return resultSuccess }
	d.occupancyMaxBlocks = func(n *int32, _ uintptr, blockSize int32, _ uint64) result {
		*n = max(1, min(4, 2048/max(blockSize, 1)))
		return resultSuccess
	}
	d.launchKernel = func(h uintptr, gx, gy, gz, bx, by, bz, smem uint32, _ uintptr, params *unsafe.Pointer) result {
		e.mu.Lock()
		if h == 0 || h >= uintptr(len(e.funcs)) {
			e.mu.Unlock()
			return resultInvalidHandle
		}
		f := e.funcs[h]
		e.mu.Unlock()
		fail := func(format string, args ...any) result {
			msg := fmt.Sprintf("emulated launch of %s: ", f.name) + fmt.Sprintf(format, args...)
			e.mu.Lock()
			e.lastErr = append([]byte(msg), 0)
			e.mu.Unlock()
			return resultLaunchFailed
		}
		if f.fn == 0 {
			return fail("no emulator library holds this kernel (build its source with internal/emu)")
		}
		if gy != 1 || gz != 1 || by != 1 || bz != 1 {
			return fail("grid %dx%dx%d block %dx%dx%d: the emulation runs 1-D grids and blocks only", gx, gy, gz, bx, by, bz)
		}
		if smem != 0 {
			return fail("%d bytes of dynamic shared memory: the emulation has static shared memory only", smem)
		}
		if f.floats {
			return fail("a floating-point parameter: the emulation passes integers and pointers only")
		}
		args := make([]uint64, len(f.params)+1)
		if len(f.params) > 0 {
			ps := unsafe.Slice(params, len(f.params))
			for i, size := range f.params {
				if size > 8 {
					return fail("parameter %d is %d bytes: the emulation passes integers and pointers only", i, size)
				}
				// packArgs gives every argument an 8-byte slot, zero-extended.
				args[i] = *(*uint64)(ps[i])
			}
		}
		errBuf := make([]byte, 512)
		r, _, _ := purego.SyscallN(f.launch, f.fn, uintptr(gx), uintptr(bx), uintptr(unsafe.Pointer(&args[0])),
			uintptr(len(f.params)), uintptr(e.parallel), uintptr(unsafe.Pointer(&errBuf[0])), uintptr(len(errBuf)))
		runtime.KeepAlive(args)
		runtime.KeepAlive(errBuf)
		if int32(r) != 0 {
			if i := bytes.IndexByte(errBuf, 0); i >= 0 {
				errBuf = errBuf[:i]
			}
			return fail("%s", errBuf)
		}
		return resultSuccess
	}
	return d
}

// fillPattern fills b (a whole number of patterns long) with pattern,
// doubling copies rather than a store per element: the emulated pools are
// tens of MiB.
func fillPattern(b, pattern []byte) {
	if len(b) == 0 {
		return
	}
	n := copy(b, pattern)
	for n < len(b) {
		n += copy(b[n:], b[:n])
	}
}
