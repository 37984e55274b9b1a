// emu.h: a CPU emulation of the CUDA features warpkit's kernels use, so that
// their sources compile with g++ and run without a GPU: in plain C++ tests
// (slabhash/testdata/emu) and, built into a shared library, behind the
// emulated driver of package cuda (cuda.OpenEmulated; internal/emu builds the
// libraries), where a structure's whole CUDA backend runs in `go test`. It
// checks the kernels' logic, not their speed or the GPU memory model:
//
//   - A block runs on one OS thread; its threads are fibers (each lane its
//     own stack) switched only at warp collectives (__ballot_sync,
//     __shfl_sync, ...), at __syncthreads and at __nanosleep. Blocks run on
//     several OS threads at once, so blocks race for real on device memory
//     (atomics are the compiler's), and the warps of a block interleave at
//     every collective.
//   - A warp collective completes when every lane of its mask has reached a
//     collective with that mask; __syncthreads when every thread of the
//     block that has not returned has reached it. Lanes that can never
//     complete one (a lane missing from its mask's collective, lanes of one
//     mask waiting in different collectives, every lane waiting) fail the
//     launch with a message instead of hanging: that catches divergent
//     *_sync calls and lost wake-ups.
//   - __shared__ variables are thread_local: one block runs on a thread at a
//     time, so each block has its own (not zeroed, as on a GPU).
//   - A lane that spins without a collective or __nanosleep is never switched
//     out: every wait in a kernel must back off with __nanosleep (warpkit's
//     do) or it hangs here.
//
// Only what the kernels use is here: 1-D grids and blocks, static shared
// memory, masks that are aligned groups of 1 to 32 lanes.
#pragma once
#define WK_HOST_EMULATION 1
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#define __device__
#define __global__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __shared__ static thread_local
#define __restrict__ __restrict

struct emu_dim3 {
  unsigned x, y, z;
};

// CUDA's vector types (the ones warpkit's kernels use), with their alignment.
struct alignas(8) uint2 {
  unsigned x, y;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
struct alignas(8) int2 {
  int x, y;
};
struct alignas(16) int4 {
  int x, y, z, w;
};
struct alignas(16) ulonglong2 {
  unsigned long long x, y;
};
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }

