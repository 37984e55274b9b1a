// gpucompact.cu: the CUDA engine's kernels — the decoding of the input
// blocks (restart interval by restart interval), the merge of the job's
// sorted runs, garbage collection, the entries' encoded sizes, the blocks
// that would start at each kept entry, and the encoding of the output
// blocks. Each replaces a stage of the Go engine (input.go, merge.go,
// gc.go, plan.go) thread for position or warp for block, and must decide
// exactly as it does: the identity suites compare the tables written
// through both with compaction.CPU's.
//
// Entries are the Go engine's (input.go's entry, 32 bytes): the user key is
// keys[keyOff, keyOff+keyLen), the trailer seq<<8 | kind, k0 the 8 bytes of
// the user key after the job's common prefix (big-endian, zero-padded).
// Every loop is bounded by its arguments or by the block it reads, and
// every read of an input block stays inside the block: damaged input sets
// a status word (decode), and so does an order that is not strictly
// ascending or a key outside the job's common prefix (gc_flags,
// decode_intervals); a
// block encoded to another size than planned sets its status too.
#include <stdint.h>
#include "merge_path.cuh"
#include "snappy.cuh"

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

// last_at_or_below returns the last index b in [0, n) with at(b) <= i, where
// at(b) is non-decreasing in b and at(0) <= i: which merge pair holds a
// tile, which table a kept entry's filter thread serves, which block an
// interval or entry falls in.
template <class At, class I>
__device__ __forceinline__ int last_at_or_below(int n, I i, At at) {
  int lo = 0, hi = n;
  while (hi - lo > 1) {
    const int mid = (lo + hi) >> 1;
    if (at(mid) <= i) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

}  // namespace

// merge_round merges every pair of one round: block b takes tile b of the
// launch, in the pair whose tiles hold it.
extern "C" __global__ void __launch_bounds__(kBlock)
    merge_round(const uint32_t* src, uint32_t* dst, const MergePair* pairs, int npairs, const Entry* e,
                const uint8_t* keys, const uint32_t* lcp_ptr) {
  const uint32_t lcp = *lcp_ptr;
  const int64_t t = blockIdx.x;
  const MergePair p = pairs[last_at_or_below(npairs, t, [&](int b) { return pairs[b].tile0; })];
  const uint32_t* a = src + p.start;
  wk::mergepath::tile<uint32_t, uint32_t, false, kBlock, kMergeIPT>(a, nullptr, p.na, a + p.na, nullptr, p.nb,
                                                                    t - p.tile0, EntryLess{e, keys, lcp},
                                                                    dst + p.start, nullptr);
}

// radix_key writes, for the ids in order, one part of their sort key for
// an LSD radix pass (Options.Sort = SortRadix): which = -2 the trailer
// inverted (descending), -1 the user key's length past the common prefix
// (a key that is a prefix of another sorts first), w >= 0 the 8 bytes of
// the user key at lcp + 8w, big-endian, zero past its end (w = 0 is k0).
// Sorting stably by the trailer, the length, then the words last to first
// orders the ids as base.CompareInternal orders their keys.
extern "C" __global__ void __launch_bounds__(kBlock)
    radix_key(const uint32_t* order, int64_t n, const Entry* e, const uint8_t* keys, const uint32_t* lcp_ptr, int which,
              uint64_t* out) {
  const uint32_t lcp = *lcp_ptr;
  for (int64_t i = global_id(); i < n; i += grid_stride()) {
    const Entry x = e[order[i]];
    uint64_t v;
    if (which == -2) {
      v = ~x.trailer;
    } else if (which == -1) {
      v = x.key_len > lcp ? x.key_len - lcp : 0;  // (a key outside the prefix is flagged by decode_intervals)
    } else if (which == 0) {
      v = x.k0;
    } else {
      v = 0;
      const uint8_t* k = keys + x.key_off;
      const uint32_t at = lcp + 8u * (uint32_t)which;
      for (uint32_t b = 0; b < 8; b++) {
        v = v << 8 | (at + b < x.key_len ? k[at + b] : 0u);
      }
    }
    out[i] = v;
  }
}

// value_lens writes the value lengths of the ids in order (for
// move_values' offsets).
extern "C" __global__ void __launch_bounds__(kBlock)
    value_lens(const uint32_t* order, int64_t n, const Entry* e, uint32_t* out) {
  for (int64_t i = global_id(); i < n; i += grid_stride()) out[i] = e[order[i]].val_len;
}

// move_values copies every value of the ids in order to dst, back to back
// at offs (Options.MoveValues: the ablation of key-value separation), a
// warp per entry.
extern "C" __global__ void __launch_bounds__(kBlock)
    move_values(const uint32_t* order, int64_t n, const Entry* e, const uint8_t* arena, const uint32_t* offs,
                uint8_t* dst) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = (int64_t)gridDim.x * (kBlock / 32);
  for (int64_t i = (int64_t)blockIdx.x * (kBlock / 32) + threadIdx.x / 32; i < n; i += warps) {
    const Entry x = e[order[i]];
    const uint8_t* src = arena + x.val_off;
    uint8_t* out = dst + offs[i];
    for (uint32_t b = lane; b < x.val_len; b += 32) out[b] = src[b];
  }
}

