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
)

// Null is the address that names no unit.
const Null uint32 = 0xffffffff

// Limits of the address layout.
const (
	UnitsPerBlock          = 1024
	MaxSuperBlocks         = 64
	MaxBlocksPerSuperBlock = 1 << 14
)

// Options configure a Pool. Zero values take the defaults.
type Options struct {
	Backend warpkit.Backend
	// Device is used by the CUDA backend; nil opens device 0 (closed by Close).
	Device *cuda.Device
	// UnitBytes is the unit size, a power of two from 16 to 4096 (default 128).
	UnitBytes int
	// BlocksPerSuperBlock is the number of 1024-unit memory blocks per super
	// block, 1 to 16384 (default 256: 32 MiB of 128-byte units).
	BlocksPerSuperBlock int
	// InitialSuperBlocks is how many super blocks New allocates (default 1).
	InitialSuperBlocks int
	// MaxSuperBlocks bounds growth, InitialSuperBlocks to 64 (default 64).
	MaxSuperBlocks int
	// LowWater is the number of free units Reserve keeps beyond each request
	// (default: a quarter of a super block).
	LowWater int
	// Fill is the byte every unit of a new super block is set to.
	Fill byte
	// Flat maps every super block of a CUDA pool into one reserved address
	// range, super block s at s × 2^24 × UnitBytes, so that the unit at
	// address a is at the first super block's base + a × UnitBytes: kernels
	// may decode addresses without the descriptor's table
	// (slaballoc.cuh: flat_ptr). The range reserves MaxSuperBlocks × 2^24 ×
	// UnitBytes of address space (no memory); the memory is mapped a super
	// block at a time as the pool grows, as without Flat. It needs the
	// driver's virtual memory management (cuda.VirtualRange; New fails
	// with errors.ErrUnsupported on a device without it). The CPU backend
	// has no device addresses to decode and ignores it.
	Flat bool
}

func (o *Options) setDefaults() error {
	if o.UnitBytes == 0 {
		o.UnitBytes = 128
	}
	if o.BlocksPerSuperBlock == 0 {
		o.BlocksPerSuperBlock = 256
	}
	if o.InitialSuperBlocks == 0 {
		o.InitialSuperBlocks = 1
	}
	if o.MaxSuperBlocks == 0 {
		o.MaxSuperBlocks = MaxSuperBlocks
	}
	if o.LowWater == 0 {
		o.LowWater = o.BlocksPerSuperBlock * UnitsPerBlock / 4
	}
	switch {
	case o.Backend != warpkit.Auto && o.Backend != warpkit.CPU && o.Backend != warpkit.CUDA:
		return fmt.Errorf("%w: slaballoc: unknown backend %d", warpkit.ErrInvalidArgument, int(o.Backend))
	case o.UnitBytes < 16 || o.UnitBytes > 4096 || bits.OnesCount(uint(o.UnitBytes)) != 1:
		return fmt.Errorf("%w: slaballoc: unit size %d (want a power of two, 16 to 4096)", warpkit.ErrInvalidArgument, o.UnitBytes)
	case o.BlocksPerSuperBlock < 1 || o.BlocksPerSuperBlock > MaxBlocksPerSuperBlock:
		return fmt.Errorf("%w: slaballoc: %d blocks per super block (want 1 to %d)", warpkit.ErrInvalidArgument, o.BlocksPerSuperBlock, MaxBlocksPerSuperBlock)
	case o.MaxSuperBlocks < 1 || o.MaxSuperBlocks > MaxSuperBlocks:
		return fmt.Errorf("%w: slaballoc: at most %d super blocks (want 1 to %d)", warpkit.ErrInvalidArgument, o.MaxSuperBlocks, MaxSuperBlocks)
	case o.InitialSuperBlocks < 1 || o.InitialSuperBlocks > o.MaxSuperBlocks:
		return fmt.Errorf("%w: slaballoc: %d initial super blocks (want 1 to %d)", warpkit.ErrInvalidArgument, o.InitialSuperBlocks, o.MaxSuperBlocks)
	case o.LowWater < 0:
		return fmt.Errorf("%w: slaballoc: negative low-water mark", warpkit.ErrInvalidArgument)
	}
	return nil
}

