// scan.cuh: exclusive scan (single pass, decoupled look-back), and
// select-by-flag and two-bucket multisplit (reduce-then-scan: a flag-count
// upsweep reading one byte per element, a one-block spine scan of the block
// counts, and a downsweep that moves the elements).
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

// ---------------------------------------------------------------------------
// Decoupled look-back (Merrill & Garland, "Single-pass parallel prefix scan
// with decoupled look-back", 2016): each block takes the next tile id from a
// counter, publishes its tile's aggregate, then — one warp, 32 predecessors
// at a time — sums predecessors' aggregates until it meets one that has
// published its inclusive prefix. Tile ids are handed out in the order blocks
// start, so every predecessor belongs to a running block: the wait always
// ends. It is bounded anyway; past the bound the kernel traps: no hang, but a
// sticky error that ends the CUDA context for the whole process (every later
// call on the device fails; see the package doc).

enum TileStatus : uint32_t { kTileInvalid = 0, kTileAggregate = 1, kTileInclusive = 2 };
constexpr uint32_t kLookbackSpins = 1u << 26;  // of about 64 ns each: seconds

// A tile's published state as one reader saw it.
template <typename T>
struct TileSnap {
  uint32_t status;
  T value;  // valid for TileStates<uint32_t>; the general case reads it later
};

// TileStates is where tiles publish: a status word per tile and the values
// in separate arrays, ordered by a fence on both sides.
template <typename T>
struct TileStates {
  uint32_t* status;  // [tiles], zeroed
  T* aggregate;      // [tiles]
  T* inclusive;      // [tiles]

  __device__ __forceinline__ void publish(int tile, TileStatus st, T value) const {
    volatile T* dst = st == kTileInclusive ? inclusive : aggregate;
    dst[tile] = value;
    __threadfence();
    atomicExch(&status[tile], (uint32_t)st);
  }
  __device__ __forceinline__ TileSnap<T> poll(int tile) const { return {*(volatile uint32_t*)&status[tile], T(0)}; }
  __device__ __forceinline__ T value(int tile, TileSnap<T> snap) const {
    __threadfence();
    return snap.status == kTileInclusive ? *(volatile T*)&inclusive[tile] : *(volatile T*)&aggregate[tile];
  }
};

// 32-bit values share one 64-bit word with their status (status in the high
// half): one atomic store publishes both, no fence needed.
template <>
struct TileStates<uint32_t> {
  unsigned long long* words;  // [tiles], zeroed

  __device__ __forceinline__ void publish(int tile, TileStatus st, uint32_t value) const {
    atomicExch(&words[tile], (unsigned long long)st << 32 | value);
  }
  __device__ __forceinline__ TileSnap<uint32_t> poll(int tile) const {
    const unsigned long long w = *(volatile unsigned long long*)&words[tile];
    return {(uint32_t)(w >> 32), (uint32_t)w};
  }
  __device__ __forceinline__ uint32_t value(int, TileSnap<uint32_t> snap) const { return snap.value; }
};

template <typename T>
struct Lookback {
  int* counter;  // next tile id; zeroed by the host with the states
  TileStates<T> states;

  __device__ __forceinline__ void publish(int tile, TileStatus st, T value) const { states.publish(tile, st, value); }

  // exclusive_prefix returns the sum of the aggregates of tiles [0, tile).
  // All 32 lanes of one warp call it.
  __device__ __forceinline__ T exclusive_prefix(int tile) const {
    const int lane = threadIdx.x % kWarp;
    T prefix = 0;
    for (int base = tile - 1;; base -= kWarp) {
      const int idx = base - lane;
      TileSnap<T> snap{kTileInclusive, T(0)};  // before tile 0: an inclusive 0
      for (uint32_t spins = 0;; spins++) {
        if (idx >= 0) snap = states.poll(idx);
        if (__all_sync(0xffffffffu, snap.status != kTileInvalid)) break;
        if (spins == kLookbackSpins) __trap();
        __nanosleep(64);
      }
      T v = idx >= 0 ? states.value(idx, snap) : T(0);
      const unsigned done = __ballot_sync(0xffffffffu, snap.status == kTileInclusive);
      // Lane l holds tile base-l: sum the lanes up to the nearest inclusive one.
      if (done && lane > __ffs(done) - 1) v = 0;
#pragma unroll
      for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      prefix += v;
      if (done) return prefix;
    }
  }
};

