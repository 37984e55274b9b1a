// slabhash.cuh: the slab hash engine (Ashkiani, Farach-Colton, Owens, IPDPS
// 2018), templated on the slab layout. Every function that takes a Tile is
// called by all lanes of the tile with equal arguments and returns equal
// results in every lane; all branches on shuffled or balloted values are
// therefore tile-uniform, and the tile-masked intrinsics are well-formed
// even when the tiles of a warp diverge. The package documentation (doc.go)
// states and argues the concurrency protocol; comments here name the steps.
#pragma once
#include <stdint.h>
#include "hash.cuh"
#include "slaballoc.cuh"
#include "status.cuh"

namespace wk {
namespace sh {

using slab::kNull;
using slab::Pool;
using slab::Tile;
using slab::TileAllocator;

enum Kind : int { kMap = 0, kSet = 1, kMulti = 2 };
enum Op : uint32_t { kOpFind = 0, kOpInsert = 1, kOpDelete = 2, kOpDeleteAll = 3 };
enum Res : uint8_t {
  kResNotFound = 0,
  kResFound = 1,
  kResInserted = 2,
  kResPresent = 3,  // map: value replaced; set: already present
  kResRemoved = 4,
  kResFailed = 5,   // not applied: pool exhausted or retry limit (see the status word)
};

// The status flags (kStatusReservedKey, kStatusBadOp, kStatusBadRoom, ...)
// and the control block's words (enum Ctrl: status, the change in live
// entries, the failed elements, the reserved keys or bad op codes a scan
// found, the snapshot counter, the inserted elements — which also count the
// slots a batch consumed, as deletes leave tombstones —, the blocks that
// finished, and the pool's allocated units as the last block of an apply
// launch saw them, so the host reads both at once) are in the shared
// registry, status.cuh.

// Flags of an apply launch. kFlagRetry: run only the elements whose result
// is kResFailed (the host's rerun after growing the pool). kFlagCheckKeys:
// fail elements with a reserved key and report kStatusReservedKey, for
// batches of finds only, which change nothing (every other batch is scanned
// before it runs, so that nothing applies).
enum Flags : uint32_t { kFlagRetry = 1, kFlagCheckKeys = 2 };

// Bounds that only a corrupted structure could reach; reaching one reports
// kStatusRetryLimit instead of hanging.
constexpr uint32_t kMaxSteps = 1u << 26;
constexpr uint32_t kCasTries = 1u << 20;

template <typename K>
__device__ __forceinline__ constexpr K empty_key() { return ~K(0); }
template <typename K>
__device__ __forceinline__ constexpr K tomb_key() { return ~K(0) - 1; }

// Racing accesses to slabs are morally strong: relaxed at GPU scope (not
// cached in L1, so a re-read after a failed CAS sees the winner's write).
// The CPU emulation of the GPU (internal/emu) defines its own.
#ifndef WK_HOST_EMULATION
__device__ __forceinline__ uint32_t ldv32(const void* p) {
  uint32_t v;
  asm volatile("ld.relaxed.gpu.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint64_t ldv64(const void* p) {
  unsigned long long v;
  asm volatile("ld.relaxed.gpu.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void ldv128(const void* p, uint64_t& a, uint64_t& b) {
  unsigned long long x, y;
  asm volatile("ld.relaxed.gpu.v2.u64 {%0, %1}, [%2];" : "=l"(x), "=l"(y) : "l"(p) : "memory");
  a = x;
  b = y;
}
__device__ __forceinline__ void stv32(void* p, uint32_t v) {
  asm volatile("st.relaxed.gpu.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void stv64(void* p, uint64_t v) {
  asm volatile("st.relaxed.gpu.u64 [%0], %1;" ::"l"(p), "l"((unsigned long long)v) : "memory");
}
__device__ __forceinline__ void stv128(void* p, uint64_t a, uint64_t b) {
  asm volatile("st.relaxed.gpu.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"((unsigned long long)a), "l"((unsigned long long)b)
               : "memory");
}
#endif  // WK_HOST_EMULATION

template <typename T>
__device__ __forceinline__ T ldv(const void* p) {
  if constexpr (sizeof(T) == 4) return ldv32(p);
  else return ldv64(p);
}
template <typename T>
__device__ __forceinline__ T cas(void* p, T expect, T desired) {
  if constexpr (sizeof(T) == 4) return atomicCAS((unsigned*)p, (unsigned)expect, (unsigned)desired);
  else return atomicCAS((unsigned long long*)p, (unsigned long long)expect, (unsigned long long)desired);
}
template <typename T>
__device__ __forceinline__ void exch(void* p, T v) {
  if constexpr (sizeof(T) == 4) atomicExch((unsigned*)p, (unsigned)v);
  else atomicExch((unsigned long long*)p, (unsigned long long)v);
}

// Layout describes a slab. Pair layouts give each lane one slot of the slab
// (key and value together); the last lane's slot holds the next pointer
// (offset 0) and, for wide pairs, the unpublished-slot bits (offset 4).
// The paper's layout (WordLanes) gives each of 32 lanes one 32-bit word:
// keys in even lanes 0..28, values in odd lanes, lane 31 the next pointer.
template <typename K_, typename V_, int Kind_, int W_, bool WordLanes_>
struct Layout {
  using K = K_;
  using V = V_;
  static constexpr int kKind = Kind_;
  static constexpr int W = W_;
  static constexpr bool kWordLanes = WordLanes_;
  static constexpr bool kIsSet = Kind_ == kSet;
  // Packed: key and value change together in one 64-bit atomic (or there is
  // no value). Wide pairs publish the value after claiming the key.
  static constexpr bool kPacked = kIsSet || (sizeof(K) == 4 && sizeof(V) == 4);
  static constexpr bool kWide = !kPacked;
  static constexpr int kSlotBytes = kIsSet ? (int)sizeof(K) : (kPacked ? 8 : 16);
  static constexpr int kSlabBytes = kWordLanes ? 128 : W * kSlotBytes;
  static constexpr int kSlots = kWordLanes ? 15 : W - 1;
  static constexpr int kTailLane = W - 1;
  static constexpr int kNextOffset = kWordLanes ? 124 : (W - 1) * kSlotBytes;
  static constexpr int kAuxOffset = kNextOffset + 4;
  static constexpr int kValueOffset = 8;  // wide pairs
  static_assert(!kWordLanes || (W == 32 && sizeof(K) == 4 && sizeof(V) == 4 && !kIsSet),
                "the paper's word-per-lane layout is for 32-bit key-value pairs");
  static_assert(kSlots <= 31, "unpublished bits live in one word");

  __device__ static __forceinline__ bool slot_lane(int r) { return kWordLanes ? (r < 30 && !(r & 1)) : r < W - 1; }
  __device__ static __forceinline__ int slot_of(int lane) { return kWordLanes ? lane >> 1 : lane; }
  __device__ static __forceinline__ int lane_of(int slot) { return kWordLanes ? slot << 1 : slot; }
  __device__ static __forceinline__ char* slot_ptr(char* slab, int lane) {
    return slab + (kWordLanes ? lane * 4 : lane * kSlotBytes);
  }
  // lower returns the mask of lanes below lane (for ranks among a ballot).
  __device__ static __forceinline__ unsigned lower(int lane) { return (1u << lane) - 1; }
};

// Lane is one lane's view of a slab.
template <class L>
struct Lane {
  typename L::K key;
  typename L::V val;
  uint64_t raw0, raw1;  // the slot's bits as stored
  uint32_t tail;        // next pointer (meaningful in the tail lane)
  uint32_t aux;         // unpublished-slot bits (wide pairs, tail lane)
};

// load_pair reads one slot of a pair-layout slab (one lane, no shuffles).
template <class L>
__device__ __forceinline__ Lane<L> load_pair(const char* slab, int sl) {
  using K = typename L::K;
  using V = typename L::V;
  Lane<L> d;
  d.raw1 = 0;
  d.aux = 0;
  if constexpr (L::kSlotBytes == 4) {
    uint32_t w = ldv32(slab + sl * 4);
    d.key = (K)w;
    d.val = 0;
    d.raw0 = w;
    d.tail = w;
  } else if constexpr (L::kSlotBytes == 8) {
    uint64_t x = ldv64(slab + sl * 8);
    if constexpr (L::kIsSet) {
      d.key = (K)x;
      d.val = 0;
    } else {
      d.key = (K)(uint32_t)x;
      d.val = (V)(uint32_t)(x >> 32);
    }
    d.raw0 = x;
    d.tail = (uint32_t)x;
    d.aux = (uint32_t)(x >> 32);
  } else {
    uint64_t a, b;
    ldv128(slab + sl * 16, a, b);
    d.key = sizeof(K) == 4 ? (K)(uint32_t)a : (K)a;
    d.val = sizeof(V) == 4 ? (V)(uint32_t)b : (V)b;
    d.raw0 = a;
    d.raw1 = b;
    d.tail = (uint32_t)a;
    d.aux = (uint32_t)(a >> 32);
  }
  return d;
}

// load reads a slab, one coalesced access per lane. Pair slots of 8 bytes are
// read as one 64-bit single-copy-atomic access, so a 32/32 pair is a
// consistent snapshot; other layouts validate as the doc explains.
template <class L>
__device__ __forceinline__ Lane<L> load(const Tile<L::W>& t, const char* slab) {
  if constexpr (L::kWordLanes) {
    Lane<L> d;
    uint32_t w = ldv32(slab + t.rank * 4);
    uint32_t hi = t.shfl(w, (t.rank + 1) & 31);
    d.key = w;
    d.val = hi;
    d.raw0 = (uint64_t)hi << 32 | w;
    d.raw1 = 0;
    d.tail = w;
    d.aux = 0;
    return d;
  } else {
    return load_pair<L>(slab, t.rank);
  }
}

// store_slot writes a slot's raw bits (one lane). In the word layout the
// slot's lane is the key lane and the pair is written as one 64-bit store.
template <class L>
__device__ __forceinline__ void store_slot(char* slab, int lane, uint64_t raw0, uint64_t raw1) {
  char* p = L::slot_ptr(slab, lane);
  if constexpr (L::kWordLanes || L::kSlotBytes == 8) stv64(p, raw0);
  else if constexpr (L::kSlotBytes == 4) stv32(p, (uint32_t)raw0);
  else stv128(p, raw0, raw1);
}

// reset_slab sets every byte of a slab to all-ones: empty slots, no next
// pointer, no published slot.
template <class L>
__device__ __forceinline__ void reset_slab(const Tile<L::W>& t, char* slab) {
  if constexpr (L::kWordLanes) stv32(slab + t.rank * 4, 0xffffffffu);
  else store_slot<L>(slab, t.rank, ~0ull, ~0ull);
}

template <class L>
__device__ __forceinline__ uint32_t next_of(const Tile<L::W>& t, const char* slab) {
  uint32_t n = 0;
  if (t.rank == 0) n = ldv32(slab + L::kNextOffset);
  return t.shfl(n, 0);
}

template <typename K, typename V>
__device__ __forceinline__ uint64_t pack(K k, V v) {
  return (uint64_t)(uint32_t)v << 32 | (uint32_t)k;
}

// Ctx is what every operation needs to reach a table.
template <class L>
struct Ctx {
  char* heads;
  uint32_t nbuckets;
  uint32_t seed;
  Pool* pool;
  uint32_t* status;
  __device__ __forceinline__ char* head(uint32_t b) const { return heads + (size_t)b * L::kSlabBytes; }
  __device__ __forceinline__ char* unit(uint32_t a) const { return slab::unit_ptr<L::kSlabBytes>(pool, a); }
  __device__ __forceinline__ uint32_t bucket(typename L::K k) const { return __umulhi(hash_key(k, seed), nbuckets); }
};

// Counts is what an apply launch's warps add to the control block at its
// end (their sums, handed to sign_off): net entries added, elements
// failed, elements inserted, and pool units taken.
struct Counts {
  long long delta;
  uint32_t failed, inserted;
  long long used;  // units allocated minus units freed (the warp's allocator)
};

// A locator finds an element's bucket list and hears its outcome. TableLoc
// is one table's: the head of bucket(key), nothing to count. Other
// structures built of many tables over one pool supply their own (the
// graph's per-vertex locator, graph/graph.cu: the table of the element's
// source vertex, whose degree counts the element's Inserted and Removed).
// head is called once per element, when a lane takes it; counted by the
// lane that finishes it, with the change in live entries (non-zero). A
// locator whose kMayLack is true may return a null head: the element's
// table does not exist yet, so a find or delete of it is NotFound and an
// insert Failed with kStatusNoTable (its host makes the table and reruns
// the failed elements); TableLoc's check compiles away.
struct TableLoc {
  static constexpr bool kMayLack = false;
  template <class L>
  __device__ __forceinline__ char* head(const Ctx<L>& c, uint64_t, typename L::K k) const {
    return c.head(c.bucket(k));
  }
  __device__ __forceinline__ void counted(uint64_t, long long) const {}
};

// Out is an operation's result, equal in every lane.
template <class L>
struct Out {
  uint8_t code;
  typename L::V val;
  uint32_t count;
};

template <class L>
__device__ __forceinline__ Out<L> out(uint8_t code, typename L::V val = 0, uint32_t count = 0) {
  Out<L> o;
  o.code = code;
  o.val = val;
  o.count = count;
  return o;
}

// published returns the lanes of published slots (wide pairs); other
// layouts publish with the claiming CAS itself.
template <class L>
__device__ __forceinline__ unsigned published(const Tile<L::W>& t, const Lane<L>& d) {
  if constexpr (L::kWide) return ~t.shfl(d.aux, L::kTailLane);
  else return 0xffffffffu;
}

// try_claim takes an empty slot for (k, v) (one lane). Packed layouts claim
// and publish with one CAS; wide pairs claim the key word, store the value,
// fence, and clear the slot's unpublished bit (the release). When another
// element took the slot first it returns false with the key found there
// (seen) and, for packed pairs, the slot's bits (seen_raw).
template <class L>
__device__ __forceinline__ bool try_claim(char* slab, int lane, typename L::K k, typename L::V v,
                                          typename L::K& seen, uint64_t& seen_raw) {
  using K = typename L::K;
  char* p = L::slot_ptr(slab, lane);
  if constexpr (L::kIsSet) {
    const K old = cas<K>(p, empty_key<K>(), k);
    seen = old;
    seen_raw = (uint64_t)old;
    return old == empty_key<K>();
  } else if constexpr (L::kPacked) {
    const uint64_t old = cas<uint64_t>(p, ~0ull, pack(k, v));
    seen = (K)(uint32_t)old;
    seen_raw = old;
    return old == ~0ull;
  } else {
    const K old = cas<K>(p, empty_key<K>(), k);
    seen = old;
    seen_raw = 0;
    if (old != empty_key<K>()) return false;
    if constexpr (sizeof(typename L::V) == 4) stv32(p + L::kValueOffset, (uint32_t)v);
    else stv64(p + L::kValueOffset, (uint64_t)v);
    __threadfence();
    atomicAnd((unsigned*)(slab + L::kAuxOffset), ~(1u << lane));
    return true;
  }
}

template <class L>
__device__ __forceinline__ bool claim(char* slab, int lane, typename L::K k, typename L::V v) {
  typename L::K seen;
  uint64_t seen_raw;
  return try_claim<L>(slab, lane, k, v, seen, seen_raw);
}

enum Claim : int { kClaimFull = 0, kClaimInserted = 1, kClaimPresent = 2, kClaimReread = 3 };

// claim_first inserts (k, v) into the first slot of slab s, among the slots
// in e (bits in list order), that is still empty (one lane). Precondition:
// every slot of s that is not in e, and every slot of the slabs before s,
// was read holding neither EMPTY nor k (nor, for wide pairs, an unpublished
// k). A CAS that loses shows the slot's new key: if it is another key or a
// tombstone, the slot can never hold k, so the next slot of e is the new
// frontier and is tried at once; if it is k, a concurrent insert of k won
// (a set reports Present, a packed map replaces the value it just saw,
// anything else reads the slab again). Returns kClaimInserted,
// kClaimPresent, kClaimReread, or kClaimFull when other keys took every
// slot of e (s is then full of other keys).
template <class L>
__device__ __forceinline__ int claim_first(char* s, unsigned e, typename L::K k, typename L::V v) {
  while (e) {
    const int p = __ffs(e) - 1;
    e &= e - 1;
    typename L::K seen;
    uint64_t raw;
    if (try_claim<L>(s, p, k, v, seen, raw)) return kClaimInserted;
    if (L::kKind != kMulti && seen == k) {
      if constexpr (L::kIsSet) {
        return kClaimPresent;
      } else if constexpr (L::kPacked) {
        if (cas<uint64_t>(L::slot_ptr(s, p), raw, pack(k, v)) == raw) return kClaimPresent;
      }
      return kClaimReread;
    }
  }
  return kClaimFull;
}

// replace_packed swaps the value of a 32/32 pair whose key is k (one lane):
// 1 replaced, 2 the key is no longer there (deleted meanwhile), 3 gave up.
template <class L>
__device__ __forceinline__ int replace_packed(char* slab, int lane, uint64_t seen, typename L::K k, typename L::V v) {
  char* p = L::slot_ptr(slab, lane);
  uint64_t expect = L::kWordLanes ? ldv64(p) : seen;
  const uint64_t desired = pack(k, v);
  for (uint32_t i = 0; i < kCasTries; ++i) {
    if ((uint32_t)expect != (uint32_t)k) return 2;
    uint64_t old = cas<uint64_t>(p, expect, desired);
    if (old == expect) return 1;
    expect = old;
  }
  return 3;
}

// tombstone marks the slot of key k deleted (one lane): 1 done, 0 the key was
// already gone, 3 gave up. A 32/32 pair keeps its value word so that the
// 64-bit CAS cannot lose a concurrent replace.
template <class L>
__device__ __forceinline__ int tombstone(char* slab, int lane, uint64_t seen, typename L::K k) {
  using K = typename L::K;
  char* p = L::slot_ptr(slab, lane);
  if constexpr (L::kPacked && !L::kIsSet) {
    uint64_t expect = L::kWordLanes ? ldv64(p) : seen;
    for (uint32_t i = 0; i < kCasTries; ++i) {
      if ((uint32_t)expect != (uint32_t)k) return 0;
      uint64_t old = cas<uint64_t>(p, expect, (expect & 0xffffffff00000000ull) | tomb_key<uint32_t>());
      if (old == expect) return 1;
      expect = old;
    }
    return 3;
  } else {
    return cas<K>(p, k, tomb_key<K>()) == k ? 1 : 0;
  }
}

// find looks k up (map and set; the warp engine's packed layouts).
template <class L>
__device__ Out<L> find(const Tile<L::W>& t, const Ctx<L>& c, typename L::K k) {
  using V = typename L::V;
  static_assert(!L::kWide, "wide pairs run the round engine");
  char* s = c.head(c.bucket(k));
  for (uint32_t hop = 0; hop < kMaxSteps; ++hop) {
    Lane<L> d = load<L>(t, s);
    unsigned m = t.ballot(L::slot_lane(t.rank) && d.key == k);
    if (m) {
      int l = __ffs(m) - 1;
      if constexpr (L::kIsSet) {
        return out<L>(kResFound);
      } else if constexpr (L::kWordLanes) {
        // Key and value were read by different lanes: re-read the pair as one
        // atomic access before trusting the value.
        uint64_t pr = 0;
        if (t.rank == l) pr = ldv64(L::slot_ptr(s, l));
        pr = t.shfl(pr, l);
        if ((uint32_t)pr != (uint32_t)k) return out<L>(kResNotFound);  // deleted meanwhile
        return out<L>(kResFound, (V)(pr >> 32));
      } else {
        return out<L>(kResFound, t.shfl(d.val, l));
      }
    }
    uint32_t next = t.shfl(d.tail, L::kTailLane);
    if (next == kNull) return out<L>(kResNotFound);
    s = c.unit(next);
  }
  report(c.status, kStatusRetryLimit);
  return out<L>(kResFailed);
}

// insert adds (k, v): map = insert or replace, set = insert if absent,
// multimap = always a new pair. Only the first empty slot in list order (the
// frontier) is ever claimed, so two inserts of one key meet at one slot.
// The warp engine's packed layouts only.
template <class L>
__device__ Out<L> insert(const Tile<L::W>& t, const Ctx<L>& c, TileAllocator<L::W>& alloc, typename L::K k,
                         typename L::V v) {
  using K = typename L::K;
  static_assert(!L::kWide, "wide pairs run the round engine");
  char* s = c.head(c.bucket(k));
  for (uint32_t it = 0; it < kMaxSteps; ++it) {
    Lane<L> d = load<L>(t, s);
    const bool sl = L::slot_lane(t.rank);
    if constexpr (L::kKind != kMulti) {
      unsigned m = t.ballot(sl && d.key == k);
      if (m) {
        int l = __ffs(m) - 1;
        if constexpr (L::kIsSet) {
          return out<L>(kResPresent);
        } else {
          int r = 0;
          if (t.rank == l) r = replace_packed<L>(s, l, d.raw0, k, v);
          r = t.shfl(r, l);
          if (r == 1) return out<L>(kResPresent);
          if (r == 2) continue;  // deleted meanwhile: k is absent, insert at the frontier
          report(c.status, kStatusRetryLimit);
          return out<L>(kResFailed);
        }
      }
    }
    unsigned e = t.ballot(sl && d.key == empty_key<K>());
    if (e) {
      int l = __ffs(e) - 1;
      int r = 0;
      if (t.rank == l) r = claim<L>(s, l, k, v) ? 1 : 0;
      r = t.shfl(r, l);
      if (r) return out<L>(kResInserted);
      continue;  // lost the slot: re-read (a same-key winner is found above)
    }
    uint32_t next = t.shfl(d.tail, L::kTailLane);
    if (next == kNull) {
      uint32_t a = alloc.allocate(t, c.pool, c.status);
      if (a == kNull) return out<L>(kResFailed);
      uint32_t cur = 0;
      if (t.rank == 0) cur = atomicCAS((unsigned*)(s + L::kNextOffset), kNull, a);
      cur = t.shfl(cur, 0);
      if (cur == kNull) {
        next = a;
      } else {
        alloc.release(t, c.pool, a);  // another tile linked first; ours was never seen
        next = cur;
      }
    }
    s = c.unit(next);
  }
  report(c.status, kStatusRetryLimit);
  return out<L>(kResFailed);
}

// erase deletes k: one entry (the first in list order), or with all every
// entry (multimap). Wide pairs skip unpublished slots: their inserts have not
// taken effect.
template <class L>
__device__ Out<L> erase(const Tile<L::W>& t, const Ctx<L>& c, typename L::K k, bool all) {
  char* s = c.head(c.bucket(k));
  uint32_t removed = 0;
  bool gaveup = false;
  for (uint32_t hop = 0; hop < kMaxSteps; ++hop) {
    Lane<L> d = load<L>(t, s);
    const unsigned pub = published<L>(t, d);
    unsigned m = t.ballot(L::slot_lane(t.rank) && d.key == k) & pub;
    if (m) {
      if (all) {
        int r = 0;
        if ((m >> t.rank) & 1) r = tombstone<L>(s, t.rank, d.raw0, k);
        removed += __popc(t.ballot(r == 1));
        gaveup |= t.ballot(r == 3) != 0;
      } else {
        while (m) {
          int l = __ffs(m) - 1;
          int r = 0;
          if (t.rank == l) r = tombstone<L>(s, l, d.raw0, k);
          r = t.shfl(r, l);
          if (r == 1) return out<L>(kResRemoved, 0, 1);
          if (r == 3) {
            report(c.status, kStatusRetryLimit);
            return out<L>(kResFailed);
          }
          if constexpr (L::kKind != kMulti) return out<L>(kResNotFound);  // deleted by another op
          m &= m - 1;
        }
      }
    }
    uint32_t next = t.shfl(d.tail, L::kTailLane);
    if (next == kNull) {
      if (gaveup) {
        report(c.status, kStatusRetryLimit);
        return out<L>(kResFailed, 0, removed);
      }
      return removed ? out<L>(kResRemoved, 0, removed) : out<L>(kResNotFound);
    }
    s = c.unit(next);
  }
  report(c.status, kStatusRetryLimit);
  return out<L>(kResFailed);
}

// collect counts the published entries of k and, with dst, stores up to cap
// of their values (multimap search-all).
template <class L>
__device__ uint32_t collect(const Tile<L::W>& t, const Ctx<L>& c, typename L::K k, typename L::V* dst, uint32_t cap) {
  using V = typename L::V;
  char* s = c.head(c.bucket(k));
  uint32_t n = 0;
  for (uint32_t hop = 0; hop < kMaxSteps; ++hop) {
    Lane<L> d = load<L>(t, s);
    const unsigned pub = published<L>(t, d);  // every lane shuffles: compute before any short circuit
    bool mine = L::slot_lane(t.rank) && d.key == k && ((pub >> t.rank) & 1);
    V v = d.val;
    if (dst && mine) {
      if constexpr (L::kWordLanes) {
        uint64_t pr = ldv64(L::slot_ptr(s, t.rank));
        mine = (uint32_t)pr == (uint32_t)k;
        v = (V)(pr >> 32);
      } else if constexpr (L::kWide) {
        __threadfence();
        v = ldv<V>(L::slot_ptr(s, t.rank) + L::kValueOffset);
      }
    }
    unsigned m = t.ballot(mine);
    if (dst && mine) {
      uint32_t pos = n + __popc(m & L::lower(t.rank));
      if (pos < cap) dst[pos] = v;
    }
    n += __popc(m);
    uint32_t next = t.shfl(d.tail, L::kTailLane);
    if (next == kNull) return n;
    s = c.unit(next);
  }
  report(c.status, kStatusRetryLimit);
  return n;
}

// Launch geometry shared by the kernels: tiles stride over work items.
template <int W>
struct Geometry {
  uint64_t tile, tiles;
  __device__ __forceinline__ Geometry() {
    tile = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) / W;
    tiles = (uint64_t)gridDim.x * blockDim.x / W;
  }
};

__device__ __forceinline__ uint64_t wshfl(uint64_t v, int src) {
  return __shfl_sync(0xffffffffu, (unsigned long long)v, src);
}
__device__ __forceinline__ uint32_t wshfl(uint32_t v, int src) { return __shfl_sync(0xffffffffu, v, src); }

// apply_rounds is the batch engine of the pair layouts (tiles of W < 32
// lanes). Every lane owns one element; control flow is uniform over the
// warp, so every intrinsic uses the full mask (tiles that diverge would make
// the compiler emulate partial-mask intrinsics, and each tile would have a
// single access in flight). In each round every active element advances by
// one slab: the W lanes of a tile read one element's slab, 32/W elements per
// load instruction, all loads of the round issued before any is used; then
// each owner lane acts on its own element — CAS on a slot, move to the next
// slab, or ask for a new one (served for all lanes at once by
// allocate_many). A claim that loses tries the next empty slot of the same
// read at once (claim_first); other failed CASes re-read the slab in the
// next round. A lane whose element is done takes the warp's next element
// before the next round (refill), so one long list or lost race holds back
// one lane, not the whole warp. The protocol is the one of the warp engine
// (insert/erase/find above); only the scheduling differs.
template <class L, class Loc = TableLoc>
__device__ Counts apply_rounds(const Ctx<L>& c, const typename L::K* keys, typename L::V* vals, const uint8_t* ops,
                             uint32_t uniform_op, uint8_t* results, uint32_t* counts, uint64_t n,
                             unsigned long long* ctrl, uint32_t flags, uint32_t salt, const Loc& loc = Loc{}) {
  using K = typename L::K;
  using V = typename L::V;
  constexpr int W = L::W;
  constexpr int OPR = 32 / W;  // elements read per load instruction
  constexpr int R = W;         // load instructions per lane per round
  constexpr int G = R < 8 ? R : 8;
  constexpr unsigned kLow = (1u << W) - 1;
  constexpr unsigned kSlotBits = (1u << L::kSlots) - 1;
  constexpr bool kMultiKind = L::kKind == kMulti;
  static_assert(W < 32, "whole-warp layouts use the warp engine");
  const int lane = (int)slab::lane();
  const unsigned below = (1u << lane) - 1;
  const int ti = lane / W, sl = lane % W;          // as a reader: tile and slot
  const int my_r = lane / OPR;                     // as an owner: the load that reads my slab
  const int my_base = (lane % OPR) * W;            // ... and the first lane of the tile reading it
  const uint64_t warp = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) / 32;
  const uint64_t warps = (uint64_t)gridDim.x * blockDim.x / 32;
  // The warp's m-th element: chunks of 32 consecutive elements dealt to the
  // warps in turn. It increases with m, so once it reaches n the warp is done.
  auto element = [&](uint64_t m) -> uint64_t { return ((m >> 5) * warps + warp) * 32 + (m & 31); };
  Tile<32> wt;
  TileAllocator<32> alloc;
  alloc.init((uint32_t)warp ^ salt);
  long long delta = 0;
  uint32_t failed = 0, inserted = 0;
  uint64_t next_m = 0;  // the warp's next element to hand out (uniform)
  // The lane's element: index, op, key, value, where it is, what it found.
  bool act = false;
  uint64_t i = 0;
  K key = 0;
  V val = 0;
  uint32_t op = uniform_op;
  char* s = nullptr;
  V outv = 0;
  uint32_t cnt = 0, steps = 0;
  // done writes the element's outcome and frees the lane.
  auto done = [&](uint8_t code) {
    results[i] = code;
    if (op == kOpFind && vals && !L::kIsSet && !kMultiKind) vals[i] = outv;
    if (counts) counts[i] = cnt;
    if (code == kResInserted) {
      ++delta;
      ++inserted;
      loc.counted(i, 1);
    }
    if (code == kResRemoved || (code == kResFailed && cnt)) {
      delta -= cnt;
      if (cnt) loc.counted(i, -(long long)cnt);
    }
    if (code == kResFailed) ++failed;
    act = false;
  };
  for (;;) {
    // Refill: lanes without an element take the warp's next ones, in order
    // (consecutive elements, so the loads of keys coalesce).
    const unsigned idle = __ballot_sync(0xffffffffu, !act);
    if (idle != 0 && element(next_m) < n) {
      if (!act) {
        i = element(next_m + __popc(idle & below));
        if (i < n) {
          key = keys[i];
          op = ops ? (uint32_t)ops[i] : uniform_op;
          val = (op == kOpInsert && vals) ? vals[i] : V(0);
          outv = 0;
          cnt = 0;
          steps = 0;
          act = !((flags & kFlagRetry) && results[i] != kResFailed);
          if (act && (op > kOpDeleteAll || (op == kOpDeleteAll && !kMultiKind))) {
            report(c.status, kStatusBadOp);
            done(kResFailed);
          }
          if (act && (flags & kFlagCheckKeys) && (key == empty_key<K>() || key == tomb_key<K>())) {
            report(c.status, kStatusReservedKey);
            done(kResFailed);
          }
          if (act) {
            s = loc.head(c, i, key);
            if constexpr (Loc::kMayLack) {
              if (s == nullptr) {
                if (op == kOpInsert) report(c.status, kStatusNoTable);
                done(op == kOpInsert ? kResFailed : kResNotFound);
              }
            }
          }
        }
      }
      next_m += __popc(idle);
    }
    const unsigned actm = __ballot_sync(0xffffffffu, act);
    if (actm == 0) {
      if (element(next_m) < n) continue;  // every element handed out was skipped (a rerun)
      break;
    }
    // Per-element summary of this round's slab, kept by the owner lane.
    unsigned mm = 0, em = 0;  // published matching / empty slots of my element's slab
    unsigned cm = 0;          // matching slots, published or not (wide pairs differ)
    uint32_t nx = kNull;      // its next pointer
    uint64_t raw = 0;         // the slot bits of its first match (packed pairs)
    uint32_t removed = 0;     // delete-all: slots tombstoned for it this round
#pragma unroll
    for (int g0 = 0; g0 < R; g0 += G) {
      Lane<L> d[G];
      // Issue every load of the group before using any.
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const int j = (g0 + g) * OPR + ti;
        const char* sp = (const char*)wshfl((uint64_t)s, j);
        if ((actm >> j) & 1) {
          d[g] = load_pair<L>(sp, sl);
        } else {
          d[g].key = empty_key<K>();
          d[g].val = 0;
          d[g].raw0 = ~0ull;
          d[g].raw1 = ~0ull;
          d[g].tail = kNull;
          d[g].aux = ~0u;
        }
      }
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const int r = g0 + g;
        const int j = r * OPR + ti;
        const bool aj = (actm >> j) & 1;
        K kj;
        if constexpr (sizeof(K) == 4) kj = (K)wshfl((uint32_t)key, j);
        else kj = (K)wshfl((uint64_t)key, j);
        const bool slot = sl < W - 1;
        bool pub = true;
        if constexpr (L::kWide) pub = !((wshfl(d[g].aux, ti * W + W - 1) >> sl) & 1);
        const bool claimed = aj && slot && d[g].key == kj;  // k's slot, published or not
        const bool match = claimed && pub;
        // Delete-all: the reader lanes tombstone their own slots at once.
        bool gone = false;
        if constexpr (kMultiKind) {
          char* sp = (char*)wshfl((uint64_t)s, j);  // every lane shuffles, then some CAS
          const uint32_t oj = wshfl(op, j);
          if (match && oj == kOpDeleteAll) gone = tombstone<L>(sp, sl, d[g].raw0, kj) == 1;
        }
        const unsigned mb = __ballot_sync(0xffffffffu, match);
        unsigned cb = mb;  // packed pairs publish with the claim
        if constexpr (L::kWide) cb = __ballot_sync(0xffffffffu, claimed);
        const unsigned eb = __ballot_sync(0xffffffffu, aj && slot && d[g].key == empty_key<K>());
        unsigned gb = 0;
        if constexpr (kMultiKind) gb = __ballot_sync(0xffffffffu, gone);
        const uint32_t tail = wshfl(d[g].tail, my_base + W - 1);
        const unsigned mine_m = (mb >> my_base) & kLow;
        uint64_t rw = 0;
        if constexpr (L::kPacked && !L::kIsSet) {
          const int fs = mine_m ? __ffs(mine_m) - 1 : 0;
          rw = wshfl(d[g].raw0, my_base + fs);
        }
        if (my_r == r) {
          mm = mine_m;
          cm = (cb >> my_base) & kLow;
          em = (eb >> my_base) & kLow;
          nx = tail;
          raw = rw;
          if constexpr (kMultiKind) removed = __popc((gb >> my_base) & kLow);
        }
      }
    }
    bool needAlloc = false;
    if (act && ++steps > kMaxSteps) {
      report(c.status, kStatusRetryLimit);
      done(kResFailed);
    }
    if (act) {
      const int fm = __ffs(mm) - 1;
      if (op == kOpFind) {
        if constexpr (kMultiKind) {
          cnt += __popc(mm);
          if (nx == kNull) done(cnt ? kResFound : kResNotFound);
          else s = c.unit(nx);
        } else if (mm) {
          if constexpr (L::kPacked && !L::kIsSet) outv = (V)(uint32_t)(raw >> 32);
          if constexpr (L::kWide) {
            __threadfence();  // acquire: the slot was seen published
            outv = ldv<V>(L::slot_ptr(s, fm) + L::kValueOffset);
          }
          done(kResFound);
        } else if (nx == kNull) {
          done(kResNotFound);
        } else {
          s = c.unit(nx);
        }
      } else if (op == kOpInsert) {
        if (!kMultiKind && cm && !mm) {
          // k is claimed but its value not yet published: never claim a
          // second slot for it; re-read until the inserter publishes.
        } else if (!kMultiKind && mm) {
          if constexpr (L::kIsSet) {
            done(kResPresent);
          } else if constexpr (L::kPacked) {
            if (cas<uint64_t>(L::slot_ptr(s, fm), raw, pack(key, val)) == raw) done(kResPresent);
            // else: changed meanwhile; re-read next round
          } else {
            __threadfence();
            exch<V>(L::slot_ptr(s, fm) + L::kValueOffset, val);
            done(kResPresent);
          }
        } else {
          // No k in this slab (read or claimed): claim its first empty slot.
          const int r = em ? claim_first<L>(s, em, key, val) : (int)kClaimFull;
          if (r == kClaimInserted) {
            done(kResInserted);
          } else if (r == kClaimPresent) {
            done(kResPresent);
          } else if (r == kClaimFull) {  // every slot holds another key: on to the next slab
            if (nx != kNull) s = c.unit(nx);
            else needAlloc = true;
          }  // kClaimReread: read the slab again next round
        }
      } else if (op == kOpDelete) {
        if (mm) {
          const int t1 = tombstone<L>(s, fm, raw, key);
          if (t1 == 1) {
            cnt = 1;
            done(kResRemoved);
          } else if (t1 == 0 && !kMultiKind) {
            done(kResNotFound);  // deleted by a concurrent element
          }  // else: re-read next round
        } else if (nx == kNull) {
          done(kResNotFound);
        } else {
          s = c.unit(nx);
        }
      } else {  // kOpDeleteAll (multimap)
        cnt += removed;
        if (nx == kNull) done(cnt ? kResRemoved : kResNotFound);
        else s = c.unit(nx);
      }
    }
    // New slabs for the elements that reached a full tail, all at once.
    if (__any_sync(0xffffffffu, needAlloc)) {
      const uint32_t a = alloc.allocate_many(wt, c.pool, c.status, needAlloc);
      bool lost = false;
      if (needAlloc) {
        if (a == kNull) {
          done(kResFailed);
        } else {
          const uint32_t cur = atomicCAS((unsigned*)(s + L::kNextOffset), kNull, a);
          if (cur != kNull) {
            slab::free_unit(c.pool, a);  // never linked, never seen
            lost = true;
            s = c.unit(cur);
          } else {
            // Linked: the slab before is full of other keys, so the fresh
            // slab's first slot is the frontier; claim it without a read.
            s = c.unit(a);
            const int r = claim_first<L>(s, kSlotBits, key, val);
            if (r == kClaimInserted) done(kResInserted);
            else if (r == kClaimPresent) done(kResPresent);
          }
        }
      }
      alloc.note_free(__popc(__ballot_sync(0xffffffffu, lost)));
    }
  }
  for (int off = 16; off > 0; off >>= 1) {
    delta += __shfl_xor_sync(0xffffffffu, delta, off);
    failed += __shfl_xor_sync(0xffffffffu, failed, off);
    inserted += __shfl_xor_sync(0xffffffffu, inserted, off);
  }
  return Counts{delta, failed, inserted, alloc.take()};  // the allocator's count is the warp's (uniform)
}

// sign_off is called by every thread of every block at the end of an apply
// launch, with its warp's counts (every lane's the same, or lane 0's): a
// block adds its warps' counts to the control block, and their pool units
// to the pool's counter, with one atomic a word,
// and counts itself done; the last block records the pool's allocated
// units (after every block's) in the control block. A same-address
// atomic from every warp cost a launch about a nanosecond each, serialised
// at the L2: 30-40 microseconds of a small build's apply launch on the
// H200, more than its inserts. With out (host memory mapped into the
// device, or null), the last block also copies the control block there,
// where the host reads it after the launch, and zeroes it for the next
// launch: the host needs neither a copy nor a memset call. The block syncs
// first: no lane may still be about to read the control block
// (kCtrlRejected, at the top of an apply launch) when the last block zeroes
// it — lanes are not in lockstep under independent thread scheduling, and
// a lane that read the zero would apply a rejected batch (the CPU emulation
// of the GPU, which runs each lane to its next collective, found this).
__device__ __forceinline__ void sign_off(unsigned long long* ctrl, Pool* pool, unsigned long long* out,
                                         Counts k = Counts{}) {
  __shared__ unsigned long long sums[4];
  if (threadIdx.x < 4) sums[threadIdx.x] = 0;
  __syncthreads();
  if (slab::lane() == 0) {
    if (k.delta) atomicAdd(&sums[0], (unsigned long long)k.delta);
    if (k.failed) atomicAdd(&sums[1], (unsigned long long)k.failed);
    if (k.inserted) atomicAdd(&sums[2], (unsigned long long)k.inserted);
    if (k.used) atomicAdd(&sums[3], (unsigned long long)k.used);
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  if (sums[0]) atomicAdd(ctrl + kCtrlDelta, sums[0]);
  if (sums[1]) atomicAdd(ctrl + kCtrlFailed, sums[1]);
  if (sums[2]) atomicAdd(ctrl + kCtrlInserted, sums[2]);
  if (sums[3]) atomicAdd(&pool->used, sums[3]);
  __threadfence();  // this block's counts come before its sign-off
  if (atomicAdd(ctrl + kCtrlDone, 1ull) == gridDim.x - 1) {
    __threadfence();
    ctrl[kCtrlUsed] = ldv64(&pool->used);
    if (out != nullptr) {
      for (int i = 0; i < kCtrlWords; ++i) {
        const unsigned long long v = ldv64(ctrl + i);
        stv64(ctrl + i, 0);
        *(volatile unsigned long long*)(out + i) = v;
      }
      __threadfence_system();
    }
  }
}

// apply_warps is the paper's engine: the warp serves its lanes' operations
// one at a time. It runs the whole-warp layouts, which are all packed (the
// paper's 32/32 pairs and 32-bit sets); wide pairs need tiles of 8 or 16
// lanes and run apply_rounds.
template <class L>
__device__ Counts apply_warps(char* heads, uint32_t nbuckets, uint32_t seed, Pool* pool, const typename L::K* keys,
                            typename L::V* vals, const uint8_t* ops, uint32_t uniform_op, uint8_t* results,
                            uint32_t* counts, uint64_t n, unsigned long long* ctrl, uint32_t flags,
                            uint32_t salt) {
  using K = typename L::K;
  using V = typename L::V;
  Tile<L::W> t;
  Geometry<L::W> g;
  Ctx<L> c{heads, nbuckets, seed, pool, (uint32_t*)(ctrl + kCtrlStatus)};
  TileAllocator<L::W> alloc;
  alloc.init((uint32_t)g.tile ^ salt);
  long long delta = 0;
  uint32_t failed = 0, inserted = 0;
  for (uint64_t base = g.tile * L::W; base < n; base += g.tiles * L::W) {
    const uint64_t i = base + t.rank;
    bool pending = i < n;
    K key = 0;
    V val = 0;
    uint32_t op = uniform_op;
    if (pending) {
      key = keys[i];
      if (ops) op = ops[i];
      if (op == kOpInsert && vals) val = vals[i];
      if ((flags & kFlagRetry) && results[i] != kResFailed) pending = false;
      if (pending && (flags & kFlagCheckKeys) && (key == empty_key<K>() || key == tomb_key<K>())) {
        report(c.status, kStatusReservedKey);
        results[i] = kResFailed;
        atomicAdd(ctrl + kCtrlFailed, 1ull);
        pending = false;
      }
    }
    unsigned q;
    while ((q = t.ballot(pending)) != 0) {
      const int src = __ffs(q) - 1;
      const K k = (K)t.shfl((uint64_t)key, src);
      const V v = (V)t.shfl((uint64_t)val, src);
      const uint32_t o = t.shfl(op, src);
      Out<L> r;
      if (o == kOpFind) {
        if constexpr (L::kKind == kMulti) {
          uint32_t cnt = collect<L>(t, c, k, (V*)nullptr, 0);
          r = out<L>(cnt ? kResFound : kResNotFound, 0, cnt);
        } else {
          r = find<L>(t, c, k);
        }
      } else if (o == kOpInsert) {
        r = insert<L>(t, c, alloc, k, v);
      } else if (o == kOpDelete || (o == kOpDeleteAll && L::kKind == kMulti)) {
        r = erase<L>(t, c, k, o == kOpDeleteAll);
      } else {
        report(c.status, kStatusBadOp);
        r = out<L>(kResFailed);
      }
      if (r.code == kResInserted) {
        ++delta;
        ++inserted;
      }
      if (r.code == kResRemoved || (r.code == kResFailed && r.count)) delta -= r.count;
      if (r.code == kResFailed) ++failed;
      if (t.rank == src) {
        results[i] = r.code;
        if (o == kOpFind && vals && !L::kIsSet && L::kKind != kMulti) vals[i] = r.val;
        if (counts) counts[i] = r.count;
        pending = false;
      }
    }
  }
  return Counts{delta, failed, inserted, alloc.take()};  // rank 0's: a tile is the whole warp
}

// apply runs a batch: element i is op (ops[i], or uniform_op when ops is
// null) on keys[i]; vals[i] is the value to insert and receives the found
// value; results[i] the outcome; counts[i] (multimap) the count found or
// removed. flags: see Flags.
template <class L>
__device__ void apply(char* heads, uint32_t nbuckets, uint32_t seed, Pool* pool, const typename L::K* keys,
                      typename L::V* vals, const uint8_t* ops, uint32_t uniform_op, uint8_t* results, uint32_t* counts,
                      uint64_t n, unsigned long long* ctrl, uint32_t flags, uint32_t salt,
                      unsigned long long* out) {
  using K = typename L::K;
  using V = typename L::V;
  // A reserved key found by the scan: apply nothing, but sign off (the
  // host reads the reject from the control block the last block hands over).
  Counts k{};
  if (ldv64(ctrl + kCtrlRejected) == 0) {
    if constexpr (L::W < 32) {
      const Ctx<L> rc{heads, nbuckets, seed, pool, (uint32_t*)(ctrl + kCtrlStatus)};
      k = apply_rounds<L>(rc, keys, vals, ops, uniform_op, results, counts, n, ctrl, flags, salt);
    } else {
      k = apply_warps<L>(heads, nbuckets, seed, pool, keys, vals, ops, uniform_op, results, counts, n, ctrl, flags,
                         salt);
    }
  }
  sign_off(ctrl, pool, out, k);
}

// find_all stores the values of keys[i] at dst[offsets[i] ..] up to
// offsets[i+1] and its count in counts[i] (which may exceed the room: the
// host then retries that key with more). The offsets may come from the
// caller's device memory: a room that ends before it starts or past dst_len
// is not written (the key is only counted) and reports kStatusBadRoom, so
// nothing is ever stored outside dst[0, dst_len).
template <class L>
__device__ void find_all(char* heads, uint32_t nbuckets, uint32_t seed, Pool* pool, const typename L::K* keys,
                         const uint64_t* offsets, typename L::V* dst, uint64_t dst_len, uint32_t* counts,
                         uint64_t n, unsigned long long* ctrl) {
  if (ldv64(ctrl + kCtrlRejected) != 0) return;  // the scan found a reserved key: write nothing
  Tile<L::W> t;
  Geometry<L::W> g;
  Ctx<L> c{heads, nbuckets, seed, pool, (uint32_t*)(ctrl + kCtrlStatus)};
  for (uint64_t base = g.tile * L::W; base < n; base += g.tiles * L::W) {
    const uint64_t i = base + t.rank;
    bool pending = i < n;
    unsigned q;
    while ((q = t.ballot(pending)) != 0) {
      const int src = __ffs(q) - 1;
      const uint64_t j = t.shfl((uint64_t)i, src);
      const typename L::K k = keys[j];
      typename L::V* out = nullptr;  // null: count only
      uint32_t cap = 0;
      if (offsets) {
        const uint64_t lo = offsets[j], hi = offsets[j + 1];
        if (lo <= hi && hi <= dst_len) {  // the same for every lane of the tile (one j)
          out = dst + lo;
          cap = hi - lo < 0xffffffffu ? (uint32_t)(hi - lo) : 0xffffffffu;
        } else if (t.rank == src) {
          report(c.status, kStatusBadRoom);
        }
      }
      const uint32_t cnt = collect<L>(t, c, k, out, cap);
      if (t.rank == src) {
        counts[i] = cnt;
        pending = false;
      }
    }
  }
}

// snapshot copies every live entry to keys/vals (room for cap); the number
// of entries found accumulates in ctrl[kCtrlCount]. Runs alone.
template <class L>
__device__ void snapshot(char* heads, uint32_t nbuckets, Pool* pool, typename L::K* keys, typename L::V* vals,
                         uint64_t cap, unsigned long long* ctrl) {
  using K = typename L::K;
  Tile<L::W> t;
  Geometry<L::W> g;
  Ctx<L> c{heads, nbuckets, 0, pool, (uint32_t*)(ctrl + kCtrlStatus)};
  for (uint64_t b = g.tile; b < nbuckets; b += g.tiles) {
    char* s = c.head((uint32_t)b);
    for (uint32_t hop = 0;; ++hop) {
      if (hop == kMaxSteps) {
        report(c.status, kStatusRetryLimit);
        break;
      }
      Lane<L> d = load<L>(t, s);
      const unsigned pub = published<L>(t, d);
      bool live = L::slot_lane(t.rank) && d.key != empty_key<K>() && d.key != tomb_key<K>() && ((pub >> t.rank) & 1);
      unsigned m = t.ballot(live);
      if (m) {
        unsigned long long at = 0;
        if (t.rank == 0) at = atomicAdd(ctrl + kCtrlCount, (unsigned long long)__popc(m));
        at = t.shfl((uint64_t)at, 0);
        if (live) {
          uint64_t pos = at + __popc(m & L::lower(t.rank));
          if (pos < cap) {
            keys[pos] = d.key;
            if (vals) vals[pos] = d.val;
          }
        }
      }
      uint32_t next = t.shfl(d.tail, L::kTailLane);
      if (next == kNull) break;
      s = c.unit(next);
    }
  }
}

// flush compacts every bucket list: live entries move to the front in list
// order, the rest of the last used slab is emptied, and the slabs after it
// are reset to all-ones and freed to the pool. Runs alone.
template <class L>
__device__ void flush(char* heads, uint32_t nbuckets, Pool* pool, unsigned long long* ctrl) {
  using K = typename L::K;
  Tile<L::W> t;
  Geometry<L::W> g;
  Ctx<L> c{heads, nbuckets, 0, pool, (uint32_t*)(ctrl + kCtrlStatus)};
  const uint32_t full = ~((1u << L::kSlots) - 1);  // aux of a slab whose every slot is published
  long long freed = 0;
  for (uint64_t b = g.tile; b < nbuckets; b += g.tiles) {
    char* rd = c.head((uint32_t)b);
    char* wr = rd;
    int wpos = 0;  // slots of wr already holding compacted entries
    bool ok = false;
    for (uint32_t hop = 0; hop < kMaxSteps; ++hop) {
      Lane<L> d = load<L>(t, rd);
      const uint32_t next = t.shfl(d.tail, L::kTailLane);
      const bool live = L::slot_lane(t.rank) && d.key != empty_key<K>() && d.key != tomb_key<K>();
      const unsigned m = t.ballot(live);
      const int cnt = __popc(m);
      if (cnt) {
        if (wpos == L::kSlots) {  // wr is full: continue in the following slab
          const uint32_t wn = wr == rd ? next : next_of<L>(t, wr);
          if (L::kWide && t.rank == 0) stv32(wr + L::kAuxOffset, full);
          wr = c.unit(wn);
          wpos = 0;
        }
        char* spill = nullptr;
        if (wpos + cnt > L::kSlots) spill = c.unit(wr == rd ? next : next_of<L>(t, wr));
        if (live) {
          int pos = wpos + __popc(m & L::lower(t.rank));
          char* dst = wr;
          if (pos >= L::kSlots) {
            dst = spill;
            pos -= L::kSlots;
          }
          store_slot<L>(dst, L::lane_of(pos), d.raw0, d.raw1);
        }
        t.sync();
        wpos += cnt;
        if (wpos > L::kSlots) {
          if (L::kWide && t.rank == 0) stv32(wr + L::kAuxOffset, full);
          wr = spill;
          wpos -= L::kSlots;
        }
      }
      if (next == kNull) {
        ok = true;
        break;
      }
      rd = c.unit(next);
    }
    if (!ok) {
      report(c.status, kStatusRetryLimit);
      continue;
    }
    // Empty the rest of wr, cut the list after it, free what follows.
    if (L::slot_lane(t.rank) && L::slot_of(t.rank) >= wpos) store_slot<L>(wr, t.rank, ~0ull, ~0ull);
    uint32_t rest = next_of<L>(t, wr);
    if (t.rank == 0) {
      stv32(wr + L::kNextOffset, kNull);
      if (L::kWide) stv32(wr + L::kAuxOffset, ~((1u << wpos) - 1));
    }
    for (uint32_t hop = 0; rest != kNull && hop < kMaxSteps; ++hop) {
      char* p = c.unit(rest);
      const uint32_t nn = next_of<L>(t, p);
      reset_slab<L>(t, p);
      t.sync();
      if (t.rank == 0) {
        __threadfence();  // the reset is visible before the unit can be handed out again
        slab::free_unit(pool, rest);
      }
      ++freed;
      rest = nn;
    }
  }
  if (t.rank == 0 && freed) atomicAdd(&pool->used, (unsigned long long)(-freed));
}

// scan checks a device batch before it runs: reserved keys and (with ops)
// op codes above max_op. It counts rejects in ctrl[kCtrlRejected], which
// apply reads first on the same stream.
template <typename K>
__device__ void scan(const K* keys, const uint8_t* ops, uint32_t max_op, uint64_t n, unsigned long long* ctrl) {
  uint32_t bad = 0, flags = 0;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
    K k = keys[i];
    if (k == empty_key<K>() || k == tomb_key<K>()) {
      ++bad;
      flags |= kStatusReservedKey;
    }
    if (ops && ops[i] > max_op) {
      ++bad;
      flags |= kStatusBadOp;
    }
  }
  if (bad) {
    atomicAdd(ctrl + kCtrlRejected, (unsigned long long)bad);
    atomicOr((unsigned*)(ctrl + kCtrlStatus), flags);
  }
}

}  // namespace sh
}  // namespace wk