// Stats describe a pool's units.
type Stats struct {
	Backend        warpkit.Backend
	UnitBytes      int
	SuperBlocks    int
	MaxSuperBlocks int
	Capacity       int64 // units in the current super blocks
	MaxCapacity    int64 // units at MaxSuperBlocks
	Allocated      int64
	Free           int64 // Capacity - Allocated
	Growths        int64 // growth steps since New (each adds one or more super blocks)
	Prepared       int   // super blocks made ahead of a growth (Prepare), in no Capacity yet
}

// impl is one backend.
type impl interface {
	grow(n int) (int, error)               // add up to n super blocks, return how many (caller holds growMu and the use lock)
	prepare(n int) (int, error)            // make super blocks ahead until n are prepared, return how many are (caller holds growMu only)
	preparedCount() int                    // prepared super blocks (any goroutine)
	readUsed() (int64, error)              // the allocated-units counter (caller holds the use lock)
	countBits() (int64, error)             // allocated units counted in the bitmaps, for tests (caller holds the use lock)
	fillNull(out cuda.Slice[uint32]) error // set out to Null, ordered before the next allocateDevice
	allocate(out []uint32) error           // all-or-nothing is handled by Pool
	free(addrs []uint32) error
	allocateDevice(ctx context.Context, out cuda.Slice[uint32], kernel string) error
	freeDevice(ctx context.Context, addrs cuda.Slice[uint32]) error
	readUnit(addr uint32, dst []byte) error
	writeUnit(addr uint32, src []byte) error
	dump() ([]SuperBlock, error)
	reset(keep int, s *cuda.Stream) (int, error) // free every unit, keep keep super blocks, return how many it has; on s without a wait when given (caller holds growMu and the use lock)
	close() error
}

// Pool is a SlabAlloc pool; see the package documentation.
type Pool struct {
	opts    Options
	backend warpkit.Backend
	impl    impl

	use     sync.RWMutex // read: kernels using the descriptor; write: growth, Close
	growMu  sync.Mutex
	supers  atomic.Int32
	growths atomic.Int64
	closed  atomic.Bool

	usedSeen atomic.Int64 // allocated units at the last reading, plus what host calls allocated since
	freed    atomic.Int64 // units host calls freed since the last reading (Observed only)
	pending  atomic.Int64 // units of the reservations not yet ended (Unreserve)
}

// New creates a pool with opts.InitialSuperBlocks super blocks.
func New(opts Options) (*Pool, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	dev, own := opts.Device, false
	switch {
	case opts.Backend == warpkit.CPU:
		dev = nil
	case dev == nil:
		var err error
		if dev, err = warpkit.OpenDevice(opts.Backend, 0); err != nil {
			return nil, fmt.Errorf("slaballoc: %w", err)
		}
		own = dev != nil
	}
	p := &Pool{opts: opts}
	if dev == nil {
		p.backend = warpkit.CPU
		p.impl = newCPU(&p.opts)
	} else {
		p.backend = warpkit.CUDA
		g, err := newGPU(&p.opts, dev, own) // on failure it closes the device it owns
		if err != nil {
			return nil, err
		}
		p.impl = g
	}
	added, err := p.impl.grow(opts.InitialSuperBlocks)
	if err != nil {
		p.impl.close()
		return nil, fmt.Errorf("slaballoc: new: %w", err)
	}
	p.supers.Store(int32(added))
	return p, nil
}

// Backend reports the backend in use (CPU or CUDA).
func (p *Pool) Backend() warpkit.Backend { return p.backend }

// Flat reports whether the pool's units are at the first super block's base
// + address × UnitBytes (Options.Flat on the CUDA backend).
func (p *Pool) Flat() bool { return p.backend == warpkit.CUDA && p.opts.Flat }

// UnitBytes returns the unit size.
func (p *Pool) UnitBytes() int { return p.opts.UnitBytes }

// SuperBlocks returns the number of super blocks now.
func (p *Pool) SuperBlocks() int { return int(p.supers.Load()) }

func (p *Pool) unitsPerSuper() int64 { return int64(p.opts.BlocksPerSuperBlock) * UnitsPerBlock }

// superBlocksFor is how many super blocks hold units more units.
func (p *Pool) superBlocksFor(units int64) int {
	return int((units + p.unitsPerSuper() - 1) / p.unitsPerSuper())
}

