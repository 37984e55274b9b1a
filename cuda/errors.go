package cuda

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/warpkit/warpkit/internal/errs"
)

// Error values; see package errs. They are the same values warpkit exports.
var (
	ErrNoDevice        = errs.ErrNoDevice
	ErrOutOfMemory     = errs.ErrOutOfMemory
	ErrClosed          = errs.ErrClosed
	ErrInvalidArgument = errs.ErrInvalidArgument
)

// Error is a failed driver call.
type Error struct {
	Op   string // the driver function, e.g. "cuMemAlloc"
	Code int    // the CUresult
	Name string // e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Msg  string // the driver's description
	// Detail is extra context added by this package: the size of a failed
	// allocation, or the JIT compiler's log for a module that failed to load.
	Detail string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("cuda: %s: %s (%d)", e.Op, e.Name, e.Code)
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	if e.Detail != "" {
		s += "; " + e.Detail
	}
	return s
}

// Unwrap maps codes that have a warpkit meaning onto the shared error values, so
// errors.Is(err, ErrOutOfMemory) works for a failed cuMemAlloc.
func (e *Error) Unwrap() error {
	switch result(e.Code) {
	case resultOutOfMemory:
		return ErrOutOfMemory
	case resultNoDevice:
		return ErrNoDevice
	case resultDeinitialized:
		return ErrClosed
	}
	return nil
}

// Sticky reports whether the context is unusable after this error, so that
// every later call on it fails too: a kernel fault (an illegal address or
// instruction, a misaligned access, a hardware stack error, a launch that
// failed or timed out, an uncorrectable ECC error: sticky in CUDA), a
// context or driver that is gone, or an error the driver cannot name. Other
// codes (out of memory, out of resources for a launch, an invalid value)
// leave the context as it was, and a caller may go on using it.
func (e *Error) Sticky() bool {
	switch e.Code {
	case 3, // CUDA_ERROR_NOT_INITIALIZED
		4,   // CUDA_ERROR_DEINITIALIZED
		46,  // CUDA_ERROR_DEVICE_UNAVAILABLE
		201, // CUDA_ERROR_INVALID_CONTEXT
		214, // CUDA_ERROR_ECC_UNCORRECTABLE
		700, // CUDA_ERROR_ILLEGAL_ADDRESS
		702, // CUDA_ERROR_LAUNCH_TIMEOUT
		709, // CUDA_ERROR_CONTEXT_IS_DESTROYED
		714, // CUDA_ERROR_HARDWARE_STACK_ERROR
		715, // CUDA_ERROR_ILLEGAL_INSTRUCTION
		716, // CUDA_ERROR_MISALIGNED_ADDRESS
		717, // CUDA_ERROR_INVALID_ADDRESS_SPACE
		718, // CUDA_ERROR_INVALID_PC
		719, // CUDA_ERROR_LAUNCH_FAILED
		999: // CUDA_ERROR_UNKNOWN
		return true
	}
	return false
}

// IsSticky reports whether err is a driver error after which the context is
// unusable ([Error.Sticky]).
func IsSticky(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Sticky()
}

// IsCode reports whether err is a driver error with the given CUresult code.
func IsCode(err error, code int) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// knownResults names the codes warpkit reasons about, for drivers that cannot
// be asked (the test fake) and as a fallback if cuGetErrorName fails.
var knownResults = map[result]string{
	0:   "CUDA_SUCCESS",
	1:   "CUDA_ERROR_INVALID_VALUE",
	2:   "CUDA_ERROR_OUT_OF_MEMORY",
	3:   "CUDA_ERROR_NOT_INITIALIZED",
	4:   "CUDA_ERROR_DEINITIALIZED",
	100: "CUDA_ERROR_NO_DEVICE",
	101: "CUDA_ERROR_INVALID_DEVICE",
	200: "CUDA_ERROR_INVALID_IMAGE",
	201: "CUDA_ERROR_INVALID_CONTEXT",
	209: "CUDA_ERROR_NO_BINARY_FOR_GPU",
	218: "CUDA_ERROR_INVALID_PTX",
	222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
	400: "CUDA_ERROR_INVALID_HANDLE",
	500: "CUDA_ERROR_NOT_FOUND",
	600: "CUDA_ERROR_NOT_READY",
	700: "CUDA_ERROR_ILLEGAL_ADDRESS",
	701: "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
	702: "CUDA_ERROR_LAUNCH_TIMEOUT",
	719: "CUDA_ERROR_LAUNCH_FAILED",
	999: "CUDA_ERROR_UNKNOWN",
}

// newError builds an *Error, asking the driver for the code's name and text.
func newError(drv *driverAPI, op string, r result) *Error {
	e := &Error{Op: op, Code: int(r)}
	var p *byte
	if drv != nil && drv.getErrorName != nil && drv.getErrorName(r, &p) == resultSuccess && p != nil {
		e.Name = cString(p)
	}
	if e.Name == "" {
		if n, ok := knownResults[r]; ok {
			e.Name = n
		} else {
			e.Name = "CUDA_ERROR"
		}
	}
	p = nil
	if drv != nil && drv.getErrorString != nil && drv.getErrorString(r, &p) == resultSuccess && p != nil {
		e.Msg = cString(p)
	}
	if r == resultUnsupportedPTXVer {
		e.Detail = "the PTX was produced by a newer CUDA toolkit than this driver supports; update the NVIDIA driver"
	}
	return e
}

// check returns nil for success and an *Error otherwise.
func check(drv *driverAPI, op string, r result) error {
	if r == resultSuccess {
		return nil
	}
	return newError(drv, op, r)
}

func noDevice(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrNoDevice, fmt.Sprintf(format, args...))
}

// cString copies a NUL-terminated C string owned by the driver.
func cString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}
