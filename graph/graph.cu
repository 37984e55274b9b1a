// graph.cu: the CUDA backend's kernels. Every vertex has a slab hash table of
// its neighbours (a set, or a map to weights) in one shared bucket arena,
// with overflow slabs from one shared slaballoc pool; the slab hash engine
// (slabhash.cuh) runs edge batches unchanged but for its locator, which
// finds an element's bucket in the table of its source vertex (VertexLoc)
// and counts its Inserted and Removed in that vertex's degree.
//
// The vertex dictionary is an array of Vertex (16 bytes); the arena an array
// of head slabs, vertex v's buckets at [base, base+nb). The kernels that run
// per bucket (sweep, the tile gather of map slabs) take an owner array,
// owner[b] the vertex of arena bucket b or kOrphan for a bucket no vertex
// owns (Rehash moved its table): scratch built from the dictionary by
// gr_owner when such a kernel needs it, not kept beside the arena (4 bytes
// a bucket). The gather of set slabs runs by vertex and needs none.
#include "shared.cuh"
#include "slabhash.cuh"

namespace wk {
namespace gr {

using sh::Ctx;
using sh::Geometry;
using sh::Lane;
using sh::kNull;
using sh::Pool;
using sh::Tile;

// Vertex is a dictionary entry. Go mirrors it (gpu.go: vertexEntry).
struct Vertex {
  uint32_t base;    // first bucket in the arena
  uint32_t nb;      // buckets
  uint32_t degree;  // live entries (exact when no batch runs)
  uint32_t flags;   // unused (0)
};
static_assert(sizeof(Vertex) == 16, "Vertex is mirrored in Go");

// kOrphan is the owner of a bucket left behind by Rehash: empty, skipped.
constexpr uint32_t kOrphan = 0xFFFFFFFFu;

// Modes of prep (PrepMode's bits, in shared.cuh with the Go side):
// undirected graphs store both directions; self-loops are skipped unless
// allowed; device batches have their IDs checked. An insert batch's prep
// also gives vertices without a table one bucket each (kPrepClaim: see
// try_claim). A build's first batch into an unweighted graph's empty head
// slabs is placed by prep itself (kPrepPlace: see place).

// SetSlab is the slab of unweighted graphs (GR_LAYOUT(set) below): seven
// 32-bit keys and the next pointer in 32 bytes, the layout prep's placement
// and settle write.
using SetSlab = sh::Layout<uint32_t, uint32_t, sh::kSet, 8, false>;
static_assert(SetSlab::kSlabBytes == 32 && SetSlab::kSlots == 7 && SetSlab::kNextOffset == 28, "a set slab");

// kAll is a whole warp's lane mask. Kernels whose lanes meet in warp
// collectives run warp-uniform loops (every lane of a warp takes the same
// trips: i0 steps over whole warps, i0 + lane the lane's item).
constexpr uint32_t kAll = 0xFFFFFFFFu;

// warp_sum returns x summed over the warp (every lane calls it).
__device__ __forceinline__ unsigned long long warp_sum(unsigned long long x) {
  for (int off = 16; off > 0; off >>= 1) x += __shfl_xor_sync(kAll, x, off);
  return x;
}

// warp_scan returns the inclusive scan of x over the warp's lanes (every
// lane calls it).
__device__ __forceinline__ uint32_t warp_scan(uint32_t x) {
  const uint32_t lane = slab::lane();
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const uint32_t y = __shfl_up_sync(kAll, x, off);
    if (lane >= (uint32_t)off) x += y;
  }
  return x;
}

// warp_owner returns the lane whose run holds item p of the lanes' runs
// laid end to end (incl: warp_scan of their lengths): the number of lanes
// whose runs end at or before p, by a binary search (five shuffles; every
// lane calls it).
__device__ __forceinline__ int warp_owner(uint32_t incl, uint32_t p) {
  int o = 0;
#pragma unroll
  for (int step = 16; step > 0; step >>= 1)
    if (__shfl_sync(kAll, incl, o + step - 1) <= p) o += step;
  return o;
}

// kNoRun marks a lane without a value for run_length.
constexpr uint32_t kNoRun = 0xFFFFFFFFu;

// run_length returns, for a lane holding value u of 32 consecutive values
// (one a lane, lane order), the length of the run of equal values it heads,
// or 0 when it heads none or holds kNoRun (every lane calls it). Sorted or
// grouped values come in runs: one atomic a run instead of one a value.
__device__ __forceinline__ uint32_t run_length(uint32_t u) {
  const uint32_t lane = slab::lane();
  const uint32_t prev = __shfl_up_sync(kAll, u, 1);
  const uint32_t heads = __ballot_sync(kAll, lane == 0 || u != prev);
  if (u == kNoRun || !((heads >> lane) & 1u)) return 0;
  const uint32_t later = lane == 31 ? 0u : heads & (0xffffffffu << (lane + 1));
  const uint32_t end = later ? (uint32_t)__ffs(later) - 1 : 32u;
  return end - lane;
}

// Insert prep gives a table to every source vertex without one (kPrepClaim):
// try_claim claims vertex x's table, when want and it has none, with a CAS
// of its bucket count from 0 (one thread gives a vertex its table; no apply
// launch runs meanwhile: stream order); give_claimed then gives it bucket
// first + b, b its number among the launch's claims (ctrl[kCtrlTables]),
// if b < room: the host made room for that many buckets past its first
// free one. A claim past the room is taken back (the vertex stays without a
// table; the apply launch fails its inserts with kStatusNoTable and the
// host gives it one then); the count then exceeds the tables given, which
// the host takes as min(count, room). The numbers are taken with one atomic
// a block (gr_prep): that counter is the launch's one hot spot, and an
// atomic a warp and call there cost a 2^22-edge batch into a half-built
// road graph 0.15 ms on the H200.
//
// lack is a hint, a bitmap of the vertices that may lack a table (written
// by gr_buckets, bits cleared by give_claimed): only those are looked up in
// the dictionary, whose 16-byte entries are read at random where the
// bitmap (a bit a vertex) stays in L2. A vertex whose bit is wrongly clear
// fails its inserts with kStatusNoTable and gets its table from the host.
__device__ __forceinline__ bool try_claim(Vertex* dict, const uint32_t* lack, uint32_t x, bool want) {
  if (!want || !((lack[x >> 5] >> (x & 31)) & 1u)) return false;
  return dict[x].nb == 0 && atomicCAS(&dict[x].nb, 0u, 1u) == 0u;
}

__device__ __forceinline__ void give_claimed(Vertex* dict, uint32_t* lack, uint32_t x, bool mine, uint64_t b,
                                             uint64_t first, uint64_t room) {
  if (!mine) return;
  if (b < room) {
    dict[x].base = (uint32_t)(first + b);
    atomicAnd(&lack[x >> 5], ~(1u << (x & 31)));
  } else {
    dict[x].nb = 0;
  }
}

// VertexLoc is the locator of an edge batch: element i is an entry of the
// table of vertex src[i] (its key the neighbour). A vertex of no buckets
// has no table (a build gives none to a vertex without entries): its head
// is null (slabhash.cuh: a find or delete is NotFound, an insert fails with
// kStatusNoTable and the host gives the vertex a bucket, gr_claim_tables).
// bucket_of is the arena bucket of key k in the table bn = (base, nb) of
// its vertex (nb > 0): every path that finds or places a key uses it.
__device__ __forceinline__ size_t bucket_of(uint2 bn, uint32_t k, uint32_t seed) {
  return (size_t)bn.x + __umulhi(hash_key(k, seed), bn.y);
}

struct VertexLoc {
  static constexpr bool kMayLack = true;
  const uint32_t* src;
  Vertex* dict;
  template <class L>
  __device__ __forceinline__ char* head(const Ctx<L>& c, uint64_t i, typename L::K k) const {
    const uint2 bn = *(const uint2*)&dict[src[i]];  // base, nb
    if (bn.y == 0) return nullptr;
    return c.heads + bucket_of(bn, k, c.seed) * L::kSlabBytes;
  }
  __device__ __forceinline__ void counted(uint64_t i, long long d) const {
    atomicAdd(&dict[src[i]].degree, (uint32_t)(int)d);
  }
};

__device__ __forceinline__ uint64_t thread_index() { return blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; }
__device__ __forceinline__ uint64_t thread_count() { return (uint64_t)gridDim.x * blockDim.x; }

// block_add adds a block's warp sums (lane 0's value of each warp) to *dst
// with one atomic: every thread of the block calls it. Same-address atomics
// serialise at the L2 (about a nanosecond each), so one from every warp of
// a launch of thousands at its end cost it tens of microseconds (ncu, H200).
// slot picks one of a kernel's block_add sums (each its own shared word).
template <int kSlot = 0>
__device__ __forceinline__ void block_add(unsigned long long* dst, unsigned long long warpValue) {
  __shared__ unsigned long long sum;
  if (threadIdx.x == 0) sum = 0;
  __syncthreads();
  if (slab::lane() == 0 && warpValue) atomicAdd(&sum, warpValue);
  __syncthreads();
  if (threadIdx.x == 0 && sum) atomicAdd(dst, sum);
}

// place puts key y into the table of vertex x when that table's head slab
// has a slot left, for prep's kPrepPlace (one thread; the batch is a build's
// first, its head slabs empty and nothing else running): the slab's next
// word, all ones (kNull) in an empty slab, counts the keys placed there (a
// slab's first placement reads kNull and takes slot 0), and the key goes
// into the slot the count gives. A key past the slab's seven slots is not
// placed: it stays for the apply launch, after gr_settle has put the next
// word back and dropped repeated keys. (A build gives every source a
// table; a vertex without one would be laid out too, and its insert's
// kStatusNoTable fails the batch on the host.)
// The slot order is the placements' (the frontier rule of slabhash.cuh
// holds: the placed keys fill the slab from slot 0). One atomic a key
// where the engine's insert reads the slab and claims a slot by CAS.
__device__ __forceinline__ bool place(char* arena, const Vertex* dict, uint32_t seed, uint32_t x, uint32_t y) {
  const uint2 bn = *(const uint2*)&dict[x];  // base, nb
  if (bn.y == 0) return false;
  char* s = arena + bucket_of(bn, y, seed) * SetSlab::kSlabBytes;
  const uint32_t at = atomicAdd((unsigned*)(s + SetSlab::kNextOffset), 1u) + 1u;
  if (at >= (uint32_t)SetSlab::kSlots) return false;
  *(uint32_t*)(s + at * SetSlab::kSlotBytes) = y;
  return true;
}

// block_first numbers a block's items with one atomic on *counter: every
// thread of the block calls it with its warp's count of items (lane 0's is
// read), and it returns the number of the warp's first item (the items of
// the warps before it first). Same-address atomics serialise at the L2, so
// one a block, not one a warp.
__device__ __forceinline__ uint64_t block_first(uint32_t warpCount, unsigned long long* counter) {
  __shared__ uint32_t before[32];  // a warp's count, then the counts of the warps before it
  __shared__ unsigned long long first;
  const uint32_t warp = threadIdx.x / 32;
  if (slab::lane() == 0) before[warp] = warpCount;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t sum = 0;
    for (uint32_t w = 0; w < blockDim.x / 32; ++w) {
      const uint32_t c = before[w];
      before[w] = sum;
      sum += c;
    }
    first = sum ? atomicAdd(counter, (unsigned long long)sum) : 0;
  }
  __syncthreads();
  const uint64_t at = first + before[warp];
  __syncthreads();  // every thread's number read before the next call's
  return at;
}

