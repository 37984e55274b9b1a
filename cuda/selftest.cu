// selftest.cu: small kernels the cuda package uses for its self-test, for
// 8-byte fills, and for testing kernel launches.
#include <stdint.h>
#include "warp.cuh"

// fill_u64 sets out[i] = v for i < n (grid-stride): Fill of 8-byte elements.
extern "C" __global__ void fill_u64(uint64_t* out, uint64_t v, uint64_t n) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    out[i] = v;
}

// copy_v4 copies n16 16-byte vectors: the bandwidth probe.
extern "C" __global__ void copy_v4(uint4* __restrict__ dst, const uint4* __restrict__ src, uint64_t n16) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n16; i += (uint64_t)gridDim.x * blockDim.x)
    dst[i] = src[i];
}

// saxpy computes y = a*x + y.
extern "C" __global__ void saxpy(float a, const float* __restrict__ x, float* __restrict__ y, uint64_t n) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    y[i] = a * x[i] + y[i];
}

// probe_args writes back one argument of every supported type, so tests can
// check that Go packs each one the way the kernel reads it.
extern "C" __global__ void probe_args(int32_t a, uint32_t b, int64_t c, uint64_t d, float e, double f, bool g,
                                      uint64_t* out) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    out[0] = (uint64_t)(int64_t)a;
    out[1] = b;
    out[2] = (uint64_t)c;
    out[3] = d;
    out[4] = __float_as_uint(e);
    out[5] = __double_as_longlong(f);
    out[6] = g ? 1 : 0;
    out[7] = wk::lane_id();
  }
}

// add_u32 adds v to every element: used by the concurrency test, where many
// goroutines launch it on their own buffers at once.
extern "C" __global__ void add_u32(uint32_t* out, uint32_t v, uint64_t n) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    out[i] += v;
}
