package cuda

import (
	"bytes"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"unsafe"
)

// Module is loaded PTX (CUmodule). Modules are cached per device by content and
// live until the device's last handle is closed.
type Module struct {
	st      *deviceState
	handle  uintptr
	ptx     []byte // a copy of what was loaded: the cache's key
	InfoLog string // the JIT compiler's info log from loading

	// params holds each kernel's parameter sizes as the PTX declares them;
	// nil when paramsErr says why they are unknown (an image that is not PTX
	// text, or declarations the parser did not understand).
	params    ptxParamTable
	paramsErr error

	mu    sync.Mutex
	funcs map[string]*Function
}

// JIT option codes (CUjit_option).
const (
	jitInfoLogBuffer       = 3
	jitInfoLogBufferBytes  = 4
	jitErrorLogBuffer      = 5
	jitErrorLogBufferBytes = 6
	jitLogVerbose          = 12
	jitGenerateLineInfo    = 13
)

const jitLogBytes = 16 << 10

// LoadModule JIT-compiles PTX for the device (cuModuleLoadDataEx) and returns
// the module; loading the same PTX again returns the cached module. A failure
// carries the JIT error log in the *Error's Detail. PTX produced by a newer
// toolkit than the driver supports fails with code 222 and says so.
//
// LoadModule also reads the parameter list of every .entry in the PTX, so that
// [Function.Launch] can refuse arguments that do not match it. An image that
// is not PTX text, or PTX whose declarations that reader does not understand,
// still loads; its kernels' launches are then not checked.
func (d *Device) LoadModule(ptx []byte) (*Module, error) {
	if d == nil || d.closed.Load() {
		return nil, ErrClosed
	}
	st := d.st
	st.modMu.Lock()
	defer st.modMu.Unlock()
	if st.modules == nil {
		return nil, ErrClosed
	}
	// The cache compares content: a structure that loads its kernels on
	// every New (prim's 2 MB of PTX) pays a memory compare, not a hash
	// (sha256 of prim's PTX took 1.3 ms, a compare 55 µs).
	for _, m := range st.modules[len(ptx)] {
		if bytes.Equal(m.ptx, ptx) {
			return m, nil
		}
	}
	image := ptx
	if len(image) == 0 || image[len(image)-1] != 0 {
		image = append(bytes.Clone(ptx), 0) // the driver reads a NUL-terminated string
	}
	infoLog := make([]byte, jitLogBytes)
	errLog := make([]byte, jitLogBytes)
	opts := []int32{jitInfoLogBuffer, jitInfoLogBufferBytes, jitErrorLogBuffer, jitErrorLogBufferBytes, jitLogVerbose}
	vals := []uintptr{
		uintptr(unsafe.Pointer(&infoLog[0])), jitLogBytes,
		uintptr(unsafe.Pointer(&errLog[0])), jitLogBytes,
		1,
	}
	if hasLineInfo(ptx) {
		// PTX built with line info (scripts/profile-build.sh) keeps it
		// through the JIT, so that a profiler can map SASS to source lines.
		opts = append(opts, jitGenerateLineInfo)
		vals = append(vals, 1)
	}
	var pin runtime.Pinner
	pin.Pin(&infoLog[0])
	pin.Pin(&errLog[0])
	pin.Pin(&image[0])
	defer pin.Unpin()
	var h uintptr
	err := d.run(func() result {
		return st.drv.moduleLoadDataEx(&h, unsafe.Pointer(&image[0]), uint32(len(opts)), &opts[0], &vals[0])
	}, "cuModuleLoadDataEx")
	info := jitLog(infoLog)
	if err != nil {
		if e, ok := err.(*Error); ok {
			if log := jitLog(errLog); log != "" {
				if e.Detail != "" {
					e.Detail += "; "
				}
				e.Detail += "JIT log: " + log
			}
		}
		return nil, err
	}
	m := &Module{st: st, handle: h, ptx: bytes.Clone(ptx), InfoLog: info, funcs: map[string]*Function{}}
	m.params, m.paramsErr = parsePTXParams(ptx)
	st.modules[len(ptx)] = append(st.modules[len(ptx)], m)
	return m, nil
}

// hasLineInfo reports whether PTX was compiled with line info (nvcc
// -lineinfo writes .file directives, after the functions). The search runs
// once per module: loads of the same PTX come from the cache.
func hasLineInfo(ptx []byte) bool {
	return bytes.Contains(ptx, []byte("\n\t.file\t"))
}

// jitLog returns the text the JIT wrote into buf: up to its first NUL, or all
// of it if the driver filled the buffer without one.
func jitLog(buf []byte) string {
	if i := bytes.IndexByte(buf, 0); i >= 0 {
		buf = buf[:i]
	}
	return strings.TrimSpace(string(buf))
}

