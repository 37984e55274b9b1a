// blink_wave.cuh: the lockstep waves of phased queries on the shared B-link
// core (blink.cuh): lookups, successors, predecessors and ranges of a tree
// that no writer changes while they run, for btree and for mvbtree's latest
// version. Generic over the node layout and pool as blink.cuh is.
//
#pragma once
#include <stdint.h>

#include "blink.cuh"
#include "mem.cuh"
#include "status.cuh"

namespace wk {
namespace blink {

using mem::choose;

// Phased queries (no writer can run: the tree is quiescent, every leaf at the
// same depth) walk the tree in lockstep waves. A warp takes W = R*G queries at
// a time (a wave: G = 32/T groups of T lanes, each group with R rounds; group
// g's round r is query wave*W + r*G + g) and walks them from the root to their
// leaves level by level together: in each level it issues the loads of all R
// rounds before it searches any of them, so a group has R nodes in flight
// instead of one, and each node is still read as one coalesced
// 16-byte-per-lane load (the whole node in one request). Every collective is
// warp-wide with all 32 lanes converged: one shuffle or ballot serves the G
// groups at once, with no per-tile masks and no divergence checks. Values a
// group derives from its own node (count, child, found) are uniform within the
// group, so its lanes take the same branches. The leaf search, the side-link
// walks of successor and range and predecessor's re-descents run in lockstep
// too. A query whose walk finds the tree not as a quiescent tree has it (which a
// correct tree never shows) is redone by its group with the generic operation.
// Phased drivers run on a persistent grid (as many blocks as fit on the device
// at once) and take their waves grid-stride.
//
// Batches that may run beside writers (validated queries, writes, mixed
// batches) give each tile one operation of the batch and run the generic
// operation (the paper's work sharing queues the 32 operations of a warp's
// threads through the warp one after another; with tiles that queue would
// serialize T operations per tile and leave small batches without enough
// parallelism). A lockstep walk for these, finished per tile, stalled on an
// H100 once warps ran several waves (see doc.go).

constexpr unsigned kFull = 0xffffffffu;
constexpr int kRounds = 4;  // R: nodes in flight per group (mirrored in kernels.go)

template <class L_, int R>
struct Wave {
  using L = L_;
  using S = typename L::S;
  static constexpr int T = L::kTile, G = 32 / T, P = L::kPairs, F = L::kFirst, W = R * G;
  static constexpr int H = L::kHeader, Wd = L::kWords, kCap = L::kCap;
  unsigned rank, gbase, group;
  S w[R][L::kWords];  // this lane's chunk of each round's node

