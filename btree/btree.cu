// btree.cu: the GPU B-link tree (Awad et al., PPoPP 2019), with full-width keys.
//
// The node layout, latches, the seqlock read, the descent and the operations
// on one key are the B-link core shared with mvbtree (internal/devcode/blink.cuh,
// which describes the layout and the concurrency protocol; layout.go mirrors
// the layout). This file holds btree's node pool (one device buffer indexed by
// node number, bump allocation, node 0 the root), the batch drivers, the phased
// queries' lockstep waves and the bulk build.
#include <stdint.h>

#include <type_traits>

#include "blink.cuh"
#include "mem.cuh"
#include "status.cuh"

namespace {

using namespace wk::blink;  // the shared B-link core
using wk::mem::choose;

// Operation kinds of a mixed batch (mirrored in Go as OpKind).
constexpr uint32_t kOpLookup = 0, kOpInsert = 1, kOpDelete = 2, kOpSuccessor = 3, kOpPredecessor = 4,
                   kOpCount = 5;

// wk::kStatusInvalidArgument (status.cuh): a device batch held an operation kind
// above kOpCount, or a range window outside the output buffers.

// ---- the tree -------------------------------------------------------------

template <typename S>
using Lay = wk::blink::Lay<S, false>;
template <typename S>
using Node = wk::blink::Node<Lay<S>>;
constexpr int kCap = 14;  // pairs per node, both widths
static_assert(Lay<uint32_t>::kCap == kCap && Lay<uint64_t>::kCap == kCap, "btree nodes hold 14 pairs");

template <typename S>
struct Pool {
  char* base;
  uint64_t cap;                 // nodes
  unsigned long long* ctl;      // ctl[0] next free node, ctl[1] number of keys
  uint32_t* status;
  static constexpr bool kReplaceBeforeSplit = false;  // doc.go's known limitation: the fix awaits a device A/B
  __device__ __forceinline__ char* node(uint32_t i) const { return base + (uint64_t)i * Lay<S>::kNodeBytes; }
  __device__ __forceinline__ uint32_t root() const { return 0; }
  // valid: an address a link or a child may hold (the root is neither).
  __device__ __forceinline__ bool valid(uint32_t i) const { return i != 0 && i < cap; }
  // walk_bound: the extra steps a walk along the leaves may take.
  __device__ __forceinline__ uint32_t walk_bound() const { return (uint32_t)cap; }
  __device__ __forceinline__ int route_load() const { return kPlain; }
  // alloc returns the first of n fresh nodes, or kNone when the pool is exhausted.
  __device__ uint32_t alloc(uint32_t n) const {
    unsigned long long old = atomicAdd(&ctl[0], (unsigned long long)n);
    if (old + n > cap) return kNone;
    return (uint32_t)old;
  }
  template <int T>
  __device__ __forceinline__ bool alloc1(const Tile<T>& t, uint32_t& a) {
    uint32_t r = 0;
    if (t.rank == 0) r = alloc(1);
    a = t.shfl(r, 0);
    return a != kNone;
  }
  template <int T>
  __device__ __forceinline__ bool alloc2(const Tile<T>& t, uint32_t& a, uint32_t& b) {
    uint32_t l = 0;
    if (t.rank == 0) l = alloc(2);
    a = t.shfl(l, 0);
    b = a + 1;
    return a != kNone;
  }
  // release: a bump pool does not take nodes back (btree's NoVersion never asks).
  template <int T>
  __device__ __forceinline__ void release(const Tile<T>&, uint32_t) {}
};

// ---- batch drivers -----------------------------------------------------------
//
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

template <typename S, int R>
struct Wave {
  using L = Lay<S>;
  static constexpr int T = L::kTile, G = 32 / T, P = L::kPairs, F = L::kFirst, W = R * G;
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
  __device__ __forceinline__ void load(const Pool<S>& pool, int r, uint32_t idx, bool pred) {
    if (pred) ld_chunk(pool.node(idx) + rank * 16, w[r], kNC);
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
  // slot is the pair index of this lane's p-th pair (negative for header lanes).
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
    S mine = w[r][j];
#pragma unroll
    for (int p = 1; p < P; ++p) mine = choose(s % P == p, w[r][2 * p + j], mine);
    return (S)bcast(mine, F + s / P);
  }
  __device__ __forceinline__ S key_at(int r, int s) const { return word(r, s, 0); }
  __device__ __forceinline__ S val_at(int r, int s) const { return word(r, s, 1); }
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
template <typename S, int R>
__device__ __forceinline__ void wave_queries(const Wave<S, R>& v, uint64_t wave, uint64_t n, uint64_t (&q)[R],
                                             bool (&act)[R]) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    q[r] = wave * Wave<S, R>::W + (uint64_t)r * Wave<S, R>::G + v.group;
    act[r] = q[r] < n;
  }
}

