// Package slabrt holds the host-side helpers that slaballoc, slabhash and the
// benchmark baselines share: waiting for a stream without blocking the
// device's driver thread, sizing persistent grids, and reading status words.
package slabrt

import (
	"fmt"
	"sync"

	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/errs"
)

// Status flags, mirrored from internal/devcode/status.cuh, slaballoc.cuh and
// slabhash.cuh (the flags their kernels report; status.cuh's overflow flag is
// not one of them).
const (
	StatusRetryLimit    = 1 << 0
	StatusPoolExhausted = 1 << 1
	StatusBadFree       = 1 << 8
	StatusReservedKey   = 1 << 9 // slabhash: a device batch held a reserved key
	StatusBadOp         = 1 << 10
)

// StatusError maps status flags to the shared error values (nil for 0); a
// flag it does not know becomes an "unexpected device status" error.
func StatusError(what string, status uint32) error {
	switch {
	case status == 0:
		return nil
	case status&StatusReservedKey != 0:
		return fmt.Errorf("%s: %w (a key of the batch is a sentinel)", what, errs.ErrReservedKey)
	case status&StatusBadOp != 0:
		return fmt.Errorf("%s: %w: unknown operation code in the batch", what, errs.ErrInvalidArgument)
	case status&StatusBadFree != 0:
		return fmt.Errorf("%s: %w: free of an address that is not an allocated unit", what, errs.ErrInvalidArgument)
	case status&StatusPoolExhausted != 0:
		return fmt.Errorf("%s: %w", what, errs.ErrPoolExhausted)
	case status&StatusRetryLimit != 0:
		return fmt.Errorf("%s: %w", what, errs.ErrRetryLimit)
	}
	return fmt.Errorf("%s: unexpected device status %#x", what, status)
}

// Wait waits until the stream's work has finished. Stream.Synchronize polls
// the stream through the device's executor (a thread wake-up costs far more
// than a short kernel on a virtual machine) and blocks on a waiter thread only
// for long waits; other goroutines' calls proceed meanwhile. A launched
// kernel cannot be cancelled, so Wait always waits for it.
func Wait(s *cuda.Stream) error { return s.Synchronize() }

// Grid returns the grid for a grid-stride kernel over n items with blocks of
// block threads: enough blocks for n, but no more than wave times what the
// device holds at once (persistent tiles keep their allocator state).
func Grid(f *cuda.Function, dev *cuda.Device, n int64, block, wave int) cuda.Dim3 {
	need := (n + int64(block) - 1) / int64(block)
	if need < 1 {
		need = 1
	}
	perSM := occupancy(f, block)
	limit := int64(perSM * dev.Properties().Multiprocessors * wave)
	if limit > 0 && need > limit {
		need = limit
	}
	return cuda.D1(int(need))
}

var occ sync.Map // occKey -> int

type occKey struct {
	f     *cuda.Function
	block int
}

func occupancy(f *cuda.Function, block int) int {
	k := occKey{f, block}
	if v, ok := occ.Load(k); ok {
		return v.(int)
	}
	n, err := f.MaxActiveBlocksPerSM(block, 0)
	if err != nil || n < 1 {
		n = 1
	}
	occ.Store(k, n)
	return n
}
