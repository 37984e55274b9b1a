// merge_path.cuh: stable merge of two sorted runs by merge path (Green, McColl,
// Bader; the moderngpu formulation), under any strict weak order. prim's merge
// (masked integer keys) and kv/gpucompact's merge of entry ids (an order that
// reads the entries) are both this code with their own Less.
//
// A tile is kItems = BLOCK * IPT consecutive outputs: its block finds where the
// tile's two diagonals cross the merge path (one warp per diagonal, probing 32
// points per step), loads the tile's inputs into shared memory, and every
// thread merges IPT consecutive outputs.
//
// Less is a functor: less(x, y) says x goes strictly before y. On ties
// (neither before the other) a's element goes first, so the merge is stable.
#pragma once
#include <stdint.h>

namespace wk {
namespace mergepath {

constexpr int kWarp = 32;

// path returns how many of the first diag outputs come from a: the smallest i
// in [max(0, diag-nb), min(diag, na)] with b[diag-1-i] < a[i], so that on ties
// a's elements come first.
template <typename K, typename Less>
__device__ __forceinline__ int path(const K* a, int na, const K* b, int nb, int diag, const Less& less) {
  int lo = max(0, diag - nb), hi = min(diag, na);
  while (lo < hi) {
    const int mid = (lo + hi) >> 1;
    if (!less(b[diag - 1 - mid], a[mid])) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// warp_path is path computed by one warp (all 32 lanes call it): each step
// probes 32 evenly spaced points of the remaining range [lo, hi) and keeps the
// stretch between the last probe that lies below the path and the first that
// does not, so a range of m shrinks to m/33 per step (a few steps, each one
// round of loads, instead of log2 m dependent loads). Every probe lies in
// [lo, hi), inside both runs, whether or not they are sorted, and the result
// is a deterministic function of the inputs: two blocks that search the same
// diagonal agree.
template <typename K, typename Less>
__device__ __forceinline__ int warp_path(const K* a, int na, const K* b, int nb, int diag, const Less& less) {
  constexpr int kProbes = kWarp;
  const int lane = threadIdx.x % kWarp;
  int lo = max(0, diag - nb), hi = min(diag, na);
  while (lo < hi) {  // lo and hi are equal in all lanes
    const int m = hi - lo;
    const bool exact = m <= kProbes;  // probe every position
    const int x = exact ? lo + lane : lo + (int)((int64_t)(lane + 1) * m / (kProbes + 1));
    const bool below = (!exact || lane < m) && !less(b[diag - 1 - x], a[x]);
    const int c = __popc(__ballot_sync(0xffffffffu, below));  // probes below the path
    if (exact) {
      lo += c;
      hi = lo;
    } else {
      const int nlo = c > 0 ? lo + (int)((int64_t)c * m / (kProbes + 1)) + 1 : lo;  // past probe c-1
      const int nhi = c < kProbes ? lo + (int)((int64_t)(c + 1) * m / (kProbes + 1)) : hi;  // probe c
      lo = nlo;
      hi = nhi;
    }
  }
  return lo;
}

// tile merges outputs [tile*kItems, ...) of merging a and b into out (and,
// with kPairs, the values av/bv into outv), kItems = BLOCK * IPT. Every
// thread of the block calls it. Odd IPT keep the blocked shared-memory
// accesses conflict-free.
template <typename K, typename V, bool kPairs, int BLOCK, int IPT, typename Less>
__device__ void tile(const K* a, const V* av, int na, const K* b, const V* bv, int nb, int64_t tile, const Less& less,
                     K* out, V* outv) {
  constexpr int kItems = BLOCK * IPT;
  __shared__ K keys[kItems];
  __shared__ int src[kItems];
  __shared__ int split[2];
  const int64_t d0 = tile * kItems;
  const int64_t d1 = min(d0 + kItems, (int64_t)na + nb);
  const int warp = threadIdx.x / kWarp;
  if (warp < 2) {  // warp 0 finds where the tile starts in a, warp 1 where it ends
    const int r = warp_path(a, na, b, nb, (int)(warp == 0 ? d0 : d1), less);
    if (threadIdx.x % kWarp == 0) split[warp] = r;
  }
  __syncthreads();
  // Clamp so that unsorted input (non-monotone splits) cannot index out of
  // bounds; for sorted input these are the exact ranges.
  const int a0 = split[0];
  const int a1 = max(a0, split[1]);
  const int b0 = (int)(d0 - a0);
  const int la = min(a1 - a0, (int)(d1 - d0));
  const int lb = min((int)(d1 - d0) - la, nb - b0);
  const int len = la + lb;
  for (int i = threadIdx.x; i < len; i += BLOCK) keys[i] = i < la ? a[a0 + i] : b[b0 + i - la];
  __syncthreads();
  // This thread's outputs [diag, diag+IPT) of the tile.
  const int diag = min(threadIdx.x * IPT, len);
  const K* sa = keys;
  const K* sb = keys + la;
  int i = path(sa, la, sb, lb, diag, less);
  int j = diag - i;
  K k[IPT];
  int from[IPT];
#pragma unroll
  for (int u = 0; u < IPT; u++) {
    const bool a_ok = i < la, b_ok = j < lb;
    const K ka = a_ok ? sa[i] : K(0), kb = b_ok ? sb[j] : K(0);
    const bool take_a = a_ok && (!b_ok || !less(kb, ka));
    k[u] = take_a ? ka : kb;
    from[u] = take_a ? i : la + j;  // index into the tile's input
    if (take_a) {
      i++;
    } else {
      j++;
    }
  }
  __syncthreads();
#pragma unroll
  for (int u = 0; u < IPT; u++) {
    const int o = threadIdx.x * IPT + u;
    if (o < len) {
      keys[o] = k[u];
      src[o] = from[u];
    }
  }
  __syncthreads();
  for (int o = threadIdx.x; o < len; o += BLOCK) {
    out[d0 + o] = keys[o];
    if constexpr (kPairs) {
      const int f = src[o];
      outv[d0 + o] = f < la ? av[a0 + f] : bv[b0 + f - la];
    }
  }
}

}  // namespace mergepath
}  // namespace wk