namespace emu {

// emu_switch_stack saves the callee-saved registers on the current stack,
// stores its pointer in *save, and resumes the stack at next (x86-64 System V).
extern "C" void emu_switch_stack(void** save, void* next);
asm(R"(
.text
.globl emu_switch_stack
.hidden emu_switch_stack
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

enum class Coll { None, Ballot, Any, All, Shfl, ShflXor, ShflUp, ShflDown, Sync, BlockSync, Yield };

constexpr size_t kStackBytes = 128 << 10;

struct Lane {
  void* sp = nullptr;  // saved stack pointer while switched out
  bool finished = false;
  Coll coll = Coll::None;  // the collective this lane waits in
  unsigned mask = 0;
  uint64_t in = 0;  // its contribution
  int arg = 0, width = 32;
  uint64_t out = 0;  // the result, once complete
  unsigned sleep_ns = 0;  // __nanosleep's argument while coll == Yield
};

// Lane stacks outlive launches: a launch takes its blocks' stacks from
// stack_pool and gives them back, so that a test of thousands of small
// launches does not allocate (and fault in) fresh stacks for every one.
inline std::mutex stack_mu;
inline std::vector<std::unique_ptr<char[]>> stack_pool;

// Block is one block's threads on the OS thread that runs it.
struct Block {
  Block() = default;
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;
  ~Block() {
    std::lock_guard<std::mutex> g(stack_mu);
    for (auto& s : stacks) stack_pool.push_back(std::move(s));
  }
  // take_stacks makes sure there are n stacks, from the pool where it can.
  void take_stacks(unsigned n) {
    if (stacks.size() >= n) return;
    {
      std::lock_guard<std::mutex> g(stack_mu);
      while (stacks.size() < n && !stack_pool.empty()) {
        stacks.push_back(std::move(stack_pool.back()));
        stack_pool.pop_back();
      }
    }
    while (stacks.size() < n) stacks.emplace_back(new char[kStackBytes]);
  }
  std::vector<Lane> lanes;
  std::vector<std::unique_ptr<char[]>> stacks;  // this block's, back to stack_pool when done
  void* sched = nullptr;
  int cur = -1;
  unsigned threads = 0;
  const std::function<void()>* body = nullptr;
  std::string error;  // set when the launch must fail
  const std::atomic<bool>* aborted = nullptr;  // another block of the launch failed
};

inline thread_local Block* tb = nullptr;
inline thread_local emu_dim3 block_idx;
inline thread_local emu_dim3 grid_dim, block_dim;

// Failure unwinds nothing: the failing lane switches back to the scheduler
// for good and the launch reports the message.
[[noreturn]] inline void fail(const std::string& what) {
  Block* b = tb;
  if (b == nullptr || b->cur < 0) {
    fprintf(stderr, "emu: %s\n", what.c_str());
    abort();
  }
  if (b->error.empty()) b->error = what;
  Lane& l = b->lanes[b->cur];
  l.finished = true;
  emu_switch_stack(&l.sp, b->sched);
  abort();  // never resumed
}

// collective blocks the current lane until every lane of mask (in its warp)
// has arrived at a collective with the same mask, and returns its result.
inline uint64_t collective(Coll c, unsigned mask, uint64_t in, int arg = 0, int width = 32) {
  Block* b = tb;
  Lane& l = b->lanes[b->cur];
  if (c != Coll::BlockSync && !((mask >> (b->cur & 31)) & 1)) fail("a lane calls a collective whose mask leaves it out");
  l.coll = c;
  l.mask = mask;
  l.in = in;
  l.arg = arg;
  l.width = width;
  emu_switch_stack(&l.sp, b->sched);
  return l.out;
}

// sched_fail records a failure found by the scheduler (no lane is running).
inline bool sched_fail(Block* b, const char* what) {
  if (b->error.empty()) b->error = what;
  return false;
}

// complete_warp finishes the collective of mask in the warp at base if all
// its lanes are in it.
inline bool complete_warp(Block* b, unsigned base, unsigned mask) {
  Coll c = Coll::None;
  for (int i = 0; i < 32; ++i) {
    if (!((mask >> i) & 1)) continue;
    if (base + i >= b->threads) return sched_fail(b, "a collective's mask names a lane past the block");
    Lane& l = b->lanes[base + i];
    if (l.finished) return sched_fail(b, "a collective waits for a lane that has returned");
    if (l.coll == Coll::None || l.coll == Coll::Yield || l.mask != mask) return false;
    if (l.coll == Coll::BlockSync) return false;
    if (c == Coll::None) c = l.coll;
    if (l.coll != c) return sched_fail(b, "lanes of one mask wait in different collectives");
  }
  uint32_t bits = 0;
  for (int i = 0; i < 32; ++i)
    if (((mask >> i) & 1) && b->lanes[base + i].in) bits |= 1u << i;
  for (int i = 0; i < 32; ++i) {
    if (!((mask >> i) & 1)) continue;
    Lane& l = b->lanes[base + i];
    const int seg = i & ~(l.width - 1);  // the lane's segment of width lanes
    int src = -1;
    switch (c) {
      case Coll::Ballot: l.out = bits; break;
      case Coll::Any: l.out = bits != 0; break;
      case Coll::All: l.out = bits == mask; break;
      case Coll::Shfl: src = seg + (l.arg & (l.width - 1)); break;
      case Coll::ShflXor: src = i ^ l.arg; break;
      case Coll::ShflUp: src = (i - l.arg >= seg) ? i - l.arg : i; break;
      case Coll::ShflDown: src = (i + l.arg < seg + l.width) ? i + l.arg : i; break;
      default: l.out = 0;
    }
    if (src >= 0) {
      if (src > 31 || !((mask >> src) & 1)) return sched_fail(b, "shuffle from a lane outside the mask");
      l.out = b->lanes[base + src].in;
    }
  }
  for (int i = 0; i < 32; ++i)
    if ((mask >> i) & 1) b->lanes[base + i].coll = Coll::None;
  return true;
}

// complete_block releases a __syncthreads that every live thread reached.
inline bool complete_block(Block* b) {
  bool any = false;
  for (unsigned i = 0; i < b->threads; ++i) {
    const Lane& l = b->lanes[i];
    if (l.finished) continue;
    if (l.coll != Coll::BlockSync) return false;
    any = true;
  }
  if (!any) return false;
  for (unsigned i = 0; i < b->threads; ++i)
    if (!b->lanes[i].finished) b->lanes[i].coll = Coll::None;
  return true;
}

[[noreturn]] inline void lane_entry() {
  Block* b = tb;
  (*b->body)();
  b->lanes[b->cur].finished = true;
  emu_switch_stack(&b->lanes[b->cur].sp, b->sched);
  abort();  // a finished lane is never resumed
}

// run_block runs body on threads fibers until all return; it returns false
// (with b.error set) when the block failed.
inline bool run_block(Block& b, unsigned threads, const std::function<void()>& body) {
  b.threads = threads;
  b.body = &body;
  b.error.clear();
  b.lanes.assign(threads, Lane{});
  b.take_stacks(threads);
  for (unsigned i = 0; i < threads; ++i) {
    // A fresh stack: six zero registers for the pops, then lane_entry as
    // the return address, so that it starts as if called (rsp = 8 mod 16).
    uintptr_t top = ((uintptr_t)b.stacks[i].get() + kStackBytes) & ~(uintptr_t)15;
    void** sp = (void**)(top - 64);
    for (int r = 0; r < 6; ++r) sp[r] = nullptr;
    sp[6] = (void*)&lane_entry;
    b.lanes[i].sp = sp;
  }
  tb = &b;
  for (;;) {
    // Another block failed: this one ends too, as a GPU aborts the whole
    // grid (its lanes may be waiting for something the failed block held).
    if (b.aborted != nullptr && b.aborted->load(std::memory_order_relaxed)) {
      b.error = "another block of the launch failed";
      tb = nullptr;
      return false;
    }
    bool progress = false, alive = false, ran = false;
    unsigned sleep = ~0u;  // when only sleeping lanes could run: the shortest sleep asked
    for (unsigned i = 0; i < threads; ++i) {
      const Lane& l = b.lanes[i];
      if (l.finished) continue;
      if (l.coll == Coll::None) ran = true;
      if (l.coll == Coll::Yield) sleep = std::min(sleep, l.sleep_ns);
    }
    // Every runnable lane sleeps (it waits for another block, say): sleep the
    // thread, so that retry bounds count time rather than spins, as on a GPU.
    if (!ran && sleep != ~0u) std::this_thread::sleep_for(std::chrono::nanoseconds(std::max(sleep, 1000u)));
    for (unsigned i = 0; i < threads; ++i) {
      Lane& l = b.lanes[i];
      if (l.finished) continue;
      alive = true;
      if (l.coll == Coll::Yield) l.coll = Coll::None;
      if (l.coll != Coll::None) continue;
      b.cur = (int)i;
      emu_switch_stack(&b.sched, l.sp);
      b.cur = -1;
      progress = true;
      if (!b.error.empty()) {
        tb = nullptr;
        return false;
      }
    }
    if (!alive) break;
    // Complete every collective whose lanes have all arrived: each warp
    // collective once, by the lowest lane of its mask.
    for (unsigned i = 0; i < threads; ++i) {
      Lane& l = b.lanes[i];
      if (l.finished || l.coll == Coll::None || l.coll == Coll::Yield || l.coll == Coll::BlockSync) continue;
      if ((l.mask & -l.mask) == (1u << (i & 31)) && complete_warp(&b, i & ~31u, l.mask)) progress = true;
      if (!b.error.empty()) {
        tb = nullptr;
        return false;
      }
    }
    if (complete_block(&b)) progress = true;
    if (!progress) {
      b.error = "deadlock: every live lane waits in a collective that cannot complete";
      tb = nullptr;
      return false;
    }
  }
  tb = nullptr;
  return true;
}

// launch runs kernel on a 1-D grid: each block on one OS thread, at most
// `parallel` blocks at a time. It returns "" or the first failure.
inline std::string try_launch(unsigned grid, unsigned block, const std::function<void()>& kernel,
                              unsigned parallel = 8) {
  if (block == 0 || block % 32 || block > 1024) return "block size must be a positive multiple of 32 up to 1024";
  if (grid == 0) return "empty grid";
  std::atomic<unsigned> next{0};
  std::atomic<bool> failed{false};
  std::string first;
  std::atomic_flag first_set = ATOMIC_FLAG_INIT;
  auto worker = [&] {
    Block b;
    b.aborted = &failed;
    grid_dim = {grid, 1, 1};
    block_dim = {block, 1, 1};
    for (unsigned bi; !failed.load() && (bi = next.fetch_add(1)) < grid;) {
      block_idx = {bi, 0, 0};
      if (!run_block(b, block, kernel)) {
        if (!first_set.test_and_set()) first = "block " + std::to_string(bi) + ": " + b.error;
        failed.store(true);
      }
    }
  };
  const unsigned n = std::max(1u, std::min(parallel, grid));
  std::vector<std::thread> ts;
  for (unsigned t = 1; t < n; ++t) ts.emplace_back(worker);
  worker();
  for (auto& t : ts) t.join();
  return first;
}

// launch is try_launch for C++ tests: a failure aborts with its message.
inline void launch(unsigned grid, unsigned block, const std::function<void()>& kernel, unsigned parallel = 8) {
  std::string err = try_launch(grid, block, kernel, parallel);
  if (!err.empty()) {
    fprintf(stderr, "emu: %s\n", err.c_str());
    abort();
  }
}

inline emu_dim3 thread_idx() { return {(unsigned)tb->cur, 0, 0}; }
inline unsigned lane_id() { return (unsigned)tb->cur & 31u; }

// call_kernel calls an extern "C" kernel whose parameters are all integers
// or pointers (each passed zero-extended in a 64-bit slot: the System V ABI
// passes them in integer registers and 8-byte stack slots alike).
template <size_t... I>
inline void call_n(void* fn, const uint64_t* a, std::index_sequence<I...>) {
  using F = void (*)(decltype((void)I, uint64_t{})...);
  ((F)fn)(a[I]...);
}
template <size_t N>
inline void call_fixed(void* fn, const uint64_t* a) {
  call_n(fn, a, std::make_index_sequence<N>{});
}
inline bool call_kernel(void* fn, const uint64_t* a, int n) {
  switch (n) {
#define EMU_CASE(N) \
  case N: call_fixed<N>(fn, a); return true;
    EMU_CASE(0) EMU_CASE(1) EMU_CASE(2) EMU_CASE(3) EMU_CASE(4) EMU_CASE(5) EMU_CASE(6) EMU_CASE(7) EMU_CASE(8)
    EMU_CASE(9) EMU_CASE(10) EMU_CASE(11) EMU_CASE(12) EMU_CASE(13) EMU_CASE(14) EMU_CASE(15) EMU_CASE(16)
    EMU_CASE(17) EMU_CASE(18) EMU_CASE(19) EMU_CASE(20) EMU_CASE(21) EMU_CASE(22) EMU_CASE(23) EMU_CASE(24)
#undef EMU_CASE
  }
  return false;
}

}  // namespace emu

// emu_launch is the entry point of the emulated driver (cuda.OpenEmulated):
// it runs kernel fn (nargs integer or pointer arguments) on grid blocks of
// block threads and returns 0, or 1 with the failure in err.
extern "C" __attribute__((visibility("default"), weak)) int emu_launch(void* fn, uint32_t grid, uint32_t block,
                                                                      const uint64_t* args, int nargs,
                                                                      uint32_t parallel, char* err, int errlen) {
  std::vector<uint64_t> a(args, args + nargs);
  if (nargs > 24) {
    snprintf(err, errlen, "a kernel of %d parameters (the emulation calls at most 24)", nargs);
    return 1;
  }
  std::string msg = emu::try_launch(grid, block, [&] { emu::call_kernel(fn, a.data(), nargs); }, parallel);
  if (msg.empty()) return 0;
  snprintf(err, errlen, "%s", msg.c_str());
  return 1;
}

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
// No __activemask: which lanes are converged is the hardware's choice, and
// a lane here runs alone until its next collective; code that needs it does
// not build for the emulation rather than pass on a guess.
inline void __syncwarp(unsigned mask = 0xffffffffu) { emu::collective(emu::Coll::Sync, mask, 0); }
inline void __syncthreads() { emu::collective(emu::Coll::BlockSync, 0, 0); }
template <typename T>
inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  return emu_from<T>(emu::collective(emu::Coll::Shfl, mask, emu_bits(v), src, width));
}
template <typename T>
inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  return emu_from<T>(emu::collective(emu::Coll::ShflXor, mask, emu_bits(v), lane_mask, width));
}
template <typename T>
inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return emu_from<T>(emu::collective(emu::Coll::ShflUp, mask, emu_bits(v), (int)delta, width));
}
template <typename T>
inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return emu_from<T>(emu::collective(emu::Coll::ShflDown, mask, emu_bits(v), (int)delta, width));
}
inline void __nanosleep(unsigned ns) {
  emu::Block* b = emu::tb;
  b->lanes[b->cur].coll = emu::Coll::Yield;
  b->lanes[b->cur].sleep_ns = ns;
  emu::emu_switch_stack(&b->lanes[b->cur].sp, b->sched);
}
[[noreturn]] inline void __trap() { emu::fail("__trap"); }