// Capacity returns the number of units in the current super blocks.
func (p *Pool) Capacity() int64 { return int64(p.supers.Load()) * p.unitsPerSuper() }

// device is live for the methods on device-resident slices, which need the
// CUDA backend.
func (p *Pool) device(op string) error {
	if err := p.live(op); err != nil {
		return err
	}
	if p.backend != warpkit.CUDA {
		return fmt.Errorf("slaballoc: %s: %w", op, warpkit.ErrNeedsCUDA)
	}
	return nil
}

func (p *Pool) live(op string) error {
	if p == nil || p.closed.Load() {
		return fmt.Errorf("slaballoc: %s: %w", op, warpkit.ErrClosed)
	}
	return nil
}

// Acquire is held by callers while their kernels use the descriptor; the
// returned function releases it. Growth and Close wait for every holder.
func (p *Pool) Acquire() (release func(), err error) {
	p.use.RLock()
	if err := p.live("acquire"); err != nil {
		p.use.RUnlock()
		return nil, err
	}
	return p.use.RUnlock, nil
}

// Observe records the allocated count a caller read back after its kernel
// (the descriptor's counter), refreshing Reserve's estimate of what is free.
// It leaves the reservations alone: each ends with its own Unreserve.
func (p *Pool) Observe(allocated int64) {
	p.usedSeen.Store(allocated)
	p.freed.Store(0)
}

// Observed is the allocated count last recorded by Observe (or read by
// Reserve or Stats), plus the units the host's allocations took since,
// less the units its Free and FreeDevice calls gave back since: the units
// in use, an estimate callers may size their work by. (Reserve's own
// estimate keeps the freed units until the next reading: it errs on the
// side of growing.)
func (p *Pool) Observed() int64 { return max(p.usedSeen.Load()-p.freed.Load(), 0) }

// Unreserve ends a reservation of units made by Reserve, once the launches
// it covered have finished (or failed). A caller that reads the counter back
// calls Observe first, so the estimate counts its allocations throughout.
func (p *Pool) Unreserve(units int) { p.pending.Add(-int64(units)) }

// Reserve makes sure that units + LowWater units are free before a launch
// that may allocate up to units, besides the units of the reservations still
// in flight, adding super blocks up to MaxSuperBlocks (see growth for how
// many at a time). The reservation lasts until the caller ends it with
// Unreserve. Reserve reads the device counter only when the host estimate
// says the pool may be short. Running short at the maximum is not an error
// here: the kernel reports exhaustion if it really happens. A failed device
// allocation while growing returns ErrOutOfMemory only if the free units do
// not cover units. On error there is no reservation to end.
func (p *Pool) Reserve(ctx context.Context, units int) error {
	if err := p.live("reserve"); err != nil {
		return err
	}
	want := int64(units) + int64(p.opts.LowWater)
	if p.Capacity()-p.usedSeen.Load()-p.pending.Load() >= want {
		p.pending.Add(int64(units))
		return nil
	}
	p.growMu.Lock()
	defer p.growMu.Unlock()
	used, err := p.readUsed("reserve")
	if err != nil {
		return err
	}
	p.Observe(used)
	// The other reservations in flight may still allocate (some of them may
	// already be counted in used: the estimate errs on the side of growing).
	used += p.pending.Load()
	for p.Capacity()-used < want && p.SuperBlocks() < p.opts.MaxSuperBlocks {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("slaballoc: reserve: %w", err)
		}
		short := want - (p.Capacity() - used)
		need := p.superBlocksFor(short)
		if err := p.growLocked(need); err != nil {
			if p.Capacity()-used >= int64(units) {
				break
			}
			return fmt.Errorf("slaballoc: reserve %d units: %w", units, err)
		}
	}
	p.pending.Add(int64(units))
	return nil
}

