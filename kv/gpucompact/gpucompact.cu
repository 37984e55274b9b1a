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
// For encode_blocks it keeps each entry's shared prefix length and whether
// its user key differs from the previous kept entry's (new_kept).
extern "C" __global__ void __launch_bounds__(kBlock)
    entry_sizes(const uint32_t* kept_pos, int64_t m, const uint32_t* order, const uint8_t* newkey, const Entry* e,
                const uint8_t* keys, uint32_t* kept, uint8_t* kept_new, uint32_t* plan, uint32_t* shared,
                uint8_t* new_kept, unsigned long long* bound) {
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
    uint32_t off = at, s = 0;
    bool fresh = true;
    if (j > 0) {
      const Entry& y = e[order[kept_pos[j - 1]]];
      const uint8_t* kx = keys + x.key_off;
      const uint8_t* ky = keys + y.key_off;
      const uint32_t ly = y.key_len + 8;
      const uint32_t n = min(klen, ly);
      while (s < n && encoded_byte(kx, x.key_len, x.trailer, s) == encoded_byte(ky, y.key_len, y.trailer, s)) s++;
      off = uvarint_len(s) + uvarint_len(klen - s) + klen - s + tail;
      fresh = !(x.key_len == y.key_len && s >= x.key_len);  // the user keys differ
    }
    plan[2 * j] = at;
    plan[2 * j + 1] = off;
    shared[j] = s;
    new_kept[j] = fresh;
    sum += at + 8;
  }
  atomicAdd(&block_sum, sum);
  __syncthreads();
  if (threadIdx.x == 0) atomicAdd(bound, block_sum);
}