// gc_flags decides every position of the merged order independently, as the
// Go engine's gc does: newKey (the user key differs from the previous
// position's), shadowed (same key and same snapshot stripe as the previous
// position: dropped), and otherwise kept — except the positions the host
// must decide (check): every one when the job has range tombstones (covered?)
// and point tombstones in stripe 0 (elided?). pos gets the positions
// themselves, for the selections that follow. A merged order that is not
// strictly ascending (an input run was not sorted, or two entries share an
// internal key: damaged input) sets status[0]; status[2] counts the
// positions flagged check (a block's count added once), so that the host
// selects them only when there are any.
extern "C" __global__ void __launch_bounds__(kBlock)
    gc_flags(const uint32_t* order, int64_t n, const Entry* e, const uint8_t* keys, const uint32_t* lcp, const uint64_t* snaps,
             int nsnaps, int spans, uint8_t* keep, uint8_t* newkey, uint8_t* check, uint32_t* pos, uint32_t* status) {
  __shared__ uint32_t block_checks;
  if (threadIdx.x == 0) block_checks = 0;
  __syncthreads();
  uint32_t checks = 0;
  const EntryLess less{e, keys, *lcp};
  for (int64_t i = global_id(); i < n; i += grid_stride()) {
    const uint32_t id = order[i];
    const uint64_t tr = e[id].trailer;
    const int stripe = stripe_of(snaps, nsnaps, tr >> 8);
    bool fresh = true, shadowed = false;
    if (i > 0) {
      const uint32_t prev = order[i - 1];
      if (!less(prev, id)) atomicOr(status, 1u);  // not strictly ascending: an input run was not sorted
      fresh = !same_user_key(e, keys, prev, id);
      shadowed = !fresh && stripe_of(snaps, nsnaps, e[prev].trailer >> 8) == stripe;
    }
    const bool host = !shadowed && (spans != 0 || ((uint32_t)(tr & 0xff) == kKindDelete && stripe == 0));
    keep[i] = !shadowed && !host;
    newkey[i] = fresh;
    check[i] = host;
    pos[i] = (uint32_t)i;
    checks += host;
  }
  if (checks != 0) atomicAdd(&block_checks, checks);
  __syncthreads();
  if (threadIdx.x == 0 && block_checks != 0) atomicAdd(&status[2], block_checks);
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

// ----- CRC-32C: the checksums of blocks, as record.CRC computes them -----
//
// The host passes record's table (CRCTable: the Castagnoli polynomial's 256
// entries, reflected); each launch derives from it, in shared memory, the
// tables of slicing by 4. crc32c_update is hash/crc32's Update: the CRC
// inverted in and out, so that crc32c_update(crc32c_update(0, a), b) is the
// CRC of a then b.
// CrcTables are CRC-32C's tables for four bytes a step (t), and the powers
// of x a warp's checksum shifts its lanes' parts by (warp_block_crc): q[j] =
// x^(8 * kCrcChunk * j) mod P, group = x^(8 * 32 * kCrcChunk) mod P.
constexpr uint32_t kCrcPoly = 0x82f63b78u;  // CRC-32C (Castagnoli), reflected
constexpr uint32_t kCrcChunk = 128;          // bytes a lane checksums of each 32 * kCrcChunk
struct CrcTables {
  uint32_t t[4][256];
  uint32_t q[32];
  uint32_t group;
};

// crc_mul is a * b mod P, CRC-32C's polynomial, in the CRC's reflected form
// (the top bit is x^0): zlib's multmodp.
__device__ __forceinline__ uint32_t crc_mul(uint32_t a, uint32_t b) {
  uint32_t p = 0;
#pragma unroll
  for (int i = 0; i < 32; i++) {
    p ^= (0u - (a >> 31)) & b;
    a <<= 1;
    b = (b >> 1) ^ ((0u - (b & 1u)) & kCrcPoly);
  }
  return p;
}

// load_crc_tables fills tables from table, and with shifts the powers
// warp_block_crc takes (every thread of the block takes part; the caller
// synchronizes).
__device__ __forceinline__ void load_crc_tables(CrcTables* tables, const uint32_t* table, bool shifts = false) {
  for (int i = threadIdx.x; i < 256; i += blockDim.x) {
    uint32_t c = table[i];
    tables->t[0][i] = c;
    for (int k = 1; k < 4; k++) {
      c = (c >> 8) ^ table[c & 0xffu];
      tables->t[k][i] = c;
    }
  }
  for (uint32_t i = threadIdx.x; shifts && i <= 32; i += blockDim.x) {
    // x^(8 * kCrcChunk) by squaring x^8, then its i-th power (i = 32: the
    // group's).
    uint32_t base = 0x80000000u >> 8;  // x^8
    for (uint32_t m = 1; m < kCrcChunk; m <<= 1) base = crc_mul(base, base);
    uint32_t pw = 0x80000000u;  // x^0
    for (uint32_t j = i, sq = base; j != 0; j >>= 1, sq = crc_mul(sq, sq)) {
      if (j & 1u) pw = crc_mul(pw, sq);
    }
    if (i < 32) {
      tables->q[i] = pw;
    } else {
      tables->group = pw;
    }
  }
}

__device__ __forceinline__ uint32_t crc32c_update(uint32_t crc, const uint8_t* p, uint32_t n, const CrcTables* tb) {
  uint32_t c = ~crc;
  uint32_t i = 0;
  for (; i < n && ((uintptr_t)(p + i) & 3u) != 0; i++) c = tb->t[0][(c ^ p[i]) & 0xffu] ^ (c >> 8);
  for (; i + 4 <= n; i += 4) {
    c ^= *(const uint32_t*)(p + i);  // little-endian, aligned
    c = tb->t[3][c & 0xffu] ^ tb->t[2][(c >> 8) & 0xffu] ^ tb->t[1][(c >> 16) & 0xffu] ^ tb->t[0][c >> 24];
  }
  for (; i < n; i++) c = tb->t[0][(c ^ p[i]) & 0xffu] ^ (c >> 8);
  return ~c;
}

// block_crc is the unmasked checksum of a stored block: its bytes, then its
// type byte (sstable's blockCRC before record.MaskCRC).
__device__ __forceinline__ uint32_t block_crc(const uint8_t* p, uint32_t n, uint8_t type, const CrcTables* tb) {
  const uint32_t c = ~crc32c_update(0, p, n, tb);
  return ~(tb->t[0][(c ^ type) & 0xffu] ^ (c >> 8));
}

// warp_block_crc is block_crc by a whole warp (every lane calls it with the
// same arguments and gets the checksum). A CRC's state is linear: the state
// after a message is the XOR of each part's state, started from zero, times
// x^(8 * the bytes after the part) — and the initial ~0 is the state the
// first part starts from. So the lanes take the message in parts of
// kCrcChunk counted from its end (lane j the j-th from the end of each 32,
// the first part short), each checksums its parts from a zero state (the
// first from ~0), folds them over the groups of 32 (Horner, times
// tb->group), shifts by its q[j] and the warp XORs the lanes: 32 times
// fewer dependent steps than one lane's walk over the block.
__device__ __forceinline__ uint32_t warp_block_crc(const uint8_t* p, uint32_t n, uint8_t type, const CrcTables* tb) {
  const uint32_t lane = threadIdx.x & 31u;
  const uint32_t parts = (n + kCrcChunk - 1) / kCrcChunk, groups = (parts + 31) / 32;
  uint32_t acc = 0;
  for (uint32_t g = groups; g-- > 0;) {  // from the message's front
    const uint32_t j = 32 * g + lane;    // the part's place from the end
    uint32_t state = 0;
    if (j < parts) {
      const uint32_t end = n - kCrcChunk * j;
      state = end <= kCrcChunk ? ~crc32c_update(0, p, end, tb)  // the first part: from ~0
                               : ~crc32c_update(~0u, p + end - kCrcChunk, kCrcChunk, tb);
    }
    acc = g + 1 == groups ? state : crc_mul(acc, tb->group) ^ state;
  }
  uint32_t c = crc_mul(acc, tb->q[lane]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) c ^= __shfl_xor_sync(0xffffffffu, c, o);
  if (n == 0) c = ~0u;  // (the initial state)
  return ~(tb->t[0][(c ^ type) & 0xffu] ^ (c >> 8));
}

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
// first kept entry is table_start (the host encoder's: the device's filters
// take new_kept), size bytes of contents at raw[raw_at].
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
  uint32_t deletions, status, crc;  // crc: unmasked, when the device checksums the stored block
  uint32_t stored, type;            // sealing: the stored length and compression (0: not sealed)
  uint32_t pad;
};
static_assert(sizeof(BlockStats) == 56, "BlockStats must match gpu.go's blockStats");

