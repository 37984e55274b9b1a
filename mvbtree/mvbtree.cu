// mvbtree.cu: the multiversion GPU B-tree (Awad's thesis, ch. 4; PACT 2022)
// with snapshots readers may hold, on the B-link core shared with btree
// (internal/devcode/blink.cuh: layouts, latches, the seqlock read, descent,
// insert with splits, delete) and SlabAlloc nodes (internal/devcode/slaballoc.cuh).
//
// Versions. Every node has a head: the address parents and side links name,
// which never moves, holding the newest version. A version carries the stamp
// ts of the write batch that made it and prev, the next older version (kNone:
// none). Batches write with stamp w = the host's epoch; a snapshot with stamp
// p sees, of every node, the newest version with ts <= p. The host lets no
// write batch run while it takes a snapshot, so every version a snapshot can
// see was complete when it was taken (the thesis's unstamped versions, which
// concurrent snapshots need, are the next issue's).
//
// A writer holding a head's latch, about to change version (ts) into one
// stamped w, copies it first when an open snapshot can see it, i.e. some open
// stamp p has ts <= p < w (CopyWhenPinned, the default), always
// (CopyAlways: the thesis's VoB), or when ts != w (CopyIfStale: the thesis's
// ViB rule); otherwise it changes the head in place. The copy keeps the
// version's content and stamp, and the head's prev names it. On the way the
// writer splices out of the head's chain every older version no open
// snapshot can see (version v is visible to p when ts(v) <= p < ts of the
// next newer kept version) and appends them to the batch's retire log; the
// host frees a log's units once every launch that ran beside the batch has
// ended (launch epochs, package internal/ebr). Copies are marked by a set
// latch bit in their meta: no writer latches them, and a unit scan tells
// heads from versions by it.
//
// Readers of a snapshot read each head they reach (with the seqlock when
// writers may run: a head changes in place), then walk its chain to the
// version of their stamp; chain nodes never change but for prev, which a
// splice re-links to another version that is visible to the same readers.
// Readers of the latest version read heads as btree's queries do.
//
// Version indexes. A walk down a newest-first chain costs one dependent load
// a version, so the oldest of k snapshots would pay k loads at every node
// changed since it. When a writer leaves a chain of kIndexMin or more
// versions, it puts an index unit between the head and the chain: a node of
// the same layout whose stamp is kIndexTs (above every snapshot's, so a
// walk that does not know indexes passes it by its prev, the chain's first
// version) and whose pairs are (stamp, address) of the chain's versions at
// positions 0, s, 2s, ... (s, the stride, in link's low 8 bits: 1 until
// the chain has more versions than pairs, then doubled as often as
// needed), newest first; low is the chain's last version and high the
// stamp of the version before it. link's high bits hold the host's count
// of stamps closed when the index was built: while it is unchanged (and
// copies are made only when pinned) nothing in the chain can have become
// invisible, so a write in place keeps the index and a copy extends a
// dense one (entries shifted up, the copy as entry 0) without the walk.
// A reader at stamp p reads the index and goes straight to the version it
// sees (the first entry stamped <= p when s = 1 or it is entry 0; the last
// version when p < high), or else to the entry before and walks at most s
// versions from there: three loads a level for any chain a dense index
// covers. Indexes are immutable: a writer that changes the chain splices
// the index out (retired as a version is) and builds a new one; a splice whose
// retire log is full keeps the unit linked as a pass-through (count and
// high zeroed: readers walk by its prev). Vacuum retires indexes and builds
// none (it has no allocator); an index that cannot be allocated is simply
// not built.
#include <stdint.h>

#include "blink.cuh"
#include "blink_wave.cuh"
#include "mem.cuh"
#include "slaballoc.cuh"
#include "status.cuh"

