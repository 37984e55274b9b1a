package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// memAllocationProp mirrors CUmemAllocationProp (cuda.h, 32 bytes).
type memAllocationProp struct {
	typ         int32 // CUmemAllocationType: pinned device memory
	handleTypes int32 // CUmemAllocationHandleType: none (not exported)
	locType     int32 // CUmemLocationType: a device
	locID       int32 // its ordinal
	win32Meta   uintptr
	compression uint8
	rdma        uint8
	usage       uint16
	reserved    [4]uint8
}

// memAccessDesc mirrors CUmemAccessDesc (12 bytes).
type memAccessDesc struct {
	locType, locID int32
	flags          int32
}

const (
	memAllocationTypePinned  = 1
	memLocationTypeDevice    = 1
	memAccessProtReadWrite   = 3
	memAllocGranularityMin   = 0
	attrVirtualMemoryManaged = 102 // CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
)

func (st *deviceState) allocationProp() memAllocationProp {
	return memAllocationProp{typ: memAllocationTypePinned, locType: memLocationTypeDevice, locID: st.dev}
}

// VirtualMemorySupported reports whether the device supports the driver's
// virtual memory management (reserved address ranges with memory mapped
// into them part by part): every GPU warpkit runs on (compute capability
// 7.0 and later, on Linux), and the emulated device.
func (d *Device) VirtualMemorySupported() bool {
	var v int32
	err := d.run(func() result { return d.st.drv.deviceGetAttribute(&v, attrVirtualMemoryManaged, d.st.dev) }, "cuDeviceGetAttribute")
	return err == nil && v != 0
}

// VirtualRange is a range of device addresses reserved with no memory
// behind it (cuMemAddressReserve). Map backs a part of it with device
// memory of its own (cuMemCreate, cuMemMap, cuMemSetAccess for this
// device), returned as a Buffer whose Free unmaps and releases that memory;
// an address outside the mapped parts faults a kernel that uses it. A
// structure that grows part by part yet wants one linear address space —
// element i at Base() + i×size, whichever part holds it — maps its parts
// into one range (slaballoc's flat pools). Free the mapped Buffers before
// the range (Free refuses a range with parts still mapped). Methods are safe
// for concurrent use.
type VirtualRange struct {
	st   *deviceState
	base DevicePtr
	size uint64
	gran uint64

	mu     sync.Mutex
	mapped map[uint64]uint64 // offset → mapped bytes
	freed  *atomic.Bool      // shared with the cleanup
}

// vmPart is what a Buffer made by VirtualRange.Map frees: its mapping and
// the physical memory behind it.
type vmPart struct {
	r      *VirtualRange
	handle uint64
	offset uint64
	size   uint64 // mapped bytes (a multiple of the granularity)
}

// Granularity returns the device's minimum granularity of virtual memory
// mappings (2 MiB on current GPUs): reservations and mapped sizes are
// rounded up to it and offsets must be multiples of it.
func (d *Device) Granularity() (uint64, error) {
	prop := d.st.allocationProp()
	var g uint64
	err := d.run(func() result { return d.st.drv.memGetAllocationGranularity(&g, &prop, memAllocGranularityMin) }, "cuMemGetAllocationGranularity")
	if err == nil && (g == 0 || g&(g-1) != 0) {
		err = fmt.Errorf("%w: cuda: allocation granularity %d is not a power of two", ErrInvalidArgument, g)
	}
	return g, err
}

// ReserveRange reserves size bytes of device address space (rounded up to
// the granularity), aligned to the granularity. No memory is allocated. A
// device without virtual memory management gives errors.ErrUnsupported.
func (d *Device) ReserveRange(size uint64) (*VirtualRange, error) {
	if size == 0 {
		return nil, fmt.Errorf("%w: cuda: reservation of 0 bytes", ErrInvalidArgument)
	}
	if !d.VirtualMemorySupported() {
		return nil, fmt.Errorf("cuda: the device has no virtual memory management: %w", errors.ErrUnsupported)
	}
	g, err := d.Granularity()
	if err != nil {
		return nil, err
	}
	size = (size + g - 1) &^ (g - 1)
	var p uint64
	if err := d.run(func() result { return d.st.drv.memAddressReserve(&p, size, g, 0, 0) }, "cuMemAddressReserve"); err != nil {
		if e, ok := err.(*Error); ok {
			e.Detail = fmt.Sprintf("requested %d bytes of address space", size)
		}
		return nil, err
	}
	r := &VirtualRange{st: d.st, base: DevicePtr(p), size: size, gran: g, mapped: map[uint64]uint64{}, freed: new(atomic.Bool)}
	// A range dropped without Free gives its addresses back once the
	// Buffers of its parts are gone too (their cleanups hold it).
	runtime.AddCleanup(r, freeLeakedRange, leakedRange{st: d.st, base: p, size: size, freed: r.freed})
	return r, nil
}

type leakedRange struct {
	st         *deviceState
	base, size uint64
	freed      *atomic.Bool
}

func freeLeakedRange(l leakedRange) {
	if l.freed.CompareAndSwap(false, true) {
		l.st.do(func() { l.st.drv.memAddressFree(l.base, l.size) })
	}
}

// Base returns the first address of the range.
func (r *VirtualRange) Base() DevicePtr { return r.base }

// Size returns the bytes reserved.
func (r *VirtualRange) Size() uint64 { return r.size }

