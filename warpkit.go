// Package warpkit brings the dynamic GPU data structures of the research
// literature to Go programs, with one API and two backends: CUDA (a GPU and an
// NVIDIA driver present) and pure Go (always). The library is pure Go: the CUDA
// driver is opened at run time (package cuda), so CGO_ENABLED=0 builds work and no
// CUDA toolkit is needed to build or use it.
//
// This package holds what every structure shares: the Backend selector, the
// error values (compare with errors.Is), and the key types.
//
// # Keys and values
//
// Keys and values are uint32 or uint64 ([Word]). Each structure documents at most
// two reserved key values (sentinels such as all-ones for "empty"); a batch
// containing one fails with ErrReservedKey and nothing in it is applied.
//
// # Errors
//
// Device out-of-memory wraps ErrOutOfMemory, a full pool ErrPoolExhausted, a
// bounded in-kernel retry that gave up ErrRetryLimit; after any of these the
// structure stays usable and consistent. Use after Close gives ErrClosed. A
// method on device-resident slices called on the CPU backend gives
// ErrNeedsCUDA (an ErrInvalidArgument).
//
// # The structure contract
//
// Every structure follows one contract (docs/CONTRACT.md in the repository):
// New(Options) constructors, Len(ctx), Stats(ctx), Close, batch methods
// (ctx, inputs..., outputs...) over parallel slices with Device twins,
// half-open ranges returned as [Ranges], and one word per idea (Lookup,
// Insert, Delete, Update, Apply, Count, Range, Build, Compact, ...).
package warpkit

import (
	"errors"
	"fmt"
	"strings"

	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/errs"
)

// Error values shared by all packages; see the package documentation.
var (
	ErrNoDevice        = errs.ErrNoDevice
	ErrOutOfMemory     = errs.ErrOutOfMemory
	ErrClosed          = errs.ErrClosed
	ErrReservedKey     = errs.ErrReservedKey
	ErrPoolExhausted   = errs.ErrPoolExhausted
	ErrRetryLimit      = errs.ErrRetryLimit
	ErrInvalidArgument = errs.ErrInvalidArgument
	ErrNeedsCUDA       = errs.ErrNeedsCUDA
)

// Word is the set of key and value types every structure accepts.
type Word interface {
	~uint32 | ~uint64
}

// Backend selects where a structure stores its data and runs its operations.
type Backend int

const (
	// Auto uses CUDA when a device is present and the CPU otherwise.
	Auto Backend = iota
	// CPU is the pure-Go backend: always available, and the oracle GPU results
	// are tested against.
	CPU
	// CUDA requires a device; without one, constructors fail with ErrNoDevice.
	CUDA
)

// String returns "auto", "cpu" or "cuda".
func (b Backend) String() string {
	switch b {
	case Auto:
		return "auto"
	case CPU:
		return "cpu"
	case CUDA:
		return "cuda"
	}
	return fmt.Sprintf("Backend(%d)", int(b))
}

// ParseBackend parses the String form, case-insensitively; "gpu" is accepted as
// a synonym for "cuda", "go" for "cpu", and "" for "auto".
func ParseBackend(s string) (Backend, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "auto":
		return Auto, nil
	case "cpu", "go":
		return CPU, nil
	case "cuda", "gpu":
		return CUDA, nil
	}
	return Auto, fmt.Errorf("%w: unknown backend %q (want auto, cpu or cuda)", ErrInvalidArgument, s)
}

// MarshalText implements encoding.TextMarshaler.
func (b Backend) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler, so a Backend can be a flag
// (flag.TextVar) or a JSON/TOML field.
func (b *Backend) UnmarshalText(text []byte) error {
	v, err := ParseBackend(string(text))
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// OpenDevice resolves a backend to a device. For CPU it returns (nil, nil). For
// CUDA it opens the device with the given ordinal or fails (ErrNoDevice when
// there is none). For Auto it opens the device when one exists and returns
// (nil, nil) when there is none. A non-nil device must be closed by the caller.
func OpenDevice(b Backend, ordinal int) (*cuda.Device, error) {
	switch b {
	case CPU:
		return nil, nil
	case CUDA, Auto:
		d, err := cuda.Open(ordinal)
		if err == nil {
			return d, nil
		}
		if b == Auto && errors.Is(err, ErrNoDevice) {
			return nil, nil
		}
		return nil, err
	}
	return nil, fmt.Errorf("%w: unknown backend %d", ErrInvalidArgument, int(b))
}