constexpr int kEncodeWarps = kBlock / 32;

// FilterDesc is one output table's bloom filter: its kept entries [start,
// end) (flattened at base for the launch), its bits words[word_off ...]
// (nbits of them, zeroed by the host), probes a key.
struct FilterDesc {
  uint32_t start, end, base, word_off, nbits, probes;
};
static_assert(sizeof(FilterDesc) == 24, "FilterDesc must match gpu.go's filterDesc");

// table_filters sets the bits of every listed table's filter, a thread per
// kept entry (item i of total, from thread `first` of `threads`): the
// table's first kept entry and each whose user key differs from the
// previous kept entry's (new_kept) set probes bits each as sstable's
// buildBloom does — bit p of the filter is bit p % 32 of little-endian
// word p / 32.
__device__ __forceinline__ void table_filters(const FilterDesc* f, int nf, int64_t total, const uint32_t* kept,
                                              const uint8_t* new_kept, const Entry* e, const uint8_t* keys,
                                              uint32_t* words, int64_t first, int64_t threads) {
  for (int64_t i = first; i < total; i += threads) {
    const FilterDesc d = f[last_at_or_below(nf, i, [&](int b) { return f[b].base; })];
    const uint32_t j = d.start + (uint32_t)(i - d.base);
    if (j >= d.end || (j != d.start && !new_kept[j])) continue;
    const Entry x = e[kept[j]];
    uint32_t h = bloom_hash(keys + x.key_off, x.key_len);
    const uint32_t delta = h >> 17 | h << 15;
    for (uint32_t p = 0; p < d.probes; p++) {
      const uint32_t pos = h % d.nbits;
      atomicOr(&words[d.word_off + pos / 32], 1u << (pos % 32));
      h += delta;
    }
  }
}


}  // namespace

