// lsm.cu: the GPU LSM's own kernels. Sorting and merging are prim's; these
// kernels prepare batches, answer lookups and successor/predecessor queries,
// run stages 1, 3 and 5 of the count/range validation, and clean up.
//
// Layout. Level i (full when bit i of r is set) holds b<<i entries in its own
// key and tag arrays, whose addresses are tab[i] and tab[kMaxLevels + i] of the
// level table. The staging run holds s entries (any number; the host keeps it
// below b between calls) at sk and st, passed as kernel arguments because they
// change with every update; it is newer than every level. Within a run, entries
// are sorted by key and, within a key, newest first; levels with a smaller index
// are newer. Tags are described in lsm_sorted.cuh: tombstone bit plus
// value-log slot.
#include <stdint.h>
#include "lsm_sorted.cuh"
#include "warp.cuh"

using namespace wk::sorted;

namespace {

constexpr int kMaxLevels = 32;
constexpr int kItems = 4;  // elements per thread in the tiled stages

// kStage numbers the staging run among the levels (candidate positions pack
// it like a level number); kMaxRuns bounds the runs a query sees.
constexpr int kStage = kMaxLevels;
constexpr int kMaxRuns = kMaxLevels + 1;

// Runs is the structure as the query kernels see it: the level table with b
// and r, and the staging run. first and next enumerate the non-empty runs
// newest first (the staging run, then the full levels from level 0 up); -1
// ends the enumeration.
template <typename K>
struct Runs {
  const uint64_t* tab;
  uint64_t b, r;
  const K* sk;
  const uint32_t* st;
  uint64_t s;

  __device__ __forceinline__ const K* keys(int lv) const { return lv == kStage ? sk : reinterpret_cast<const K*>(tab[lv]); }
  __device__ __forceinline__ const uint32_t* tags(int lv) const {
    return lv == kStage ? st : reinterpret_cast<const uint32_t*>(tab[kMaxLevels + lv]);
  }
  __device__ __forceinline__ uint64_t len(int lv) const { return lv == kStage ? s : b << lv; }
  __device__ __forceinline__ int first() const { return s != 0 ? kStage : lowest(r); }
  __device__ __forceinline__ int next(int lv) const {
    return lv == kStage ? lowest(r) : (lv >= 63 ? -1 : lowest((r >> (lv + 1)) << (lv + 1)));
  }
  static __device__ __forceinline__ int lowest(uint64_t x) { return x == 0 ? -1 : __ffsll((long long)x) - 1; }
};

// level_keys and level_tags address level lv through the table alone (cleanup
// writes the levels).
template <typename K>
__device__ __forceinline__ K* level_keys(const uint64_t* tab, int lv) {
  return reinterpret_cast<K*>(tab[lv]);
}
__device__ __forceinline__ uint32_t* level_tags(const uint64_t* tab, int lv) {
  return reinterpret_cast<uint32_t*>(tab[kMaxLevels + lv]);
}

// A candidate position packs the level into bits 40..47 above the position
// within the level (levels hold fewer than 2^40 entries).
constexpr int kPosBits = 40;
constexpr uint64_t kPosMask = (1ull << kPosBits) - 1;

// lookup: per query, the newest run holding the key decides (first entry of
// its segment: a tombstone means deleted).
template <typename K, typename V>
__device__ void lookup(const Runs<K> R, const V* __restrict__ log, const K* __restrict__ q, uint64_t nq, V* __restrict__ out, uint8_t* __restrict__ found) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < nq; i += (uint64_t)gridDim.x * blockDim.x) {
    K k = q[i];
    V v = 0;
    uint8_t f = 0;
    for (int lv = R.first(); lv >= 0; lv = R.next(lv)) {
      const K* keys = R.keys(lv);
      uint64_t end = R.len(lv);
      uint64_t p = lower_bound(keys, 0, end, k);
      if (p < end && keys[p] == k) {
        uint32_t t = R.tags(lv)[p];
        if (!is_tomb(t)) {
          v = log[slot_of(t)];
          f = 1;
        }
        break;
      }
    }
    out[i] = v;
    found[i] = f;
  }
}

