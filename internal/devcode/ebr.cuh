// ebr.cuh: epoch-based reclamation inside a persistent kernel (DEBRA, Brown
// 2015, at block granularity as Awad's thesis §4.4.4 chooses), for kernels
// that retire memory and must reuse it before they end. Kernels that end
// between retiring and reusing rely on the host's launch epochs instead
// (package internal/ebr), which are simpler and cost nothing on the device.
//
// State in device memory (EbrState, laid out by package internal/ebr's
// DeviceState):
//   epoch          the global epoch E
//   announce[b]    block b's announcement: (epoch << 1) | quiescent
//   overflow       per block: a DRAM bag for what its shared-memory bags
//                  cannot hold, overflow_cap entries each, tagged with their
//                  epoch; past it the unit is leaked and counted (never
//                  written past the bag)
//   log            the launch's leftovers: what the blocks still hold when
//                  they end, freed by the host after the launch (its launch
//                  epoch), log_cap entries (past it: leaked and counted)
//   counters       [0] freed, [1] leaked, [2] epoch advances
//
// A block calls start once, then works in rounds. begin_round (every thread of the block) announces
// the current epoch; when the block sees a newer epoch than its last round's,
// every unit it retired two epochs ago (its bag of that epoch, in shared
// memory, and the overflow entries tagged with it) is freed: every block has
// since announced a later epoch, so no round that could reach those units
// is still running. Thread 0 also scans the announcements (a few per round)
// and advances E once every block that is not quiescent has announced it.
// retire (any thread, inside a round) appends to the bag of the epoch it
// reads after the unlink (see retire). end_round (every thread) ends the round; finish (every thread, once,
// at exit) announces the block quiescent and moves everything it still
// holds to the launch log.
//
// Freeing is slaballoc's free_unit; with poison set, a unit is overwritten
// first (tests: a reader that reaches a freed unit sees the poison).
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "mem.cuh"
#include "slaballoc.cuh"

namespace wk {
namespace ebr {

// EbrState's layout is mirrored in Go (internal/ebr/device.go); the host
// sets every announcement quiescent before the launch (blocks not yet
// resident hold no epoch back).
struct EbrState {
  uint32_t* epoch;
  uint32_t* announce;  // one word per block of the grid
  uint32_t blocks;
  uint32_t overflow_cap;
  uint32_t* overflow;    // blocks * overflow_cap entries: unit address
  uint32_t* overflow_tag;  // the epoch of each overflow entry
  uint32_t* overflow_n;  // per block
  uint32_t* log;
  uint32_t log_cap;
  uint32_t poison;  // bytes to overwrite a unit with before freeing it (0: none)
  uint32_t* log_n;
  unsigned long long* counters;  // freed, leaked, advances
};
static_assert(offsetof(EbrState, blocks) == 16 && offsetof(EbrState, overflow) == 24 &&
                  offsetof(EbrState, log_cap) == 56 && offsetof(EbrState, log_n) == 64 &&
                  offsetof(EbrState, counters) == 72 && sizeof(EbrState) == 80,
              "EbrState is mirrored in Go");

constexpr uint32_t kQuiescent = 1;
// Overflow tags: kSlotUnused for a slot never handed out since Reset (a
// slot reserved by its atomicAdd holds it until its writer tags it), and
// kSlotFreed for one whose unit a reclaim freed — the only slots the reuse
// path may take. Real epochs stay below both (2^32 - 2 advances).
constexpr uint32_t kSlotUnused = ~0u;
constexpr uint32_t kSlotFreed = ~0u - 1;
constexpr int kScanPerRound = 32;  // announcements thread 0 reads per round

template <int BagSize>
struct BlockEbr {
  // Shared-memory state of the block (one per block: thread_local under the
  // CPU emulation, which runs a block on one thread).
  struct Shared {
    uint32_t bag[3][BagSize];
    uint32_t count[3];
    uint32_t epoch;  // the epoch the block announced last
    uint32_t scan;   // next announcement thread 0 reads
  };
  Shared* sh;
  EbrState st;
  slab::Pool* pool;