// Prepare makes ahead of time the super blocks that Reserve(ctx, units)
// would add now, so that the growth that follows only publishes them: on
// the CUDA backend it maps (or allocates) them and queues their fills
// without naming them in the descriptor, while the caller's kernels run
// (mapping a super block of 32 MiB took ~90 µs of driver calls on an H200,
// which a growth otherwise spends with the device idle). A caller that
// launches a batch and waits for it calls Prepare in between with the next
// batch's reservation. It is best-effort: it returns at once when the pool
// looks to have room, and when a growth, a Reset, a Close or another
// Prepare holds the pool (it never waits for them, nor for kernels, so a
// caller holding Acquire may call it); it estimates from what the host last
// saw of the allocated count, without reading the device's. It holds at
// most one growth step's super blocks (see growth: what is missing, or half
// the pool), device memory a caller that stops growing keeps until Reset or
// Close frees it; they count in no Capacity until a growth publishes them
// (Stats.Prepared counts them). The CPU backend has nothing to
// prepare.
func (p *Pool) Prepare(ctx context.Context, units int) error {
	if err := p.live("prepare"); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("slaballoc: prepare: %w", err)
	}
	want := int64(units) + int64(p.opts.LowWater)
	free := p.Capacity() - p.usedSeen.Load() - p.pending.Load()
	if free >= want || !p.growMu.TryLock() {
		return nil
	}
	defer p.growMu.Unlock()
	if p.closed.Load() {
		return fmt.Errorf("slaballoc: prepare: %w", warpkit.ErrClosed)
	}
	if p.SuperBlocks() >= p.opts.MaxSuperBlocks {
		return nil
	}
	need := p.superBlocksFor(want - free)
	if _, err := p.impl.prepare(p.growth(need)); err != nil {
		return fmt.Errorf("slaballoc: prepare: %w", err)
	}
	return nil
}

// readUsed reads the device counter under the use lock, so it cannot race
// with Close.
func (p *Pool) readUsed(op string) (int64, error) {
	release, err := p.Acquire()
	if err != nil {
		return 0, err
	}
	defer release()
	used, err := p.impl.readUsed()
	if err != nil {
		return 0, fmt.Errorf("slaballoc: %s: %w", op, err)
	}
	return used, nil
}

// countBits counts the allocated units in the bitmaps (tests compare it
// with the counter).
func (p *Pool) countBits() (int64, error) {
	release, err := p.Acquire()
	if err != nil {
		return 0, err
	}
	defer release()
	return p.impl.countBits()
}

// GrowPast grows the pool (see growth) unless it already has more than n
// super blocks (a concurrent caller grew it). It returns ErrPoolExhausted at
// MaxSuperBlocks. Callers pass SuperBlocks() as seen before the launch that
// ran out.
func (p *Pool) GrowPast(ctx context.Context, n int) error {
	if err := p.live("grow"); err != nil {
		return err
	}
	p.growMu.Lock()
	defer p.growMu.Unlock()
	if p.SuperBlocks() > n {
		return nil
	}
	if p.SuperBlocks() >= p.opts.MaxSuperBlocks {
		return fmt.Errorf("slaballoc: %d super blocks of %d units: %w", p.SuperBlocks(), p.unitsPerSuper(), warpkit.ErrPoolExhausted)
	}
	if err := p.growLocked(1); err != nil {
		return fmt.Errorf("slaballoc: grow: %w", err)
	}
	return nil
}

// growth is how many super blocks one growth step adds when need are
// missing: at least half as many as the pool has, so a pool that keeps
// growing pays for a logarithmic number of steps (each waits for the
// kernels in flight and synchronizes the device), capped at the maximum.
func (p *Pool) growth(need int) int {
	now := p.SuperBlocks()
	return max(1, min(max(need, (now+1)/2), p.opts.MaxSuperBlocks-now))
}

// growLocked adds super blocks for need missing ones (see growth) in one
// step. Super blocks are separate device allocations: when the device runs
// out part way, the ones added stay, and the step succeeds if they cover
// need. The caller holds growMu.
func (p *Pool) growLocked(need int) error {
	p.use.Lock()
	defer p.use.Unlock()
	if p.closed.Load() {
		return warpkit.ErrClosed
	}
	want := p.growth(need)
	added, err := p.impl.grow(want)
	if added > 0 {
		p.supers.Add(int32(added))
		p.growths.Add(1)
	}
	if added >= min(need, want) {
		return nil
	}
	if err == nil {
		err = fmt.Errorf("%w: %d of %d super blocks added", warpkit.ErrOutOfMemory, added, want)
	}
	return err
}

