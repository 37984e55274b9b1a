// hash.cuh: hash functions for 32- and 64-bit keys, usable on host and device.
//
// universal32 is the family h(k) = ((a*k + b) mod p) mod B the slab hash paper
// uses (p = 4294967291, the largest 32-bit prime); mix32/mix64 are the murmur3
// and splitmix64 finalizers, full-avalanche, used where keys may be sequential
// and a structure needs uniform spread over all bits.
#pragma once
#include <stdint.h>

#ifdef __CUDACC__
#define WK_HD __host__ __device__ __forceinline__
#else
#define WK_HD inline
#endif

namespace wk {

constexpr uint32_t kPrime32 = 4294967291u;

WK_HD uint32_t universal32(uint32_t k, uint32_t a, uint32_t b, uint32_t buckets) {
  return (uint32_t)((((uint64_t)a * k) + b) % kPrime32) % buckets;
}

WK_HD uint32_t mix32(uint32_t h) {
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

WK_HD uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// hash_key hashes a 32- or 64-bit key with a seed to 32 bits.
WK_HD uint32_t hash_key(uint32_t k, uint32_t seed) { return mix32(k ^ seed); }
WK_HD uint32_t hash_key(uint64_t k, uint32_t seed) { return (uint32_t)(mix64(k ^ ((uint64_t)seed << 32 | seed)) >> 32); }

}  // namespace wk
