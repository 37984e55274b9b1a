// sortedarray.cu: the sorted array's kernels. The array is one sorted run of
// distinct keys with their values. Sorting and merging are prim's; these
// kernels prepare batches (shared with the LSM), find the entries a batch
// replaces or deletes, and answer queries by binary search.
#include <stdint.h>
#include "lsm_sorted.cuh"
#include "warp.cuh"

using namespace wk::sorted;

namespace {

constexpr int kItems = 4;  // elements per thread in the tiled range gather

// mark: for the head of every key segment of the sorted, fixed-up batch,
// keep[i] says whether it is inserted (a regular head), and an array entry
// with the same key is listed in drops (it is replaced or deleted).
template <typename K>
__device__ void mark(const K* __restrict__ bk, const uint32_t* __restrict__ bt, uint64_t m, const K* __restrict__ arr, uint64_t n,
                     uint8_t* __restrict__ keep, uint64_t* __restrict__ drops, uint32_t* ndrops) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < m; i += (uint64_t)gridDim.x * blockDim.x) {
    K k = bk[i];
    bool head = i == 0 || bk[i - 1] != k;
    keep[i] = (head && !is_tomb(bt[i])) ? 1 : 0;
    if (!head) continue;
    uint64_t p = lower_bound(arr, 0, n, k);
    if (p < n && arr[p] == k) drops[atomicAdd(ndrops, 1u)] = p;
  }
}

template <typename K, typename V>
__device__ void lookup(const K* __restrict__ arr, const V* __restrict__ vals, uint64_t n, const K* __restrict__ q, uint64_t nq,
                       V* __restrict__ out, uint8_t* __restrict__ found) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < nq; i += (uint64_t)gridDim.x * blockDim.x) {
    K k = q[i];
    uint64_t p = lower_bound(arr, 0, n, k);
    bool f = p < n && arr[p] == k;
    out[i] = f ? vals[p] : (V)0;
    found[i] = f ? 1 : 0;
  }
}

// bounds: counts[i] = |{k in [lo, hi]}|; starts (optional) the first
// position; total (optional) accumulates the sum, 64-bit.
template <typename K>
__device__ void bounds(const K* __restrict__ arr, uint64_t n, const K* __restrict__ lo, const K* __restrict__ hi, uint64_t nq,
                       uint32_t* __restrict__ counts, uint64_t* __restrict__ starts, unsigned long long* total) {
  uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
  uint64_t c = 0;
  if (i < nq) {
    uint64_t l = 0, u = 0;
    if (lo[i] < hi[i]) {  // [lo, hi): hi > lo >= 0, so hi - 1 does not wrap
      l = lower_bound(arr, 0, n, lo[i]);
      u = gallop_upper(arr, l, n, (K)(hi[i] - 1));
    }
    c = u - l;
    counts[i] = (uint32_t)c;
    if (starts != nullptr) starts[i] = l;
  }
  if (total == nullptr) return;  // uniform over the grid
  for (int d = 16; d > 0; d >>= 1) c += __shfl_down_sync(wk::kFullMask, (unsigned long long)c, d);
  if (wk::lane_id() == 0 && c != 0) atomicAdd(total, (unsigned long long)c);
}

// range_gather: output e of query q (off[q] <= e < off[q+1]) is array entry
// starts[q] + e - off[q].
template <typename K, typename V>
__device__ void range_gather(const K* __restrict__ arr, const V* __restrict__ vals, const uint64_t* __restrict__ starts,
                             const uint32_t* __restrict__ off, uint64_t nq, uint64_t total, K* __restrict__ ok, V* __restrict__ ov) {
  uint64_t tile = (uint64_t)blockDim.x * kItems, first = blockIdx.x * tile;
  if (first >= total) return;  // uniform over the block
  uint64_t slo, shi;
  block_segments(off, nq, first, min(first + tile, total) - 1, &slo, &shi);
  for (int it = 0; it < kItems; it++) {
    uint64_t e = first + (uint64_t)it * blockDim.x + threadIdx.x;
    if (e >= total) break;
    uint64_t q = segment_of(off, slo, shi, e);
    uint64_t src = starts[q] + (e - off[q]);
    ok[e] = arr[src];
    ov[e] = vals[src];
  }
}

