// blink.cuh: the B-link tree core shared by package btree (btree.cu) and
// package mvbtree (mvbtree.cu): node layouts, tiles, latches, the seqlock
// read, the descent with restarts, and the operations on one key (lookup,
// successor, predecessor, range, insert with proactive splits, delete), each
// parameterized by
//
//   L  the node layout (Lay<S, Versioned>): slot type S (uint32_t for 128-byte
//      nodes, uint64_t for 256-byte ones) and whether the node carries a
//      version (ts, prev) for mvbtree (see Layout below);
//   P  the node pool: how an address becomes a pointer (node(a), and
//      chunk(a, rank): the calling lane's 16 bytes, rank being its rank in
//      its tile, which a pool may compute from a base per lane), which addresses a
//      link or child may hold, the root's address, allocation (btree: one
//      dense buffer indexed by node number with a bump counter; mvbtree:
//      SlabAlloc units, freeable);
//   Vr the versioner: what a writer does to a latched node before it changes
//      it (btree: nothing; mvbtree: copy the version an open snapshot can
//      see, stamp the node, splice versions nobody can see) and to a node it
//      creates.
//
// Layout. A node is 32 slots of S (128 or 256 bytes), read by a tile of
// lanes that each load one 16-byte chunk (8 lanes for 128 B, 16 for 256 B):
//
//   S = uint32: word 0 meta, 1 link, 2 low, 3 high, then 14 pairs
//               (versioned: 13 pairs, then word 30 ts, 31 prev)
//   S = uint64: meta u32 | link u32, low, high, pad (versioned: ts u32 | prev
//               u32), then 14 pairs
//
// so a versioned 128-byte node holds 13 pairs, every other layout 14. The
// narrow node keeps its version at the end rather than in the header so that
// its pairs start at a lane boundary, as every other layout's do: a lane's
// p-th pair is pair (lane - kFirst) * kPairs + p in all four layouts, and the
// lockstep searches need no odd-offset slot arithmetic (in the versioned
// narrow node, the last lane's second pair position holds the version).
// meta = count (bits 0-7) | level (8-15, 0 = leaf) | version (16-30) | latch (31).
// No bit of a key is taken: "no right sibling" is link == kNone, so every key
// value is usable. low is the node's fence key (immutable: a node keeps its
// lower bound for life), high the right sibling's low (meaningful only when
// link != kNone).
//
// Concurrency protocol (btree's doc.go has the contract):
//  * Writers latch a node with atomicOr on meta, fence, re-read it with strong
//    loads, write with strong stores, fence, and release by storing a new meta
//    (version + 1, latch clear).
//  * Writers and validated queries route with strong loads (other writers
//    change the nodes they read); phased queries, which run with no writer,
//    through the read-only cache.
//  * Readers take no latch. Routing tolerates torn or stale internal nodes: every
//    step checks the node's level and low fence, moves right through side links,
//    and restarts from the root on a misroute. Queries that may run beside writers
//    ("validated" mode) read leaves with a seqlock: acquire meta, read, fence,
//    re-read meta, retry on change.
//  * Every loop is bounded; giving up returns kFailRetry, a failed node
//    allocation kFailPool (the operation is then not applied and the tree
//    stays valid).
#pragma once
#include <stdint.h>

#include <type_traits>

#include "mem.cuh"

