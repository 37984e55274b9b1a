// probe.cu: kernels that exercise the emulation (emu_test.go).
#include <stdint.h>

// probe_iota writes out[i] = i * mul, grid-stride.
extern "C" __global__ void probe_iota(uint32_t* out, uint64_t n, uint32_t mul) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    out[i] = (uint32_t)i * mul;
}

// probe_warp writes, per thread, the ballot of odd lanes, the value shuffled
// from lane 31 - lane, and an 8-lane tile reduction.
extern "C" __global__ void probe_warp(uint32_t* out) {
  unsigned tid = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x & 31;
  unsigned b = __ballot_sync(0xffffffffu, lane & 1);
  unsigned s = __shfl_sync(0xffffffffu, lane * 10, 31 - lane);
  unsigned sum = lane;
  for (int d = 4; d > 0; d /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, d, 8);
  out[3 * tid] = b;
  out[3 * tid + 1] = s;
  out[3 * tid + 2] = sum;
}

// probe_block sums each block's thread indices through shared memory.
extern "C" __global__ void probe_block(unsigned long long* out) {
  __shared__ unsigned long long total;
  if (threadIdx.x == 0) total = 0;
  __syncthreads();
  atomicAdd(&total, (unsigned long long)threadIdx.x);
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = total;
}

// probe_diverge calls a ballot with the full mask from half the warp: a
// kernel bug the emulation must report rather than hang on.
extern "C" __global__ void probe_diverge(uint32_t* out) {
  if ((threadIdx.x & 31) < 16) out[threadIdx.x] = __ballot_sync(0xffffffffu, 1);
}

// probe_spin: lane 0 of each warp waits (with backoff) for a flag the last
// lane of the block sets: warps of a block must interleave.
extern "C" __global__ void probe_spin(uint32_t* flag, uint32_t* out) {
  if (threadIdx.x == blockDim.x - 1) atomicExch(flag + blockIdx.x, 1u);
  if ((threadIdx.x & 31) == 0) {
    while (atomicAdd(flag + blockIdx.x, 0u) == 0) __nanosleep(100);
    out[blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32] = 1;
  }
}

// probe_trap_wait: block 0 traps; the other blocks wait (with backoff) for
// a flag block 0 never sets. The launch must fail, not hang: a GPU aborts
// the whole grid.
extern "C" __global__ void probe_trap_wait(uint32_t* flag) {
  if (blockIdx.x == 0) {
    if (threadIdx.x == 0) __trap();
    return;
  }
  while (atomicAdd(flag, 0u) == 0) __nanosleep(1000);
}

// probe_float takes a float, which the emulation cannot pass.
extern "C" __global__ void probe_float(float x, float* out) { out[threadIdx.x] = x; }
