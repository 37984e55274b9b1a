package cuda

import (
	"sync"
	"unsafe"
)

// result is a CUresult.
type result int32

const (
	resultSuccess           result = 0
	resultOutOfMemory       result = 2
	resultDeinitialized     result = 4
	resultNoDevice          result = 100
	resultInvalidDevice     result = 101
	resultInvalidPTX        result = 218
	resultUnsupportedPTXVer result = 222
	resultNotFound          result = 500
	resultNotReady          result = 600
)

// driverAPI is the table of driver entry points warpkit uses. The real table
// calls libcuda through purego (libcuda.go); tests install a fake one. Pointer
// arguments point to memory that stays alive for the call; host pointers given
// to asynchronous copies point to pinned memory that outlives the copy.
type driverAPI struct {
	init             func(flags uint32) result
	driverGetVersion func(v *int32) result
	getErrorName     func(r result, s **byte) result
	getErrorString   func(r result, s **byte) result

	deviceGetCount     func(n *int32) result
	deviceGet          func(dev *int32, ordinal int32) result
	deviceGetName      func(name *byte, n int32, dev int32) result
	deviceTotalMem     func(bytes *uint64, dev int32) result
	deviceGetAttribute func(v *int32, attr int32, dev int32) result

	primaryCtxRetain  func(ctx *uintptr, dev int32) result
	primaryCtxRelease func(dev int32) result
	ctxSetCurrent     func(ctx uintptr) result
	ctxSynchronize    func() result

	memGetInfo       func(free, total *uint64) result
	memAlloc         func(p *uint64, size uint64) result
	memFree          func(p uint64) result
	memAllocHost     func(p *unsafe.Pointer, size uint64) result
	memFreeHost      func(p unsafe.Pointer) result
	memHostGetDevPtr func(d *uint64, p unsafe.Pointer, flags uint32) result
	memcpyHtoD       func(dst uint64, src unsafe.Pointer, n uint64) result
	memcpyDtoH       func(dst unsafe.Pointer, src uint64, n uint64) result
	memcpyDtoD       func(dst, src, n uint64) result
	memcpyHtoDAsync  func(dst uint64, src unsafe.Pointer, n uint64, stream uintptr) result
	memcpyDtoHAsync  func(dst unsafe.Pointer, src uint64, n uint64, stream uintptr) result
	memcpyDtoDAsync  func(dst, src, n uint64, stream uintptr) result
	memsetD8Async    func(dst uint64, v uint8, n uint64, stream uintptr) result
	memsetD16Async   func(dst uint64, v uint16, n uint64, stream uintptr) result
	memsetD32Async   func(dst uint64, v uint32, n uint64, stream uintptr) result

	// Virtual memory management (vmm.go): address ranges reserved without
	// memory, and device memory created apart and mapped into them.
	memGetAllocationGranularity func(g *uint64, prop *memAllocationProp, option uint32) result
	memAddressReserve           func(p *uint64, size, align, addr, flags uint64) result
	memAddressFree              func(p, size uint64) result
	memCreate                   func(h *uint64, size uint64, prop *memAllocationProp, flags uint64) result
	memRelease                  func(h uint64) result
	memMap                      func(p, size, offset, h, flags uint64) result
	memUnmap                    func(p, size uint64) result
	memSetAccess                func(p, size uint64, desc *memAccessDesc, count uint64) result

	streamCreate func(s *uintptr, flags uint32) result
	// streamCreatePrio is cuStreamCreateWithPriority, streamPriority
	// cuStreamGetPriority, streamPrioRange cuCtxGetStreamPriorityRange
	// (least, greatest).
	streamCreatePrio  func(s *uintptr, flags uint32, priority int32) result
	streamPriority    func(s uintptr, priority *int32) result
	streamPrioRange   func(least, greatest *int32) result
	streamDestroy     func(s uintptr) result
	streamSynchronize func(s uintptr) result
	streamQuery       func(s uintptr) result
	eventCreate       func(e *uintptr, flags uint32) result
	eventRecord       func(e, s uintptr) result
	eventSynchronize  func(e uintptr) result
	eventQuery        func(e uintptr) result
	eventElapsedTime  func(ms *float32, start, end uintptr) result
	eventDestroy      func(e uintptr) result

	moduleLoadDataEx   func(m *uintptr, image unsafe.Pointer, nOpts uint32, opts *int32, vals *uintptr) result
	moduleUnload       func(m uintptr) result
	moduleGetFunction  func(f *uintptr, m uintptr, name *byte) result
	funcGetAttribute   func(v *int32, attr int32, f uintptr) result
	funcSetAttribute   func(f uintptr, attr int32, v int32) result
	occupancyMaxBlocks func(n *int32, f uintptr, blockSize int32, dynSmem uint64) result
	launchKernel       func(f uintptr, gx, gy, gz, bx, by, bz, smem uint32, stream uintptr, params *unsafe.Pointer) result
}

// loadDriver loads the driver table; tests replace it (see setLoaderForTest).
var loadDriver = loadLibcuda

// The driver is loaded and initialised once per process (per loader, in tests).
var (
	driverMu   sync.Mutex
	driverOnce *driverInit
)

type driverInit struct {
	once sync.Once
	drv  *driverAPI
	err  error
}

// getDriver returns the initialised driver, or an error wrapping ErrNoDevice
// when the library is absent or cuInit reports no device.
func getDriver() (*driverAPI, error) {
	driverMu.Lock()
	if driverOnce == nil {
		driverOnce = &driverInit{}
	}
	di := driverOnce
	load := loadDriver
	driverMu.Unlock()
	di.once.Do(func() {
		drv, err := load()
		if err != nil {
			di.err = noDevice("loading libcuda.so.1: %v", err)
			return
		}
		if r := drv.init(0); r != resultSuccess {
			if r == resultNoDevice {
				di.err = noDevice("cuInit: CUDA_ERROR_NO_DEVICE")
				return
			}
			di.err = newError(drv, "cuInit", r)
			return
		}
		di.drv = drv
	})
	return di.drv, di.err
}