// prep_placed is prep's kPrepPlace: each block takes kPlaceRound
// (shared.cuh) elements a thread at a time (consecutive threads,
// consecutive elements), so that its elements not placed are numbered with
// one atomic for the lot.
__device__ __forceinline__ void prep_placed(const uint32_t* src, const uint32_t* dst, uint64_t n, uint32_t cap,
                                            uint32_t mode, uint32_t* osrc, uint32_t* odst, uint8_t* res,
                                            unsigned long long* ctrl, Vertex* dict, char* arena, uint32_t seed,
                                            unsigned long long* tail) {
  uint32_t self = 0, placed = 0;
  const uint32_t lane = slab::lane(), below = (1u << lane) - 1u;
  const uint64_t round = (uint64_t)blockDim.x * kPlaceRound;
  for (uint64_t i0 = blockIdx.x * round; i0 < n; i0 += gridDim.x * round) {  // whole blocks: block_first
    uint32_t us[kPlaceRound], vs[kPlaceRound], b0[kPlaceRound], b1[kPlaceRound];
    uint32_t count = 0;
#pragma unroll
    for (int j = 0; j < kPlaceRound; ++j) {
      const uint64_t i = i0 + (uint64_t)j * blockDim.x + threadIdx.x;
      const bool in = i < n;
      uint32_t u = in ? src[i] : 0, v = in ? dst[i] : 0;
      const bool ok = in && u < cap && v < cap;
      const bool loop = u == v;
      const bool skip = loop && !(mode & kPrepSelfLoops);
      self += in && skip;
      if ((mode & kPrepUndirected) && u > v) {
        const uint32_t t = u;
        u = v;
        v = t;
      }
      // Elements i and n+i (the reverse, undirected) placed.
      const bool p0 = ok && !skip && place(arena, dict, seed, u, v);
      const bool p1 = ok && !loop && (mode & kPrepUndirected) && place(arena, dict, seed, v, u);
      placed += p0 + p1;
      // Degrees: one atomic a run of lanes with one source (sorted edges).
      if (const uint32_t len = run_length(p0 ? u : kNoRun)) atomicAdd(&dict[u].degree, len);
      if (const uint32_t len = run_length(p1 ? v : kNoRun)) atomicAdd(&dict[v].degree, len);
      us[j] = u;
      vs[j] = v;
      b0[j] = __ballot_sync(kAll, ok && !skip && !p0);
      b1[j] = __ballot_sync(kAll, ok && !loop && (mode & kPrepUndirected) && !p1);
      count += __popc(b0[j]) + __popc(b1[j]);
    }
    uint64_t at = block_first(count, tail);
    // The warp's elements of one ballot, x → y: each at its rank.
    auto lay = [&](uint32_t ballot, uint32_t x, uint32_t y) {
      if ((ballot >> lane) & 1u) {
        const uint64_t p = at + __popc(ballot & below);
        osrc[p] = x;
        odst[p] = y;
        res[p] = sh::kResFailed;
      }
      at += __popc(ballot);
    };
#pragma unroll
    for (int j = 0; j < kPlaceRound; ++j) {
      lay(b0[j], us[j], vs[j]);
      lay(b1[j], vs[j], us[j]);
    }
  }
  block_add(ctrl + kCtrlDelta, warp_sum(placed));  // one atomic a block
  if (self) atomicAdd(ctrl + kCtrlCount, (unsigned long long)self);
}

// prep lays an edge batch out for the apply launches: element i (< n) is the
// edge as given (directed graphs) or from its lower ID to its higher
// (undirected: the edge's canonical direction, whose result is the edge's),
// element n+i the reverse (undirected only). res[] is kResFailed for the
// elements to run and kResNotFound for skipped ones (a self-loop not allowed;
// the reverse of a self-loop); the apply launches run with kFlagRetry, which
// runs only failed elements. Self-loops skipped are counted in
// ctrl[kCtrlCount]; with kPrepCheckIDs an ID at or past cap (or reserved) in
// ctrl[kCtrlRejected], which makes every apply launch on the stream apply
// nothing. With kPrepClaim (inserts) every source vertex without a table that
// the lack hint marks gets one (try_claim; the others fail in the apply
// launch and get theirs from the host; IDs at or past cap are not touched,
// and a batch rejected for them may still have given tables, which hold
// nothing). With kPrepPlace (a build's first batch into an unweighted graph,
// neither kPrepCheckIDs nor kPrepClaim: its IDs were checked and every source has
// its table) each element is placed in its head slab (place), counted in
// its source's degree and in the batch's change of entries
// (ctrl[kCtrlDelta], which the first apply launch adds to), and only the
// elements not placed are laid out, each in its own direction, at the front
// of osrc/odst/res, their number in *tail (zero before; the apply launches'
// limit): one atomic a block, which numbers them. gr_settle must run
// before anything else reads the arena.
extern "C" __global__ void gr_prep(const uint32_t* src, const uint32_t* dst, uint64_t n, uint32_t cap, uint32_t mode,
                                   uint32_t* osrc, uint32_t* odst, uint8_t* res, unsigned long long* ctrl,
                                   Vertex* dict, uint32_t* lack, uint64_t first, uint64_t room, char* arena,
                                   uint32_t seed, unsigned long long* tail) {
  if ((mode & kPrepPlace) && !(mode & (kPrepCheckIDs | kPrepClaim))) {
    prep_placed(src, dst, n, cap, mode, osrc, odst, res, ctrl, dict, arena, seed, tail);
    return;
  }
  uint32_t bad = 0, self = 0;
  const uint32_t lane = slab::lane();
  for (uint64_t i0 = (uint64_t)blockIdx.x * blockDim.x; i0 < n; i0 += thread_count()) {  // whole blocks: the claims
    const uint64_t i = i0 + threadIdx.x;
    const bool in = i < n;
    uint32_t u = in ? src[i] : 0, v = in ? dst[i] : 0;
    const bool ok = in && u < cap && v < cap;
    if ((mode & kPrepCheckIDs) && in && !ok) ++bad;
    const bool loop = u == v;
    const bool skip = loop && !(mode & kPrepSelfLoops);
    self += in && skip;
    if (mode & kPrepClaim) {  // mode is the launch's: every thread reaches the barriers
      const bool want = ok && !skip;
      const bool mu = try_claim(dict, lack, u, want);
      const bool mv = (mode & kPrepUndirected) && try_claim(dict, lack, v, want && !loop);
      const uint32_t bu = __ballot_sync(kAll, mu), bv = __ballot_sync(kAll, mv);
      const uint64_t b = block_first(__popc(bu) + __popc(bv), ctrl + kCtrlTables);
      const uint32_t below = (1u << lane) - 1u;
      give_claimed(dict, lack, u, mu, b + __popc(bu & below), first, room);
      give_claimed(dict, lack, v, mv, b + __popc(bu) + __popc(bv & below), first, room);
    }
    if ((mode & kPrepUndirected) && u > v) {
      const uint32_t t = u;
      u = v;
      v = t;
    }
    if (!in) continue;
    osrc[i] = u;
    odst[i] = v;
    res[i] = skip ? sh::kResNotFound : sh::kResFailed;
    if (mode & kPrepUndirected) {
      osrc[n + i] = v;
      odst[n + i] = u;
      res[n + i] = loop ? sh::kResNotFound : sh::kResFailed;
    }
  }
  if (bad) {
    atomicAdd(ctrl + kCtrlRejected, (unsigned long long)bad);
    atomicOr((unsigned*)(ctrl + kCtrlStatus), (unsigned)kStatusInvalidArgument);
  }
  if (self) atomicAdd(ctrl + kCtrlCount, (unsigned long long)self);
}

// settle finishes a placed batch (prep's kPrepPlace) before anything else
// reads the arena: every head slab b < nslabs whose next word prep used as
// its count gets kNull back, and a slab whose keys repeat keeps each key
// once (the first), packed from slot 0, the freed slots empty. The repeats
// come off the degree of the slab's vertex (found by a binary search of
// base: the build's first buckets, nv + 1 of them) and off the batch's
// change of entries (ctrl[kCtrlDelta]). A thread a slab: one
// sector read, one written where prep placed anything.
extern "C" __global__ void gr_settle(char* arena, uint64_t nslabs, const uint64_t* base, uint64_t nv, Vertex* dict,
                                     unsigned long long* ctrl) {
  uint32_t repeats = 0;
  for (uint64_t b = thread_index(); b < nslabs; b += thread_count()) {
    uint32_t* s = (uint32_t*)(arena + b * SetSlab::kSlabBytes);
    const uint4 lo = *(const uint4*)s, hi = *(const uint4*)(s + 4);
    if (hi.w == kNull) continue;  // nothing placed
    const uint32_t k[SetSlab::kSlots] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z};
    // Slots past the count are empty (never written); keys are IDs below
    // the reserved ones, so an empty slot never equals a key.
    uint32_t rep = 0;  // bit j: slot j repeats a slot before it
#pragma unroll
    for (int j = 1; j < SetSlab::kSlots; ++j) {
      bool r = false;
#pragma unroll
      for (int q = 0; q < j; ++q) r |= k[q] == k[j];
      rep |= (uint32_t)(r && k[j] != sh::empty_key<uint32_t>()) << j;
    }
    if (rep == 0) {
      s[7] = kNull;
      continue;
    }
    uint32_t out[SetSlab::kSlots + 1];
    int w = 0;
#pragma unroll
    for (int j = 0; j < SetSlab::kSlots; ++j) {
      out[j] = sh::empty_key<uint32_t>();
    }
    out[SetSlab::kSlots] = kNull;
#pragma unroll
    for (int j = 0; j < SetSlab::kSlots; ++j) {
#pragma unroll
      for (int q = 0; q < SetSlab::kSlots; ++q)
        if (q == w && !((rep >> j) & 1)) out[q] = k[j];
      w += !((rep >> j) & 1);
    }
    *(uint4*)s = make_uint4(out[0], out[1], out[2], out[3]);
    *(uint4*)(s + 4) = make_uint4(out[4], out[5], out[6], out[7]);
    const uint32_t d = __popc(rep);
    repeats += d;
    // The slab's vertex: the last v with base[v] <= b (a vertex without
    // buckets shares its base with the next, which owns b).
    uint64_t l = 0, h = nv;  // base[l] <= b < base[h]
    while (h - l > 1) {
      const uint64_t m = (l + h) / 2;
      if (base[m] <= b) l = m;
      else h = m;
    }
    atomicAdd(&dict[l].degree, 0u - d);
  }
  block_add(ctrl + kCtrlDelta, 0ull - (unsigned long long)warp_sum(repeats));
}

// mirror decides which reverse elements (n+i) of an undirected batch run
// after the canonical ones (i): those whose canonical result is in keep (a
// mask of result codes: Inserted for an insert, so that the copies of an
// edge in a batch and edges already present add no work; Removed for a
// delete), unless prep skipped them.
extern "C" __global__ void gr_mirror(uint8_t* res, uint64_t n, uint32_t keep) {
  for (uint64_t i = thread_index(); i < n; i += thread_count())
    if (res[n + i] == sh::kResFailed && !((keep >> res[i]) & 1)) res[n + i] = sh::kResNotFound;
}

// undo marks, in res2, the canonical elements to take back because their
// reverse failed (res[n+i] still kResFailed after the reverse ran): those
// whose canonical insert was kResInserted. A delete over them with
// kFlagRetry then restores the graph's symmetry.
extern "C" __global__ void gr_undo(const uint8_t* res, uint64_t n, uint8_t* res2) {
  for (uint64_t i = thread_index(); i < n; i += thread_count())
    res2[i] = (res[i] == sh::kResInserted && res[n + i] == sh::kResFailed) ? sh::kResFailed : sh::kResNotFound;
}

// undone reports the canonical elements taken back as failed.
extern "C" __global__ void gr_undone(uint8_t* res, uint64_t n, const uint8_t* res2) {
  for (uint64_t i = thread_index(); i < n; i += thread_count())
    if (res2[i] == sh::kResRemoved) res[i] = sh::kResFailed;
}