// Function returns the kernel with the given (extern "C") name.
func (m *Module) Function(name string) (*Function, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f, ok := m.funcs[name]; ok {
		return f, nil
	}
	cname := append([]byte(name), 0)
	var h uintptr
	err := m.st.run(func() result { return m.st.drv.moduleGetFunction(&h, m.handle, &cname[0]) }, "cuModuleGetFunction")
	if err != nil {
		if e, ok := err.(*Error); ok {
			e.Detail = "kernel " + name
		}
		return nil, err
	}
	f := &Function{st: m.st, h: h, name: name}
	f.params, f.typed = m.params[name]
	m.funcs[name] = f
	return f, nil
}

// Function is a kernel in a loaded module (CUfunction).
type Function struct {
	st   *deviceState
	h    uintptr
	name string
	// params are the sizes in bytes of the kernel's parameters, from its
	// PTX; typed says whether they are known (see Params).
	params []int
	typed  bool
}

// Name returns the kernel's name.
func (f *Function) Name() string { return f.name }

// Params returns the sizes in bytes of the kernel's parameters as its PTX
// declares them, in order, and true; or nil and false when they are unknown:
// the module's image was not PTX text, or its declarations were not
// understood, or it declares no .entry of this name. Launch checks arguments
// only against known parameter lists.
func (f *Function) Params() ([]int, bool) {
	if f == nil || !f.typed {
		return nil, false
	}
	return slices.Clone(f.params), true
}

// Dim3 is a grid or block shape.
type Dim3 struct{ X, Y, Z uint32 }

// D1 returns the one-dimensional shape {x, 1, 1}.
func D1(x int) Dim3 { return Dim3{uint32(x), 1, 1} }

// GridFor returns the 1-D grid that covers n work items with blocks of block
// items, at least one block.
func GridFor(n, block int) Dim3 { return D1(max(1, (n+block-1)/block)) }

// DevicePointer is implemented by values that pass to a kernel as a device
// pointer: DevicePtr, *Buffer and Slice[T].
type DevicePointer interface{ DevicePointer() DevicePtr }

// DevicePointer returns p itself.
func (p DevicePtr) DevicePointer() DevicePtr { return p }

// DevicePointer returns the buffer's address.
func (b *Buffer) DevicePointer() DevicePtr { return b.ptr }

// argWidth returns the bytes an argument of a type packArgs accepts stands
// for on the device: 4 for int32, uint32 and float32, 8 for int64, uint64,
// float64, device pointers and nil, 1 for bool. It returns 0 for the types
// packArgs refuses, which then reports them.
func argWidth(a any) int {
	switch a.(type) {
	case int32, uint32, float32:
		return 4
	case int64, uint64, float64, DevicePointer, nil:
		return 8
	case bool:
		return 1
	}
	return 0
}

// checkArgs compares the arguments with the kernel's parameter list from its
// PTX: their number, then each one's width (argWidth) against the size the
// PTX declares. Kernels whose parameters are unknown are not checked. It
// allocates nothing unless it fails.
func (f *Function) checkArgs(args []any) error {
	if !f.typed {
		return nil
	}
	if len(args) != len(f.params) {
		return f.countError(args)
	}
	for i, a := range args {
		if w := argWidth(a); w != f.params[i] && w != 0 {
			return fmt.Errorf("%w: cuda: launch of %s: argument %d is %T (%d bytes) but the kernel's parameter %d is %d bytes (PTX parameters %v)",
				ErrInvalidArgument, f.name, i, a, w, i, f.params[i], f.params)
		}
	}
	return nil
}

// countError describes a launch with the wrong number of arguments, naming
// the first parameter left without one or the first argument too many.
func (f *Function) countError(args []any) error {
	n := len(f.params)
	if len(args) < n {
		return fmt.Errorf("%w: cuda: launch of %s with %d arguments but the kernel has %d parameters: parameter %d (%d bytes) has none (PTX parameters %v)",
			ErrInvalidArgument, f.name, len(args), n, len(args), f.params[len(args)], f.params)
	}
	return fmt.Errorf("%w: cuda: launch of %s with %d arguments but the kernel has %d parameters: argument %d (%T, %d bytes) has no parameter (PTX parameters %v)",
		ErrInvalidArgument, f.name, len(args), n, n, args[n], argWidth(args[n]), f.params)
}