// scan_single: out[i] = in[0] + ... + in[i-1], one tile per block. A tile is
// read completely before it is written, so out may be in. When total is not
// null the last tile stores the sum of everything in *total.
template <typename T>
__device__ void scan_single(const T* in, T* out, int n, int tiles, Lookback<T> lb, T* total) {
  constexpr int IPT = ScanTile<T>::kIPT, kItems = ScanTile<T>::kItems;
  using Load = cub::BlockLoad<T, kScanBlock, IPT, cub::BLOCK_LOAD_WARP_TRANSPOSE>;
  using Store = cub::BlockStore<T, kScanBlock, IPT, cub::BLOCK_STORE_WARP_TRANSPOSE>;
  using Scan = cub::BlockScan<T, kScanBlock>;
  __shared__ union {
    typename Load::TempStorage load;
    typename Store::TempStorage store;
    typename Scan::TempStorage scan;
  } tmp;
  __shared__ int s_tile;
  __shared__ T s_prefix;
  if (threadIdx.x == 0) s_tile = atomicAdd(lb.counter, 1);
  __syncthreads();
  const int tile = s_tile;
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
  if (threadIdx.x < kWarp) {
    T prefix = 0;
    if (tile == 0) {
      if (threadIdx.x == 0) lb.publish(0, kTileInclusive, agg);
    } else {
      if (threadIdx.x == 0) lb.publish(tile, kTileAggregate, agg);
      prefix = lb.exclusive_prefix(tile);
      if (threadIdx.x == 0) lb.publish(tile, kTileInclusive, prefix + agg);
    }
    if (threadIdx.x == 0) {
      s_prefix = prefix;
      if (total && tile == tiles - 1) *total = prefix + agg;
    }
  }
  __syncthreads();
  const T prefix = s_prefix;
#pragma unroll
  for (int i = 0; i < IPT; i++) v[i] += prefix;
  if (valid == kItems) {
    Store(tmp.store).Store(out + off, v);
  } else {
    Store(tmp.store).Store(out + off, v, valid);
  }
}

// nonzero_bytes counts the non-zero bytes of a word.
__device__ __forceinline__ uint32_t nonzero_bytes(uint32_t x) {
  return __popc((((x & 0x7f7f7f7fu) + 0x7f7f7f7fu) | x) & 0x80808080u);
}

// count_flags: partials[b] = how many of block b's flags are non-zero (or,
// with zeros, are zero). 16-byte loads, four in flight per thread, when the
// flags are 16-byte aligned.
__device__ void count_flags(const uint8_t* flags, int n, int tiles, bool zeros, uint32_t* partials) {
  using Reduce = cub::BlockReduce<uint32_t, kScanBlock>;
  __shared__ typename Reduce::TempStorage tmp;
  int first, last;
  tile_range(blockIdx.x, gridDim.x, tiles, &first, &last);
  const int64_t begin = (int64_t)first * kSelectItems;  // a multiple of 16
  const int64_t end = min((int64_t)last * kSelectItems, (int64_t)n);
  uint32_t c = 0;
  int64_t p = begin;
  if (((uintptr_t)flags & 15) == 0) {
    const uint4* w = (const uint4*)(flags + begin);
    const int vecs = (int)((end - begin) / 16);
    constexpr int kUnroll = 4;
    int i = threadIdx.x;
    for (; i + (kUnroll - 1) * kScanBlock < vecs; i += kUnroll * kScanBlock) {
      uint4 x[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; u++) x[u] = w[i + u * kScanBlock];
#pragma unroll
      for (int u = 0; u < kUnroll; u++) c += nonzero_bytes(x[u].x) + nonzero_bytes(x[u].y) + nonzero_bytes(x[u].z) + nonzero_bytes(x[u].w);
    }
    for (; i < vecs; i += kScanBlock) {
      const uint4 x = w[i];
      c += nonzero_bytes(x.x) + nonzero_bytes(x.y) + nonzero_bytes(x.z) + nonzero_bytes(x.w);
    }
    p = begin + (int64_t)vecs * 16;
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
    // Issue every load of the tile before waiting for any: flags to shared
    // memory, elements (striped, coalesced) to registers.
    K k[IPT];
    V v[IPT];
#pragma unroll
    for (int i = 0; i < IPT; i++) {
      const int p = i * kScanBlock + threadIdx.x;
      if (p < valid) {
        k[i] = keys[off + p];
        if constexpr (kPairs) v[i] = vals[off + p];
      }
    }
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
#pragma unroll
    for (int i = 0; i < IPT; i++) {
      const int p = i * kScanBlock + threadIdx.x;
      if (p < valid && slots[p] >= 0) xchg[slots[p]] = (Wide)k[i];
    }
    __syncthreads();
    for (int q = threadIdx.x; q < moved; q += kScanBlock) {
      const int d = q < chosen ? run + q : out_rest + (q - chosen);
      if (d < cap) out_keys[d] = (K)xchg[q];
    }
    if constexpr (kPairs) {
      __syncthreads();
#pragma unroll
      for (int i = 0; i < IPT; i++) {
        const int p = i * kScanBlock + threadIdx.x;
        if (p < valid && slots[p] >= 0) xchg[slots[p]] = (Wide)v[i];
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
