package slaballoc

import (
	"context"
	"fmt"
	"math/bits"
	"sync"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
)

// cpuPool is the pure-Go twin: the same super blocks, bitmaps and addresses
// in Go memory. Allocation scans bitmap words from a rotating cursor (first
// fit), so freed units are reused.
type cpuPool struct {
	opts   *Options
	mu     sync.Mutex
	units  [][]byte   // per super block
	bitmap [][]uint32 // per super block: 32 words per memory block
	used   int64
	cursor int // next word to look at, over all super blocks
}

func newCPU(opts *Options) *cpuPool { return &cpuPool{opts: opts} }

func (c *cpuPool) wordsPerSuper() int { return c.opts.BlocksPerSuperBlock * 32 }

// prepare has nothing to do ahead: a super block is a Go allocation.
func (c *cpuPool) prepare(int) (int, error) { return 0, nil }

func (c *cpuPool) preparedCount() int { return 0 }

func (c *cpuPool) grow(n int) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := 0; i < n; i++ {
		units := make([]byte, c.opts.BlocksPerSuperBlock*UnitsPerBlock*c.opts.UnitBytes)
		if c.opts.Fill != 0 {
			for i := range units {
				units[i] = c.opts.Fill
			}
		}
		c.units = append(c.units, units)
		c.bitmap = append(c.bitmap, make([]uint32, c.wordsPerSuper()))
	}
	return n, nil
}

func (c *cpuPool) reset(keep int, _ *cuda.Stream) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.units[keep:]) // the dropped super blocks go to the collector
	clear(c.bitmap[keep:])
	c.units, c.bitmap = c.units[:keep], c.bitmap[:keep]
	for i := range c.units {
		for j := range c.units[i] {
			c.units[i][j] = c.opts.Fill
		}
		clear(c.bitmap[i])
	}
	c.used, c.cursor = 0, 0
	return keep, nil
}

func (c *cpuPool) readUsed() (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used, nil
}

// countBits counts allocated units from the bitmaps (tests compare it with
// the counter, as on the GPU).
func (c *cpuPool) countBits() (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, bm := range c.bitmap {
		for _, w := range bm {
			n += int64(bits.OnesCount32(w))
		}
	}
	return n, nil
}

// allocate fills the Null entries of out; on exhaustion the rest stay Null.
func (c *cpuPool) allocate(out []uint32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	per := c.wordsPerSuper()
	total := per * len(c.bitmap)
	for i := range out {
		if out[i] != Null {
			continue
		}
		found := false
		for scanned := 0; scanned < total; scanned++ {
			w := c.cursor % total
			sb, wi := w/per, w%per
			if word := c.bitmap[sb][wi]; word != 0xffffffff {
				bit := bits.TrailingZeros32(^word)
				c.bitmap[sb][wi] = word | 1<<bit
				out[i] = uint32(sb)<<24 | uint32(wi*32+bit)
				c.used++
				found = true
				break
			}
			c.cursor++
		}
		if !found {
			return fmt.Errorf("%d of %d units left unallocated: %w", countNull(out), len(out), warpkit.ErrPoolExhausted)
		}
	}
	return nil
}

func countNull(a []uint32) int {
	n := 0
	for _, v := range a {
		if v == Null {
			n++
		}
	}
	return n
}

func (c *cpuPool) free(addrs []uint32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	bad := 0
	for _, a := range addrs {
		if a == Null {
			continue
		}
		sb, idx := int(a>>24), int(a&0xffffff)
		if sb >= len(c.bitmap) || idx>>10 >= c.opts.BlocksPerSuperBlock {
			bad++
			continue
		}
		w, bit := &c.bitmap[sb][idx>>5], uint32(1)<<(idx&31)
		if *w&bit == 0 {
			bad++
			continue
		}
		*w &^= bit
		c.used--
	}
	if bad > 0 {
		return fmt.Errorf("%w: %d addresses are not allocated units", warpkit.ErrInvalidArgument, bad)
	}
	return nil
}

func (c *cpuPool) allocateDevice(ctx context.Context, out cuda.Slice[uint32], kernel string) error {
	return errDeviceSlice
}

func (c *cpuPool) freeDevice(ctx context.Context, addrs cuda.Slice[uint32]) error {
	return errDeviceSlice
}

func (c *cpuPool) fillNull(out cuda.Slice[uint32]) error { return errDeviceSlice }

var errDeviceSlice = warpkit.ErrNeedsCUDA

func (c *cpuPool) unit(addr uint32) []byte {
	off := int(addr&0xffffff) * c.opts.UnitBytes
	return c.units[addr>>24][off : off+c.opts.UnitBytes]
}

func (c *cpuPool) readUnit(addr uint32, dst []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	copy(dst, c.unit(addr))
	return nil
}

func (c *cpuPool) writeUnit(addr uint32, src []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	copy(c.unit(addr), src)
	return nil
}

func (c *cpuPool) dump() ([]SuperBlock, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]SuperBlock, len(c.units))
	for i := range c.units {
		out[i] = SuperBlock{Units: append([]byte(nil), c.units[i]...), Bitmap: append([]uint32(nil), c.bitmap[i]...)}
	}
	return out, nil
}

func (c *cpuPool) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.units, c.bitmap = nil, nil
	return nil
}