// Reset frees every unit at once and gives back the super blocks past
// Options.InitialSuperBlocks: the pool is as New made it (every unit
// holding Options.Fill, nothing allocated), without allocating anything, so
// a structure rebuilt over its pool (graph's Build) pays no device
// allocation, module setup or free for it. On the CUDA backend one launch
// refills the units in use; free units are not rewritten, as a kernel that
// frees a unit restores its contents first (the freeing contract of
// slaballoc.cuh), so the cost is a read of the bitmaps and a write of the
// units in use — unless units were freed through [Pool.Free] or
// [Pool.FreeDevice] since the last reset (the host frees without
// restoring), when every unit is filled. A kernel that frees units without
// restoring them (internal/ebr's poisoning, a debugging aid) voids the
// promise for those units. The caller must have nothing in flight that
// uses the pool: no kernel still running on any stream, no reservation
// (Reserve) not yet ended; addresses handed out before are invalid
// afterwards. On the CUDA backend it waits for its own work before it
// returns. A failure (the device's) leaves the pool unusable but closable.
func (p *Pool) Reset(ctx context.Context) error { return p.reset(ctx, nil) }

// ResetOn is Reset queued on stream s without a wait (the CUDA backend;
// the CPU backend's, and ResetOn with the nil stream, are Reset): work
// queued on s after it sees the empty pool, and the pool's own host calls
// (Reserve reading the device's counter, Allocate, Stats, growth, ...)
// wait for s first, once. Work on other streams must not use the pool
// until s has run the reset. The caller's other conditions are Reset's.
// Giving back super blocks, when the pool grew, frees device memory, which
// waits for the device.
func (p *Pool) ResetOn(ctx context.Context, s *cuda.Stream) error { return p.reset(ctx, s) }

func (p *Pool) reset(ctx context.Context, s *cuda.Stream) error {
	if err := p.live("reset"); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("slaballoc: reset: %w", err)
	}
	p.growMu.Lock()
	defer p.growMu.Unlock()
	p.use.Lock()
	defer p.use.Unlock()
	if p.closed.Load() {
		return fmt.Errorf("slaballoc: reset: %w", warpkit.ErrClosed)
	}
	has, err := p.impl.reset(min(p.opts.InitialSuperBlocks, p.SuperBlocks()), s)
	p.supers.Store(int32(has))
	if err != nil {
		return fmt.Errorf("slaballoc: reset: %w", err)
	}
	p.Observe(0)
	return nil
}

// Stats returns the pool's statistics; Allocated is exact once the kernels
// that allocated have finished.
func (p *Pool) Stats(ctx context.Context) (Stats, error) {
	if err := p.live("stats"); err != nil {
		return Stats{}, err
	}
	used, err := p.readUsed("stats")
	if err != nil {
		return Stats{}, err
	}
	p.Observe(used)
	c := p.Capacity()
	return Stats{
		Backend:   p.backend,
		UnitBytes: p.opts.UnitBytes, SuperBlocks: p.SuperBlocks(), MaxSuperBlocks: p.opts.MaxSuperBlocks,
		Capacity: c, MaxCapacity: int64(p.opts.MaxSuperBlocks) * p.unitsPerSuper(),
		Allocated: used, Free: c - used, Growths: p.growths.Load(), Prepared: p.impl.preparedCount(),
	}, nil
}

// Len returns the number of allocated units (Stats.Allocated).
func (p *Pool) Len(ctx context.Context) (int, error) {
	st, err := p.Stats(ctx)
	return int(st.Allocated), err
}

// Allocate fills out with len(out) fresh unit addresses, growing the pool as
// needed. It is all-or-nothing: on ErrPoolExhausted (or any error) no unit
// stays allocated and out is filled with Null.
func (p *Pool) Allocate(ctx context.Context, out []uint32) error {
	if err := p.live("allocate"); err != nil {
		return err
	}
	if len(out) == 0 {
		return nil
	}
	for i := range out {
		out[i] = Null
	}
	if err := p.Reserve(ctx, len(out)); err != nil {
		return err
	}
	defer p.Unreserve(len(out))
	for {
		release, err := p.Acquire()
		if err != nil {
			return err
		}
		seen := p.SuperBlocks() // what this launch sees: growth waits for the use lock
		err = p.impl.allocate(out)
		release()
		if err == nil {
			p.usedSeen.Add(int64(len(out)))
			return nil
		}
		if !isExhausted(err) {
			return p.undo(ctx, out, fmt.Errorf("slaballoc: allocate: %w", err))
		}
		if gerr := p.GrowPast(ctx, seen); gerr != nil {
			return p.undo(ctx, out, fmt.Errorf("slaballoc: allocate %d units: %w", len(out), gerr))
		}
	}
}