namespace {

using namespace wk::blink;
namespace slab = wk::slab;

template <typename S>
using Lay = wk::blink::Lay<S, true>;
template <typename S>
using Node = wk::blink::Node<Lay<S>>;

constexpr uint32_t kLatest = 0xffffffffu;  // the stamp of a query of the latest version
constexpr uint32_t kChainSteps = 4096;     // versions one splice walks at most
constexpr uint32_t kIndexTs = 0xfffffffeu;  // the stamp of a version index (mirrored in kernels.go)
constexpr uint32_t kIndexLevel = 0xffu;     // the level of a version index (never a tree level)
// An index's link: its stride (low 8 bits) and the host's count of closed
// stamps when it was built (the rest, wrapping).
constexpr uint32_t kStrideMask = 0xffu, kClosesShift = 8, kClosesMask = 0xffffffu;
// versions a chain holds before its head gets an index: at 3 a snapshot's
// query reads as many units through the index as down the chain, on average
constexpr uint32_t kIndexMin = 4;
static_assert(kIndexTs != kLatest, "an index is not the latest version");
// Copy modes (mirrored in Go as CopyMode).
constexpr uint32_t kCopyWhenPinned = 0, kCopyAlways = 1, kCopyIfStale = 2;
static_assert(kCopyWhenPinned == 0, "the zero Options copy when pinned");
// Control words (mirrored in gpu.go): live keys, linked versions.
constexpr int kCtlKeys = 0, kCtlVersions = 1;

// ReadPool reaches the nodes of one generation's SlabAlloc pool.
template <typename S>
struct ReadPool {
  static constexpr int kBytes = Lay<S>::kNodeBytes;
  slab::Pool* p;
  char* base;  // the pool is flat (slaballoc Options.Flat): node a at base + a * kBytes
  uint32_t root_;
  uint32_t supers, blocks;  // the descriptor's sizes, read once (no growth during a launch)
  uint32_t end_, per_;      // valid addresses: below end_ (supers << 24), unit index below per_
  char* lane_;              // base + this lane's chunk offset
  __device__ __forceinline__ ReadPool(slab::Pool* pool, uint32_t root)
      : p(pool),
        base((char*)__ldg(&pool->units[0])),
        root_(root),
        supers(__ldg(&pool->num_super)),
        blocks(__ldg(&pool->blocks_per_super)),
        end_(supers >= 255u ? slab::kNull : supers << 24),
        per_(blocks * slab::kUnitsPerBlock),
        lane_(opaque(base + (wk::mem::laneid() & (Lay<S>::kTile - 1)) * 16)) {}
  // opaque hides a pointer's origin from the optimizer, which would otherwise
  // re-associate lane_ + a * kBytes into (a * kBytes | lane offset) + base:
  // four instructions a node instead of two.
  __device__ __forceinline__ static char* opaque(char* p) {
#ifdef WK_HOST_EMULATION
    return p;
#else
    asm("mov.b64 %0, %0;" : "+l"(p));
    return p;
#endif
  }
  // node decodes with one multiply-add: no super block table load in the
  // descents (their loops are ALU-bound; the table decode cost 8-20 SASS
  // instructions a level).
  __device__ __forceinline__ char* node(uint32_t a) const { return slab::flat_ptr<kBytes>(base, a); }
  // chunk: lane rank's 16 bytes of node a, from this lane's precomputed base
  // (rank is the lane's rank in its tile).
  __device__ __forceinline__ const char* chunk(uint32_t a, unsigned) const { return slab::flat_ptr<kBytes>(lane_, a); }
  __device__ __forceinline__ uint32_t root() const { return root_; }
  // valid: an address a link, a child or a prev may hold (the root is none).
  // Evaluated without branches (every lookup level checks one per round).
  __device__ __forceinline__ bool valid(uint32_t a) const {
    return (a != root_) & (a < end_) & ((a & slab::kUnitIndexMask) < per_);
  }
  __device__ __forceinline__ uint32_t walk_bound() const {
    uint64_t units = (uint64_t)supers * blocks * slab::kUnitsPerBlock;
    return units > 0x7fffffffu ? 0x7fffffffu : (uint32_t)units;
  }
};

// WritePool adds the tile's allocator, which fails fast once another tile
// of the launch found the pool exhausted (the host re-runs the batch in a
// grown pool, or reports ErrPoolExhausted at the maximum).
template <typename S, int T>
struct WritePool : ReadPool<S> {
  uint32_t* status;
  slab::Tile<T> st;
  slab::TileAllocator<T, false, true> a;
  __device__ __forceinline__ WritePool(slab::Pool* pool, uint32_t root, uint32_t* s, uint32_t salt)
      : ReadPool<S>(pool, root), status(s) {
    a.init(salt);
  }
  template <int TT>
  __device__ __forceinline__ bool alloc1(const Tile<TT>&, uint32_t& x) {
    x = a.allocate(st, this->p, status);
    return x != slab::kNull;
  }
  template <int TT>
  __device__ __forceinline__ bool alloc2(const Tile<TT>& t, uint32_t& x, uint32_t& y) {
    if (!alloc1(t, x)) return false;
    if (!alloc1(t, y)) {
      a.release(st, this->p, x);
      return false;
    }
    return true;
  }
  template <int TT>
  __device__ __forceinline__ void release(const Tile<TT>&, uint32_t x) {
    a.release(st, this->p, x);
  }
  // alloc_optional allocates a unit the operation can do without (a
  // version index): running out is not reported.
  template <int TT>
  __device__ __forceinline__ bool alloc_optional(const Tile<TT>&, uint32_t& x) {
    x = a.allocate(st, this->p, nullptr);
    return x != slab::kNull;
  }
  // adopt counts n units allocated for the tile elsewhere (PlainCopy's
  // warp-wide allocation) in its net count.
  __device__ __forceinline__ void adopt(long long n) { a.note_free(-n); }
  // take returns the tile's net count of units allocated, for the caller
  // to add to the pool's count (apply_batch: once a block).
  __device__ __forceinline__ long long take() { return a.take(); }
};

// version_of reads the stamp and the older version of unit a (a version
// node): the version lane's chunk only.
template <typename S, class Pool, int T>
__device__ __forceinline__ void version_of(const Pool& pool, uint32_t a, uint32_t& ts, uint32_t& prev,
                                           const Tile<T>& t) {
  using L = Lay<S>;
  S w[L::kWords];
  if (t.rank == L::kVersionLane) wk::mem::ld_chunk(pool.node(a) + L::kVersionLane * 16, w, kStrong);
  if constexpr (sizeof(S) == 4) {
    ts = t.shfl((uint32_t)w[L::kVersionWord], L::kVersionLane);
    prev = t.shfl((uint32_t)w[L::kVersionWord + 1], L::kVersionLane);
  } else {
    uint64_t v = t.shfl((uint64_t)w[L::kVersionWord], L::kVersionLane);
    ts = (uint32_t)v;
    prev = (uint32_t)(v >> 32);
  }
}

// set_prev re-links version a to older version prev.
template <typename S, class Pool, int T>
__device__ __forceinline__ void set_prev(const Pool& pool, uint32_t a, uint32_t prev, const Tile<T>& t) {
  if (t.rank == 0) st_u32(pool.node(a) + Lay<S>::kVersionByte + 4, prev);
}

// Snapshots is the registry of open snapshots' stamps, ascending (each < w).
struct Snapshots {
  const uint32_t* stamps;
  uint32_t n;
  // below is the number of open stamps below ts (a lower bound's search).
  __device__ __forceinline__ uint32_t below(uint32_t ts) const {
    uint32_t a = 0, b = n;
    while (a < b) {
      uint32_t m = (a + b) / 2;
      if (__ldg(stamps + m) < ts) a = m + 1;
      else b = m;
    }
    return a;
  }
  // rank is 1 + the number of open stamps below ts: Restamp's new stamp.
  __device__ __forceinline__ uint32_t rank(uint32_t ts) const { return below(ts) + 1; }
  // any_in reports whether an open snapshot has a stamp in [lo, hi).
  __device__ __forceinline__ bool any_in(uint32_t lo, uint32_t hi) const {
    const uint32_t a = below(lo);
    return a < n && __ldg(stamps + a) < hi;
  }
};

// Retire is a batch's retire log.
struct Retire {
  uint32_t* log;
  uint32_t cap;
  uint32_t* count;
  // put appends unit a (one lane's answer, broadcast); false when the log is
  // full, and the caller keeps the unit linked instead.
  template <int T>
  __device__ __forceinline__ bool put(uint32_t a, const Tile<T>& t) const {
    uint32_t ok = 0;
    if (t.rank == 0 && log) {
      uint32_t i = atomicAdd(count, 1u);
      if (i < cap) {
        log[i] = a;
        ok = 1;
      }
    }
    return t.shfl(ok, 0) != 0;
  }
};

// Indexer builds a version index (see the top of the file) in the tile's
// registers from the versions of a chain, newest first: each lane holds its
// chunk of the index node, entry j in pair position j.
template <typename S>
struct Indexer {
  using L = Lay<S>;
  using N = Node<S>;
  static constexpr int P = L::kPairs, kCap = L::kCap;
  S w[L::kWords];
  uint32_t n = 0, stride = 1, pos = 0, tail = kNone, upper = 0;
  __device__ __forceinline__ Indexer() {
#pragma unroll
    for (int q = 0; q < L::kWords; ++q) w[q] = 0;
  }
  // add records version a (stamp ts), the chain's next, whose newer version
  // is stamped up.
  template <int T>
  __device__ __forceinline__ void add(uint32_t a, uint32_t ts, uint32_t up, const Tile<T>& t) {
    if (pos % stride == 0) {
      if (n == kCap) thin(t);
      if (pos % stride == 0) {
#pragma unroll
        for (int p = 0; p < P; ++p)
          if (N::slot(t, p) == (int)n) {
            w[2 * p] = (S)ts;
            w[2 * p + 1] = (S)a;
          }
        ++n;
      }
    }
    tail = a;
    upper = up;
    ++pos;
  }
  // thin keeps every other entry (entry j takes entry 2j) and doubles the
  // stride: a lane's position p takes position (2p) % P of lane kFirst +
  // 2j / P, its own pair lanes only (the narrow node's last position holds
  // the version).
  template <int T>
  __device__ void thin(const Tile<T>& t) {
    S nw[2 * P];
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const int j = N::slot(t, p), q = (2 * p) % P;
      const int src = min(max(L::kFirst + 2 * j / P, 0), T - 1);
      nw[2 * p] = t.shfl(w[2 * q], src);
      nw[2 * p + 1] = t.shfl(w[2 * q + 1], src);
    }
#pragma unroll
    for (int p = 0; p < P; ++p)
      if (N::holds(N::slot(t, p))) {
        w[2 * p] = nw[2 * p];
        w[2 * p + 1] = nw[2 * p + 1];
      }
    n = (n + 1) / 2;
    stride *= 2;
  }
  // store writes the index into unit x, before first (the chain's first
  // version). The caller fences before a head names it.
  template <class Pool, int T>
  __device__ __forceinline__ void store(const Pool& pool, uint32_t x, uint32_t first, uint32_t closes,
                                        const Tile<T>& t) {
    N ix;
#pragma unroll
    for (int q = 0; q < L::kWords; ++q) ix.w[q] = w[q];
    ix.set_header(t, m_make(n, kIndexLevel, 0) | kLatch, stride | closes << kClosesShift, (S)tail, (S)upper);
    ix.set_version(t, kIndexTs, first);
    ix.store_all(pool, x, t);
  }
};

// NoIndex is the Indexer of a splice that builds none.
struct NoIndex {
  template <int T>
  __device__ __forceinline__ void add(uint32_t, uint32_t, uint32_t, const Tile<T>&) {}
};

