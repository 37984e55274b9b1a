package cuda

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/ebitengine/purego"
)

// libcudaNames are tried in order; the unversioned name is for unusual installs.
var libcudaNames = []string{"libcuda.so.1", "libcuda.so"}

// libcudaSymbols lists every entry point the closures below call.
var libcudaSymbols = []string{
	"cuInit", "cuDriverGetVersion", "cuGetErrorName", "cuGetErrorString",
	"cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetName", "cuDeviceTotalMem_v2", "cuDeviceGetAttribute",
	"cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease_v2", "cuCtxSetCurrent", "cuCtxSynchronize",
	"cuMemGetInfo_v2", "cuMemAlloc_v2", "cuMemFree_v2", "cuMemAllocHost_v2", "cuMemFreeHost", "cuMemHostGetDevicePointer_v2",
	"cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuMemcpyDtoD_v2",
	"cuMemcpyHtoDAsync_v2", "cuMemcpyDtoHAsync_v2", "cuMemcpyDtoDAsync_v2", "cuMemsetD8Async", "cuMemsetD16Async", "cuMemsetD32Async",
	"cuMemGetAllocationGranularity", "cuMemAddressReserve", "cuMemAddressFree", "cuMemCreate", "cuMemRelease",
	"cuMemMap", "cuMemUnmap", "cuMemSetAccess",
	"cuStreamCreate", "cuStreamCreateWithPriority", "cuStreamGetPriority", "cuCtxGetStreamPriorityRange", "cuStreamDestroy_v2", "cuStreamSynchronize", "cuStreamQuery",
	"cuEventCreate", "cuEventRecord", "cuEventSynchronize", "cuEventQuery", "cuEventElapsedTime", "cuEventDestroy_v2",
	"cuModuleLoadDataEx", "cuModuleUnload", "cuModuleGetFunction", "cuFuncGetAttribute", "cuFuncSetAttribute",
	"cuOccupancyMaxActiveBlocksPerMultiprocessor", "cuLaunchKernel",
}

