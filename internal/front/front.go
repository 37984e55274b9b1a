// Package front is the one front layer every warpkit structure puts before its
// backends (docs/CONTRACT.md): the closed state, the exclusion between calls
// that may run side by side and calls that need the structure alone, the
// context check at entry, argument length checks, the CPU backend's answer to
// device-resident calls, and the "pkg: method: " prefix of every error.
//
// A structure embeds or holds one Front and writes each exported method as
//
//	func (m *Map[K, V]) Insert(ctx context.Context, keys []K, vals []V) error {
//		if err := m.f.Lens("insert", len(keys), len(vals)); err != nil {
//			return err
//		}
//		return m.f.Do(ctx, "insert", front.Shared, func() error { return m.impl.insert(ctx, keys, vals) })
//	}
package front

import (
	"context"
	"fmt"
	"sync"

	"github.com/warpkit/warpkit"
)

// Mode says whether a call may run beside other calls of the same structure.
type Mode int

const (
	// Shared calls run concurrently with each other (the structure's backend
	// coordinates them, or they only read).
	Shared Mode = iota
	// Exclusive calls run alone: no other call of the structure runs beside
	// them.
	Exclusive
)

// Front is the shared state of one structure. The zero value is not usable;
// call New.
type Front struct {
	pkg     string
	backend warpkit.Backend
	mu      sync.RWMutex
	closed  bool // guarded by mu
}

// New returns the front of a structure of package pkg on backend b.
func New(pkg string, b warpkit.Backend) *Front { return &Front{pkg: pkg, backend: b} }

// Backend returns the structure's backend; it works after Close.
func (f *Front) Backend() warpkit.Backend { return f.backend }

// Do runs run under the lock mode asks for, after refusing a closed
// structure (ErrClosed) and a done context; run's error comes back as
// "pkg: op: err".
func (f *Front) Do(ctx context.Context, op string, mode Mode, run func() error) error {
	if mode == Exclusive {
		f.mu.Lock()
		defer f.mu.Unlock()
	} else {
		f.mu.RLock()
		defer f.mu.RUnlock()
	}
	if f.closed {
		return f.Err(op, warpkit.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return f.Err(op, err)
	}
	return f.Err(op, run())
}

// Value is Do for calls that return a value.
func Value[T any](f *Front, ctx context.Context, op string, mode Mode, run func() (T, error)) (T, error) {
	var v T
	err := f.Do(ctx, op, mode, func() error {
		var err error
		v, err = run()
		return err
	})
	return v, err
}

// Close runs release once, alone, and marks the structure closed; a second
// Close returns ErrClosed, as every other method then does.
func (f *Front) Close(release func() error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return f.Err("close", warpkit.ErrClosed)
	}
	f.closed = true
	return f.Err("close", release())
}

// Closed reports whether Close has run.
func (f *Front) Closed() bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.closed
}

// Err prefixes err with the package and the operation (nil stays nil).
func (f *Front) Err(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %s: %w", f.pkg, op, err)
}

// Errorf is Err of a new error wrapping ErrInvalidArgument.
func (f *Front) Errorf(op, format string, args ...any) error {
	return f.Err(op, fmt.Errorf("%w: %s", warpkit.ErrInvalidArgument, fmt.Sprintf(format, args...)))
}

// Lens fails with ErrInvalidArgument unless every length equals n (with
// ErrClosed first on a closed structure, so that a closed structure answers
// every call alike).
func (f *Front) Lens(op string, n int, lens ...int) error {
	if f.Closed() {
		return f.Err(op, warpkit.ErrClosed)
	}
	for _, l := range lens {
		if l != n {
			return f.Errorf(op, "slices of different lengths (%d and %d)", n, l)
		}
	}
	return nil
}

// Device fails with ErrNeedsCUDA on the CPU backend (ErrClosed first on a
// closed structure): device-resident methods call it first.
func (f *Front) Device(op string) error {
	if f.Closed() {
		return f.Err(op, warpkit.ErrClosed)
	}
	if f.backend != warpkit.CUDA {
		return f.Err(op, warpkit.ErrNeedsCUDA)
	}
	return nil
}
