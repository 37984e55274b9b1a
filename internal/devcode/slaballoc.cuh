// slaballoc.cuh: SlabAlloc, the warp-synchronous fixed-size allocator of the
// slab hash paper (Ashkiani, Farach-Colton, Owens, IPDPS 2018, section V), as
// device code any warpkit kernel can use. Package slaballoc owns the host side
// (the Pool descriptor, growth, statistics); see its doc.go for the contract.
//
// Memory: up to kMaxSuperBlocks super blocks, each one device allocation of
// blocks_per_super memory blocks of 1024 units (unit_bytes each, a power of
// two) followed by the blocks' bitmaps (32 words = 1024 bits per block, bit
// set = unit allocated). A unit is named by a 32-bit address:
//
//   bits 31..24 super block | bits 23..10 memory block | bits 9..0 unit
//
// so (addr & 0xffffff) is the unit's index inside its super block. kNull
// (all ones) is never a valid address (super block 255 does not exist).
// In a flat pool (Pool::flat; package slaballoc: Options.Flat) the host maps
// super block s at units[0] + s * 2^24 units of one reserved address range,
// so a unit is at units[0] + addr * unit bytes (flat_ptr: no table load).
//
// Allocation is tile-cooperative: a tile of W lanes (W = 8, 16 or 32; the
// paper uses the whole warp) owns a resident memory block and keeps its 32
// bitmap words in registers, 32/W words per lane. To allocate, the tile
// ballots for a lane whose cached words show a free bit; that lane sets the
// bit with one atomicOr (the paper uses atomicCAS; atomicOr never fails because
// another tile took a different unit of the same word, and returns the fresh
// word either way) and broadcasts the address. A full resident block is
// replaced by one chosen with a hash of the tile and attempt (the paper's
// probing); after kRandomProbes misses the tile sweeps every block once from
// a hashed start, and only then reports kStatusPoolExhausted: exhaustion is an
// error, never a hang. Freeing clears the bit with atomicAnd; freed units are
// found again by any tile that loads that block's bitmap.
//
// Tiles of a warp may diverge: every warp intrinsic here uses the tile's own
// lane mask, which is valid under independent thread scheduling (sm_70+).
// All lanes of a tile must call allocate/release together with equal
// arguments.
//
// Units are handed out with whatever contents they had: the host fills a new
// super block with a fill byte, and a kernel that frees a unit it wrote must
// first restore the contents its users expect (slabhash restores all-ones)
// and __threadfence() before the free, unless the unit was never published to
// other threads.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include "hash.cuh"
#include "status.cuh"

namespace wk {
namespace slab {

constexpr uint32_t kNull = 0xffffffffu;
constexpr int kMaxSuperBlocks = 64;
constexpr uint32_t kUnitsPerBlock = 1024;
constexpr uint32_t kWordsPerBlock = 32;
constexpr uint32_t kUnitIndexMask = 0xffffffu;
constexpr uint32_t kRandomProbes = 32;
constexpr uint32_t kFailFastEvery = 32;  // sweep steps between FailFast's looks at the status
// kStatusBadFree (status.cuh): a free named an address outside the pool or a
// unit that was not allocated (a double free).

// Pool is the device-resident descriptor. The host rewrites the immutable
// part (super block table, counts) only between kernels; `used` is updated by
// kernels (once per tile and launch) and read by the host. The Go mirror is in
// package slaballoc (gpu.go); offsets are asserted below.
struct Pool {
  unsigned long long units[kMaxSuperBlocks];    // base address of each super block's units
  unsigned long long bitmaps[kMaxSuperBlocks];  // base address of its bitmaps
  uint32_t num_super;                           // super blocks in use
  uint32_t blocks_per_super;                    // memory blocks per super block (<= 1<<14)
  uint32_t unit_shift;                          // log2(unit bytes)
  uint32_t flat;                                // 1: units[s] == units[0] + s * 2^24 units (a flat pool)
  unsigned long long pad[14];                   // `used` gets its own 128-byte line
  unsigned long long used;                      // net units allocated (two's complement adds)
};
static_assert(offsetof(Pool, num_super) == 1024, "Pool layout is mirrored in Go");
static_assert(offsetof(Pool, used) == 1152, "Pool layout is mirrored in Go");

#ifndef WK_HOST_EMULATION  // the CPU emulation of slabhash (slabhash/testdata/emu) defines its own
__device__ __forceinline__ unsigned lane() {
  unsigned id;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(id));
  return id;
}
#endif

// Tile is a group of W consecutive lanes working as one unit. Unlike
// wk::Tile (warp.cuh), its intrinsics use the tile's own mask, so the tiles of
// a warp may follow different paths.
template <int W>
struct Tile {
  static_assert(W == 8 || W == 16 || W == 32, "tile width must be 8, 16 or 32");
  static constexpr int kWidth = W;
  unsigned mask;  // this tile's lanes in the warp
  unsigned base;  // warp lane of rank 0
  int rank;       // this lane's index in the tile