// kept marks, in res2, the canonical elements (i < n) of an undirected
// insert run in one launch whose edge the batch reported in the graph
// (Inserted or Present), for a find after its repair deleted both
// directions of every pair with a failed element; lost then reports as
// Failed those the find did not find (a copy of a pair another copy's
// failure took back).
extern "C" __global__ void gr_kept(const uint8_t* res, uint64_t n, uint8_t* res2) {
  for (uint64_t i = thread_index(); i < n; i += thread_count())
    res2[i] = (res[i] == sh::kResInserted || res[i] == sh::kResPresent) ? sh::kResFailed : sh::kResNotFound;
}

extern "C" __global__ void gr_lost(uint8_t* res, uint64_t n, const uint8_t* res2) {
  for (uint64_t i = thread_index(); i < n; i += thread_count())
    if (res2[i] == sh::kResNotFound && (res[i] == sh::kResInserted || res[i] == sh::kResPresent))
      res[i] = sh::kResFailed;
}

// failed_pattern marks, in fres, the elements of an as-given build batch
// that failed (res) — or, with all, every element — for deletes of both
// directions of their edges: run after a build stopped part way, they keep
// the graph symmetric.
extern "C" __global__ void gr_failed_pattern(const uint8_t* res, uint64_t n, uint32_t all, uint8_t* fres) {
  for (uint64_t i = thread_index(); i < n; i += thread_count())
    fres[i] = (all || res[i] == sh::kResFailed) ? sh::kResFailed : sh::kResNotFound;
}

// check_ids counts IDs at or past cap in ctrl[kCtrlRejected] (device
// batches of lookups and vertex lists).
extern "C" __global__ void gr_check_ids(const uint32_t* a, const uint32_t* b, uint64_t n, uint32_t cap,
                                        unsigned long long* ctrl) {
  uint32_t bad = 0;
  for (uint64_t i = thread_index(); i < n; i += thread_count()) bad += (a[i] >= cap) + (b && b[i] >= cap);
  if (bad) {
    atomicAdd(ctrl + kCtrlRejected, (unsigned long long)bad);
    atomicOr((unsigned*)(ctrl + kCtrlStatus), (unsigned)kStatusInvalidArgument);
  }
}

// apply runs an edge batch on the slab hash engine: element i is op on key
// dst[i] in the table of src[i]; with limit, only the first *limit of the n
// (a placed batch's elements not placed, counted by prep on the device).
template <class L>
__device__ void apply(char* arena, uint32_t seed, Pool* pool, Vertex* dict, const uint32_t* src, const uint32_t* dst,
                      typename L::V* vals, uint32_t op, uint8_t* res, uint64_t n, unsigned long long* ctrl,
                      uint32_t flags, uint32_t salt, unsigned long long* out, const unsigned long long* limit) {
  if (limit && *limit < n) n = *limit;
  sh::Counts k{};
  if (sh::ldv64(ctrl + kCtrlRejected) == 0) {
    const Ctx<L> c{arena, 0, seed, pool, (uint32_t*)(ctrl + kCtrlStatus)};
    k = sh::apply_rounds<L, VertexLoc>(c, dst, vals, nullptr, op, res, nullptr, n, ctrl, flags, salt,
                                       VertexLoc{src, dict});
  }
  sh::sign_off(ctrl, pool, out, k);
}

// symmetry reads a build's edges once for what must be known before the
// tables are sized: count_edges reads its sums on the device, and the host
// reads both with the buckets' total (one wait for all). With sums, it sums a hash of
// every edge (u, v) into sums[0] and of its reverse (v, u) into sums[1]
// (wrapping): equal sums say that the edges list both directions of every
// edge (the multisets agree; a list that does not gives equal sums only by
// a 2^-64 accident), so that an undirected build counts each edge from its
// source alone (count_edges). With check (device batches), it counts the
// IDs at or past cap in ctrl[kCtrlRejected], as check_ids does.
extern "C" __global__ void gr_symmetry(const uint32_t* src, const uint32_t* dst, uint64_t m, uint32_t check,
                                       uint32_t cap, unsigned long long* sums, unsigned long long* ctrl) {
  unsigned long long a = 0, b = 0;
  uint32_t bad = 0;
  for (uint64_t i = thread_index(); i < m; i += thread_count()) {
    const uint32_t u = src[i], v = dst[i];
    bad += (u >= cap) + (v >= cap);
    a += mix64((uint64_t)u << 32 | v);
    b += mix64((uint64_t)v << 32 | u);
  }
  if (check && bad) {
    atomicAdd(ctrl + kCtrlRejected, (unsigned long long)bad);
    atomicOr((unsigned*)(ctrl + kCtrlStatus), (unsigned)kStatusInvalidArgument);
  }
  if (!sums) return;
  block_add<0>(sums, warp_sum(a));  // one atomic a block, not a warp
  block_add<1>(sums + 1, warp_sum(b));
}

// count_edges counts the entries a build's edges give each vertex (repeated
// edges counted each time: the tables' sizing): the source's, and the
// destination's too when gr_symmetry's sums (given for an undirected
// build, read here on the device: no wait for them) differ, the edges not
// listing both directions. Edges with an ID at or past cap count nothing,
// and nothing is counted once gr_symmetry has rejected an ID. A warp takes
// 32 consecutive edges, and each run of lanes with one source adds its
// length with one atomic (edges sorted or grouped by source, as a CSR's or
// most files' are, come in runs; in random order every lane is a run of
// its own).
extern "C" __global__ void gr_count_edges(const uint32_t* src, const uint32_t* dst, uint64_t m, uint32_t mode,
                                          const unsigned long long* sums, uint32_t cap,
                                          const unsigned long long* ctrl, uint32_t* cnt) {
  if (ctrl[kCtrlRejected]) return;
  const bool both = sums && sums[0] != sums[1];
  const uint32_t lane = slab::lane();
  for (uint64_t i0 = thread_index() - lane; i0 < m; i0 += thread_count()) {  // whole warps: run_length
    const uint64_t i = i0 + lane;
    uint32_t u = kNoRun;
    if (i < m) {
      const uint32_t s = src[i], d = dst[i];
      if (s < cap && d < cap) {
        if (s != d || (mode & kPrepSelfLoops)) u = s;
        if (both && s != d) atomicAdd(&cnt[d], 1u);
      }
    }
    if (const uint32_t len = run_length(u)) atomicAdd(&cnt[u], len);
  }
}

// buckets sizes each vertex's table: ceil(cnt / per) buckets, per in
// thousandths of an entry (the load factor times the slots); none for a
// vertex without entries (its first insert gives it one); one for a table
// of at most fit entries (the host passes a slab's slots at the default
// load factor or denser: one slab holds them without overflow, and a find
// reads one slab either way; 0 at sparser loads, sized as asked).
// The vertices without entries (tables) are counted in ctrl[kCtrlCount]
// and marked in lack (a bit each: try_claim's hint). Once gr_symmetry has
// rejected an ID it does nothing, so a rejected build leaves lack the old
// graph's (a build that fails later, its arena not grown, leaves the new
// hint over the old graph: a hint only, as prep checks the dictionary).
// It leaves cnt zero for the next build.
extern "C" __global__ void gr_buckets(uint32_t* cnt, uint64_t nv, uint32_t per1000, uint32_t fit, uint64_t* nb,
                                      uint32_t* lack, unsigned long long* ctrl) {
  if (ctrl[kCtrlRejected]) return;
  uint32_t none = 0;
  const uint32_t lane = slab::lane();
  for (uint64_t v0 = thread_index() - lane; v0 < nv; v0 += thread_count()) {  // whole warps: a lack word each
    const uint64_t v = v0 + lane;
    const uint32_t c = v < nv ? cnt[v] : 1;
    if (v < nv && c) cnt[v] = 0;  // zero for the next build (no fill call)
    none += c == 0;
    if (v < nv) nb[v] = c == 0 ? 0 : c <= fit ? 1 : ((uint64_t)c * 1000 + per1000 - 1) / per1000;
    const uint32_t m = __ballot_sync(kAll, c == 0);
    if (lane == 0) lack[v0 >> 5] = m;
  }
  // One atomic a block: an atomic per thread on the one counter cost a
  // build of half germany_osm (4M vertices without entries) 0.4 ms on the
  // H200, and one a warp still serialises thousands at the end.
  block_add(ctrl + kCtrlCount, warp_sum(none));
}

// claim_tables lists the vertices without a table (no buckets) that the
// failed insert elements of a batch (src, res; kResFailed) start from:
// each once (a claim in its dictionary entry's flags), its ID in ids at
// ctrl[kCtrlCount]'s count. give_tables then gives each a bucket.
extern "C" __global__ void gr_claim_tables(const uint32_t* src, const uint8_t* res, uint64_t n, Vertex* dict,
                                           uint32_t* ids, unsigned long long* ctrl) {
  for (uint64_t i = thread_index(); i < n; i += thread_count()) {
    if (res[i] != sh::kResFailed) continue;
    const uint32_t v = src[i];
    if (dict[v].nb != 0 || atomicCAS(&dict[v].flags, 0u, 1u) != 0u) continue;
    ids[atomicAdd(ctrl + kCtrlCount, 1ull)] = v;
  }
}

// give_tables gives vertex ids[j] (j < n, a claimed vertex without a
// table) the bucket first + j, and drops its claim; with first all ones it
// only drops the claim (the host found no room for the buckets).
extern "C" __global__ void gr_give_tables(const uint32_t* ids, uint64_t n, uint64_t first, Vertex* dict,
                                          uint32_t* lack) {
  for (uint64_t j = thread_index(); j < n; j += thread_count()) {
    const uint32_t x = ids[j];
    Vertex& e = dict[x];
    if (first != ~0ull) {
      e.base = (uint32_t)(first + j);
      e.nb = 1;
      atomicAnd(&lack[x >> 5], ~(1u << (x & 31)));
    }
    e.flags = 0;
  }
}

// dict writes the entries of vertices vbase+i (i < nv) from their buckets
// nb[i] and first bucket first + base[i] (base: nb's exclusive scan; both
// null: one bucket each). Degrees start at 0. With gone (a build: vbase 0),
// it also zeroes the deleted-vertex bitmap's (nv + 31) / 32 words (zero
// between calls already; a build does not count on it).
extern "C" __global__ void gr_dict(const uint64_t* nb, const uint64_t* base, uint64_t nv, uint32_t vbase,
                                   uint64_t first, Vertex* dict, uint32_t* gone) {
  for (uint64_t i = thread_index(); i < nv; i += thread_count()) {
    const uint32_t b = (uint32_t)(first + (base ? base[i] : i)), k = nb ? (uint32_t)nb[i] : 1u;
    dict[vbase + (uint32_t)i] = Vertex{b, k, 0, 0};
    if (gone && (i & 31) == 0) gone[i >> 5] = 0;
  }
}

// owner writes owner[b] = v for every bucket b of every vertex v < nv (the
// caller set the whole array to kOrphan first: buckets no table holds stay
// so). A thread per vertex, as most hold a bucket or two; a hub's thread
// writes its buckets in a row (stores only, a few microseconds for the
// largest tables of the stand-ins).
extern "C" __global__ void gr_owner(const Vertex* dict, uint64_t nv, uint32_t* owner) {
  for (uint64_t v = thread_index(); v < nv; v += thread_count()) {
    const uint2 bn = *(const uint2*)&dict[v];
    for (uint32_t j = 0; j < bn.y; ++j) owner[bn.x + j] = (uint32_t)v;
  }
}

// degrees writes the degree of ids[i] (or of vertex i when ids is null),
// as 32- or 64-bit counts.
extern "C" __global__ void gr_degrees(const Vertex* dict, const uint32_t* ids, uint64_t n, uint32_t* out32,
                                      uint64_t* out64) {
  for (uint64_t i = thread_index(); i < n; i += thread_count()) {
    const uint32_t d = dict[ids ? ids[i] : i].degree;
    if (out32) out32[i] = d;
    if (out64) out64[i] = d;
  }
}