// Sealing: the blocks of a batch compressed as sstable's SealBlock does with
// Snappy: each compressed (s2.EncodeSnappy's bytes, snappy.cuh) into
// sealed[at[b]...] and stored so when that saves at least an eighth, else
// stored as it is (its contents copied there); then its checksum (stored
// bytes and type byte). A warp seals one block at a time, all its lanes
// together (snappy.cuh), with a hash table of uint16 positions in shared
// memory (kSealTableEntries of them: s2's 12-bit table, for blocks under 16
// KiB; a launch gives a block of W warps W * kSealTableBytes of dynamic
// shared memory). Blocks with at[b] = ~0 are the host's.
constexpr int kSealTableEntries = 1 << 12, kSealTableBytes = kSealTableEntries * 2, kSealMaxWarps = 8;
static_assert(kSealTableBytes == 8192, "gpu.go's sealTableBytes");
static_assert(kSealMaxWarps == 8, "gpu.go's sealWarps");
static_assert(kEncodeWarps <= kSealMaxWarps, "encode_seal_blocks' warps each take a seal table");

// seal_table is warp's hash table: its kSealTableBytes of the launch's
// dynamic shared memory (in the CPU emulation, which has static shared
// memory only, a static array of kSealMaxWarps tables).
__device__ __forceinline__ uint16_t* seal_table(int warp) {
#ifdef WK_HOST_EMULATION
  __shared__ uint4 seal_smem[kSealMaxWarps * kSealTableBytes / 16];
#else
  extern __shared__ uint4 seal_smem[];
#endif
  return (uint16_t*)seal_smem + warp * kSealTableEntries;
}

// seal_block seals block b (d: its descriptor, its encoded bytes at
// raw[d.raw_at]) into sealed[at...] and sets its stats' crc, stored and type;
// every lane of the warp calls it.
__device__ __forceinline__ void seal_block(const BlockDesc& d, int64_t b, const uint8_t* raw, uint64_t at,
                                           uint8_t* sealed, uint32_t snappy_type, BlockStats* stats,
                                           const CrcTables* crc, uint16_t* table, int lane) {
  if (wk::snappy::table_words(d.size) > (uint32_t)kSealTableEntries) {
    if (lane == 0) atomicOr(&stats[b].status, 4u);  // the host planned it for a larger table
    return;
  }
  const uint8_t* src = raw + d.raw_at;
  uint8_t* out = sealed + at;
  uint32_t n = wk::snappy::encode(src, d.size, out, table);
  uint32_t type = snappy_type;
  if (n >= d.size - d.size / 8) {  // sstable's compress: not worth it
    // Stored as it is, in its place in sealed too: the host writes
    // the sealed bytes and need not bring the contents back.
    n = d.size;
    type = 0;
    for (uint32_t i = lane; i < n; i += 32) out[i] = src[i];
    __syncwarp();
  }
  const uint32_t c = warp_block_crc(out, n, (uint8_t)type, crc);
  if (lane == 0) {
    BlockStats& st = stats[b];
    st.crc = c;
    st.stored = n;
    st.type = type;
  }
}

// encode_warps builds the planned blocks of a batch, a warp per block,
// exactly as sstable's block builder would: each lane encodes one entry of
// 32 at a time (header uvarints, the key's suffix past the shared prefix,
// the value from the input arena) at its offset (the lanes' sizes scanned),
// then the restart array and count. A block whose encoded size differs from
// the plan's sets status (a device or plan bug: the host falls back). Then,
// with Seal, the warp seals the block it built (seal_block, with table, its
// own hash table); without, when crc is given (the job does not compress),
// it checksums the block as it is.
template <bool Seal>
__device__ __forceinline__ void encode_warps(const BlockDesc* blocks, int nblocks, const uint32_t* kept,
                                             const uint32_t* plan, const uint32_t* shared, const Entry* e,
                                             const uint8_t* keys, const uint8_t* arena, int restart_interval,
                                             uint8_t* raw, BlockStats* stats, const CrcTables* crc, int encode_grid,
                                             const uint64_t* at, uint8_t* sealed, uint32_t snappy_type,
                                             uint16_t* table) {
  const int lane = threadIdx.x % 32;
  const int64_t warp = (int64_t)blockIdx.x * kEncodeWarps + threadIdx.x / 32;
  const int64_t warps = (int64_t)encode_grid * kEncodeWarps;
  for (int64_t b = warp; b < nblocks; b += warps) {
    const BlockDesc d = blocks[b];
    uint8_t* out = raw + d.raw_at;
    const int count = d.end - d.start;
    const int nr = (count + restart_interval - 1) / restart_interval;
    uint8_t* restarts = out + d.size - 4 * nr - 4;
    uint64_t base = 0;
    unsigned long long key_size = 0, value_size = 0, min_seq = ~0ull, max_seq = 0;
    uint32_t deletions = 0;
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
      }
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
      if (base + 4 * nr + 4 != d.size) atomicOr(&st.status, 2u);
    }
    if constexpr (Seal) {
      // The block sealed by the warp that encoded it, once every lane's
      // bytes are written (at[b] = ~0: the host seals it).
      if (at[b] != ~0ull) {
        __syncwarp();
        seal_block(d, b, raw, at[b], sealed, snappy_type, stats, crc, table, lane);
      }
    } else if (crc != nullptr) {
      // The block stored as it is (the job does not compress): its
      // checksum, by the warp once every lane's bytes are written.
      __syncwarp();
      const uint32_t c = warp_block_crc(out, d.size, 0, crc);
      if (lane == 0) stats[b].crc = c;
    }
  }
}


