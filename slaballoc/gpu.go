package slaballoc

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/gpurt"
)

// Descriptor layout, mirrored from wk::slab::Pool (internal/devcode/slaballoc.cuh),
// in 8-byte words.
const (
	descUnitsWord   = 0   // units[64]
	descBitmapsWord = 64  // bitmaps[64]
	descCountsWord  = 128 // num_super | blocks_per_super<<32
	descShiftWord   = 129 // unit_shift | flat<<32
	descUsedWord    = 144 // used
	descWords       = 160
)

// superBlock is one super block's memory: units followed by their bitmaps
// in one allocation, or (a flat pool) the units mapped into the pool's range
// and the bitmaps in an allocation of their own.
type superBlock struct {
	mem    *cuda.Buffer
	bitmap *cuda.Buffer // flat pools only
}

// prepared is a super block made ahead of its growth (Pool.Prepare): mapped
// (or allocated) at its index, its fills queued on the pool's stream, and the
// descriptor words that will name it.
type prepared struct {
	sb             superBlock
	units, bitmaps uint64
}

func (b superBlock) free() error {
	err := b.mem.Free()
	if b.bitmap != nil {
		err = errors.Join(err, b.bitmap.Free())
	}
	return err
}

// flatStride is the distance between a flat pool's super blocks: 2^24
// units, the span of an address's unit index, so that super block s, unit
// i — address s<<24 | i — is at base + address × unit bytes.
func flatStride(unitBytes int) uint64 { return uint64(1<<24) * uint64(unitBytes) }

// gpuPool is the CUDA backend.
type gpuPool struct {
	opts   *Options
	dev    *cuda.Device
	ownDev bool
	mod    *cuda.Module
	desc   cuda.Slice[uint64]
	host   [descShiftWord + 1]uint64 // the immutable part of the descriptor
	supers []superBlock
	// ahead are super blocks prepared past the published ones (Prepare):
	// ahead[k] is super block len(supers)+k. Guarded by Pool.growMu.
	ahead  []prepared
	nAhead atomic.Int32 // len(ahead), for Stats without growMu
	// A flat pool's super blocks are mapped into vr at stride bytes apart
	// (Options.Flat): unit a at vr.Base() + a×UnitBytes.
	vr      *cuda.VirtualRange
	stride  uint64
	stream  *cuda.Stream
	status  cuda.Slice[uint32]
	mu      sync.Mutex // serializes host-API kernels (they share stream and status)
	seed    atomic.Uint32
	counter cuda.Slice[uint64]
	// pending is the caller's stream a reset was queued on (ResetOn) and
	// not yet waited for: every other host call waits for it first (settle),
	// as its copies and the pool's own stream are not ordered after it.
	pendMu  sync.Mutex
	pending *cuda.Stream
	// hostFreed: units were freed through the host API (Free, FreeDevice)
	// since the last reset, without the restoring of their contents that a
	// kernel does before it frees; the next reset fills every unit.
	hostFreed atomic.Bool
}

// settle waits for a reset queued on a caller's stream (ResetOn), once.
func (g *gpuPool) settle() error {
	g.pendMu.Lock()
	defer g.pendMu.Unlock()
	if g.pending == nil {
		return nil
	}
	// Mostly the caller has waited for its stream since (one query).
	done, err := g.pending.Done()
	if err == nil && !done {
		err = g.pending.Synchronize()
	}
	g.pending = nil
	return err
}

func newGPU(opts *Options, dev *cuda.Device, ownDev bool) (*gpuPool, error) {
	g := &gpuPool{opts: opts, dev: dev, ownDev: ownDev}
	fail := func(err error) (*gpuPool, error) {
		g.close()
		return nil, fmt.Errorf("slaballoc: new: %w", err)
	}
	var err error
	if g.mod, err = dev.LoadModule(slaballocPTX); err != nil {
		return fail(err)
	}
	if g.desc, err = cuda.Alloc[uint64](dev, descWords); err != nil {
		return fail(err)
	}
	if err = g.desc.Zero(nil); err != nil {
		return fail(err)
	}
	if g.status, err = cuda.Alloc[uint32](dev, 1); err != nil {
		return fail(err)
	}
	if g.counter, err = cuda.Alloc[uint64](dev, 1); err != nil {
		return fail(err)
	}
	if g.stream, err = dev.NewStream(); err != nil {
		return fail(err)
	}
	g.host[descCountsWord] = uint64(opts.BlocksPerSuperBlock) << 32
	g.host[descShiftWord] = uint64(bits.TrailingZeros(uint(opts.UnitBytes)))
	if opts.Flat {
		g.stride = flatStride(opts.UnitBytes)
		if g.vr, err = dev.ReserveRange(uint64(opts.MaxSuperBlocks) * g.stride); err != nil {
			return fail(fmt.Errorf("a flat pool's address range: %w", err))
		}
		if g.stride%g.vr.Granularity() != 0 {
			return fail(fmt.Errorf("%w: super block stride %d is not a multiple of the mapping granularity %d",
				warpkit.ErrInvalidArgument, g.stride, g.vr.Granularity()))
		}
		g.host[descShiftWord] |= 1 << 32
	}
	return g, nil
}