// walk calls visit(d, s) for every slab s of the list that starts at s (a
// tile; d its lanes' view), reporting kStatusRetryLimit rather than going
// past kMaxSteps slabs (a corrupted list).
template <class L, class F>
__device__ __forceinline__ void walk(const Tile<L::W>& t, const Ctx<L>& c, char* s, F&& visit) {
  for (uint32_t hop = 0;; ++hop) {
    if (hop == sh::kMaxSteps) {
      report(c.status, kStatusRetryLimit);
      return;
    }
    Lane<L> d = sh::load<L>(t, s);
    visit(d, s);
    const uint32_t next = t.shfl(d.tail, L::kTailLane);
    if (next == kNull) return;
    s = c.unit(next);
  }
}

// holds reports whether this lane's slot of d holds an entry (with
// published, a published one). Every lane of the tile calls it (published
// shuffles within the tile).
template <class L>
__device__ __forceinline__ bool holds(const Tile<L::W>& t, const Lane<L>& d, bool published) {
  using K = typename L::K;
  const unsigned pub = published ? sh::published<L>(t, d) : ~0u;
  return L::slot_lane(t.rank) && d.key != sh::empty_key<K>() && d.key != sh::tomb_key<K>() && ((pub >> t.rank) & 1);
}

// gather copies the live entries of arena buckets [lo, hi) into rows:
// vertex owner[b]-vbase's entries at cols[offsets[v] ..], its cursor[v]
// counting those written (zero before); with owner null every bucket is
// vertex vbase's (one table: row 0). rows (optional) gets each entry's
// vertex, vals (optional) its value. An entry past offsets[v+1] is not
// written (kStatusOverflow). Runs alone.
template <class L>
__device__ void gather(const char* arena, uint64_t lo, uint64_t hi, const uint32_t* owner, uint32_t vbase,
                       Pool* pool, const uint64_t* offsets, uint32_t* cursor, uint32_t* cols,
                       typename L::V* vals, uint32_t* rows, unsigned long long* ctrl) {
  using K = typename L::K;
  Tile<L::W> t;
  Geometry<L::W> g;
  Ctx<L> c{(char*)arena, 0, 0, pool, (uint32_t*)(ctrl + kCtrlStatus)};
  for (uint64_t b = lo + g.tile; b < hi; b += g.tiles) {
    const uint32_t u = owner ? owner[b] : vbase;
    if (u == kOrphan) continue;
    const uint32_t v = u - vbase;
    const uint64_t o0 = offsets[v], o1 = offsets[v + 1];
    walk<L>(t, c, (char*)arena + b * L::kSlabBytes, [&](const Lane<L>& d, char*) {
      const bool live = holds<L>(t, d, true);
      const unsigned m = t.ballot(live);
      if (!m) return;
      uint32_t at = 0;
      if (t.rank == 0) at = atomicAdd(&cursor[v], (uint32_t)__popc(m));
      at = t.shfl(at, 0);
      if (live) {
        const uint64_t pos = o0 + at + __popc(m & L::lower(t.rank));
        if (pos < o1) {
          cols[pos] = (uint32_t)d.key;
          if (vals) vals[pos] = d.val;
          if (rows) rows[pos] = u;
        } else {
          report(c.status, kStatusOverflow);
        }
      }
    });
  }
}

// set_slab reads a 32-byte set slab: its keys, a mask of those live
// (neither empty nor tombstones) returned, and its next-slab word.
__device__ __forceinline__ uint32_t set_slab(const char* s, uint32_t key[7], uint32_t& next) {
  constexpr uint32_t kEmpty = sh::empty_key<uint32_t>(), kTomb = sh::tomb_key<uint32_t>();
  const uint4 a = *(const uint4*)s, c = *(const uint4*)(s + 16);
  key[0] = a.x, key[1] = a.y, key[2] = a.z, key[3] = a.w, key[4] = c.x, key[5] = c.y, key[6] = c.z;
  uint32_t live = 0;
#pragma unroll
  for (int q = 0; q < 7; ++q) live |= (uint32_t)(key[q] != kEmpty && key[q] != kTomb) << q;
  next = c.w;
  return live;
}

// degree_of is v's degree: its dictionary entry's, or (dict null) its CSR
// row's length.
__device__ __forceinline__ uint32_t degree_of(const Vertex* dict, const uint64_t* offsets, uint32_t v) {
  return dict ? dict[v].degree : (uint32_t)(offsets[v + 1] - offsets[v]);
}

// ranks_above reports whether vertex x (degree dx) ranks above vertex v
// (degree dv) in the degree order: by degree, then by ID.
__device__ __forceinline__ bool ranks_above(uint32_t dx, uint32_t x, uint32_t dv, uint32_t v) {
  return dx > dv || (dx == dv && x > v);
}

// above_mask keeps, of the live keys of vertex v (degree dv) in a slab,
// those ranked above v (ranks_above, degrees from dict): the gather of an
// oriented CSR (gr_gather_set_vertices with orient).
__device__ __forceinline__ uint32_t above_mask(const uint32_t key[7], uint32_t live, const Vertex* dict, uint32_t dv,
                                               uint32_t v) {
  uint32_t keep = 0;
#pragma unroll
  for (int q = 0; q < 7; ++q)
    if ((live >> q) & 1u) keep |= (uint32_t)ranks_above(dict[key[q]].degree, key[q], dv, v) << q;
  return keep;
}

// put_slab writes the live keys of a slab (set_slab) at cols[at ..) and,
// with rows, their vertex v; none at or past end (kStatusOverflow).
__device__ __forceinline__ void put_slab(const uint32_t key[7], uint32_t live, uint64_t at, uint64_t end, uint32_t v,
                                         uint32_t* cols, uint32_t* rows, uint32_t* status) {
#pragma unroll
  for (int q = 0; q < 7; ++q) {
    if (!((live >> q) & 1u)) continue;
    if (at < end) {
      cols[at] = key[q];
      if (rows) rows[at] = v;
    } else {
      report(status, kStatusOverflow);
    }
    ++at;
  }
}

// Gather by vertex, for unweighted graphs (set slabs: two 16-byte loads a
// slab). A warp takes 32 consecutive vertices and lays out the tables of
// those of at most warpBuckets buckets (the host's choice) in vertex order:
// their buckets laid end to end (a warp scan of their counts), lane l
// takes buckets l, l + 32, ... and finds the vertex each belongs to by a
// binary search over the scan (five shuffles). A one-bucket table (road and
// mesh graphs: nearly all) is written by its lane alone, in a row from
// offsets[v]; a larger one through an atomic on its cursor. No owner
// array. (A lane per arena bucket, as before, needed the owner array,
// rebuilt whenever an insert had given tables, and its writes scattered
// wherever the tables given late by inserts, which sit at the arena's end
// in no vertex order, came in bucket order: germany_osm's gather in the
// dynamic triangle counts went from 0.47 to 0.84 ms on the H200; a lane per
// vertex walking its buckets in turn cost rgg_n_2_20_s0's 0.29 -> 0.46.)
// A larger table is listed as items of kChunkBuckets buckets, a warp each
// (gr_gather_set_items), its cursor zeroed. With warpBuckets < 32, a table
// of nb > warpBuckets buckets makes at most nb / (warpBuckets + 1) items:
// the host's room for items, nslabs / (warpBuckets + 1) + 1, holds them
// all.
constexpr uint32_t kChunkBuckets = 64;

// gather_chain lays out the list that starts at slab s (bucket of vertex
// v): its entries at cols[at ..) when alone (the table's only bucket),
// else where the vertex's cursor says; none at or past end.
__device__ __forceinline__ void gather_chain(const char* s, const Pool* pool, bool alone, uint64_t at, uint64_t end,
                                             uint32_t v, uint32_t* cursor, uint32_t* cols, uint32_t* rows,
                                             const Vertex* orient, uint32_t dv, uint32_t* status) {
  const uint64_t at0 = at;
  for (uint32_t hop = 0;; ++hop) {
    if (hop == sh::kMaxSteps) {
      report(status, kStatusRetryLimit);
      return;
    }
    uint32_t key[7], next;
    uint32_t live = set_slab(s, key, next);
    if (live && orient) live = above_mask(key, live, orient, dv, v);
    if (live) {
      const uint32_t n = __popc(live);
      if (alone) {
        put_slab(key, live, at, end, v, cols, rows, status);
        at += n;
      } else {
        put_slab(key, live, at + atomicAdd(&cursor[v], n), end, v, cols, rows, status);
      }
    }
    if (next == kNull) break;
    s = slab::unit_ptr<32>(pool, next);
  }
  if (alone && orient) cursor[v] = (uint32_t)(at - at0);  // the row's oriented length
}

// gather_set_vertices lays out vertices [0, nv): cols gets the entries,
// rows (optional) each entry's vertex. A vertex's entries past
// offsets[v+1] are not written (kStatusOverflow), nor items past maxItems.
// The items are counted in ctrl[kCtrlCount]. With orient (the dictionary)
// it lays out the oriented CSR of the triangle count in one pass: a
// vertex's entries ranked above it (above_mask) at the front of its row,
// their number in cursor[v] (every vertex's, zero without a table: the
// count's ocnt), the rest of the row not written (so rows there are not
// the row's vertex: count_pairs checks). Runs alone.
extern "C" __global__ void gr_gather_set_vertices(const char* arena, const Vertex* dict, uint64_t nv, const Pool* pool,
                                                  const uint64_t* offsets, uint32_t* cursor, uint32_t* cols,
                                                  uint32_t* rows, uint32_t warpBuckets, unsigned long long* items,
                                                  uint64_t maxItems, const Vertex* orient,
                                                  unsigned long long* ctrl) {
  uint32_t* status = (uint32_t*)(ctrl + kCtrlStatus);
  const uint32_t lane = slab::lane();
  for (uint64_t v0 = thread_index() - lane; v0 < nv; v0 += thread_count()) {  // whole warps: the shuffles
    const uint64_t v = v0 + lane;
    uint2 bn = make_uint2(0, 0);
    uint32_t dv = 0;
    if (v < nv) {
      bn = *(const uint2*)&dict[v];
      if (orient) dv = dict[v].degree;
    }
    const bool big = bn.y > warpBuckets;
    // Large tables: items, numbered with one atomic a warp.
    const uint32_t chunks = big ? (uint32_t)(((uint64_t)bn.y + kChunkBuckets - 1) / kChunkBuckets) : 0;
    const uint32_t before = warp_scan(chunks);  // inclusive scan of the warp's chunks
    const uint32_t all = __shfl_sync(kAll, before, 31);
    if (all) {
      unsigned long long at = 0;
      if (lane == 31) at = atomicAdd(ctrl + kCtrlCount, (unsigned long long)all);
      at = __shfl_sync(kAll, at, 31) + before - chunks;
      for (uint32_t c = 0; c < chunks; ++c) {
        if (at + c < maxItems) {
          items[at + c] = (unsigned long long)v << 32 | c;
        } else {
          report(status, kStatusOverflow);
        }
      }
    }
    // The others: their buckets end to end.
    const uint32_t nb = big ? 0 : bn.y;
    if (v < nv && (big || nb > 1 || (orient && nb == 0))) cursor[v] = 0;
    uint64_t o0 = 0, o1 = 0;
    if (nb) o0 = offsets[v], o1 = offsets[v + 1];
    const uint32_t incl = warp_scan(nb);
    const uint32_t total = __shfl_sync(kAll, incl, 31);
    __syncwarp();  // the cursors zeroed before any lane adds to them
    for (uint32_t p0 = 0; p0 < total; p0 += 32) {
      const uint32_t p = p0 + lane;
      const int o = warp_owner(incl, p);  // the vertex's lane
      const uint32_t onb = __shfl_sync(kAll, nb, o), start = __shfl_sync(kAll, incl - nb, o);
      const uint32_t obase = __shfl_sync(kAll, bn.x, o), odv = __shfl_sync(kAll, dv, o);
      const uint64_t oo0 = __shfl_sync(kAll, (unsigned long long)o0, o), oo1 = __shfl_sync(kAll, (unsigned long long)o1, o);
      if (p < total) {
        gather_chain(arena + ((uint64_t)obase + (p - start)) * 32, pool, onb == 1, oo0, oo1, (uint32_t)(v0 + o), cursor,
                     cols, rows, orient, odv, status);
      }
    }
  }
}