// filter_blocks: a launch's blocks from encode_grid on build the filters of
// the tables listed in f (table_filters: the tables the host's walk has ended
// since the last batch) and say so; the others return false and encode.
__device__ __forceinline__ bool filter_blocks(int encode_grid, const FilterDesc* f, int nf, int64_t ftotal,
                                              const uint32_t* kept, const uint8_t* new_kept, const Entry* e,
                                              const uint8_t* keys, uint32_t* words) {
  if ((int)blockIdx.x < encode_grid) return false;
  table_filters(f, nf, ftotal, kept, new_kept, e, keys, words,
                (int64_t)(blockIdx.x - encode_grid) * blockDim.x + threadIdx.x,
                (int64_t)(gridDim.x - encode_grid) * blockDim.x);
  return true;
}

// encode_blocks encodes a batch's blocks (encode_warps) and checksums them
// as they are when crc_table is given; the launch's blocks from encode_grid
// on build filters (filter_blocks). One launch a batch, not two.
extern "C" __global__ void __launch_bounds__(kBlock)
    encode_blocks(const BlockDesc* blocks, int nblocks, const uint32_t* kept, const uint32_t* plan,
                  const uint32_t* shared, const uint8_t* new_kept, const Entry* e, const uint8_t* keys,
                  const uint8_t* arena, int restart_interval, uint8_t* raw, BlockStats* stats,
                  const uint32_t* crc_table, int encode_grid, const FilterDesc* f, int nf,
                  int64_t ftotal, uint32_t* words) {
  if (filter_blocks(encode_grid, f, nf, ftotal, kept, new_kept, e, keys, words)) return;
  __shared__ CrcTables crc_tables;
  if (crc_table != nullptr) load_crc_tables(&crc_tables, crc_table, true);
  __syncthreads();
  encode_warps<false>(blocks, nblocks, kept, plan, shared, e, keys, arena, restart_interval, raw, stats,
                      crc_table != nullptr ? &crc_tables : nullptr, encode_grid, nullptr, nullptr, 0, nullptr);
}

// encode_seal_blocks is encode_blocks sealing each block on the device as
// soon as its warp has built it (at, sealed, snappy_type: seal_block's;
// crc_table is required). Its launch gives each block kEncodeWarps seal
// tables of dynamic shared memory. One launch a batch where encode_blocks
// and a sealing launch took two.
extern "C" __global__ void __launch_bounds__(kBlock)
    encode_seal_blocks(const BlockDesc* blocks, int nblocks, const uint32_t* kept, const uint32_t* plan,
                       const uint32_t* shared, const uint8_t* new_kept, const Entry* e, const uint8_t* keys,
                       const uint8_t* arena, int restart_interval, uint8_t* raw, BlockStats* stats,
                       const uint32_t* crc_table, int encode_grid, const FilterDesc* f, int nf,
                       int64_t ftotal, uint32_t* words, const uint64_t* at, uint8_t* sealed,
                       uint32_t snappy_type) {
  if (filter_blocks(encode_grid, f, nf, ftotal, kept, new_kept, e, keys, words)) return;
  __shared__ CrcTables crc_tables;
  load_crc_tables(&crc_tables, crc_table, true);
  __syncthreads();
  uint16_t* table = seal_table((int)(threadIdx.x / 32));
  encode_warps<true>(blocks, nblocks, kept, plan, shared, e, keys, arena, restart_interval, raw, stats,
                     &crc_tables, encode_grid, at, sealed, snappy_type, table);
}

// seal_blocks seals a batch's blocks already encoded in raw, each warp of
// the launch's blocks one block at a time (seal_block). The engine seals
// as it encodes (encode_seal_blocks); TestCUDASealBlocks drives this one to
// hold the device's Snappy encoder against the host's byte for byte on
// contents of every kind, not only sstable blocks.
extern "C" __global__ void __launch_bounds__(kSealMaxWarps * 32)
    seal_blocks(const BlockDesc* blocks, int nblocks, const uint8_t* raw, const uint64_t* at, uint8_t* sealed,
                uint32_t snappy_type, BlockStats* stats, const uint32_t* crc_table) {
  __shared__ CrcTables crc_tables;
  load_crc_tables(&crc_tables, crc_table, true);
  __syncthreads();
  const int warps = (int)(blockDim.x / 32), warp = (int)(threadIdx.x / 32), lane = (int)(threadIdx.x & 31);
  if (warps > kSealMaxWarps || blockDim.x % 32 != 0) return;
  uint16_t* table = seal_table(warp);
  for (int64_t b = (int64_t)blockIdx.x * warps + warp; b < nblocks; b += (int64_t)gridDim.x * warps) {
    if (at[b] == ~0ull) continue;
    seal_block(blocks[b], b, raw, at[b], sealed, snappy_type, stats, &crc_tables, table, lane);
  }
}

