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
#include "blink_wave.cuh"
#include "mem.cuh"
#include "status.cuh"

namespace {

using namespace wk::blink;  // the shared B-link core

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
  __device__ __forceinline__ char* node(uint32_t i) const { return base + (uint64_t)i * Lay<S>::kNodeBytes; }
  // chunk: lane rank's 16 bytes of node i.
  __device__ __forceinline__ const char* chunk(uint32_t i, unsigned rank) const { return node(i) + rank * 16; }
  __device__ __forceinline__ uint32_t root() const { return 0; }
  // valid: an address a link or a child may hold (the root is neither).
  __device__ __forceinline__ bool valid(uint32_t i) const { return i != 0 && i < cap; }
  // walk_bound: the extra steps a walk along the leaves may take.
  __device__ __forceinline__ uint32_t walk_bound() const { return (uint32_t)cap; }
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
// Phased queries walk in lockstep waves (internal/devcode/blink_wave.cuh);
// batches that may run beside writers give each tile one operation.

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
  report_result(pool.status, r);
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
  report_result(pool.status, r);
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
  report_result(pool.status, r);
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
  if (i < n) report_result(pool.status, op_insert<Node<S>>(pool, ver, (S)keys[i], (S)vals[i], added, t));
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
  if (i < n) report_result(pool.status, op_delete<Node<S>>(pool, ver, (S)keys[i], removed, t));
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
    report_result(pool.status, r);
    if (t.rank == 0) {
      if (out_found) out_found[i] = found ? 1 : 0;
      if (out_keys) out_keys[i] = found ? (K)rk : K(0);
      if (out_vals) out_vals[i] = found ? (V)rv : V(0);
      if (out_counts) out_counts[i] = cnt;
    }
  }
  add_keys(ctl + 1, delta, t.rank == 0);
}

// Phased queries: the shared lockstep waves over btree's pool.

template <typename K, typename V>
__device__ void phased_lookup(char* base, uint64_t cap, uint32_t* status, const K* keys, const uint32_t* order,
                              uint64_t n, V* out_vals, uint8_t* out_found) {
  using S = SlotOf<K, V>;
  Pool<S> pool{base, cap, nullptr, status};
  wave_lookup<Node<S>>(pool, Latest{false}, status, keys, order, n, out_vals, out_found);
}

template <typename K, typename V>
__device__ void phased_neighbor(char* base, uint64_t cap, uint32_t* status, const K* keys, const uint32_t* order,
                                uint64_t n, uint32_t predecessor, K* out_keys, V* out_vals, uint8_t* out_found) {
  using S = SlotOf<K, V>;
  Pool<S> pool{base, cap, nullptr, status};
  wave_neighbor<Node<S>>(pool, Latest{false}, status, keys, order, n, predecessor, out_keys, out_vals, out_found);
}

template <typename K, typename V>
__device__ void phased_range(char* base, uint64_t cap, uint32_t* status, const K* los, const K* his,
                             const uint32_t* order, uint64_t n, const uint32_t* offsets, uint64_t out_len,
                             K* out_keys, V* out_vals, uint32_t* counts) {
  using S = SlotOf<K, V>;
  Pool<S> pool{base, cap, nullptr, status};
  wave_range<Node<S>>(pool, Latest{false}, status, los, his, order, n, offsets, out_len, out_keys, out_vals, counts);
}

// build_node writes node j of one level of a bulk-built tree with tile t
// (blink.cuh's build_node): btree's levels are dense runs of node indices,
// node_base + j for node j of a level; the top level (one node) is the root,
// node 0 (base 0).
template <typename K, typename V, int T>
__device__ __forceinline__ void build_node(char* base, const K* keys, const V* vals, uint64_t m, uint32_t level,
                                           uint32_t node_base, uint64_t nodes, uint32_t child_base, uint64_t children,
                                           uint32_t fill, uint32_t fanout, uint64_t span, uint64_t child_span,
                                           uint64_t j, const Tile<T>& t) {
  using S = SlotOf<K, V>;
  Node<S> nd;
  wk::blink::build_node(nd, keys, vals, m, level, nodes, children, fill, fanout, span, child_span, j,
                        node_base + (uint32_t)j + 1, [child_base](uint64_t c) { return (uint32_t)(child_base + c); }, t);
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
