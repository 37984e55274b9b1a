package cuda

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Properties describes a device as the driver reports it.
type Properties struct {
	Ordinal           int
	Name              string
	ComputeMajor      int
	ComputeMinor      int
	Multiprocessors   int
	TotalMemory       uint64 // bytes
	L2CacheBytes      int
	MemoryBusWidth    int // bits
	MemoryClockKHz    int // peak memory clock
	ClockKHz          int // SM clock
	MaxThreadsPerSM   int
	SharedMemPerSM    int // bytes
	SharedMemPerBlock int // bytes a block may opt in to
	DriverVersion     int // e.g. 12080 for 12.8
}

// TheoreticalBandwidth returns the peak memory bandwidth in bytes/s: two
// transfers per memory clock (DDR) over the whole bus.
func (p Properties) TheoreticalBandwidth() float64 {
	return 2 * float64(p.MemoryClockKHz) * 1e3 * float64(p.MemoryBusWidth) / 8
}

// ComputeCapability returns "major.minor".
func (p Properties) ComputeCapability() string {
	return fmt.Sprintf("%d.%d", p.ComputeMajor, p.ComputeMinor)
}

// DriverVersionString returns the CUDA version the driver supports, e.g. "12.8".
func (p Properties) DriverVersionString() string {
	return fmt.Sprintf("%d.%d", p.DriverVersion/1000, p.DriverVersion%1000/10)
}

const (
	attrClockRate               = 13
	attrMultiprocessorCount     = 16
	attrMemoryClockRate         = 36
	attrGlobalMemoryBusWidth    = 37
	attrL2CacheSize             = 38
	attrMaxThreadsPerSM         = 39
	attrComputeCapabilityMajor  = 75
	attrComputeCapabilityMinor  = 76
	attrMaxSharedMemoryPerSM    = 81
	attrMaxSharedMemPerBlockOpt = 97
)

