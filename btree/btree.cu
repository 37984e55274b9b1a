// btree.cu: the GPU B-link tree (Awad et al., PPoPP 2019), with full-width keys.
//
// Node layout (mirrored in layout.go). A node is 32 slots of S = uint32 (128 B) or
// uint64 (256 B, when the key or the value is 64-bit), read by a tile of lanes that
// each load one 16-byte chunk (8 lanes for 128 B, 16 lanes for 256 B):
//
//   S = uint32: word 0 meta, 1 link, 2 low, 3 high, then 14 pairs (key, value)
//   S = uint64: meta u32 | link u32, low, high, pad, then 14 pairs (key, value)
//
// meta = count (bits 0-7) | level (8-15, 0 = leaf) | version (16-30) | latch (31).
// No bit of a key is taken: the latch, the leaf flag and the count live in meta,
// and "no right sibling" is link == kNone, so every key value is usable.
// low is the node's fence key (immutable: a node keeps its lower bound for life),
// high the right sibling's low (meaningful only when link != kNone).
//
// Concurrency protocol (see doc.go for the contract):
//  * Writers latch a node with atomicOr on meta, fence, re-read it with strong
//    loads, write with strong stores, fence, and release by storing a new meta
//    (version + 1, latch clear).
//  * Readers take no latch. Routing tolerates torn or stale internal nodes: every
//    step checks the node's level and low fence, moves right through side links,
//    and restarts from the root on a misroute. Queries that may run beside writers
//    ("validated" mode) read leaves with a seqlock: acquire meta, read, fence,
//    re-read meta, retry on change.
//  * Every loop is bounded; giving up sets kStatusRetryLimit, a failed node
//    allocation kStatusPoolExhausted (the operation is then not applied and the
//    tree stays valid).
#include <stdint.h>

#include <type_traits>

#include "mem.cuh"
#include "status.cuh"

namespace {

constexpr uint32_t kNone = 0xffffffffu;
constexpr uint32_t kLatch = 0x80000000u;
constexpr int kCap = 14;                    // pairs per node
constexpr int kSplit = 7;                   // a split keeps pairs [0,7) and moves [7,14)
constexpr uint32_t kMaxSteps = 1u << 17;    // node visits per operation before ErrRetryLimit
constexpr int kParentSpin = 256;            // bounded spin on a parent latch (spin case 1)
constexpr int kSeqlockTries = 1 << 14;      // validated leaf reads before ErrRetryLimit

// Result codes of one operation.
constexpr int kOK = 0;
constexpr int kFailPool = 1;
constexpr int kFailRetry = 2;

// Operation kinds of a mixed batch (mirrored in Go as OpKind).
constexpr uint32_t kOpLookup = 0, kOpInsert = 1, kOpDelete = 2, kOpSuccessor = 3, kOpPredecessor = 4,
                   kOpCount = 5;

// wk::kStatusInvalidArgument (status.cuh): a device batch held an operation kind
// above kOpCount, or a range window outside the output buffers.

__device__ __forceinline__ uint32_t m_count(uint32_t m) { return m & 0xffu; }
__device__ __forceinline__ uint32_t m_level(uint32_t m) { return (m >> 8) & 0xffu; }
__device__ __forceinline__ uint32_t m_make(uint32_t count, uint32_t level, uint32_t version) {
  return count | (level << 8) | ((version & 0x7fffu) << 16);
}
// m_next is meta after a modification: new count, same level, version + 1, unlatched.
__device__ __forceinline__ uint32_t m_next(uint32_t m, uint32_t count) {
  return m_make(count, m_level(m), ((m >> 16) & 0x7fffu) + 1);
}

template <typename S>
struct Lay;
template <>
struct Lay<uint32_t> {
  static constexpr int kTile = 8, kWords = 4, kPairs = 2, kFirst = 1, kNodeBytes = 128;
};
template <>
struct Lay<uint64_t> {
  static constexpr int kTile = 16, kWords = 2, kPairs = 1, kFirst = 2, kNodeBytes = 256;
};

template <typename K, typename V>
using SlotOf = typename std::conditional<sizeof(K) == 8 || sizeof(V) == 8, uint64_t, uint32_t>::type;

// Tile: T consecutive lanes of a warp working on one operation at a time. All
// collectives use the tile's own mask, so tiles of one warp may diverge.
template <int T>
struct Tile {
  unsigned rank, base, mask;
  __device__ __forceinline__ Tile() {
    unsigned lane = wk::mem::laneid();
    rank = lane & (T - 1);
    base = lane & ~(T - 1);
    mask = ((1u << T) - 1) << base;
  }
  __device__ __forceinline__ unsigned ballot(bool p) const {
    return (__ballot_sync(mask, p) >> base) & ((1u << T) - 1);
  }
  __device__ __forceinline__ uint32_t shfl(uint32_t v, int src) const { return __shfl_sync(mask, v, src, T); }
  __device__ __forceinline__ uint64_t shfl(uint64_t v, int src) const {
    return __shfl_sync(mask, (unsigned long long)v, src, T);
  }
  __device__ __forceinline__ void sync() const { __syncwarp(mask); }
};

// ---- memory access (internal/devcode/mem.cuh) -------------------------------

using wk::mem::choose;
using wk::mem::fence;
using wk::mem::kNC;
using wk::mem::kPlain;
using wk::mem::kStrong;
using wk::mem::ld_acquire_u32;
using wk::mem::ld_chunk;
using wk::mem::ld_relaxed_u32;
using wk::mem::st_chunk;
using wk::mem::st_u32;
using wk::mem::st_u64;

__device__ __forceinline__ void backoff(unsigned& ns) {
  __nanosleep(ns);
  ns = ns < 1024 ? ns * 2 : 1024;
}

// ---- the tree -------------------------------------------------------------

template <typename S>
struct Pool {
  char* base;
  uint64_t cap;                 // nodes
  unsigned long long* ctl;      // ctl[0] next free node, ctl[1] number of keys
  uint32_t* status;
  __device__ __forceinline__ char* node(uint32_t i) const { return base + (uint64_t)i * Lay<S>::kNodeBytes; }
  // alloc returns the first of n fresh nodes, or kNone when the pool is exhausted.
  __device__ uint32_t alloc(uint32_t n) const {
    unsigned long long old = atomicAdd(&ctl[0], (unsigned long long)n);
    if (old + n > cap) return kNone;
    return (uint32_t)old;
  }
};

// Node is one tile's registers for one node: each lane holds its 16-byte chunk;
// the header fields are broadcast to the whole tile by decode().
template <typename S>
struct Node {
  using L = Lay<S>;
  static constexpr int T = L::kTile, P = L::kPairs, F = L::kFirst;
  S w[L::kWords];
  uint32_t meta, link;
  S low, high;