// Arithmetic intrinsics.
inline int __ffs(unsigned x) { return x ? __builtin_ctz(x) + 1 : 0; }
inline int __ffsll(unsigned long long x) { return x ? __builtin_ctzll(x) + 1 : 0; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(unsigned x) { return x ? __builtin_clz(x) : 32; }
inline int __clzll(unsigned long long x) { return x ? __builtin_clzll(x) : 64; }
inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((uint64_t)a * b) >> 32); }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
template <typename A, typename B>
inline std::common_type_t<A, B> min(A a, B b) {
  using C = std::common_type_t<A, B>;
  return (C)a < (C)b ? (C)a : (C)b;
}
template <typename A, typename B>
inline std::common_type_t<A, B> max(A a, B b) {
  using C = std::common_type_t<A, B>;
  return (C)a < (C)b ? (C)b : (C)a;
}
template <typename T>
inline T __ldg(const T* p) {
  return __atomic_load_n(p, __ATOMIC_RELAXED);
}

// Atomics (device memory is host memory here).
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
template <typename T>
inline T emu_cas(T* p, T cmp, T val) {
  __atomic_compare_exchange_n(p, &cmp, val, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return cmp;
}
inline int atomicCAS(int* p, int c, int v) { return emu_cas(p, c, v); }
inline unsigned atomicCAS(unsigned* p, unsigned c, unsigned v) { return emu_cas(p, c, v); }
inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long c, unsigned long long v) {
  return emu_cas(p, c, v);
}
inline unsigned atomicExch(unsigned* p, unsigned v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
inline unsigned long long atomicExch(unsigned long long* p, unsigned long long v) {
  return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST);
}
inline int atomicAdd(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline unsigned atomicAdd(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
inline unsigned atomicSub(unsigned* p, unsigned v) { return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST); }
inline unsigned atomicOr(unsigned* p, unsigned v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
inline unsigned long long atomicOr(unsigned long long* p, unsigned long long v) {
  return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST);
}
inline unsigned atomicAnd(unsigned* p, unsigned v) { return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST); }
inline unsigned long long atomicAnd(unsigned long long* p, unsigned long long v) {
  return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST);
}
template <typename T, typename F>
inline T emu_rmw(T* p, F f) {
  T old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(p, &old, f(old), false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
  }
  return old;
}
inline unsigned atomicMax(unsigned* p, unsigned v) { return emu_rmw(p, [v](unsigned o) { return std::max(o, v); }); }
inline unsigned long long atomicMax(unsigned long long* p, unsigned long long v) {
  return emu_rmw(p, [v](unsigned long long o) { return std::max(o, v); });
}
inline unsigned atomicMin(unsigned* p, unsigned v) { return emu_rmw(p, [v](unsigned o) { return std::min(o, v); }); }
inline unsigned long long atomicMin(unsigned long long* p, unsigned long long v) {
  return emu_rmw(p, [v](unsigned long long o) { return std::min(o, v); });
}

// The memory primitives of warpkit's device code (internal/devcode/mem.cuh
// and the slab hash engine's): relaxed atomics here.
namespace wk {
inline unsigned lane_id() { return emu::lane_id(); }
namespace slab {
inline unsigned lane() { return emu::lane_id(); }
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