template <typename S>
__device__ __forceinline__ void report_result(const Pool<S>& pool, int r) {
  if (r == kFailPool) wk::report(pool.status, wk::kStatusPoolExhausted);
  if (r == kFailRetry) wk::report(pool.status, wk::kStatusRetryLimit);
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
template <typename S, int R>
__device__ __forceinline__ void wave_descend(const Pool<S>& pool, Wave<S, R>& v, const S (&k)[R], const bool (&act)[R],
                                             bool (&ok)[R]) {
  v.load(pool, 0, 0, true);
#pragma unroll
  for (int r = 1; r < R; ++r)
#pragma unroll
    for (int j = 0; j < Lay<S>::kWords; ++j) v.w[r][j] = v.w[0][j];
#pragma unroll
  for (int r = 0; r < R; ++r) ok[r] = act[r];
  for (int l = (int)m_level(v.meta(0)); l > 0; --l) {  // the same trip count for the whole warp
    uint32_t next[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      uint32_t m = v.meta(r);
      int c = (int)m_count(m);
      int i = v.count_le(r, k[r], min(c, kCap)) - 1;
      uint32_t ch = (uint32_t)v.val_at(r, i);
      ok[r] = ok[r] && (int)m_level(m) == l && c <= kCap && i >= 0 && ch != 0 && ch < pool.cap;
      next[r] = ch;
    }
#pragma unroll
    for (int r = 0; r < R; ++r) v.load(pool, r, next[r], ok[r]);  // R loads in flight
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    uint32_t m = v.meta(r), lk = v.link(r);
    S lo = v.low(r), hi = v.high(r);
    ok[r] = ok[r] && m_level(m) == 0 && m_count(m) <= kCap && k[r] >= lo && (lk == kNone || k[r] < hi);
  }
}

// Batches that may run beside writers (validated queries, writes, mixed
// batches): one operation per tile, the tile of T lanes starting at thread T*i
// performing operation i.

template <typename K, typename V>
__device__ void lookup_batch(char* base, uint64_t cap, uint32_t* status, const K* keys, uint64_t n, V* out_vals,
                             uint8_t* out_found) {
  using S = SlotOf<K, V>;
  constexpr int T = Lay<S>::kTile;
  uint64_t i = tile_id<T>();
  if (i >= n) return;  // whole tiles leave together
  Tile<T> t;
  Pool<S> pool{base, cap, nullptr, status};
  S v = 0;
  bool found = false;
  int r = op_lookup<Node<S>>(pool, Latest{true}, (S)keys[i], v, found, t);
  report_result(pool, r);
  if (t.rank == 0) {
    out_vals[i] = found ? (V)v : V(0);
    out_found[i] = found ? 1 : 0;
  }
}

template <typename K, typename V>
__device__ void neighbor_batch(char* base, uint64_t cap, uint32_t* status, const K* keys, uint64_t n,
                               uint32_t predecessor, K* out_keys, V* out_vals, uint8_t* out_found) {
  using S = SlotOf<K, V>;
  constexpr int T = Lay<S>::kTile;
  uint64_t i = tile_id<T>();
  if (i >= n) return;
  Tile<T> t;
  Pool<S> pool{base, cap, nullptr, status};
  S k = (S)keys[i], rk = 0, rv = 0;
  bool found = false;
  int r = predecessor ? op_predecessor<Node<S>>(pool, Latest{true}, k, rk, rv, found, t)
                    : op_successor<Node<S>>(pool, Latest{true}, k, rk, rv, found, t);
  report_result(pool, r);
  if (t.rank == 0) {
    out_keys[i] = found ? (K)rk : K(0);
    out_vals[i] = found ? (V)rv : V(0);
    out_found[i] = found ? 1 : 0;
  }
}

template <typename K, typename V>
__device__ void range_batch(char* base, uint64_t cap, uint32_t* status, const K* lo, const K* hi, uint64_t n,
                            const uint32_t* offsets, uint64_t out_len, K* out_keys, V* out_vals, uint32_t* counts) {
  using S = SlotOf<K, V>;
  constexpr int T = Lay<S>::kTile;
  uint64_t i = tile_id<T>();
  if (i >= n) return;
  Tile<T> t;
  Pool<S> pool{base, cap, nullptr, status};
  uint32_t off, limit, total = 0;
  window(offsets, i, out_len, status, off, limit);
  int r = op_range<Node<S>, K, V>(pool, Latest{true}, (S)lo[i], (S)hi[i], offsets ? out_keys + off : nullptr,
                               offsets ? out_vals + off : nullptr, limit, total, t);
  report_result(pool, r);
  if (t.rank == 0) counts[i] = total;
}

template <typename K, typename V>
__device__ void insert_batch(char* base, uint64_t cap, unsigned long long* ctl, uint32_t* status, const K* keys,
                             const V* vals, uint64_t n) {
  using S = SlotOf<K, V>;
  constexpr int T = Lay<S>::kTile;
  uint64_t i = tile_id<T>();
  Tile<T> t;
  Pool<S> pool{base, cap, ctl, status};
  NoVersion ver;
  int added = 0;
  if (i < n) report_result(pool, op_insert<Node<S>>(pool, ver, (S)keys[i], (S)vals[i], added, t));
  add_keys(ctl + 1, added, t.rank == 0);
}

template <typename K, typename V>
__device__ void delete_batch(char* base, uint64_t cap, unsigned long long* ctl, uint32_t* status, const K* keys,
                             uint64_t n) {
  using S = SlotOf<K, V>;
  constexpr int T = Lay<S>::kTile;
  uint64_t i = tile_id<T>();
  Tile<T> t;
  Pool<S> pool{base, cap, ctl, status};
  NoVersion ver;
  int removed = 0;
  if (i < n) report_result(pool, op_delete<Node<S>>(pool, ver, (S)keys[i], removed, t));
  add_keys(ctl + 1, -(long long)removed, t.rank == 0);
}

// mixed_batch runs a batch whose elements are any operation, in one kernel
// (§5.6 semantics; queries are always validated).
template <typename K, typename V>
__device__ void mixed_batch(char* base, uint64_t cap, unsigned long long* ctl, uint32_t* status, const uint8_t* kinds,
                            const K* keys, const V* vals, const K* his, uint64_t n, uint8_t* out_found, K* out_keys,
                            V* out_vals, uint32_t* out_counts) {
  using S = SlotOf<K, V>;
  constexpr int T = Lay<S>::kTile;
  uint64_t i = tile_id<T>();
  Tile<T> t;
  Pool<S> pool{base, cap, ctl, status};
  NoVersion ver;
  // bt_check_kinds, queued before this kernel on the same stream, flags a batch
  // that holds an unknown kind: then nothing of it is applied. One thread reads
  // the flag for the block, so that the whole block leaves (or stays) together
  // and add_keys's barriers see every thread.
  __shared__ bool rejected;
  if (threadIdx.x == 0) rejected = (*(volatile uint32_t*)status & wk::kStatusInvalidArgument) != 0;
  __syncthreads();
  if (rejected) return;
  long long delta = 0;
  if (i < n) {
    uint32_t kind = kinds[i];
    S k = (S)keys[i], v = vals ? (S)vals[i] : S(0), h = his ? (S)his[i] : S(0);
    S rk = 0, rv = 0;
    bool found = false;
    uint32_t cnt = 0;
    int r = kOK, d = 0;
    switch (kind) {
      case kOpInsert:
        r = op_insert<Node<S>>(pool, ver, k, v, d, t);
        delta = d;
        break;
      case kOpDelete:
        r = op_delete<Node<S>>(pool, ver, k, d, t);
        delta = -d;
        break;
      case kOpSuccessor:
        r = op_successor<Node<S>>(pool, Latest{true}, k, rk, rv, found, t);
        break;
      case kOpPredecessor:
        r = op_predecessor<Node<S>>(pool, Latest{true}, k, rk, rv, found, t);
        break;
      case kOpCount:
        r = op_range<Node<S>, K, V>(pool, Latest{true}, k, h, nullptr, nullptr, 0, cnt, t);
        break;
      case kOpLookup:
        r = op_lookup<Node<S>>(pool, Latest{true}, k, rv, found, t);
        rk = k;
        break;
      default:  // unreachable after bt_check_kinds; never run an unknown kind
        if (t.rank == 0) wk::report(status, wk::kStatusInvalidArgument);
        break;
    }
    report_result(pool, r);
    if (t.rank == 0) {
      if (out_found) out_found[i] = found ? 1 : 0;
      if (out_keys) out_keys[i] = found ? (K)rk : K(0);
      if (out_vals) out_vals[i] = found ? (V)rv : V(0);
      if (out_counts) out_counts[i] = cnt;
    }
  }
  add_keys(ctl + 1, delta, t.rank == 0);
}

// Phased queries: walk and finish in lockstep.

// wave_next loads, for every round in more, the right sibling of its leaf and
// checks it is a leaf; a round whose chain is not as a quiescent tree has it
// (a link outside the pool, a node that is no leaf, more steps than nodes) moves
// from run to the generic path (its bit in fail). It returns whether any round
// of the warp moved on.
template <typename S, int R>
__device__ __forceinline__ bool wave_next(const Pool<S>& pool, Wave<S, R>& v, uint32_t step, const uint32_t (&next)[R],
                                          const bool (&more)[R], bool (&run)[R], unsigned& fail) {
  bool any = false;
#pragma unroll
  for (int r = 0; r < R; ++r) any |= more[r];
  if (!__any_sync(kFull, any)) return false;
  bool go[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    go[r] = more[r] && next[r] != 0 && next[r] < pool.cap && step < (uint32_t)pool.cap;
    if (more[r] && !go[r]) {
      run[r] = false;
      fail |= 1u << r;
    }
    v.load(pool, r, next[r], go[r]);
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    uint32_t m = v.meta(r);
    if (go[r] && (m_level(m) != 0 || m_count(m) > kCap)) {
      run[r] = false;
      fail |= 1u << r;
    }
  }
  return true;
}

template <typename K, typename V>
__device__ void phased_lookup(char* base, uint64_t cap, uint32_t* status, const K* keys, const uint32_t* order,
                              uint64_t n, V* out_vals, uint8_t* out_found) {
  using S = SlotOf<K, V>;
  using Wv = Wave<S, kRounds>;
  constexpr int R = kRounds;
  Pool<S> pool{base, cap, nullptr, status};
  Wv v;
  for (uint64_t wave = warp_id(); wave * Wv::W < n; wave += warp_count()) {
    uint64_t q[R];
    bool act[R], ok[R];
    S k[R];
    wave_queries(v, wave, n, q, act);
#pragma unroll
    for (int r = 0; r < R; ++r) k[r] = act[r] ? (S)keys[q[r]] : S(0);
    wave_descend(pool, v, k, act, ok);
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
      report_result(pool, op_lookup<Node<S>>(pool, Latest{false}, pick(k, r), val, found, t));
      if (t.rank == 0) {
        uint64_t at = order ? order[qr] : qr;
        out_vals[at] = found ? (V)val : V(0);
        out_found[at] = found ? 1 : 0;
      }
    }
    __syncwarp();
  }
}