// bounds (stage 1): for query q and the j-th run, the candidates are
// positions [start, start+cnt) of that run: lower_bound(lo)..lower_bound(hi)
// (ranges are half-open);
// start packs the run's level number (kStage for the staging run) above the
// position (kPosBits).
// cnt and start are laid out query-major (q*nlev + j); total accumulates the
// sum over all queries (64-bit, so the host can split an oversized chunk).
template <typename K>
__device__ void bounds(const Runs<K> R, uint32_t nlev, const K* __restrict__ lo,
                       const K* __restrict__ hi, uint64_t nq, uint32_t* __restrict__ cnt, uint64_t* __restrict__ start,
                       unsigned long long* total) {
  uint64_t q = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
  uint64_t sum = 0;
  if (q < nq) {
    K k1 = lo[q], k2 = hi[q];
    uint32_t j = 0;
    for (int lv = R.first(); lv >= 0; lv = R.next(lv)) {
      const K* keys = R.keys(lv);
      uint64_t end = R.len(lv), l = 0, u = 0;
      if (k1 < k2) {  // [k1, k2): k2 > k1 >= 0, so k2 - 1 does not wrap
        l = lower_bound(keys, 0, end, k1);
        u = gallop_upper(keys, l, end, (K)(k2 - 1));
      }
      cnt[q * nlev + j] = (uint32_t)(u - l);
      start[q * nlev + j] = ((uint64_t)lv << kPosBits) | l;
      sum += u - l;
      j++;
    }
  }
  for (int d = 16; d > 0; d >>= 1) sum += __shfl_down_sync(wk::kFullMask, (unsigned long long)sum, d);
  if (wk::lane_id() == 0 && sum != 0) atomicAdd(total, (unsigned long long)sum);
}

// gather_candidates (stage 3): candidate e belongs to segment s (query q,
// level j) with off[s] <= e < off[s+1]; it is entry start[s] + e - off[s].
template <typename K>
__device__ void gather_candidates(const Runs<K> R, const uint32_t* __restrict__ off,
                                  const uint64_t* __restrict__ start, uint64_t nseg, uint64_t total, K* __restrict__ ck,
                                  uint32_t* __restrict__ ct) {
  uint64_t tile = (uint64_t)blockDim.x * kItems, first = blockIdx.x * tile;
  if (first >= total) return;  // uniform over the block
  uint64_t slo, shi;
  block_segments(off, nseg, first, min(first + tile, total) - 1, &slo, &shi);
  for (int it = 0; it < kItems; it++) {
    uint64_t e = first + (uint64_t)it * blockDim.x + threadIdx.x;
    if (e >= total) break;
    uint64_t s = segment_of(off, slo, shi, e);
    uint64_t st = start[s];
    int lv = (int)(st >> kPosBits);
    uint64_t src = (st & kPosMask) + (e - off[s]);
    ck[e] = R.keys(lv)[src];
    ct[e] = R.tags(lv)[src];
  }
}

// validate (stage 5): after the segmented sort each query's candidates are
// sorted by key, newest first within a key; the first entry of each key decides
// and counts unless it is a tombstone. Threads of a warp that validate entries
// of the same query add their counts with one atomic.
template <typename K>
__device__ void validate(const K* __restrict__ ck, const uint32_t* __restrict__ ct, const uint32_t* __restrict__ segoff,
                         uint64_t nq, uint64_t total, uint32_t* __restrict__ counts, uint8_t* __restrict__ flags) {
  uint64_t tile = (uint64_t)blockDim.x * kItems, first = blockIdx.x * tile;
  if (first >= total) return;  // uniform over the block
  uint64_t slo, shi;
  block_segments(segoff, nq, first, min(first + tile, total) - 1, &slo, &shi);
  for (int it = 0; it < kItems; it++) {
    uint64_t e = first + (uint64_t)it * blockDim.x + threadIdx.x;
    bool valid = false;
    uint32_t q = 0xffffffffu;
    if (e < total) {
      q = (uint32_t)segment_of(segoff, slo, shi, e);
      bool head = e == segoff[q] || ck[e] != ck[e - 1];
      valid = head && !is_tomb(ct[e]);
      if (flags != nullptr) flags[e] = valid ? 1 : 0;
    }
    unsigned group = __match_any_sync(wk::kFullMask, valid ? q : 0xffffffffu);
    if (valid && (int)wk::lane_id() == __ffs(group) - 1) atomicAdd(&counts[q], (uint32_t)__popc(group));
  }
}