// gather_set_items lays out the large tables gr_gather_set_vertices listed
// (ctrl[kCtrlCount] items; at most maxItems): a warp an item, lane l its
// chunk's buckets l, l + 32; each step of the lanes' lists placed by a warp
// scan and one atomic on the vertex's cursor (with orient, the entries
// ranked above the vertex only).
extern "C" __global__ void gr_gather_set_items(const char* arena, const Vertex* dict, const Pool* pool,
                                               const uint64_t* offsets, uint32_t* cursor, uint32_t* cols,
                                               uint32_t* rows, const unsigned long long* items, uint64_t maxItems,
                                               const Vertex* orient, unsigned long long* ctrl) {
  uint32_t* status = (uint32_t*)(ctrl + kCtrlStatus);
  const uint32_t lane = slab::lane();
  const uint64_t count = min((uint64_t)sh::ldv64(ctrl + kCtrlCount), maxItems);
  const uint64_t warps = thread_count() / 32;
  for (uint64_t w = thread_index() / 32; w < count; w += warps) {
    const unsigned long long item = items[w];
    const uint32_t v = (uint32_t)(item >> 32), chunk = (uint32_t)item;
    const uint2 bn = *(const uint2*)&dict[v];
    const uint32_t dv = orient ? dict[v].degree : 0;
    const uint64_t o0 = offsets[v], end = offsets[v + 1];
    const uint64_t j1 = min((uint64_t)bn.y, ((uint64_t)chunk + 1) * kChunkBuckets);  // 64-bit: nb may near 2^32
    for (uint64_t j0 = (uint64_t)chunk * kChunkBuckets; j0 < j1; j0 += 32) {
      const uint64_t j = j0 + lane;
      const char* s = j < j1 ? arena + ((uint64_t)bn.x + j) * 32 : nullptr;
      for (uint32_t hop = 0; __any_sync(kAll, s != nullptr); ++hop) {
        if (hop == sh::kMaxSteps) {
          if (lane == 0) report(status, kStatusRetryLimit);
          break;
        }
        uint32_t key[7], next = kNull, live = 0;
        if (s) live = set_slab(s, key, next);
        if (live && orient) live = above_mask(key, live, orient, dv, v);
        const uint32_t n = __popc(live);
        const uint32_t incl = warp_scan(n);
        const uint32_t all = __shfl_sync(kAll, incl, 31);
        uint32_t base = 0;
        if (lane == 0 && all) base = atomicAdd(&cursor[v], all);  // zeroed by gr_gather_set_vertices
        base = __shfl_sync(kAll, base, 0);
        if (live) put_slab(key, live, o0 + base + incl - n, end, v, cols, rows, status);
        s = (s && next != kNull) ? slab::unit_ptr<32>(pool, next) : nullptr;
      }
    }
  }
}

// sweep tombstones, in every bucket of a vertex not itself deleted, the
// entries whose neighbour is marked in gone (a bitmap), and takes them off
// the owner's degree and the live count (ctrl[kCtrlDelta]). Runs alone.
template <class L>
__device__ void sweep(char* arena, uint64_t nslabs, const uint32_t* owner, Vertex* dict, Pool* pool,
                      const uint32_t* gone, unsigned long long* ctrl) {
  using K = typename L::K;
  Tile<L::W> t;
  Geometry<L::W> g;
  Ctx<L> c{arena, 0, 0, pool, (uint32_t*)(ctrl + kCtrlStatus)};
  long long removed = 0;
  for (uint64_t b = g.tile; b < nslabs; b += g.tiles) {
    const uint32_t u = owner[b];
    if (u == kOrphan || ((gone[u >> 5] >> (u & 31)) & 1)) continue;  // gone: reset afterwards
    uint32_t here = 0;
    walk<L>(t, c, arena + b * L::kSlabBytes, [&](const Lane<L>& d, char* s) {
      const bool hit = holds<L>(t, d, false) && ((gone[(uint32_t)d.key >> 5] >> ((uint32_t)d.key & 31)) & 1);
      if (hit) {
        if constexpr (sizeof(K) == 4) sh::stv32(L::slot_ptr(s, t.rank), (uint32_t)sh::tomb_key<K>());
        else sh::stv64(L::slot_ptr(s, t.rank), (uint64_t)sh::tomb_key<K>());
      }
      here += __popc(t.ballot(hit));
    });
    if (here && t.rank == 0) {
      atomicSub(&dict[u].degree, here);
      removed += here;
    }
  }
  if (removed) atomicAdd(ctrl + kCtrlDelta, (unsigned long long)(-removed));
}

// empty_list resets a bucket's head slab and frees its overflow slabs
// (reset first, so a unit handed out again is empty). A tile; returns the
// slabs freed.
template <class L>
__device__ uint32_t empty_list(const Tile<L::W>& t, const Ctx<L>& c, char* h) {
  uint32_t next = sh::next_of<L>(t, h), freed = 0;
  sh::reset_slab<L>(t, h);
  for (uint32_t hop = 0; next != kNull; ++hop) {
    if (hop == sh::kMaxSteps) {
      report(c.status, kStatusRetryLimit);
      break;
    }
    char* s = c.unit(next);
    const uint32_t after = sh::next_of<L>(t, s);
    t.sync();
    sh::reset_slab<L>(t, s);
    t.sync();
    if (t.rank == 0 && !slab::free_unit(c.pool, next)) report(c.status, kStatusBadFree);
    ++freed;
    next = after;
  }
  return freed;
}

// reset empties the tables of the vertices ids[i] marked in gone: heads
// reset, overflow slabs reset and freed to the pool, degree 0 (taken off
// ctrl[kCtrlDelta]). Each vertex's mark is cleared by the tile that resets
// it, so a repeated ID is reset once and the bitmap ends all zero. Runs
// alone, after sweep.
template <class L>
__device__ void reset(char* arena, Vertex* dict, Pool* pool, const uint32_t* ids, uint64_t n, uint32_t* gone,
                      unsigned long long* ctrl) {
  Tile<L::W> t;
  Geometry<L::W> g;
  Ctx<L> c{arena, 0, 0, pool, (uint32_t*)(ctrl + kCtrlStatus)};
  long long freed = 0, removed = 0;
  for (uint64_t i = g.tile; i < n; i += g.tiles) {
    const uint32_t v = ids[i];
    uint32_t old = 0;
    if (t.rank == 0) old = atomicAnd(&gone[v >> 5], ~(1u << (v & 31)));
    old = t.shfl(old, 0);
    if (!((old >> (v & 31)) & 1)) continue;  // another tile has it
    const Vertex e = dict[v];
    for (uint32_t k = 0; k < e.nb; ++k) freed += empty_list<L>(t, c, arena + ((size_t)e.base + k) * L::kSlabBytes);
    if (t.rank == 0) {
      removed += e.degree;
      dict[v].degree = 0;
    }
  }
  if (t.rank == 0) {
    if (removed) atomicAdd(ctrl + kCtrlDelta, (unsigned long long)(-removed));
    if (freed) atomicAdd(&pool->used, (unsigned long long)(-freed));
  }
}

// plan_one decides whether vertex v (entry e) moves: when will, its
// entries once the extra ones come, exceed chain1000/1000 lists' worth of
// its head slabs' slots; then its new bucket count, at per1000
// thousandths of an entry a bucket, goes to *nb.
__device__ __forceinline__ bool plan_one(const Vertex& e, uint64_t will, uint32_t slots, uint32_t per1000,
                                         uint32_t chain1000, uint64_t* nb) {
  if (will * 1000 <= (uint64_t)slots * e.nb * chain1000) return false;
  *nb = (will * 1000 + per1000 - 1) / per1000;
  return true;
}

// warp_excl64 returns the exclusive scan of x over the warp's lanes, and
// the warp's sum in *total (every lane calls it).
__device__ __forceinline__ unsigned long long warp_excl64(unsigned long long x, unsigned long long* total) {
  const uint32_t lane = slab::lane();
  unsigned long long inc = x;
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const unsigned long long y = __shfl_up_sync(kAll, inc, off);
    if (lane >= (uint32_t)off) inc += y;
  }
  *total = __shfl_sync(kAll, inc, 31);
  return inc - x;
}

// plan_list lists the warp's movers (moves: this lane's vertex v, entry e,
// nb new buckets) at ctrl[kCtrlCount]'s count: its id, old entry and new
// bucket count size, and places it in the move: its new buckets at base
// (from the move's first) and its entries at rows (in the move's entry
// arrays), taken from the running sums in totals[0] (buckets) and
// totals[1] (degrees). Movers are placed in no order; the host sizes the
// move by the sums, with neither a scan nor its wait. Three atomics a warp
// with movers (every lane calls it). Movers past cap, the host's room, are
// not written (kStatusOverflow).
__device__ __forceinline__ void plan_list(bool moves, uint32_t v, const Vertex& e, uint64_t nb, uint32_t* ids,
                                          Vertex* old, uint64_t* size, uint64_t* base, uint64_t* rows, uint64_t cap,
                                          unsigned long long* ctrl, unsigned long long* totals) {
  const uint32_t lane = slab::lane();
  const uint32_t m = __ballot_sync(kAll, moves);
  if (!m) return;
  unsigned long long buckets, degrees;
  const unsigned long long bx = warp_excl64(moves ? nb : 0, &buckets);
  const unsigned long long dx = warp_excl64(moves ? e.degree : 0, &degrees);
  const int leader = __ffs(m) - 1;
  unsigned long long at = 0, b0 = 0, d0 = 0;
  if (lane == (uint32_t)leader) {
    at = atomicAdd(ctrl + kCtrlCount, (unsigned long long)__popc(m));
    b0 = atomicAdd(totals, buckets);
    d0 = atomicAdd(totals + 1, degrees);
  }
  at = __shfl_sync(kAll, at, leader);
  b0 = __shfl_sync(kAll, b0, leader);
  d0 = __shfl_sync(kAll, d0, leader);
  if (!moves) return;
  const unsigned long long i = at + __popc(m & ((1u << lane) - 1u));
  if (i >= cap) {  // more movers than the host's room (a bug): nothing written past it
    report((uint32_t*)(ctrl + kCtrlStatus), kStatusOverflow);
    return;
  }
  ids[i] = v;
  old[i] = e;
  size[i] = nb;
  base[i] = b0 + bx;
  rows[i] = d0 + dx;
}

// rehash_plan picks the vertices Rehash moves: those whose entries exceed
// chain1000/1000 lists' worth of their head slabs' slots (plan_one). It
// lists them in ids (their number in ctrl[kCtrlCount]; in no order) with
// their dictionary entries as they are (old) and, per mover i, its new
// bucket count size[i] (at per1000 thousandths of an entry a bucket), its
// first new bucket base[i] and the first of its entries rows[i] in the
// move, and the move's buckets and entries in totals[0..1] (plan_list).
extern "C" __global__ void gr_rehash_plan(const Vertex* dict, uint64_t nv, uint32_t slots, uint32_t per1000,
                                          uint32_t chain1000, uint32_t* ids, Vertex* old, uint64_t* size,
                                          uint64_t* base, uint64_t* rows, uint64_t cap, unsigned long long* ctrl,
                                          unsigned long long* totals) {
  const uint32_t lane = slab::lane();
  for (uint64_t v0 = thread_index() - lane; v0 < nv; v0 += thread_count()) {  // whole warps: plan_list
    const uint64_t v = v0 + lane;
    Vertex e{};
    uint64_t nb = 0;
    bool moves = false;
    if (v < nv) {
      e = dict[v];
      moves = plan_one(e, e.degree, slots, per1000, chain1000, &nb);
    }
    plan_list(moves, (uint32_t)v, e, nb, ids, old, size, base, rows, cap, ctrl, totals);
  }
}