template <typename K, typename V>
__device__ void phased_neighbor(char* base, uint64_t cap, uint32_t* status, const K* keys, const uint32_t* order,
                                uint64_t n, uint32_t predecessor, K* out_keys, V* out_vals, uint8_t* out_found) {
  using S = SlotOf<K, V>;
  using Wv = Wave<S, kRounds>;
  constexpr int R = kRounds;
  Pool<S> pool{base, cap, nullptr, status};
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
      wave_descend(pool, v, k, act, ok);
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
        if (!wave_next(pool, v, step, next, more, run, fail)) break;
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
        wave_descend(pool, v, qk, run, ok);
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
      int res = predecessor ? op_predecessor<Node<S>>(pool, Latest{false}, kr, a, b, f, t)
                              : op_successor<Node<S>>(pool, Latest{false}, kr, a, b, f, t);
      report_result(pool, res);
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

// phased_range counts the keys in [lo, hi) and, with offsets, writes the first
// pairs to each query's window. With order, lo is sorted and query i's original
// position (for hi, offsets, counts) is order[i].
template <typename K, typename V>
__device__ void phased_range(char* base, uint64_t cap, uint32_t* status, const K* los, const K* his,
                             const uint32_t* order, uint64_t n, const uint32_t* offsets, uint64_t out_len,
                             K* out_keys, V* out_vals, uint32_t* counts) {
  using S = SlotOf<K, V>;
  using Wv = Wave<S, kRounds>;
  constexpr int R = kRounds;
  Pool<S> pool{base, cap, nullptr, status};
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
    wave_descend(pool, v, lo, run, ok);
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
      if (!wave_next(pool, v, step, next, more, run, fail)) break;
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
      int res = op_range<Node<S>, K, V>(pool, Latest{false}, pick(lo, r), pick(hi, r), offsets ? out_keys + o : nullptr,
                                         offsets ? out_vals + o : nullptr, pick(limit, r), total1, t);
      report_result(pool, res);
      if (t.rank == 0) counts[ar] = total1;
    }
    __syncwarp();
  }
}