// cleanup_mark flags the live entries of all levels merged newest first: the
// first entry of each key, unless it is a tombstone.
template <typename K>
__device__ void cleanup_mark(const K* __restrict__ keys, const uint32_t* __restrict__ tags, uint64_t n, uint8_t* __restrict__ flags) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
    bool head = i == 0 || keys[i] != keys[i - 1];
    flags[i] = (head && !is_tomb(tags[i])) ? 1 : 0;
  }
}

// cleanup_scatter lays out the m live entries (sorted, distinct keys): the
// first rem = m mod b in the staging run (sk, st), the rest over the full
// levels of r2 = m / b, smaller keys in smaller levels; and rewrites the value
// log so that entry j's value is at slot j.
template <typename K, typename V>
__device__ void cleanup_scatter(const K* __restrict__ ck, const uint32_t* __restrict__ ct, uint64_t m, const V* __restrict__ log,
                                V* __restrict__ newlog, uint64_t b, uint64_t r2, const uint64_t* __restrict__ tab, K* __restrict__ sk,
                                uint32_t* __restrict__ st, uint64_t rem) {
  for (uint64_t j = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; j < m; j += (uint64_t)gridDim.x * blockDim.x) {
    newlog[j] = log[slot_of(ct[j])];
    if (j < rem) {
      sk[j] = ck[j];
      st[j] = (uint32_t)j;
      continue;
    }
    uint64_t start = rem, pos = 0;
    int dl = 0;
    for (int lv = 0; lv < kMaxLevels; lv++) {
      if (((r2 >> lv) & 1) == 0) continue;
      uint64_t size = b << lv;
      if (j < start + size) {
        dl = lv;
        pos = j - start;
        break;
      }
      start += size;
    }
    level_keys<K>(tab, dl)[pos] = ck[j];
    level_tags(tab, dl)[pos] = (uint32_t)j;
  }
}

// Cursors walk the ranges [pos[j], end[j]) of the runs in key order, as
// a k-way merge: next() returns the smallest key under any cursor and the tag
// that decides it (the first entry of its segment in the newest level that
// holds it), and moves every cursor on that key past its segment. Each call
// moves at least one cursor, so a walk ends after at most (entries) calls.
template <typename K>
struct Cursors {
  uint64_t pos[kMaxRuns], end[kMaxRuns];
  K key[kMaxRuns];  // the key at pos, when pos < end
  int lvl[kMaxRuns];
  int nl = 0;

  __device__ void add(const Runs<K>& R, int lv, uint64_t p, uint64_t e) {
    lvl[nl] = lv;
    pos[nl] = p;
    end[nl] = e;
    if (p < e) key[nl] = R.keys(lv)[p];
    nl++;
  }

  // candidates returns the number of entries still under the cursors.
  __device__ uint64_t candidates() const {
    uint64_t c = 0;
    for (int j = 0; j < nl; j++) c += end[j] - pos[j];
    return c;
  }

  __device__ bool next(const Runs<K>& R, K* out, uint32_t* tag) {
    bool any = false;
    K c = 0;
    for (int j = 0; j < nl; j++) {
      if (pos[j] < end[j]) {
        if (!any || key[j] < c) c = key[j];
        any = true;
      }
    }
    if (!any) return false;
    bool decided = false;
    for (int j = 0; j < nl; j++) {
      if (pos[j] < end[j] && key[j] == c) {
        const K* keys = R.keys(lvl[j]);
        if (!decided) *tag = R.tags(lvl[j])[pos[j]];
        decided = true;
        pos[j] = gallop_past(keys, pos[j], end[j], c);
        if (pos[j] < end[j]) key[j] = keys[pos[j]];
      }
    }
    *out = c;
    return true;
  }
};