namespace {

// bloom_hash is sstable's bloomHash (a Murmur-like hash of the user key).
__device__ __forceinline__ uint32_t bloom_hash(const uint8_t* b, uint32_t n) {
  constexpr uint32_t kSeed = 0xbc9f1d34u, kM = 0xc6a4a793u;
  uint32_t h = kSeed ^ (n * kM);
  uint32_t i = 0;
  for (; i + 4 <= n; i += 4) {
    h += (uint32_t)b[i] | (uint32_t)b[i + 1] << 8 | (uint32_t)b[i + 2] << 16 | (uint32_t)b[i + 3] << 24;
    h *= kM;
    h ^= h >> 16;
  }
  switch (n - i) {
    case 3:
      h += (uint32_t)b[i + 2] << 16;
      [[fallthrough]];
    case 2:
      h += (uint32_t)b[i + 1] << 8;
      [[fallthrough]];
    case 1:
      h += (uint32_t)b[i];
      h *= kM;
      h ^= h >> 24;
  }
  return h;
}

__device__ __forceinline__ uint8_t* put_uvarint(uint8_t* p, uint32_t v) {
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

__device__ __forceinline__ void put_u32(uint8_t* p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}

// BlockDesc is one planned block: kept entries [start, end) of a table whose
// first kept entry is table_start, size bytes of contents at raw[raw_at].
struct BlockDesc {
  uint64_t raw_at;
  int32_t start, end, table_start;
  uint32_t size;
};
static_assert(sizeof(BlockDesc) == 24, "BlockDesc must match gpu.go's blockDesc");

// BlockStats is what the host's EncodedBlock needs of an encoded block
// besides its bytes and keys.
struct BlockStats {
  uint64_t raw_key_size, raw_value_size, min_seq, max_seq;
  uint32_t deletions, hashes, status, pad;
};
static_assert(sizeof(BlockStats) == 48, "BlockStats must match gpu.go's blockStats");

constexpr int kEncodeWarps = kBlock / 32;

}  // namespace

// encode_blocks builds every planned block of a batch, a warp per block,
// exactly as sstable's block builder would: each lane encodes one entry of
// 32 at a time (header uvarints, the key's suffix past the shared prefix,
// the value from the input arena) at its offset (the lanes' sizes scanned),
// then the restart array and count. Bloom hashes of the entries whose user
// key differs from the previous kept entry's (or that start their table) go
// to hashes[start...], in order. A block whose encoded size differs from the
// plan's sets status (a device or plan bug: the host falls back).
extern "C" __global__ void __launch_bounds__(kBlock)
    encode_blocks(const BlockDesc* blocks, int nblocks, const uint32_t* kept, const uint32_t* plan,
                  const uint32_t* shared, const uint8_t* new_kept, const Entry* e, const uint8_t* keys,
                  const uint8_t* arena, int restart_interval, int bloom, uint8_t* raw, BlockStats* stats,
                  uint32_t* hashes) {
  const int lane = threadIdx.x % 32;
  const int64_t warp = (int64_t)blockIdx.x * kEncodeWarps + threadIdx.x / 32;
  const int64_t warps = (int64_t)gridDim.x * kEncodeWarps;
  for (int64_t b = warp; b < nblocks; b += warps) {
    const BlockDesc d = blocks[b];
    uint8_t* out = raw + d.raw_at;
    const int count = d.end - d.start;
    const int nr = (count + restart_interval - 1) / restart_interval;
    uint8_t* restarts = out + d.size - 4 * nr - 4;
    uint64_t base = 0;
    unsigned long long key_size = 0, value_size = 0, min_seq = ~0ull, max_seq = 0;
    uint32_t deletions = 0, nh = 0;
    for (int c = d.start; c < d.end; c += 32) {
      const int j = c + lane;
      const bool active = j < d.end;
      const int idx = j - d.start;
      const bool restart = active && idx % restart_interval == 0;
      const uint32_t sz = active ? plan[2 * (int64_t)j + (restart ? 0 : 1)] : 0;
      uint32_t incl = sz;  // inclusive scan of the lanes' sizes
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const uint32_t v = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += v;
      }
      const uint32_t total = __shfl_sync(0xffffffffu, incl, 31);
      bool hashed = false;
      if (active) {
        const uint64_t at = base + incl - sz;
        if (restart) put_u32(restarts + 4 * (idx / restart_interval), (uint32_t)at);
        const Entry x = e[kept[j]];
        const uint32_t klen = x.key_len + 8, vlen = x.val_len;
        const uint32_t sh = restart ? 0 : shared[j];
        uint8_t* p = out + at;
        p = put_uvarint(p, sh);
        p = put_uvarint(p, klen - sh);
        p = put_uvarint(p, vlen);
        const uint8_t* k = keys + x.key_off;
        for (uint32_t i = sh; i < klen; i++) *p++ = (uint8_t)encoded_byte(k, x.key_len, x.trailer, i);
        const uint8_t* v = arena + x.val_off;
        for (uint32_t i = 0; i < vlen; i++) *p++ = v[i];
        if ((uint64_t)(p - out) != at + sz) atomicOr(&stats[b].status, 1u);
        key_size += klen;
        value_size += vlen;
        min_seq = min(min_seq, (unsigned long long)(x.trailer >> 8));
        max_seq = max(max_seq, (unsigned long long)(x.trailer >> 8));
        deletions += (uint32_t)(x.trailer & 0xff) == kKindDelete;
        hashed = bloom && (j == d.table_start || new_kept[j]);
        if (hashed) {
          const unsigned before = __popc(__ballot_sync(__activemask(), hashed) & ((1u << lane) - 1u));
          hashes[d.start + nh + before] = bloom_hash(k, x.key_len);
        }
      }
      nh += __popc(__ballot_sync(0xffffffffu, hashed));
      base += total;
    }
    // Reduce the lanes' sums.
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      key_size += __shfl_xor_sync(0xffffffffu, key_size, o);
      value_size += __shfl_xor_sync(0xffffffffu, value_size, o);
      min_seq = min(min_seq, __shfl_xor_sync(0xffffffffu, min_seq, o));
      max_seq = max(max_seq, __shfl_xor_sync(0xffffffffu, max_seq, o));
      deletions += __shfl_xor_sync(0xffffffffu, deletions, o);
    }
    if (lane == 0) {
      put_u32(restarts + 4 * nr, (uint32_t)nr);
      BlockStats& st = stats[b];
      st.raw_key_size = key_size;
      st.raw_value_size = value_size;
      st.min_seq = min_seq;
      st.max_seq = max_seq;
      st.deletions = deletions;
      st.hashes = nh;
      if (base + 4 * nr + 4 != d.size) st.status |= 2u;
    }
  }
}