  __device__ __forceinline__ uint32_t count() const { return m_count(meta); }
  __device__ __forceinline__ uint32_t level() const { return m_level(meta); }

  __device__ __forceinline__ void load(const Pool<S>& pool, uint32_t idx, int mode, const Tile<T>& t) {
    ld_chunk(pool.node(idx) + t.rank * 16, w, mode);
    decode(t);
  }
  __device__ __forceinline__ void decode(const Tile<T>& t) {
    if constexpr (sizeof(S) == 4) {
      meta = t.shfl((uint32_t)w[0], 0);
      link = t.shfl((uint32_t)w[1], 0);
      low = t.shfl((uint32_t)w[2], 0);
      high = t.shfl((uint32_t)w[3], 0);
    } else {
      uint64_t a = t.shfl((uint64_t)w[0], 0);
      meta = (uint32_t)a;
      link = (uint32_t)(a >> 32);
      low = t.shfl((uint64_t)w[1], 0);
      high = t.shfl((uint64_t)w[0], 1);
    }
  }
  // set_header writes the header fields into the header lanes' chunks.
  __device__ __forceinline__ void set_header(const Tile<T>& t, uint32_t m, uint32_t lk, S lo, S hi) {
    meta = m;
    link = lk;
    low = lo;
    high = hi;
    if constexpr (sizeof(S) == 4) {
      if (t.rank == 0) {
        w[0] = m;
        w[1] = lk;
        w[2] = lo;
        w[3] = hi;
      }
    } else {
      if (t.rank == 0) {
        w[0] = (uint64_t)m | ((uint64_t)lk << 32);
        w[1] = lo;
      } else if (t.rank == 1) {
        w[0] = hi;
        w[1] = 0;
      }
    }
  }
  // slot is the pair index of this lane's p-th pair (negative for header lanes).
  __device__ __forceinline__ int slot(const Tile<T>& t, int p) const { return ((int)t.rank - F) * P + p; }
  __device__ __forceinline__ S key(int p) const { return w[2 * p]; }
  __device__ __forceinline__ S val(int p) const { return w[2 * p + 1]; }

