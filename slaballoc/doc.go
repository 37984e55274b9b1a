// Package slaballoc is SlabAlloc, the warp-synchronous allocator of
// fixed-size memory units from "A Dynamic Hash Table for the GPU" (Ashkiani,
// Farach-Colton, Owens, IPDPS 2018, section V), with a pure-Go twin for the CPU
// backend. The slab hash (package slabhash) grows its bucket lists with it;
// any warpkit kernel can allocate from a Pool through the device header
// internal/devcode/slaballoc.cuh.
//
// # Layout
//
// A Pool holds up to 64 super blocks. A super block is one device allocation
// of BlocksPerSuperBlock memory blocks of 1024 units of UnitBytes each,
// followed by one 1024-bit bitmap per block (bit set = allocated). Units are
// named by 32-bit addresses: super block (8 bits), memory block (14 bits),
// unit (10 bits), as in the paper. [Null] (all ones) is never an address.
// Kernels find a super block's base address in the device-resident
// descriptor ([Pool.Descriptor]), one read-only-cache load per decode.
//
// # Flat pools
//
// With [Options.Flat] (the CUDA backend) the pool reserves one address range
// of MaxSuperBlocks × 2^24 units (cuda.VirtualRange: address space, no
// memory) and maps super block s at s × 2^24 units into it as it grows, its
// bitmaps in an allocation of their own; unit a is then at the first super
// block's base + a × UnitBytes, and kernels may decode addresses with one
// multiply-add (slaballoc.cuh: flat_ptr) instead of a load from the
// descriptor's table and an add. The descriptor says so (Pool::flat) and the
// table stays valid, so every other kernel works unchanged. Memory, growth,
// statistics and errors are as without Flat; a device without the driver's
// virtual memory management refuses Flat (errors.ErrUnsupported). mvbtree's
// node pools are flat: its descents are ALU-bound, and the table decode was
// 8–23 of their 130–180 instructions a level.
//
// # Allocation on the GPU
//
// A tile of W lanes (the paper's whole warp, or 8 or 16 lanes for the smaller
// slab hash tiles) owns a resident memory block and holds its 32 bitmap words
// in registers. An allocation ballots for a lane with a free bit; that lane
// sets it with one atomicOr and broadcasts the address. A full resident block
// is replaced by a hashed choice; after 32 misses the tile sweeps every block
// once and then reports exhaustion through the kernel's status word.
//
// # Beyond the paper
//
//   - Freed units are reused: a free clears the bit, and any tile that loads
//     that block's bitmap sees it (the paper's code never reuses units).
//   - atomicOr instead of atomicCAS to take a bit: it cannot fail because a
//     different bit of the same word changed.
//   - Bulk allocation (allocate_many in the header, [Pool.AllocateDeviceBulk],
//     and the slab hash's round engine): the lane chosen by the ballot sets as
//     many free bits of its word as the warp has requests with one atomicOr,
//     so one atomic serves up to 32 allocations. [Pool.AllocateDevice] and
//     [Pool.AllocateDeviceTile] keep the paper's one allocation per atomic.
//   - Growth: the pool starts with InitialSuperBlocks and grows between
//     kernel launches, up to MaxSuperBlocks. A growth step adds what is
//     missing but at least half as many super blocks as the pool has, with
//     one device synchronization and one descriptor write, so a pool that
//     keeps growing takes a logarithmic number of steps (each waits for the
//     kernels in flight); Stats counts them.
//     [Pool.Reserve] is the host-checked low-water mark: before a launch that
//     may allocate up to n units it makes sure n + LowWater units are free
//     beyond the reservations of launches still in flight (each caller ends
//     its own with [Pool.Unreserve]), reading the device's counter only when
//     its own estimate says the pool may be short. A kernel that still runs out reports it; the caller grows
//     ([Pool.GrowPast]) and retries what failed, and at MaxSuperBlocks the
//     operation fails with warpkit.ErrPoolExhausted. Nothing waits for memory.
//     A growth waits for the kernels in flight and then spends the driver's
//     time mapping its super blocks with the device idle (~90 µs a 32 MiB
//     super block of a flat pool on an H200); [Pool.Prepare], called between
//     a batch's launch and its wait with the next batch's reservation, makes
//     them ahead (mapped and filled, not in the descriptor), and the growth
//     that follows only publishes them. It never waits (a growth, Reset or
//     Close holding the pool makes it return), so callers holding Acquire
//     may call it; [Stats].Prepared counts what it holds.
//     [Pool.Reset] empties the pool at once and gives back the super blocks
//     past the initial ones, allocating nothing: a structure rebuilt over
//     its pool (graph's Build) skips a new pool's setup and frees. One
//     launch (slaballoc_reset) refills the units in use and clears their
//     bits — free units hold the fill already, by the freeing contract —
//     rather than filling every super block (which it does after host
//     frees, [Pool.Free] not restoring units); [Pool.ResetOn] queues it on
//     the caller's stream without a wait, and the pool's own host calls
//     wait for that stream first.
//   - Statistics: each tile adds its net allocation count to a device counter
//     once per launch (the slab hash's apply launches once a block, from
//     their tiles' counts: TileAllocator.take), so [Pool.Stats] is exact
//     after every launch at no cost per allocation.
//
// # Host API and the CPU twin
//
// [Pool.Allocate] and [Pool.Free] take Go slices of addresses (the device
// variants take cuda.Slice[uint32]). Allocate is all-or-nothing: when the
// pool cannot grow enough it frees what the batch got and returns
// ErrPoolExhausted. Free of an address that is not an allocated unit returns
// ErrInvalidArgument and frees nothing of that address. The CPU backend keeps
// the same super blocks, bitmaps and addresses in Go memory, so both backends
// hand out addresses with the same meaning and grow and fail the same way
// (which addresses come back may differ).
//
// # Concurrency
//
// A Pool is safe for concurrent use. Kernels that use the descriptor must run
// while the caller holds [Pool.Acquire], and the caller waits for them before
// releasing it; growth takes the lock exclusively, so it never rewrites the
// descriptor under a running kernel, and its write is complete before any
// later launch.
package slaballoc