// count_sources counts, per source vertex below nv, the elements of a
// prepared insert batch that will run (res kResFailed): the entries the
// batch may add, a run of one source with one atomic that returns nothing
// (one that returned its old value to list a new source, which this took,
// waited for it: 0.25 ms a 2^22 batch of rgg_n_2_20_s0; a bitmap of the
// sources beside the counts, tried next, doubled the atomics). cnt is zero
// outside a batch: plan_sources zeroes it.
extern "C" __global__ void gr_count_sources(const uint32_t* src, const uint8_t* res, uint64_t n, uint32_t nv,
                                            uint32_t* cnt) {
  const uint32_t lane = slab::lane();
  for (uint64_t i0 = thread_index() - lane; i0 < n; i0 += thread_count()) {  // whole warps: run_length
    const uint64_t i = i0 + lane;
    uint32_t u = kNoRun;
    if (i < n && res[i] == sh::kResFailed) {
      const uint32_t v = src[i];
      if (v < nv) u = v;
    }
    if (const uint32_t len = run_length(u)) atomicAdd(&cnt[u], len);
  }
}

// plan_sources is gr_rehash_plan over the sources count_sources counted,
// each with its count of entries to come: an insert batch's tables that it
// would fill past chain1000/1000 lists. A warp reads 32 counts at once and
// zeroes those it found for the next batch.
extern "C" __global__ void gr_plan_sources(const Vertex* dict, uint64_t nv, uint32_t* cnt, uint32_t slots,
                                           uint32_t per1000, uint32_t chain1000, uint32_t* ids, Vertex* old,
                                           uint64_t* size, uint64_t* base, uint64_t* rows, uint64_t cap,
                                           unsigned long long* ctrl, unsigned long long* totals) {
  const uint32_t lane = slab::lane();
  for (uint64_t v0 = thread_index() - lane; v0 < nv; v0 += thread_count()) {  // whole warps: plan_list
    const uint64_t v = v0 + lane;
    const uint32_t extra = v < nv ? cnt[v] : 0u;
    if (!__ballot_sync(kAll, extra != 0)) continue;
    Vertex e{};
    uint64_t nb = 0;
    bool moves = false;
    if (extra) {
      e = dict[v];
      cnt[v] = 0;
      moves = plan_one(e, (uint64_t)e.degree + extra, slots, per1000, chain1000, &nb);
    }
    plan_list(moves, (uint32_t)v, e, nb, ids, old, size, base, rows, cap, ctrl, totals);
  }
}

// rehash_dict gives each mover i its new buckets: first + base[i], need[i]
// of them (the plan's size), degree 0 (the re-insert counts it); with need
// null it puts back the entries in old (a rehash that failed).
extern "C" __global__ void gr_rehash_dict(const uint32_t* ids, uint64_t n, const uint64_t* need, const uint64_t* base,
                                          uint64_t first, const Vertex* old, Vertex* dict) {
  for (uint64_t i = thread_index(); i < n; i += thread_count()) {
    const uint32_t v = ids[i];
    if (!need) {
      dict[v] = old[i];
      continue;
    }
    const uint32_t b = (uint32_t)(first + base[i]), k = (uint32_t)need[i];
    dict[v] = Vertex{b, k, 0, 0};
  }
}

// pick copies the dictionary entries of ids into out.
extern "C" __global__ void gr_pick(const Vertex* dict, const uint32_t* ids, uint64_t n, Vertex* out) {
  for (uint64_t i = thread_index(); i < n; i += thread_count()) out[i] = dict[ids[i]];
}

// list_chunks lists table i's nb buckets as chunks of chunk buckets (the
// host's chunkBuckets) in items (i << 32 | chunk number; room for cap), at
// ctrl[kCtrlCount]'s count: gather_chunks and release_chunks take a tile
// a chunk. For tables of more than chunk buckets, at most 2 * buckets /
// chunk items (the host's bound); a chunk past cap is not listed
// (kStatusOverflow), and the readers stop at cap.
__device__ __forceinline__ void list_chunks(uint64_t i, uint32_t nb, uint32_t chunk, uint64_t* items, uint64_t cap,
                                            unsigned long long* ctrl) {
  const uint32_t chunks = (nb + chunk - 1) / chunk;
  const unsigned long long at = atomicAdd(ctrl + kCtrlCount, (unsigned long long)chunks);
  if (at + chunks > cap) report((uint32_t*)(ctrl + kCtrlStatus), kStatusOverflow);
  for (uint32_t k = 0; k < chunks && at + k < cap; ++k) items[at + k] = i << 32 | k;
}

// put_entry writes a gathered entry d of table i at pos of the table's
// window, which ends at o1: key to cols, value to vals and the table's
// vertex ids[i] to src (each when not null); past o1 it writes nothing and
// reports kStatusOverflow.
template <class L>
__device__ __forceinline__ void put_entry(const Ctx<L>& c, const Lane<L>& d, uint64_t pos, uint64_t o1, uint32_t* cols,
                                          typename L::V* vals, uint32_t* src, const uint32_t* ids, uint64_t i) {
  if (pos < o1) {
    cols[pos] = (uint32_t)d.key;
    if (src) src[pos] = ids[i];
    if (vals) vals[pos] = d.val;
  } else {
    report(c.status, kStatusOverflow);
  }
}

// window_end is the end of table i's window of gathered entries, which
// starts at offsets[i]: offsets[i+1] (NeighborsDevice: the caller's
// offsets, laid end to end), or with by_degree (a move: its tables placed
// in no order) the start plus the table's degree.
__device__ __forceinline__ uint64_t window_end(const uint64_t* offsets, const Vertex& e, uint64_t i,
                                               uint32_t by_degree) {
  return by_degree ? offsets[i] + e.degree : offsets[i + 1];
}

// gather_tables copies the live entries of the tables tabs[i] (Rehash's
// movers as they were, or NeighborsDevice's vertices) to cols/vals
// (optional) at offsets[i] .., their vertex ids[i] to src (optional): a
// tile per table, walking its buckets. An entry past its window's end
// (window_end) is not written (kStatusOverflow); a window that decreases
// or passes cap (offsets from the caller's memory) is skipped
// (kStatusBadRoom), so nothing is written outside cols[0, cap). With items, a table of more
// than chunk buckets is not walked here but listed in chunks for
// gather_chunks (list_chunks): one tile walking a hub's thousands of
// buckets was the whole launch. Runs alone.
template <class L>
__device__ void gather_tables(const char* arena, const Vertex* tabs, const uint32_t* ids, uint64_t n, Pool* pool,
                              const uint64_t* offsets, uint32_t by_degree, uint32_t* src, uint32_t* cols,
                              typename L::V* vals, uint64_t cap, uint64_t* items, uint64_t icap, uint32_t chunk,
                              unsigned long long* ctrl) {
  Tile<L::W> t;
  Geometry<L::W> g;
  Ctx<L> c{(char*)arena, 0, 0, pool, (uint32_t*)(ctrl + kCtrlStatus)};
  for (uint64_t i = g.tile; i < n; i += g.tiles) {
    const Vertex e = tabs[i];
    const uint64_t o1 = window_end(offsets, e, i, by_degree);
    uint64_t at = offsets[i];
    if (at > o1 || o1 > cap) {
      if (t.rank == 0) report(c.status, kStatusBadRoom);
      continue;
    }
    if (items && e.nb > chunk) {
      if (t.rank == 0) list_chunks(i, e.nb, chunk, items, icap, ctrl);
      continue;
    }
    for (uint32_t k = 0; k < e.nb; ++k) {
      walk<L>(t, c, (char*)arena + ((size_t)e.base + k) * L::kSlabBytes, [&](const Lane<L>& d, char*) {
        const bool live = holds<L>(t, d, true);
        const unsigned m = t.ballot(live);
        if (live) put_entry<L>(c, d, at + __popc(m & L::lower(t.rank)), o1, cols, vals, src, ids, i);
        at += __popc(m);
      });
    }
  }
}

// gather_chunks is gather_tables for the chunks it listed (items:
// ctrl[kCtrlCount] of them): a tile a chunk, its entries placed in the
// table's window through the table's cursor (an atomic a slab; cursor
// zero before gather_tables). Runs alone, after gather_tables.
template <class L>
__device__ void gather_chunks(const char* arena, const Vertex* tabs, const uint32_t* ids, Pool* pool,
                              const uint64_t* offsets, uint32_t by_degree, uint32_t* src, uint32_t* cols,
                              typename L::V* vals, const uint64_t* items, uint64_t icap, uint32_t chunk,
                              unsigned long long* cursor, unsigned long long* ctrl) {
  Tile<L::W> t;
  Geometry<L::W> g;
  Ctx<L> c{(char*)arena, 0, 0, pool, (uint32_t*)(ctrl + kCtrlStatus)};
  const uint64_t n = min((uint64_t)*(volatile unsigned long long*)(ctrl + kCtrlCount), icap);
  for (uint64_t j = g.tile; j < n; j += g.tiles) {
    const uint64_t it = items[j];
    const uint64_t i = it >> 32;
    const Vertex e = tabs[i];
    const uint64_t o0 = offsets[i], o1 = window_end(offsets, e, i, by_degree);
    const uint32_t k0 = (uint32_t)it * chunk, k1 = min(e.nb, k0 + chunk);
    for (uint32_t k = k0; k < k1; ++k) {
      walk<L>(t, c, (char*)arena + ((size_t)e.base + k) * L::kSlabBytes, [&](const Lane<L>& d, char*) {
        const bool live = holds<L>(t, d, true);
        const unsigned m = t.ballot(live);
        if (!m) return;
        unsigned long long at = 0;
        if (t.rank == 0) at = atomicAdd(&cursor[i], (unsigned long long)__popc(m));
        at = t.shfl((uint64_t)at, 0);
        if (live) put_entry<L>(c, d, o0 + at + __popc(m & L::lower(t.rank)), o1, cols, vals, src, ids, i);
      });
    }
  }
}

// release empties the tables tabs[i] (i < n: the movers' tables before
// Rehash moved them, or the new ones Rehash gives back when it fails):
// overflow slabs reset and freed, heads reset (the buckets are orphans:
// no dictionary entry names them). A table of more than chunk buckets is
// listed in items in chunks for release_chunks (list_chunks). Runs alone.
template <class L>
__device__ void release(char* arena, const Vertex* tabs, uint64_t n, Pool* pool, uint64_t* items, uint64_t icap,
                        uint32_t chunk, unsigned long long* ctrl) {
  Tile<L::W> t;
  Geometry<L::W> g;
  Ctx<L> c{arena, 0, 0, pool, (uint32_t*)(ctrl + kCtrlStatus)};
  long long freed = 0;
  for (uint64_t i = g.tile; i < n; i += g.tiles) {
    const Vertex e = tabs[i];
    if (e.nb > chunk) {
      if (t.rank == 0) list_chunks(i, e.nb, chunk, items, icap, ctrl);
      continue;
    }
    for (uint32_t k = 0; k < e.nb; ++k) {
      freed += empty_list<L>(t, c, arena + ((size_t)e.base + k) * L::kSlabBytes);
    }
  }
  if (t.rank == 0 && freed) atomicAdd(&pool->used, (unsigned long long)(-freed));
}