// undo frees the units of a failed Allocate and returns err.
func (p *Pool) undo(ctx context.Context, out []uint32, err error) error {
	if ferr := p.Free(ctx, out); ferr != nil {
		return fmt.Errorf("%w (and undoing the allocation: %v)", err, ferr)
	}
	for i := range out {
		out[i] = Null
	}
	return err
}

// Free frees the units; Null entries are skipped. An address that is not an
// allocated unit makes Free return ErrInvalidArgument (the others are freed).
func (p *Pool) Free(ctx context.Context, addrs []uint32) error {
	if err := p.live("free"); err != nil {
		return err
	}
	if len(addrs) == 0 {
		return nil
	}
	release, err := p.Acquire()
	if err != nil {
		return err
	}
	defer release()
	if err := p.impl.free(addrs); err != nil {
		return fmt.Errorf("slaballoc: free: %w", err)
	}
	p.freed.Add(int64(len(addrs)))
	return nil
}

// AllocateDevice is Allocate for a device-resident output (CUDA backend only),
// one allocation per thread served by whole warps, as in the paper. Unlike
// Allocate, it keeps what it got when the pool is exhausted at its maximum:
// entries left Null were not allocated.
func (p *Pool) AllocateDevice(ctx context.Context, out cuda.Slice[uint32]) error {
	return p.AllocateDeviceTile(ctx, out, 32)
}

// AllocateDeviceTile is AllocateDevice with tiles of tile lanes (8 or 32)
// serving the requests one at a time, as slab hash tables with 8-lane tiles
// do.
func (p *Pool) AllocateDeviceTile(ctx context.Context, out cuda.Slice[uint32], tile int) error {
	if err := p.device("allocate"); err != nil {
		return err
	}
	if tile != 8 && tile != 32 {
		return fmt.Errorf("%w: slaballoc: tile width %d (want 8 or 32)", warpkit.ErrInvalidArgument, tile)
	}
	return p.allocateDevice(ctx, out, fmt.Sprintf("slaballoc_alloc_w%d", tile))
}

// AllocateDeviceBulk is AllocateDevice with each warp serving all its
// lanes' requests together: one atomicOr takes as many units of a bitmap
// word as there are requests (the allocation slab hash batches use).
func (p *Pool) AllocateDeviceBulk(ctx context.Context, out cuda.Slice[uint32]) error {
	return p.allocateDevice(ctx, out, "slaballoc_alloc_bulk")
}

func (p *Pool) allocateDevice(ctx context.Context, out cuda.Slice[uint32], kernel string) error {
	if err := p.device("allocate"); err != nil {
		return err
	}
	if out.Len() == 0 {
		return nil
	}
	if err := p.Reserve(ctx, out.Len()); err != nil {
		return err
	}
	defer p.Unreserve(out.Len())
	release, err := p.Acquire()
	if err != nil {
		return err
	}
	err = p.impl.fillNull(out) // once: a rerun after growth fills the entries still Null
	release()
	if err != nil {
		return fmt.Errorf("slaballoc: allocate: %w", err)
	}
	for {
		release, err := p.Acquire()
		if err != nil {
			return err
		}
		seen := p.SuperBlocks() // what this launch sees: growth waits for the use lock
		err = p.impl.allocateDevice(ctx, out, kernel)
		release()
		if isExhausted(err) {
			if err = p.GrowPast(ctx, seen); err == nil {
				continue // rerun: the kernel serves the entries still Null
			}
			err = fmt.Errorf("slaballoc: allocate %d units: %w", out.Len(), err)
		}
		// At most this many were allocated: the estimate errs on the side of
		// growing until the next reading of the counter.
		p.usedSeen.Add(int64(out.Len()))
		return err
	}
}

