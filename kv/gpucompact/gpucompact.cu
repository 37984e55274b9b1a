// gpucompact.cu: the CUDA engine's kernels — the merge of the job's sorted
// runs, garbage collection, and the entries' encoded sizes. Each replaces one
// stage of the Go engine (merge.go, gc.go, plan.go's planEntries) thread for
// position, and must decide exactly as it does: the identity suite compares
// the tables written through both with compaction.CPU's.
//
// Entries are the Go engine's (input.go's entry, 32 bytes): the user key is
// keys[keyOff, keyOff+keyLen), the trailer seq<<8 | kind, k0 the 8 bytes of
// the user key after the job's common prefix (big-endian, zero-padded).
// Every loop is bounded by its arguments: damaged input cannot be seen here
// (the host decoded and checked every block), and a wrong order can only
// give wrong output, which the host's plan/encode cross-checks catch.
#include <stdint.h>
#include "merge_path.cuh"

namespace {

struct Entry {
  uint64_t trailer, k0;
  uint32_t key_off, key_len, val_off, val_len;
};
static_assert(sizeof(Entry) == 32, "Entry must match gpucompact's entry (input.go)");

constexpr uint32_t kKindDelete = 0;  // base.KindDelete
constexpr int kBlock = 256;
constexpr int kMergeIPT = 11;  // ids per thread in a merge tile (odd: no bank conflicts)

__device__ __forceinline__ int64_t global_id() { return (int64_t)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int64_t grid_stride() { return (int64_t)gridDim.x * blockDim.x; }

// compare_from compares two user keys whose first `from` bytes are known to be
// equal (from <= both lengths): bytes.Compare's sign.
__device__ __forceinline__ int compare_from(const uint8_t* x, uint32_t lx, const uint8_t* y, uint32_t ly, uint32_t from) {
  const uint32_t n = min(lx, ly);
  for (uint32_t i = from; i < n; i++) {
    if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
  }
  return lx < ly ? -1 : (lx > ly ? 1 : 0);
}

// EntryLess orders entry ids as base.CompareInternal orders their internal
// keys: user key ascending, then trailer descending. Keys with equal k0 agree
// on their first min(lcp+8, lengths) bytes (every key of the job starts with
// the lcp bytes), so the byte comparison starts there.
struct EntryLess {
  const Entry* e;
  const uint8_t* keys;
  uint32_t lcp;
  __device__ __forceinline__ bool operator()(uint32_t x, uint32_t y) const {
    const Entry& a = e[x];
    const Entry& b = e[y];
    if (a.k0 != b.k0) return a.k0 < b.k0;
    const int c = compare_from(keys + a.key_off, a.key_len, keys + b.key_off, b.key_len,
                               min(lcp + 8, min(a.key_len, b.key_len)));
    if (c != 0) return c < 0;
    return a.trailer > b.trailer;
  }
};

__device__ __forceinline__ bool same_user_key(const Entry* e, const uint8_t* keys, uint32_t x, uint32_t y) {
  const Entry& a = e[x];
  const Entry& b = e[y];
  if (a.k0 != b.k0 || a.key_len != b.key_len) return false;
  const uint8_t* p = keys + a.key_off;
  const uint8_t* q = keys + b.key_off;
  for (uint32_t i = 0; i < a.key_len; i++) {
    if (p[i] != q[i]) return false;
  }
  return true;
}

// stripe_of is compaction.StripeOf: the index of the first snapshot >= q.
__device__ __forceinline__ int stripe_of(const uint64_t* snaps, int n, uint64_t q) {
  int lo = 0, hi = n;
  while (lo < hi) {
    const int mid = (lo + hi) >> 1;
    if (snaps[mid] >= q) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

__device__ __forceinline__ uint32_t uvarint_len(uint32_t v) {
  uint32_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    n++;
  }
  return n;
}

// encoded_byte is byte p of an entry's encoded internal key: the user key,
// then the trailer, 8 bytes little-endian.
__device__ __forceinline__ uint32_t encoded_byte(const uint8_t* k, uint32_t len, uint64_t trailer, uint32_t p) {
  return p < len ? k[p] : (uint32_t)(trailer >> (8 * (p - len))) & 0xffu;
}

// MergePair is one pair of adjacent runs of a merge round: a = src[start,
// start+na), b = the nb after it; its outputs go to dst[start, start+na+nb),
// in tiles tile0, tile0+1, ... of the launch. A run without a partner is a
// pair with nb = 0 (copied).
struct MergePair {
  int64_t start;
  int32_t na, nb;
  int64_t tile0;
};

}  // namespace

// iota writes out[i] = i: the ids in input order, the merge's first source.
extern "C" __global__ void __launch_bounds__(kBlock) iota(uint32_t* out, int64_t n) {
  for (int64_t i = global_id(); i < n; i += grid_stride()) out[i] = (uint32_t)i;
}

// merge_round merges every pair of one round: block b takes tile b of the
// launch, in the pair whose tiles hold it.
extern "C" __global__ void __launch_bounds__(kBlock)
    merge_round(const uint32_t* src, uint32_t* dst, const MergePair* pairs, int npairs, const Entry* e,
                const uint8_t* keys, uint32_t lcp) {
  const int64_t t = blockIdx.x;
  int lo = 0, hi = npairs;  // the last pair with tile0 <= t
  while (hi - lo > 1) {
    const int mid = (lo + hi) >> 1;
    if (pairs[mid].tile0 <= t) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  const MergePair p = pairs[lo];
  const uint32_t* a = src + p.start;
  wk::mergepath::tile<uint32_t, uint32_t, false, kBlock, kMergeIPT>(a, nullptr, p.na, a + p.na, nullptr, p.nb,
                                                                    t - p.tile0, EntryLess{e, keys, lcp},
                                                                    dst + p.start, nullptr);
}

// gc_flags decides every position of the merged order independently, as the
// Go engine's gc does: newKey (the user key differs from the previous
// position's), shadowed (same key and same snapshot stripe as the previous
// position: dropped), and otherwise kept — except the positions the host
// must decide (check): every one when the job has range tombstones (covered?)
// and point tombstones in stripe 0 (elided?). pos gets the positions
// themselves, for the selections that follow.
extern "C" __global__ void __launch_bounds__(kBlock)
    gc_flags(const uint32_t* order, int64_t n, const Entry* e, const uint8_t* keys, const uint64_t* snaps, int nsnaps,
             int spans, uint8_t* keep, uint8_t* newkey, uint8_t* check, uint32_t* pos) {
  for (int64_t i = global_id(); i < n; i += grid_stride()) {
    const uint32_t id = order[i];
    const uint64_t tr = e[id].trailer;
    const int stripe = stripe_of(snaps, nsnaps, tr >> 8);
    bool fresh = true, shadowed = false;
    if (i > 0) {
      const uint32_t prev = order[i - 1];
      fresh = !same_user_key(e, keys, prev, id);
      shadowed = !fresh && stripe_of(snaps, nsnaps, e[prev].trailer >> 8) == stripe;
    }
    const bool host = !shadowed && (spans != 0 || ((uint32_t)(tr & 0xff) == kKindDelete && stripe == 0));
    keep[i] = !shadowed && !host;
    newkey[i] = fresh;
    check[i] = host;
    pos[i] = (uint32_t)i;
  }
}

// apply_checks writes the host's verdicts on the checked positions.
extern "C" __global__ void __launch_bounds__(kBlock)
    apply_checks(const uint32_t* cpos, const uint8_t* verdict, int64_t m, uint8_t* keep) {
  for (int64_t c = global_id(); c < m; c += grid_stride()) keep[cpos[c]] = verdict[c];
}

// entry_sizes gathers the kept entries (kept_pos: their positions in the
// merged order) and computes each one's plan entry, as planEntries does: the
// bytes it adds to a block at a restart point and off one (its encoded key's
// suffix past the prefix it shares with the previous kept entry's). bound
// accumulates the sum of (at restart + 8), which bounds the blocks' contents.
extern "C" __global__ void __launch_bounds__(kBlock)
    entry_sizes(const uint32_t* kept_pos, int64_t m, const uint32_t* order, const uint8_t* newkey, const Entry* e,
                const uint8_t* keys, uint32_t* kept, uint8_t* kept_new, uint32_t* plan,
                unsigned long long* bound) {
  __shared__ unsigned long long block_sum;
  if (threadIdx.x == 0) block_sum = 0;
  __syncthreads();
  unsigned long long sum = 0;
  for (int64_t j = global_id(); j < m; j += grid_stride()) {
    const uint32_t p = kept_pos[j];
    const uint32_t id = order[p];
    kept[j] = id;
    kept_new[j] = newkey[p];
    const Entry& x = e[id];
    const uint32_t klen = x.key_len + 8, vlen = x.val_len;
    const uint32_t tail = uvarint_len(vlen) + vlen;
    const uint32_t at = 1 + uvarint_len(klen) + klen + tail;
    uint32_t off = at;
    if (j > 0) {
      const Entry& y = e[order[kept_pos[j - 1]]];
      const uint8_t* kx = keys + x.key_off;
      const uint8_t* ky = keys + y.key_off;
      const uint32_t ly = y.key_len + 8;
      const uint32_t n = min(klen, ly);
      uint32_t s = 0;
      while (s < n && encoded_byte(kx, x.key_len, x.trailer, s) == encoded_byte(ky, y.key_len, y.trailer, s)) s++;
      off = uvarint_len(s) + uvarint_len(klen - s) + klen - s + tail;
    }
    plan[2 * j] = at;
    plan[2 * j + 1] = off;
    sum += at + 8;
  }
  atomicAdd(&block_sum, sum);
  __syncthreads();
  if (threadIdx.x == 0) atomicAdd(bound, block_sum);
}