// Granularity returns the granularity of the range's mappings.
func (r *VirtualRange) Granularity() uint64 { return r.gran }

// Map backs [offset, offset+size) of the range with new device memory
// (uninitialised) that this device may read and write; size is rounded up
// to the granularity, offset must be a multiple of it, and the part must
// lie inside the range and overlap no mapped part. The Buffer returned
// views size bytes at Base()+offset; its Free unmaps the part and releases
// the memory. Failure for lack of memory wraps ErrOutOfMemory and leaves
// nothing mapped.
func (r *VirtualRange) Map(offset, size uint64) (*Buffer, error) {
	if size == 0 || offset%r.gran != 0 {
		return nil, fmt.Errorf("%w: cuda: mapping %d bytes at offset %d (granularity %d)", ErrInvalidArgument, size, offset, r.gran)
	}
	full := (size + r.gran - 1) &^ (r.gran - 1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.freed.Load() {
		return nil, ErrClosed
	}
	if offset > r.size || full > r.size-offset {
		return nil, fmt.Errorf("%w: cuda: mapping [%d, %d) outside a range of %d bytes", ErrInvalidArgument, offset, offset+full, r.size)
	}
	for o, n := range r.mapped {
		if offset < o+n && o < offset+full {
			return nil, fmt.Errorf("%w: cuda: mapping [%d, %d) overlaps the mapped [%d, %d)", ErrInvalidArgument, offset, offset+full, o, o+n)
		}
	}
	st, va := r.st, uint64(r.base)+offset
	prop := st.allocationProp()
	var h uint64
	var err error
	if err = st.run(func() result { return st.drv.memCreate(&h, full, &prop, 0) }, "cuMemCreate"); err != nil {
		if e, ok := err.(*Error); ok {
			e.Detail = fmt.Sprintf("requested %d bytes", full)
		}
		return nil, err
	}
	release := func() { st.run(func() result { return st.drv.memRelease(h) }, "cuMemRelease") }
	if err = st.run(func() result { return st.drv.memMap(va, full, 0, h, 0) }, "cuMemMap"); err != nil {
		release()
		return nil, err
	}
	access := memAccessDesc{locType: memLocationTypeDevice, locID: st.dev, flags: memAccessProtReadWrite}
	if err = st.run(func() result { return st.drv.memSetAccess(va, full, &access, 1) }, "cuMemSetAccess"); err != nil {
		st.run(func() result { return st.drv.memUnmap(va, full) }, "cuMemUnmap")
		release()
		return nil, err
	}
	r.mapped[offset] = full
	part := &vmPart{r: r, handle: h, offset: offset, size: full}
	b := &Buffer{st: st, ptr: DevicePtr(va), size: int64(size), freed: new(atomic.Bool), vm: part}
	runtime.AddCleanup(b, freeLeaked, leaked{st: st, ptr: va, freed: b.freed, vm: part})
	return b, nil
}

// View returns a Buffer viewing size bytes at Base()+offset, all of them in
// parts mapped now (one part or several that adjoin): a range grown part by
// part seen as one array, for copies, fills and kernel arguments. The view
// owns no memory: its Free ends the view and releases nothing, and it
// dangles once a part under it is unmapped.
func (r *VirtualRange) View(offset, size uint64) (*Buffer, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.freed.Load() {
		return nil, ErrClosed
	}
	if size == 0 || offset > r.size || size > r.size-offset {
		return nil, fmt.Errorf("%w: cuda: a view of [%d, %d) of a range of %d bytes", ErrInvalidArgument, offset, offset+size, r.size)
	}
	for p := offset; p < offset+size; {
		next := p
		for o, n := range r.mapped {
			if o <= p && p < o+n {
				next = o + n
				break
			}
		}
		if next == p {
			return nil, fmt.Errorf("%w: cuda: a view of [%d, %d): byte %d is not mapped", ErrInvalidArgument, offset, offset+size, p)
		}
		p = next
	}
	return &Buffer{st: r.st, ptr: r.base + DevicePtr(offset), size: int64(size), freed: new(atomic.Bool), view: true}, nil
}

// unmap unmaps the part and releases its memory; the first error is
// returned, and the part leaves the range's map either way.
func (p *vmPart) unmap(st *deviceState) error {
	va := uint64(p.r.base) + p.offset
	err := st.run(func() result { return st.drv.memUnmap(va, p.size) }, "cuMemUnmap")
	if rerr := st.run(func() result { return st.drv.memRelease(p.handle) }, "cuMemRelease"); err == nil {
		err = rerr
	}
	p.r.mu.Lock()
	delete(p.r.mapped, p.offset)
	p.r.mu.Unlock()
	return err
}

// Mapped returns the bytes mapped in the range now.
func (r *VirtualRange) Mapped() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n uint64
	for _, s := range r.mapped {
		n += s
	}
	return n
}

// Free releases the address range. It fails with ErrInvalidArgument while
// parts are mapped (free their Buffers first) and returns ErrClosed the
// second time.
func (r *VirtualRange) Free() error {
	if r == nil {
		return ErrClosed
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.freed.Load() {
		return ErrClosed
	}
	if len(r.mapped) > 0 {
		return fmt.Errorf("%w: cuda: freeing an address range with %d parts mapped", ErrInvalidArgument, len(r.mapped))
	}
	r.freed.Store(true)
	return r.st.run(func() result { return r.st.drv.memAddressFree(uint64(r.base), r.size) }, "cuMemAddressFree")
}
