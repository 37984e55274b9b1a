// emu.h: a CPU emulation of the CUDA features the slab hash engine uses, so
// that its kernels (slabhash.cuh, slaballoc.cuh) compile with g++ and run in
// a plain test (emu_test.go). It checks the engine's logic, not its speed or
// the GPU memory model:
//
//   - Each warp runs on its own OS thread, so warps race for real on the
//     slabs and the allocator's bitmaps (atomics are the compiler's).
//   - The 32 lanes of a warp are fibers switched only at warp
//     collectives (__ballot_sync, __shfl_sync, ...) and __nanosleep. A
//     collective completes when every lane of its mask has reached a
//     collective with that mask; a warp whose lanes can never complete one
//     (a lane missing from its mask's collective, or waiting on a different
//     one) aborts the test with a message, which catches divergent *_sync
//     calls.
//
// Only the features the engine uses are here: 1-D grids, no shared memory,
// masks that are aligned groups of 4, 8, 16 or 32 lanes.
#pragma once
#define WK_HOST_EMULATION 1
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#define __device__
#define __global__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)

struct emu_dim3 {
  unsigned x, y, z;
};

namespace emu {

// switch_stack saves the callee-saved registers on the current stack, stores
// its pointer in *save, and resumes the stack at next (x86-64 System V).
extern "C" void emu_switch_stack(void** save, void* next);
asm(R"(
.text
.globl emu_switch_stack
.type emu_switch_stack,@function
emu_switch_stack:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
)");

enum class Coll { None, Ballot, Any, All, Shfl, ShflXor, Sync, Yield };

constexpr size_t kStackBytes = 128 << 10;

struct Lane {
  void* sp = nullptr;  // saved stack pointer while switched out
  std::unique_ptr<char[]> stack;  // not zeroed: a fresh warp's lanes only need their top
  bool finished = false;
  Coll coll = Coll::None;  // the collective this lane waits in
  unsigned mask = 0;
  uint64_t in = 0;  // its contribution
  int arg = 0, width = 32;
  uint64_t out = 0;  // the result, once complete
  emu_dim3 tid;
};

struct Warp {
  Lane lanes[32];
  void* sched = nullptr;
  int cur = -1;
  std::function<void()> body;
};

inline thread_local Warp* tw = nullptr;
inline emu_dim3 grid_dim, block_dim;
inline thread_local emu_dim3 block_idx;

inline void fail(const char* what) {
  fprintf(stderr, "emu: %s\n", what);
  abort();
}

// collective blocks the current lane until every lane of mask has arrived
// at a collective with the same mask, and returns its result.
inline uint64_t collective(Coll c, unsigned mask, uint64_t in, int arg = 0, int width = 32) {
  Warp* w = tw;
  Lane& l = w->lanes[w->cur];
  if (!((mask >> w->cur) & 1)) fail("a lane calls a collective whose mask leaves it out");
  l.coll = c;
  l.mask = mask;
  l.in = in;
  l.arg = arg;
  l.width = width;
  emu_switch_stack(&l.sp, w->sched);
  return l.out;
}

// complete finishes the collective of mask if all its lanes are in it.
inline bool complete(Warp* w, unsigned mask) {
  Coll c = Coll::None;
  for (int i = 0; i < 32; ++i) {
    if (!((mask >> i) & 1)) continue;
    Lane& l = w->lanes[i];
    if (l.finished) fail("a collective waits for a lane that has returned");
    if (l.coll == Coll::None || l.coll == Coll::Yield || l.mask != mask) return false;
    if (c == Coll::None) c = l.coll;
    if (l.coll != c) fail("lanes of one mask wait in different collectives");
  }
  uint32_t bits = 0;
  for (int i = 0; i < 32; ++i)
    if (((mask >> i) & 1) && w->lanes[i].in) bits |= 1u << i;
  for (int i = 0; i < 32; ++i) {
    if (!((mask >> i) & 1)) continue;
    Lane& l = w->lanes[i];
    switch (c) {
      case Coll::Ballot: l.out = bits; break;
      case Coll::Any: l.out = bits != 0; break;
      case Coll::All: l.out = bits == (mask & 0xffffffffu); break;
      case Coll::Shfl: {
        const int base = i & ~(l.width - 1);
        const int src = base + (l.arg & (l.width - 1));
        if (!((mask >> src) & 1)) fail("shuffle from a lane outside the mask");
        l.out = w->lanes[src].in;
        break;
      }
      case Coll::ShflXor: {
        const int src = i ^ l.arg;
        if (!((mask >> src) & 1)) fail("xor shuffle from a lane outside the mask");
        l.out = w->lanes[src].in;
        break;
      }
      default: l.out = 0;
    }
  }
  for (int i = 0; i < 32; ++i)
    if ((mask >> i) & 1) w->lanes[i].coll = Coll::None;
  return true;
}

[[noreturn]] inline void lane_entry() {
  Warp* w = tw;
  w->body();
  w->lanes[w->cur].finished = true;
  emu_switch_stack(&w->lanes[w->cur].sp, w->sched);
  abort();  // a finished lane is never resumed
}

// run_warp runs body on 32 lanes (lane i gets tid {base + i}) until all return.
inline void run_warp(unsigned base, std::function<void()> body) {
  Warp* w = new Warp;
  tw = w;
  w->body = std::move(body);
  for (int i = 0; i < 32; ++i) {
    Lane& l = w->lanes[i];
    if (!l.stack) l.stack.reset(new char[kStackBytes]);
    l.tid = {base + i, 0, 0};
    // A fresh stack: six zero registers for the pops, then lane_entry as
    // the return address, so that it starts as if called (rsp = 8 mod 16).
    uintptr_t top = ((uintptr_t)l.stack.get() + kStackBytes) & ~(uintptr_t)15;
    void** sp = (void**)(top - 64);
    for (int r = 0; r < 6; ++r) sp[r] = nullptr;
    sp[6] = (void*)&lane_entry;
    l.sp = sp;
  }
  for (;;) {
    bool progress = false, alive = false;
    for (int i = 0; i < 32; ++i) {
      Lane& l = w->lanes[i];
      if (l.finished) continue;
      alive = true;
      if (l.coll == Coll::Yield) l.coll = Coll::None;
      if (l.coll != Coll::None) continue;
      w->cur = i;
      emu_switch_stack(&w->sched, l.sp);
      progress = true;
    }
    if (!alive) break;
    // Complete every collective whose lanes have all arrived.
    for (int i = 0; i < 32; ++i) {
      Lane& l = w->lanes[i];
      if (!l.finished && l.coll != Coll::None && l.coll != Coll::Yield && (l.mask & -l.mask) == (1u << i)) {
        if (complete(w, l.mask)) progress = true;
      }
    }
    if (!progress) fail("deadlock: lanes wait in collectives that cannot complete");
  }
  delete w;
  tw = nullptr;
}

// launch runs kernel on a 1-D grid: every warp on its own thread, at most
// `parallel` at a time.
inline void launch(unsigned grid, unsigned block, const std::function<void()>& kernel, unsigned parallel = 8) {
  if (block % 32) fail("block size must be a multiple of 32");
  grid_dim = {grid, 1, 1};
  block_dim = {block, 1, 1};
  const unsigned warps = grid * block / 32;
  std::atomic<unsigned> next{0};
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < parallel && t < warps; ++t) {
    ts.emplace_back([&] {
      for (unsigned wi; (wi = next.fetch_add(1)) < warps;) {
        block_idx = {wi * 32 / block, 0, 0};
        run_warp((wi * 32) % block, kernel);
      }
    });
  }
  for (auto& t : ts) t.join();
}