// pass_through empties index a that a splice must keep linked (its retire
// log is full): count 0 and high 0, so that readers walk on by its prev.
template <typename S, class Pool, int T>
__device__ __forceinline__ void pass_through(const Pool& pool, uint32_t a, const Tile<T>& t) {
  if (t.rank == 0) {
    char* p = pool.node(a);
    st_u32(p, m_make(0, kIndexLevel, 0) | kLatch);
    if constexpr (sizeof(S) == 4) st_u32(p + 12, 0);
    else st_u64(p + 16, 0);
  }
}

// splice walks the chain of older versions from first, whose next newer
// version is stamped upper, and unlinks every version no open snapshot can
// see into the retire log, and every version index. It returns the new
// first version; removed counts what it unlinked; ix is given the versions
// it keeps, in order.
template <typename S, class Pool, class Ix, int T>
__device__ uint32_t splice(const Pool& pool, const Snapshots& snaps, const Retire& ret, uint32_t first,
                           uint32_t upper, long long& removed, Ix& ix, const Tile<T>& t) {
  uint32_t head = kNone, last = kNone, last_prev = kNone, cur = first, up = upper;
  for (uint32_t steps = 0; cur != kNone && steps < kChainSteps; ++steps) {
    if (!pool.valid(cur)) break;  // never happens in a correct tree: keep the rest as it is
    uint32_t ts, prev;
    version_of<S>(pool, cur, ts, prev, t);
    const bool index = ts == kIndexTs;
    if ((index || !snaps.any_in(ts, up)) && ret.put(cur, t)) {
      ++removed;
    } else {
      if (index) pass_through<S>(pool, cur, t);
      if (last == kNone) head = cur;
      else if (last_prev != cur) set_prev<S>(pool, last, cur, t);
      last = cur;
      last_prev = prev;
      if (!index) {
        ix.add(cur, ts, up, t);
        up = ts;
      }
    }
    cur = prev;
  }
  if (last == kNone) return cur;
  if (last_prev != cur) set_prev<S>(pool, last, cur, t);
  return head;
}

// Spliced is what splice_indexed returns: the version the head names next
// (the index, or the chain's first version) and the units it unlinked.
struct Spliced {
  uint32_t first;
  long long removed;
};

// splice_indexed splices the chain from first (whose newer version is
// stamped upper) as splice does and builds the chain's index in unit
// (kNone: none to build) when the chain keeps kIndexMin versions or more.
// With a copy (stamped copy_ts, already stored with prev = first), the copy
// is the chain's newest version (its newer one, the head, stamped w) and
// its prev is re-linked to what the splice keeps. Out of line: every
// argument by value, none of the caller's state in memory.
template <typename S, int T>
__device__ __noinline__ Spliced splice_indexed(const ReadPool<S> pool, const Snapshots snaps, const Retire ret,
                                               uint32_t first, uint32_t upper, uint32_t copy, uint32_t copy_ts,
                                               uint32_t w, uint32_t closes, bool pinned, uint32_t unit,
                                               const Tile<T> t) {
  Spliced r{kNone, 0};
  // The head's index, if it has one, stands when the chain does not
  // change (a write in place that unlinks nothing): no new unit, nothing
  // retired. Otherwise it goes as the splice's other indexes do.
  const uint32_t orig = first;  // the copy's prev as stored
  uint32_t old = kNone;
  if (first != kNone && pool.valid(first)) {
    Node<S> o;
    o.load(pool, first, kStrong, t);  // the whole unit: an index's entries
    if (o.ts == kIndexTs) {
      old = first;
      first = o.prev;
      // No stamp has left the registry since the index was built, so no
      // version of the chain became invisible (pinned: the copy rule is
      // CopyWhenPinned, whose copies an open snapshot sees; the other
      // rules copy versions no snapshot sees, which only the walk
      // unlinks): nothing to unlink, no walk. A write in place keeps the
      // index; a copy becomes a dense, complete index's entry 0 (the rest
      // shifted up, the last version and the stamp above it unchanged).
      const int c = (int)o.count();
      const bool fresh = pinned && c > 0 && o.link >> kClosesShift == closes;
      if (fresh && copy == kNone) {
        r.first = old;  // in place: the chain as it was, the index too
        return r;
      }
      if (fresh && (o.link & kStrideMask) == 1 && c < Node<S>::kCap && unit != kNone &&
          (uint32_t)o.low == (uint32_t)o.value_of(t, c - 1)) {
        o.insert_at(t, 0, (S)copy_ts, (S)copy);
        o.set_header(t, m_make(c + 1, kIndexLevel, 0) | kLatch, o.link, o.low, o.high);
        o.set_version(t, kIndexTs, copy);
        o.store_all(pool, unit, t);
        if (ret.put(old, t)) {
          ++r.removed;
          t.sync();  // the version lane's store of the copy before rank 0's
          set_prev<S>(pool, copy, first, t);
        } else {
          pass_through<S>(pool, old, t);  // the copy's prev as stored
        }
        r.first = unit;
        return r;
      }
    }
  }
  Indexer<S> ix;
  if (copy != kNone) ix.add(copy, copy_ts, w, t);
  uint32_t chain = splice<S>(pool, snaps, ret, first, upper, r.removed, ix, t);
  if (old != kNone) {
    if (copy == kNone && r.removed == 0 && chain == first) {
      r.first = old;
      return r;
    }
    if (ret.put(old, t)) {
      ++r.removed;
    } else {  // kept linked in front of the chain, emptied
      pass_through<S>(pool, old, t);
      if (chain != first) set_prev<S>(pool, old, chain, t);
      chain = old;
    }
  }
  r.first = chain;
  if (copy != kNone) {
    if (chain != orig) {
      t.sync();  // the version lane's store of the copy before rank 0's
      set_prev<S>(pool, copy, chain, t);
    }
    r.first = copy;
  }
  if (unit != kNone && ix.pos >= kIndexMin) {
    ix.store(pool, unit, r.first, closes, t);
    r.first = unit;
  }
  return r;
}

// NoBatchHooks is a versioner's begin and end with nothing to do in them.
// apply_batch calls begin before the tile's operation (want: it has one)
// and end once it is done, each with the whole block converged; PlainCopy
// allocates in begin and retires in end.
struct NoBatchHooks {
  template <class Pool, int T>
  __device__ __forceinline__ void begin(Pool&, bool, const Tile<T>&) {}
  template <class Pool, int T>
  __device__ __forceinline__ void end(Pool&, const Tile<T>&) {}
};