// release_chunks is release for the chunks it listed (items:
// ctrl[kCtrlCount] of them), a tile a chunk. Runs alone, after release.
template <class L>
__device__ void release_chunks(char* arena, const Vertex* tabs, Pool* pool, const uint64_t* items, uint64_t icap,
                               uint32_t chunk, unsigned long long* ctrl) {
  Tile<L::W> t;
  Geometry<L::W> g;
  Ctx<L> c{arena, 0, 0, pool, (uint32_t*)(ctrl + kCtrlStatus)};
  const uint64_t n = min((uint64_t)*(volatile unsigned long long*)(ctrl + kCtrlCount), icap);
  long long freed = 0;
  for (uint64_t j = g.tile; j < n; j += g.tiles) {
    const uint64_t it = items[j];
    const Vertex e = tabs[it >> 32];
    const uint32_t k0 = (uint32_t)it * chunk, k1 = min(e.nb, k0 + chunk);
    for (uint32_t k = k0; k < k1; ++k) freed += empty_list<L>(t, c, arena + ((size_t)e.base + k) * L::kSlabBytes);
  }
  if (t.rank == 0 && freed) atomicAdd(&pool->used, (unsigned long long)(-freed));
}

// mark sets the bits of ids in gone.
extern "C" __global__ void gr_mark(const uint32_t* ids, uint64_t n, uint32_t* gone) {
  for (uint64_t i = thread_index(); i < n; i += thread_count()) atomicOr(&gone[ids[i] >> 5], 1u << (ids[i] & 31));
}

// census walks every vertex's bucket lists (a tile per vertex, so a hub's
// buckets are one tile's work: Check and Stats are not timed paths): live
// entries per vertex (live, optional), overflow slabs (ctrl[kCtrlCount]),
// the longest list in slabs (ctrl[kCtrlFailed], a maximum), the
// self-loops (ctrl[kCtrlInserted]) and the slabs that break the frontier
// rule of slabhash.cuh (ctrl[kCtrlDelta]: an empty slot before a key or a
// tombstone, or in a slab that has a next one). Runs alone.
template <class L>
__device__ void census(const char* arena, const Vertex* dict, uint64_t nv, Pool* pool, uint32_t* live,
                       unsigned long long* ctrl) {
  using K = typename L::K;
  Tile<L::W> t;
  Geometry<L::W> g;
  Ctx<L> c{(char*)arena, 0, 0, pool, (uint32_t*)(ctrl + kCtrlStatus)};
  unsigned long long over = 0, longest = 0, loops = 0, holes = 0;
  for (uint64_t u = g.tile; u < nv; u += g.tiles) {
    const Vertex e = dict[u];
    uint32_t here = 0;
    for (uint32_t k = 0; k < e.nb; ++k) {
      uint32_t len = 0;
      walk<L>(t, c, (char*)arena + ((size_t)e.base + k) * L::kSlabBytes, [&](const Lane<L>& d, char*) {
        here += __popc(t.ballot(holds<L>(t, d, false)));
        loops += __popc(t.ballot(L::slot_lane(t.rank) && d.key == (uint32_t)u));
        const unsigned em = t.ballot(L::slot_lane(t.rank) && d.key == sh::empty_key<K>());
        const unsigned fm = t.ballot(L::slot_lane(t.rank) && d.key != sh::empty_key<K>());
        const uint32_t nx = t.shfl(d.tail, L::kTailLane);
        holes += em && ((fm >> (__ffs(em) - 1)) || nx != kNull);
        ++len;
      });
      over += len - 1;
      longest = longest > len ? longest : len;
    }
    if (t.rank == 0 && live && here) atomicAdd(&live[u], here);
  }
  if (t.rank == 0) {
    if (over) atomicAdd(ctrl + kCtrlCount, over);
    if (longest) atomicMax(ctrl + kCtrlFailed, longest);
    if (loops) atomicAdd(ctrl + kCtrlInserted, loops);
    if (holes) atomicAdd(ctrl + kCtrlDelta, holes);
  }
}

// contains reports whether key is in the table bn = (base, nb) (one thread;
// the structure is quiescent).
template <class L>
__device__ __forceinline__ bool contains(const char* arena, const Pool* pool, uint2 bn, uint32_t seed, uint32_t key) {
  if (bn.y == 0) return false;  // no table
  const char* s = arena + bucket_of(bn, key, seed) * L::kSlabBytes;
  for (uint32_t hop = 0; hop < sh::kMaxSteps; ++hop) {
    uint32_t next;
    if constexpr (L::kIsSet && L::kSlabBytes == 32) {
      const uint4 a = *(const uint4*)s, b = *(const uint4*)(s + 16);
      if (a.x == key || a.y == key || a.z == key || a.w == key || b.x == key || b.y == key || b.z == key) return true;
      next = b.w;
    } else {
#pragma unroll
      for (int q = 0; q < L::kSlots; ++q)
        if (*(const uint32_t*)(s + q * L::kSlotBytes) == key) return true;
      next = *(const uint32_t*)(s + L::kNextOffset);
    }
    if (next == kNull) return false;
    s = slab::unit_ptr<L::kSlabBytes>(pool, next);
  }
  return false;
}

// orient keeps, in each vertex's row of a CSR (cols[offsets[v] ..], in
// place, at the front, in their order), the neighbours ranked above it
// (ranks_above), and their number in ocnt[v]. A warp takes 32 rows, a
// lane each: a lane compacts a row of up to kShortRow entries alone, and
// the warp compacts each longer row together (a ballot per 32 entries).
constexpr uint64_t kShortRow = 16;

extern "C" __global__ void gr_orient(const uint64_t* offsets, uint32_t* cols, const Vertex* dict, uint64_t nv,
                                     uint32_t* ocnt) {
  const uint32_t lane = slab::lane();
  const uint64_t warps = thread_count() / 32;
  for (uint64_t v0 = thread_index() / 32 * 32; v0 < nv; v0 += warps * 32) {
    const uint64_t v = v0 + lane;
    uint64_t o0 = 0, o1 = 0;
    uint32_t dv = 0;
    if (v < nv) {
      o0 = offsets[v];
      o1 = offsets[v + 1];
      dv = degree_of(dict, offsets, (uint32_t)v);
    }
    const bool alone = o1 - o0 <= kShortRow;
    if (alone && v < nv) {
      uint64_t w = o0;
      for (uint64_t k = o0; k < o1; ++k) {
        const uint32_t x = cols[k], dx = degree_of(dict, offsets, x);
        if (ranks_above(dx, x, dv, (uint32_t)v)) cols[w++] = x;
      }
      ocnt[v] = (uint32_t)(w - o0);
    }
    for (unsigned m = __ballot_sync(0xffffffffu, !alone); m; m &= m - 1) {
      const int src = __ffs(m) - 1;
      const uint32_t sv = (uint32_t)__shfl_sync(0xffffffffu, (unsigned long long)v, src);
      const uint32_t sdv = __shfl_sync(0xffffffffu, dv, src);
      const uint64_t s0 = __shfl_sync(0xffffffffu, (unsigned long long)o0, src);
      const uint64_t s1 = __shfl_sync(0xffffffffu, (unsigned long long)o1, src);
      uint64_t w = s0;
      for (uint64_t k = s0; k < s1; k += 32) {
        const uint64_t j = k + lane;
        uint32_t x = 0;
        bool keep = false;
        if (j < s1) {
          x = cols[j];
          const uint32_t dx = degree_of(dict, offsets, x);
          keep = ranks_above(dx, x, sdv, sv);
        }
        const unsigned b = __ballot_sync(0xffffffffu, keep);
        __syncwarp();  // every lane read its entry before any is overwritten
        if (keep) cols[w + __popc(b & ((1u << lane) - 1))] = x;
        w += __popc(b);
      }
      if (lane == 0) ocnt[sv] = (uint32_t)(w - s0);
    }
  }
}

// count_pairs is the loop of the triangle counts: for every entry k = (u,
// v) of the rows (rows[k] = u; u's first ocnt[u] entries taken), and every
// later entry w of u's row, it counts edge(v, w) into count. A warp takes
// 32 entries and deals their pairs out evenly: the lists of later entries
// laid end to end (a warp scan of their lengths), lane l takes pairs l,
// l+32, ... and finds the entry each belongs to by a binary search over
// the scan (five shuffles). Road and mesh graphs (a pair or two an entry)
// and hubs' long lists alike keep every lane busy, where a fixed tile of
// lanes per entry idles most of them on short lists. Self-loops (only
// unoriented rows hold one) pair with nothing.
constexpr uint32_t kPairRound = 1u << 26;  // pairs a list contributes to one round

template <class Edge>
__device__ __forceinline__ void count_pairs(const uint64_t* offsets, const uint32_t* cols, const uint32_t* rows,
                                            const uint32_t* ocnt, uint64_t total, uint64_t nv,
                                            unsigned long long* count, Edge&& edge) {
  const uint32_t lane = slab::lane();
  const uint64_t warps = thread_count() / 32;
  unsigned long long found = 0;
  for (uint64_t k0 = thread_index() / 32 * 32; k0 < total; k0 += warps * 32) {
    const uint64_t k = k0 + lane;
    uint32_t u = 0, v = 0, i = 0, len = 0;
    uint64_t o0 = 0;
    if (k < total) {
      // An oriented gather leaves the rows past a row's oriented entries
      // unwritten (gr_gather_set_vertices): k counts only when it lies in
      // the oriented part of row u's window (windows do not overlap, so no
      // other row's can hold it).
      u = rows[k];
      if (u < nv) {
        o0 = offsets[u];
        const uint32_t d = ocnt[u];
        if (k >= o0 && k - o0 < d) {
          i = (uint32_t)(k - o0);
          v = cols[k];
          if (v != u) len = d - i - 1;
        }
      }
    }
    // Rounds of at most 2^26 pairs a list, so that the 32 lists' sum fits
    // 32 bits (one round but for hubs of unoriented rows).
    uint32_t from = i + 1;  // the first later entry not yet paired
    while (__any_sync(kAll, len > 0)) {
      const uint32_t take = min(len, kPairRound);
      const uint32_t incl = warp_scan(take);  // inclusive scan of this round's lengths
      const uint32_t all = __shfl_sync(kAll, incl, 31);
      for (uint32_t p0 = 0; p0 < all; p0 += 32) {
        const uint32_t p = p0 + lane;
        const int o = warp_owner(incl, p);  // the list's lane
        const uint32_t ou = __shfl_sync(kAll, u, o), ov = __shfl_sync(kAll, v, o);
        const uint32_t start = __shfl_sync(kAll, incl - take, o), of = __shfl_sync(kAll, from, o);
        const uint64_t oo = __shfl_sync(kAll, (unsigned long long)o0, o);
        if (p < all) {
          const uint32_t w = cols[oo + of + (p - start)];
          found += w != ou && edge(ov, w);
        }
      }
      from += take;
      len -= take;
    }
  }
  block_add(count, warp_sum(found));
}

// tc counts triangles over an oriented CSR (gr_orient): for every oriented
// edge (u, v) at position i of u's row, the later entries w of u's row
// whose edge (v, w) is in v's table (one thread's probe: contains).
template <class L>
__device__ void tc(const uint64_t* offsets, const uint32_t* cols, const uint32_t* rows, const uint32_t* ocnt,
                   uint64_t total, uint64_t nv, const char* arena, const Vertex* dict, const Pool* pool, uint32_t seed,
                   unsigned long long* count) {
  count_pairs(offsets, cols, rows, ocnt, total, nv, count, [&](uint32_t v, uint32_t w) {
    return contains<L>(arena, pool, *(const uint2*)&dict[v], seed, w);
  });
}

