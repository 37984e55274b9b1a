// ebr.cu: a persistent churn workload over internal/devcode/ebr.cuh, the
// in-kernel reclamation's test (package internal/ebr runs it on a GPU and
// on the CPU emulation). Each block runs rounds; in each, every warp takes a
// fresh unit from a SlabAlloc pool, writes a payload naming a slot and a
// generation, publishes it in the slot and retires the unit it replaced,
// while every thread reads a random slot's unit and checks its payload. A
// unit freed while a reader could still reach it shows up as a wrong payload
// (reallocated to another slot) or as poison: counted in errors.
#include <stdint.h>

#include "ebr.cuh"
#include "mem.cuh"
#include "slaballoc.cuh"

namespace {

constexpr uint32_t kMagic = 0x5eed5eedu;

}  // namespace

// ebr_churn: slots[nslots] hold unit addresses (the host fills them first);
// out[0] counts readers' errors, out[1] the allocations that found the pool
// empty.
extern "C" __global__ void __launch_bounds__(256) ebr_churn(wk::slab::Pool* pool, uint32_t* slots, uint32_t nslots,
                                                           const wk::ebr::EbrState* state, uint32_t rounds,
                                                           uint32_t* status, unsigned long long* out) {
  using namespace wk;
  ebr::BlockEbr<64> e(*state, pool);
  slab::Tile<32> t;
  slab::TileAllocator<32> alloc;
  alloc.init(blockIdx.x * 131 + threadIdx.x / 32);
  e.start();
  unsigned long long errors = 0, empty = 0;
  for (uint32_t r = 0; r < rounds; ++r) {
    e.begin_round();
    alloc.retry();  // what the last round found exhausted may have been freed since
    const uint32_t warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const uint32_t s = wk::mix32(warp * 2654435761u + r) % nslots;
    uint32_t u = alloc.allocate(t, pool, status);
    if (u == slab::kNull) {
      ++empty;
    } else {
      if (t.rank == 0) {
        char* p = slab::unit_ptr(pool, u);
        mem::st_u32(p, kMagic);
        mem::st_u32(p + 4, s);
        mem::st_u32(p + 8, r);
        mem::fence();  // the payload is complete before the slot names it
        uint32_t old = atomicExch(&slots[s], u);
        if (old != slab::kNull) e.retire(old);
      }
    }
    // Every thread reads four slots' units; the barrier between taking a
    // unit and reading it lets other warps run there (on the emulation, the
    // only place its fibers switch).
    for (uint32_t j = 0; j < 4; ++j) {
      const uint32_t s2 = wk::mix32(threadIdx.x * 40503u + blockIdx.x * 7919u + r * 104729u + j * 15485863u) % nslots;
      uint32_t a = mem::ld_relaxed_u32(&slots[s2]);
      __syncwarp();
      if (a != slab::kNull) {
        const char* p = slab::unit_ptr(pool, a);
        if (mem::ld_relaxed_u32(p) != kMagic || mem::ld_relaxed_u32(p + 4) != s2) ++errors;
      }
    }
    e.end_round();
  }
  alloc.flush(t, pool);
  e.finish();
  if (errors) atomicAdd(&out[0], errors);
  if (empty && t.rank == 0) atomicAdd(&out[1], empty);
}
