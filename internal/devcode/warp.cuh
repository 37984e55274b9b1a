// warp.cuh: warp and cooperative-tile helpers shared by warpkit kernels.
//
// All helpers assume the full warp (or the full tile) is converged and active,
// which warpkit kernels guarantee by keeping every lane in the loop until the
// whole warp is done (the work-sharing pattern of the slab hash paper).
#pragma once
#include <stdint.h>

namespace wk {

constexpr unsigned kWarpSize = 32;
constexpr unsigned kFullMask = 0xffffffffu;

#ifndef WK_HOST_EMULATION  // the CPU emulation (internal/emu/emu.h) defines its own
__device__ __forceinline__ unsigned lane_id() {
  unsigned id;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(id));
  return id;
}
#endif

__device__ __forceinline__ unsigned ballot(bool pred, unsigned mask = kFullMask) {
  return __ballot_sync(mask, pred);
}

// first_lane returns the lowest set lane of a non-zero mask.
__device__ __forceinline__ int first_lane(unsigned mask) { return __ffs(mask) - 1; }

template <typename T>
__device__ __forceinline__ T shfl(T v, int src, int width = kWarpSize, unsigned mask = kFullMask) {
  return __shfl_sync(mask, v, src, width);
}

// Tile is a group of Width consecutive lanes (Width divides 32) working as one
// unit: a warp-cooperative operation at a smaller granularity.
template <int Width>
struct Tile {
  static_assert(Width == 1 || Width == 2 || Width == 4 || Width == 8 || Width == 16 || Width == 32,
                "tile width must divide the warp");
  static constexpr int kWidth = Width;

  // rank is this lane's index in its tile; base the warp lane of rank 0.
  __device__ __forceinline__ int rank() const { return lane_id() & (Width - 1); }
  __device__ __forceinline__ int base() const { return lane_id() & ~(Width - 1); }
  // mask selects this tile's lanes in a warp-wide ballot.
  __device__ __forceinline__ unsigned mask() const {
    return Width == 32 ? kFullMask : (((1u << Width) - 1) << base());
  }
  // ballot returns a Width-bit mask of pred over this tile's lanes.
  __device__ __forceinline__ unsigned ballot(bool pred) const {
    unsigned all = __ballot_sync(kFullMask, pred);
    return Width == 32 ? all : (all >> base()) & ((1u << Width) - 1);
  }
  template <typename T>
  __device__ __forceinline__ T shfl(T v, int src_rank) const {
    return __shfl_sync(kFullMask, v, src_rank, Width);
  }
  __device__ __forceinline__ bool any(bool pred) const { return ballot(pred) != 0; }
};

// 64-bit shuffles are provided by __shfl_sync for (unsigned) long long; these
// aliases keep kernel code generic over uint32_t/uint64_t.
__device__ __forceinline__ uint64_t shfl64(uint64_t v, int src, int width = kWarpSize) {
  return __shfl_sync(kFullMask, (unsigned long long)v, src, width);
}

}  // namespace wk