  __device__ __forceinline__ static Shared* shared() {
    __shared__ Shared s;
    return &s;
  }
  __device__ __forceinline__ BlockEbr(const EbrState& s, slab::Pool* p) : sh(shared()), st(s), pool(p) {}

  // start: every thread of the block, once, before its first round (shared
  // memory holds nothing of use when a block starts).
  __device__ void start() {
    if (threadIdx.x == 0) {
      sh->count[0] = sh->count[1] = sh->count[2] = 0;
      sh->epoch = mem::ld_acquire_u32(st.epoch);
      sh->scan = 0;
    }
    __syncthreads();
  }

  __device__ __forceinline__ void free_unit(uint32_t a) const {
    if (st.poison) {
      char* u = slab::unit_ptr(pool, a);
      for (uint32_t i = 0; i < st.poison; i += 4) mem::st_u32(u + i, 0xdeaddeadu);
      mem::fence();
    }
    slab::free_unit(pool, a);
  }

  // reclaim frees bag b (this block's units of an epoch two behind), in
  // parallel over the block's threads, and the overflow entries tagged e.
  __device__ void reclaim(int b, uint32_t e) {
    uint32_t n = min(sh->count[b], (uint32_t)BagSize);
    for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) free_unit(sh->bag[b][i]);
    uint32_t* of = st.overflow + (uint64_t)blockIdx.x * st.overflow_cap;
    uint32_t* tag = st.overflow_tag + (uint64_t)blockIdx.x * st.overflow_cap;
    uint32_t on = min(st.overflow_n[blockIdx.x], st.overflow_cap);
    unsigned long long freed = 0;
    for (uint32_t i = threadIdx.x; i < on; i += blockDim.x)
      if (tag[i] < kSlotFreed && tag[i] + 2 <= e) {
        free_unit(of[i]);
        tag[i] = kSlotFreed;  // the slot may be taken again
        ++freed;
      }
    if (threadIdx.x == 0) freed += n;
    if (freed) {
      atomicAdd(&st.counters[0], freed);
      atomicAdd(&pool->used, (unsigned long long)(-(long long)freed));  // the pool's count stays exact
    }
    __syncthreads();
    if (threadIdx.x == 0) sh->count[b] = 0;
  }

