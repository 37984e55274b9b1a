// scan.cuh: reduce-then-scan exclusive scan, select-by-flag and two-bucket
// multisplit. Each is three launches: an upsweep reducing each block's run of
// tiles, a one-block spine scan of the block partials, and a downsweep that
// rescans the tiles from the block's prefix.
#pragma once
#include "common.cuh"

namespace prim {

constexpr int kScanBlock = 256;

template <typename T>
struct ScanTile {
  static constexpr int kIPT = sizeof(T) == 4 ? 16 : 8;
  static constexpr int kItems = kScanBlock * kIPT;
};

// Select and multisplit tiles (flags are bytes; elements up to 8 bytes).
constexpr int kSelectIPT = 12;
constexpr int kSelectItems = kScanBlock * kSelectIPT;

// scan_reduce: partials[b] = the (wrapping) sum of block b's tiles.
template <typename T>
__device__ void scan_reduce(const T* in, int n, int tiles, T* partials) {
  using Reduce = cub::BlockReduce<T, kScanBlock>;
  __shared__ typename Reduce::TempStorage tmp;
  int first, last;
  tile_range(blockIdx.x, gridDim.x, tiles, &first, &last);
  const int64_t begin = (int64_t)first * ScanTile<T>::kItems;
  const int64_t end = min((int64_t)last * ScanTile<T>::kItems, (int64_t)n);
  T sum = 0;
  constexpr int kUnroll = 4;
  int64_t p = begin + threadIdx.x;
  for (; p + (kUnroll - 1) * kScanBlock < end; p += kUnroll * kScanBlock) {
    T v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; u++) v[u] = in[p + u * kScanBlock];
#pragma unroll
    for (int u = 0; u < kUnroll; u++) sum += v[u];
  }
  for (; p < end; p += kScanBlock) sum += in[p];
  sum = Reduce(tmp).Sum(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

// nonzero_bytes counts the non-zero bytes of a word.
__device__ __forceinline__ uint32_t nonzero_bytes(uint32_t x) {
  return __popc((((x & 0x7f7f7f7fu) + 0x7f7f7f7fu) | x) & 0x80808080u);
}

// count_flags: partials[b] = how many of block b's flags are non-zero (or,
// with zeros, are zero). Word loads when the flags are 4-byte aligned.
__device__ void count_flags(const uint8_t* flags, int n, int tiles, bool zeros, uint32_t* partials) {
  using Reduce = cub::BlockReduce<uint32_t, kScanBlock>;
  __shared__ typename Reduce::TempStorage tmp;
  int first, last;
  tile_range(blockIdx.x, gridDim.x, tiles, &first, &last);
  const int64_t begin = (int64_t)first * kSelectItems;  // a multiple of 4
  const int64_t end = min((int64_t)last * kSelectItems, (int64_t)n);
  uint32_t c = 0;
  int64_t p = begin;
  if (((uintptr_t)flags & 3) == 0) {
    const uint32_t* w = (const uint32_t*)(flags + begin);
    const int64_t words = (end - begin) / 4;
    for (int64_t i = threadIdx.x; i < words; i += kScanBlock) c += nonzero_bytes(w[i]);
    p = begin + words * 4;
  }
  for (p += threadIdx.x; p < end; p += kScanBlock) c += flags[p] != 0;
  c = Reduce(tmp).Sum(c);
  if (threadIdx.x == 0) partials[blockIdx.x] = zeros ? (uint32_t)(end > begin ? end - begin : 0) - c : c;
}

// stage_flags copies flags[0, valid) to shared memory, by words when aligned.
__device__ __forceinline__ void stage_flags(const uint8_t* flags, int valid, uint8_t* s) {
  int p = 0;
  if (((uintptr_t)flags & 3) == 0) {
    const int words = valid / 4;
    for (int i = threadIdx.x; i < words; i += kScanBlock) ((uint32_t*)s)[i] = ((const uint32_t*)flags)[i];
    p = words * 4;
  }
  for (p += threadIdx.x; p < valid; p += kScanBlock) s[p] = flags[p];
}

// scan_spine: one block turns partials[0, g) into exclusive prefixes,
// stores the total in partials[g] and, when total is not null, in *total.
template <typename T>
__device__ void scan_spine(T* partials, int g, T* total) {
  using Scan = cub::BlockScan<T, kScanBlock>;
  __shared__ typename Scan::TempStorage tmp;
  T run = 0;
  for (int base = 0; base < g; base += kScanBlock) {
    const int p = base + threadIdx.x;
    T v = p < g ? partials[p] : T(0), out, agg;
    Scan(tmp).ExclusiveSum(v, out, agg);
    if (p < g) partials[p] = run + out;
    run += agg;
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    partials[g] = run;
    if (total) *total = run;
  }
}

// scan_downsweep: out[i] = prefix of in; block b starts from partials[b].
// Tiles are read completely before they are written, so out may be in.
template <typename T>
__device__ void scan_downsweep(const T* in, T* out, int n, int tiles, const T* partials) {
  constexpr int IPT = ScanTile<T>::kIPT, kItems = ScanTile<T>::kItems;
  using Load = cub::BlockLoad<T, kScanBlock, IPT, cub::BLOCK_LOAD_WARP_TRANSPOSE>;
  using Store = cub::BlockStore<T, kScanBlock, IPT, cub::BLOCK_STORE_WARP_TRANSPOSE>;
  using Scan = cub::BlockScan<T, kScanBlock>;
  __shared__ union {
    typename Load::TempStorage load;
    typename Store::TempStorage store;
    typename Scan::TempStorage scan;
  } tmp;
  int first, last;
  tile_range(blockIdx.x, gridDim.x, tiles, &first, &last);
  T run = partials[blockIdx.x];
  for (int tile = first; tile < last; tile++) {
    const int64_t off = (int64_t)tile * kItems;
    const int valid = (int)min((int64_t)kItems, (int64_t)n - off);
    T v[IPT], agg;
    if (valid == kItems) {
      Load(tmp.load).Load(in + off, v);
    } else {
      Load(tmp.load).Load(in + off, v, valid, T(0));
    }
    __syncthreads();
    Scan(tmp.scan).ExclusiveSum(v, v, agg);
#pragma unroll
    for (int i = 0; i < IPT; i++) v[i] += run;
    run += agg;
    __syncthreads();
    if (valid == kItems) {
      Store(tmp.store).Store(out + off, v);
    } else {
      Store(tmp.store).Store(out + off, v, valid);
    }
    __syncthreads();
  }
}

// select_downsweep compacts block b's tiles. Select mode (split == false):
// elements with a non-zero flag go to out[rank] (rank = how many selected
// elements precede), dropped when rank >= cap. Split mode: elements with flag 0
// go to out[rank0], the others to out[total0 + rank1], where partials count
// zero flags and partials[gridDim.x] is total0. Elements are read and written
// coalesced, reordered through shared memory.
template <typename K, typename V, bool kPairs>
__device__ void select_downsweep(const K* keys, const V* vals, const uint8_t* flags, int n, int tiles,
                                 const uint32_t* partials, bool split, K* out_keys, V* out_vals, int cap) {
  constexpr int IPT = kSelectIPT, kItems = kSelectItems;
  using Scan = cub::BlockScan<int, kScanBlock>;
  using Wide = typename std::conditional<(sizeof(K) >= sizeof(V)), K, V>::type;
  __shared__ typename Scan::TempStorage scan;
  __shared__ __align__(16) uint8_t sflags[kItems];
  __shared__ int slots[kItems];
  __shared__ Wide xchg[kItems];
  int first, last;
  tile_range(blockIdx.x, gridDim.x, tiles, &first, &last);
  int run = (int)partials[blockIdx.x];  // selected (or zero-flag) elements before this block
  const int total0 = split ? (int)partials[gridDim.x] : 0;
  for (int tile = first; tile < last; tile++) {
    const int64_t off = (int64_t)tile * kItems;
    const int valid = (int)min((int64_t)kItems, (int64_t)n - off);
    stage_flags(flags + off, valid, sflags);
    __syncthreads();
    // Blocked arrangement: thread t ranks tile elements t*IPT .. t*IPT+IPT-1.
    int sel[IPT], local[IPT], chosen;
#pragma unroll
    for (int i = 0; i < IPT; i++) {
      const int p = threadIdx.x * IPT + i;
      sel[i] = p < valid ? (int)((sflags[p] != 0) != split) : 0;
    }
    Scan(scan).ExclusiveSum(sel, local, chosen);
    // Exchange slot: the chosen elements first, in order, then (split mode)
    // the others, in order; -1: not moved.
#pragma unroll
    for (int i = 0; i < IPT; i++) {
      const int p = threadIdx.x * IPT + i;
      if (p < valid) slots[p] = sel[i] ? local[i] : (split ? chosen + (p - local[i]) : -1);
    }
    __syncthreads();
    const int out_rest = total0 + ((int)off - run);  // split: output of the tile's first flag-1 element
    const int moved = split ? valid : chosen;
    for (int p = threadIdx.x; p < valid; p += kScanBlock) {
      const int q = slots[p];
      if (q >= 0) xchg[q] = (Wide)keys[off + p];
    }
    __syncthreads();
    for (int q = threadIdx.x; q < moved; q += kScanBlock) {
      const int d = q < chosen ? run + q : out_rest + (q - chosen);
      if (d < cap) out_keys[d] = (K)xchg[q];
    }
    if constexpr (kPairs) {
      __syncthreads();
      for (int p = threadIdx.x; p < valid; p += kScanBlock) {
        const int q = slots[p];
        if (q >= 0) xchg[q] = (Wide)vals[off + p];
      }
      __syncthreads();
      for (int q = threadIdx.x; q < moved; q += kScanBlock) {
        const int d = q < chosen ? run + q : out_rest + (q - chosen);
        if (d < cap) out_vals[d] = (V)xchg[q];
      }
    }
    run += chosen;
    __syncthreads();
  }
}

}  // namespace prim