  __device__ __forceinline__ Tile() {
    unsigned l = lane();
    rank = (int)(l & (W - 1));
    base = l & ~(unsigned)(W - 1);
    mask = W == 32 ? 0xffffffffu : (((1u << W) - 1) << base);
  }
  // ballot returns a W-bit mask of pred over the tile (bit r = rank r).
  __device__ __forceinline__ unsigned ballot(bool pred) const {
    unsigned b = __ballot_sync(mask, pred);
    return W == 32 ? b : (b >> base) & ((1u << W) - 1);
  }
  __device__ __forceinline__ uint32_t shfl(uint32_t v, int src) const { return __shfl_sync(mask, v, src, W); }
  __device__ __forceinline__ int shfl(int v, int src) const { return __shfl_sync(mask, v, src, W); }
  __device__ __forceinline__ uint64_t shfl(uint64_t v, int src) const {
    return __shfl_sync(mask, (unsigned long long)v, src, W);
  }
  __device__ __forceinline__ void sync() const { __syncwarp(mask); }
};

__device__ __forceinline__ uint32_t total_blocks(const Pool* p) {
  return __ldg(&p->num_super) * __ldg(&p->blocks_per_super);
}

// unit_ptr decodes an address; UnitBytes is the pool's unit size, known to
// the kernel at compile time (one read-only-cache load per decode).
template <int UnitBytes>
__device__ __forceinline__ char* unit_ptr(const Pool* p, uint32_t addr) {
  const char* sb = (const char*)__ldg(&p->units[addr >> 24]);
  return (char*)sb + (size_t)(addr & kUnitIndexMask) * UnitBytes;
}

// flat_ptr decodes an address of a flat pool from its base (units[0], read
// once per kernel): one multiply-add, no load.
template <int UnitBytes>
__device__ __forceinline__ char* flat_ptr(char* base, uint32_t addr) {
  return base + (size_t)addr * UnitBytes;
}

// unit_ptr with the unit size read from the descriptor.
__device__ __forceinline__ char* unit_ptr(const Pool* p, uint32_t addr) {
  const char* sb = (const char*)__ldg(&p->units[addr >> 24]);
  return (char*)sb + ((size_t)(addr & kUnitIndexMask) << __ldg(&p->unit_shift));
}

// valid_address reports whether addr names a unit of the pool.
__device__ __forceinline__ bool valid_address(const Pool* p, uint32_t addr) {
  uint32_t sb = addr >> 24, blk = (addr & kUnitIndexMask) >> 10;
  return sb < __ldg(&p->num_super) && blk < __ldg(&p->blocks_per_super);
}

__device__ __forceinline__ uint32_t* bitmap_word(const Pool* p, uint32_t addr) {
  uint32_t* bm = (uint32_t*)__ldg(&p->bitmaps[addr >> 24]);
  return bm + ((addr & kUnitIndexMask) >> 5);
}

// free_unit clears the unit's bit (one lane). It returns false when the bit
// was already clear (a double free) and leaves the bitmap unchanged then.
__device__ __forceinline__ bool free_unit(const Pool* p, uint32_t addr) {
  uint32_t bit = 1u << (addr & 31);
  uint32_t old = atomicAnd(bitmap_word(p, addr), ~bit);
  return (old & bit) != 0;
}

// TileAllocator is one tile's allocation state, in registers. With Spread,
// a tile takes the free bits of its resident block from a place its salt
// picks (its first lane with free bits at or after one, the free bits of
// that lane's word at or after another) instead of the lowest: tiles that
// allocate once a launch (mvbtree's PlainCopy warps) and so land in the
// same random blocks then rarely race for one bit (an atomicOr that finds
// the bit taken and goes again). Without it the lowest, which packs a
// long-lived tile's units (slab hashes).
//
// With FailFast, a tile about to sweep the pool (and every kFailFastEvery
// blocks into the sweep) first looks at the launch's status word, and gives
// up at once if another tile has reported the pool exhausted: the launch
// fails anyway and its caller grows the pool and runs it again, and without
// it every failing tile sweeps every block (on an H200, a 2^20-key mvbtree
// batch that ran its pool out took 19-24 ms with its re-run in the grown
// pool, 11-13 ms with FailFast; a re-run alone takes ~1 ms). Not for
// kernels whose tiles retry after units are freed beside them (retry).
template <int W, bool Spread = false, bool FailFast = false>
struct TileAllocator {
  static constexpr int R = 32 / W;  // bitmap words per lane: word j*W + rank
  uint32_t words[R];                // cached bitmap words of the resident block
  uint32_t* bitmap;                 // the resident block's bitmap (uniform)
  uint32_t block;                   // resident block (global index), kNull if none
  uint32_t changes;                 // resident changes so far (hash input)
  uint32_t misses;                  // resident changes since the last success
  uint32_t salt;
  uint32_t sweep_start;
  bool exhausted;                   // gave up once in this launch: fail fast
  long long net;                    // units allocated minus units freed (uniform)