namespace wk {
namespace blink {

using mem::fence;
using mem::kNC;
using mem::kStrong;
using mem::ld_acquire_u32;
using mem::ld_chunk;
using mem::ld_relaxed_u32;
using mem::st_chunk;
using mem::st_u32;
using mem::st_u64;

constexpr uint32_t kNone = 0xffffffffu;
constexpr uint32_t kLatch = 0x80000000u;
constexpr uint32_t kMaxSteps = 1u << 17;  // node visits per operation before ErrRetryLimit
constexpr int kParentSpin = 256;          // bounded spin on a parent latch (spin case 1)
constexpr int kSeqlockTries = 1 << 14;    // validated node reads before ErrRetryLimit

// Result codes of one operation.
constexpr int kOK = 0;
constexpr int kFailPool = 1;
constexpr int kFailRetry = 2;

__device__ __forceinline__ uint32_t m_count(uint32_t m) { return m & 0xffu; }
__device__ __forceinline__ uint32_t m_level(uint32_t m) { return (m >> 8) & 0xffu; }
__device__ __forceinline__ uint32_t m_make(uint32_t count, uint32_t level, uint32_t version) {
  return count | (level << 8) | ((version & 0x7fffu) << 16);
}
// m_next is meta after a modification: new count, same level, version + 1, unlatched.
__device__ __forceinline__ uint32_t m_next(uint32_t m, uint32_t count) {
  return m_make(count, m_level(m), ((m >> 16) & 0x7fffu) + 1);
}

// Lay is a node layout: slot type S, versioned header or not.
template <typename S_, bool Versioned>
struct Lay {
  using S = S_;
  static constexpr bool kVersioned = Versioned;
  static constexpr bool kWide = sizeof(S) == 8;
  static constexpr int kTile = kWide ? 16 : 8;      // lanes per node
  static constexpr int kWords = kWide ? 2 : 4;      // slots per lane (16 bytes)
  static constexpr int kNodeBytes = kWide ? 256 : 128;
  static constexpr int kHeader = 4;                          // header slots: meta, link, low, high
  static constexpr int kCap = (Versioned && !kWide) ? 13 : 14;  // pairs per node
  // The version (ts u32, then prev u32) of a versioned node: the narrow
  // node's last two slots, the wide node's fourth header slot.
  static constexpr int kVersionByte = !Versioned ? -1 : kWide ? 24 : 120;
  static constexpr int kVersionLane = kVersionByte / 16;  // the lane whose chunk holds it
  static constexpr int kVersionWord = kVersionByte % 16 / (int)sizeof(S);  // its slot in that chunk
  static constexpr int kSplit = (kCap + 1) / 2;  // a split keeps pairs [0, kSplit) and moves the rest
  static constexpr int kPairs = kWords / 2;      // pair slots per lane
  static constexpr int kFirst = kHeader / kWords;  // first lane holding a pair
  static_assert(kHeader % kWords == 0, "pairs start at a lane boundary");
};

template <typename K, typename V>
using SlotOf = typename std::conditional<sizeof(K) == 8 || sizeof(V) == 8, uint64_t, uint32_t>::type;

// Wide<V>::type is the type a shuffle of V takes.
template <typename V>
struct Wide {
  using type = typename std::conditional<sizeof(V) == 8, unsigned long long, unsigned>::type;
};

// Tile: T consecutive lanes of a warp working on one operation at a time. All
// collectives use the tile's own mask, so tiles of one warp may diverge.
template <int T>
struct Tile {
  unsigned rank, base, mask;
  __device__ __forceinline__ Tile() {
    unsigned lane = mem::laneid();
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
  // up / down: lane r gets lane r - d's (r + d's) value, the first (last)
  // lanes their own.
  template <typename V>
  __device__ __forceinline__ V up(V v, unsigned d) const {
    return (V)__shfl_up_sync(mask, (typename Wide<V>::type)v, d, T);
  }
  template <typename V>
  __device__ __forceinline__ V down(V v, unsigned d) const {
    return (V)__shfl_down_sync(mask, (typename Wide<V>::type)v, d, T);
  }
  __device__ __forceinline__ void sync() const { __syncwarp(mask); }
};

__device__ __forceinline__ void backoff(unsigned& ns) {
  __nanosleep(ns);
  ns = ns < 1024 ? ns * 2 : 1024;
}

// Node is one tile's registers for one node: each lane holds its 16-byte chunk;
// the header fields are broadcast to the whole tile by decode().
template <typename L_>
struct Node {
  using L = L_;
  using S = typename L::S;
  static constexpr int T = L::kTile, P = L::kPairs, F = L::kFirst, W = L::kWords, H = L::kHeader;
  static constexpr int kCap = L::kCap, kSplit = L::kSplit;
  S w[L::kWords];
  uint32_t meta, link;
  S low, high;
  uint32_t ts, prev;  // versioned layouts only (the version's stamp, the next older version)

  __device__ __forceinline__ uint32_t count() const { return m_count(meta); }
  __device__ __forceinline__ uint32_t level() const { return m_level(meta); }

  // load reads node idx; with V false a versioned node's ts and prev are not
  // decoded (the routing reads of writers and of latest-version readers,
  // which never look at them, save two shuffles a level: ncu showed them
  // among the instructions mvbtree's insert kernel executes more than
  // btree's) and must not be read.
  template <bool V = L::kVersioned, class Pool>
  __device__ __forceinline__ void load(const Pool& pool, uint32_t idx, int mode, const Tile<T>& t) {
    ld_chunk(pool.chunk(idx, t.rank), w, mode);
    decode<V>(t);
  }
  template <bool V = L::kVersioned>
  __device__ __forceinline__ void decode(const Tile<T>& t) {
    static_assert(!V || L::kVersioned, "only versioned layouts carry a version");
    if constexpr (sizeof(S) == 4) {
      meta = t.shfl((uint32_t)w[0], 0);
      link = t.shfl((uint32_t)w[1], 0);
      low = t.shfl((uint32_t)w[2], 0);
      high = t.shfl((uint32_t)w[3], 0);
      if constexpr (V) {
        ts = t.shfl((uint32_t)w[L::kVersionWord], L::kVersionLane);
        prev = t.shfl((uint32_t)w[L::kVersionWord + 1], L::kVersionLane);
      }
    } else {
      uint64_t a = t.shfl((uint64_t)w[0], 0);
      meta = (uint32_t)a;
      link = (uint32_t)(a >> 32);
      low = t.shfl((uint64_t)w[1], 0);
      high = t.shfl((uint64_t)w[0], 1);
      if constexpr (V) {
        uint64_t v = t.shfl((uint64_t)w[L::kVersionWord], L::kVersionLane);
        ts = (uint32_t)v;
        prev = (uint32_t)(v >> 32);
      }
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
        if constexpr (!L::kVersioned) w[1] = 0;
      }
    }
  }
  // set_version writes ts and prev into registers and the version lane's chunk.
  __device__ __forceinline__ void set_version(const Tile<T>& t, uint32_t stamp, uint32_t older) {
    static_assert(L::kVersioned, "only versioned layouts carry a version");
    ts = stamp;
    prev = older;
    if (t.rank == L::kVersionLane) {
      if constexpr (sizeof(S) == 4) {
        w[L::kVersionWord] = stamp;
        w[L::kVersionWord + 1] = older;
      } else {
        w[L::kVersionWord] = (uint64_t)stamp | ((uint64_t)older << 32);
      }
    }
  }
  // set_stamp writes ts alone (prev, which may not have been decoded, stays
  // as the version lane's chunk holds it).
  __device__ __forceinline__ void set_stamp(const Tile<T>& t, uint32_t stamp) {
    static_assert(L::kVersioned, "only versioned layouts carry a version");
    ts = stamp;
    if (t.rank == L::kVersionLane) {
      if constexpr (sizeof(S) == 4) {
        w[L::kVersionWord] = stamp;
      } else {
        w[L::kVersionWord] = (w[L::kVersionWord] & 0xffffffff00000000ull) | (uint64_t)stamp;
      }
    }
  }
  // slot is the pair index of this lane's p-th pair position (negative for
  // header slots; kCap for the narrow versioned node's version).
  __device__ __forceinline__ static int slot(const Tile<T>& t, int p) { return ((int)t.rank - F) * P + p; }
  // holds reports whether pair position s holds a pair (writers store only those).
  __device__ __forceinline__ static bool holds(int s) { return s >= 0 && s < kCap; }
  __device__ __forceinline__ S key(int p) const { return w[2 * p]; }
  __device__ __forceinline__ S val(int p) const { return w[2 * p + 1]; }

