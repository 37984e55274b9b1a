// slaballoc.cu: bulk allocation and free of SlabAlloc units from the host,
// exact bitmap counting, and the bump-pointer baseline of the allocator
// benchmark. The allocator itself is internal/devcode/slaballoc.cuh.
#include <stdint.h>
#include "slaballoc.cuh"

using namespace wk;
using namespace wk::slab;

// alloc_units gives out[i] a fresh unit for every i < n. Each tile of W lanes
// serves its lanes' requests one at a time (warp-cooperative work sharing),
// as the slab hash's insertions do. A request that finds the pool exhausted
// gets kNull and the status flag; the host then grows the pool or undoes the
// batch.
template <int W>
__device__ void alloc_units(Pool* pool, uint32_t* out, uint64_t n, uint32_t* status, uint32_t seed) {
  Tile<W> t;
  const uint64_t tile = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) / W;
  const uint64_t tiles = (uint64_t)gridDim.x * blockDim.x / W;
  TileAllocator<W> a;
  a.init((uint32_t)tile ^ (seed * 0x85ebca6bu));
  for (uint64_t base = tile * W; base < n; base += tiles * W) {
    uint64_t i = base + t.rank;
    bool need = i < n && out[i] == kNull;
    unsigned q;
    while ((q = t.ballot(need)) != 0) {
      int src = __ffs(q) - 1;
      uint32_t addr = a.allocate(t, pool, status);
      if (addr == kNull) {
        need = false;  // leave kNull in out; the status word says why
        continue;
      }
      if (t.rank == src) {
        out[i] = addr;
        need = false;
      }
    }
  }
  a.flush(t, pool);
}

extern "C" __global__ void slaballoc_alloc_w32(Pool* pool, uint32_t* out, uint64_t n, uint32_t* status, uint32_t seed) {
  alloc_units<32>(pool, out, n, status, seed);
}
extern "C" __global__ void slaballoc_alloc_w8(Pool* pool, uint32_t* out, uint64_t n, uint32_t* status, uint32_t seed) {
  alloc_units<8>(pool, out, n, status, seed);
}

// alloc_units_bulk is alloc_units with every warp serving all its lanes'
// requests at once (allocate_many: one atomicOr per bitmap word touched).
extern "C" __global__ void slaballoc_alloc_bulk(Pool* pool, uint32_t* out, uint64_t n, uint32_t* status, uint32_t seed) {
  Tile<32> t;
  const uint64_t warp = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) / 32;
  const uint64_t warps = (uint64_t)gridDim.x * blockDim.x / 32;
  TileAllocator<32> a;
  a.init((uint32_t)warp ^ (seed * 0x85ebca6bu));
  for (uint64_t base = warp * 32; base < n; base += warps * 32) {
    const uint64_t i = base + t.rank;
    const bool need = i < n && out[i] == kNull;
    const uint32_t addr = a.allocate_many(t, pool, status, need);
    if (need && addr != kNull) out[i] = addr;
  }
  a.flush(t, pool);
}

// free_units frees addrs[i] for every i < n whose address is not kNull. A bad
// address or a double free sets kStatusBadFree and changes nothing for it.
extern "C" __global__ void slaballoc_free(Pool* pool, const uint32_t* addrs, uint64_t n, uint32_t* status) {
  long long freed = 0;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
    uint32_t a = addrs[i];
    if (a == kNull) continue;
    if (!valid_address(pool, a) || !free_unit(pool, a)) {
      report(status, kStatusBadFree);
      continue;
    }
    ++freed;
  }
  if (freed) atomicAdd(&pool->used, (unsigned long long)(-freed));
}

// reset empties the pool: it refills every allocated unit (bit set) of
// every super block with fill (the fill byte four times) and clears its
// bit, and zeroes the used counter. Free units already hold the fill (a
// kernel restores what it wrote before it frees a unit: slaballoc.cuh), so
// a reset costs a read of the bitmaps and a write of the units in use, not
// a fill of every super block. A warp takes 32 bitmap words, a word a lane,
// and fills the units of each word with bits set together (a unit's words
// a lane each, coalesced).
extern "C" __global__ void slaballoc_reset(Pool* pool, uint32_t fill) {
  const uint32_t lane = slab::lane();
  const uint64_t wps = (uint64_t)pool->blocks_per_super * kWordsPerBlock;  // bitmap words a super block
  const uint64_t words = wps * pool->num_super;
  const uint32_t shift = pool->unit_shift, unitWords = (1u << shift) / 4;
  const uint64_t first = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) - lane;
  for (uint64_t w0 = first; w0 < words; w0 += (uint64_t)gridDim.x * blockDim.x) {  // whole warps
    const uint64_t w = w0 + lane;
    uint32_t bits = 0;
    if (w < words) {
      const uint64_t s = w / wps;
      uint32_t* word = (uint32_t*)pool->bitmaps[s] + (w - s * wps);
      bits = *word;
      if (bits) *word = 0;
    }
    for (uint32_t busy = __ballot_sync(0xffffffffu, bits != 0); busy; busy &= busy - 1) {
      const int l = __ffs(busy) - 1;
      const uint64_t wl = w0 + l, s = wl / wps;
      char* units = (char*)pool->units[s] + (((wl - s * wps) * 32) << shift);  // the word's first unit
      for (uint32_t b = __shfl_sync(0xffffffffu, bits, l); b; b &= b - 1) {
        uint32_t* u = (uint32_t*)(units + ((size_t)(__ffs(b) - 1) << shift));
        for (uint32_t o = lane; o < unitWords; o += 32) u[o] = fill;
      }
    }
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) pool->used = 0;
}

// count_bits adds the number of set bits of every bitmap word of super block
// sb (words words) to *out.
// read_flat copies the first word of each unit addrs[i] of a flat pool,
// decoded with flat_ptr, to out[i]: tests compare it with what the host
// wrote through the super block table.
extern "C" __global__ void slaballoc_read_flat(const Pool* pool, const uint32_t* addrs, uint64_t n, uint32_t* out) {
  char* base = (char*)__ldg(&pool->units[0]);
  const uint32_t shift = __ldg(&pool->unit_shift);
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
    const uint32_t a = addrs[i];
    out[i] = shift == 7 ? *(const uint32_t*)flat_ptr<128>(base, a) : *(const uint32_t*)(base + ((size_t)a << shift));
  }
}

extern "C" __global__ void slaballoc_count_bits(const uint32_t* bitmap, uint64_t words, unsigned long long* out) {
  unsigned long long c = 0;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < words; i += (uint64_t)gridDim.x * blockDim.x)
    c += __popc(bitmap[i]);
  for (int off = 16; off > 0; off >>= 1) c += __shfl_down_sync(0xffffffffu, c, off);
  if ((threadIdx.x & 31) == 0 && c) atomicAdd(out, c);
}

// bump_alloc is the benchmark baseline: a bump-pointer allocator, one
// atomicAdd on a single counter per allocation, no reuse and no free.
extern "C" __global__ void slaballoc_bump(uint32_t* counter, uint32_t* out, uint64_t n) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    out[i] = atomicAdd(counter, 1u);
}
