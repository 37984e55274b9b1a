// sort.cuh: LSD radix sort passes (upsweep histogram, per-digit scan,
// downsweep rank-and-scatter) and the segmented sort kernels.
#pragma once
#include "common.cuh"

namespace prim {

constexpr int kSortBlock = 256;

// Items per thread of a radix tile: 16 for 32-bit keys, 12 for 64-bit keys.
template <typename K>
struct SortTile {
  static constexpr int kIPT = sizeof(K) == 4 ? 16 : 12;
  static constexpr int kItems = kSortBlock * kIPT;
};

// No value: key-only sorts pass a NoValue pointer that is never dereferenced.
struct NoValue {};

// ---------------------------------------------------------------------------
// Histogram of one digit over a range of tiles, per warp, aggregated with
// match.any so that runs of equal keys do not serialize on one counter.

struct HistStorage {
  int warp_hist[kSortBlock / kWarp][kDigits + 1];  // +1: a bin for padding
};

__device__ __forceinline__ void count_digit(HistStorage& h, int warp, uint32_t d) {
  const unsigned peers = __match_any_sync(0xffffffffu, d);
  if ((peers & lane_mask_lt()) == 0) atomicAdd(&h.warp_hist[warp][d], __popc(peers));
}

// accumulate_histogram adds the digits of in[0, count) into the block's
// per-warp histograms: 16-byte loads, four in flight per thread, when in is
// 16-byte aligned, then element loads for the rest. Trip counts are uniform
// across each warp, so __match_any_sync always sees all lanes (lanes without an
// element count into the padding bin). Every thread of the block must call it.
template <typename K>
__device__ __forceinline__ void accumulate_histogram(HistStorage& h, const K* in, int count, int bit, int nbits) {
  const int warp = threadIdx.x / kWarp;
  int done = 0;
  if (((uintptr_t)in & 15) == 0) {
    constexpr int kPer = 16 / sizeof(K), kUnroll = 4;
    union Vec {
      uint4 v;
      K k[kPer];
    };
    const uint4* vin = (const uint4*)in;
    const int nvec = count / kPer;
    for (int base = 0; base < nvec; base += kSortBlock * kUnroll) {
      Vec x[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; u++) {
        const int i = base + u * kSortBlock + threadIdx.x;
        if (i < nvec) x[u].v = vin[i];
      }
#pragma unroll
      for (int u = 0; u < kUnroll; u++) {
        const bool ok = base + u * kSortBlock + (int)threadIdx.x < nvec;
#pragma unroll
        for (int j = 0; j < kPer; j++) count_digit(h, warp, ok ? digit(x[u].k[j], bit, nbits) : (uint32_t)kDigits);
      }
    }
    done = nvec * kPer;
  }
  for (int base = done; base < count; base += kSortBlock) {
    const int p = base + threadIdx.x;
    count_digit(h, warp, p < count ? digit(in[p], bit, nbits) : (uint32_t)kDigits);
  }
}

__device__ __forceinline__ void zero_histogram(HistStorage& h) {
  for (int i = threadIdx.x; i < (kSortBlock / kWarp) * (kDigits + 1); i += kSortBlock) (&h.warp_hist[0][0])[i] = 0;
}

// histogram_total returns digit threadIdx.x's count summed over the warps.
__device__ __forceinline__ int histogram_total(HistStorage& h) {
  int c = 0;
#pragma unroll
  for (int w = 0; w < kSortBlock / kWarp; w++) c += h.warp_hist[w][threadIdx.x];
  return c;
}

// radix_upsweep: block b counts the digits of its tiles into
// counts[digit * gridDim.x + b].
template <typename K>
__device__ void radix_upsweep(const K* keys, int n, int tiles, int bit, int nbits, uint32_t* counts) {
  __shared__ HistStorage h;
  int first, last;
  tile_range(blockIdx.x, gridDim.x, tiles, &first, &last);
  zero_histogram(h);
  __syncthreads();
  const int64_t begin = (int64_t)first * SortTile<K>::kItems;
  const int64_t end = min((int64_t)last * SortTile<K>::kItems, (int64_t)n);
  if (end > begin) accumulate_histogram(h, keys + begin, (int)(end - begin), bit, nbits);
  __syncthreads();
  counts[threadIdx.x * gridDim.x + blockIdx.x] = histogram_total(h);
}

// radix_scan_rows: block d turns row d of counts (one count per upsweep
// block) into exclusive prefixes and writes the row's total to totals[d].
__device__ void radix_scan_rows(uint32_t* counts, int g, uint32_t* totals) {
  using Scan = cub::BlockScan<uint32_t, kSortBlock>;
  __shared__ typename Scan::TempStorage tmp;
  uint32_t* row = counts + (int64_t)blockIdx.x * g;
  uint32_t run = 0;
  for (int base = 0; base < g; base += kSortBlock) {
    const int p = base + threadIdx.x;
    uint32_t v = p < g ? row[p] : 0, out, agg;
    Scan(tmp).ExclusiveSum(v, out, agg);
    if (p < g) row[p] = run + out;
    run += agg;
    __syncthreads();
  }
  if (threadIdx.x == 0) totals[blockIdx.x] = run;
}

// ---------------------------------------------------------------------------
// One tile of a radix pass: rank by digit, exchange through shared memory into
// digit order, scatter each digit's run to its destination.

template <typename K, typename V, bool kPairs, int kIPT = SortTile<K>::kIPT>
struct ScatterStorage {
  typename BlockRanker<kSortBlock, kIPT>::Storage rank;
  int base[kDigits];  // destination of the digit's first tile element, minus its tile prefix
  union {
    K keys[kSortBlock * kIPT];
    typename std::conditional<kPairs, V, K>::type vals[kSortBlock * kIPT];
  } x;
};

// rank_and_scatter moves tile in[0, valid) to out by digit. After ranking,
// every thread calls start(count) with the tile's count of its digit t
// (padding excluded); start returns the output position of the tile's first
// element with digit t. Every thread must call it; it ends with a barrier.
// kCG loads the tile through L2 only (data written by the same kernel). A
// tile holds kSortBlock * IPT elements.
template <typename K, typename V, bool kPairs, bool kCG = false, int IPT = SortTile<K>::kIPT, typename Start>
__device__ __forceinline__ void rank_and_scatter(ScatterStorage<K, V, kPairs, IPT>& s, const K* keys_in, const V* vals_in,
                                                 K* keys_out, V* vals_out, int valid, int bit, int nbits, Start start) {
  constexpr int kItems = kSortBlock * IPT;
  // The fused sort, which runs one tile per block at a time, loads 32-bit
  // values before ranking so that their latency overlaps it.
  constexpr bool kEarlyVals = kPairs && kCG && sizeof(V) == 4;
  K keys[IPT];
  V vals[IPT];
  uint32_t digits[IPT];
  int rank[IPT];
  LoadWarpStriped<IPT, kCG>(keys_in, valid, ~K(0), keys);
  if constexpr (kEarlyVals) LoadWarpStriped<IPT, kCG>(vals_in, valid, V(0), vals);
  const uint32_t pad = (1u << nbits) - 1u;  // padding ranks last
#pragma unroll
  for (int i = 0; i < IPT; i++) digits[i] = warp_striped_index(i, IPT) < valid ? digit(keys[i], bit, nbits) : pad;
  int prefix, count;
  BlockRanker<kSortBlock, IPT>(s.rank).Rank(digits, rank, &prefix, &count);
  if (threadIdx.x == pad) count -= kItems - valid;
  s.base[threadIdx.x] = start(count) - prefix;
#pragma unroll
  for (int i = 0; i < IPT; i++) s.x.keys[rank[i]] = keys[i];
  __syncthreads();
  int pos[IPT];
#pragma unroll
  for (int i = 0; i < IPT; i++) {
    const int p = i * kSortBlock + threadIdx.x;
    if (p < valid) {
      const K k = s.x.keys[p];
      pos[i] = s.base[digit(k, bit, nbits)] + p;
      keys_out[pos[i]] = k;
    }
  }
  if constexpr (kPairs) {
    if constexpr (!kEarlyVals) LoadWarpStriped<IPT, kCG>(vals_in, valid, V(0), vals);
    __syncthreads();
#pragma unroll
    for (int i = 0; i < IPT; i++) s.x.vals[rank[i]] = vals[i];
    __syncthreads();
#pragma unroll
    for (int i = 0; i < IPT; i++) {
      const int p = i * kSortBlock + threadIdx.x;
      if (p < valid) vals_out[pos[i]] = s.x.vals[p];
    }
  }
  __syncthreads();
}

// scatter_tile is rank_and_scatter with a running position per digit:
// *running holds, for thread t's digit, the output position of the next
// element with that digit and is advanced.
template <typename K, typename V, bool kPairs>
__device__ __forceinline__ void scatter_tile(ScatterStorage<K, V, kPairs>& s, const K* keys_in, const V* vals_in,
                                             K* keys_out, V* vals_out, int valid, int bit, int nbits, int* running) {
  rank_and_scatter<K, V, kPairs>(s, keys_in, vals_in, keys_out, vals_out, valid, bit, nbits, [&](int count) {
    const int at = *running;
    *running += count;
    return at;
  });
}

// radix_downsweep: block b scatters its tiles, starting each digit at the
// digit's global start plus the counts of the blocks before b.
template <typename K, typename V, bool kPairs>
__device__ void radix_downsweep(const K* keys_in, K* keys_out, const V* vals_in, V* vals_out, int n, int tiles,
                                int bit, int nbits, const uint32_t* counts, const uint32_t* totals) {
  using Scan = cub::BlockScan<uint32_t, kSortBlock>;
  __shared__ typename Scan::TempStorage scan;
  __shared__ ScatterStorage<K, V, kPairs> s;
  uint32_t start;
  Scan(scan).ExclusiveSum(totals[threadIdx.x], start);
  int running = (int)(start + counts[threadIdx.x * gridDim.x + blockIdx.x]);
  int first, last;
  tile_range(blockIdx.x, gridDim.x, tiles, &first, &last);
  constexpr int kItems = SortTile<K>::kItems;
  for (int tile = first; tile < last; tile++) {
    const int64_t off = (int64_t)tile * kItems;
    const int valid = (int)min((int64_t)kItems, (int64_t)n - off);
    scatter_tile<K, V, kPairs>(s, keys_in + off, kPairs ? vals_in + off : nullptr, keys_out, vals_out, valid, bit,
                               nbits, &running);
  }
}

// ---------------------------------------------------------------------------
// Fused radix sort: every pass of an LSD radix sort in one launch, for inputs
// of up to kFusedMaxTiles tiles, where a launch per step (upsweep, scan,
// downsweep, per pass) would cost more than the work. The work is a sequence
// of items, taken in order from a counter by whichever block is free:
//
//   [0, T)              histogram of tile j, for every pass at once
//   then per pass p     tile j: wait until the pass's input is complete, rank
//                       the tile by digit p, find each digit's offset by
//                       decoupled look-back over tiles < j of pass p, scatter
//   [.., +T) if odd     copy tile j from the scratch back into keys
//
// Every wait is on items with smaller numbers, which were taken earlier by
// blocks that are running, so the waits always end (the same argument as the
// single-pass scan); they are bounded anyway and trap past a few seconds (a
// sticky error that ends the CUDA context for the whole process: see the
// package doc).
// Data written by other blocks of this launch is read with ld.global.cg.
//
// State (32-bit words, zero before the launch): [0] the item counter, [1]
// histogram items done, [2+p] tiles of pass p done, then hist[p][256] (global
// digit counts, added atomically), then look[p][j][256]: tile j's count of
// each digit in pass p, with the status in the top two bits (aggregate: the
// tile alone; inclusive: tiles 0..j). The host keeps two such states per
// stream and alternates: each launch zeroes the words the previous launch
// dirtied in the other one (clear, clear_words), so no launch waits on a
// memset.

constexpr int kFusedMaxTiles = 128;
constexpr int kFusedSmallIPT = 4;  // items per thread of the small-input fused sort
constexpr int kMaxPasses = 8;  // 64-bit keys, 8-bit digits
constexpr int kFusedHeader = 16;
constexpr uint32_t kLookAggregate = 1u << 30, kLookInclusive = 2u << 30, kLookCount = (1u << 30) - 1;
constexpr uint32_t kFusedSpins = 1u << 26;  // each a volatile load and a __nanosleep(32): seconds

template <typename K, typename V, bool kPairs, int IPT>
struct FusedStorage {
  union {
    HistStorage h;
    ScatterStorage<K, V, kPairs, IPT> s;
  } u;
  typename cub::BlockScan<uint32_t, kSortBlock>::TempStorage scan;
  int item;
};

__device__ __forceinline__ uint32_t load_volatile(const uint32_t* p) { return *(const volatile uint32_t*)p; }

// wait_count waits, in thread 0, until *counter >= target, then makes the
// writes that preceded the counted increments visible to the whole block.
// Every thread must call it.
__device__ __forceinline__ void wait_count(const uint32_t* counter, uint32_t target) {
  if (threadIdx.x == 0) {
    for (uint32_t spins = 0; load_volatile(counter) < target; spins++) {
      if (spins == kFusedSpins) __trap();
      __nanosleep(32);
    }
    __threadfence();
  }
  __syncthreads();
}

// signal_done makes the block's writes visible device-wide, then counts the
// item done. Every thread must call it.
__device__ __forceinline__ void signal_done(uint32_t* counter) {
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) atomicAdd(counter, 1u);
}