  __device__ __forceinline__ Wave() {
    unsigned lane = wk::mem::laneid();
    rank = lane & (T - 1);
    gbase = lane & ~(T - 1);
    group = lane / T;
  }
  __device__ __forceinline__ unsigned ballot(bool p) const {
    return (__ballot_sync(kFull, p) >> gbase) & ((1u << T) - 1);
  }
  // bcast returns lane src (of this lane's group)'s v.
  __device__ __forceinline__ uint32_t bcast(uint32_t v, int src) const { return __shfl_sync(kFull, v, gbase + src); }
  __device__ __forceinline__ uint64_t bcast(uint64_t v, int src) const {
    return __shfl_sync(kFull, (unsigned long long)v, gbase + src);
  }
  template <class Pool>
  __device__ __forceinline__ void load(const Pool& pool, int r, uint32_t idx, bool pred) {
    if (pred) ld_chunk(pool.chunk(idx, rank), w[r], kNC);
  }
  __device__ __forceinline__ uint32_t meta(int r) const { return bcast((uint32_t)w[r][0], 0); }
  __device__ __forceinline__ uint32_t link(int r) const {
    if constexpr (sizeof(S) == 4) return bcast((uint32_t)w[r][1], 0);
    else return bcast((uint32_t)(w[r][0] >> 32), 0);
  }
  __device__ __forceinline__ S low(int r) const {
    if constexpr (sizeof(S) == 4) return (S)bcast((uint32_t)w[r][2], 0);
    else return (S)bcast((uint64_t)w[r][1], 0);
  }
  __device__ __forceinline__ S high(int r) const {
    if constexpr (sizeof(S) == 4) return (S)bcast((uint32_t)w[r][3], 0);
    else return (S)bcast((uint64_t)w[r][0], 1);
  }
  // slot is the pair index of this lane's p-th pair position (negative for
  // header lanes; kCap for the narrow versioned node's version).
  __device__ __forceinline__ int slot(int p) const { return ((int)rank - F) * P + p; }
  // count_le returns how many of round r's first c keys are <= k (c <= kCap).
  __device__ __forceinline__ int count_le(int r, S k, int c) const {
    int n = 0;
#pragma unroll
    for (int p = 0; p < P; ++p) {
      int s = slot(p);
      n += __popc(ballot(s >= 0 && s < c && w[r][2 * p] <= k));
    }
    return n;
  }
  __device__ __forceinline__ int count_lt(int r, S k, int c) const {
    int n = 0;
#pragma unroll
    for (int p = 0; p < P; ++p) {
      int s = slot(p);
      n += __popc(ballot(s >= 0 && s < c && w[r][2 * p] < k));
    }
    return n;
  }
  // find returns the slot of round r holding k among the first c, or -1.
  __device__ __forceinline__ int find(int r, S k, int c) const {
    int at = -1;
#pragma unroll
    for (int p = 0; p < P; ++p) {
      int s = slot(p);
      unsigned b = ballot(s >= 0 && s < c && w[r][2 * p] == k);
      if (b) at = (__ffs(b) - 1 - F) * P + p;
    }
    return at;
  }
  // word returns word j (0: key, 1: value) of pair s of round r; s must be the
  // same for the whole group (the owning lane picks the word, one shuffle).
  __device__ __forceinline__ S word(int r, int s, int j) const {
    s = min(max(s, 0), kCap - 1);
    int src = F + s / P, sub = s % P;
    S mine = w[r][j];
#pragma unroll
    for (int p = 1; p < P; ++p) mine = choose(sub == p, w[r][2 * p + j], mine);
    return (S)bcast(mine, src);
  }
  __device__ __forceinline__ S key_at(int r, int s) const { return word(r, s, 0); }
  __device__ __forceinline__ S val_at(int r, int s) const { return word(r, s, 1); }
  // ts and prev of round r's node (versioned layouts: mvbtree).
  __device__ __forceinline__ uint32_t ts(int r) const {
    constexpr int ln = L::kVersionLane, wd = L::kVersionWord;
    if constexpr (sizeof(S) == 4) return bcast((uint32_t)w[r][wd], ln);
    else return (uint32_t)bcast((uint64_t)w[r][wd], ln);
  }
  __device__ __forceinline__ uint32_t prev(int r) const {
    constexpr int ln = L::kVersionLane, wd = L::kVersionWord;
    if constexpr (sizeof(S) == 4) return bcast((uint32_t)w[r][wd + 1], ln);
    else return (uint32_t)(bcast((uint64_t)w[r][wd], ln) >> 32);
  }
  // count returns round r's key count, clamped to the capacity.
  __device__ __forceinline__ int count(int r) const { return min((int)m_count(meta(r)), kCap); }
};

// pick returns a[r] for a run-time r without indexing the register array.
template <typename T, int R>
__device__ __forceinline__ T pick(const T (&a)[R], int r) {
  T x = a[0];
#pragma unroll
  for (int i = 1; i < R; ++i) x = (T)choose(r == i, (uint64_t)a[i], (uint64_t)x);
  return x;
}

__device__ __forceinline__ uint64_t warp_id() { return (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) >> 5; }
__device__ __forceinline__ uint64_t warp_count() { return gridDim.x * (uint64_t)blockDim.x >> 5; }

// wave_queries sets each round's query index and whether it exists.
template <class Wv, int R>
__device__ __forceinline__ void wave_queries(const Wv& v, uint64_t wave, uint64_t n, uint64_t (&q)[R], bool (&act)[R]) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    q[r] = wave * Wv::W + (uint64_t)r * Wv::G + v.group;
    act[r] = q[r] < n;
  }
}

__device__ __forceinline__ void report_result(uint32_t* status, int r) {
  if (r == kFailPool) wk::report(status, wk::kStatusPoolExhausted);
  if (r == kFailRetry) wk::report(status, wk::kStatusRetryLimit);
}

// window returns query i's output window [off, off+limit) (none without
// offsets). A window must satisfy offsets[i] <= offsets[i+1] <= out_len (the
// output buffers' length); any other is reported as wk::kStatusInvalidArgument and
// left empty, so that no query ever writes outside the output buffers.
__device__ __forceinline__ void window(const uint32_t* offsets, uint64_t i, uint64_t out_len, uint32_t* status,
                                       uint32_t& off, uint32_t& limit) {
  off = 0;
  limit = 0;
  if (offsets) {
    uint32_t a = offsets[i], b = offsets[i + 1];
    if (a <= b && (uint64_t)b <= out_len) {
      off = a;
      limit = b - a;
    } else {
      wk::report(status, wk::kStatusInvalidArgument);
    }
  }
}