  __device__ __forceinline__ void init(uint32_t tile_salt) {
    block = kNull;
    bitmap = nullptr;
    changes = 0;
    misses = 0;
    salt = mix32(tile_salt);
    sweep_start = 0;
    exhausted = false;
    net = 0;
#pragma unroll
    for (int j = 0; j < R; ++j) words[j] = 0xffffffffu;
  }

  // first_lane is the lane whose words the next allocation takes from, of
  // the W-bit mask m of lanes with free bits (nonzero).
  __device__ __forceinline__ int first_lane(unsigned m) const {
    if constexpr (Spread) {
      const unsigned h = m & (0xffffffffu << ((salt >> 8) & (W - 1)));
      return __ffs(h ? h : m) - 1;
    } else {
      return __ffs(m) - 1;
    }
  }
  // first_bits is the part of free (nonzero) the next allocation takes its
  // bits from, lowest first.
  __device__ __forceinline__ uint32_t first_bits(uint32_t free) const {
    if constexpr (Spread) {
      const uint32_t h = free & (0xffffffffu << ((salt >> 16) & 31));
      return h ? h : free;
    } else {
      return free;
    }
  }

  // load_block makes global block g resident.
  __device__ __forceinline__ void load_block(const Tile<W>& t, const Pool* p, uint32_t g) {
    uint32_t bps = __ldg(&p->blocks_per_super);
    uint32_t sb = g / bps, blk = g - sb * bps;
    block = (sb << 24) | (blk << 10);
    bitmap = (uint32_t*)__ldg(&p->bitmaps[sb]) + blk * kWordsPerBlock;
#pragma unroll
    for (int j = 0; j < R; ++j) words[j] = *(volatile uint32_t*)(bitmap + j * W + t.rank);
  }

  // next_block makes the next candidate block resident: hashed choices for
  // kRandomProbes misses (the paper's probing), then one sweep over every
  // block from the last hashed one. It returns false when all are tried.
  __device__ __forceinline__ bool next_block(const Tile<W>& t, const Pool* p, uint32_t nblocks) {
    if (misses >= kRandomProbes + nblocks) return false;
    uint32_t g;
    if (misses < kRandomProbes) {
      g = mix32(salt ^ (changes * 0x9e3779b9u)) % nblocks;
      sweep_start = g;
    } else {
      g = (sweep_start + (misses - kRandomProbes) + 1) % nblocks;
    }
    ++changes;
    ++misses;
    load_block(t, p, g);
    return true;
  }

  // allocate returns a fresh unit address (the same in every lane of the
  // tile), or kNull after flagging kStatusPoolExhausted.
  __device__ uint32_t allocate(const Tile<W>& t, const Pool* p, uint32_t* status) {
    if (exhausted) return kNull;
    const uint32_t nblocks = total_blocks(p);
    // Each loop iteration either loads a block or learns at least one more
    // allocated bit of the resident block, so this bound is never reached by
    // a working pool; it only keeps a corrupted one from hanging the kernel.
    const uint32_t limit = (kRandomProbes + nblocks + 1) * (kUnitsPerBlock + 1);
    for (uint32_t iter = 0; iter < limit && nblocks > 0; ++iter) {
      if constexpr (FailFast) {
        if (block == kNull && status != nullptr && misses >= kRandomProbes &&
            (misses - kRandomProbes) % kFailFastEvery == 0 &&
            t.ballot((*(volatile uint32_t*)status & kStatusPoolExhausted) != 0) != 0)
          break;
      }
      if (block == kNull && !next_block(t, p, nblocks)) break;
      bool has = false;
#pragma unroll
      for (int j = 0; j < R; ++j) has |= words[j] != 0xffffffffu;
      unsigned m = t.ballot(has);
      if (m == 0) {
        block = kNull;
        continue;
      }
      const int src = first_lane(m);
      uint32_t got = 0, addr = kNull;
      if (t.rank == src) {
        int j = 0;
        uint32_t w = 0;
#pragma unroll
        for (int jj = R - 1; jj >= 0; --jj)
          if (words[jj] != 0xffffffffu) {
            j = jj;
            w = words[jj];
          }
        uint32_t bit = __ffs(first_bits(~w)) - 1;
        uint32_t widx = (uint32_t)(j * W + t.rank);
        uint32_t old = atomicOr(bitmap + widx, 1u << bit);
#pragma unroll
        for (int jj = 0; jj < R; ++jj)
          if (jj == j) words[jj] = old | (1u << bit);
        if (!(old & (1u << bit))) {
          got = 1;
          addr = block | (widx * 32 + bit);
        }
      }
      got = t.shfl(got, src);
      if (got) {
        addr = t.shfl(addr, src);
        misses = 0;
        ++net;
        return addr;
      }
    }
    exhausted = true;
    report(status, kStatusPoolExhausted);
    return kNull;
  }