// fused_histogram counts the digits of tile j for every pass into hist.
template <typename K, typename V, bool kPairs, int IPT>
__device__ __forceinline__ void fused_histogram(FusedStorage<K, V, kPairs, IPT>& sh, const K* keys, int n, int j, int begin_bit,
                                                int end_bit, uint32_t* hist, uint32_t* done) {
  constexpr int kItems = kSortBlock * IPT;
  const int64_t off = (int64_t)j * kItems;
  const int valid = (int)min((int64_t)kItems, (int64_t)n - off);
  K k[IPT];
  LoadWarpStriped<IPT>(keys + off, valid, K(0), k);
  const int warp = threadIdx.x / kWarp;
  for (int bit = begin_bit, p = 0; bit < end_bit; bit += kRadixBits, p++) {
    const int nbits = min(kRadixBits, end_bit - bit);
    zero_histogram(sh.u.h);
    __syncthreads();
#pragma unroll
    for (int i = 0; i < IPT; i++) {
      count_digit(sh.u.h, warp, warp_striped_index(i, IPT) < valid ? digit(k[i], bit, nbits) : (uint32_t)kDigits);
    }
    __syncthreads();
    const int c = histogram_total(sh.u.h);
    if (c != 0) atomicAdd(&hist[p * kDigits + threadIdx.x], (uint32_t)c);
    __syncthreads();  // before the histogram is zeroed again
  }
  signal_done(done);
}