// packArgs stores each argument in an 8-byte slot and returns the slots and the
// kernelParams array pointing at them. Accepted: int32, uint32, int64, uint64,
// float32, float64, bool (as a C++ bool byte) and DevicePointer values. Plain
// int and uint are refused: their width on the device side would be a guess.
func packArgs(args []any) ([]uint64, []unsafe.Pointer, error) {
	if len(args) == 0 {
		return nil, nil, nil
	}
	slots := make([]uint64, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case int32:
			slots[i] = uint64(uint32(v))
		case uint32:
			slots[i] = uint64(v)
		case int64:
			slots[i] = uint64(v)
		case uint64:
			slots[i] = v
		case float32:
			slots[i] = uint64(math.Float32bits(v))
		case float64:
			slots[i] = math.Float64bits(v)
		case bool:
			if v {
				slots[i] = 1
			}
		case DevicePointer:
			if c, ok := a.(interface{ ptrErr() error }); ok {
				if err := c.ptrErr(); err != nil {
					return nil, nil, fmt.Errorf("cuda: kernel argument %d: %w", i, err)
				}
			}
			slots[i] = uint64(v.DevicePointer())
		case nil:
			slots[i] = 0 // a null pointer
		default:
			return nil, nil, fmt.Errorf("%w: cuda: kernel argument %d has unsupported type %T (use int32, uint32, int64, uint64, float32, float64, bool or a device pointer)", ErrInvalidArgument, i, a)
		}
	}
	params := make([]unsafe.Pointer, len(args))
	for i := range slots {
		params[i] = unsafe.Pointer(&slots[i])
	}
	return slots, params, nil
}

// Launch enqueues the kernel on stream with the given grid, block and dynamic
// shared memory; with the nil stream it returns once the kernel has finished.
// Arguments follow packArgs' rules and must match the kernel's parameter list
// in order and width; a nil or freed buffer is refused (ErrClosed).
//
// When the kernel's parameter list is known from its PTX (see Params), Launch
// checks the arguments against it before calling the driver: a different
// number of arguments, or an argument whose width (4 bytes for int32, uint32
// and float32, 8 for int64, uint64, float64 and device pointers, 1 for bool)
// differs from its parameter's size, returns an error wrapping
// ErrInvalidArgument that names the kernel, the parameter and both widths.
// Only widths are compared: a float32 given for a .u32 parameter passes.
// Kernels of modules whose image is not PTX text, or whose PTX declarations
// were not understood, are launched unchecked.
//
// Launch returns launch errors (a bad configuration); faults inside the kernel
// surface at the next synchronization.
func (f *Function) Launch(grid, block Dim3, sharedBytes int, stream *Stream, args ...any) error {
	if f == nil {
		return ErrClosed
	}
	hs, err := stream.handle(f.st)
	if err != nil {
		return err
	}
	if grid.X == 0 || grid.Y == 0 || grid.Z == 0 || block.X == 0 || block.Y == 0 || block.Z == 0 {
		return fmt.Errorf("%w: cuda: launch of %s with grid %v block %v", ErrInvalidArgument, f.name, grid, block)
	}
	if err := f.checkArgs(args); err != nil {
		return err
	}
	slots, params, err := packArgs(args)
	if err != nil {
		return err
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	var pp *unsafe.Pointer
	if len(params) > 0 {
		pin.Pin(&slots[0])
		pin.Pin(&params[0])
		pp = &params[0]
	}
	err = f.st.run(func() result {
		return f.st.drv.launchKernel(f.h, grid.X, grid.Y, grid.Z, block.X, block.Y, block.Z, uint32(sharedBytes), hs, pp)
	}, "cuLaunchKernel")
	if e, ok := err.(*Error); ok {
		e.Detail = fmt.Sprintf("kernel %s grid %v block %v shared %d", f.name, grid, block, sharedBytes)
	}
	runtime.KeepAlive(args) // buffers among them must outlive the launch call
	if err != nil {
		return err
	}
	return f.st.finishDefault(hs)
}

// MaxActiveBlocksPerSM returns how many blocks of blockSize threads using
// dynamicShared bytes of dynamic shared memory fit on one multiprocessor; a
// persistent kernel launches that many times the SM count.
func (f *Function) MaxActiveBlocksPerSM(blockSize, dynamicShared int) (int, error) {
	var n int32
	err := f.st.run(func() result {
		return f.st.drv.occupancyMaxBlocks(&n, f.h, int32(blockSize), uint64(dynamicShared))
	}, "cuOccupancyMaxActiveBlocksPerMultiprocessor")
	return int(n), err
}

const (
	funcAttrMaxThreadsPerBlock = 0
	funcAttrNumRegs            = 4
	funcAttrMaxDynamicShared   = 8
)

// SetMaxDynamicShared raises the dynamic shared memory a launch may request
// above the 48 KiB default, up to the device's opt-in limit.
func (f *Function) SetMaxDynamicShared(bytes int) error {
	return f.st.run(func() result { return f.st.drv.funcSetAttribute(f.h, funcAttrMaxDynamicShared, int32(bytes)) }, "cuFuncSetAttribute")
}

// Registers returns the registers per thread the kernel was compiled to use.
func (f *Function) Registers() (int, error) { return f.attr(funcAttrNumRegs) }

// MaxThreadsPerBlock returns the largest block the kernel can be launched with.
func (f *Function) MaxThreadsPerBlock() (int, error) { return f.attr(funcAttrMaxThreadsPerBlock) }

func (f *Function) attr(a int32) (int, error) {
	var v int32
	err := f.st.run(func() result { return f.st.drv.funcGetAttribute(&v, a, f.h) }, "cuFuncGetAttribute")
	return int(v), err
}
