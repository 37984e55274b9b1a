// prim.cu: the kernels of package prim, instantiated for every key/value
// width with unmangled names (see kernels.go for the naming scheme). The
// algorithms live in the headers; this file only fixes types and launch
// shapes.
#include "common.cuh"
#include "merge.cuh"
#include "scan.cuh"
#include "sort.cuh"

using u32 = uint32_t;
using u64 = uint64_t;

// ----- radix sort -----------------------------------------------------------

#define RADIX_UPSWEEP(KN, K)                                                                                       \
  extern "C" __global__ void __launch_bounds__(prim::kSortBlock)                                                 \
      radix_upsweep_##KN(const K* keys, int n, int tiles, int bit, int nbits, u32* counts) {                      \
    prim::radix_upsweep<K>(keys, n, tiles, bit, nbits, counts);                                                   \
  }
RADIX_UPSWEEP(k32, u32)
RADIX_UPSWEEP(k64, u64)

extern "C" __global__ void __launch_bounds__(prim::kSortBlock) radix_scan_rows(u32* counts, int g, u32* totals) {
  prim::radix_scan_rows(counts, g, totals);
}

#define RADIX_DOWNSWEEP(NAME, K, V, PAIRS)                                                                        \
  extern "C" __global__ void __launch_bounds__(prim::kSortBlock, 2)                                              \
      radix_downsweep_##NAME(const K* keys_in, K* keys_out, const V* vals_in, V* vals_out, int n, int tiles,      \
                             int bit, int nbits, const u32* counts, const u32* totals) {                          \
    prim::radix_downsweep<K, V, PAIRS>(keys_in, keys_out, vals_in, vals_out, n, tiles, bit, nbits, counts, totals); \
  }

// One block per SM suffices (at most kFusedMaxTiles blocks run): no register cap.
#define RADIX_FUSED(NAME, K, V, PAIRS)                                                                            \
  extern "C" __global__ void __launch_bounds__(prim::kSortBlock, 1)                                              \
      radix_fused_##NAME(K* keys, V* vals, K* alt_keys, V* alt_vals, int n, int tiles, int begin_bit, int end_bit, \
                         u32* state, u32* clear, int clear_words) {                                              \
    prim::radix_fused<K, V, PAIRS>(keys, vals, alt_keys, alt_vals, n, tiles, begin_bit, end_bit, state, clear,      \
                                   clear_words);                                                                 \
  }                                                                                                              \
  extern "C" __global__ void __launch_bounds__(prim::kSortBlock, 1)                                              \
      radix_fused_small_##NAME(K* keys, V* vals, K* alt_keys, V* alt_vals, int n, int tiles, int begin_bit,       \
                               int end_bit, u32* state, u32* clear, int clear_words) {                           \
    prim::radix_fused<K, V, PAIRS, prim::kFusedSmallIPT>(keys, vals, alt_keys, alt_vals, n, tiles, begin_bit,     \
                                                         end_bit, state, clear, clear_words);                    \
  }

// ----- segmented sort -------------------------------------------------------