// count_pairs_tiled is count_pairs with a tile of 8 lanes per entry, the
// lanes over its later entries. The sorted baseline keeps it for graphs of
// high mean degree: on soc-LiveJournal1 (23 entries a vertex) its binary
// searches ran 15% faster this way than dealt out over the warp (H200),
// while on road, mesh and geometric graphs the warp's deal won 1.4-2x.
template <class Edge>
__device__ __forceinline__ void count_pairs_tiled(const uint64_t* offsets, const uint32_t* cols, const uint32_t* rows,
                                                  const uint32_t* ocnt, uint64_t total, uint64_t nv,
                                                  unsigned long long* count, Edge&& edge) {
  Tile<8> t;
  Geometry<8> g;
  unsigned long long found = 0;
  for (uint64_t k = g.tile; k < total; k += g.tiles) {
    const uint32_t u = rows[k];
    if (u >= nv) continue;  // as count_pairs: a rows word not written
    const uint64_t o0 = offsets[u];
    const uint32_t d = ocnt[u];
    if (k < o0 || k - o0 >= d) continue;
    const uint32_t i = (uint32_t)(k - o0);
    const uint32_t v = cols[k];
    if (v == u) continue;
    for (uint32_t j = i + 1 + t.rank; j < d; j += 8) {
      const uint32_t w = cols[o0 + j];
      found += w != u && edge(v, w);
    }
  }
  for (int off = 16; off > 0; off >>= 1) found += __shfl_xor_sync(0xffffffffu, found, off);
  block_add(count, found);
}

// tc_sorted is tc over sorted rows (gr_orient keeps their order): the edge
// (v, w) is looked up by binary search in the oriented row of whichever of
// v, w ranks lower. The sorted-adjacency baseline (TrianglesSorted); tiled
// picks count_pairs_tiled (launch 8 threads an entry) over count_pairs (one).
extern "C" __global__ void gr_tc_sorted(const uint64_t* offsets, const uint32_t* cols, const uint32_t* rows,
                                        const uint32_t* ocnt, uint64_t total, uint64_t nv, const Vertex* dict,
                                        uint32_t tiled, unsigned long long* count) {
  auto edge = [&](uint32_t v, uint32_t w) {
    uint32_t a = v, b = w;  // look b up in a's oriented row
    const uint32_t dv = degree_of(dict, offsets, v), dw = degree_of(dict, offsets, w);
    if (ranks_above(dv, v, dw, w)) {
      a = w;
      b = v;
    }
    const uint32_t* row = cols + offsets[a];
    uint32_t lo = 0, hi = ocnt[a];
    while (lo < hi) {
      const uint32_t mid = (lo + hi) >> 1;
      if (row[mid] < b) lo = mid + 1;
      else hi = mid;
    }
    return lo < ocnt[a] && row[lo] == b;
  };
  if (tiled) count_pairs_tiled(offsets, cols, rows, ocnt, total, nv, count, edge);
  else count_pairs(offsets, cols, rows, ocnt, total, nv, count, edge);
}

// The sorted-CSR baseline (SortedCSR): entries as 64-bit keys src<<32|dst,
// sorted and deduplicated by prim; rows from the keys.

// pack writes the keys of edges (src[i], dst[i]) and, with both, of their
// reverses at n+i.
extern "C" __global__ void gr_pack(const uint32_t* src, const uint32_t* dst, uint64_t n, uint32_t both,
                                   uint64_t* keys) {
  for (uint64_t i = thread_index(); i < n; i += thread_count()) {
    const uint64_t u = src[i], v = dst[i];
    keys[i] = u << 32 | v;
    if (both) keys[n + i] = v << 32 | u;
  }
}

// unique flags the first of every run of equal sorted keys, self-loops
// left out.
extern "C" __global__ void gr_unique(const uint64_t* keys, uint64_t n, uint8_t* flags) {
  for (uint64_t i = thread_index(); i < n; i += thread_count()) {
    const uint64_t k = keys[i];
    flags[i] = (uint32_t)(k >> 32) != (uint32_t)k && (i == 0 || keys[i - 1] != k);
  }
}

// rows writes the CSR offsets of m sorted keys over nv vertices (nv+1
// offsets), and the columns and row of every entry.
extern "C" __global__ void gr_rows(const uint64_t* keys, uint64_t m, uint64_t nv, uint64_t* offsets, uint32_t* cols,
                                   uint32_t* rows) {
  for (uint64_t i = thread_index(); i <= m; i += thread_count()) {
    const uint64_t u = i < m ? keys[i] >> 32 : nv;  // the row that starts at i (nv past the end)
    const uint64_t p = i == 0 ? 0 : (keys[i - 1] >> 32) + 1;
    for (uint64_t v = p; v <= u && v <= nv; ++v) offsets[v] = i;
    if (i < m) {
      cols[i] = (uint32_t)keys[i];
      rows[i] = (uint32_t)u;
    }
  }
}

// narrow copies 64-bit offsets to 32-bit ones (prim's segmented sort).
extern "C" __global__ void gr_narrow(const uint64_t* in, uint64_t n, uint32_t* out) {
  for (uint64_t i = thread_index(); i < n; i += thread_count()) out[i] = (uint32_t)in[i];
}

}  // namespace gr
}  // namespace wk

// gr_apply is held to 64 registers (4 blocks of 256 per SM; the set layout
// spills nothing, the maps a few bytes): on the H200, edge batches of 2^20-2^22
// ran 6-10% faster than at 72-80 registers and 3 blocks.
//
// GR_LAYOUT(name, V, kind) instantiates the per-layout kernels for 8-lane
// tiles: gr_apply_<name>, gr_gather_<name>, gr_sweep_<name>,
// gr_reset_<name>, gr_census_<name>, gr_flush_<name>, gr_tc_<name>.
#define GR_LAYOUT(NAME, V, KIND)                                                                                     \
  using L_##NAME = wk::sh::Layout<uint32_t, V, KIND, 8, false>;                                                       \
  extern "C" __global__ void __launch_bounds__(256, 4)                                                                \
      gr_apply_##NAME(char* arena, uint32_t seed, wk::slab::Pool* pool, wk::gr::Vertex* dict, const uint32_t* src,   \
                      const uint32_t* dst, V* vals, uint32_t op, uint8_t* res, uint64_t n, unsigned long long* ctrl, \
                      uint32_t flags, uint32_t salt, unsigned long long* out, const unsigned long long* limit) {      \
    wk::gr::apply<L_##NAME>(arena, seed, pool, dict, src, dst, vals, op, res, n, ctrl, flags, salt, out, limit);      \
  }                                                                                                                   \
  extern "C" __global__ void gr_gather_##NAME(const char* arena, uint64_t lo, uint64_t hi, const uint32_t* owner,    \
                                              uint32_t vbase, wk::slab::Pool* pool, const uint64_t* offsets,         \
                                              uint32_t* cursor, uint32_t* cols, V* vals, uint32_t* rows,             \
                                              unsigned long long* ctrl) {                                            \
    wk::gr::gather<L_##NAME>(arena, lo, hi, owner, vbase, pool, offsets, cursor, cols, vals, rows, ctrl);            \
  }                                                                                                                   \
  extern "C" __global__ void gr_release_##NAME(char* arena, const wk::gr::Vertex* tabs, uint64_t n,                \
                                               wk::slab::Pool* pool, uint64_t* items, uint64_t icap, uint32_t chunk, \
                                               unsigned long long* ctrl) {                                           \
    wk::gr::release<L_##NAME>(arena, tabs, n, pool, items, icap, chunk, ctrl);                                        \
  }                                                                                                                   \
  extern "C" __global__ void gr_release_chunks_##NAME(char* arena, const wk::gr::Vertex* tabs, wk::slab::Pool* pool, \
                                                      const uint64_t* items, uint64_t icap, uint32_t chunk,          \
                                                      unsigned long long* ctrl) {                                    \
    wk::gr::release_chunks<L_##NAME>(arena, tabs, pool, items, icap, chunk, ctrl);                                    \
  }                                                                                                                   \
  extern "C" __global__ void gr_gather_tables_##NAME(                                                                \
      const char* arena, const wk::gr::Vertex* tabs, const uint32_t* ids, uint64_t n, wk::slab::Pool* pool,         \
      const uint64_t* offsets, uint32_t by_degree, uint32_t* src, uint32_t* cols, V* vals, uint64_t cap,             \
      uint64_t* items, uint64_t icap, uint32_t chunk, unsigned long long* ctrl) {                                     \
    wk::gr::gather_tables<L_##NAME>(arena, tabs, ids, n, pool, offsets, by_degree, src, cols, vals, cap, items, icap, \
                                    chunk, ctrl);                                                                    \
  }                                                                                                                   \
  extern "C" __global__ void gr_gather_chunks_##NAME(                                                                \
      const char* arena, const wk::gr::Vertex* tabs, const uint32_t* ids, wk::slab::Pool* pool,                      \
      const uint64_t* offsets, uint32_t by_degree, uint32_t* src, uint32_t* cols, V* vals, const uint64_t* items,    \
      uint64_t icap, uint32_t chunk, unsigned long long* cursor, unsigned long long* ctrl) {                          \
    wk::gr::gather_chunks<L_##NAME>(arena, tabs, ids, pool, offsets, by_degree, src, cols, vals, items, icap, chunk, \
                                    cursor, ctrl);                                                                   \
  }                                                                                                                   \
  extern "C" __global__ void gr_sweep_##NAME(char* arena, uint64_t nslabs, const uint32_t* owner,                    \
                                             wk::gr::Vertex* dict, wk::slab::Pool* pool, const uint32_t* gone,       \
                                             unsigned long long* ctrl) {                                             \
    wk::gr::sweep<L_##NAME>(arena, nslabs, owner, dict, pool, gone, ctrl);                                            \
  }                                                                                                                   \
  extern "C" __global__ void gr_reset_##NAME(char* arena, wk::gr::Vertex* dict, wk::slab::Pool* pool,                \
                                             const uint32_t* ids, uint64_t n, uint32_t* gone,                        \
                                             unsigned long long* ctrl) {                                             \
    wk::gr::reset<L_##NAME>(arena, dict, pool, ids, n, gone, ctrl);                                                   \
  }                                                                                                                   \
  extern "C" __global__ void gr_census_##NAME(const char* arena, const wk::gr::Vertex* dict, uint64_t nv,          \
                                              wk::slab::Pool* pool, uint32_t* live, unsigned long long* ctrl) {      \
    wk::gr::census<L_##NAME>(arena, dict, nv, pool, live, ctrl);                                                      \
  }                                                                                                                   \
  extern "C" __global__ void gr_flush_##NAME(char* arena, uint32_t nslabs, wk::slab::Pool* pool,                     \
                                             unsigned long long* ctrl) {                                             \
    wk::sh::flush<L_##NAME>(arena, nslabs, pool, ctrl);                                                               \
  }                                                                                                                   \
  extern "C" __global__ void gr_tc_##NAME(const uint64_t* offsets, const uint32_t* cols, const uint32_t* rows,       \
                                          const uint32_t* ocnt, uint64_t total, uint64_t nv, const char* arena,      \
                                          const wk::gr::Vertex* dict, const wk::slab::Pool* pool, uint32_t seed,     \
                                          unsigned long long* count) {                                               \
    wk::gr::tc<L_##NAME>(offsets, cols, rows, ocnt, total, nv, arena, dict, pool, seed, count);                      \
  }

// Unweighted graphs: 32-byte set slabs of 7 neighbours. Weighted: 64-byte
// slabs of 7 (neighbour, uint32 weight) pairs, or 128-byte slabs of 7
// (neighbour, uint64 weight) pairs.
GR_LAYOUT(set, uint32_t, wk::sh::kSet)
GR_LAYOUT(w32, uint32_t, wk::sh::kMap)
GR_LAYOUT(w64, uint64_t, wk::sh::kMap)