// MV is the versioner of a write batch (blink.cuh's hooks).
template <typename S>
struct MV : NoBatchHooks {
  static constexpr bool kReadsVersion = true;
  uint32_t w, mode, closes;
  bool indexing;  // enough snapshots open for chains of kIndexMin (and indexes not turned off)
  Snapshots snaps;
  Retire ret;
  long long copies = 0, indexes = 0, removed = 0;  // units linked (versions, indexes) and unlinked
  struct Slot {
    uint32_t copy;
  };
  template <class N>
  __device__ __forceinline__ bool needs_copy(const N& n) const {
    if (mode == kCopyAlways) return true;
    if (n.ts == w) return false;
    if (mode == kCopyIfStale) return true;
    return snaps.any_in(n.ts, w);
  }
  template <class Pool, class N, int T>
  __device__ __forceinline__ bool prepare(Pool& pool, const N& n, const Tile<T>& t, Slot& s) {
    s.copy = kNone;
    if (needs_copy(n)) return pool.alloc1(t, s.copy);
    return true;
  }
  template <class Pool, int T>
  __device__ __forceinline__ void unprepare(Pool& pool, const Slot& s, const Tile<T>& t) {
    if (s.copy != kNone) pool.release(t, s.copy);
  }
  template <class Pool, class N, int T>
  __device__ void commit(Pool& pool, N& n, uint32_t, const Slot& s, const Tile<T>& t) {
    // A chain keeps at most one version per open snapshot (and the copy):
    // with fewer open than an index needs (index_at, from the host), or
    // indexes turned off, the splice builds none and stays inline. The
    // indexed splice runs out of line: inline it took the insert kernel's
    // spills from ~120 to ~500 bytes. (Out of line it costs its call's
    // saved registers, ~3x the kernel's local memory traffic with 8
    // snapshots open; deferring it past the op, where few registers are
    // live, cost as much in the re-latch and left internal nodes
    // unindexed: docs/benchmarks.md.)
    if (indexing) {
      // A unit for the index only with a copy: a write in place keeps
      // the head's index while no stamp closed, and otherwise leaves the
      // chain unindexed until its next copy (an allocation and a release
      // a write saved, where most writes keep their index).
      uint32_t unit = kNone;
      if (s.copy != kNone) {
        if (!pool.alloc_optional(t, unit)) unit = kNone;
        n.store_all(pool, s.copy, t);  // see splice_indexed
      }
      const Spliced r = splice_indexed<S, T>(pool, snaps, ret, n.prev, s.copy != kNone ? n.ts : w, s.copy, n.ts, w,
                                             closes, mode == kCopyWhenPinned, unit, t);
      removed += r.removed;
      const bool made = r.first == unit && unit != kNone;
      if (made) ++indexes;
      else if (unit != kNone) pool.release(t, unit);
      if (s.copy != kNone) {
        ++copies;
        fence();  // the copy and the index are complete before the head names them
      }
      n.set_version(t, w, r.first);
      return;
    }
    NoIndex none;
    if (s.copy != kNone) {
      // The copy: the version as it is, stamp and all; its meta keeps the
      // latch bit, which marks a version. Its older versions, spliced.
      N c = n;
      uint32_t chain = splice<S>(pool, snaps, ret, n.prev, n.ts, removed, none, t);
      c.set_version(t, n.ts, chain);
      c.store_all(pool, s.copy, t);
      fence();  // the copy is complete before the head names it
      n.set_version(t, w, s.copy);
      ++copies;
    } else {
      // In place: no open snapshot sees the version being replaced.
      uint32_t chain = splice<S>(pool, snaps, ret, n.prev, w, removed, none, t);
      n.set_version(t, w, chain);
    }
  }
  template <class N, int T>
  __device__ __forceinline__ void fresh(N& n, const Tile<T>& t) {
    n.set_version(t, w, kNone);
  }
};

// Plain is the versioner of a write batch that can copy nothing: no snapshot
// is open and, under CopyIfStale, every node carries the batch's stamp (the
// host decides: gpu.go, writeKind). It writes in place and stamps; it leaves
// prev as the node holds it, so that a chain a writer on another lane links
// meanwhile stays linked (its splice waits for the next versioning writer or
// Vacuum). Without the snapshot registry, the retire log, the splice and the
// version's decode, the insert kernel keeps its registers (no spills).
struct Plain : NoVersion, NoBatchHooks {  // takes nothing for a write (prepare), reads no version
  uint32_t w;
  __device__ __forceinline__ explicit Plain(uint32_t stamp) : w(stamp) {}
  template <class Pool, class N, int T>
  __device__ __forceinline__ void commit(Pool&, N& n, uint32_t, const Slot&, const Tile<T>& t) {
    n.set_stamp(t, w);
  }
  template <class N, int T>
  __device__ __forceinline__ void fresh(N& n, const Tile<T>& t) {
    n.set_version(t, w, kNone);
  }
};

// PlainCopy is Plain under CopyAlways (the thesis's VoB, Listing 4.2: every
// write allocates a unit, copies the version out and retires the copy): the
// host launches it where it launches Plain (no snapshot open, no chains), so
// no reader can ever reach the copy and it goes to the batch's retire log
// unlinked (freed once the launches beside it end, as every retired unit
// is). What the versioning kernel does besides under CopyAlways — the copy
// linked as the head's prev, the next write's splice walking to it and
// retiring it — no snapshot needs while none is open. A tile holds its
// first two copies until its operation is done and end appends them a
// block at a time (one atomic on the log's count a block, not one a copy:
// ncu counted them); a copy past those is appended at once. A copy the
// full log cannot take is freed (after a fence: its stores land before
// another tile can allocate the unit).
struct PlainCopy : Plain {
  Retire ret;
  uint32_t held0 = kNone, held1 = kNone, nheld = 0;
  uint32_t spare = kNone;  // the unit begin allocated for the first copy
  struct Slot {
    uint32_t copy;
  };
  __device__ __forceinline__ PlainCopy(uint32_t stamp, Retire r) : Plain(stamp), ret(r) {}
  // begin allocates the first copy's unit of every tile of the warp that
  // has an operation, all with one allocation of a warp-wide allocator
  // (one bitmap load a lane, one atomic for the warp's tiles), before the
  // operation latches anything. A tile it cannot serve allocates in prepare.
  template <class Pool, int T>
  __device__ void begin(Pool& pool, bool want, const Tile<T>& t) {
    slab::Tile<32> wt;
    slab::TileAllocator<32, true> wa;
    wa.init((uint32_t)((blockIdx.x * blockDim.x + threadIdx.x) >> 5) * 0x9e3779b9u ^ w);  // uniform in the warp
    const uint32_t u = wa.allocate_many(wt, pool.p, nullptr, want && t.rank == 0);
    spare = t.shfl(u, 0);
    if (spare != kNone) pool.adopt(1);  // the unit counts in this tile's net
  }
  template <class Pool, class N, int T>
  __device__ __forceinline__ bool prepare(Pool& pool, const N&, const Tile<T>& t, Slot& s) {
    if (spare != kNone) {
      s.copy = spare;
      spare = kNone;
      return true;
    }
    return pool.alloc1(t, s.copy);
  }
  template <class Pool, int T>
  __device__ __forceinline__ void unprepare(Pool& pool, const Slot& s, const Tile<T>& t) {
    if (spare == kNone) spare = s.copy;
    else pool.release(t, s.copy);
  }
  template <class Pool, class N, int T>
  __device__ __forceinline__ void commit(Pool& pool, N& n, uint32_t, const Slot& s, const Tile<T>& t) {
    n.store_all(pool, s.copy, t);  // the version as it is (its version words undecoded, stored as read)
    if (nheld == 0) {
      held0 = s.copy;
      nheld = 1;
    } else if (nheld == 1) {
      held1 = s.copy;
      nheld = 2;
    } else {
      retire(pool, s.copy, t);
    }
    n.set_stamp(t, w);
  }
  template <class Pool, int T>
  __device__ __forceinline__ void retire(Pool& pool, uint32_t a, const Tile<T>& t) {
    if (!ret.put(a, t)) free_copy(pool, a, t);
  }
  // free_copy frees a copy the full log cannot take: no reader can reach
  // it, and the fence lands its stores before another tile allocates it.
  template <class Pool, int T>
  __device__ __forceinline__ void free_copy(Pool& pool, uint32_t a, const Tile<T>& t) {
    fence();
    pool.release(t, a);
  }
  template <class Pool, int T>
  __device__ void end(Pool& pool, const Tile<T>& t) {
    if (spare != kNone) {  // an operation that wrote no node
      pool.release(t, spare);
      spare = kNone;
    }
    __shared__ uint32_t block_n, block_base;
    if (threadIdx.x == 0) block_n = 0;
    __syncthreads();
    uint32_t off = 0;
    if (t.rank == 0 && nheld != 0) off = atomicAdd(&block_n, nheld);
    __syncthreads();
    if (threadIdx.x == 0 && block_n != 0) block_base = ret.log ? atomicAdd(ret.count, block_n) : ret.cap;
    __syncthreads();
    if (nheld == 0) return;
    off = t.shfl(off, 0) + block_base;
    for (uint32_t k = 0; k < nheld; ++k) {
      const uint32_t a = k == 0 ? held0 : held1;
      if (off + k < ret.cap) {
        if (t.rank == 0) ret.log[off + k] = a;
      } else {
        free_copy(pool, a, t);
      }
    }
  }
};