// fused_pass scatters tile j of pass p from src to dst.
template <typename K, typename V, bool kPairs, int IPT>
__device__ __forceinline__ void fused_pass(FusedStorage<K, V, kPairs, IPT>& sh, const K* src_k, const V* src_v, K* dst_k,
                                           V* dst_v, int n, int tiles, int j, int p, int bit, int nbits,
                                           const uint32_t* input_done, uint32_t* done, const uint32_t* hist,
                                           uint32_t* look) {
  constexpr int kItems = kSortBlock * IPT;
  wait_count(input_done, (uint32_t)tiles);
  const int64_t off = (int64_t)j * kItems;
  const int valid = (int)min((int64_t)kItems, (int64_t)n - off);
  const uint32_t total = __ldcg(&hist[p * kDigits + threadIdx.x]);
  uint32_t* pass_look = look + (int64_t)p * tiles * kDigits;
  rank_and_scatter<K, V, kPairs, true, IPT>(sh.u.s, src_k + off, kPairs ? src_v + off : nullptr, dst_k, dst_v, valid, bit,
                                       nbits, [&](int count) {
    const int d = threadIdx.x;
    uint32_t* mine = pass_look + (int64_t)j * kDigits + d;
    uint32_t before = 0;  // digit d's count in tiles [0, j)
    if (j == 0) {
      *(volatile uint32_t*)mine = kLookInclusive | (uint32_t)count;
    } else {
      *(volatile uint32_t*)mine = kLookAggregate | (uint32_t)count;
      for (int k = j - 1; k >= 0; k--) {
        const uint32_t* w = pass_look + (int64_t)k * kDigits + d;
        uint32_t v;
        for (uint32_t spins = 0; ((v = load_volatile(w)) & ~kLookCount) == 0; spins++) {
          if (spins == kFusedSpins) __trap();
          __nanosleep(32);
        }
        before += v & kLookCount;
        if ((v & ~kLookCount) == kLookInclusive) break;
      }
      *(volatile uint32_t*)mine = kLookInclusive | (before + (uint32_t)count);
    }
    uint32_t first;  // where digit d starts in the pass's output
    cub::BlockScan<uint32_t, kSortBlock>(sh.scan).ExclusiveSum(total, first);
    return (int)(first + before);
  });
  signal_done(done);
}