// wave_descend walks the key of every round in act from the root to its leaf,
// all rounds and groups level by level in lockstep, and leaves the leaves in
// v.w. ok[r] says round r reached a leaf that routes its key as a quiescent tree
// has it (a node of the expected level, a child inside the pool, the key within
// the leaf's fences); rounds outside act are not ok.
//
// The reader rd resolves each node a round loads to the version it reads
// (blink.cuh's Latest: the node as it is; mvbtree's snapshot reader: a walk
// down the node's version chain, all rounds in lockstep); a round it cannot
// resolve is not ok.
template <class Pool, class Rd, class Wv, typename S, int R>
__device__ __forceinline__ void wave_descend(const Pool& pool, const Rd& rd, Wv& v, const S (&k)[R],
                                             const bool (&act)[R], bool (&ok)[R]) {
  constexpr int kCap = Wv::kCap;
  v.load(pool, 0, pool.root(), true);
  bool root_ok = true;
  if constexpr (Rd::kWalks) {  // every round reads the same root version
    bool first[R];
#pragma unroll
    for (int r = 0; r < R; ++r) first[r] = r == 0;
    rd.resolve(pool, v, first);
    root_ok = first[0];
  }
#pragma unroll
  for (int r = 1; r < R; ++r)
#pragma unroll
    for (int j = 0; j < Wv::Wd; ++j) v.w[r][j] = v.w[0][j];
#pragma unroll
  for (int r = 0; r < R; ++r) ok[r] = act[r] && root_ok;
  for (int l = (int)m_level(v.meta(0)); l > 0; --l) {  // the same trip count for the whole warp
    uint32_t next[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      uint32_t m = v.meta(r);
      int c = (int)m_count(m);
      int i = v.count_le(r, k[r], min(c, kCap)) - 1;
      uint32_t ch = (uint32_t)v.val_at(r, i);
      ok[r] = (ok[r] && (int)m_level(m) == l && c <= kCap && i >= 0) & pool.valid(ch);
      next[r] = ch;
    }
#pragma unroll
    for (int r = 0; r < R; ++r) v.load(pool, r, next[r], ok[r]);  // R loads in flight
    if constexpr (Rd::kWalks) rd.resolve(pool, v, ok);
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    uint32_t m = v.meta(r), lk = v.link(r);
    S lo = v.low(r), hi = v.high(r);
    ok[r] = ok[r] && m_level(m) == 0 && m_count(m) <= kCap && k[r] >= lo && (lk == kNone || k[r] < hi);
  }
}

// Phased queries: walk and finish in lockstep.

// wave_next loads, for every round in more, the right sibling of its leaf and
// checks it is a leaf; a round whose chain is not as a quiescent tree has it
// (a link outside the pool, a node that is no leaf, more steps than nodes) moves
// from run to the generic path (its bit in fail). It returns whether any round
// of the warp moved on.
template <class Pool, class Rd, class Wv, int R>
__device__ __forceinline__ bool wave_next(const Pool& pool, const Rd& rd, Wv& v, uint32_t step,
                                          const uint32_t (&next)[R], const bool (&more)[R], bool (&run)[R],
                                          unsigned& fail) {
  constexpr int kCap = Wv::kCap;
  bool any = false;
#pragma unroll
  for (int r = 0; r < R; ++r) any |= more[r];
  if (!__any_sync(kFull, any)) return false;
  bool go[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    go[r] = more[r] && pool.valid(next[r]) && step < pool.walk_bound();
    if (more[r] && !go[r]) {
      run[r] = false;
      fail |= 1u << r;
    }
    v.load(pool, r, next[r], go[r]);
  }
  bool resolved[R];
#pragma unroll
  for (int r = 0; r < R; ++r) resolved[r] = true;
  if constexpr (Rd::kWalks) {
#pragma unroll
    for (int r = 0; r < R; ++r) resolved[r] = go[r];
    rd.resolve(pool, v, resolved);
#pragma unroll
    for (int r = 0; r < R; ++r) resolved[r] = resolved[r] || !go[r];
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    uint32_t m = v.meta(r);
    if (go[r] && (!resolved[r] || m_level(m) != 0 || m_count(m) > kCap)) {
      run[r] = false;
      fail |= 1u << r;
    }
  }
  return true;
}