// Kernel instantiation. SH_TABLE(name, K, V, kind, W, word_lanes) defines the
// kernels sh_apply_<name>, sh_snapshot_<name>, sh_flush_<name> and
// sh_findall_<name>; SH_SCAN(name, K) defines sh_scan_<name>.
#define SH_TABLE(NAME, K, V, KIND, W, WORDS)                                                                        \
  using L_##NAME = wk::sh::Layout<K, V, KIND, W, WORDS>;                                                            \
  extern "C" __global__ void __launch_bounds__(256, 3) sh_apply_##NAME(char* heads, uint32_t nbuckets, uint32_t seed, wk::slab::Pool* pool,   \
                                             const K* keys, V* vals, const uint8_t* ops, uint32_t uniform_op,      \
                                             uint8_t* results, uint32_t* counts, uint64_t n,                      \
                                             unsigned long long* ctrl, uint32_t flags, uint32_t salt,             \
                                             unsigned long long* out) {                                           \
    wk::sh::apply<L_##NAME>(heads, nbuckets, seed, pool, keys, vals, ops, uniform_op, results, counts, n, ctrl,    \
                            flags, salt, out);                                                                     \
  }                                                                                                                \
  extern "C" __global__ void sh_findall_##NAME(char* heads, uint32_t nbuckets, uint32_t seed, wk::slab::Pool* pool, \
                                               const K* keys, const uint64_t* offsets, V* dst, uint64_t dst_len,   \
                                               uint32_t* counts, uint64_t n, unsigned long long* ctrl) {          \
    wk::sh::find_all<L_##NAME>(heads, nbuckets, seed, pool, keys, offsets, dst, dst_len, counts, n, ctrl);        \
  }                                                                                                                \
  extern "C" __global__ void sh_snapshot_##NAME(char* heads, uint32_t nbuckets, wk::slab::Pool* pool, K* keys,      \
                                                V* vals, uint64_t cap, unsigned long long* ctrl) {                \
    wk::sh::snapshot<L_##NAME>(heads, nbuckets, pool, keys, vals, cap, ctrl);                                     \
  }                                                                                                                \
  extern "C" __global__ void sh_flush_##NAME(char* heads, uint32_t nbuckets, wk::slab::Pool* pool,                  \
                                             unsigned long long* ctrl) {                                          \
    wk::sh::flush<L_##NAME>(heads, nbuckets, pool, ctrl);                                                         \
  }

#define SH_SCAN(NAME, K)                                                                                         \
  extern "C" __global__ void sh_scan_##NAME(const K* keys, const uint8_t* ops, uint32_t max_op, uint64_t n,      \
                                            unsigned long long* ctrl) {                                          \
    wk::sh::scan<K>(keys, ops, max_op, n, ctrl);                                                                 \
  }