// radix_fused sorts keys[0, n) (and vals) on bits [begin_bit, end_bit) in
// one launch; alt_keys and alt_vals are scratch of n elements. Tiles hold
// kSortBlock * IPT elements: the default for most inputs, fewer
// (kFusedSmallIPT) for small ones, whose passes are otherwise a few blocks'
// latency with most SMs idle.
template <typename K, typename V, bool kPairs, int IPT = SortTile<K>::kIPT>
__device__ void radix_fused(K* keys, V* vals, K* alt_keys, V* alt_vals, int n, int tiles, int begin_bit, int end_bit,
                            uint32_t* state, uint32_t* clear, int clear_words) {
  __shared__ FusedStorage<K, V, kPairs, IPT> sh;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < clear_words; i += gridDim.x * blockDim.x) clear[i] = 0;
  constexpr int kItems = kSortBlock * IPT;
  const int passes = (end_bit - begin_bit + kRadixBits - 1) / kRadixBits;
  uint32_t* hist = state + kFusedHeader;
  uint32_t* look = hist + passes * kDigits;
  const int items = tiles * (1 + passes + (passes & 1));
  for (;;) {
    if (threadIdx.x == 0) sh.item = (int)atomicAdd(&state[0], 1u);
    __syncthreads();
    const int item = sh.item;
    __syncthreads();
    if (item >= items) break;
    const int phase = item / tiles, j = item % tiles;
    if (phase == 0) {
      fused_histogram(sh, keys, n, j, begin_bit, end_bit, hist, &state[1]);
    } else if (phase <= passes) {
      const int p = phase - 1, bit = begin_bit + p * kRadixBits;
      const bool even = (p & 1) == 0;  // even passes read keys, odd ones the scratch
      fused_pass(sh, even ? keys : alt_keys, even ? vals : alt_vals, even ? alt_keys : keys, even ? alt_vals : vals, n,
                 tiles, j, p, bit, min(kRadixBits, end_bit - bit), p == 0 ? &state[1] : &state[1 + p], &state[2 + p],
                 hist, look);
    } else {  // an odd number of passes left the result in the scratch
      wait_count(&state[1 + passes], (uint32_t)tiles);
      const int64_t off = (int64_t)j * kItems;
      const int valid = (int)min((int64_t)kItems, (int64_t)n - off);
      for (int i = threadIdx.x; i < valid; i += kSortBlock) {
        keys[off + i] = __ldcg(&alt_keys[off + i]);
        if constexpr (kPairs) vals[off + i] = __ldcg(&alt_vals[off + i]);
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Segmented sort. Segments are bounded by offsets (nullptr: one segment
// [0, n)). The warp kernel classifies every segment by length: it sorts those
// of up to kWarpSortMax elements itself and appends the others to one work
// list per size class — small (<= kSmallSortMax, one 128-thread block in
// shared memory), block (<= kBlockSortMax, one 256-thread block in shared
// memory) and large (one block each, LSD radix through scratch). The class
// kernels then take listed segments round-robin, so no block skips anything.

constexpr int kWarpSortMax = 32;
constexpr int kSmallSortMax = 128 * 8;
constexpr int kBlockSortMax = kSortBlock * 16;

enum SegClass { kSegSmall = 0, kSegBlock = 1, kSegLarge = 2, kSegClasses = 3 };

// SegLists is the scratch the classes are listed in: count[c] entries of
// list[c * segments ...]. The host zeroes count before the warp kernel.
struct SegLists {
  int* count;  // [kSegClasses]
  int* list;   // [kSegClasses * segments]
};

// segment_bounds returns segment s, clamped into [0, n] and non-negative in
// length so that bad offsets cannot cause out-of-bounds accesses.
__device__ __forceinline__ void segment_bounds(const uint32_t* offsets, int s, int n, int* lo, int* hi) {
  if (offsets == nullptr) {
    *lo = 0;
    *hi = n;
    return;
  }
  const uint32_t a = min(offsets[s], (uint32_t)n);
  const uint32_t b = min(max(offsets[s + 1], a), (uint32_t)n);
  *lo = (int)a;
  *hi = (int)b;
}

// sort_bits returns the bits the sort orders by, right-aligned.
template <typename K>
__device__ __forceinline__ K sort_bits(K k, int begin_bit, int end_bit) {
  const int w = end_bit - begin_bit;
  k >>= begin_bit;
  return w >= (int)(sizeof(K) * 8) ? k : (k & ((K(1) << w) - 1));
}

// segsort_warp: each warp classifies 32 segments at a time, lists the long
// ones and sorts each one of length <= 32 with a bitonic network over
// (sort bits, input index) — unique pairs, so the result is stable.
template <typename K, typename V, bool kPairs>
__device__ void segsort_warp(K* keys, V* vals, const uint32_t* offsets, int segments, int n, int begin_bit,
                             int end_bit, SegLists lists) {
  const int lane = threadIdx.x % kWarp;
  const int warps = gridDim.x * (blockDim.x / kWarp);
  const int gw = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  for (int64_t chunk = (int64_t)gw * kWarp; chunk < segments; chunk += (int64_t)warps * kWarp) {
    int lo = 0, hi = 0;
    const int seg = (int)(chunk + lane);
    if (seg < segments) segment_bounds(offsets, seg, n, &lo, &hi);
    const int len = hi - lo;
    if (len > kWarpSortMax && lists.count) {
      const int c = len <= kSmallSortMax ? kSegSmall : len <= kBlockSortMax ? kSegBlock : kSegLarge;
      lists.list[(int64_t)c * segments + atomicAdd(&lists.count[c], 1)] = seg;
    }
    unsigned mine = __ballot_sync(0xffffffffu, len > 1 && len <= kWarpSortMax);
    while (mine) {
      const int src = __ffs(mine) - 1;
      mine &= mine - 1;
      const int slo = __shfl_sync(0xffffffffu, lo, src), slen = __shfl_sync(0xffffffffu, len, src);
      K k = ~K(0);
      V v = V(0);
      if (lane < slen) {
        k = keys[slo + lane];
        if constexpr (kPairs) v = vals[slo + lane];
      }
      K sk = lane < slen ? sort_bits(k, begin_bit, end_bit) : ~K(0);
      int idx = lane;
#pragma unroll
      for (int size = 2; size <= kWarp; size <<= 1) {
#pragma unroll
        for (int stride = size / 2; stride > 0; stride >>= 1) {
          const K pk = __shfl_xor_sync(0xffffffffu, k, stride);
          const K psk = __shfl_xor_sync(0xffffffffu, sk, stride);
          const int pidx = __shfl_xor_sync(0xffffffffu, idx, stride);
          V pv = v;
          if constexpr (kPairs) pv = __shfl_xor_sync(0xffffffffu, v, stride);
          const bool partner_less = psk < sk || (psk == sk && pidx < idx);
          const bool ascending = (lane & size) == 0;
          const bool low = (lane & stride) == 0;
          // The low lane of an ascending pair keeps the smaller element.
          if (partner_less == (low == ascending)) {
            k = pk;
            sk = psk;
            idx = pidx;
            v = pv;
          }
        }
      }
      if (lane < slen) {
        keys[slo + lane] = k;
        if constexpr (kPairs) vals[slo + lane] = v;
      }
    }
  }
}

// for_each_listed calls f(lo, hi) for the listed segments of class c, block
// b taking entries b, b+gridDim.x, ...; with no lists (a single-segment sort)
// block 0 takes segment 0. f is called by every thread of the block.
template <typename F>
__device__ __forceinline__ void for_each_listed(SegLists lists, int c, const uint32_t* offsets, int segments, int n,
                                                F f) {
  const int count = lists.count ? lists.count[c] : 1;
  for (int i = blockIdx.x; i < count; i += gridDim.x) {
    const int seg = lists.count ? lists.list[(int64_t)c * segments + i] : 0;
    int lo, hi;
    segment_bounds(offsets, seg, n, &lo, &hi);
    f(lo, hi);
  }
}

// segsort_block sorts the listed segments of class c (length <= BLOCK*IPT) with
// cub::BlockRadixSort in shared memory (stable on blocked order; padding keys
// are all ones and sit at the end, after any equal valid key).
template <typename K, typename V, bool kPairs, int BLOCK, int IPT>
__device__ void segsort_block(K* keys, V* vals, const uint32_t* offsets, int segments, int n, int begin_bit,
                              int end_bit, SegLists lists, int c) {
  using Sort = cub::BlockRadixSort<K, BLOCK, IPT, typename std::conditional<kPairs, V, cub::NullType>::type>;
  __shared__ typename Sort::TempStorage tmp;
  for_each_listed(lists, c, offsets, segments, n, [&](int lo, int hi) {
    const int len = hi - lo;
    K k[IPT];
    typename std::conditional<kPairs, V, cub::NullType>::type v[IPT];
#pragma unroll
    for (int i = 0; i < IPT; i++) {
      const int p = threadIdx.x * IPT + i;
      k[i] = p < len ? keys[lo + p] : ~K(0);
      if constexpr (kPairs) v[i] = p < len ? vals[lo + p] : V(0);
    }
    if constexpr (kPairs) {
      Sort(tmp).SortBlockedToStriped(k, v, begin_bit, end_bit);
    } else {
      Sort(tmp).SortBlockedToStriped(k, begin_bit, end_bit);
    }
#pragma unroll
    for (int i = 0; i < IPT; i++) {
      const int p = i * BLOCK + threadIdx.x;
      if (p < len) {
        keys[lo + p] = k[i];
        if constexpr (kPairs) vals[lo + p] = v[i];
      }
    }
    __syncthreads();
  });
}

// segsort_large sorts each listed segment longer than kBlockSortMax with one block:
// per 8-bit digit a histogram pass, then tile-by-tile rank and scatter between
// the segment and the same range of the scratch arrays.
template <typename K, typename V, bool kPairs>
__device__ void segsort_large(K* keys, V* vals, K* alt_keys, V* alt_vals, const uint32_t* offsets, int segments,
                              int n, int begin_bit, int end_bit, SegLists lists) {
  using Scan = cub::BlockScan<int, kSortBlock>;
  __shared__ typename Scan::TempStorage scan;
  __shared__ union {  // the histogram phase and the scatter phase alternate
    HistStorage h;
    ScatterStorage<K, V, kPairs> s;
  } u;
  HistStorage& h = u.h;
  ScatterStorage<K, V, kPairs>& s = u.s;
  constexpr int kItems = SortTile<K>::kItems;
  for_each_listed(lists, kSegLarge, offsets, segments, n, [&](int lo, int hi) {
    const int len = hi - lo;
    K *src_k = keys + lo, *dst_k = alt_keys + lo;
    V *src_v = kPairs ? vals + lo : nullptr, *dst_v = kPairs ? alt_vals + lo : nullptr;
    for (int bit = begin_bit; bit < end_bit; bit += kRadixBits) {
      const int nbits = min(kRadixBits, end_bit - bit);
      zero_histogram(h);
      __syncthreads();
      accumulate_histogram(h, src_k, len, bit, nbits);
      __syncthreads();
      int running;
      Scan(scan).ExclusiveSum(histogram_total(h), running);
      __syncthreads();  // h is read; the scatter may reuse its memory
      for (int off = 0; off < len; off += kItems) {
        scatter_tile<K, V, kPairs>(s, src_k + off, kPairs ? src_v + off : nullptr, dst_k, dst_v, min(kItems, len - off),
                                   bit, nbits, &running);
      }
      K* tk = src_k; src_k = dst_k; dst_k = tk;
      V* tv = src_v; src_v = dst_v; dst_v = tv;
    }
    if (src_k != keys + lo) {  // an odd number of passes: copy back
      for (int p = threadIdx.x; p < len; p += kSortBlock) {
        keys[lo + p] = src_k[p];
        if constexpr (kPairs) vals[lo + p] = src_v[p];
      }
    }
    __syncthreads();
  });
}

}  // namespace prim
