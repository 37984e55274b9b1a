// mem.cuh: the memory accesses of warpkit's tree kernels (btree, mvbtree),
// with the host versions the CPU emulation (internal/emu) compiles instead
// of the inline PTX.
//
//   ld_chunk   16 bytes per lane: kPlain (ld.global), kNC (the read-only
//              data cache: only for memory no writer can change during the
//              launch) or kStrong (relaxed at GPU scope: never a stale L1 copy)
//   st_chunk, st_u32, st_u64   relaxed stores at GPU scope
//   ld_acquire_u32, ld_relaxed_u32   one word
//   fence      fence.acq_rel.gpu: orders this thread's earlier accesses before
//              its later ones at GPU scope (what a latch release or a seqlock
//              read needs; __threadfence would be sequentially consistent and
//              several times dearer)
//   choose     c ? a : b through selp, so that the compiler cannot turn a
//              choice between register-array elements into a run-time index
//              (which would move the array to local memory)
#pragma once
#include <stdint.h>

namespace wk {
namespace mem {

enum Load { kPlain = 0, kNC = 1, kStrong = 2 };

#ifndef WK_HOST_EMULATION

__device__ __forceinline__ unsigned laneid() {
  unsigned lane;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
  return lane;
}

__device__ __forceinline__ void ld_chunk(const void* p, uint32_t (&w)[4], int mode) {
  if (mode == kStrong) {
    asm volatile("ld.relaxed.gpu.global.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
                 : "l"(p)
                 : "memory");
  } else if (mode == kNC) {
    asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
                 : "l"(p));
  } else {
    asm volatile("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
                 : "l"(p)
                 : "memory");
  }
}
__device__ __forceinline__ void ld_chunk(const void* p, uint64_t (&w)[2], int mode) {
  unsigned long long a, b;
  if (mode == kStrong) {
    asm volatile("ld.relaxed.gpu.global.v2.u64 {%0,%1}, [%2];" : "=l"(a), "=l"(b) : "l"(p) : "memory");
  } else if (mode == kNC) {
    asm volatile("ld.global.nc.v2.u64 {%0,%1}, [%2];" : "=l"(a), "=l"(b) : "l"(p));
  } else {
    asm volatile("ld.global.v2.u64 {%0,%1}, [%2];" : "=l"(a), "=l"(b) : "l"(p) : "memory");
  }
  w[0] = a;
  w[1] = b;
}
__device__ __forceinline__ void st_chunk(void* p, const uint32_t (&w)[4]) {
  asm volatile("st.relaxed.gpu.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(w[0]), "r"(w[1]), "r"(w[2]),
               "r"(w[3])
               : "memory");
}
__device__ __forceinline__ void st_chunk(void* p, const uint64_t (&w)[2]) {
  asm volatile("st.relaxed.gpu.global.v2.u64 [%0], {%1,%2};" ::"l"(p), "l"((unsigned long long)w[0]),
               "l"((unsigned long long)w[1])
               : "memory");
}
__device__ __forceinline__ void st_u32(void* p, uint32_t v) {
  asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void st_u64(void* p, uint64_t v) {
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"((unsigned long long)v) : "memory");
}
__device__ __forceinline__ uint32_t ld_acquire_u32(const void* p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint32_t ld_relaxed_u32(const void* p) {
  uint32_t v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint64_t ld_relaxed_u64(const void* p) {
  unsigned long long v;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release_u32(void* p, uint32_t v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void fence() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }

__device__ __forceinline__ uint32_t choose(bool c, uint32_t a, uint32_t b) {
  uint32_t r;
  asm("{\n\t.reg .pred p;\n\tsetp.ne.u32 p, %3, 0;\n\tselp.b32 %0, %1, %2, p;\n\t}"
      : "=r"(r)
      : "r"(a), "r"(b), "r"((uint32_t)c));
  return r;
}
__device__ __forceinline__ uint64_t choose(bool c, uint64_t a, uint64_t b) {
  uint64_t r;
  asm("{\n\t.reg .pred p;\n\tsetp.ne.u32 p, %3, 0;\n\tselp.b64 %0, %1, %2, p;\n\t}"
      : "=l"(r)
      : "l"(a), "l"(b), "r"((uint32_t)c));
  return r;
}

#else  // WK_HOST_EMULATION: relaxed atomics per word (the GPU's 16-byte accesses are not single-copy atomic either)

inline unsigned laneid() { return wk::lane_id(); }
template <typename T, int N>
inline void ld_chunk(const void* p, T (&w)[N], int) {
  for (int i = 0; i < N; ++i) w[i] = __atomic_load_n((const T*)p + i, __ATOMIC_RELAXED);
}
template <typename T, int N>
inline void st_chunk(void* p, const T (&w)[N]) {
  for (int i = 0; i < N; ++i) __atomic_store_n((T*)p + i, w[i], __ATOMIC_RELAXED);
}
inline void st_u32(void* p, uint32_t v) { __atomic_store_n((uint32_t*)p, v, __ATOMIC_RELAXED); }
inline void st_u64(void* p, uint64_t v) { __atomic_store_n((uint64_t*)p, v, __ATOMIC_RELAXED); }
inline uint32_t ld_acquire_u32(const void* p) { return __atomic_load_n((const uint32_t*)p, __ATOMIC_ACQUIRE); }
inline uint32_t ld_relaxed_u32(const void* p) { return __atomic_load_n((const uint32_t*)p, __ATOMIC_RELAXED); }
inline uint64_t ld_relaxed_u64(const void* p) { return __atomic_load_n((const uint64_t*)p, __ATOMIC_RELAXED); }
inline void st_release_u32(void* p, uint32_t v) { __atomic_store_n((uint32_t*)p, v, __ATOMIC_RELEASE); }
inline void fence() { __atomic_thread_fence(__ATOMIC_ACQ_REL); }
inline uint32_t choose(bool c, uint32_t a, uint32_t b) { return c ? a : b; }
inline uint64_t choose(bool c, uint64_t a, uint64_t b) { return c ? a : b; }

#endif  // WK_HOST_EMULATION

}  // namespace mem
}  // namespace wk