// successor: the smallest live key > k: cursors from the first key > k in
// each level; the first key whose deciding entry is not a tombstone. Its cost
// grows with the number of distinct dead keys skipped.
template <typename K, typename V>
__device__ void successor(const Runs<K> R, const V* __restrict__ log, const K* __restrict__ q, uint64_t nq, K* __restrict__ out_keys, V* __restrict__ out_vals,
                          uint8_t* __restrict__ found) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < nq; i += (uint64_t)gridDim.x * blockDim.x) {
    K k = q[i], rk = 0, c;
    V rv = 0;
    uint8_t f = 0;
    if (k != max_key<K>()) {
      Cursors<K> cur;
      for (int lv = R.first(); lv >= 0; lv = R.next(lv)) cur.add(R, lv, upper_bound(R.keys(lv), 0, R.len(lv), k), R.len(lv));
      uint32_t t;
      while (cur.next(R, &c, &t)) {
        if (!is_tomb(t)) {
          rk = c;
          rv = log[slot_of(t)];
          f = 1;
          break;
        }
      }
    }
    out_keys[i] = rk;
    out_vals[i] = rv;
    found[i] = f;
  }
}

// range_cursors sets cur to the candidates of [k1, k2) in every run.
template <typename K>
__device__ void range_cursors(const Runs<K>& R, K k1, K k2, Cursors<K>* cur) {
  for (int lv = R.first(); lv >= 0; lv = R.next(lv)) {
    const K* keys = R.keys(lv);
    uint64_t end = R.len(lv), l = 0, u = 0;
    if (k1 < k2) {  // [k1, k2)
      l = lower_bound(keys, 0, end, k1);
      u = gallop_upper(keys, l, end, (K)(k2 - 1));
    }
    cur->add(R, lv, l, u);
  }
}

// walk_count: count queries for short ranges in one pass, without the gather
// and segmented sort of the five-stage pipeline: per query, the per-level
// bounds (stage 1) and then a k-way merge of the per-level runs that validates
// each key by its newest entry (stage 5). A query with more than cap
// candidates is not walked: it is counted in overflow and the host runs the
// pipeline for its chunk. total accumulates the live keys found (for range).
template <typename K>
__device__ void walk_count(const Runs<K> R, const K* __restrict__ lo,
                           const K* __restrict__ hi, uint64_t nq, uint64_t cap, uint32_t* __restrict__ counts,
                           unsigned int* overflow, unsigned long long* total) {
  uint64_t q = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
  uint32_t n = 0;
  if (q < nq) {
    Cursors<K> cur;
    range_cursors(R, lo[q], hi[q], &cur);
    if (cur.candidates() > cap) {
      atomicAdd(overflow, 1u);
    } else {
      K c;
      uint32_t t;
      while (cur.next(R, &c, &t)) n += is_tomb(t) ? 0 : 1;
    }
    counts[q] = n;
  }
  unsigned long long sum = n;
  for (int d = 16; d > 0; d >>= 1) sum += __shfl_down_sync(wk::kFullMask, sum, d);
  if (wk::lane_id() == 0 && sum != 0) atomicAdd(total, sum);
}

// walk_range writes each query's live pairs, in key order, at off[q] (the
// exclusive scan of walk_count's counts).
template <typename K, typename V>
__device__ void walk_range(const Runs<K> R, const V* __restrict__ log, const K* __restrict__ lo, const K* __restrict__ hi, uint64_t nq, const uint32_t* __restrict__ off,
                           K* __restrict__ out_keys, V* __restrict__ out_vals) {
  for (uint64_t q = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; q < nq; q += (uint64_t)gridDim.x * blockDim.x) {
    Cursors<K> cur;
    range_cursors(R, lo[q], hi[q], &cur);
    uint64_t o = off[q];
    K c;
    uint32_t t;
    while (cur.next(R, &c, &t)) {
      if (is_tomb(t)) continue;
      out_keys[o] = c;
      out_vals[o] = log[slot_of(t)];
      o++;
    }
  }
}