  // count_le returns how many of the node's keys are <= k (keys are sorted).
  __device__ __forceinline__ int count_le(const Tile<T>& t, S k) const {
    int n = 0, c = (int)count();
#pragma unroll
    for (int p = 0; p < P; ++p) {
      int s = slot(t, p);
      n += __popc(t.ballot(s >= 0 && s < c && w[2 * p] <= k));
    }
    return n;
  }
  __device__ __forceinline__ int count_lt(const Tile<T>& t, S k) const {
    int n = 0, c = (int)count();
#pragma unroll
    for (int p = 0; p < P; ++p) {
      int s = slot(t, p);
      n += __popc(t.ballot(s >= 0 && s < c && w[2 * p] < k));
    }
    return n;
  }
  // find returns the slot holding k, or -1.
  __device__ __forceinline__ int find(const Tile<T>& t, S k) const {
    int c = (int)count(), at = -1;
#pragma unroll
    for (int p = 0; p < P; ++p) {
      int s = slot(t, p);
      unsigned b = t.ballot(s >= 0 && s < c && w[2 * p] == k);
      if (b) at = (__ffs(b) - 1 - F) * P + p;
    }
    return at;
  }
  // pair fetches pair s (each lane may ask for a different s; s must be in [0, kCap)).
  __device__ __forceinline__ void pair(const Tile<T>& t, int s, S& k, S& v) const {
    int src = F + s / P;
    k = 0;
    v = 0;
#pragma unroll
    for (int q = 0; q < P; ++q) {
      S kq = t.shfl(w[2 * q], src), vq = t.shfl(w[2 * q + 1], src);
      if (s % P == q) {
        k = kq;
        v = vq;
      }
    }
  }
  // insert_at shifts pairs [pos, count) up by one and puts (k, v) at pos; stale slots
  // past the new count repeat the last pair (so a torn reader sees a real entry).
  __device__ __forceinline__ void insert_at(const Tile<T>& t, int pos, S k, S v) {
    int c = (int)count() + 1;
    S nk[P], nv[P];
#pragma unroll
    for (int p = 0; p < P; ++p) {
      int s = slot(t, p), e = s < c ? s : c - 1;
      int src = e < pos ? e : e - 1;
      S a, b;
      pair(t, src < 0 ? 0 : src, a, b);
      nk[p] = e == pos ? k : a;
      nv[p] = e == pos ? v : b;
    }
#pragma unroll
    for (int p = 0; p < P; ++p)
      if (slot(t, p) >= 0) {
        w[2 * p] = nk[p];
        w[2 * p + 1] = nv[p];
      }
  }
  // remove_at drops pair pos, shifting the later pairs down by one.
  __device__ __forceinline__ void remove_at(const Tile<T>& t, int pos) {
    S nk[P], nv[P];
#pragma unroll
    for (int p = 0; p < P; ++p) {
      int s = slot(t, p);
      int src = s < pos ? s : s + 1;
      if (src > kCap - 1) src = kCap - 1;
      if (src < 0) src = 0;
      pair(t, src, nk[p], nv[p]);
    }
#pragma unroll
    for (int p = 0; p < P; ++p)
      if (slot(t, p) >= 0) {
        w[2 * p] = nk[p];
        w[2 * p + 1] = nv[p];
      }
  }
  // take keeps pairs [first, first+cnt) as pairs [0, cnt); stale slots repeat
  // the last of them (a split keeps [0, kSplit) or [kSplit, kCap)).
  __device__ __forceinline__ void take(const Tile<T>& t, int first, int cnt) {
    S nk[P], nv[P];
#pragma unroll
    for (int p = 0; p < P; ++p) {
      int s = slot(t, p), e = s < cnt ? s : cnt - 1;
      pair(t, (e < 0 ? 0 : e) + first, nk[p], nv[p]);
    }
#pragma unroll
    for (int p = 0; p < P; ++p)
      if (slot(t, p) >= 0) {
        w[2 * p] = nk[p];
        w[2 * p + 1] = nv[p];
      }
  }