// Devices lists the CUDA devices. With no usable device it returns an error
// wrapping ErrNoDevice.
func Devices() ([]Properties, error) {
	drv, err := getDriver()
	if err != nil {
		return nil, err
	}
	var n int32
	if err := check(drv, "cuDeviceGetCount", drv.deviceGetCount(&n)); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, noDevice("the driver reports zero devices")
	}
	out := make([]Properties, 0, n)
	for i := 0; i < int(n); i++ {
		p, err := queryProperties(drv, i)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func queryProperties(drv *driverAPI, ordinal int) (Properties, error) {
	var dev int32
	if err := check(drv, "cuDeviceGet", drv.deviceGet(&dev, int32(ordinal))); err != nil {
		return Properties{}, err
	}
	p := Properties{Ordinal: ordinal}
	name := make([]byte, 256)
	if err := check(drv, "cuDeviceGetName", drv.deviceGetName(&name[0], int32(len(name)), dev)); err != nil {
		return p, err
	}
	p.Name = cString(&name[0])
	if err := check(drv, "cuDeviceTotalMem", drv.deviceTotalMem(&p.TotalMemory, dev)); err != nil {
		return p, err
	}
	attrs := []struct {
		attr int32
		dst  *int
	}{
		{attrComputeCapabilityMajor, &p.ComputeMajor},
		{attrComputeCapabilityMinor, &p.ComputeMinor},
		{attrMultiprocessorCount, &p.Multiprocessors},
		{attrL2CacheSize, &p.L2CacheBytes},
		{attrGlobalMemoryBusWidth, &p.MemoryBusWidth},
		{attrMemoryClockRate, &p.MemoryClockKHz},
		{attrClockRate, &p.ClockKHz},
		{attrMaxThreadsPerSM, &p.MaxThreadsPerSM},
		{attrMaxSharedMemoryPerSM, &p.SharedMemPerSM},
		{attrMaxSharedMemPerBlockOpt, &p.SharedMemPerBlock},
	}
	for _, a := range attrs {
		var v int32
		if err := check(drv, "cuDeviceGetAttribute", drv.deviceGetAttribute(&v, a.attr, dev)); err != nil {
			return p, err
		}
		*a.dst = int(v)
	}
	var ver int32
	if err := check(drv, "cuDriverGetVersion", drv.driverGetVersion(&ver)); err != nil {
		return p, err
	}
	p.DriverVersion = int(ver)
	return p, nil
}

// deviceState is shared by every handle on one device ordinal.
type deviceState struct {
	drv   *driverAPI
	props Properties
	dev   int32
	ctx   uintptr
	gate  gate // admits driver calls; closed by the last handle's Close
	refs  int  // guarded by registryMu

	modMu   sync.Mutex
	modules map[int][]*Module // by the PTX's length; each holds its PTX

	// closed is set when the last handle closes; pinned memory checks it,
	// since releasing the context frees that memory too.
	closed atomic.Bool

	calls callCounts // Device.Calls; drv counts into it
}

var (
	registryMu sync.Mutex
	registry   = map[int]*deviceState{}
)

// Device is a handle on one GPU. Open returns a new handle each time; the
// device's primary context lives until the last handle is closed.
type Device struct {
	st     *deviceState
	closed atomic.Bool
}

// Open opens the device with the given ordinal (0 is the first). It returns an
// error wrapping ErrNoDevice when there is no usable device, and
// ErrInvalidArgument when the ordinal is out of range.
func Open(ordinal int) (*Device, error) {
	drv, err := getDriver()
	if err != nil {
		return nil, err
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	if st, ok := registry[ordinal]; ok {
		st.refs++
		return &Device{st: st}, nil
	}
	var n int32
	if err := check(drv, "cuDeviceGetCount", drv.deviceGetCount(&n)); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, noDevice("the driver reports zero devices")
	}
	if ordinal < 0 || ordinal >= int(n) {
		return nil, fmt.Errorf("%w: device ordinal %d (have %d devices)", ErrInvalidArgument, ordinal, n)
	}
	props, err := queryProperties(drv, ordinal)
	if err != nil {
		return nil, err
	}
	st := &deviceState{props: props, refs: 1, modules: map[int][]*Module{}}
	st.drv = st.calls.counted(drv)
	if err := check(drv, "cuDeviceGet", drv.deviceGet(&st.dev, int32(ordinal))); err != nil {
		return nil, err
	}
	if err := check(drv, "cuDevicePrimaryCtxRetain", drv.primaryCtxRetain(&st.ctx, st.dev)); err != nil {
		return nil, err
	}
	registry[ordinal] = st
	return &Device{st: st}, nil
}

// Close releases this handle. When it is the last one, it waits for the
// device's work, unloads every module and releases the primary context, which
// frees all memory, streams and events made through the device. Close waits
// for driver calls in flight (a Synchronize already blocked in the driver
// gets its result); a call that starts later, or a Synchronize still polling,
// gets ErrClosed. Closing twice returns ErrClosed.
func (d *Device) Close() error {
	if d == nil || !d.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	st := d.st
	st.refs--
	if st.refs > 0 {
		return nil
	}
	delete(registry, st.props.Ordinal)
	// Take the modules before closing the gate: LoadModule holds modMu while
	// it makes driver calls, so taking modMu with the gate closed could
	// deadlock with a load in flight.
	st.modMu.Lock()
	mods := st.modules
	st.modules = nil
	st.modMu.Unlock()
	var err error
	st.stop(func() {
		for _, ms := range mods {
			for _, m := range ms {
				st.drv.moduleUnload(m.handle)
			}
		}
		st.drv.ctxSynchronize()
		err = check(st.drv, "cuDevicePrimaryCtxRelease", st.drv.primaryCtxRelease(st.dev))
	})
	st.closed.Store(true)
	return err
}

// Properties returns the device's properties.
func (d *Device) Properties() Properties { return d.st.props }

// Name returns the device's name, e.g. "NVIDIA H100 80GB HBM3".
func (d *Device) Name() string { return d.st.props.Name }

// run runs f on the device's executor, with the context current. It returns
// ErrClosed if this handle or the device is closed.
func (d *Device) run(f func() result, op string) error {
	if d == nil || d.closed.Load() {
		return ErrClosed
	}
	return d.st.run(f, op)
}

// MemInfo returns the free and total device memory in bytes.
func (d *Device) MemInfo() (free, total uint64, err error) {
	err = d.run(func() result { return d.st.drv.memGetInfo(&free, &total) }, "cuMemGetInfo")
	return free, total, err
}

// Synchronize waits for all work on the device to finish and returns the first
// asynchronous error (a kernel fault, say). It blocks in the driver on the
// caller's thread; other goroutines keep using the device meanwhile.
func (d *Device) Synchronize() error {
	if d == nil || d.closed.Load() {
		return ErrClosed
	}
	d.st.calls.waits.Add(1)
	return d.st.run(func() result { return d.st.drv.ctxSynchronize() }, "cuCtxSynchronize")
}