// AtVersion reads the version snapshot `at` sees (blink.cuh's reader).
struct AtVersion {
  static constexpr bool kWalks = true;
  uint32_t at;
  bool validated;  // writers may run: heads are read with the seqlock
  // load reads head idx, then walks its chain to the version at `at`;
  // false: no such version (a misroute: restart), or the bound is reached.
  template <class Pool, class N, int T>
  __device__ __forceinline__ int load(const Pool& pool, uint32_t idx, N& n, uint32_t& steps, const Tile<T>& t) const {
    if (validated) {
      if (!read_validated(pool, idx, n, t)) return kFailRetry;
    } else {
      n.load(pool, idx, kNC, t);
    }
    while (n.ts > at) {
      if (steps++ >= kMaxSteps) return kFailRetry;
      const uint32_t nx = n.ts == kIndexTs ? index_next(n, t) : n.prev;
      if (nx == kNone || !pool.valid(nx)) return kFailPool;  // restart
      n.load(pool, nx, validated ? kStrong : kNC, t);
    }
    return kOK;
  }
  // index_next returns where a walk to `at` goes from version index n (see
  // the top of the file): the version it sees, or one it walks on from.
  template <class N, int T>
  __device__ __forceinline__ uint32_t index_next(const N& n, const Tile<T>& t) const {
    using S = typename N::S;
    const int c = n.pairs();
    const int newer = c - n.count_le(t, (S)at);  // entries stamped above at: a prefix
    if (newer < c && (newer == 0 || (n.link & kStrideMask) == 1)) return (uint32_t)n.value_of(t, newer);
    if (newer == c && (S)at < n.high) return (uint32_t)n.low;
    return newer > 0 ? (uint32_t)n.value_of(t, newer - 1) : n.prev;
  }
  template <class Pool, class N, int T>
  __device__ bool descend(const Pool& pool, typename N::S k, N& n, uint32_t& cur, uint32_t& steps,
                          const Tile<T>& t) const {
    cur = pool.root();
    int expect = -1;
    while (steps++ < kMaxSteps) {
      int r = load(pool, cur, n, steps, t);
      if (r == kFailRetry) return false;
      if (r != kOK || misread(pool, n, k, expect)) {
        cur = pool.root();
        expect = -1;
        continue;
      }
      if (past_high(n, k)) {
        cur = n.link;
        expect = (int)n.level();
        continue;
      }
      if (n.level() == 0) return true;
      uint32_t c = child_for(pool, n, k, t);
      if (c == kNone) {
        cur = pool.root();
        expect = -1;
        continue;
      }
      expect = (int)n.level() - 1;
      cur = c;
    }
    return false;
  }
  template <class Pool, class N, int T>
  __device__ __forceinline__ bool next(const Pool& pool, N& n, uint32_t& steps, const Tile<T>& t) const {
    return load(pool, n.link, n, steps, t) == kOK;
  }
  // resolve walks, for every round in ok, the chain of the node it loaded
  // to the version at `at`, all rounds in lockstep (blink_wave.cuh's hook; no
  // writer runs beside a wave). A round whose chain ends first (a misroute)
  // or runs past the bound is no longer ok: it goes the generic way.
  template <class Pool, class Wv, int R>
  __device__ __forceinline__ void resolve(const Pool& pool, Wv& v, bool (&ok)[R]) const {
    for (uint32_t step = 0;; ++step) {
      bool need[R], index[R], any = false, anyIndex = false;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        uint32_t ts = v.ts(r);  // a warp-wide shuffle: every lane, every round
        need[r] = ok[r] && ts > at;
        index[r] = need[r] && ts == kIndexTs;
        any |= need[r];
        anyIndex |= index[r];
      }
      if (!__any_sync(kFull, any)) return;
      anyIndex = __any_sync(kFull, anyIndex);  // the index step's collectives: all lanes or none
#pragma unroll
      for (int r = 0; r < R; ++r) {
        uint32_t pv = v.prev(r);
        if (anyIndex) {
          const uint32_t nx = wave_index_next(v, r, pv);
          if (index[r]) pv = nx;
        }
        if (need[r] && (step >= kChainSteps || !pool.valid(pv))) {
          ok[r] = false;
          need[r] = false;
        }
        v.load(pool, r, pv, need[r]);
      }
    }
  }
  // wave_index_next is index_next for round r of a wave (warp-wide
  // collectives: every lane calls it).
  template <class Wv>
  __device__ __forceinline__ uint32_t wave_index_next(const Wv& v, int r, uint32_t prev) const {
    using S = typename Wv::S;
    const int c = v.count(r);
    const int newer = c - v.count_le(r, (S)at, c);
    const uint32_t stride = v.link(r) & kStrideMask;
    const S low = v.low(r), high = v.high(r);
    const int s = newer < c && (newer == 0 || stride == 1) ? newer : newer - 1;
    const uint32_t e = (uint32_t)v.val_at(r, s);  // clamped inside: s may be -1 or c (every collective before the branches)
    if (newer < c && (newer == 0 || stride == 1)) return e;
    if (newer == c && (S)at < high) return (uint32_t)low;
    return newer > 0 ? e : prev;
  }
};

template <typename S>
__device__ __forceinline__ void report_result(uint32_t* status, int r) {
  if (r == kFailPool) wk::report(status, wk::kStatusPoolExhausted);
  if (r == kFailRetry) wk::report(status, wk::kStatusRetryLimit);
}

// ---- batch drivers: one operation per tile ----------------------------------

// apply_batch applies keys[i] (with vals[i], or deleted) in tile i with the
// versioner ver and adds the change of the key count.
template <typename K, typename V, class Vr>
__device__ void apply_batch(slab::Pool* p, uint32_t root, unsigned long long* ctl, uint32_t* status, uint32_t w,
                            Vr& ver, const K* keys, const V* vals, uint64_t n, bool del) {
  using S = SlotOf<K, V>;
  constexpr int T = Lay<S>::kTile;
  uint64_t i = tile_id<T>();
  Tile<T> t;
  WritePool<S, T> pool(p, root, status, (uint32_t)i * 0x9e3779b9u ^ w);
  int d = 0;
  ver.begin(pool, i < n, t);
  if (i < n) {
    int r = del ? op_delete<Node<S>>(pool, ver, (S)keys[i], d, t)
                : op_insert<Node<S>>(pool, ver, (S)keys[i], (S)vals[i], d, t);
    if (t.rank == 0) report_result<S>(status, r);
  }
  ver.end(pool, t);
  // The pool's count of units in use and the key count: one atomic a block
  // each (the write kernels run blocks of one warp), not one a tile.
  add_keys(&p->used, pool.take(), t.rank == 0);
  add_keys(ctl + kCtlKeys, del ? -(long long)d : (long long)d, t.rank == 0);
}

template <typename K, typename V>
__device__ void write_batch(slab::Pool* p, uint32_t root, unsigned long long* ctl, uint32_t* status, uint32_t w,
                            uint32_t mode, uint32_t index_at, uint32_t closes, const uint32_t* snaps, uint32_t nsnaps,
                            uint32_t* retire,
                            uint32_t retire_cap, uint32_t* retire_n, const K* keys, const V* vals, uint64_t n,
                            bool del) {
  using S = SlotOf<K, V>;
  MV<S> ver{{}, w, mode, closes & kClosesMask, nsnaps >= index_at, Snapshots{snaps, nsnaps},
            Retire{retire, retire_cap, retire_n}};
  apply_batch<K, V>(p, root, ctl, status, w, ver, keys, vals, n, del);
  add_keys(ctl + kCtlVersions, ver.copies + ver.indexes - ver.removed, Tile<Lay<S>::kTile>().rank == 0);
}