// superBytes returns the units' bytes and the total size of one super block.
func (g *gpuPool) superBytes() (units, total int64) {
	blocks := int64(g.opts.BlocksPerSuperBlock)
	units = blocks * UnitsPerBlock * int64(g.opts.UnitBytes)
	return units, units + blocks*UnitsPerBlock/8
}

// grow adds up to n super blocks in one step: it takes the prepared ones
// first and allocates and fills the rest, synchronizes once, and publishes
// them with one descriptor write. When the
// device runs out part way it publishes the ones it got. The caller holds the
// pool's use lock for writing, so no kernel that reads the descriptor is in
// flight (holders of Acquire wait for their kernels before releasing it) and
// none starts before the lock is released; the descriptor write is a
// synchronous copy, complete when it returns, so every later launch, on any
// stream, sees the whole new descriptor.
func (g *gpuPool) grow(n int) (int, error) {
	if err := g.settle(); err != nil {
		return 0, err
	}
	next := g.host
	var bufs []superBlock
	var err error
	for len(bufs) < n && len(g.supers)+len(bufs) < MaxSuperBlocks {
		i := len(g.supers) + len(bufs)
		var b prepared
		if len(g.ahead) > 0 {
			b = g.ahead[0]
			g.ahead = g.ahead[1:]
			g.nAhead.Store(int32(len(g.ahead)))
		} else if b, err = g.fresh(i, nil); err != nil {
			break
		}
		next[descUnitsWord+i] = b.units
		next[descBitmapsWord+i] = b.bitmaps
		bufs = append(bufs, b.sb)
	}
	if len(bufs) == 0 {
		return 0, err
	}
	next[descCountsWord] = uint64(len(g.supers)+len(bufs)) | uint64(g.opts.BlocksPerSuperBlock)<<32
	// The fills are done before the descriptor names the new super blocks.
	serr := g.dev.Synchronize()
	if serr == nil {
		serr = g.desc.Sub(0, len(next)).CopyFromHost(next[:])
	}
	if serr != nil {
		for _, b := range bufs {
			b.free()
		}
		g.freeAhead() // they were made for indexes past the ones just freed
		return 0, serr
	}
	g.host = next
	g.supers = append(g.supers, bufs...)
	return len(bufs), err
}

// fresh makes super block i: its memory (newSuper), its units filled and
// its bitmaps zeroed on stream s (nil: the legacy default stream).
func (g *gpuPool) fresh(i int, s *cuda.Stream) (prepared, error) {
	unitBytes, total := g.superBytes()
	b, err := g.newSuper(i)
	if err != nil {
		return prepared{}, err
	}
	units, err := cuda.View[uint8](b.mem, 0, int(unitBytes))
	if err == nil {
		err = units.FillBytes(g.opts.Fill, s)
	}
	bm, bmOff := b.mem, int(unitBytes)
	if b.bitmap != nil {
		bm, bmOff = b.bitmap, 0
	}
	var bitmaps cuda.Slice[uint8]
	if err == nil {
		bitmaps, err = cuda.View[uint8](bm, bmOff, int(total-unitBytes))
	}
	if err == nil {
		err = bitmaps.Zero(s)
	}
	if err != nil {
		b.free()
		return prepared{}, err
	}
	return prepared{sb: b, units: uint64(b.mem.Ptr()), bitmaps: uint64(bitmaps.Ptr())}, nil
}