// loadLibcuda opens libcuda and binds every entry point in driverAPI, using the
// _v2 symbols where the API has them. It fails if the library or any symbol is
// missing.
func loadLibcuda() (*driverAPI, error) {
	var lib uintptr
	var first error
	for _, name := range libcudaNames {
		h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err == nil {
			lib = h
			break
		}
		if first == nil {
			first = err // the versioned name's reason is the one that matters
		}
	}
	if lib == 0 {
		return nil, first
	}
	b := binder{lib: lib}
	d := &driverAPI{}
	d.init = func(flags uint32) result { return b.call("cuInit", uintptr(flags)) }
	d.driverGetVersion = func(v *int32) result { return b.call1p("cuDriverGetVersion", unsafe.Pointer(v)) }
	d.getErrorName = func(r result, s **byte) result {
		return b.callKeep("cuGetErrorName", unsafe.Pointer(s), uintptr(r), uintptr(unsafe.Pointer(s)))
	}
	d.getErrorString = func(r result, s **byte) result {
		return b.callKeep("cuGetErrorString", unsafe.Pointer(s), uintptr(r), uintptr(unsafe.Pointer(s)))
	}
	d.deviceGetCount = func(n *int32) result { return b.call1p("cuDeviceGetCount", unsafe.Pointer(n)) }
	d.deviceGet = func(dev *int32, ordinal int32) result {
		return b.callKeep("cuDeviceGet", unsafe.Pointer(dev), uintptr(unsafe.Pointer(dev)), uintptr(ordinal))
	}
	d.deviceGetName = func(name *byte, n int32, dev int32) result {
		return b.callKeep("cuDeviceGetName", unsafe.Pointer(name), uintptr(unsafe.Pointer(name)), uintptr(n), uintptr(dev))
	}
	d.deviceTotalMem = func(bytes *uint64, dev int32) result {
		return b.callKeep("cuDeviceTotalMem_v2", unsafe.Pointer(bytes), uintptr(unsafe.Pointer(bytes)), uintptr(dev))
	}
	d.deviceGetAttribute = func(v *int32, attr int32, dev int32) result {
		return b.callKeep("cuDeviceGetAttribute", unsafe.Pointer(v), uintptr(unsafe.Pointer(v)), uintptr(attr), uintptr(dev))
	}
	d.primaryCtxRetain = func(ctx *uintptr, dev int32) result {
		return b.callKeep("cuDevicePrimaryCtxRetain", unsafe.Pointer(ctx), uintptr(unsafe.Pointer(ctx)), uintptr(dev))
	}
	d.primaryCtxRelease = func(dev int32) result { return b.call("cuDevicePrimaryCtxRelease_v2", uintptr(dev)) }
	d.ctxSetCurrent = func(ctx uintptr) result { return b.call("cuCtxSetCurrent", ctx) }
	d.ctxSynchronize = func() result { return b.call("cuCtxSynchronize") }
	d.memGetInfo = func(free, total *uint64) result {
		r := b.call("cuMemGetInfo_v2", uintptr(unsafe.Pointer(free)), uintptr(unsafe.Pointer(total)))
		runtime.KeepAlive(free)
		runtime.KeepAlive(total)
		return r
	}
	d.memAlloc = func(p *uint64, size uint64) result {
		return b.callKeep("cuMemAlloc_v2", unsafe.Pointer(p), uintptr(unsafe.Pointer(p)), uintptr(size))
	}
	d.memFree = func(p uint64) result { return b.call("cuMemFree_v2", uintptr(p)) }
	d.memAllocHost = func(p *unsafe.Pointer, size uint64) result {
		return b.callKeep("cuMemAllocHost_v2", unsafe.Pointer(p), uintptr(unsafe.Pointer(p)), uintptr(size))
	}
	d.memFreeHost = func(p unsafe.Pointer) result { return b.call("cuMemFreeHost", uintptr(p)) }
	d.memHostGetDevPtr = func(dp *uint64, p unsafe.Pointer, flags uint32) result {
		return b.callKeep("cuMemHostGetDevicePointer_v2", unsafe.Pointer(dp), uintptr(unsafe.Pointer(dp)), uintptr(p), uintptr(flags))
	}
	d.memcpyHtoD = func(dst uint64, src unsafe.Pointer, n uint64) result {
		return b.callKeep("cuMemcpyHtoD_v2", src, uintptr(dst), uintptr(src), uintptr(n))
	}
	d.memcpyDtoH = func(dst unsafe.Pointer, src uint64, n uint64) result {
		return b.callKeep("cuMemcpyDtoH_v2", dst, uintptr(dst), uintptr(src), uintptr(n))
	}
	d.memcpyDtoD = func(dst, src, n uint64) result {
		return b.call("cuMemcpyDtoD_v2", uintptr(dst), uintptr(src), uintptr(n))
	}
	d.memcpyHtoDAsync = func(dst uint64, src unsafe.Pointer, n uint64, s uintptr) result {
		return b.call("cuMemcpyHtoDAsync_v2", uintptr(dst), uintptr(src), uintptr(n), s)
	}
	d.memcpyDtoHAsync = func(dst unsafe.Pointer, src uint64, n uint64, s uintptr) result {
		return b.call("cuMemcpyDtoHAsync_v2", uintptr(dst), uintptr(src), uintptr(n), s)
	}
	d.memcpyDtoDAsync = func(dst, src, n uint64, s uintptr) result {
		return b.call("cuMemcpyDtoDAsync_v2", uintptr(dst), uintptr(src), uintptr(n), s)
	}
	d.memsetD8Async = func(dst uint64, v uint8, n uint64, s uintptr) result {
		return b.call("cuMemsetD8Async", uintptr(dst), uintptr(v), uintptr(n), s)
	}
	d.memsetD16Async = func(dst uint64, v uint16, n uint64, s uintptr) result {
		return b.call("cuMemsetD16Async", uintptr(dst), uintptr(v), uintptr(n), s)
	}
	d.memsetD32Async = func(dst uint64, v uint32, n uint64, s uintptr) result {
		return b.call("cuMemsetD32Async", uintptr(dst), uintptr(v), uintptr(n), s)
	}
	d.memGetAllocationGranularity = func(g *uint64, prop *memAllocationProp, option uint32) result {
		r := b.call("cuMemGetAllocationGranularity", uintptr(unsafe.Pointer(g)), uintptr(unsafe.Pointer(prop)), uintptr(option))
		runtime.KeepAlive(g)
		runtime.KeepAlive(prop)
		return r
	}
	d.memAddressReserve = func(p *uint64, size, align, addr, flags uint64) result {
		return b.callKeep("cuMemAddressReserve", unsafe.Pointer(p), uintptr(unsafe.Pointer(p)), uintptr(size), uintptr(align),
			uintptr(addr), uintptr(flags))
	}
	d.memAddressFree = func(p, size uint64) result { return b.call("cuMemAddressFree", uintptr(p), uintptr(size)) }
	d.memCreate = func(h *uint64, size uint64, prop *memAllocationProp, flags uint64) result {
		r := b.call("cuMemCreate", uintptr(unsafe.Pointer(h)), uintptr(size), uintptr(unsafe.Pointer(prop)), uintptr(flags))
		runtime.KeepAlive(h)
		runtime.KeepAlive(prop)
		return r
	}
	d.memRelease = func(h uint64) result { return b.call("cuMemRelease", uintptr(h)) }
	d.memMap = func(p, size, offset, h, flags uint64) result {
		return b.call("cuMemMap", uintptr(p), uintptr(size), uintptr(offset), uintptr(h), uintptr(flags))
	}
	d.memUnmap = func(p, size uint64) result { return b.call("cuMemUnmap", uintptr(p), uintptr(size)) }
	d.memSetAccess = func(p, size uint64, desc *memAccessDesc, count uint64) result {
		return b.callKeep("cuMemSetAccess", unsafe.Pointer(desc), uintptr(p), uintptr(size), uintptr(unsafe.Pointer(desc)), uintptr(count))
	}
	d.streamCreate = func(s *uintptr, flags uint32) result {
		return b.callKeep("cuStreamCreate", unsafe.Pointer(s), uintptr(unsafe.Pointer(s)), uintptr(flags))
	}
	d.streamCreatePrio = func(s *uintptr, flags uint32, priority int32) result {
		return b.callKeep("cuStreamCreateWithPriority", unsafe.Pointer(s), uintptr(unsafe.Pointer(s)), uintptr(flags), uintptr(priority))
	}
	d.streamPriority = func(s uintptr, priority *int32) result {
		return b.callKeep("cuStreamGetPriority", unsafe.Pointer(priority), s, uintptr(unsafe.Pointer(priority)))
	}
	d.streamPrioRange = func(least, greatest *int32) result {
		r := b.call("cuCtxGetStreamPriorityRange", uintptr(unsafe.Pointer(least)), uintptr(unsafe.Pointer(greatest)))
		runtime.KeepAlive(least)
		runtime.KeepAlive(greatest)
		return r
	}
	d.streamDestroy = func(s uintptr) result { return b.call("cuStreamDestroy_v2", s) }
	d.streamSynchronize = func(s uintptr) result { return b.call("cuStreamSynchronize", s) }
	d.streamQuery = func(s uintptr) result { return b.call("cuStreamQuery", s) }
	d.eventCreate = func(e *uintptr, flags uint32) result {
		return b.callKeep("cuEventCreate", unsafe.Pointer(e), uintptr(unsafe.Pointer(e)), uintptr(flags))
	}
	d.eventRecord = func(e, s uintptr) result { return b.call("cuEventRecord", e, s) }
	d.eventSynchronize = func(e uintptr) result { return b.call("cuEventSynchronize", e) }
	d.eventQuery = func(e uintptr) result { return b.call("cuEventQuery", e) }
	d.eventElapsedTime = func(ms *float32, start, end uintptr) result {
		return b.callKeep("cuEventElapsedTime", unsafe.Pointer(ms), uintptr(unsafe.Pointer(ms)), start, end)
	}
	d.eventDestroy = func(e uintptr) result { return b.call("cuEventDestroy_v2", e) }
	d.moduleLoadDataEx = func(m *uintptr, image unsafe.Pointer, nOpts uint32, opts *int32, vals *uintptr) result {
		r := b.call("cuModuleLoadDataEx", uintptr(unsafe.Pointer(m)), uintptr(image), uintptr(nOpts),
			uintptr(unsafe.Pointer(opts)), uintptr(unsafe.Pointer(vals)))
		runtime.KeepAlive(m)
		runtime.KeepAlive(image)
		runtime.KeepAlive(opts)
		runtime.KeepAlive(vals)
		return r
	}
	d.moduleUnload = func(m uintptr) result { return b.call("cuModuleUnload", m) }
	d.moduleGetFunction = func(f *uintptr, m uintptr, name *byte) result {
		r := b.call("cuModuleGetFunction", uintptr(unsafe.Pointer(f)), m, uintptr(unsafe.Pointer(name)))
		runtime.KeepAlive(f)
		runtime.KeepAlive(name)
		return r
	}
	d.funcGetAttribute = func(v *int32, attr int32, f uintptr) result {
		return b.callKeep("cuFuncGetAttribute", unsafe.Pointer(v), uintptr(unsafe.Pointer(v)), uintptr(attr), f)
	}
	d.funcSetAttribute = func(f uintptr, attr int32, v int32) result {
		return b.call("cuFuncSetAttribute", f, uintptr(attr), uintptr(v))
	}
	d.occupancyMaxBlocks = func(n *int32, f uintptr, blockSize int32, dynSmem uint64) result {
		return b.callKeep("cuOccupancyMaxActiveBlocksPerMultiprocessor", unsafe.Pointer(n),
			uintptr(unsafe.Pointer(n)), f, uintptr(blockSize), uintptr(dynSmem))
	}
	d.launchKernel = func(f uintptr, gx, gy, gz, bx, by, bz, smem uint32, s uintptr, params *unsafe.Pointer) result {
		return b.callKeep("cuLaunchKernel", unsafe.Pointer(params), f, uintptr(gx), uintptr(gy), uintptr(gz),
			uintptr(bx), uintptr(by), uintptr(bz), uintptr(smem), s, uintptr(unsafe.Pointer(params)), 0)
	}
	if err := b.resolve(libcudaSymbols); err != nil {
		return nil, err
	}
	return d, nil
}

// binder resolves every symbol before any closure runs: loadLibcuda first
// builds all closures (which only record names), then resolves them, so the map
// is read-only afterwards and safe for concurrent calls.
type binder struct {
	lib  uintptr
	syms map[string]uintptr
}

func (b *binder) resolve(names []string) error {
	b.syms = make(map[string]uintptr, len(names))
	for _, name := range names {
		p, err := purego.Dlsym(b.lib, name)
		if err != nil {
			return fmt.Errorf("libcuda: symbol %s: %w", name, err)
		}
		b.syms[name] = p
	}
	return nil
}

// call invokes a resolved symbol with integer-class arguments.
func (b *binder) call(name string, args ...uintptr) result {
	r, _, _ := purego.SyscallN(b.syms[name], args...)
	return result(int32(r))
}

// call1p calls a function whose only argument is an out-pointer.
func (b *binder) call1p(name string, p unsafe.Pointer) result {
	return b.callKeep(name, p, uintptr(p))
}

// callKeep calls and keeps keep (a Go pointer passed as uintptr) alive until
// the call returns.
func (b *binder) callKeep(name string, keep unsafe.Pointer, args ...uintptr) result {
	r := b.call(name, args...)
	runtime.KeepAlive(keep)
	return r
}