// build_node writes node j of one level of a bulk-built tree with tile t.
// keys/vals are sorted and distinct (m of them). Node j of the level holds pairs
// [j*fill, ...) (leaves) or children [j*fanout, ...) of the level below (whose
// nodes start at child_base); it covers the pairs from j*span on. The top level
// (one node) is the root, node 0 (base 0).
template <typename K, typename V, int T>
__device__ __forceinline__ void build_node(char* base, const K* keys, const V* vals, uint64_t m, uint32_t level,
                                           uint32_t node_base, uint64_t nodes, uint32_t child_base, uint64_t children,
                                           uint32_t fill, uint32_t fanout, uint64_t span, uint64_t child_span,
                                           uint64_t j, const Tile<T>& t) {
  using S = SlotOf<K, V>;
  Node<S> nd;
  uint32_t cnt;
  if (level == 0) {
    uint64_t first = j * fill;
    cnt = (uint32_t)min((uint64_t)fill, m - first);
  } else {
    uint64_t first = j * fanout;
    cnt = (uint32_t)min((uint64_t)fanout, children - first);
  }
#pragma unroll
  for (int p = 0; p < Node<S>::P; ++p) {
    int s = nd.slot(t, p);
    if (s < 0) continue;
    int e = s < (int)cnt ? s : (int)cnt - 1;  // stale slots repeat the last pair (leaves: zero)
    S k = 0, v = 0;
    if (level == 0) {
      if (s < (int)cnt) {
        k = (S)keys[j * fill + e];
        v = (S)vals[j * fill + e];
      }
    } else {
      uint64_t c = j * fanout + e;
      k = c == 0 ? S(0) : (S)keys[c * child_span];
      v = (S)(child_base + c);
    }
    nd.w[2 * p] = k;
    nd.w[2 * p + 1] = v;
  }
  S lo = j == 0 ? S(0) : (S)keys[j * span];
  bool last = j + 1 == nodes;
  S hi = last ? S(0) : (S)keys[(j + 1) * span];
  nd.set_header(t, m_make(cnt, level, 0), last ? kNone : node_base + (uint32_t)j + 1, lo, hi);
  st_chunk(base + (uint64_t)(node_base + j) * Lay<S>::kNodeBytes + t.rank * 16, nd.w);
}