#define SEGSORT(NAME, K, V, PAIRS)                                                                                 \
  extern "C" __global__ void __launch_bounds__(prim::kSortBlock)                                                 \
      segsort_warp_##NAME(K* keys, V* vals, const u32* offsets, int segments, int n, int begin_bit, int end_bit,  \
                          int* list_count, int* list) {                                                          \
    prim::segsort_warp<K, V, PAIRS>(keys, vals, offsets, segments, n, begin_bit, end_bit, {list_count, list});    \
  }                                                                                                              \
  extern "C" __global__ void __launch_bounds__(128)                                                              \
      segsort_small_##NAME(K* keys, V* vals, const u32* offsets, int segments, int n, int begin_bit, int end_bit, \
                           int* list_count, int* list) {                                                         \
    prim::segsort_block<K, V, PAIRS, 128, 8>(keys, vals, offsets, segments, n, begin_bit, end_bit,                \
                                             {list_count, list}, prim::kSegSmall);                               \
  }                                                                                                              \
  extern "C" __global__ void __launch_bounds__(prim::kSortBlock, 2)                                              \
      segsort_block_##NAME(K* keys, V* vals, const u32* offsets, int segments, int n, int begin_bit, int end_bit, \
                           int* list_count, int* list) {                                                         \
    prim::segsort_block<K, V, PAIRS, prim::kSortBlock, 16>(keys, vals, offsets, segments, n, begin_bit, end_bit,  \
                                                           {list_count, list}, prim::kSegBlock);                 \
  }                                                                                                              \
  extern "C" __global__ void __launch_bounds__(prim::kSortBlock, 2)                                              \
      segsort_large_##NAME(K* keys, V* vals, K* alt_keys, V* alt_vals, const u32* offsets, int segments, int n,   \
                           int begin_bit, int end_bit, int* list_count, int* list) {                             \
    prim::segsort_large<K, V, PAIRS>(keys, vals, alt_keys, alt_vals, offsets, segments, n, begin_bit, end_bit,    \
                                     {list_count, list});                                                        \
  }

// ----- merge ----------------------------------------------------------------

#define MERGE(NAME, K, V, PAIRS)                                                                                   \
  extern "C" __global__ void __launch_bounds__(prim::kMergeBlock)                                                \
      merge_##NAME(const K* a, const V* av, int na, const K* b, const V* bv, int nb, K mask, K* out, V* outv) {  \
    prim::merge_tile<K, V, PAIRS>(a, av, na, b, bv, nb, mask, out, outv);                                         \
  }

// ----- scan, select, multisplit --------------------------------------------

extern "C" __global__ void __launch_bounds__(prim::kScanBlock)
    scan_32(const u32* in, u32* out, int n, int tiles, int* counter, unsigned long long* words, u32* total) {
  prim::scan_single<u32>(in, out, n, tiles, {counter, {words}}, total);
}

extern "C" __global__ void __launch_bounds__(prim::kScanBlock)
    scan_64(const u64* in, u64* out, int n, int tiles, int* counter, u32* status, u64* aggregate, u64* inclusive,
            u64* total) {
  prim::scan_single<u64>(in, out, n, tiles, {counter, {status, aggregate, inclusive}}, total);
}

extern "C" __global__ void __launch_bounds__(prim::kScanBlock) count_spine(u32* partials, int g, u32* total) {
  prim::scan_spine<u32>(partials, g, total);
}

extern "C" __global__ void __launch_bounds__(prim::kScanBlock)
    count_flags(const uint8_t* flags, int n, int tiles, int zeros, u32* partials) {
  prim::count_flags(flags, n, tiles, zeros != 0, partials);
}

#define SELECT(NAME, K, V, PAIRS)                                                                                  \
  extern "C" __global__ void __launch_bounds__(prim::kScanBlock)                                                 \
      select_##NAME(const K* keys, const V* vals, const uint8_t* flags, int n, int tiles, const u32* partials,    \
                    int split, K* out_keys, V* out_vals, int cap) {                                              \
    prim::select_downsweep<K, V, PAIRS>(keys, vals, flags, n, tiles, partials, split != 0, out_keys, out_vals,    \
                                        cap);                                                                    \
  }

// Every (key, value) combination: value "v0" means keys only.
#define FOR_EACH_KV(X)          \
  X(k32_v0, u32, u32, false)    \
  X(k64_v0, u64, u32, false)    \
  X(k32_v32, u32, u32, true)    \
  X(k32_v64, u32, u64, true)    \
  X(k64_v32, u64, u32, true)    \
  X(k64_v64, u64, u64, true)

FOR_EACH_KV(RADIX_DOWNSWEEP)
FOR_EACH_KV(RADIX_FUSED)
FOR_EACH_KV(SEGSORT)
FOR_EACH_KV(MERGE)
FOR_EACH_KV(SELECT)