  // pairs returns how many pair positions the searches read: the count,
  // clamped where a position past kCap holds the version (a count no
  // correct node has must not make the version look like a pair).
  __device__ __forceinline__ int pairs() const {
    if constexpr ((L::kWords * T - H) / 2 > kCap) return min((int)count(), kCap);
    else return (int)count();
  }
  // count_le returns how many of the node's keys are <= k (keys are sorted).
  __device__ __forceinline__ int count_le(const Tile<T>& t, S k) const {
    int n = 0, c = pairs();
#pragma unroll
    for (int p = 0; p < P; ++p) {
      int s = slot(t, p);
      n += __popc(t.ballot(s >= 0 && s < c && w[2 * p] <= k));
    }
    return n;
  }
  __device__ __forceinline__ int count_lt(const Tile<T>& t, S k) const {
    int n = 0, c = pairs();
#pragma unroll
    for (int p = 0; p < P; ++p) {
      int s = slot(t, p);
      n += __popc(t.ballot(s >= 0 && s < c && w[2 * p] < k));
    }
    return n;
  }
  // find returns the slot holding k, or -1.
  __device__ __forceinline__ int find(const Tile<T>& t, S k) const {
    int c = pairs(), at = -1;
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
    int src = F + s / P, sub = s % P;
    k = 0;
    v = 0;
#pragma unroll
    for (int q = 0; q < P; ++q) {
      S kq = t.shfl(w[2 * q], src), vq = t.shfl(w[2 * q + 1], src);
      if (sub == q) {
        k = kq;
        v = vq;
      }
    }
  }
  // pair_of fetches pair s where every lane of the tile asks for the same s:
  // each lane picks its own words of position s % P before the shuffles, so
  // the tile shuffles two words, not 2P (pair's). Tile collectives with
  // their run-time masks are what the writers spend most of their time on
  // (ncu: the JIT follows each group of shuffles with a convergence check, a
  // MATCH, a REDUX, a VOTE and a branch; docs/benchmarks.md).
  __device__ __forceinline__ void pair_of(const Tile<T>& t, int s, S& k, S& v) const {
    int src = F + s / P, sub = s % P;
    S kq = w[0], vq = w[1];
#pragma unroll
    for (int q = 1; q < P; ++q)
      if (sub == q) {
        kq = w[2 * q];
        vq = w[2 * q + 1];
      }
    k = t.shfl(kq, src);
    v = t.shfl(vq, src);
  }
  // value_le returns the value of the last pair whose key is <= k (false:
  // none). The keys are sorted, so the pairs <= k are a prefix: the last lane
  // whose first pair is in it holds the last of them, picks its value itself,
  // and one shuffle brings it to the tile — a ballot and a shuffle where
  // count_le and value_of take P ballots and a shuffle. (A torn read gives
  // some pair's value, as count_le's index would: callers check it.)
  __device__ __forceinline__ bool value_le(const Tile<T>& t, S k, S& v) const {
    int c = pairs(), s0 = slot(t, 0);
    unsigned b = t.ballot(s0 >= 0 && s0 < c && w[0] <= k);
    if (b == 0) return false;
    S vq = w[1];
#pragma unroll
    for (int q = 1; q < P; ++q)
      if (slot(t, q) < c && w[2 * q] <= k) vq = w[2 * q + 1];
    v = t.shfl(vq, 31 - __clz(b));
    return true;
  }
  // value_of is pair_of's value alone (one shuffle).
  __device__ __forceinline__ S value_of(const Tile<T>& t, int s) const {
    int src = F + s / P, sub = s % P;
    S vq = w[1];
#pragma unroll
    for (int q = 1; q < P; ++q)
      if (sub == q) vq = w[2 * q + 1];
    return t.shfl(vq, src);
  }
  // insert_at shifts pairs [pos, count) up by one and puts (k, v) at pos; stale slots
  // past the new count repeat the last pair (so a torn reader sees a real entry).
  // kNeighbourShifts: with P > 1 pairs a lane a pair moves within its lane
  // or from the lane before (after): insert_at takes two shuffles up and the
  // old last pair's two (for the stale slots), remove_at two down, where
  // gathering each position with pair() takes 2P a position. It made btree's
  // mixed batches 15% faster (H200); versioned nodes keep pair(): mvbtree's
  // insert kernel, at its 64-register bound, spilled more and built 3-6%
  // slower at 45M keys (docs/benchmarks.md).
  static constexpr bool kNeighbourShifts = P > 1 && !L::kVersioned;
  __device__ __forceinline__ void insert_at(const Tile<T>& t, int pos, S k, S v) {
    int c = (int)count() + 1;
    S nk[P], nv[P];
    if constexpr (kNeighbourShifts) {
      const S bk = t.up(w[2 * (P - 1)], 1), bv = t.up(w[2 * (P - 1) + 1], 1);  // the lane before's last pair
      S lk, lv;
      pair_of(t, c >= 2 ? c - 2 : 0, lk, lv);  // the last pair before the insert
#pragma unroll
      for (int p = 0; p < P; ++p) {
        const int s = slot(t, p);
        if (s >= c) {  // stale: repeats the new last pair
          nk[p] = c - 1 == pos ? k : lk;
          nv[p] = c - 1 == pos ? v : lv;
        } else if (s < pos) {
          nk[p] = w[2 * p];
          nv[p] = w[2 * p + 1];
        } else if (s == pos) {
          nk[p] = k;
          nv[p] = v;
        } else {
          nk[p] = p > 0 ? w[2 * p - 2] : bk;
          nv[p] = p > 0 ? w[2 * p - 1] : bv;
        }
      }
    } else {
#pragma unroll
      for (int p = 0; p < P; ++p) {
        int s = slot(t, p), e = s < c ? s : c - 1;
        int src = e < pos ? e : e - 1;
        S a, b;
        pair(t, src < 0 ? 0 : src, a, b);
        nk[p] = e == pos ? k : a;
        nv[p] = e == pos ? v : b;
      }
    }
    store(t, nk, nv);
  }
  // remove_at drops pair pos, shifting the later pairs down by one.
  // (kNeighbourShifts: see insert_at.)
  __device__ __forceinline__ void remove_at(const Tile<T>& t, int pos) {
    S nk[P], nv[P];
    if constexpr (kNeighbourShifts) {
      const S ak = t.down(w[0], 1), av = t.down(w[1], 1);  // the lane after's first pair
#pragma unroll
      for (int p = 0; p < P; ++p) {
        const int s = slot(t, p);
        if (s < pos || s + 1 > kCap - 1) {  // kept, or the last slot (pair()'s clamp: itself)
          nk[p] = w[2 * p];
          nv[p] = w[2 * p + 1];
        } else {
          nk[p] = p + 1 < P ? w[2 * p + 2] : ak;
          nv[p] = p + 1 < P ? w[2 * p + 3] : av;
        }
      }
    } else {
#pragma unroll
      for (int p = 0; p < P; ++p) {
        int s = slot(t, p);
        int src = s < pos ? s : s + 1;
        if (src > kCap - 1) src = kCap - 1;
        if (src < 0) src = 0;
        pair(t, src, nk[p], nv[p]);
      }
    }
    store(t, nk, nv);
  }
  // store writes the pairs a shift gathered into the lanes' slots.
  __device__ __forceinline__ void store(const Tile<T>& t, const S (&nk)[P], const S (&nv)[P]) {
#pragma unroll
    for (int p = 0; p < P; ++p)
      if (holds(slot(t, p))) {
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
    store(t, nk, nv);
  }
  // set_value replaces the value of pair j.
  __device__ __forceinline__ void set_value(const Tile<T>& t, int j, S v) {
#pragma unroll
    for (int q = 0; q < P; ++q)
      if (slot(t, q) == j) w[2 * q + 1] = v;
  }

  // Stores (the caller holds the latch or the node is not yet published).
  template <class Pool>
  __device__ __forceinline__ void store_all(const Pool& pool, uint32_t idx, const Tile<T>& t) const {
    st_chunk(pool.node(idx) + t.rank * 16, w);
  }
  // store_pairs writes the lanes that hold pairs and, in a versioned layout,
  // the version (ts, prev).
  template <class Pool>
  __device__ __forceinline__ void store_pairs(const Pool& pool, uint32_t idx, const Tile<T>& t) const {
    if ((int)t.rank >= F) st_chunk(pool.node(idx) + t.rank * 16, w);
    if constexpr (L::kVersioned && L::kVersionLane < F) {  // the wide node's version is in a header lane
      static_assert(sizeof(S) == 8, "the narrow node's version is in a pair lane");
      if (t.rank == L::kVersionLane) st_u64(pool.node(idx) + L::kVersionByte, (uint64_t)w[L::kVersionWord]);
    }
  }
  // store_link_high writes link and high (the split node's new right edge).
  template <class Pool>
  __device__ __forceinline__ void store_link_high(const Pool& pool, uint32_t idx, const Tile<T>& t) const {
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

// The latch protocol, ordered as the PTX memory model defines it: the
// latching rank's atomic and fence come before a tile barrier that every
// lane's later access follows, and the releasing rank fences after the
// barrier that every lane's writes precede (a shuffle alone does not
// synchronize at GPU scope in the model).

template <class Pool, int T>
__device__ __forceinline__ bool try_latch(const Pool& pool, uint32_t idx, const Tile<T>& t) {
  uint32_t old = 0;
  if (t.rank == 0) old = atomicOr((unsigned*)pool.node(idx), kLatch);
  old = t.shfl(old, 0);
  if (old & kLatch) return false;
  fence();  // §4.1: the latch is ordered before the re-read and the writes
  t.sync();
  return true;
}
// release publishes meta m (latch clear) after the fence that orders this tile's
// writes before it (§4.1).
template <class Pool, int T>
__device__ __forceinline__ void release(const Pool& pool, uint32_t idx, uint32_t m, const Tile<T>& t) {
  t.sync();
  if (t.rank == 0) {
    fence();
    st_u32(pool.node(idx), m & ~kLatch);
  }
  t.sync();
}
// unlatch releases a node that was not modified.
template <class Pool, int T>
__device__ __forceinline__ void unlatch(const Pool& pool, uint32_t idx, uint32_t m, const Tile<T>& t) {
  t.sync();
  if (t.rank == 0) st_u32(pool.node(idx), m & ~kLatch);
  t.sync();
}

// sane rejects what a torn or stale read may show: a count past capacity, a link
// outside the pool.
template <class Pool, class N>
__device__ __forceinline__ bool sane(const Pool& pool, const N& n) {
  return n.count() <= N::kCap && (n.link == kNone || pool.valid(n.link));
}

// misread tells whether node n, read on the way to k, cannot route it: a torn
// or stale read (not sane), a level other than the one expected (expect < 0:
// any, at the root), or k below n's low fence (a node never lowers its
// fence, so k belongs left of it). The caller restarts from the root (or
// its last-known parent). Every routing step of the core and mvbtree's
// snapshot descent checks its node with misread and then past_high.
template <class Pool, class N>
__device__ __forceinline__ bool misread(const Pool& pool, const N& n, typename N::S k, int expect) {
  return !sane(pool, n) || (expect >= 0 && (int)n.level() != expect) || k < n.low;
}

// past_high tells whether k lies right of node n (n split since its parent
// was read, or the parent is stale): the caller moves right through n.link,
// expecting n's level.
template <class N>
__device__ __forceinline__ bool past_high(const N& n, typename N::S k) {
  return n.link != kNone && k >= n.high;
}

// child_for returns the child pointer for k in internal node n, or kNone when the
// node does not route k (a torn read).
template <class Pool, class N, int T>
__device__ __forceinline__ uint32_t child_for(const Pool& pool, const N& n, typename N::S k, const Tile<T>& t) {
  typename N::S v;
  if (!n.value_le(t, k, v)) return kNone;
  uint32_t c = (uint32_t)v;
  if (!pool.valid(c)) return kNone;
  return c;
}

// read_validated reads node idx with the seqlock protocol: meta (acquire),
// the chunks, a fence, meta again; it retries while latched or changed. It
// returns false when it gave up. read_validated_v<false> leaves a versioned
// node's version undecoded (N::load's V).
template <bool V, class Pool, class N, int T>
__device__ bool read_validated_v(const Pool& pool, uint32_t idx, N& n, const Tile<T>& t) {
  unsigned ns = 32;
  for (int i = 0; i < kSeqlockTries; ++i) {
    // Every lane validates its own chunk: its acquire of meta, its load,
    // a fence, its re-read; the tile agrees when all lanes saw one meta.
    const char* p = pool.node(idx);
    uint32_t m1 = ld_acquire_u32(p);
    ld_chunk(p + t.rank * 16, n.w, kStrong);
    fence();
    uint32_t m2 = ld_relaxed_u32(p);
    uint32_t m0 = t.shfl(m1, 0);
    if (m0 & kLatch) {
      backoff(ns);
      continue;
    }
    if (t.ballot(m1 != m0 || m2 != m0) != 0) continue;
    n.template decode<V>(t);
    return true;
  }
  return false;
}
template <class Pool, class N, int T>
__device__ __forceinline__ bool read_validated(const Pool& pool, uint32_t idx, N& n, const Tile<T>& t) {
  return read_validated_v<N::L::kVersioned>(pool, idx, n, t);
}

// descend finds the leaf whose range holds k and leaves it in n (the latest
// version: a versioned node's version is not decoded). In validated mode the
// leaf is read with the seqlock. Returns false on retry exhaustion.
template <class Pool, class N, int T>
__device__ bool descend(const Pool& pool, typename N::S k, bool validated, N& n, uint32_t& cur, uint32_t& steps,
                        const Tile<T>& t) {
  cur = pool.root();
  int expect = -1;
  bool strong = false;
  while (steps++ < kMaxSteps) {
    bool checked = false;
    if (validated && expect == 0) {
      if (!read_validated_v<false>(pool, cur, n, t)) return false;
      checked = true;
    } else {
      n.template load<false>(pool, cur, strong || validated ? kStrong : kNC, t);
    }
    if (misread(pool, n, k, expect)) {
      cur = pool.root();
      expect = -1;
      strong = true;
      continue;
    }
    if (past_high(n, k)) {
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
      cur = pool.root();
      expect = -1;
      strong = true;
      continue;
    }
    expect = (int)n.level() - 1;
    cur = c;
  }
  return false;
}

// next_leaf reads the right sibling of leaf n into n (validated when asked;
// the latest version, as descend).
template <class Pool, class N, int T>
__device__ bool next_leaf(const Pool& pool, bool validated, N& n, const Tile<T>& t) {
  uint32_t nx = n.link;
  if (validated) return read_validated_v<false>(pool, nx, n, t);
  n.template load<false>(pool, nx, kNC, t);
  return true;
}

// A reader (the Rd of the queries below) finds the leaf of a key and the leaf
// to the right of one:
//   descend(pool, k, n, cur, steps, t)  false: retry bound exhausted
//   next(pool, n, steps, t)              n's right sibling (n.link != kNone)
// Latest reads the newest version of every node (btree's queries; mvbtree's
// of the latest version); mvbtree's snapshot reader reads the version a
// snapshot sees.
struct Latest {
  static constexpr bool kWalks = false;  // no version chains to walk
  bool validated;  // writers may run: leaves are read with the seqlock
  template <class Pool, class N, int T>
  __device__ __forceinline__ bool descend(const Pool& pool, typename N::S k, N& n, uint32_t& cur, uint32_t& steps,
                                          const Tile<T>& t) const {
    return blink::descend(pool, k, validated, n, cur, steps, t);
  }
  template <class Pool, class N, int T>
  __device__ __forceinline__ bool next(const Pool& pool, N& n, uint32_t&, const Tile<T>& t) const {
    return next_leaf(pool, validated, n, t);
  }
  // resolve: the lockstep waves' hook (blink_wave.cuh); the newest version
  // is the node as loaded.
  template <class Pool, class Wv, int R>
  __device__ __forceinline__ void resolve(const Pool&, Wv&, bool (&)[R]) const {}
};

template <class N, class Pool, class Rd, int T>
__device__ int op_lookup(const Pool& pool, const Rd& rd, typename N::S k, typename N::S& v, bool& found,
                         const Tile<T>& t) {
  N n;
  uint32_t cur, steps = 0;
  found = false;
  if (!rd.descend(pool, k, n, cur, steps, t)) return kFailRetry;
  int j = n.find(t, k);
  if (j >= 0) {
    v = n.value_of(t, j);
    found = true;
  }
  return kOK;
}

// op_successor finds the smallest key > k.
template <class N, class Pool, class Rd, int T>
__device__ int op_successor(const Pool& pool, const Rd& rd, typename N::S k, typename N::S& rk, typename N::S& rv,
                            bool& found, const Tile<T>& t) {
  N n;
  uint32_t cur, steps = 0;
  found = false;
  if (!rd.descend(pool, k, n, cur, steps, t)) return kFailRetry;
  while (steps++ < kMaxSteps + pool.walk_bound()) {
    int j = n.count_le(t, k);  // first slot with key > k
    if (j < (int)n.count()) {
      n.pair_of(t, j, rk, rv);
      found = true;
      return kOK;
    }
    if (n.link == kNone) return kOK;
    if (!sane(pool, n) || !rd.next(pool, n, steps, t)) return kFailRetry;
  }
  return kFailRetry;
}

// op_predecessor finds the largest key < k: the largest key <= q with q = k-1,
// moving q below a leaf's low fence when the leaf has no candidate (no left links).
template <class N, class Pool, class Rd, int T>
__device__ int op_predecessor(const Pool& pool, const Rd& rd, typename N::S k, typename N::S& rk,
                              typename N::S& rv, bool& found, const Tile<T>& t) {
  found = false;
  if (k == 0) return kOK;
  typename N::S q = k - 1;
  N n;
  uint32_t cur, steps = 0;
  while (steps < kMaxSteps) {
    if (!rd.descend(pool, q, n, cur, steps, t)) return kFailRetry;
    int c = n.count_le(t, q);
    if (c > 0) {
      n.pair_of(t, c - 1, rk, rv);
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
template <class N, typename K, typename V, class Pool, class Rd, int T>
__device__ int op_range(const Pool& pool, const Rd& rd, typename N::S lo, typename N::S hi, K* outK, V* outV,
                        uint32_t limit, uint32_t& total, const Tile<T>& t) {
  total = 0;
  if (lo >= hi) return kOK;
  N n;
  uint32_t cur, steps = 0;
  if (!rd.descend(pool, lo, n, cur, steps, t)) return kFailRetry;
  while (steps++ < kMaxSteps + pool.walk_bound()) {
    int a = n.count_lt(t, lo), b = n.count_lt(t, hi);
    if (b > a) {
      if (outK) {
#pragma unroll
        for (int p = 0; p < N::P; ++p) {
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
    if (!sane(pool, n) || !rd.next(pool, n, steps, t)) return kFailRetry;
  }
  return kFailRetry;
}

// ---- updates ---------------------------------------------------------------
//
// The versioner's hooks (btree's NoVersion does nothing). The tile holds
// idx's latch and n is what it read under it:
//   prepare(pool, n, t, slot)  take what the write of n will need (mvbtree:
//       the unit for a copy of the version a snapshot can still see); false:
//       out of memory, nothing taken (the caller unlatches and fails the
//       operation). Nothing else changes, so a prepared write may be dropped:
//   unprepare(pool, slot, t)   gives back what prepare took.
//   commit(pool, n, idx, slot, t)  make n's registers the version this write
//       produces (stamp, older versions) and keep what snapshots still see;
//       it cannot fail.
//   fresh(n, t)  n is a node this write creates.
// and kReadsVersion: whether the hooks read the version (ts, prev) of the
// nodes they are given; without it the latched loads leave it undecoded.

struct NoVersion {
  static constexpr bool kReadsVersion = false;
  struct Slot {};
  template <class Pool, class N, int T>
  __device__ __forceinline__ bool prepare(Pool&, const N&, const Tile<T>&, Slot&) {
    return true;
  }
  template <class Pool, int T>
  __device__ __forceinline__ void unprepare(Pool&, const Slot&, const Tile<T>&) {}
  template <class Pool, class N, int T>
  __device__ __forceinline__ void commit(Pool&, N&, uint32_t, const Slot&, const Tile<T>&) {}
  template <class N, int T>
  __device__ __forceinline__ void fresh(N&, const Tile<T>&) {}
};

// split_root splits the latched, full root in place: its pairs move to two new
// nodes and the root becomes their parent, one level up. The root's latch is
// released either way.
template <class Pool, class Vr, class N, int T>
__device__ int split_root(Pool& pool, Vr& ver, N& n, const Tile<T>& t) {
  using S = typename N::S;
  constexpr int kCap = N::kCap, kSplit = N::kSplit;
  const uint32_t root = pool.root();
  uint32_t l, r;
  if (!pool.alloc2(t, l, r)) {
    unlatch(pool, root, n.meta, t);
    return kFailPool;
  }
  typename Vr::Slot slot;
  if (!ver.prepare(pool, n, t, slot)) {
    pool.release(t, l);
    pool.release(t, r);
    unlatch(pool, root, n.meta, t);
    return kFailPool;
  }
  ver.commit(pool, n, root, slot, t);
  S sk, sv;
  n.pair_of(t, kSplit, sk, sv);
  uint32_t lvl = n.level();
  N a = n, b = n;
  a.take(t, 0, kSplit);
  a.set_header(t, m_make(kSplit, lvl, 0), r, n.low, sk);
  ver.fresh(a, t);
  b.take(t, kSplit, kCap - kSplit);
  b.set_header(t, m_make(kCap - kSplit, lvl, 0), kNone, sk, n.high);
  ver.fresh(b, t);
  a.store_all(pool, l, t);
  b.store_all(pool, r, t);
  fence();  // the new nodes are complete before the root points at them
  // The root: (low -> l), (sk -> r); stale slots repeat the last entry.
  N nr = n;
#pragma unroll
  for (int p = 0; p < N::P; ++p) {
    int s = nr.slot(t, p);
    if (N::holds(s)) {
      nr.w[2 * p] = s == 0 ? n.low : sk;
      nr.w[2 * p + 1] = s == 0 ? (S)l : (S)r;
    }
  }
  nr.store_pairs(pool, root, t);
  release(pool, root, m_make(2, lvl + 1, ((n.meta >> 16) & 0x7fffu) + 1), t);
  return kOK;
}

// Writer state of one operation: where it is, the last-known parent, and the
// level it expects at cur.
struct Path {
  uint32_t cur, parent, root;
  int expect, parent_level;
  unsigned ns;
  __device__ __forceinline__ void to_root() {
    cur = root;
    parent = kNone;
    expect = -1;
    parent_level = -1;
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
  }
};

// op_insert inserts (k, v) or replaces the value of k (Algorithm 2 with the
// changes described in btree's doc.go). added is set to 1 when k was new.
template <class N, class Pool, class Vr, int T>
__device__ int op_insert(Pool& pool, Vr& ver, typename N::S k, typename N::S v, int& added, const Tile<T>& t) {
  using S = typename N::S;
  constexpr int kCap = N::kCap, kSplit = N::kSplit;
  Path ps;
  ps.root = pool.root();
  ps.to_root();
  ps.ns = 32;
  N n;
  for (uint32_t step = 0; step < kMaxSteps; ++step) {
    n.template load<false>(pool, ps.cur, kStrong, t);  // routing: no version
    if (misread(pool, n, k, ps.expect)) {
      ps.to_root();
      continue;
    }
    if (past_high(n, k)) {
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
      n.template load<N::L::kVersioned && Vr::kReadsVersion>(pool, ps.cur, kStrong, t);
      if (misread(pool, n, k, ps.expect)) {
        unlatch(pool, ps.cur, n.meta, t);
        ps.to_root();
        continue;
      }
      if (past_high(n, k)) {  // split since we read it: move right
        unlatch(pool, ps.cur, n.meta, t);
        ps.cur = n.link;
        ps.expect = (int)n.level();
        continue;
      }
      leaf = n.level() == 0;
      full = n.count() == kCap;
      if (full && leaf) {
        int j = n.find(t, k);
        if (j >= 0) {  // replace the value in place: a full leaf need not split for it
          typename Vr::Slot slot;
          if (!ver.prepare(pool, n, t, slot)) {
            unlatch(pool, ps.cur, n.meta, t);
            return kFailPool;
          }
          ver.commit(pool, n, ps.cur, slot, t);
          n.set_value(t, j, v);
          n.store_pairs(pool, ps.cur, t);
          release(pool, ps.cur, m_next(n.meta, n.count()), t);
          added = 0;
          return kOK;
        }
      }
      if (full) {
        if (ps.cur == ps.root) {
          if (split_root(pool, ver, n, t) == kFailPool) return kFailPool;
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
        N p;
        p.template load<N::L::kVersioned && Vr::kReadsVersion>(pool, ps.parent, kStrong, t);
        int pi = p.count_le(t, k) - 1;
        S pk = 0, pv = 0;
        if (pi >= 0) p.pair_of(t, pi, pk, pv);
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
        uint32_t r;
        if (!pool.alloc1(t, r)) {
          unlatch(pool, ps.parent, p.meta, t);
          unlatch(pool, ps.cur, n.meta, t);
          return kFailPool;
        }
        typename Vr::Slot sp, sn;
        if (!ver.prepare(pool, p, t, sp)) {
          pool.release(t, r);
          unlatch(pool, ps.parent, p.meta, t);
          unlatch(pool, ps.cur, n.meta, t);
          return kFailPool;
        }
        if (!ver.prepare(pool, n, t, sn)) {
          ver.unprepare(pool, sp, t);
          pool.release(t, r);
          unlatch(pool, ps.parent, p.meta, t);
          unlatch(pool, ps.cur, n.meta, t);
          return kFailPool;
        }
        ver.commit(pool, p, ps.parent, sp, t);
        ver.commit(pool, n, ps.cur, sn, t);
        S sk, sv;
        n.pair_of(t, kSplit, sk, sv);
        N right = n;
        right.take(t, kSplit, kCap - kSplit);
        right.set_header(t, m_make(kCap - kSplit, n.level(), 0), n.link, sk, n.high);
        ver.fresh(right, t);
        right.store_all(pool, r, t);
        fence();  // the new node is complete before anything points at it
        uint32_t pc = p.count();
        p.insert_at(t, pi + 1, sk, (S)r);
        p.store_pairs(pool, ps.parent, t);
        uint32_t lm = n.meta;
        n.link = r;
        n.high = sk;
        n.store_link_high(pool, ps.cur, t);
        if constexpr (N::L::kVersioned) n.store_pairs(pool, ps.cur, t);  // its version (pairs unchanged)
        release(pool, ps.parent, m_next(p.meta, pc + 1), t);
        release(pool, ps.cur, m_next(lm, kSplit), t);
        if (k >= sk) ps.cur = r;
        ps.expect = (int)n.level();
        continue;  // parent stays the last-known parent
      }
      if (leaf) {
        typename Vr::Slot slot;
        if (!ver.prepare(pool, n, t, slot)) {
          unlatch(pool, ps.cur, n.meta, t);
          return kFailPool;
        }
        ver.commit(pool, n, ps.cur, slot, t);
        int j = n.find(t, k);
        if (j >= 0) {  // replace the value
          n.set_value(t, j, v);
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
template <class N, class Pool, class Vr, int T>
__device__ int op_delete(Pool& pool, Vr& ver, typename N::S k, int& removed, const Tile<T>& t) {
  Path ps;
  ps.root = pool.root();
  ps.to_root();
  ps.ns = 32;
  N n;
  removed = 0;
  for (uint32_t step = 0; step < kMaxSteps; ++step) {
    n.template load<false>(pool, ps.cur, kStrong, t);  // routing: no version
    if (misread(pool, n, k, ps.expect)) {
      ps.to_root();
      continue;
    }
    if (past_high(n, k)) {
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
    n.template load<N::L::kVersioned && Vr::kReadsVersion>(pool, ps.cur, kStrong, t);
    if (misread(pool, n, k, 0)) {
      unlatch(pool, ps.cur, n.meta, t);
      ps.to_root();
      continue;
    }
    if (past_high(n, k)) {
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
    typename Vr::Slot slot;
    if (!ver.prepare(pool, n, t, slot)) {
      unlatch(pool, ps.cur, n.meta, t);
      return kFailPool;
    }
    ver.commit(pool, n, ps.cur, slot, t);
    uint32_t c = n.count();
    n.remove_at(t, j);
    n.store_pairs(pool, ps.cur, t);
    release(pool, ps.cur, m_next(n.meta, c - 1), t);
    removed = 1;
    return kOK;
  }
  return kFailRetry;
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
  if (threadIdx.x == 0 && block_delta) atomicAdd(ctl, (unsigned long long)block_delta);
}

// build_node fills node n (registers) as node j of one level of a bulk-built
// tree, for tile t. keys/vals are sorted and distinct (m of them). Node j of
// the level holds pairs [j*fill, ...) (leaves) or children [j*fanout, ...) of
// the level below (children of them); it covers the pairs from j*span on.
// child(c) is the address of the level below's node c, next the address of
// node j+1 of this level (when there is one). The caller stamps and stores it.
template <class N, typename K, typename V, int T, class Child>
__device__ __forceinline__ void build_node(N& nd, const K* keys, const V* vals, uint64_t m, uint32_t level,
                                           uint64_t nodes, uint64_t children, uint32_t fill, uint32_t fanout,
                                           uint64_t span, uint64_t child_span, uint64_t j, uint32_t next,
                                           const Child& child, const Tile<T>& t) {
  using S = typename N::S;
  uint32_t cnt;
  if (level == 0) {
    uint64_t first = j * fill;
    cnt = (uint32_t)min((uint64_t)fill, m - first);
  } else {
    uint64_t first = j * fanout;
    cnt = (uint32_t)min((uint64_t)fanout, children - first);
  }
#pragma unroll
  for (int p = 0; p < N::P; ++p) {
    int s = nd.slot(t, p);
    if (!N::holds(s)) continue;
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
      v = (S)child(c);
    }
    nd.w[2 * p] = k;
    nd.w[2 * p + 1] = v;
  }
  S lo = j == 0 ? S(0) : (S)keys[j * span];
  bool last = j + 1 == nodes;
  S hi = last ? S(0) : (S)keys[(j + 1) * span];
  nd.set_header(t, m_make(cnt, level, 0), last ? kNone : next, lo, hi);
}

// mark_last flags the last element of each run of equal keys (sorted input), so
// that a stable sort followed by selection keeps the last of duplicates.
template <typename K>
__device__ void mark_last(const K* keys, uint64_t n, uint8_t* flags) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    flags[i] = (i + 1 == n || keys[i] != keys[i + 1]) ? 1 : 0;
}

}  // namespace blink
}  // namespace wk