template <class N, typename K, typename V, class Pool, class Rd>
__device__ void wave_lookup(const Pool& pool, const Rd rd, uint32_t* status, const K* keys, const uint32_t* order, uint64_t n,
                            V* out_vals, uint8_t* out_found) {
  using S = typename N::S;
  using Wv = Wave<typename N::L, kRounds>;
  constexpr int R = kRounds;
  Wv v;
  for (uint64_t wave = warp_id(); wave * Wv::W < n; wave += warp_count()) {
    uint64_t q[R];
    bool act[R], ok[R];
    S k[R];
    wave_queries(v, wave, n, q, act);
#pragma unroll
    for (int r = 0; r < R; ++r) k[r] = act[r] ? (S)keys[q[r]] : S(0);
    wave_descend(pool, rd, v, k, act, ok);
    unsigned fail = 0;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      int j = v.find(r, k[r], v.count(r));
      S val = v.val_at(r, j);
      if (act[r] && !ok[r]) fail |= 1u << r;
      if (ok[r] && v.rank == 0) {
        uint64_t at = order ? order[q[r]] : q[r];
        out_vals[at] = j >= 0 ? (V)val : V(0);
        out_found[at] = j >= 0 ? 1 : 0;
      }
    }
    while (fail) {  // group-divergent: the generic path uses the group's own masks
      int r = __ffs(fail) - 1;
      fail &= fail - 1;
      Tile<Wv::T> t;
      uint64_t qr = pick(q, r);
      S val = 0;
      bool found = false;
      report_result(status, op_lookup<N>(pool, rd, pick(k, r), val, found, t));
      if (t.rank == 0) {
        uint64_t at = order ? order[qr] : qr;
        out_vals[at] = found ? (V)val : V(0);
        out_found[at] = found ? 1 : 0;
      }
    }
    __syncwarp();
  }
}

template <class N, typename K, typename V, class Pool, class Rd>
__device__ void wave_neighbor(const Pool& pool, const Rd rd, uint32_t* status, const K* keys, const uint32_t* order, uint64_t n,
                              uint32_t predecessor, K* out_keys, V* out_vals, uint8_t* out_found) {
  using S = typename N::S;
  using Wv = Wave<typename N::L, kRounds>;
  constexpr int R = kRounds;
  Wv v;
  for (uint64_t wave = warp_id(); wave * Wv::W < n; wave += warp_count()) {
    uint64_t q[R];
    bool act[R], ok[R], run[R], found[R];
    S k[R], rk[R], rv[R];
    unsigned fail = 0;
    wave_queries(v, wave, n, q, act);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      k[r] = act[r] ? (S)keys[q[r]] : S(0);
      found[r] = false;
      rk[r] = rv[r] = 0;
    }
    if (!predecessor) {
      // Successor: the first key > k in k's leaf or in the leaves to its right.
      wave_descend(pool, rd, v, k, act, ok);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        run[r] = ok[r];
        if (act[r] && !ok[r]) fail |= 1u << r;
      }
      for (uint32_t step = 0;; ++step) {
        uint32_t next[R];
        bool more[R];
#pragma unroll
        for (int r = 0; r < R; ++r) {
          int c = v.count(r);
          int j = v.count_le(r, k[r], c);
          S kk = v.key_at(r, j), vv = v.val_at(r, j);
          next[r] = v.link(r);
          more[r] = false;
          if (run[r]) {
            if (j < c) {
              rk[r] = kk;
              rv[r] = vv;
              found[r] = true;
              run[r] = false;
            } else if (next[r] == kNone) {
              run[r] = false;
            } else {
              more[r] = true;
            }
          }
        }
        if (!wave_next(pool, rd, v, step, next, more, run, fail)) break;
      }
    } else {
      // Predecessor: the last key <= k-1 in the leaf of k-1; past an empty
      // leaf, descend again for the key just below its low fence.
      S qk[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        run[r] = act[r] && k[r] != 0;
        qk[r] = k[r] - 1;
      }
      for (uint32_t pass = 0;; ++pass) {
        bool any = false;
#pragma unroll
        for (int r = 0; r < R; ++r) any |= run[r];
        if (!__any_sync(kFull, any)) break;
        if (pass >= kMaxSteps) {
#pragma unroll
          for (int r = 0; r < R; ++r)
            if (run[r]) {
              run[r] = false;
              fail |= 1u << r;
            }
          break;
        }
        wave_descend(pool, rd, v, qk, run, ok);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          int cl = v.count_le(r, qk[r], v.count(r));
          S kk = v.key_at(r, cl - 1), vv = v.val_at(r, cl - 1), lo = v.low(r);
          if (run[r]) {
            if (!ok[r]) {
              run[r] = false;
              fail |= 1u << r;
            } else if (cl > 0) {
              rk[r] = kk;
              rv[r] = vv;
              found[r] = true;
              run[r] = false;
            } else if (lo == 0) {
              run[r] = false;
            } else {
              qk[r] = lo - 1;
            }
          }
        }
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (act[r] && !(fail & (1u << r)) && v.rank == 0) {
        uint64_t at = order ? order[q[r]] : q[r];
        out_keys[at] = found[r] ? (K)rk[r] : K(0);
        out_vals[at] = found[r] ? (V)rv[r] : V(0);
        out_found[at] = found[r] ? 1 : 0;
      }
    }
    while (fail) {
      int r = __ffs(fail) - 1;
      fail &= fail - 1;
      Tile<Wv::T> t;
      uint64_t qr = pick(q, r);
      S kr = pick(k, r), a = 0, b = 0;
      bool f = false;
      int res = predecessor ? op_predecessor<N>(pool, rd, kr, a, b, f, t)
                              : op_successor<N>(pool, rd, kr, a, b, f, t);
      report_result(status, res);
      if (t.rank == 0) {
        uint64_t at = order ? order[qr] : qr;
        out_keys[at] = f ? (K)a : K(0);
        out_vals[at] = f ? (V)b : V(0);
        out_found[at] = f ? 1 : 0;
      }
    }
    __syncwarp();
  }
}