// ----- decode: the input blocks' entries, from the arena of their contents -----
//
// The host reads and decompresses every input data block into the arena
// (checking each one's CRC) and hands the device the blocks' places in it;
// the device decodes the entries as sstable's block iterator does. The unit
// of work is the restart interval (the entries from one restart point to the
// next), which starts with a whole key: intervals decode independently.
// A block that is damaged, or laid out otherwise than sstable's writer lays
// blocks out (restart points not where the entry chain has them, a shared
// prefix across a restart point), sets status[0] and status[1] = the least
// such block: the host decodes that block with the Reader, and either
// reports its corruption as the CPU path would or gives the job to the
// fallback compactor.

namespace {

// BlockIn is an input block's contents: arena[off, off+len).
struct BlockIn {
  uint32_t off, len;
};

__device__ __forceinline__ uint32_t get_u32(const uint8_t* p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

__device__ __forceinline__ void flag_block(uint32_t* status, int b) {
  atomicOr(&status[0], 1u);
  atomicMin(&status[1], (uint32_t)b);
}

// Layout is a block's entries region and restart array.
struct Layout {
  const uint8_t* data;
  uint32_t restarts;  // offset of the restart array = the end of the entries
  uint32_t n;         // restart points
  __device__ __forceinline__ uint32_t restart(uint32_t i) const { return get_u32(data + restarts + 4 * i); }
};

// layout checks a block's restart count as the iterator's init does.
__device__ __forceinline__ bool layout(const BlockIn& b, const uint8_t* arena, Layout* l) {
  if (b.len < 4) return false;
  l->data = arena + b.off;
  l->n = get_u32(l->data + b.len - 4);
  if (l->n < 1 || l->n > (b.len - 4) / 4) return false;
  l->restarts = b.len - 4 - 4 * l->n;
  return true;
}

// uvarint reads a uvarint of data[*p, end) as binary.Uvarint does, and
// refuses it as the iterator does (too short, overflowing, or above end).
__device__ __forceinline__ bool uvarint(const uint8_t* data, uint32_t* p, uint32_t end, uint32_t* out) {
  uint64_t v = 0;
  uint32_t s = 0;
  for (int i = 0; i < 10; i++) {
    if (*p >= end) return false;
    const uint8_t c = data[(*p)++];
    if (c < 0x80) {
      if (i == 9 && c > 1) return false;
      v |= (uint64_t)c << s;
      if (v > end) return false;
      *out = (uint32_t)v;
      return true;
    }
    v |= (uint64_t)(c & 0x7f) << s;
    s += 7;
  }
  return false;
}

// EntryHead is a parsed entry header.
struct EntryHead {
  uint32_t shared, unshared, vlen, body;  // body: where the key suffix starts
};

__device__ __forceinline__ bool parse_head(const Layout& l, uint32_t p, EntryHead* h) {
  if (!uvarint(l.data, &p, l.restarts, &h->shared) || !uvarint(l.data, &p, l.restarts, &h->unshared) ||
      !uvarint(l.data, &p, l.restarts, &h->vlen)) {
    return false;
  }
  if (h->unshared > l.restarts - p || h->vlen > l.restarts - p - h->unshared) return false;
  h->body = p;
  return true;
}

// last_le returns the last index b in [0, n) with base[b] <= i (base is
// non-decreasing and base[0] = 0).
__device__ __forceinline__ int last_le(const uint32_t* base, int n, uint64_t i) {
  return last_at_or_below(n, i, [&](int b) { return (uint64_t)base[b]; });
}

}  // namespace

// CrcIn is an input block whose checksum the device checks: block b's
// contents, arena[off, off+len), stored uncompressed (type byte 0), and want
// its trailer's checksum unmasked.
struct CrcIn {
  uint32_t b, off, len, want;
};
static_assert(sizeof(CrcIn) == 16, "CrcIn must match devload.go's crc quadruples");

// block_intervals counts each block's restart intervals (none for a block
// without entries) and checks its restart array: a valid count, the first
// point at 0, points ascending inside the entries region. In the same launch
// (thread i takes block i and checksum i) it checks the checksums of the
// blocks stored uncompressed, which the host put in the arena unchecked
// (read there, or copied; crc_table nullptr when there are none): a mismatch
// flags the block, which the host then reads again and reports as the Reader
// does. The two are independent: a damaged block's intervals are counted
// from bytes that stay inside it, and the flag decides.
extern "C" __global__ void __launch_bounds__(kBlock)
    block_intervals(const BlockIn* blocks, int nb, const uint8_t* arena, uint32_t* nint, const CrcIn* crcs, int ncrcs,
                    const uint32_t* crc_table, uint32_t* status) {
  __shared__ CrcTables tables;
  if (crc_table != nullptr) load_crc_tables(&tables, crc_table);
  __syncthreads();
  for (int64_t i = global_id(); i < max(nb, ncrcs); i += grid_stride()) {
    if (i < ncrcs) {
      const CrcIn c = crcs[i];
      if (block_crc(arena + c.off, c.len, 0, &tables) != c.want) flag_block(status, (int)c.b);
    }
    if (i >= nb) continue;
    const int64_t b = i;
    Layout l;
    uint32_t count = 0;
    if (!layout(blocks[b], arena, &l)) {
      flag_block(status, (int)b);
    } else if (l.restarts > 0) {
      count = l.n;
      uint32_t prev = 0;
      for (uint32_t r = 0; r < l.n; r++) {
        const uint32_t at = l.restart(r);
        if ((r == 0 && at != 0) || (r > 0 && at <= prev) || at >= l.restarts) {
          flag_block(status, (int)b);
          count = 0;
          break;
        }
        prev = at;
      }
    }
    nint[b] = count;
  }
}

// InflateIn is an input block of a table stored with Snappy, which the
// device checks and decompresses: block b's stored bytes stored[src,
// src+len) with type byte type (0: stored as it is, 1: Snappy) and want its
// trailer's checksum unmasked; its contents, dlen bytes, go to arena[dst...].
struct InflateIn {
  uint32_t b, src, len, type, dst, dlen, want;
};
static_assert(sizeof(InflateIn) == 28, "InflateIn must match devload.go's inflate records");

// inflate_blocks checks and decompresses the blocks of tables stored with
// Snappy, a warp a block (snappy.cuh's decode; the checksum by the warp): a
// checksum mismatch, or a block that does not decode to its length, flags
// the block (the host then reads it again and reports it as the Reader
// does). A thread a block ran 14,000 blocks as 440 warps, each of whose
// lanes walked its block alone (ncu: 2.1 ms a 1 KiB-value job's launch).
extern "C" __global__ void __launch_bounds__(kBlock)
    inflate_blocks(const InflateIn* in, int n, const uint8_t* stored, uint8_t* arena, const uint32_t* crc_table,
                   uint32_t* status) {
  __shared__ CrcTables tables;
  load_crc_tables(&tables, crc_table, true);
  __syncthreads();
  const uint32_t lane = threadIdx.x & 31u;
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
  for (int64_t i = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; i < n; i += warps) {
    const InflateIn c = in[i];
    const uint8_t* s = stored + c.src;
    uint8_t* d = arena + c.dst;
    bool ok = warp_block_crc(s, c.len, (uint8_t)c.type, &tables) == c.want;
    if (ok && c.type == 0) {
      ok = c.len == c.dlen;
      for (uint32_t k = lane; ok && k < c.len; k += 32) d[k] = s[k];
    } else if (ok) {
      ok = c.type == 1 && wk::snappy::decode(s, c.len, d, c.dlen);
    }
    if (!ok && lane == 0) flag_block(status, (int)c.b);
  }
}

// scan_intervals walks every restart interval once (a thread each),
// counting its entries and their user keys' bytes, and checks the entry
// chain: headers and lengths as the iterator checks them, no shared prefix
// at a restart point or longer than the previous key, keys of 8 bytes or
// more, and the last entry ending exactly at the next restart point. It
// writes both counts as one word, key bytes << 32 | entries, for one scan
// (an entry takes 3 bytes or more of an arena of at most 4 GiB: the
// entries' sum never carries into the key bytes), and adds the key bytes,
// unclamped, to the 64-bit total at status[6..7]: the host refuses a job
// whose keys pass 32-bit offsets, so the packed sums are read only when
// they are exact.
extern "C" __global__ void __launch_bounds__(kBlock)
    scan_intervals(const BlockIn* blocks, int nb, const uint32_t* ibase, int64_t nint, const uint8_t* arena,
                   uint64_t* counts, uint32_t* status) {
  __shared__ unsigned long long block_keys;
  if (threadIdx.x == 0) block_keys = 0;
  __syncthreads();
  unsigned long long sum = 0;
  for (int64_t i = global_id(); i < nint; i += grid_stride()) {
    const int b = last_le(ibase, nb, i);
    Layout l;
    uint32_t ents = 0;
    uint64_t keyb = 0;
    if (layout(blocks[b], arena, &l)) {
      const uint32_t r = (uint32_t)(i - ibase[b]);
      uint32_t p = l.restart(r);
      const uint32_t end = r + 1 < l.n ? l.restart(r + 1) : l.restarts;
      uint32_t prev_len = 0;
      bool ok = true;
      while (p < end) {
        EntryHead h;
        if (!parse_head(l, p, &h) || (ents == 0 && h.shared != 0) || h.shared > prev_len ||
            h.shared + h.unshared < 8) {
          ok = false;
          break;
        }
        prev_len = h.shared + h.unshared;
        ents++;
        keyb += prev_len - 8;
        p = h.body + h.unshared + h.vlen;
      }
      if (!ok || p != end) {
        flag_block(status, b);
        ents = 0;
        keyb = 0;
      }
    }
    sum += keyb;
    counts[i] = min(keyb, (uint64_t)0xffffffffu) << 32 | ents;
  }
  if (sum != 0) atomicAdd(&block_keys, sum);
  __syncthreads();
  if (threadIdx.x == 0 && block_keys != 0) atomicAdd((unsigned long long*)(status + 6), block_keys);
}

// decode_intervals decodes every restart interval's entries (a thread each,
// after scan_intervals and the scan of its counts: base[i] = the interval's
// first key byte << 32 | its first entry): each entry's user key into keys,
// its entry (trailer, key and value places, merge key) into e, and its id
// into order (the ids in input order: the merge's first source). A kind
// other than a point entry's is corruption. The merge key k0 is the 8 bytes
// of the user key after the job's common prefix (lcp[0] bytes, which
// follow it from lcp + 1: the host takes it from the input tables' bounds);
// a key that does not start with the prefix sets status[5] (the tables'
// bounds did not hold their keys: the job is irregular, and K0 would not
// order such a key).
extern "C" __global__ void __launch_bounds__(kBlock)
    decode_intervals(const BlockIn* blocks, int nb, const uint32_t* ibase, int64_t nint, const uint8_t* arena,
                     const uint64_t* base, const uint32_t* lcp, Entry* e, uint8_t* keys, uint32_t* order,
                     uint32_t* status) {
  const uint32_t plen = lcp[0];
  const uint8_t* prefix = (const uint8_t*)(lcp + 1);
  bool stray = false;
  for (int64_t i = global_id(); i < nint; i += grid_stride()) {
    const int b = last_le(ibase, nb, i);
    Layout l;
    if (!layout(blocks[b], arena, &l)) continue;
    const uint32_t r = (uint32_t)(i - ibase[b]);
    uint32_t p = l.restart(r);
    const uint32_t end = r + 1 < l.n ? l.restart(r + 1) : l.restarts;
    const uint64_t at = base[i];
    uint32_t id = (uint32_t)at, ko = (uint32_t)(at >> 32);  // (the host checked the keys fit 32-bit offsets)
    uint32_t prev_off = 0, prev_len = 0;  // the previous entry's user key in keys
    uint64_t prev_tr = 0;
    while (p < end) {
      EntryHead h;
      if (!parse_head(l, p, &h)) break;  // (scan_intervals flagged it)
      const uint32_t klen = h.shared + h.unshared;
      const uint32_t ulen = klen - 8;
      const uint8_t* src = l.data + h.body;
      // Byte q of the encoded key: from the previous key below shared.
      uint64_t tr = 0, k0 = 0;
      stray |= ulen < plen;
      for (uint32_t q = 0; q < klen; q++) {
        const uint8_t c = q < h.shared ? (uint8_t)encoded_byte(keys + prev_off, prev_len, prev_tr, q) : src[q - h.shared];
        if (q < ulen) {
          keys[ko + q] = c;
          if (q < plen) {
            stray |= c != prefix[q];
          } else if (q - plen < 8) {
            k0 |= (uint64_t)c << (8 * (7 - (q - plen)));
          }
        } else {
          tr |= (uint64_t)c << (8 * (q - ulen));
        }
      }
      const uint32_t kind = (uint32_t)(tr & 0xff);
      if (kind != 0 && kind != 1) flag_block(status, b);  // base.KindDelete, base.KindSet
      Entry x;
      x.trailer = tr;
      x.k0 = k0;
      x.key_off = ko;
      x.key_len = ulen;
      x.val_off = blocks[b].off + h.body + h.unshared;
      x.val_len = h.vlen;
      e[id] = x;
      order[id] = id;
      prev_off = ko;
      prev_len = ulen;
      prev_tr = tr;
      ko += ulen;
      id++;
      p = h.body + h.unshared + h.vlen;
    }
  }
  if (stray) atomicOr(&status[5], 1u);
}

// block_ends gives every kept entry j the block that would start there
// (the plan's flush rule, as plan.go's walk applies it): end[j] is one past
// its last entry — the entry that brings its size (entries, 4 bytes per
// restart point, 4) to block_size, or the last kept entry — and size[j] its
// size. The host's walk then steps from block to block instead of from
// entry to entry wherever no output cut can fall inside a block. Each
// thread scans at most one block of entries.
extern "C" __global__ void __launch_bounds__(kBlock)
    block_ends(const uint32_t* plan, int64_t m, uint32_t block_size, int restart_interval, uint32_t* end,
               uint32_t* size) {
  for (int64_t j = global_id(); j < m; j += grid_stride()) {
    uint64_t s = 8 + (uint64_t)plan[2 * j];
    int since = 1;
    int64_t k = j + 1;
    while (s < block_size && k < m) {
      if (since == restart_interval) {
        s += 4 + (uint64_t)plan[2 * k];
        since = 1;
      } else {
        s += plan[2 * k + 1];
        since++;
      }
      k++;
    }
    end[j] = (uint32_t)k;
    size[j] = (uint32_t)min(s, (uint64_t)0xffffffffu);
  }
}