// plain_batch is write_batch with the Plain versioner (no copies, no
// splices: the host launches it only when none can be needed).
template <typename K, typename V>
__device__ void plain_batch(slab::Pool* p, uint32_t root, unsigned long long* ctl, uint32_t* status, uint32_t w,
                            const K* keys, const V* vals, uint64_t n, bool del) {
  Plain ver(w);
  apply_batch<K, V>(p, root, ctl, status, w, ver, keys, vals, n, del);
}

// copy_batch is plain_batch under CopyAlways: a copy per node written, each
// retired unlinked (PlainCopy).
template <typename K, typename V>
__device__ void copy_batch(slab::Pool* p, uint32_t root, unsigned long long* ctl, uint32_t* status, uint32_t w,
                           uint32_t* retire, uint32_t retire_cap, uint32_t* retire_n, const K* keys, const V* vals,
                           uint64_t n, bool del) {
  PlainCopy ver(w, Retire{retire, retire_cap, retire_n});
  apply_batch<K, V>(p, root, ctl, status, w, ver, keys, vals, n, del);
}

template <typename K, typename V>
__device__ void lookup_batch(slab::Pool* p, uint32_t root, uint32_t* status, uint32_t at, uint32_t validated,
                             const K* keys, uint64_t n, V* out_vals, uint8_t* out_found) {
  using S = SlotOf<K, V>;
  constexpr int T = Lay<S>::kTile;
  uint64_t i = tile_id<T>();
  if (i >= n) return;
  Tile<T> t;
  ReadPool<S> pool{p, root};
  S v = 0;
  bool found = false;
  int r = at == kLatest ? op_lookup<Node<S>>(pool, Latest{validated != 0}, (S)keys[i], v, found, t)
                        : op_lookup<Node<S>>(pool, AtVersion{at, validated != 0}, (S)keys[i], v, found, t);
  if (t.rank == 0) {
    report_result<S>(status, r);
    out_vals[i] = found ? (V)v : V(0);
    out_found[i] = found ? 1 : 0;
  }
}

template <typename K, typename V>
__device__ void neighbor_batch(slab::Pool* p, uint32_t root, uint32_t* status, uint32_t at, uint32_t validated,
                               const K* keys, uint64_t n, uint32_t predecessor, K* out_keys, V* out_vals,
                               uint8_t* out_found) {
  using S = SlotOf<K, V>;
  constexpr int T = Lay<S>::kTile;
  uint64_t i = tile_id<T>();
  if (i >= n) return;
  Tile<T> t;
  ReadPool<S> pool{p, root};
  S k = (S)keys[i], rk = 0, rv = 0;
  bool found = false;
  int r;
  if (at == kLatest) {
    Latest rd{validated != 0};
    r = predecessor ? op_predecessor<Node<S>>(pool, rd, k, rk, rv, found, t)
                    : op_successor<Node<S>>(pool, rd, k, rk, rv, found, t);
  } else {
    AtVersion rd{at, validated != 0};
    r = predecessor ? op_predecessor<Node<S>>(pool, rd, k, rk, rv, found, t)
                    : op_successor<Node<S>>(pool, rd, k, rk, rv, found, t);
  }
  if (t.rank == 0) {
    report_result<S>(status, r);
    out_keys[i] = found ? (K)rk : K(0);
    out_vals[i] = found ? (V)rv : V(0);
    out_found[i] = found ? 1 : 0;
  }
}

// range_batch counts the keys of [lo[i], hi[i]) and, with offsets, writes the
// first pairs to query i's window [offsets[i], offsets[i+1]) (a window that
// decreases or passes out_len is reported and left empty).
template <typename K, typename V>
__device__ void range_batch(slab::Pool* p, uint32_t root, uint32_t* status, uint32_t at, uint32_t validated,
                            const K* lo, const K* hi, uint64_t n, const uint32_t* offsets, uint64_t out_len,
                            K* out_keys, V* out_vals, uint32_t* counts) {
  using S = SlotOf<K, V>;
  constexpr int T = Lay<S>::kTile;
  uint64_t i = tile_id<T>();
  if (i >= n) return;
  Tile<T> t;
  ReadPool<S> pool{p, root};
  uint32_t off = 0, limit = 0, total = 0;
  if (offsets) {
    uint32_t a = offsets[i], b = offsets[i + 1];
    if (a <= b && (uint64_t)b <= out_len) {
      off = a;
      limit = b - a;
    } else if (t.rank == 0) {
      wk::report(status, wk::kStatusInvalidArgument);
    }
  }
  K* ok = offsets ? out_keys + off : nullptr;
  V* ov = offsets ? out_vals + off : nullptr;
  int r = at == kLatest
              ? op_range<Node<S>, K, V>(pool, Latest{validated != 0}, (S)lo[i], (S)hi[i], ok, ov, limit, total, t)
              : op_range<Node<S>, K, V>(pool, AtVersion{at, validated != 0}, (S)lo[i], (S)hi[i], ok, ov, limit,
                                        total, t);
  if (t.rank == 0) {
    report_result<S>(status, r);
    counts[i] = total;
  }
}

// Phased queries of the latest version (no writer runs beside them): the
// lockstep waves shared with btree (blink_wave.cuh), over the heads.

// The latest version's waves read heads; a snapshot's walk each node's chain
// to its stamp (AtVersion::resolve).
template <typename K, typename V>
__device__ void phased_lookup(slab::Pool* p, uint32_t root, uint32_t* status, uint32_t at, const K* keys, uint64_t n,
                              V* out_vals, uint8_t* out_found) {
  using S = SlotOf<K, V>;
  const ReadPool<S> pool(p, root);
  if (at == kLatest)
    wave_lookup<Node<S>>(pool, Latest{false}, status, keys, (const uint32_t*)nullptr, n, out_vals, out_found);
  else
    wave_lookup<Node<S>>(pool, AtVersion{at, false}, status, keys, (const uint32_t*)nullptr, n, out_vals, out_found);
}

template <typename K, typename V>
__device__ void phased_neighbor(slab::Pool* p, uint32_t root, uint32_t* status, uint32_t at, const K* keys, uint64_t n,
                                uint32_t predecessor, K* out_keys, V* out_vals, uint8_t* out_found) {
  using S = SlotOf<K, V>;
  const ReadPool<S> pool(p, root);
  if (at == kLatest)
    wave_neighbor<Node<S>>(pool, Latest{false}, status, keys, (const uint32_t*)nullptr, n, predecessor, out_keys,
                           out_vals, out_found);
  else
    wave_neighbor<Node<S>>(pool, AtVersion{at, false}, status, keys, (const uint32_t*)nullptr, n, predecessor,
                           out_keys, out_vals, out_found);
}

template <typename K, typename V>
__device__ void phased_range(slab::Pool* p, uint32_t root, uint32_t* status, uint32_t at, const K* lo, const K* hi,
                             uint64_t n, const uint32_t* offsets, uint64_t out_len, K* out_keys, V* out_vals,
                             uint32_t* counts) {
  using S = SlotOf<K, V>;
  const ReadPool<S> pool(p, root);
  if (at == kLatest)
    wave_range<Node<S>>(pool, Latest{false}, status, lo, hi, (const uint32_t*)nullptr, n, offsets, out_len, out_keys,
                        out_vals, counts);
  else
    wave_range<Node<S>>(pool, AtVersion{at, false}, status, lo, hi, (const uint32_t*)nullptr, n, offsets, out_len,
                        out_keys, out_vals, counts);
}