// wave_range counts the keys in [lo, hi) and, with offsets, writes the first
// pairs to each query's window. With order, lo is sorted and query i's original
// position (for hi, offsets, counts) is order[i].
template <class N, typename K, typename V, class Pool, class Rd>
__device__ void wave_range(const Pool& pool, const Rd rd, uint32_t* status, const K* los, const K* his, const uint32_t* order,
                           uint64_t n, const uint32_t* offsets, uint64_t out_len, K* out_keys, V* out_vals,
                           uint32_t* counts) {
  using S = typename N::S;
  using Wv = Wave<typename N::L, kRounds>;
  constexpr int R = kRounds;
  Wv v;
  for (uint64_t wave = warp_id(); wave * Wv::W < n; wave += warp_count()) {
    uint64_t q[R], at[R];
    bool act[R], ok[R], run[R];
    S lo[R], hi[R];
    uint32_t off[R], limit[R], total[R];
    unsigned fail = 0;
    wave_queries(v, wave, n, q, act);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      at[r] = act[r] && order ? order[q[r]] : q[r];
      lo[r] = act[r] ? (S)los[q[r]] : S(0);
      hi[r] = act[r] ? (S)his[at[r]] : S(0);
      off[r] = limit[r] = total[r] = 0;
      if (act[r]) window(offsets, at[r], out_len, status, off[r], limit[r]);
      run[r] = act[r] && lo[r] < hi[r];
    }
    wave_descend(pool, rd, v, lo, run, ok);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (run[r] && !ok[r]) fail |= 1u << r;
      run[r] = ok[r];
    }
    for (uint32_t step = 0;; ++step) {
      uint32_t next[R];
      bool more[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        int c = v.count(r);
        int a = v.count_lt(r, lo[r], c), b = v.count_lt(r, hi[r], c);
        S h = v.high(r);
        next[r] = v.link(r);
        more[r] = false;
        if (run[r]) {
          if (offsets) {
#pragma unroll
            for (int p = 0; p < Wv::P; ++p) {
              int s = v.slot(p);
              if (s >= a && s < b) {
                uint32_t i = total[r] + (uint32_t)(s - a);
                if (i < limit[r]) {
                  out_keys[off[r] + i] = (K)v.w[r][2 * p];
                  out_vals[off[r] + i] = (V)v.w[r][2 * p + 1];
                }
              }
            }
          }
          total[r] += (uint32_t)(b > a ? b - a : 0);
          if (next[r] == kNone || hi[r] <= h)
            run[r] = false;
          else
            more[r] = true;
        }
      }
      if (!wave_next(pool, rd, v, step, next, more, run, fail)) break;
    }
#pragma unroll
    for (int r = 0; r < R; ++r)
      if (act[r] && !(fail & (1u << r)) && v.rank == 0) counts[at[r]] = total[r];
    while (fail) {
      int r = __ffs(fail) - 1;
      fail &= fail - 1;
      Tile<Wv::T> t;
      uint64_t ar = pick(at, r);
      uint32_t o = pick(off, r), total1 = 0;
      int res = op_range<N, K, V>(pool, rd, pick(lo, r), pick(hi, r), offsets ? out_keys + o : nullptr,
                                         offsets ? out_vals + o : nullptr, pick(limit, r), total1, t);
      report_result(status, res);
      if (t.rank == 0) counts[ar] = total1;
    }
    __syncwarp();
  }
}

}  // namespace blink
}  // namespace wk
