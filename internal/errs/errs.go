// Package errs holds the error values shared by every warpkit package. It has no
// dependencies so that pure-Go packages (kv) can share them without linking the
// CUDA driver bindings. The root package warpkit and package cuda re-export them.
package errs

import (
	"errors"
	"fmt"
)

var (
	// ErrNoDevice: no usable CUDA device (libcuda absent, cuInit reported
	// CUDA_ERROR_NO_DEVICE, or zero devices).
	ErrNoDevice = errors.New("warpkit: no CUDA device")
	// ErrOutOfMemory: a device or pinned-host allocation failed for lack of memory.
	ErrOutOfMemory = errors.New("warpkit: out of memory")
	// ErrClosed: the structure, device, buffer or stream was closed or freed.
	ErrClosed = errors.New("warpkit: use of closed object")
	// ErrReservedKey: an input key equals one of the structure's documented sentinels.
	ErrReservedKey = errors.New("warpkit: reserved key")
	// ErrPoolExhausted: a fixed-capacity pool (slab allocator, node pool) reached
	// its configured maximum.
	ErrPoolExhausted = errors.New("warpkit: pool exhausted")
	// ErrRetryLimit: a bounded retry loop in a kernel gave up (a latch held too
	// long, a table full); the operation did not complete.
	ErrRetryLimit = errors.New("warpkit: retry limit reached")
	// ErrInvalidArgument: malformed input (mismatched lengths, out-of-range sizes).
	ErrInvalidArgument = errors.New("warpkit: invalid argument")
	// ErrNeedsCUDA: a method on device-resident slices called on a structure of
	// the CPU backend. It wraps ErrInvalidArgument.
	ErrNeedsCUDA = fmt.Errorf("%w: device-resident slices need the CUDA backend", ErrInvalidArgument)
)