// build_level writes the nodes of one level of a bulk-built tree, one tile
// per node (grid-stride): node j of the level is unit addrs[node_base + j],
// holding pairs [j*fill, ...) of the sorted distinct keys/vals (leaves) or the
// children [j*fanout, ...) of the level below (whose nodes start at
// child_base); it covers the pairs from j*span on. Every node is stamped w.
template <typename K, typename V>
__device__ void build_level(slab::Pool* p, const uint32_t* addrs, const K* keys, const V* vals, uint64_t m,
                            uint32_t level, uint64_t node_base, uint64_t nodes, uint64_t child_base, uint64_t children,
                            uint32_t fill, uint32_t fanout, uint64_t span, uint64_t child_span, uint32_t w) {
  using S = SlotOf<K, V>;
  constexpr int T = Lay<S>::kTile;
  Tile<T> t;
  ReadPool<S> pool{p, kNone};
  for (uint64_t j = tile_id<T>(); j < nodes; j += tile_count<T>()) {
    Node<S> nd;
    const uint32_t next = j + 1 < nodes ? addrs[node_base + j + 1] : kNone;
    build_node(nd, keys, vals, m, level, nodes, children, fill, fanout, span, child_span, j, next,
               [addrs, child_base](uint64_t c) { return addrs[child_base + c]; }, t);
    nd.set_version(t, w, kNone);
    nd.store_all(pool, addrs[node_base + j], t);
  }
}

// ---- unit scans: every allocated unit of a pool, one tile per unit ----------

template <typename S, int T>
struct UnitScan {
  slab::Pool* p;
  uint64_t units;
  __device__ __forceinline__ UnitScan(slab::Pool* pool) : p(pool) {
    units = (uint64_t)slab::total_blocks(p) * slab::kUnitsPerBlock;
  }
  // address of unit index u (the pool's numbering: super block, block, unit)
  __device__ __forceinline__ uint32_t address(uint64_t u) const {
    uint64_t per = (uint64_t)__ldg(&p->blocks_per_super) * slab::kUnitsPerBlock;
    return (uint32_t)((u / per) << 24 | (u % per));
  }
  __device__ __forceinline__ bool allocated(uint32_t a) const {
    return (*slab::bitmap_word(p, a) >> (a & 31)) & 1u;
  }
};

// vacuum splices the chain of every head (exclusive: no other launch runs)
// into the retire log (out[3]: the units it unlinked); stats counts heads,
// linked versions, the versions an open snapshot sees and version indexes
// into out[0..2] and out[4]; restamp maps every stamp (an index's entries'
// and high included) to its rank among the open snapshots' (ascending)
// stamps, plus one: 1 + the stamps below it, which keeps every snapshot's
// view (ts <= p iff the new ts <= the new p) and leaves 0 unused.
constexpr uint32_t kScanVacuum = 0, kScanStats = 1, kScanRestamp = 2;
static_assert(kScanStats != kScanVacuum && kScanStats != kScanRestamp, "scan operations differ");

template <typename K, typename V>
__device__ void scan_units(slab::Pool* p, uint32_t root, uint32_t op, const uint32_t* snaps, uint32_t nsnaps,
                           uint32_t* retire, uint32_t retire_cap, uint32_t* retire_n, unsigned long long* out) {
  using S = SlotOf<K, V>;
  constexpr int T = Lay<S>::kTile;
  Tile<T> t;
  UnitScan<S, T> scan(p);
  ReadPool<S> pool{p, root};
  Snapshots reg{snaps, nsnaps};
  Retire ret{retire, retire_cap, retire_n};
  long long heads = 0, linked = 0, pinned = 0, removed = 0, indexes = 0;
  for (uint64_t u = tile_id<T>(); u < scan.units; u += tile_count<T>()) {
    uint32_t a = scan.address(u);
    if (!scan.allocated(a)) continue;
    Node<S> n;
    n.load(pool, a, kStrong, t);
    if (op == kScanRestamp) {
      if (n.ts == kIndexTs) {  // an index: its entries' stamps and high, each lane its own
        if (n.pairs() == 0) continue;  // a pass-through: high stays 0
#pragma unroll
        for (int p = 0; p < Lay<S>::kPairs; ++p)
          if (Node<S>::holds(n.slot(t, p)) && n.slot(t, p) < (int)n.pairs()) n.w[2 * p] = (S)reg.rank((uint32_t)n.w[2 * p]);
        if constexpr (sizeof(S) == 4) {
          if (t.rank == 0) n.w[3] = reg.rank((uint32_t)n.high);
        } else {
          if (t.rank == 1) n.w[0] = reg.rank((uint32_t)n.high);
        }
        n.store_all(pool, a, t);
        continue;
      }
      if (t.rank == 0) st_u32(pool.node(a) + Lay<S>::kVersionByte, reg.rank(n.ts));
      continue;
    }
    if (n.meta & kLatch) continue;  // a version: reached from its head (kScanStats)
    ++heads;
    if (op == kScanVacuum) {
      NoIndex none;
      uint32_t chain = splice<S>(pool, reg, ret, n.prev, n.ts, removed, none, t);
      if (chain != n.prev && t.rank == 0) set_prev<S>(pool, a, chain, t);
      continue;
    }
    uint32_t cur = n.prev, up = n.ts;
    for (uint32_t steps = 0; cur != kNone && steps < kChainSteps && pool.valid(cur); ++steps) {
      uint32_t ts, prev;
      version_of<S>(pool, cur, ts, prev, t);
      if (ts == kIndexTs) {
        ++indexes;
      } else {
        ++linked;
        if (reg.any_in(ts, up)) ++pinned;
        up = ts;
      }
      cur = prev;
    }
  }
  if (t.rank == 0 && out) {
    if (heads) atomicAdd(out + 0, (unsigned long long)heads);
    if (linked) atomicAdd(out + 1, (unsigned long long)linked);
    if (pinned) atomicAdd(out + 2, (unsigned long long)pinned);
    if (removed) atomicAdd(out + 3, (unsigned long long)removed);
    if (indexes) atomicAdd(out + 4, (unsigned long long)indexes);
  }
}

// poison overwrites units about to be freed (a debug mode of the tests): a
// reader that reaches one finds a node no check accepts (count 255, a link
// outside every pool, stamp 0 so that every snapshot stops at it).
template <typename S>
__device__ void poison(slab::Pool* p, const uint32_t* addrs, uint64_t n) {
  constexpr int T = Lay<S>::kTile;
  Tile<T> t;
  ReadPool<S> pool{p, kNone};
  for (uint64_t j = tile_id<T>(); j < n; j += tile_count<T>()) {
    S w[Lay<S>::kWords];
#pragma unroll
    for (int q = 0; q < Lay<S>::kWords; ++q) w[q] = (S)0xfefefefefefefefeull;
    if (t.rank == 0) {
      if constexpr (sizeof(S) == 4) {
        w[0] = 0x7fff00ffu;
        w[1] = 0xfffffffeu;
      } else {
        w[0] = 0xfffffffe7fff00ffull;
      }
    }
    if (t.rank == Lay<S>::kVersionLane) {  // stamp 0, prev outside every pool
      if constexpr (sizeof(S) == 4) {
        w[Lay<S>::kVersionWord] = 0;
        w[Lay<S>::kVersionWord + 1] = 0xfffffffeu;
      } else {
        w[Lay<S>::kVersionWord] = 0xfffffffe00000000ull;
      }
    }
    wk::mem::st_chunk(pool.node(addrs[j]) + t.rank * 16, w);
  }
}

}  // namespace

