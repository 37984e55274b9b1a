// keys.cu: random distinct keys generated on the device, for the tree
// benchmarks (treebench.DeviceKeys). Key i is mix(i + seed), the murmur3
// (32-bit) or splitmix64 (64-bit) finalizer of internal/devcode/hash.cuh:
// each is a bijection of its key range, as is adding the seed, so n <= 2^32
// (2^64) indexes give n distinct keys spread over the whole range; value i
// is key i ^ salt.
#include <stdint.h>

#include "hash.cuh"

extern "C" __global__ void tb_keys_u32(uint32_t* keys, uint32_t* vals, uint64_t n, uint32_t seed, uint32_t salt) {
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
    const uint32_t k = wk::mix32((uint32_t)i + seed);
    keys[i] = k;
    vals[i] = k ^ salt;
  }
}

extern "C" __global__ void tb_keys_u64(uint64_t* keys, uint64_t* vals, uint64_t n, uint64_t seed, uint64_t salt) {
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
    const uint64_t k = wk::mix64(i + seed);
    keys[i] = k;
    vals[i] = k ^ salt;
  }
}