// build_level writes the nodes of one level, one tile per node (grid-stride).
template <typename K, typename V>
__device__ void build_level(char* base, const K* keys, const V* vals, uint64_t m, uint32_t level, uint32_t node_base,
                            uint64_t nodes, uint32_t child_base, uint64_t children, uint32_t fill, uint32_t fanout,
                            uint64_t span, uint64_t child_span) {
  constexpr int T = Lay<SlotOf<K, V>>::kTile;
  Tile<T> t;
  for (uint64_t j = tile_id<T>(); j < nodes; j += tile_count<T>())
    build_node<K, V, T>(base, keys, vals, m, level, node_base, nodes, child_base, children, fill, fanout, span,
                        child_span, j, t);
}

}  // namespace

#define BT_KERNELS(SUF, K, V)                                                                                     \
  extern "C" __global__ void bt_lookup_##SUF(char* base, uint64_t cap, uint32_t* status, const K* keys, uint64_t n, \
                                              V* out_vals, uint8_t* out_found) {                                    \
    lookup_batch<K, V>(base, cap, status, keys, n, out_vals, out_found);                                           \
  }                                                                                                               \
  extern "C" __global__ void bt_neighbor_##SUF(char* base, uint64_t cap, uint32_t* status, const K* keys,        \
                                                uint64_t n, uint32_t predecessor, K* out_keys, V* out_vals,       \
                                                uint8_t* out_found) {                                             \
    neighbor_batch<K, V>(base, cap, status, keys, n, predecessor, out_keys, out_vals, out_found);                \
  }                                                                                                               \
  extern "C" __global__ void bt_range_##SUF(char* base, uint64_t cap, uint32_t* status, const K* lo, const K* hi, \
                                             uint64_t n, const uint32_t* offsets, uint64_t out_len, K* out_keys,  \
                                             V* out_vals, uint32_t* counts) {                                     \
    range_batch<K, V>(base, cap, status, lo, hi, n, offsets, out_len, out_keys, out_vals, counts);               \
  }                                                                                                               \
  extern "C" __global__ void __launch_bounds__(256, 4) bt_phased_lookup_##SUF(char* base, uint64_t cap, uint32_t* status, const K* keys,   \
                                                     const uint32_t* order, uint64_t n, V* out_vals,              \
                                                     uint8_t* out_found) {                                        \
    phased_lookup<K, V>(base, cap, status, keys, order, n, out_vals, out_found);                                 \
  }                                                                                                               \
  extern "C" __global__ void bt_phased_neighbor_##SUF(char* base, uint64_t cap, uint32_t* status, const K* keys, \
                                                       const uint32_t* order, uint64_t n, uint32_t predecessor,   \
                                                       K* out_keys, V* out_vals, uint8_t* out_found) {            \
    phased_neighbor<K, V>(base, cap, status, keys, order, n, predecessor, out_keys, out_vals, out_found);        \
  }                                                                                                               \
  extern "C" __global__ void bt_phased_range_##SUF(char* base, uint64_t cap, uint32_t* status, const K* lo,      \
                                                    const K* hi, const uint32_t* order, uint64_t n,               \
                                                    const uint32_t* offsets, uint64_t out_len, K* out_keys,       \
                                                    V* out_vals, uint32_t* counts) {                              \
    phased_range<K, V>(base, cap, status, lo, hi, order, n, offsets, out_len, out_keys, out_vals, counts);       \
  }                                                                                                               \
  extern "C" __global__ void bt_insert_##SUF(char* base, uint64_t cap, unsigned long long* ctl, uint32_t* status, \
                                              const K* keys, const V* vals, uint64_t n) {                         \
    insert_batch<K, V>(base, cap, ctl, status, keys, vals, n);                                                   \
  }                                                                                                               \
  extern "C" __global__ void bt_delete_##SUF(char* base, uint64_t cap, unsigned long long* ctl, uint32_t* status, \
                                              const K* keys, uint64_t n) {                                        \
    delete_batch<K, V>(base, cap, ctl, status, keys, n);                                                         \
  }                                                                                                               \
  extern "C" __global__ void bt_mixed_##SUF(char* base, uint64_t cap, unsigned long long* ctl, uint32_t* status, \
                                             const uint8_t* kinds, const K* keys, const V* vals, const K* his,    \
                                             uint64_t n, uint8_t* out_found, K* out_keys, V* out_vals,            \
                                             uint32_t* out_counts) {                                              \
    mixed_batch<K, V>(base, cap, ctl, status, kinds, keys, vals, his, n, out_found, out_keys, out_vals,          \
                      out_counts);                                                                                \
  }                                                                                                               \
  extern "C" __global__ void bt_build_level_##SUF(char* base, const K* keys, const V* vals, uint64_t m,          \
                                                   uint32_t level, uint32_t node_base, uint64_t nodes,            \
                                                   uint32_t child_base, uint64_t children, uint32_t fill,         \
                                                   uint32_t fanout, uint64_t span, uint64_t child_span) {         \
    build_level<K, V>(base, keys, vals, m, level, node_base, nodes, child_base, children, fill, fanout, span,     \
                      child_span);                                                                                \
  }

BT_KERNELS(u32_u32, uint32_t, uint32_t)
BT_KERNELS(u32_u64, uint32_t, uint64_t)
BT_KERNELS(u64_u32, uint64_t, uint32_t)
BT_KERNELS(u64_u64, uint64_t, uint64_t)

extern "C" __global__ void bt_mark_last_u32(const uint32_t* keys, uint64_t n, uint8_t* flags) {
  mark_last(keys, n, flags);
}
extern "C" __global__ void bt_mark_last_u64(const uint64_t* keys, uint64_t n, uint8_t* flags) {
  mark_last(keys, n, flags);
}

// bt_check_kinds flags (wk::kStatusInvalidArgument) a mixed batch that holds a kind
// above kOpCount; the mixed kernel queued behind it then applies nothing.
extern "C" __global__ void bt_check_kinds(const uint8_t* kinds, uint64_t n, uint32_t* status) {
  bool bad = false;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    bad |= kinds[i] > kOpCount;
  if (bad) wk::report(status, wk::kStatusInvalidArgument);
}

// bt_iota sets idx[i] = i: the positions that a sorted query batch carries.
extern "C" __global__ void bt_iota(uint32_t* idx, uint64_t n) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    idx[i] = (uint32_t)i;
}