// predecessor: the largest live key < k, by the mirror image of successor:
// cursors sit one past the tail of a segment and step back to its head.
template <typename K, typename V>
__device__ void predecessor(const Runs<K> R, const V* __restrict__ log, const K* __restrict__ q, uint64_t nq, K* __restrict__ out_keys, V* __restrict__ out_vals,
                            uint8_t* __restrict__ found) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < nq; i += (uint64_t)gridDim.x * blockDim.x) {
    K k = q[i], rk = 0;
    V rv = 0;
    uint8_t f = 0;
    if (k != 0) {
      uint64_t pos[kMaxRuns];
      int lvl[kMaxRuns];
      int nl = 0;
      for (int lv = R.first(); lv >= 0; lv = R.next(lv)) {
        lvl[nl] = lv;
        pos[nl] = lower_bound(R.keys(lv), 0, R.len(lv), k);
        nl++;
      }
      for (;;) {
        bool any = false;
        K c = 0;
        for (int j = 0; j < nl; j++) {
          if (pos[j] > 0) {
            K kk = R.keys(lvl[j])[pos[j] - 1];
            if (!any || kk > c) c = kk;
            any = true;
          }
        }
        if (!any) break;
        uint32_t t = 0;
        bool decided = false;
        for (int j = 0; j < nl; j++) {
          const K* keys = R.keys(lvl[j]);
          if (pos[j] > 0 && keys[pos[j] - 1] == c) {
            uint64_t h = gallop_head(keys, 0, pos[j] - 1, c);
            if (!decided) t = R.tags(lvl[j])[h];
            decided = true;
            pos[j] = h;
          }
        }
        if (!is_tomb(t)) {
          rk = c;
          rv = log[slot_of(t)];
          f = 1;
          break;
        }
      }
    }
    out_keys[i] = rk;
    out_vals[i] = rv;
    found[i] = f;
  }
}

}  // namespace

// query_offsets turns the scanned per-(query, level) offsets into per-query
// segment offsets for the segmented sort: segoff[q] = off[q*nlev], segoff[nq] = total.
extern "C" __global__ void query_offsets(const uint32_t* off, uint32_t nlev, uint64_t nq, uint32_t total, uint32_t* segoff) {
  for (uint64_t q = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; q <= nq; q += (uint64_t)gridDim.x * blockDim.x)
    segoff[q] = q < nq ? off[q * nlev] : total;
}

#define LSM_KEY_KERNELS(K, SUF)                                                                                               \
  LSM_SORTED_BATCH_KERNELS(K, SUF)                                                                                            \
  extern "C" __global__ void bounds_##SUF(const uint64_t* tab, uint64_t b, uint64_t r, const K* sk, const uint32_t* st,     \
                                          uint64_t s, uint32_t nlev, const K* lo, const K* hi, uint64_t nq, uint32_t* cnt,   \
                                          uint64_t* start, unsigned long long* total) {                                      \
    bounds<K>(Runs<K>{tab, b, r, sk, st, s}, nlev, lo, hi, nq, cnt, start, total);                                         \
  }                                                                                                                           \
  extern "C" __global__ void gather_candidates_##SUF(const uint64_t* tab, const K* sk, const uint32_t* st, const uint32_t* off, \
                                                     const uint64_t* start, uint64_t nseg, uint64_t total, K* ck,         \
                                                     uint32_t* ct) {                                                        \
    gather_candidates<K>(Runs<K>{tab, 0, 0, sk, st, 0}, off, start, nseg, total, ck, ct);                                  \
  }                                                                                                                           \
  extern "C" __global__ void validate_##SUF(const K* ck, const uint32_t* ct, const uint32_t* segoff, uint64_t nq,           \
                                            uint64_t total, uint32_t* counts, uint8_t* flags) {                             \
    validate<K>(ck, ct, segoff, nq, total, counts, flags);                                                                  \
  }                                                                                                                           \
  extern "C" __global__ void cleanup_mark_##SUF(const K* keys, const uint32_t* tags, uint64_t n, uint8_t* flags) {          \
    cleanup_mark<K>(keys, tags, n, flags);                                                                                  \
  }                                                                                                                           \
  extern "C" __global__ void walk_count_##SUF(const uint64_t* tab, uint64_t b, uint64_t r, const K* sk, const uint32_t* st, \
                                              uint64_t s, const K* lo, const K* hi, uint64_t nq, uint64_t cap,             \
                                              uint32_t* counts, unsigned int* overflow, unsigned long long* total) {       \
    walk_count<K>(Runs<K>{tab, b, r, sk, st, s}, lo, hi, nq, cap, counts, overflow, total);                                \
  }

