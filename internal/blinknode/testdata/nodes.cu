// nodes.cu: kernels that run blink.cuh's node code on single nodes, for the
// CPU emulation of the GPU (blinknode's emu_test.go; nodes.ptx beside it is
// the module image the emulated driver reads names and parameters from).
#include <stdint.h>

#include "blink.cuh"

namespace {

using namespace wk::blink;

// child_search has one tile build an internal node of count pairs (keys[i],
// vals[i]); the slots past the count hold (0, junk), which no search may
// take, and a versioned node's version (stamp 0, prev junk) neither. For
// each query it writes the value value_le finds (child_for's search) or
// all ones for none.
template <typename S, bool V>
__device__ void child_search(const S* keys, const S* vals, uint32_t count, const S* qs, uint32_t nq, S* out) {
  using N = Node<Lay<S, V>>;
  constexpr int T = N::T;
  if (blockIdx.x * blockDim.x + threadIdx.x >= (unsigned)T) return;  // one tile
  Tile<T> t;
  N n;
#pragma unroll
  for (int p = 0; p < N::P; ++p) {
    const int s = n.slot(t, p);
    const bool live = s >= 0 && s < (int)count;
    n.w[2 * p] = live ? keys[s] : S(0);
    n.w[2 * p + 1] = live ? vals[s] : S(0xbad);
  }
  n.set_header(t, m_make(count, 1, 0), kNone, keys[0], 0);
  if constexpr (V) n.set_version(t, 0, 0xbad);
  n.decode(t);
  for (uint32_t q = 0; q < nq; ++q) {
    S v = 0;
    const bool found = n.value_le(t, qs[q], v);
    if (t.rank == 0) out[q] = found ? v : ~S(0);
  }
}

// shift has one tile build a leaf of count pairs (keys[i], vals[i]; the
// slots past the count repeat the last pair, as writers leave them), then
// insert (k, v) at pos (insert) or remove the pair at pos, and write every
// pair slot [0, kCap) to out_keys, out_vals: insert_at and remove_at, stale
// slots included (a torn reader must find real pairs there).
template <typename S, bool V>
__device__ void shift(const S* keys, const S* vals, uint32_t count, uint32_t pos, uint32_t insert, S k, S v,
                      S* out_keys, S* out_vals) {
  using N = Node<Lay<S, V>>;
  constexpr int T = N::T;
  if (blockIdx.x * blockDim.x + threadIdx.x >= (unsigned)T) return;  // one tile
  Tile<T> t;
  N n;
#pragma unroll
  for (int p = 0; p < N::P; ++p) {
    const int s = n.slot(t, p);
    const int e = s < (int)count ? s : (int)count - 1;
    n.w[2 * p] = s >= 0 && e >= 0 ? keys[e] : S(0);
    n.w[2 * p + 1] = s >= 0 && e >= 0 ? vals[e] : S(0);
  }
  n.set_header(t, m_make(count, 0, 0), kNone, 0, 0);
  if constexpr (V) n.set_version(t, 7, 0xbad);
  if (insert) n.insert_at(t, (int)pos, k, v);
  else n.remove_at(t, (int)pos);
#pragma unroll
  for (int p = 0; p < N::P; ++p) {
    const int s = n.slot(t, p);
    if (N::holds(s)) {
      out_keys[s] = n.w[2 * p];
      out_vals[s] = n.w[2 * p + 1];
    }
  }
}

}  // namespace

extern "C" __global__ void nodes_child_u32(const uint32_t* keys, const uint32_t* vals, uint32_t count,
                                           const uint32_t* qs, uint32_t nq, uint32_t* out) {
  child_search<uint32_t, false>(keys, vals, count, qs, nq, out);
}
extern "C" __global__ void nodes_child_u32v(const uint32_t* keys, const uint32_t* vals, uint32_t count,
                                            const uint32_t* qs, uint32_t nq, uint32_t* out) {
  child_search<uint32_t, true>(keys, vals, count, qs, nq, out);
}
extern "C" __global__ void nodes_child_u64(const uint64_t* keys, const uint64_t* vals, uint32_t count,
                                           const uint64_t* qs, uint32_t nq, uint64_t* out) {
  child_search<uint64_t, false>(keys, vals, count, qs, nq, out);
}
extern "C" __global__ void nodes_child_u64v(const uint64_t* keys, const uint64_t* vals, uint32_t count,
                                            const uint64_t* qs, uint32_t nq, uint64_t* out) {
  child_search<uint64_t, true>(keys, vals, count, qs, nq, out);
}
extern "C" __global__ void nodes_shift_u32(const uint32_t* keys, const uint32_t* vals, uint32_t count, uint32_t pos,
                                           uint32_t insert, uint32_t k, uint32_t v, uint32_t* out_keys, uint32_t* out_vals) {
  shift<uint32_t, false>(keys, vals, count, pos, insert, k, v, out_keys, out_vals);
}
extern "C" __global__ void nodes_shift_u32v(const uint32_t* keys, const uint32_t* vals, uint32_t count, uint32_t pos,
                                            uint32_t insert, uint32_t k, uint32_t v, uint32_t* out_keys, uint32_t* out_vals) {
  shift<uint32_t, true>(keys, vals, count, pos, insert, k, v, out_keys, out_vals);
}
extern "C" __global__ void nodes_shift_u64(const uint64_t* keys, const uint64_t* vals, uint32_t count, uint32_t pos,
                                           uint32_t insert, uint64_t k, uint64_t v, uint64_t* out_keys, uint64_t* out_vals) {
  shift<uint64_t, false>(keys, vals, count, pos, insert, k, v, out_keys, out_vals);
}
extern "C" __global__ void nodes_shift_u64v(const uint64_t* keys, const uint64_t* vals, uint32_t count, uint32_t pos,
                                            uint32_t insert, uint64_t k, uint64_t v, uint64_t* out_keys, uint64_t* out_vals) {
  shift<uint64_t, true>(keys, vals, count, pos, insert, k, v, out_keys, out_vals);
}
