package gpurt

import (
	"fmt"
	"sync"

	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/errs"
)

// The status flags and control-block words are generated from the one
// registry device code reads (internal/devcode/status.cuh) into
// status_gen.go.
//go:generate go run github.com/warpkit/warpkit/internal/kernelgen/constgen -o status_gen.go ../devcode/status.cuh

// StatusError maps a status word to the shared error values (nil for 0),
// the most specific flag first; a flag it does not know becomes an
// "unexpected device status" error.
func StatusError(what string, status uint32) error {
	switch {
	case status == StatusOK:
		return nil
	case status&StatusReservedKey != 0:
		return fmt.Errorf("%s: %w (a key of the batch is a sentinel)", what, errs.ErrReservedKey)
	case status&StatusBadOp != 0:
		return fmt.Errorf("%s: %w: unknown operation code in the batch", what, errs.ErrInvalidArgument)
	case status&StatusBadFree != 0:
		return fmt.Errorf("%s: %w: free of an address that is not an allocated unit", what, errs.ErrInvalidArgument)
	case status&StatusBadRoom != 0:
		return fmt.Errorf("%s: %w: a key's room lies outside the output", what, errs.ErrInvalidArgument)
	case status&StatusInvalidArgument != 0:
		return fmt.Errorf("%s: %w: invalid device input", what, errs.ErrInvalidArgument)
	case status&StatusPoolExhausted != 0:
		return fmt.Errorf("%s: %w", what, errs.ErrPoolExhausted)
	case status&StatusRetryLimit != 0:
		return fmt.Errorf("%s: %w", what, errs.ErrRetryLimit)
	case status&StatusOverflow != 0:
		return fmt.Errorf("%s: %w: an output buffer was too small", what, errs.ErrInvalidArgument)
	}
	return fmt.Errorf("%s: unexpected device status %#x", what, status)
}

// Wait waits until the stream's work has finished (on the caller's thread,
// polling briefly and then blocking in the driver; see package cuda). A
// launched kernel cannot be cancelled, so Wait always waits for it.
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
