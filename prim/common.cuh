// common.cuh: what prim's kernels share — tile partitioning, radix digits, the
// match-based block radix ranker.
#pragma once
#include <stdint.h>
#include <cub/cub.cuh>

namespace prim {

constexpr int kWarp = 32;
constexpr int kRadixBits = 8;
constexpr int kDigits = 1 << kRadixBits;

// tile_range gives block b of g its contiguous run [*first, *last) of tiles:
// reduce-then-scan kernels (upsweep and downsweep) must agree on it.
__device__ __forceinline__ void tile_range(int b, int g, int tiles, int* first, int* last) {
  *first = (int)((int64_t)b * tiles / g);
  *last = (int)((int64_t)(b + 1) * tiles / g);
}

__device__ __forceinline__ unsigned lane_mask_lt() {
  unsigned m;
  asm("mov.u32 %0, %%lanemask_lt;" : "=r"(m));
  return m;
}

// digit returns bits [bit, bit+nbits) of k; nbits is 1..8.
template <typename K>
__device__ __forceinline__ uint32_t digit(K k, int bit, int nbits) {
  return (uint32_t)(k >> bit) & ((1u << nbits) - 1u);
}

// BlockRanker ranks a tile of BLOCK*IPT keys by one radix digit, stably in
// warp-striped order (item i of lane l of warp w is tile element
// w*IPT*32 + i*32 + l), the order in which LoadWarpStriped loads them. It is
// the algorithm of CUB's BlockRadixRankMatch (per-warp digit counters, peers
// found with match.any, one scan over [digit][warp]), written with
// __match_any_sync so that it is correct under independent thread scheduling.
// BLOCK must equal the number of digits: thread t owns digit t.
template <int BLOCK, int IPT>
struct BlockRanker {
  static_assert(BLOCK == kDigits, "one thread per digit");
  static constexpr int kWarps = BLOCK / kWarp;
  static constexpr int kStride = kWarps % 2 == 0 ? kWarps + 1 : kWarps;  // odd: no bank conflicts
  using Scan = cub::BlockScan<int, BLOCK>;

  struct Storage {
    typename Scan::TempStorage scan;
    int counters[kDigits * kStride];  // [digit][warp]
  };

  Storage& s;
  __device__ __forceinline__ explicit BlockRanker(Storage& storage) : s(storage) {}

  // Rank sets rank[i] to the tile position of item i in the stable order by
  // digits[i], and for thread t's digit the tile's exclusive prefix (*prefix)
  // and count (*count). Every thread of the block must call it.
  __device__ __forceinline__ void Rank(const uint32_t (&digits)[IPT], int (&rank)[IPT], int* prefix, int* count) {
    const int t = threadIdx.x, warp = t / kWarp;
#pragma unroll
    for (int w = 0; w < kStride; w++) s.counters[t * kStride + w] = 0;
    __syncthreads();
    const unsigned lt = lane_mask_lt();
    volatile int* counters = s.counters;
#pragma unroll
    for (int i = 0; i < IPT; i++) {
      const unsigned peers = __match_any_sync(0xffffffffu, digits[i]);
      const int c = digits[i] * kStride + warp;
      const int before = counters[c];
      __syncwarp();
      const int below = __popc(peers & lt);
      if (below == 0) counters[c] = before + __popc(peers);
      __syncwarp();
      rank[i] = before + below;
    }
    __syncthreads();
    // Thread t scans digit t's row of per-warp counts; a block scan over the
    // row totals gives each digit's start.
    int row[kStride];
    int total = 0;
#pragma unroll
    for (int w = 0; w < kStride; w++) {
      row[w] = s.counters[t * kStride + w];
      total += row[w];
    }
    int start;
    Scan(s.scan).ExclusiveSum(total, start);
    int run = start;
#pragma unroll
    for (int w = 0; w < kStride; w++) {
      s.counters[t * kStride + w] = run;
      run += row[w];
    }
    *prefix = start;
    *count = total;
    __syncthreads();
#pragma unroll
    for (int i = 0; i < IPT; i++) rank[i] += s.counters[digits[i] * kStride + warp];
  }
};

// load_item reads *p, through L2 only when kCG (ld.global.cg): data that
// other blocks of the same kernel wrote must not come from a stale L1 line.
template <bool kCG, typename T>
__device__ __forceinline__ T load_item(const T* p) {
  if constexpr (kCG) {
    return __ldcg(p);
  } else {
    return *p;
  }
}

// LoadWarpStriped loads a tile's items in warp-striped order; positions at or
// past valid get fill. kCG: load through L2 only (see load_item).
template <int IPT, bool kCG = false, typename T>
__device__ __forceinline__ void LoadWarpStriped(const T* in, int valid, T fill, T (&items)[IPT]) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int base = warp * IPT * kWarp + lane;
#pragma unroll
  for (int i = 0; i < IPT; i++) {
    const int p = base + i * kWarp;
    items[i] = p < valid ? load_item<kCG>(in + p) : fill;
  }
}

__device__ __forceinline__ int warp_striped_index(int i, int ipt) {
  return (threadIdx.x / kWarp) * ipt * kWarp + i * kWarp + threadIdx.x % kWarp;
}

}  // namespace prim
