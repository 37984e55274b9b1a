// merge.cuh: prim's stable merge of two sorted runs of integer keys under a
// mask, in one launch: the merge path of internal/devcode/merge_path.cuh with
// the masked order.
#pragma once
#include "common.cuh"
#include "merge_path.cuh"

namespace prim {

constexpr int kMergeBlock = 256;

// Odd items per thread keep the blocked shared-memory accesses conflict-free.
template <typename K>
struct MergeTile {
  static constexpr int kIPT = sizeof(K) == 4 ? 11 : 7;
  static constexpr int kItems = kMergeBlock * kIPT;
};

// MaskLess orders keys by their masked bits.
template <typename K>
struct MaskLess {
  K mask;
  __device__ __forceinline__ bool operator()(K x, K y) const { return (x & mask) < (y & mask); }
};

// merge_tile: block p merges the outputs [p*kItems, ...) of its tile.
template <typename K, typename V, bool kPairs>
__device__ void merge_tile(const K* a, const V* av, int na, const K* b, const V* bv, int nb, K mask, K* out, V* outv) {
  wk::mergepath::tile<K, V, kPairs, kMergeBlock, MergeTile<K>::kIPT>(a, av, na, b, bv, nb, (int64_t)blockIdx.x,
                                                                      MaskLess<K>{mask}, out, outv);
}

}  // namespace prim
