// lsm_sorted.cuh: device code shared by the sorted dictionaries (packages lsm and
// sortedarray): binary and galloping searches over sorted key runs, the entry
// tag layout, and the batch-preparation kernels both structures run before a
// batch is merged in.
//
// Tags. An entry is a key plus a 32-bit tag: bit 31 marks a tombstone (a
// deletion), bits 0..30 hold a slot: for the LSM the index of the entry's value
// in the structure's value log, for the sorted array the index of the element in
// the caller's batch. Keeping the status in the tag, not in the key, leaves the
// whole key range usable (the GPU LSM paper stole a key bit).
//
// Searches take 64-bit positions; runs are [lo, hi).
#pragma once
#include <stdint.h>

namespace wk {
namespace sorted {

constexpr uint32_t kTomb = 0x80000000u;
constexpr uint32_t kSlotMask = 0x7fffffffu;

__device__ __forceinline__ bool is_tomb(uint32_t tag) { return (tag & kTomb) != 0; }
__device__ __forceinline__ uint32_t slot_of(uint32_t tag) { return tag & kSlotMask; }

template <typename K>
__device__ __forceinline__ K max_key() {
  return (K)~(K)0;
}

// Searches take 64-bit positions but run on 32 bits: every sorted run they
// see (a level, the sorted array, an offsets array) holds fewer than 2^31
// elements (prim.MaxElements).

// lower_bound returns the first position in [lo, hi) whose key is >= k, or hi.
template <typename K>
__device__ __forceinline__ uint64_t lower_bound(const K* __restrict__ a, uint64_t lo, uint64_t hi, K k) {
  uint32_t l = (uint32_t)lo, h = (uint32_t)hi;
  while (l < h) {
    uint32_t mid = l + ((h - l) >> 1);
    if (a[mid] < k)
      l = mid + 1;
    else
      h = mid;
  }
  return l;
}

// upper_bound returns the first position in [lo, hi) whose key is > k, or hi.
template <typename K>
__device__ __forceinline__ uint64_t upper_bound(const K* __restrict__ a, uint64_t lo, uint64_t hi, K k) {
  uint32_t l = (uint32_t)lo, h = (uint32_t)hi;
  while (l < h) {
    uint32_t mid = l + ((h - l) >> 1);
    if (a[mid] <= k)
      l = mid + 1;
    else
      h = mid;
  }
  return l;
}

// gallop_upper returns the first position in [lo, hi) whose key is > k, or
// hi, searching forward from lo with doubling steps: O(log d) reads when the
// answer is d positions on (the upper end of a short range, the end of a
// short segment).
template <typename K>
__device__ __forceinline__ uint64_t gallop_upper(const K* __restrict__ a, uint64_t lo, uint64_t hi, K k) {
  uint64_t start = lo, step = 1, end;
  for (;;) {
    uint64_t probe = start + step - 1;
    if (probe >= hi) {
      end = hi;
      break;
    }
    if (a[probe] > k) {
      end = probe;
      break;
    }
    start = probe + 1;
    step <<= 1;
  }
  return upper_bound(a, start, end, k);
}

// gallop_past returns the first position in (p, hi) whose key is > a[p] == c,
// or hi: the end of c's segment.
template <typename K>
__device__ __forceinline__ uint64_t gallop_past(const K* __restrict__ a, uint64_t p, uint64_t hi, K c) {
  return gallop_upper(a, p + 1, hi, c);
}

// gallop_head returns the first position in [lo, p] whose key equals a[p] == c
// (the head of c's segment), searching backward with doubling steps.
template <typename K>
__device__ __forceinline__ uint64_t gallop_head(const K* __restrict__ a, uint64_t lo, uint64_t p, K c) {
  uint64_t hi = p, step = 1, start;
  for (;;) {
    if (hi - lo < step) {
      start = lo;
      break;
    }
    uint64_t probe = hi - step;
    if (a[probe] < c) {
      start = probe + 1;
      break;
    }
    hi = probe;
    step <<= 1;
  }
  return lower_bound(a, start, hi, c);
}

// segment_of returns the segment s with off[s] <= e < off[s+1] for a
// non-decreasing offsets array off[0..nseg) (off[0] = 0), searching only
// [slo, shi): callers narrow the range per block (block_segments).
__device__ __forceinline__ uint64_t segment_of(const uint32_t* __restrict__ off, uint64_t slo, uint64_t shi, uint64_t e) {
  return upper_bound(off, slo, shi, (uint32_t)e) - 1;
}

// block_segments narrows the segment search of one block whose elements are
// [first, last]: segments [*slo, *shi) contain them all. Called by every thread
// of the block (it synchronizes); thread 0 searches the whole offsets array.
__device__ __forceinline__ void block_segments(const uint32_t* __restrict__ off, uint64_t nseg, uint64_t first, uint64_t last,
                                               uint64_t* slo, uint64_t* shi) {
  __shared__ uint64_t range[2];
  if (threadIdx.x == 0) {
    range[0] = upper_bound(off, 0, nseg, (uint32_t)first) - 1;
    range[1] = upper_bound(off, range[0], nseg, (uint32_t)last);
  }
  __syncthreads();
  *slo = range[0];
  *shi = range[1];
}

// prep_batch copies a caller's batch of m keys into the sort buffer in reverse
// order (a stable sort then puts the caller's last occurrence of a key first),
// padded to p >= m entries with copies of the caller's first element (which
// lands at position m-1), and tags each entry with slot base+source index, plus
// the tombstone bit where dels[source] != 0 (dels may be null: all inserts).
// When log is not null it also copies vals[i] to log[base+i] (the LSM's value
// log), saving a separate copy.
template <typename K, typename V>
__device__ __forceinline__ void prep_batch(const K* __restrict__ keys, const uint8_t* __restrict__ dels, const V* __restrict__ vals,
                                           uint64_t m, uint64_t p, uint32_t base, K* __restrict__ out_keys,
                                           uint32_t* __restrict__ out_tags, V* __restrict__ log) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < p; i += (uint64_t)gridDim.x * blockDim.x) {
    uint64_t src = i < m ? m - 1 - i : 0;
    uint32_t tag = (base + (uint32_t)src) & kSlotMask;
    if (dels != nullptr && dels[src] != 0) tag |= kTomb;
    out_keys[i] = keys[src];
    out_tags[i] = tag;
    if (log != nullptr && i < m) log[base + i] = vals[i];
  }
}