// neighbor: the smallest key > q[i] (succ) or the largest key < q[i].
template <typename K, typename V>
__device__ void neighbor(const K* __restrict__ arr, const V* __restrict__ vals, uint64_t n, const K* __restrict__ q, uint64_t nq,
                         uint32_t succ, K* __restrict__ ok, V* __restrict__ ov, uint8_t* __restrict__ found) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < nq; i += (uint64_t)gridDim.x * blockDim.x) {
    K k = q[i];
    uint64_t p;
    bool f;
    if (succ) {
      p = upper_bound(arr, 0, n, k);
      f = p < n;
    } else {
      p = lower_bound(arr, 0, n, k);
      f = p > 0;
      p = f ? p - 1 : 0;
    }
    ok[i] = f ? arr[p] : (K)0;
    ov[i] = f ? vals[p] : (V)0;
    found[i] = f ? 1 : 0;
  }
}

}  // namespace

// unmark clears keep[drops[i]] for the ndrops listed array entries.
extern "C" __global__ void unmark(const uint64_t* drops, uint64_t ndrops, uint8_t* keep) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < ndrops; i += (uint64_t)gridDim.x * blockDim.x)
    keep[drops[i]] = 0;
}

#define SA_KEY_KERNELS(K, SUF)                                                                                                \
  LSM_SORTED_BATCH_KERNELS(K, SUF)                                                                                            \
  extern "C" __global__ void mark_##SUF(const K* bk, const uint32_t* bt, uint64_t m, const K* arr, uint64_t n, uint8_t* keep, \
                                        uint64_t* drops, uint32_t* ndrops) {                                                  \
    mark<K>(bk, bt, m, arr, n, keep, drops, ndrops);                                                                          \
  }                                                                                                                           \
  extern "C" __global__ void bounds_##SUF(const K* arr, uint64_t n, const K* lo, const K* hi, uint64_t nq, uint32_t* counts,  \
                                          uint64_t* starts, unsigned long long* total) {                                      \
    bounds<K>(arr, n, lo, hi, nq, counts, starts, total);                                                                     \
  }

#define SA_PAIR_KERNELS(K, V, SUF)                                                                                            \
  LSM_SORTED_PAIR_KERNELS(K, V, SUF)                                                                                          \
  extern "C" __global__ void lookup_##SUF(const K* arr, const V* vals, uint64_t n, const K* q, uint64_t nq, V* out,           \
                                          uint8_t* found) {                                                                   \
    lookup<K, V>(arr, vals, n, q, nq, out, found);                                                                            \
  }                                                                                                                           \
  extern "C" __global__ void range_gather_##SUF(const K* arr, const V* vals, const uint64_t* starts, const uint32_t* off,     \
                                                uint64_t nq, uint64_t total, K* ok, V* ov) {                                  \
    range_gather<K, V>(arr, vals, starts, off, nq, total, ok, ov);                                                            \
  }                                                                                                                           \
  extern "C" __global__ void neighbor_##SUF(const K* arr, const V* vals, uint64_t n, const K* q, uint64_t nq, uint32_t succ,  \
                                            K* ok, V* ov, uint8_t* found) {                                                   \
    neighbor<K, V>(arr, vals, n, q, nq, succ, ok, ov, found);                                                                 \
  }

SA_KEY_KERNELS(uint32_t, k32)
SA_KEY_KERNELS(uint64_t, k64)
LSM_SORTED_GATHER_KERNEL(uint32_t, v32)
LSM_SORTED_GATHER_KERNEL(uint64_t, v64)
SA_PAIR_KERNELS(uint32_t, uint32_t, k32_v32)
SA_PAIR_KERNELS(uint32_t, uint64_t, k32_v64)
SA_PAIR_KERNELS(uint64_t, uint32_t, k64_v32)
SA_PAIR_KERNELS(uint64_t, uint64_t, k64_v64)
