package ebr

import (
	_ "embed"
	"fmt"

	"github.com/warpkit/warpkit/cuda"
)

//go:generate go run github.com/warpkit/warpkit/internal/kernelgen -o ptx/ebr.ptx ebr.cu

// ebrPTX holds ebr.cu: the in-kernel reclamation's churn workload, which
// this package's tests run on a GPU (and on the CPU emulation).
//
//go:embed ptx/ebr.ptx
var ebrPTX []byte

// EbrState's layout (internal/devcode/ebr.cuh), in 8-byte words: pointers,
// and two u32 pairs (blocks | overflow_cap, log_cap | poison).
const (
	wEpoch = iota
	wAnnounce
	wBlocksCap
	wOverflow
	wOverflowTag
	wOverflowN
	wLog
	wLogCapPoison
	wLogN
	wCounters
	stateWords
)

// DeviceState is the device memory of the in-kernel reclamation
// (internal/devcode/ebr.cuh) for a grid of blocks: the epoch, one
// announcement per block, per-block DRAM overflow bags, the launch log and
// the counters, and the EbrState that kernels take.
type DeviceState struct {
	logCap                     int
	state                      cuda.Slice[uint64]
	epoch, announce, overflow  cuda.Slice[uint32]
	tags, overflowN, log, logN cuda.Slice[uint32]
	counters                   cuda.Slice[uint64]
}

// NewDeviceState allocates the state for blocks blocks, overflow bags of
// overflowCap units per block and a launch log of logCap units; poisonBytes
// (a multiple of 4, or 0) is how much of a unit reclamation overwrites
// before it frees it.
func NewDeviceState(dev *cuda.Device, blocks, overflowCap, logCap, poisonBytes int) (*DeviceState, error) {
	if blocks <= 0 || overflowCap <= 0 || logCap <= 0 || poisonBytes < 0 || poisonBytes%4 != 0 {
		return nil, fmt.Errorf("%w: ebr: %d blocks, overflow %d, log %d, poison %d", cuda.ErrInvalidArgument, blocks, overflowCap, logCap, poisonBytes)
	}
	s := &DeviceState{logCap: logCap}
	var err error
	alloc32 := func(n int) cuda.Slice[uint32] {
		if err != nil {
			return cuda.Slice[uint32]{}
		}
		var d cuda.Slice[uint32]
		d, err = cuda.Alloc[uint32](dev, n)
		return d
	}
	s.epoch = alloc32(1)
	s.announce = alloc32(blocks)
	s.overflow = alloc32(blocks * overflowCap)
	s.tags = alloc32(blocks * overflowCap)
	s.overflowN = alloc32(blocks)
	s.log = alloc32(logCap)
	s.logN = alloc32(1)
	if err == nil {
		s.counters, err = cuda.Alloc[uint64](dev, 3)
	}
	if err == nil {
		s.state, err = cuda.Alloc[uint64](dev, stateWords)
	}
	if err != nil {
		s.Free()
		return nil, err
	}
	w := make([]uint64, stateWords)
	w[wEpoch] = uint64(s.epoch.Ptr())
	w[wAnnounce] = uint64(s.announce.Ptr())
	w[wBlocksCap] = uint64(blocks) | uint64(overflowCap)<<32
	w[wOverflow] = uint64(s.overflow.Ptr())
	w[wOverflowTag] = uint64(s.tags.Ptr())
	w[wOverflowN] = uint64(s.overflowN.Ptr())
	w[wLog] = uint64(s.log.Ptr())
	w[wLogCapPoison] = uint64(logCap) | uint64(poisonBytes)<<32
	w[wLogN] = uint64(s.logN.Ptr())
	w[wCounters] = uint64(s.counters.Ptr())
	if err := s.state.CopyFromHost(w); err != nil {
		s.Free()
		return nil, err
	}
	// The epoch starts at 0 (device memory comes uninitialized; Reset
	// leaves the epoch as it is, so that it goes on across launches).
	if err := s.epoch.Zero(nil); err != nil {
		s.Free()
		return nil, err
	}
	if err := s.Reset(); err != nil {
		s.Free()
		return nil, err
	}
	return s, nil
}

// Ptr is the EbrState kernels take (as `const wk::ebr::EbrState*`).
func (s *DeviceState) Ptr() cuda.DevicePtr { return s.state.Ptr() }

// Reset prepares a launch: every block quiescent, empty bags and log, the
// counters zero (the epoch goes on).
func (s *DeviceState) Reset() error {
	if err := cuda.Fill(s.announce, 1, nil); err != nil { // quiescent
		return err
	}
	if err := cuda.Fill(s.tags, ^uint32(0), nil); err != nil {
		return err
	}
	for _, z := range []interface{ Zero(*cuda.Stream) error }{s.overflowN, s.logN, s.counters} {
		if err := z.Zero(nil); err != nil {
			return err
		}
	}
	return nil
}

// Counters returns the units freed and leaked and the epoch advances since
// the last Reset.
func (s *DeviceState) Counters() (freed, leaked, advances uint64, err error) {
	var c [3]uint64
	err = s.counters.CopyToHost(c[:])
	return c[0], c[1], c[2], err
}

// Log returns the units the blocks handed over when they ended: free them
// once the launch has ended (launch epochs: Epochs).
func (s *DeviceState) Log() (cuda.Slice[uint32], error) {
	var n [1]uint32
	if err := s.logN.CopyToHost(n[:]); err != nil {
		return cuda.Slice[uint32]{}, err
	}
	return s.log.Sub(0, int(min(n[0], uint32(s.logCap)))), nil
}

// Free releases the device memory.
func (s *DeviceState) Free() {
	for _, d := range []cuda.Slice[uint32]{s.epoch, s.announce, s.overflow, s.tags, s.overflowN, s.log, s.logN} {
		if d.Buffer() != nil {
			d.Free()
		}
	}
	for _, d := range []cuda.Slice[uint64]{s.counters, s.state} {
		if d.Buffer() != nil {
			d.Free()
		}
	}
}