// fixup_tombstones makes the head of every key segment of a sorted batch a
// tombstone when the segment holds one: a key inserted and deleted in the same
// batch is deleted (semantics 6 of the GPU LSM paper). Each tombstone ORs the
// tombstone bit into its segment's head, so the result does not depend on
// which thread runs first.
template <typename K>
__device__ __forceinline__ void fixup_tombstones(const K* __restrict__ keys, uint32_t* tags, uint64_t n) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
    if (!is_tomb(tags[i])) continue;
    K k = keys[i];
    if (i > 0 && keys[i - 1] == k) {
      uint64_t head = lower_bound(keys, 0, i, k);
      atomicOr(&tags[head], kTomb);
    }
  }
}

// gather_values writes out[i] = src[slot_of(tags[i])].
template <typename V>
__device__ __forceinline__ void gather_values(const uint32_t* __restrict__ tags, const V* __restrict__ src, uint64_t n, V* __restrict__ out) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    out[i] = src[slot_of(tags[i])];
}

}  // namespace sorted
}  // namespace wk

// LSM_SORTED_BATCH_KERNELS instantiates the shared batch kernels for one key
// type under a name suffix (k32 or k64); LSM_SORTED_PAIR_KERNELS those that
// also touch values, for one key/value pair (suffix k32_v32 ...), and
// LSM_SORTED_GATHER_KERNEL gather_values for one value type (v32 or v64).
#define LSM_SORTED_BATCH_KERNELS(K, SUF)                                                     \
  extern "C" __global__ void fixup_tombstones_##SUF(const K* keys, uint32_t* tags, uint64_t n) { \
    wk::sorted::fixup_tombstones<K>(keys, tags, n);                                       \
  }

#define LSM_SORTED_PAIR_KERNELS(K, V, SUF)                                                                                 \
  extern "C" __global__ void prep_batch_##SUF(const K* keys, const uint8_t* dels, const V* vals, uint64_t m, uint64_t p,  \
                                              uint32_t base, K* out_keys, uint32_t* out_tags, V* log) {                   \
    wk::sorted::prep_batch<K, V>(keys, dels, vals, m, p, base, out_keys, out_tags, log);                                 \
  }

#define LSM_SORTED_GATHER_KERNEL(V, SUF)                                                                               \
  extern "C" __global__ void gather_values_##SUF(const uint32_t* tags, const V* src, uint64_t n, V* out) { \
    wk::sorted::gather_values<V>(tags, src, n, out);                                                                 \
  }