  // begin_round: every thread of the block, before the round's operations.
  __device__ void begin_round() {
    __shared__ uint32_t seen;
    if (threadIdx.x == 0) {
      // The last round's reads (every thread's, ordered before this by
      // end_round's barrier) come before the announcement that lets the
      // epoch pass them: a release fence. The announcement comes before
      // this round's reads: a store then loads, which only a sequentially
      // consistent fence orders (fence.sc; acq_rel would let the reads
      // pass the store, and an advancer miss a block that reads).
      seen = mem::ld_acquire_u32(st.epoch);
      mem::fence();
      mem::st_u32(st.announce + blockIdx.x, seen << 1);
      __threadfence();
    }
    __syncthreads();
    const uint32_t e = seen;
    if (e != sh->epoch) {
      // Every block has announced at least e - 1 since the block's last
      // round: its bag of e - 2 (and older) is safe. Bags of older epochs
      // than that were freed when it saw them pass.
      reclaim((int)((e + 1) % 3), e);  // (e - 2) % 3
      // The announcements scanned so far were checked against the old
      // epoch: the scan starts over for e.
      if (threadIdx.x == 0) {
        sh->epoch = e;
        sh->scan = 0;
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) try_advance(e);
  }

  // try_advance reads a few announcements; when every block that is not
  // quiescent has announced e, it moves the epoch on.
  __device__ void try_advance(uint32_t e) {
    for (int i = 0; i < kScanPerRound; ++i) {
      uint32_t b = sh->scan;
      uint32_t a = mem::ld_relaxed_u32(st.announce + b);
      if (!(a & kQuiescent) && (a >> 1) != e) return;  // a block behind: look again next round
      if (++sh->scan < st.blocks) continue;
      sh->scan = 0;
      mem::fence();  // the announcements read come before the advance
      if (atomicCAS(st.epoch, e, e + 1) == e) atomicAdd(&st.counters[2], 1ull);
      return;
    }
  }

  // retire hands over a unit no operation that starts later can reach. The
  // unit goes to the bag of the epoch read now, after its unlink: a round
  // that still holds it began at that epoch or before (it took the unit
  // before the unlink), so the epoch cannot pass two beyond it until that
  // round ends. (The block's own announced epoch may be one older than the
  // epoch at the unlink: a bag tagged with it would be freed one epoch too
  // early.) The epoch now is the block's or the one after: the epoch cannot
  // pass a block that has announced neither.
  __device__ void retire(uint32_t a) {
    __threadfence();  // the caller's unlink (a store) before the epoch is read (a load): fence.sc
    const uint32_t e = mem::ld_relaxed_u32(st.epoch);
    const int b = (int)(e % 3);
    uint32_t i = atomicAdd(&sh->count[b], 1u);
    if (i < (uint32_t)BagSize) {
      sh->bag[b][i] = a;
      return;
    }
    uint32_t j = atomicAdd(&st.overflow_n[blockIdx.x], 1u);
    if (j < st.overflow_cap) {
      st.overflow[(uint64_t)blockIdx.x * st.overflow_cap + j] = a;
      st.overflow_tag[(uint64_t)blockIdx.x * st.overflow_cap + j] = e;
      return;
    }
    // Past the overflow bag: reuse a slot an earlier reclaim freed, or leak.
    // The slot is claimed with a mark no reader takes, filled, then tagged
    // (a reclaim beside it never sees a tag without its unit).
    uint32_t* tag = st.overflow_tag + (uint64_t)blockIdx.x * st.overflow_cap;
    for (uint32_t k = 0; k < st.overflow_cap; ++k)
      if (atomicCAS(&tag[k], kSlotFreed, kSlotUnused) == kSlotFreed) {
        st.overflow[(uint64_t)blockIdx.x * st.overflow_cap + k] = a;
        __threadfence_block();
        tag[k] = e;
        return;
      }
    atomicAdd(&st.counters[1], 1ull);
  }

  // end_round: every thread of the block, after the round's operations.
  __device__ void end_round() { __syncthreads(); }

  // finish: every thread of the block, once, before it exits: the block is
  // quiescent from now on, and what it still holds goes to the launch log.
  __device__ void finish() {
    __syncthreads();
    if (threadIdx.x == 0) {
      mem::fence();  // the block's reads before the announcement that releases them
      mem::st_u32(st.announce + blockIdx.x, kQuiescent);
    }
    const int bs = 3 * BagSize;
    for (int i = threadIdx.x; i < bs; i += blockDim.x) {
      int b = i / BagSize, k = i % BagSize;
      if ((uint32_t)k < min(sh->count[b], (uint32_t)BagSize)) to_log(sh->bag[b][k]);
    }
    uint32_t on = min(st.overflow_n[blockIdx.x], st.overflow_cap);
    for (uint32_t i = threadIdx.x; i < on; i += blockDim.x) {
      uint32_t* tag = st.overflow_tag + (uint64_t)blockIdx.x * st.overflow_cap;
      if (tag[i] < kSlotFreed) to_log(st.overflow[(uint64_t)blockIdx.x * st.overflow_cap + i]);
    }
    __syncthreads();
  }

  __device__ void to_log(uint32_t a) {
    uint32_t i = atomicAdd(st.log_n, 1u);
    if (i < st.log_cap) st.log[i] = a;
    else atomicAdd(&st.counters[1], 1ull);
  }
};

}  // namespace ebr
}  // namespace wk