// prepare makes super blocks past the published and the prepared ones until
// n are prepared, their fills on the pool's stream (the growth that
// publishes them synchronizes the device first). Kernels may be running:
// nothing they read changes. The caller holds Pool.growMu, not the use lock.
func (g *gpuPool) prepare(n int) (int, error) {
	g.mu.Lock() // the pool's stream
	defer g.mu.Unlock()
	for len(g.ahead) < n && len(g.supers)+len(g.ahead) < MaxSuperBlocks {
		b, err := g.fresh(len(g.supers)+len(g.ahead), g.stream)
		if err != nil {
			return len(g.ahead), err
		}
		g.ahead = append(g.ahead, b)
		g.nAhead.Store(int32(len(g.ahead)))
	}
	return len(g.ahead), nil
}

// freeAhead frees the prepared super blocks.
func (g *gpuPool) freeAhead() error {
	var err error
	if len(g.ahead) > 0 {
		// Their fills may still run on the pool's stream.
		err = g.stream.Synchronize()
	}
	for _, b := range g.ahead {
		err = errors.Join(err, b.sb.free())
	}
	g.ahead = nil
	g.nAhead.Store(0)
	return err
}

func (g *gpuPool) preparedCount() int { return int(g.nAhead.Load()) }

// newSuper allocates super block i: one allocation of units and bitmaps,
// or, in a flat pool, the units mapped at i×stride in the pool's range and
// the bitmaps apart.
func (g *gpuPool) newSuper(i int) (superBlock, error) {
	unitBytes, total := g.superBytes()
	if g.vr == nil {
		b, err := g.dev.Alloc(total)
		return superBlock{mem: b}, err
	}
	mem, err := g.vr.Map(uint64(i)*g.stride, uint64(unitBytes))
	if err != nil {
		return superBlock{}, err
	}
	bm, err := g.dev.Alloc(total - unitBytes)
	if err != nil {
		mem.Free()
		return superBlock{}, err
	}
	return superBlock{mem: mem, bitmap: bm}, nil
}

// reset gives back the super blocks past keep (the descriptor names only
// the others first), then empties the others with one launch of
// slaballoc_reset on stream (the units in use refilled with Fill, their
// bits cleared, the used counter zeroed); with the nil stream it runs on
// the pool's and waits. It returns how many super blocks the pool has.
func (g *gpuPool) reset(keep int, stream *cuda.Stream) (int, error) {
	if err := g.settle(); err != nil {
		return len(g.supers), err
	}
	if err := g.freeAhead(); err != nil { // made for indexes past the ones given back
		return len(g.supers), err
	}
	if keep < len(g.supers) {
		next := g.host
		for i := keep; i < MaxSuperBlocks; i++ {
			next[descUnitsWord+i], next[descBitmapsWord+i] = 0, 0
		}
		next[descCountsWord] = uint64(keep) | uint64(g.opts.BlocksPerSuperBlock)<<32
		if err := g.desc.Sub(0, len(next)).CopyFromHost(next[:]); err != nil {
			return len(g.supers), err // nothing changed
		}
		g.host = next
		var err error
		for _, b := range g.supers[keep:] {
			err = errors.Join(err, b.free())
		}
		clear(g.supers[keep:])
		g.supers = g.supers[:keep]
		if err != nil {
			return keep, err
		}
	}
	s := stream
	if s == nil {
		s = g.stream
	}
	var err error
	if g.hostFreed.Swap(false) {
		err = g.fillAll(s)
	} else {
		err = g.resetInUse(s)
	}
	if err != nil {
		return keep, errors.Join(err, gpurt.Wait(s))
	}
	if stream != nil {
		g.pendMu.Lock()
		g.pending = stream
		g.pendMu.Unlock()
		return keep, nil
	}
	return keep, gpurt.Wait(s)
}

// resetInUse queues slaballoc_reset on s: the units in use refilled, their
// bits cleared, the counter zeroed (free units hold the fill already).
func (g *gpuPool) resetInUse(s *cuda.Stream) error {
	f, err := g.mod.Function("slaballoc_reset")
	if err != nil {
		return err
	}
	words := int64(len(g.supers)) * int64(g.opts.BlocksPerSuperBlock) * 32
	grid := gpurt.Grid(f, g.dev, max(1, words), 256, 2)
	return f.Launch(grid, cuda.D1(256), 0, s, g.desc, uint32(g.opts.Fill)*0x01010101)
}