// FreeDevice is Free for device-resident addresses (CUDA backend only).
func (p *Pool) FreeDevice(ctx context.Context, addrs cuda.Slice[uint32]) error {
	if err := p.device("free"); err != nil {
		return err
	}
	release, err := p.Acquire()
	if err != nil {
		return err
	}
	defer release()
	if err := p.impl.freeDevice(ctx, addrs); err != nil {
		return err
	}
	p.freed.Add(int64(addrs.Len()))
	return nil
}

// ReadUnit copies the first len(dst) bytes of a unit (at most UnitBytes).
func (p *Pool) ReadUnit(ctx context.Context, addr uint32, dst []byte) error {
	if err := p.checkUnit("read unit", addr, len(dst)); err != nil {
		return err
	}
	release, err := p.Acquire()
	if err != nil {
		return err
	}
	defer release()
	return p.impl.readUnit(addr, dst)
}

// WriteUnit copies src into the start of a unit (at most UnitBytes).
func (p *Pool) WriteUnit(ctx context.Context, addr uint32, src []byte) error {
	if err := p.checkUnit("write unit", addr, len(src)); err != nil {
		return err
	}
	release, err := p.Acquire()
	if err != nil {
		return err
	}
	defer release()
	return p.impl.writeUnit(addr, src)
}

// SuperBlock is one super block's contents as Dump copies them.
type SuperBlock struct {
	Units  []byte   // UnitBytes per unit, BlocksPerSuperBlock*1024 units (unit i of the super block at i*UnitBytes)
	Bitmap []uint32 // 32 words per memory block, bit set = allocated (unit i at word i/32, bit i%32)
}

// Dump copies every super block's units and bitmaps to the host, for
// checkers that walk a structure's units (mvbtree's Check). Kernels that
// change the pool should not run meanwhile, or the copy mixes their before
// and after.
func (p *Pool) Dump(ctx context.Context) ([]SuperBlock, error) {
	if err := p.live("dump"); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	release, err := p.Acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	sbs, err := p.impl.dump()
	if err != nil {
		return nil, fmt.Errorf("slaballoc: dump: %w", err)
	}
	return sbs, nil
}

func (p *Pool) checkUnit(op string, addr uint32, n int) error {
	if err := p.live(op); err != nil {
		return err
	}
	if !p.validAddress(addr) || n > p.opts.UnitBytes {
		return fmt.Errorf("%w: slaballoc: %s: address %#x, %d bytes", warpkit.ErrInvalidArgument, op, addr, n)
	}
	return nil
}

// validAddress reports whether addr names a unit of the current super blocks.
func (p *Pool) validAddress(addr uint32) bool {
	sb, blk := int(addr>>24), int(addr&0xffffff)>>10
	return sb < p.SuperBlocks() && blk < p.opts.BlocksPerSuperBlock
}

// Descriptor returns the device address of the pool descriptor that kernels
// take as `wk::slab::Pool*` (0 on the CPU backend).
func (p *Pool) Descriptor() cuda.DevicePtr {
	if g, ok := p.impl.(*gpuPool); ok {
		return g.desc.Ptr()
	}
	return 0
}

// UsedCounter is the device word kernels add their net allocations to (the
// Allocated statistic), for callers that copy it back with their own
// results and pass it to Observe. It is the zero Slice on the CPU backend.
func (p *Pool) UsedCounter() cuda.Slice[uint64] {
	if g, ok := p.impl.(*gpuPool); ok {
		return g.desc.Sub(descUsedWord, descUsedWord+1)
	}
	return cuda.Slice[uint64]{}
}

// Close frees the pool's memory; later calls return ErrClosed.
func (p *Pool) Close() error {
	if p == nil {
		return warpkit.ErrClosed
	}
	p.growMu.Lock() // a Prepare may be making super blocks
	defer p.growMu.Unlock()
	p.use.Lock()
	defer p.use.Unlock()
	if !p.closed.CompareAndSwap(false, true) {
		return fmt.Errorf("slaballoc: close: %w", warpkit.ErrClosed)
	}
	return p.impl.close()
}

func isExhausted(err error) bool { return err != nil && errors.Is(err, warpkit.ErrPoolExhausted) }