// The write kernels are held to 64 registers (32 warps an SM, a few bytes
// spilled): on the H200 that built 17% faster than 80 registers (the kernels
// wait on memory; more warps hide more of it). The insert kernel runs in
// blocks of one warp (kernels.go's writeBlock): 256 threads is a ceiling.
// Moving the allocator's probing and the splice out of line took the spills
// away but built 3-15% slower (ncu: more instructions, local-memory traffic).
#define MVB_KERNELS(SUF, K, V)                                                                                       \
  extern "C" __global__ void __launch_bounds__(256, 4)                                                               \
      mvb_insert_##SUF(slab::Pool* p, uint32_t root, unsigned long long* ctl, uint32_t* status, uint32_t w,         \
                       uint32_t mode, uint32_t index_at, uint32_t closes, const uint32_t* snaps, uint32_t nsnaps,   \
                       uint32_t* retire, uint32_t retire_cap, uint32_t* retire_n, const K* keys, const V* vals,      \
                       uint64_t n) {                                                                                 \
    write_batch<K, V>(p, root, ctl, status, w, mode, index_at, closes, snaps, nsnaps, retire, retire_cap, retire_n, \
                      keys, vals, n, false);                                                                         \
  }                                                                                                                  \
  extern "C" __global__ void __launch_bounds__(256, 4)                                                               \
      mvb_delete_##SUF(slab::Pool* p, uint32_t root, unsigned long long* ctl, uint32_t* status, uint32_t w,         \
                       uint32_t mode, uint32_t index_at, uint32_t closes, const uint32_t* snaps, uint32_t nsnaps,   \
                       uint32_t* retire, uint32_t retire_cap, uint32_t* retire_n, const K* keys, uint64_t n) {       \
    write_batch<K, V>(p, root, ctl, status, w, mode, index_at, closes, snaps, nsnaps, retire, retire_cap, retire_n, \
                      keys, nullptr, n, true);                                                                       \
  }                                                                                                                  \
  extern "C" __global__ void __launch_bounds__(256, 4)                                                               \
      mvb_insert_plain_##SUF(slab::Pool* p, uint32_t root, unsigned long long* ctl, uint32_t* status, uint32_t w,   \
                             const K* keys, const V* vals, uint64_t n) {                                             \
    plain_batch<K, V>(p, root, ctl, status, w, keys, vals, n, false);                                               \
  }                                                                                                                  \
  extern "C" __global__ void __launch_bounds__(256, 4)                                                               \
      mvb_delete_plain_##SUF(slab::Pool* p, uint32_t root, unsigned long long* ctl, uint32_t* status, uint32_t w,   \
                             const K* keys, uint64_t n) {                                                            \
    plain_batch<K, V>(p, root, ctl, status, w, keys, nullptr, n, true);                                             \
  }                                                                                                                  \
  extern "C" __global__ void __launch_bounds__(256, 4)                                                               \
      mvb_insert_copy_##SUF(slab::Pool* p, uint32_t root, unsigned long long* ctl, uint32_t* status, uint32_t w,    \
                            uint32_t* retire, uint32_t retire_cap, uint32_t* retire_n, const K* keys, const V* vals, \
                            uint64_t n) {                                                                            \
    copy_batch<K, V>(p, root, ctl, status, w, retire, retire_cap, retire_n, keys, vals, n, false);                  \
  }                                                                                                                  \
  extern "C" __global__ void __launch_bounds__(256, 4)                                                               \
      mvb_delete_copy_##SUF(slab::Pool* p, uint32_t root, unsigned long long* ctl, uint32_t* status, uint32_t w,    \
                            uint32_t* retire, uint32_t retire_cap, uint32_t* retire_n, const K* keys, uint64_t n) {  \
    copy_batch<K, V>(p, root, ctl, status, w, retire, retire_cap, retire_n, keys, nullptr, n, true);                \
  }                                                                                                                  \
  extern "C" __global__ void mvb_lookup_##SUF(slab::Pool* p, uint32_t root, uint32_t* status, uint32_t at,          \
                                               uint32_t validated, const K* keys, uint64_t n, V* out_vals,           \
                                               uint8_t* out_found) {                                                 \
    lookup_batch<K, V>(p, root, status, at, validated, keys, n, out_vals, out_found);                               \
  }                                                                                                                  \
  extern "C" __global__ void mvb_neighbor_##SUF(slab::Pool* p, uint32_t root, uint32_t* status, uint32_t at,        \
                                                 uint32_t validated, const K* keys, uint64_t n, uint32_t predecessor, \
                                                 K* out_keys, V* out_vals, uint8_t* out_found) {                     \
    neighbor_batch<K, V>(p, root, status, at, validated, keys, n, predecessor, out_keys, out_vals, out_found);      \
  }                                                                                                                  \
  extern "C" __global__ void mvb_range_##SUF(slab::Pool* p, uint32_t root, uint32_t* status, uint32_t at,           \
                                              uint32_t validated, const K* lo, const K* hi, uint64_t n,              \
                                              const uint32_t* offsets, uint64_t out_len, K* out_keys, V* out_vals,  \
                                              uint32_t* counts) {                                                    \
    range_batch<K, V>(p, root, status, at, validated, lo, hi, n, offsets, out_len, out_keys, out_vals, counts);     \
  }                                                                                                                  \
  extern "C" __global__ void __launch_bounds__(256, 4)                                                               \
      mvb_phased_lookup_##SUF(slab::Pool* p, uint32_t root, uint32_t* status, uint32_t at, const K* keys,           \
                              uint64_t n, V* out_vals, uint8_t* out_found) {                                         \
    phased_lookup<K, V>(p, root, status, at, keys, n, out_vals, out_found);                                          \
  }                                                                                                                  \
  extern "C" __global__ void mvb_phased_neighbor_##SUF(slab::Pool* p, uint32_t root, uint32_t* status, uint32_t at,  \
                                                        const K* keys, uint64_t n, uint32_t predecessor, K* out_keys, \
                                                        V* out_vals, uint8_t* out_found) {                           \
    phased_neighbor<K, V>(p, root, status, at, keys, n, predecessor, out_keys, out_vals, out_found);                \
  }                                                                                                                  \
  extern "C" __global__ void mvb_phased_range_##SUF(slab::Pool* p, uint32_t root, uint32_t* status, uint32_t at,     \
                                                     const K* lo, const K* hi, uint64_t n, const uint32_t* offsets, \
                                                     uint64_t out_len, K* out_keys, V* out_vals, uint32_t* counts) { \
    phased_range<K, V>(p, root, status, at, lo, hi, n, offsets, out_len, out_keys, out_vals, counts);               \
  }                                                                                                                  \
  extern "C" __global__ void mvb_build_level_##SUF(                                                                  \
      slab::Pool* p, const uint32_t* addrs, const K* keys, const V* vals, uint64_t m, uint32_t level,                \
      uint64_t node_base, uint64_t nodes, uint64_t child_base, uint64_t children, uint32_t fill, uint32_t fanout,    \
      uint64_t span, uint64_t child_span, uint32_t w) {                                                              \
    build_level<K, V>(p, addrs, keys, vals, m, level, node_base, nodes, child_base, children, fill, fanout, span,    \
                      child_span, w);                                                                                \
  }                                                                                                                  \
  extern "C" __global__ void mvb_scan_##SUF(slab::Pool* p, uint32_t root, uint32_t op, const uint32_t* snaps,       \
                                             uint32_t nsnaps, uint32_t* retire, uint32_t retire_cap,                 \
                                             uint32_t* retire_n, unsigned long long* out) {                          \
    scan_units<K, V>(p, root, op, snaps, nsnaps, retire, retire_cap, retire_n, out);                                 \
  }

MVB_KERNELS(u32_u32, uint32_t, uint32_t)
MVB_KERNELS(u32_u64, uint32_t, uint64_t)
MVB_KERNELS(u64_u32, uint64_t, uint32_t)
MVB_KERNELS(u64_u64, uint64_t, uint64_t)

extern "C" __global__ void mvb_mark_last_u32(const uint32_t* keys, uint64_t n, uint8_t* flags) {
  mark_last(keys, n, flags);
}
extern "C" __global__ void mvb_mark_last_u64(const uint64_t* keys, uint64_t n, uint8_t* flags) {
  mark_last(keys, n, flags);
}
extern "C" __global__ void mvb_poison_128(slab::Pool* p, const uint32_t* addrs, uint64_t n) {
  poison<uint32_t>(p, addrs, n);
}
extern "C" __global__ void mvb_poison_256(slab::Pool* p, const uint32_t* addrs, uint64_t n) {
  poison<uint64_t>(p, addrs, n);
}
