// oahash.cu: the benchmark baseline of the slab hash, a static
// open-addressing table for 32-bit keys and values: one 8-byte slot per pair
// (key low, value high; all ones = empty, all ones minus one = deleted),
// linear probing, one thread per operation, the same bucket hash as the slab
// hash.
#include <stdint.h>
#include "hash.cuh"
#include "status.cuh"

__device__ __forceinline__ uint32_t home(uint32_t k, uint32_t seed, uint32_t capacity) {
  return __umulhi(wk::hash_key(k, seed), capacity);
}

// oa_insert inserts or replaces (keys[i], vals[i]).
extern "C" __global__ void oa_insert(unsigned long long* slots, uint32_t capacity, uint32_t seed, const uint32_t* keys,
                                     const uint32_t* vals, uint64_t n, uint32_t* status) {
  uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
  if (i >= n) return;
  const uint32_t k = keys[i];
  const unsigned long long pair = (unsigned long long)vals[i] << 32 | k;
  uint32_t p = home(k, seed, capacity);
  for (uint32_t probe = 0; probe < capacity; ++probe) {
    unsigned long long cur = slots[p];
    for (;;) {
      uint32_t ck = (uint32_t)cur;
      if (ck != 0xffffffffu && ck != k) break;  // another key: probe on
      unsigned long long old = atomicCAS(slots + p, cur, pair);
      if (old == cur) return;
      cur = old;
    }
    if (++p == capacity) p = 0;
  }
  wk::report(status, wk::kStatusRetryLimit);  // the table is full
}

// oa_find stores the value of keys[i] in vals[i], or all ones if absent.
extern "C" __global__ void oa_find(const unsigned long long* __restrict__ slots, uint32_t capacity, uint32_t seed,
                                   const uint32_t* __restrict__ keys, uint32_t* __restrict__ vals, uint64_t n) {
  uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
  if (i >= n) return;
  const uint32_t k = keys[i];
  uint32_t p = home(k, seed, capacity);
  uint32_t v = 0xffffffffu;
  for (uint32_t probe = 0; probe < capacity; ++probe) {
    unsigned long long cur = __ldg(slots + p);
    uint32_t ck = (uint32_t)cur;
    if (ck == k) {
      v = (uint32_t)(cur >> 32);
      break;
    }
    if (ck == 0xffffffffu) break;
    if (++p == capacity) p = 0;
  }
  vals[i] = v;
}

constexpr uint32_t kEmpty = 0xffffffffu, kTomb = 0xfffffffeu;
enum : uint8_t { kFind = 0, kInsert = 1, kDelete = 2 };
// Results, as the slab hash reports them.
enum : uint8_t { kNotFound = 0, kFound = 1, kInserted = 2, kPresent = 3, kRemoved = 4 };

// oa_apply runs a mixed batch, one thread per element: ops[i] is a find
// (vals[i] receives the value), an insert-or-replace of (keys[i], vals[i]),
// or a delete; results[i] gets the outcome. A delete leaves a tombstone that
// finds and inserts probe past (as the slab hash's tombstones, never reused
// before a rebuild). The slots are read with volatile loads (other threads
// write them during the kernel).
extern "C" __global__ void oa_apply(unsigned long long* slots, uint32_t capacity, uint32_t seed, const uint8_t* ops,
                                    const uint32_t* keys, uint32_t* vals, uint8_t* results, uint64_t n,
                                    uint32_t* status) {
  uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
  if (i >= n) return;
  const uint32_t k = keys[i];
  const uint8_t op = ops[i];
  const uint32_t v = op == kInsert ? vals[i] : 0;
  const unsigned long long pair = (unsigned long long)v << 32 | k;
  uint32_t p = home(k, seed, capacity);
  for (uint32_t probe = 0; probe < capacity; ++probe) {
    unsigned long long cur = *(volatile unsigned long long*)(slots + p);
    for (;;) {
      const uint32_t ck = (uint32_t)cur;
      if (ck == k) {
        if (op == kFind) {
          vals[i] = (uint32_t)(cur >> 32);
          results[i] = kFound;
          return;
        }
        const unsigned long long want = op == kInsert ? pair : (cur & 0xffffffff00000000ull) | kTomb;
        const unsigned long long old = atomicCAS(slots + p, cur, want);
        if (old == cur) {
          results[i] = op == kInsert ? kPresent : kRemoved;
          return;
        }
        cur = old;  // changed meanwhile: look again
        continue;
      }
      if (ck == kEmpty) {
        if (op != kInsert) {
          if (op == kFind) vals[i] = 0;
          results[i] = kNotFound;
          return;
        }
        const unsigned long long old = atomicCAS(slots + p, cur, pair);
        if (old == cur) {
          results[i] = kInserted;
          return;
        }
        cur = old;
        continue;
      }
      break;  // another key or a tombstone: probe on
    }
    if (++p == capacity) p = 0;
  }
  wk::report(status, wk::kStatusRetryLimit);  // the table is full
}