#define LSM_PAIR_KERNELS(K, V, SUF)                                                                                           \
  LSM_SORTED_PAIR_KERNELS(K, V, SUF)                                                                                          \
  extern "C" __global__ void walk_range_##SUF(const uint64_t* tab, const V* log, uint64_t b, uint64_t r, const K* sk,      \
                                              const uint32_t* st, uint64_t s, const K* lo, const K* hi, uint64_t nq,       \
                                              const uint32_t* off, K* out_keys, V* out_vals) {                             \
    walk_range<K, V>(Runs<K>{tab, b, r, sk, st, s}, log, lo, hi, nq, off, out_keys, out_vals);                             \
  }                                                                                                                           \
  extern "C" __global__ void lookup_##SUF(const uint64_t* tab, const V* log, uint64_t b, uint64_t r, const K* sk,          \
                                          const uint32_t* st, uint64_t s, const K* q, uint64_t nq, V* out, uint8_t* found) { \
    lookup<K, V>(Runs<K>{tab, b, r, sk, st, s}, log, q, nq, out, found);                                                   \
  }                                                                                                                           \
  extern "C" __global__ void successor_##SUF(const uint64_t* tab, const V* log, uint64_t b, uint64_t r, const K* sk,       \
                                             const uint32_t* st, uint64_t s, const K* q, uint64_t nq, K* out_keys,         \
                                             V* out_vals, uint8_t* found) {                                                 \
    successor<K, V>(Runs<K>{tab, b, r, sk, st, s}, log, q, nq, out_keys, out_vals, found);                                 \
  }                                                                                                                           \
  extern "C" __global__ void predecessor_##SUF(const uint64_t* tab, const V* log, uint64_t b, uint64_t r, const K* sk,     \
                                               const uint32_t* st, uint64_t s, const K* q, uint64_t nq, K* out_keys,       \
                                               V* out_vals, uint8_t* found) {                                               \
    predecessor<K, V>(Runs<K>{tab, b, r, sk, st, s}, log, q, nq, out_keys, out_vals, found);                               \
  }                                                                                                                           \
  extern "C" __global__ void cleanup_scatter_##SUF(const K* ck, const uint32_t* ct, uint64_t m, const V* log, V* newlog,    \
                                                   uint64_t b, uint64_t r2, const uint64_t* tab, K* sk, uint32_t* st,       \
                                                   uint64_t rem) {                                                          \
    cleanup_scatter<K, V>(ck, ct, m, log, newlog, b, r2, tab, sk, st, rem);                                                \
  }

LSM_KEY_KERNELS(uint32_t, k32)
LSM_KEY_KERNELS(uint64_t, k64)
LSM_SORTED_GATHER_KERNEL(uint32_t, v32)
LSM_SORTED_GATHER_KERNEL(uint64_t, v64)
LSM_PAIR_KERNELS(uint32_t, uint32_t, k32_v32)
LSM_PAIR_KERNELS(uint32_t, uint64_t, k32_v64)
LSM_PAIR_KERNELS(uint64_t, uint32_t, k64_v32)
LSM_PAIR_KERNELS(uint64_t, uint64_t, k64_v64)