inline emu_dim3 thread_idx() { return tw->lanes[tw->cur].tid; }

}  // namespace emu

#define threadIdx (emu::thread_idx())
#define blockIdx (emu::block_idx)
#define blockDim (emu::block_dim)
#define gridDim (emu::grid_dim)

// Warp intrinsics.
template <typename T>
inline uint64_t emu_bits(T v) {
  uint64_t b = 0;
  memcpy(&b, &v, sizeof(T));
  return b;
}
template <typename T>
inline T emu_from(uint64_t b) {
  T v;
  memcpy(&v, &b, sizeof(T));
  return v;
}
inline unsigned __ballot_sync(unsigned mask, bool p) { return (unsigned)emu::collective(emu::Coll::Ballot, mask, p); }
inline bool __any_sync(unsigned mask, bool p) { return emu::collective(emu::Coll::Any, mask, p) != 0; }
inline bool __all_sync(unsigned mask, bool p) { return emu::collective(emu::Coll::All, mask, p) != 0; }
inline void __syncwarp(unsigned mask = 0xffffffffu) { emu::collective(emu::Coll::Sync, mask, 0); }
template <typename T>
inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  return emu_from<T>(emu::collective(emu::Coll::Shfl, mask, emu_bits(v), src, width));
}
template <typename T>
inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  return emu_from<T>(emu::collective(emu::Coll::ShflXor, mask, emu_bits(v), lane_mask, width));
}
inline void __nanosleep(unsigned) {
  emu::Warp* w = emu::tw;
  w->lanes[w->cur].coll = emu::Coll::Yield;
  emu::emu_switch_stack(&w->lanes[w->cur].sp, w->sched);
}

// Arithmetic intrinsics.
inline int __ffs(unsigned x) { return x ? __builtin_ctz(x) + 1 : 0; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((uint64_t)a * b) >> 32); }
template <typename T>
inline T __ldg(const T* p) {
  return __atomic_load_n(p, __ATOMIC_RELAXED);
}

// Atomics (device memory is host memory here).
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
template <typename T>
inline T emu_cas(T* p, T cmp, T val) {
  __atomic_compare_exchange_n(p, &cmp, val, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return cmp;
}
inline unsigned atomicCAS(unsigned* p, unsigned c, unsigned v) { return emu_cas(p, c, v); }
inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long c, unsigned long long v) {
  return emu_cas(p, c, v);
}
inline unsigned atomicExch(unsigned* p, unsigned v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
inline unsigned long long atomicExch(unsigned long long* p, unsigned long long v) {
  return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST);
}
inline unsigned atomicAdd(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
inline unsigned atomicOr(unsigned* p, unsigned v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
inline unsigned atomicAnd(unsigned* p, unsigned v) { return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST); }

// The engine's relaxed loads and stores and the lane id.
namespace wk {
namespace slab {
inline unsigned lane() { return emu::tw->cur; }
}  // namespace slab
namespace sh {
inline uint32_t ldv32(const void* p) { return __atomic_load_n((const uint32_t*)p, __ATOMIC_RELAXED); }
inline uint64_t ldv64(const void* p) { return __atomic_load_n((const uint64_t*)p, __ATOMIC_RELAXED); }
inline void ldv128(const void* p, uint64_t& a, uint64_t& b) {
  a = ldv64(p);
  b = ldv64((const char*)p + 8);
}
inline void stv32(void* p, uint32_t v) { __atomic_store_n((uint32_t*)p, v, __ATOMIC_RELAXED); }
inline void stv64(void* p, uint64_t v) { __atomic_store_n((uint64_t*)p, v, __ATOMIC_RELAXED); }
inline void stv128(void* p, uint64_t a, uint64_t b) {
  stv64(p, a);
  stv64((char*)p + 8, b);
}
}  // namespace sh
}  // namespace wk