  // Stores (the caller holds the latch or the node is not yet published).
  __device__ __forceinline__ void store_all(const Pool<S>& pool, uint32_t idx, const Tile<T>& t) const {
    st_chunk(pool.node(idx) + t.rank * 16, w);
  }
  __device__ __forceinline__ void store_pairs(const Pool<S>& pool, uint32_t idx, const Tile<T>& t) const {
    if ((int)t.rank >= F) st_chunk(pool.node(idx) + t.rank * 16, w);
  }
  // store_link_high writes link and high (the split node's new right edge).
  __device__ __forceinline__ void store_link_high(const Pool<S>& pool, uint32_t idx, const Tile<T>& t) const {
    char* n = pool.node(idx);
    if constexpr (sizeof(S) == 4) {
      if (t.rank == 0) {
        st_u32(n + 4, link);
        st_u32(n + 12, (uint32_t)high);
      }
    } else {
      if (t.rank == 0) st_u32(n + 4, link);
      if (t.rank == 1) st_u64(n + 16, high);
    }
  }
};

template <typename S, int T>
__device__ __forceinline__ bool try_latch(const Pool<S>& pool, uint32_t idx, const Tile<T>& t) {
  uint32_t old = 0;
  if (t.rank == 0) old = atomicOr((unsigned*)pool.node(idx), kLatch);
  old = t.shfl(old, 0);
  if (old & kLatch) return false;
  fence();  // §4.1: the latch is ordered before the re-read and the writes
  return true;
}
// release publishes meta m (latch clear) after the fence that orders this tile's
// writes before it (§4.1).
template <typename S, int T>
__device__ __forceinline__ void release(const Pool<S>& pool, uint32_t idx, uint32_t m, const Tile<T>& t) {
  fence();
  t.sync();
  if (t.rank == 0) st_u32(pool.node(idx), m & ~kLatch);
  t.sync();
}
// unlatch releases a node that was not modified.
template <typename S, int T>
__device__ __forceinline__ void unlatch(const Pool<S>& pool, uint32_t idx, uint32_t m, const Tile<T>& t) {
  t.sync();
  if (t.rank == 0) st_u32(pool.node(idx), m & ~kLatch);
  t.sync();
}

// sane rejects what a torn or stale read may show: a count past capacity, a link
// outside the pool.
template <typename S>
__device__ __forceinline__ bool sane(const Pool<S>& pool, const Node<S>& n) {
  return n.count() <= kCap && (n.link == kNone || (n.link != 0 && n.link < pool.cap));
}

// child returns the child pointer for k in internal node n, or kNone when the
// node does not route k (a torn read).
template <typename S, int T>
__device__ __forceinline__ uint32_t child_for(const Pool<S>& pool, const Node<S>& n, S k, const Tile<T>& t) {
  int i = n.count_le(t, k) - 1;
  if (i < 0) return kNone;
  S ck, cv;
  n.pair(t, i, ck, cv);
  uint32_t c = (uint32_t)cv;
  if (c == 0 || c >= pool.cap) return kNone;
  return c;
}

// read_leaf_validated reads leaf idx with the seqlock protocol: meta (acquire),
// the chunks, a fence, meta again; it retries while latched or changed. It
// returns false when it gave up.
template <typename S, int T>
__device__ bool read_leaf_validated(const Pool<S>& pool, uint32_t idx, Node<S>& n, const Tile<T>& t) {
  unsigned ns = 32;
  for (int i = 0; i < kSeqlockTries; ++i) {
    uint32_t m1 = 0;
    if (t.rank == 0) m1 = ld_acquire_u32(pool.node(idx));
    m1 = t.shfl(m1, 0);
    if (m1 & kLatch) {
      backoff(ns);
      continue;
    }
    n.load(pool, idx, kStrong, t);
    fence();
    uint32_t m2 = 0;
    if (t.rank == 0) m2 = ld_relaxed_u32(pool.node(idx));
    m2 = t.shfl(m2, 0);
    if (m1 == m2 && n.meta == m1) return true;
  }
  return false;
}

// ---- queries ---------------------------------------------------------------

// descend finds the leaf whose range holds k and leaves it in n. In validated
// mode the leaf is read with the seqlock. Returns false on retry exhaustion.
// (Phased batches walk the tree in lockstep waves instead, below; they come here
// only for a query the lockstep walk could not route.)
template <typename S, int T>
__device__ bool descend(const Pool<S>& pool, S k, bool validated, Node<S>& n, uint32_t& cur, uint32_t& steps,
                        const Tile<T>& t) {
  cur = 0;
  int expect = -1;
  bool strong = false;
  while (steps++ < kMaxSteps) {
    bool checked = false;
    if (validated && expect == 0) {
      if (!read_leaf_validated(pool, cur, n, t)) return false;
      checked = true;
    } else {
      n.load(pool, cur, strong ? kStrong : (validated ? kPlain : kNC), t);
    }
    if (!sane(pool, n) || (expect >= 0 && (int)n.level() != expect) || k < n.low) {
      cur = 0;
      expect = -1;
      strong = true;
      continue;
    }
    if (n.link != kNone && k >= n.high) {
      cur = n.link;
      expect = (int)n.level();
      continue;
    }
    if (n.level() == 0) {
      if (validated && !checked) {
        expect = 0;  // re-read this leaf under the seqlock
        continue;
      }
      return true;
    }
    uint32_t c = child_for(pool, n, k, t);
    if (c == kNone) {
      cur = 0;
      expect = -1;
      strong = true;
      continue;
    }
    expect = (int)n.level() - 1;
    cur = c;
  }
  return false;
}

// next_leaf reads the right sibling of leaf n into n (validated when asked).
template <typename S, int T>
__device__ bool next_leaf(const Pool<S>& pool, bool validated, Node<S>& n, const Tile<T>& t) {
  uint32_t nx = n.link;
  if (validated) return read_leaf_validated(pool, nx, n, t);
  n.load(pool, nx, kNC, t);
  return true;
}

template <typename S, int T>
__device__ int op_lookup(const Pool<S>& pool, S k, bool validated, S& v, bool& found, const Tile<T>& t) {
  Node<S> n;
  uint32_t cur, steps = 0;
  found = false;
  if (!descend(pool, k, validated, n, cur, steps, t)) return kFailRetry;
  int j = n.find(t, k);
  if (j >= 0) {
    S kk;
    n.pair(t, j, kk, v);
    found = true;
  }
  return kOK;
}

// op_successor finds the smallest key > k.
template <typename S, int T>
__device__ int op_successor(const Pool<S>& pool, S k, bool validated, S& rk, S& rv, bool& found, const Tile<T>& t) {
  Node<S> n;
  uint32_t cur, steps = 0;
  found = false;
  if (!descend(pool, k, validated, n, cur, steps, t)) return kFailRetry;
  while (steps++ < kMaxSteps + (uint32_t)pool.cap) {
    int j = n.count_le(t, k);  // first slot with key > k
    if (j < (int)n.count()) {
      n.pair(t, j, rk, rv);
      found = true;
      return kOK;
    }
    if (n.link == kNone) return kOK;
    if (!sane(pool, n) || !next_leaf(pool, validated, n, t)) return kFailRetry;
  }
  return kFailRetry;
}

// op_predecessor finds the largest key < k: the largest key <= q with q = k-1,
// moving q below a leaf's low fence when the leaf has no candidate (no left links).
template <typename S, int T>
__device__ int op_predecessor(const Pool<S>& pool, S k, bool validated, S& rk, S& rv, bool& found,
                              const Tile<T>& t) {
  found = false;
  if (k == 0) return kOK;
  S q = k - 1;
  Node<S> n;
  uint32_t cur, steps = 0;
  while (steps < kMaxSteps) {
    if (!descend(pool, q, validated, n, cur, steps, t)) return kFailRetry;
    int c = n.count_le(t, q);
    if (c > 0) {
      n.pair(t, c - 1, rk, rv);
      found = true;
      return kOK;
    }
    if (n.low == 0) return kOK;
    q = n.low - 1;
  }
  return kFailRetry;
}

// op_range counts the keys in [lo, hi) (none when lo >= hi) and writes up to
// limit of the pairs to outK/outV (which may be null when limit is 0).
template <typename S, typename K, typename V, int T>
__device__ int op_range(const Pool<S>& pool, S lo, S hi, bool validated, K* outK, V* outV, uint32_t limit,
                        uint32_t& total, const Tile<T>& t) {
  total = 0;
  if (lo >= hi) return kOK;
  Node<S> n;
  uint32_t cur, steps = 0;
  if (!descend(pool, lo, validated, n, cur, steps, t)) return kFailRetry;
  while (steps++ < kMaxSteps + (uint32_t)pool.cap) {
    int a = n.count_lt(t, lo), b = n.count_lt(t, hi);
    if (b > a) {
      if (outK) {
#pragma unroll
        for (int p = 0; p < Node<S>::P; ++p) {
          int s = n.slot(t, p);
          if (s >= a && s < b) {
            uint32_t at = total + (uint32_t)(s - a);
            if (at < limit) {
              outK[at] = (K)n.key(p);
              outV[at] = (V)n.val(p);
            }
          }
        }
      }
      total += (uint32_t)(b - a);
    }
    if (n.link == kNone || hi <= n.high) return kOK;  // keys to the right are >= high
    if (!sane(pool, n) || !next_leaf(pool, validated, n, t)) return kFailRetry;
  }
  return kFailRetry;
}

// ---- updates ---------------------------------------------------------------

// split_root splits the latched, full root in place: its pairs move to two new
// nodes and the root becomes their parent, one level up. The root's latch is
// released either way.
template <typename S, int T>
__device__ int split_root(const Pool<S>& pool, Node<S>& n, const Tile<T>& t) {
  uint32_t l = 0;
  if (t.rank == 0) l = pool.alloc(2);
  l = t.shfl(l, 0);
  if (l == kNone) {
    unlatch(pool, 0, n.meta, t);
    return kFailPool;
  }
  uint32_t r = l + 1;
  S sk, sv;
  n.pair(t, kSplit, sk, sv);
  uint32_t lvl = n.level();
  Node<S> a = n, b = n;
  a.take(t, 0, kSplit);
  a.set_header(t, m_make(kSplit, lvl, 0), r, n.low, sk);
  b.take(t, kSplit, kCap - kSplit);
  b.set_header(t, m_make(kCap - kSplit, lvl, 0), kNone, sk, n.high);
  a.store_all(pool, l, t);
  b.store_all(pool, r, t);
  fence();  // the new nodes are complete before the root points at them
  // The root: (low -> l), (sk -> r); stale slots repeat the last entry.
  Node<S> root = n;
#pragma unroll
  for (int p = 0; p < Node<S>::P; ++p) {
    int s = root.slot(t, p);
    if (s >= 0) {
      root.w[2 * p] = s == 0 ? n.low : sk;
      root.w[2 * p + 1] = s == 0 ? (S)l : (S)r;
    }
  }
  root.store_pairs(pool, 0, t);
  release(pool, 0, m_make(2, lvl + 1, ((n.meta >> 16) & 0x7fffu) + 1), t);
  return kOK;
}

// Writer state of one operation: where it is, the last-known parent, and the
// level it expects at cur.
struct Path {
  uint32_t cur, parent;
  int expect, parent_level;
  bool strong;
  unsigned ns;
  __device__ __forceinline__ void to_root() {
    cur = 0;
    parent = kNone;
    expect = -1;
    parent_level = -1;
    strong = true;
  }
  // to_parent restarts from the last-known parent (or the root if unknown).
  __device__ __forceinline__ void to_parent() {
    if (parent == kNone) {
      to_root();
      return;
    }
    cur = parent;
    expect = parent_level;
    parent = kNone;
    parent_level = -1;
    strong = true;
  }
};

// op_insert inserts (k, v) or replaces the value of k (Algorithm 2 with the
// changes described in doc.go). added is set to 1 when k was new.
template <typename S, int T>
__device__ int op_insert(const Pool<S>& pool, S k, S v, int& added, const Tile<T>& t) {
  Path ps;
  ps.to_root();
  ps.strong = false;
  ps.ns = 32;
  Node<S> n;
  for (uint32_t step = 0; step < kMaxSteps; ++step) {
    n.load(pool, ps.cur, ps.strong ? kStrong : kPlain, t);
    if (!sane(pool, n) || (ps.expect >= 0 && (int)n.level() != ps.expect) || k < n.low) {
      ps.to_root();
      continue;
    }
    if (n.link != kNone && k >= n.high) {
      ps.cur = n.link;
      ps.expect = (int)n.level();
      continue;
    }
    bool leaf = n.level() == 0, full = n.count() == kCap;
    if (leaf || full) {
      if (!try_latch(pool, ps.cur, t)) {
        backoff(ps.ns);
        ps.to_parent();
        continue;
      }
      n.load(pool, ps.cur, kStrong, t);
      if (!sane(pool, n) || (ps.expect >= 0 && (int)n.level() != ps.expect) || k < n.low) {
        unlatch(pool, ps.cur, n.meta, t);
        ps.to_root();
        continue;
      }
      if (n.link != kNone && k >= n.high) {  // split since we read it: move right
        unlatch(pool, ps.cur, n.meta, t);
        ps.cur = n.link;
        ps.expect = (int)n.level();
        continue;
      }
      leaf = n.level() == 0;
      full = n.count() == kCap;
      if (full) {
        if (ps.cur == 0) {
          if (split_root(pool, n, t) == kFailPool) return kFailPool;
          ps.to_root();
          continue;
        }
        if (ps.parent == kNone) {  // the parent is unknown: restart from the root
          unlatch(pool, ps.cur, n.meta, t);
          ps.to_root();
          continue;
        }
        // Spin case 1, bounded: latch the parent.
        bool got = false;
        unsigned ns = 32;
        for (int i = 0; i < kParentSpin && !got; ++i) {
          got = try_latch(pool, ps.parent, t);
          if (!got) backoff(ns);
        }
        if (!got) {
          unlatch(pool, ps.cur, n.meta, t);
          ps.to_parent();
          continue;
        }
        Node<S> p;
        p.load(pool, ps.parent, kStrong, t);
        int pi = p.count_le(t, k) - 1;
        S pk = 0, pv = 0;
        if (pi >= 0) p.pair(t, pi, pk, pv);
        bool true_parent = sane(pool, p) && (int)p.level() == (int)n.level() + 1 && k >= p.low &&
                           (p.link == kNone || k < p.high) && pi >= 0 && (uint32_t)pv == ps.cur;
        if (!true_parent) {  // the parent split (or the root grew): restart from it
          unlatch(pool, ps.parent, p.meta, t);
          unlatch(pool, ps.cur, n.meta, t);
          ps.to_parent();
          continue;
        }
        if (p.count() == kCap) {  // the parent filled up meanwhile: restart from the root
          unlatch(pool, ps.parent, p.meta, t);
          unlatch(pool, ps.cur, n.meta, t);
          ps.to_root();
          continue;
        }
        uint32_t r = 0;
        if (t.rank == 0) r = pool.alloc(1);
        r = t.shfl(r, 0);
        if (r == kNone) {
          unlatch(pool, ps.parent, p.meta, t);
          unlatch(pool, ps.cur, n.meta, t);
          return kFailPool;
        }
        S sk, sv;
        n.pair(t, kSplit, sk, sv);
        Node<S> right = n;
        right.take(t, kSplit, kCap - kSplit);
        right.set_header(t, m_make(kCap - kSplit, n.level(), 0), n.link, sk, n.high);
        right.store_all(pool, r, t);
        fence();  // the new node is complete before anything points at it
        uint32_t pc = p.count();
        p.insert_at(t, pi + 1, sk, (S)r);
        p.store_pairs(pool, ps.parent, t);
        uint32_t lm = n.meta;
        n.link = r;
        n.high = sk;
        n.store_link_high(pool, ps.cur, t);
        release(pool, ps.parent, m_next(p.meta, pc + 1), t);
        release(pool, ps.cur, m_next(lm, kSplit), t);
        if (k >= sk) ps.cur = r;
        ps.expect = (int)n.level();
        continue;  // parent stays the last-known parent
      }
      if (leaf) {
        int j = n.find(t, k);
        if (j >= 0) {  // replace the value
#pragma unroll
          for (int q = 0; q < Node<S>::P; ++q)
            if (n.slot(t, q) == j) n.w[2 * q + 1] = v;
          n.store_pairs(pool, ps.cur, t);
          release(pool, ps.cur, m_next(n.meta, n.count()), t);
          added = 0;
        } else {
          int pos = n.count_lt(t, k);
          uint32_t c = n.count();
          n.insert_at(t, pos, k, v);
          n.store_pairs(pool, ps.cur, t);
          release(pool, ps.cur, m_next(n.meta, c + 1), t);
          added = 1;
        }
        return kOK;
      }
      // An internal node that is no longer full (the first read was stale).
      unlatch(pool, ps.cur, n.meta, t);
    }
    uint32_t c = child_for(pool, n, k, t);
    if (c == kNone) {
      ps.to_root();
      continue;
    }
    ps.parent = ps.cur;
    ps.parent_level = (int)n.level();
    ps.expect = (int)n.level() - 1;
    ps.cur = c;
  }
  return kFailRetry;
}

// op_delete removes k if present (no merging of underfull nodes). removed is set
// to 1 when k was present.
template <typename S, int T>
__device__ int op_delete(const Pool<S>& pool, S k, int& removed, const Tile<T>& t) {
  Path ps;
  ps.to_root();
  ps.strong = false;
  ps.ns = 32;
  Node<S> n;
  removed = 0;
  for (uint32_t step = 0; step < kMaxSteps; ++step) {
    n.load(pool, ps.cur, ps.strong ? kStrong : kPlain, t);
    if (!sane(pool, n) || (ps.expect >= 0 && (int)n.level() != ps.expect) || k < n.low) {
      ps.to_root();
      continue;
    }
    if (n.link != kNone && k >= n.high) {
      ps.cur = n.link;
      ps.expect = (int)n.level();
      continue;
    }
    if (n.level() != 0) {
      uint32_t c = child_for(pool, n, k, t);
      if (c == kNone) {
        ps.to_root();
        continue;
      }
      ps.parent = ps.cur;
      ps.parent_level = (int)n.level();
      ps.expect = (int)n.level() - 1;
      ps.cur = c;
      continue;
    }
    // Spin case 3 becomes a restart from the last-known parent.
    if (!try_latch(pool, ps.cur, t)) {
      backoff(ps.ns);
      ps.to_parent();
      continue;
    }
    n.load(pool, ps.cur, kStrong, t);
    if (!sane(pool, n) || n.level() != 0 || k < n.low) {
      unlatch(pool, ps.cur, n.meta, t);
      ps.to_root();
      continue;
    }
    if (n.link != kNone && k >= n.high) {
      unlatch(pool, ps.cur, n.meta, t);
      ps.cur = n.link;
      ps.expect = 0;
      continue;
    }
    int j = n.find(t, k);
    if (j < 0) {
      unlatch(pool, ps.cur, n.meta, t);
      return kOK;
    }
    uint32_t c = n.count();
    n.remove_at(t, j);
    n.store_pairs(pool, ps.cur, t);
    release(pool, ps.cur, m_next(n.meta, c - 1), t);
    removed = 1;
    return kOK;
  }
  return kFailRetry;
}

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

// tile_id is this tile's index in the grid; tile_count the grid's tiles.
template <int T>
__device__ __forceinline__ uint64_t tile_id() {
  return (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) / T;
}
template <int T>
__device__ __forceinline__ uint64_t tile_count() {
  return gridDim.x * (uint64_t)blockDim.x / T;
}

// add_keys adds each tile's change of the key count into one atomic per block.
// Every thread of the block must call it.
__device__ __forceinline__ void add_keys(unsigned long long* ctl, long long delta, bool leader) {
  __shared__ long long block_delta;
  if (threadIdx.x == 0) block_delta = 0;
  __syncthreads();
  if (leader && delta) atomicAdd((unsigned long long*)&block_delta, (unsigned long long)delta);
  __syncthreads();
  if (threadIdx.x == 0 && block_delta) atomicAdd(&ctl[1], (unsigned long long)block_delta);
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
  int r = op_lookup(pool, (S)keys[i], true, v, found, t);
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
  int r = predecessor ? op_predecessor(pool, k, true, rk, rv, found, t) : op_successor(pool, k, true, rk, rv, found, t);
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
  int r = op_range<S, K, V, T>(pool, (S)lo[i], (S)hi[i], true, offsets ? out_keys + off : nullptr,
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
  int added = 0;
  if (i < n) report_result(pool, op_insert(pool, (S)keys[i], (S)vals[i], added, t));
  add_keys(ctl, added, t.rank == 0);
}

template <typename K, typename V>
__device__ void delete_batch(char* base, uint64_t cap, unsigned long long* ctl, uint32_t* status, const K* keys,
                             uint64_t n) {
  using S = SlotOf<K, V>;
  constexpr int T = Lay<S>::kTile;
  uint64_t i = tile_id<T>();
  Tile<T> t;
  Pool<S> pool{base, cap, ctl, status};
  int removed = 0;
  if (i < n) report_result(pool, op_delete(pool, (S)keys[i], removed, t));
  add_keys(ctl, -(long long)removed, t.rank == 0);
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
        r = op_insert(pool, k, v, d, t);
        delta = d;
        break;
      case kOpDelete:
        r = op_delete(pool, k, d, t);
        delta = -d;
        break;
      case kOpSuccessor:
        r = op_successor(pool, k, true, rk, rv, found, t);
        break;
      case kOpPredecessor:
        r = op_predecessor(pool, k, true, rk, rv, found, t);
        break;
      case kOpCount:
        r = op_range<S, K, V, T>(pool, k, h, true, nullptr, nullptr, 0, cnt, t);
        break;
      case kOpLookup:
        r = op_lookup(pool, k, true, rv, found, t);
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
  add_keys(ctl, delta, t.rank == 0);
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
      report_result(pool, op_lookup(pool, pick(k, r), false, val, found, t));
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
      int res = predecessor ? op_predecessor(pool, kr, false, a, b, f, t) : op_successor(pool, kr, false, a, b, f, t);
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
      int res = op_range<S, K, V, Wv::T>(pool, pick(lo, r), pick(hi, r), false, offsets ? out_keys + o : nullptr,
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

// mark_last flags the last element of each run of equal keys (sorted input), so
// that a stable sort followed by selection keeps the last of duplicates.
template <typename K>
__device__ void mark_last(const K* keys, uint64_t n, uint8_t* flags) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    flags[i] = (i + 1 == n || keys[i] != keys[i + 1]) ? 1 : 0;
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