  // allocate_many gives a fresh unit to every lane of the tile whose want is
  // true (kNull to the others, and to all of them once the pool is exhausted,
  // with kStatusPoolExhausted flagged). Beyond the paper: the chosen lane sets
  // as many free bits of its word as there are requests with one atomicOr,
  // so a tile serves up to 32 requests per atomic.
  __device__ uint32_t allocate_many(const Tile<W>& t, const Pool* p, uint32_t* status, bool want) {
    uint32_t addr = kNull;
    unsigned pending = t.ballot(want);
    if (pending == 0) return kNull;
    if (exhausted) {
      report(status, kStatusPoolExhausted);
      return kNull;
    }
    const uint32_t nblocks = total_blocks(p);
    const uint32_t limit = (kRandomProbes + nblocks + 1) * (kUnitsPerBlock + 1);
    for (uint32_t iter = 0; iter < limit && nblocks > 0 && pending != 0; ++iter) {
      if (block == kNull && !next_block(t, p, nblocks)) break;
      bool has = false;
#pragma unroll
      for (int j = 0; j < R; ++j) has |= words[j] != 0xffffffffu;
      unsigned m = t.ballot(has);
      if (m == 0) {
        block = kNull;
        continue;
      }
      const int src = first_lane(m);
      const int need = __popc(pending);
      uint32_t got = 0, base = 0;
      if (t.rank == src) {
        int j = 0;
        uint32_t w = 0;
#pragma unroll
        for (int jj = R - 1; jj >= 0; --jj)
          if (words[jj] != 0xffffffffu) {
            j = jj;
            w = words[jj];
          }
        uint32_t take = 0, free = first_bits(~w);
        if (__popc(free) < need) free = ~w;
        for (int c = 0; c < need && free; ++c) {
          uint32_t low = free & (0u - free);
          take |= low;
          free ^= low;
        }
        const uint32_t widx = (uint32_t)(j * W + t.rank);
        const uint32_t old = atomicOr(bitmap + widx, take);
#pragma unroll
        for (int jj = 0; jj < R; ++jj)
          if (jj == j) words[jj] = old | take;
        got = take & ~old;
        base = block | (widx * 32);
      }
      got = t.shfl(got, src);
      if (got == 0) continue;
      base = t.shfl(base, src);
      // The k-th requesting lane (in lane order) takes the k-th unit got.
      const int k = __popc(pending & ((1u << t.rank) - 1));
      const bool served = ((pending >> t.rank) & 1) && k < __popc(got);
      if (served) {
        uint32_t x = got;
        for (int c = 0; c < k; ++c) x &= x - 1;
        addr = base | (uint32_t)(__ffs(x) - 1);
      }
      pending &= ~t.ballot(served);
      net += __popc(got);
      misses = 0;
    }
    if (pending != 0) {
      exhausted = true;
      report(status, kStatusPoolExhausted);
    }
    return addr;
  }

  // release frees a unit this tile allocated in this launch and never
  // published (or restored, see the header comment). Called by the whole tile.
  __device__ __forceinline__ void release(const Tile<W>& t, const Pool* p, uint32_t addr) {
    if (t.rank == 0) free_unit(p, addr);
    --net;
  }

  // retry forgets an exhaustion (allocate fails fast after the first in a
  // launch): for persistent kernels whose reclamation frees units while they
  // run (internal/devcode/ebr.cuh). Call it with the whole tile.
  __device__ __forceinline__ void retry() {
    exhausted = false;
    misses = 0;
    block = kNull;
  }

  // note_free records a unit freed by free_unit from this tile (uniform).
  __device__ __forceinline__ void note_free(long long n) { net -= n; }

  // flush adds this tile's net allocation count to the pool's counter; call
  // it once, with the whole tile, before the kernel ends.
  __device__ __forceinline__ void flush(const Tile<W>& t, Pool* p) {
    if (t.rank == 0 && net != 0) atomicAdd(&p->used, (unsigned long long)net);
    net = 0;
  }

  // take returns this tile's net allocation count and forgets it, for a
  // caller that adds it to the pool's counter itself (once a block: see
  // slabhash.cuh sign_off) instead of flush.
  __device__ __forceinline__ long long take() {
    const long long n = net;
    net = 0;
    return n;
  }
};

}  // namespace slab
}  // namespace wk
