package cuda

import (
	"sync/atomic"
	"unsafe"
)

// Calls counts the driver work a device has been asked for since it was
// opened: what a structure's operation costs in launches and host waits,
// which on small batches is most of its time (a launch and a wait are each
// several microseconds however little the kernel does). Take [Device.Calls]
// before and after an operation and subtract ([Calls.Sub]). The counts are
// of the device (every handle and goroutine on it), so an operation's
// difference is exact only when nothing else used the device meanwhile.
type Calls struct {
	// Launches counts kernel launches (cuLaunchKernel).
	Launches int64
	// Memsets counts fills of device memory (cuMemsetD*Async): each is
	// work on a stream, like a small kernel.
	Memsets int64
	// Copies counts copies between host and device or within the device,
	// asynchronous or not.
	Copies int64
	// SyncCopies counts the copies among Copies that returned only when
	// done (cuMemcpyHtoD, DtoH): each blocks the host as a wait does.
	SyncCopies int64
	// Waits counts the host's waits for device work: Stream.Synchronize,
	// Event.Synchronize, Device.Synchronize, and the waits of operations
	// given the nil stream.
	Waits int64
	// Allocs counts device and pinned host allocations (cuMemAlloc,
	// cuMemAllocHost, cuMemCreate); Frees their releases.
	Allocs, Frees int64
}

// Sub returns c - d, field by field: the calls made between two readings.
func (c Calls) Sub(d Calls) Calls {
	return Calls{
		Launches: c.Launches - d.Launches, Memsets: c.Memsets - d.Memsets,
		Copies: c.Copies - d.Copies, SyncCopies: c.SyncCopies - d.SyncCopies,
		Waits: c.Waits - d.Waits, Allocs: c.Allocs - d.Allocs, Frees: c.Frees - d.Frees,
	}
}

// Calls returns the device's counts so far (ErrClosed is not reported: a
// closed device's counts stay readable).
func (d *Device) Calls() Calls {
	if d == nil {
		return Calls{}
	}
	c := &d.st.calls
	return Calls{
		Launches: c.launches.Load(), Memsets: c.memsets.Load(),
		Copies: c.copies.Load(), SyncCopies: c.syncCopies.Load(),
		Waits: c.waits.Load(), Allocs: c.allocs.Load(), Frees: c.frees.Load(),
	}
}

// callCounts is a device's Calls, counted where its driver table is called
// (counted wraps the table) and where the host waits (awaitWork, Device.
// Synchronize).
type callCounts struct {
	launches, memsets, copies, syncCopies, waits, allocs, frees atomic.Int64
}

// counted returns a copy of drv whose entry points for launches, copies,
// fills, allocations and frees count into c before calling drv's. The cost
// is an atomic add beside a driver call of microseconds.
func (c *callCounts) counted(drv *driverAPI) *driverAPI {
	d := *drv
	d.launchKernel = func(f uintptr, gx, gy, gz, bx, by, bz, smem uint32, stream uintptr, params *unsafe.Pointer) result {
		c.launches.Add(1)
		return drv.launchKernel(f, gx, gy, gz, bx, by, bz, smem, stream, params)
	}
	sync := func() { c.copies.Add(1); c.syncCopies.Add(1) }
	d.memcpyHtoD = func(dst uint64, src unsafe.Pointer, n uint64) result {
		sync()
		return drv.memcpyHtoD(dst, src, n)
	}
	d.memcpyDtoH = func(dst unsafe.Pointer, src uint64, n uint64) result {
		sync()
		return drv.memcpyDtoH(dst, src, n)
	}
	d.memcpyDtoD = func(dst, src, n uint64) result {
		c.copies.Add(1) // device to device: the host does not wait for it
		return drv.memcpyDtoD(dst, src, n)
	}
	d.memcpyHtoDAsync = func(dst uint64, src unsafe.Pointer, n uint64, s uintptr) result {
		c.copies.Add(1)
		return drv.memcpyHtoDAsync(dst, src, n, s)
	}
	d.memcpyDtoHAsync = func(dst unsafe.Pointer, src uint64, n uint64, s uintptr) result {
		c.copies.Add(1)
		return drv.memcpyDtoHAsync(dst, src, n, s)
	}
	d.memcpyDtoDAsync = func(dst, src, n uint64, s uintptr) result {
		c.copies.Add(1)
		return drv.memcpyDtoDAsync(dst, src, n, s)
	}
	d.memsetD8Async = func(dst uint64, v uint8, n uint64, s uintptr) result {
		c.memsets.Add(1)
		return drv.memsetD8Async(dst, v, n, s)
	}
	d.memsetD16Async = func(dst uint64, v uint16, n uint64, s uintptr) result {
		c.memsets.Add(1)
		return drv.memsetD16Async(dst, v, n, s)
	}
	d.memsetD32Async = func(dst uint64, v uint32, n uint64, s uintptr) result {
		c.memsets.Add(1)
		return drv.memsetD32Async(dst, v, n, s)
	}
	d.memAlloc = func(p *uint64, size uint64) result {
		c.allocs.Add(1)
		return drv.memAlloc(p, size)
	}
	d.memAllocHost = func(p *unsafe.Pointer, size uint64) result {
		c.allocs.Add(1)
		return drv.memAllocHost(p, size)
	}
	d.memCreate = func(h *uint64, size uint64, prop *memAllocationProp, flags uint64) result {
		c.allocs.Add(1)
		return drv.memCreate(h, size, prop, flags)
	}
	d.memFree = func(p uint64) result {
		c.frees.Add(1)
		return drv.memFree(p)
	}
	d.memFreeHost = func(p unsafe.Pointer) result {
		c.frees.Add(1)
		return drv.memFreeHost(p)
	}
	d.memRelease = func(h uint64) result {
		c.frees.Add(1)
		return drv.memRelease(h)
	}
	return &d
}