// fillAll queues on s a fill of every unit of every super block, zeroed
// bitmaps and a zeroed counter: the reset after host frees.
func (g *gpuPool) fillAll(s *cuda.Stream) error {
	unitBytes, total := g.superBytes()
	for _, b := range g.supers {
		units, err := cuda.View[uint8](b.mem, 0, int(unitBytes))
		if err == nil {
			err = units.FillBytes(g.opts.Fill, s)
		}
		if err != nil {
			return err
		}
		bm, off := b.mem, int(unitBytes)
		if b.bitmap != nil {
			bm, off = b.bitmap, 0
		}
		bitmaps, err := cuda.View[uint8](bm, off, int(total-unitBytes))
		if err == nil {
			err = bitmaps.Zero(s)
		}
		if err != nil {
			return err
		}
	}
	return g.desc.Sub(descUsedWord, descUsedWord+1).Zero(s)
}

func (g *gpuPool) readUsed() (int64, error) {
	if err := g.settle(); err != nil {
		return 0, err
	}
	var v [1]uint64
	if err := g.desc.Sub(descUsedWord, descUsedWord+1).CopyToHost(v[:]); err != nil {
		return 0, err
	}
	return int64(v[0]), nil
}

// countBits counts the set bits of every bitmap: the exact number of
// allocated units, which tests compare with the counter. The caller holds the
// use lock (g.supers changes only under its write side).
func (g *gpuPool) countBits() (int64, error) {
	if err := g.settle(); err != nil {
		return 0, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	f, err := g.mod.Function("slaballoc_count_bits")
	if err != nil {
		return 0, err
	}
	if err := g.counter.Zero(g.stream); err != nil {
		return 0, err
	}
	words := int64(g.opts.BlocksPerSuperBlock) * 32
	for i := range g.supers {
		grid := gpurt.Grid(f, g.dev, words, 256, 1)
		if err := f.Launch(grid, cuda.D1(256), 0, g.stream, cuda.DevicePtr(g.host[descBitmapsWord+i]), uint64(words), g.counter); err != nil {
			return 0, err
		}
	}
	if err := gpurt.Wait(g.stream); err != nil {
		return 0, err
	}
	var v [1]uint64
	if err := g.counter.CopyToHost(v[:]); err != nil {
		return 0, err
	}
	return int64(v[0]), nil
}

// fillNull sets out to Null on the pool's stream, ahead of the allocation
// kernels that launch() queues behind it.
func (g *gpuPool) fillNull(out cuda.Slice[uint32]) error {
	if err := g.settle(); err != nil {
		return err
	}
	return cuda.Fill(out, Null, g.stream)
}

// allocate fills the Null entries of out.
func (g *gpuPool) allocate(out []uint32) error {
	if err := g.settle(); err != nil {
		return err
	}
	d, err := cuda.FromHost(g.dev, out)
	if err != nil {
		return err
	}
	defer d.Free()
	kerr := g.allocateDevice(context.Background(), d, "slaballoc_alloc_bulk")
	if err := d.CopyToHost(out); err != nil {
		return err
	}
	return kerr
}

func (g *gpuPool) allocateDevice(ctx context.Context, out cuda.Slice[uint32], kernel string) error {
	return g.launch(kernel, "allocate", func(f *cuda.Function) error {
		grid := gpurt.Grid(f, g.dev, int64(out.Len()), 256, 1)
		return f.Launch(grid, cuda.D1(256), 0, g.stream, g.desc, out, uint64(out.Len()), g.status, g.seed.Add(1))
	})
}

func (g *gpuPool) free(addrs []uint32) error {
	if err := g.settle(); err != nil {
		return err
	}
	d, err := cuda.FromHost(g.dev, addrs)
	if err != nil {
		return err
	}
	defer d.Free()
	return g.freeDevice(context.Background(), d)
}

func (g *gpuPool) freeDevice(ctx context.Context, addrs cuda.Slice[uint32]) error {
	if addrs.Len() == 0 {
		return nil
	}
	g.hostFreed.Store(true)
	return g.launch("slaballoc_free", "free", func(f *cuda.Function) error {
		grid := gpurt.Grid(f, g.dev, int64(addrs.Len()), 256, 2)
		return f.Launch(grid, cuda.D1(256), 0, g.stream, g.desc, addrs, uint64(addrs.Len()), g.status)
	})
}

// launch runs one host-API kernel on the pool's stream and maps its status.
func (g *gpuPool) launch(kernel, what string, run func(f *cuda.Function) error) error {
	if err := g.settle(); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	f, err := g.mod.Function(kernel)
	if err != nil {
		return err
	}
	if err := g.status.Zero(g.stream); err != nil {
		return err
	}
	if err := run(f); err != nil {
		return err
	}
	if err := gpurt.Wait(g.stream); err != nil {
		return err
	}
	var st [1]uint32
	if err := g.status.CopyToHost(st[:]); err != nil {
		return err
	}
	return gpurt.StatusError("slaballoc: "+what, st[0])
}

func (g *gpuPool) unitView(addr uint32, n int) (cuda.Slice[uint8], error) {
	off := int64(addr&0xffffff) * int64(g.opts.UnitBytes)
	return cuda.View[uint8](g.supers[addr>>24].mem, int(off), n)
}

func (g *gpuPool) readUnit(addr uint32, dst []byte) error {
	if err := g.settle(); err != nil {
		return err
	}
	v, err := g.unitView(addr, len(dst))
	if err != nil {
		return err
	}
	return v.CopyToHost(dst)
}

func (g *gpuPool) writeUnit(addr uint32, src []byte) error {
	if err := g.settle(); err != nil {
		return err
	}
	v, err := g.unitView(addr, len(src))
	if err != nil {
		return err
	}
	return v.CopyFromHost(src)
}

func (g *gpuPool) dump() ([]SuperBlock, error) {
	if err := g.settle(); err != nil {
		return nil, err
	}
	unitBytes, total := g.superBytes()
	out := make([]SuperBlock, len(g.supers))
	for i, b := range g.supers {
		units, err := cuda.View[uint8](b.mem, 0, int(unitBytes))
		if err != nil {
			return nil, err
		}
		bm, err := cuda.View[uint32](b.mem, int(unitBytes)/4, int(total-unitBytes)/4)
		if b.bitmap != nil {
			bm, err = cuda.View[uint32](b.bitmap, 0, int(total-unitBytes)/4)
		}
		if err != nil {
			return nil, err
		}
		out[i] = SuperBlock{Units: make([]byte, unitBytes), Bitmap: make([]uint32, bm.Len())}
		if err := units.CopyToHost(out[i].Units); err != nil {
			return nil, err
		}
		if err := bm.CopyToHost(out[i].Bitmap); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (g *gpuPool) close() error {
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	keep(g.settle())
	if g.stream != nil {
		keep(g.freeAhead())
		keep(g.stream.Close())
	}
	for _, b := range g.supers {
		keep(b.free())
	}
	g.supers = nil
	if g.vr != nil {
		keep(g.vr.Free())
		g.vr = nil
	}
	for _, s := range []cuda.Slice[uint64]{g.desc, g.counter} {
		if s.Buffer() != nil {
			keep(s.Free())
		}
	}
	if g.status.Buffer() != nil {
		keep(g.status.Free())
	}
	if g.ownDev {
		keep(g.dev.Close())
	}
	return first
}

// Bump is the allocator benchmark's baseline: Allocate sets out[i] to the
// next value of a device counter, one atomicAdd per allocation, with no reuse
// and no free. It waits as pools do (its own stream, polled), so the
// comparison measures the kernels.
type Bump struct {
	f       *cuda.Function
	counter cuda.Slice[uint32]
	stream  *cuda.Stream
	dev     *cuda.Device
}

// NewBump prepares a bump allocator on dev.
func NewBump(dev *cuda.Device) (*Bump, error) {
	mod, err := dev.LoadModule(slaballocPTX)
	if err != nil {
		return nil, err
	}
	b := &Bump{dev: dev}
	if b.f, err = mod.Function("slaballoc_bump"); err != nil {
		return nil, err
	}
	if b.counter, err = cuda.Alloc[uint32](dev, 1); err != nil {
		return nil, err
	}
	if b.stream, err = dev.NewStream(); err != nil {
		b.counter.Free()
		return nil, err
	}
	return b, nil
}

// Allocate fills out from a counter starting at zero and returns when the
// kernel has finished.
func (b *Bump) Allocate(ctx context.Context, out cuda.Slice[uint32]) error {
	if err := b.counter.Zero(b.stream); err != nil {
		return err
	}
	if err := b.f.Launch(gpurt.Grid(b.f, b.dev, int64(out.Len()), 256, 2), cuda.D1(256), 0, b.stream, b.counter, out, uint64(out.Len())); err != nil {
		return err
	}
	return gpurt.Wait(b.stream)
}

// Close frees the counter and the stream.
func (b *Bump) Close() error {
	return errors.Join(b.stream.Close(), b.counter.Free())
}
