// engine_test.cc: runs the slab hash kernels (slabhash.cuh) on the CPU
// emulation of emu.h against sequential models, for every engine: the round
// engine of the tile layouts (32/32 packed pairs, wide pairs, sets,
// multimaps) and the warp engine of the paper's layout (maps, multimaps,
// and 32-bit sets with whole-warp tiles). Built and run by emu_test.go;
// prints "ok" and exits 0 when every check passes.
//
// Checks: exact results of batches whose keys are distinct (the outcome of
// each element is then fixed), per-key linearizability of batches with
// repeated keys (multimaps too: several kinds of operation on one key in one
// batch), snapshots and flushes against the model, multimap search-all
// (values in list order, oldest first), the control block (live-entry delta,
// inserted count, the pool counter copied by the last block), pool
// exhaustion with Failed elements and the host's rerun of just those after
// the pool grew, and bad op codes.
#include "emu.h"
//
#include "slabhash.cuh"

#include <algorithm>
#include <deque>
#include <map>
#include <random>
#include <set>
#include <string>

SH_TABLE(map_32_32_t8, uint32_t, uint32_t, wk::sh::kMap, 8, false)
SH_TABLE(map_32_32_t16, uint32_t, uint32_t, wk::sh::kMap, 16, false)
SH_TABLE(map_32_32_paper, uint32_t, uint32_t, wk::sh::kMap, 32, true)
SH_TABLE(map_32_64_t8, uint32_t, uint64_t, wk::sh::kMap, 8, false)
SH_TABLE(map_64_64_t16, uint64_t, uint64_t, wk::sh::kMap, 16, false)
SH_TABLE(set_32_t8, uint32_t, uint32_t, wk::sh::kSet, 8, false)
SH_TABLE(set_64_t16, uint64_t, uint32_t, wk::sh::kSet, 16, false)
SH_TABLE(set_32_t32, uint32_t, uint32_t, wk::sh::kSet, 32, false)
SH_TABLE(multi_32_32_t8, uint32_t, uint32_t, wk::sh::kMulti, 8, false)
SH_TABLE(multi_64_32_t16, uint64_t, uint32_t, wk::sh::kMulti, 16, false)
SH_TABLE(multi_32_32_paper, uint32_t, uint32_t, wk::sh::kMulti, 32, true)

using namespace wk;  // the shared registry: status flags, control-block words (status.cuh)
using namespace wk::sh;
using wk::slab::Pool;

static int failures = 0;
#define CHECK(cond, ...)                                  \
  do {                                                    \
    if (!(cond)) {                                        \
      fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);     \
      fprintf(stderr, __VA_ARGS__);                       \
      fprintf(stderr, "\n");                              \
      if (++failures > 20) exit(1);                       \
    }                                                     \
  } while (0)

template <typename T>
static T* alloc_fill(size_t n, int byte) {
  void* p = aligned_alloc(256, ((n * sizeof(T) + 255) / 256) * 256);
  memset(p, byte, n * sizeof(T));
  return (T*)p;
}

// Kernels of one table instantiation.
template <typename K, typename V>
struct Kernels {
  void (*apply)(char*, uint32_t, uint32_t, Pool*, const K*, V*, const uint8_t*, uint32_t, uint8_t*, uint32_t*,
                uint64_t, unsigned long long*, uint32_t, uint32_t, unsigned long long*);
  void (*snapshot)(char*, uint32_t, Pool*, K*, V*, uint64_t, unsigned long long*);
  void (*flush)(char*, uint32_t, Pool*, unsigned long long*);
  void (*findall)(char*, uint32_t, uint32_t, Pool*, const K*, const uint64_t*, V*, uint64_t, uint32_t*, uint64_t,
                  unsigned long long*);
};
#define KERNELS(NAME)                                                                                   \
  Kernels<typename L_##NAME::K, typename L_##NAME::V> {                                                \
    sh_apply_##NAME, sh_snapshot_##NAME, sh_flush_##NAME, sh_findall_##NAME                             \
  }

// Table is a slab hash in host memory with its pool.
template <class L>
struct Table {
  using K = typename L::K;
  using V = typename L::V;
  Kernels<K, V> k;
  uint32_t buckets;
  char* heads;
  Pool* pool;
  unsigned long long* ctrl;
  std::vector<void*> supers;
  uint32_t blocks_per_super;
  unsigned grid = 3, block = 64;  // 6 warps
  uint32_t salt = 1;
  uint64_t applies = 0;  // apply calls so far: every other one is mapped

  Table(Kernels<K, V> kk, uint32_t b, uint32_t bps, int supers_now) : k(kk), buckets(b), blocks_per_super(bps) {
    heads = alloc_fill<char>((size_t)b * L::kSlabBytes, 0xff);
    pool = alloc_fill<Pool>(1, 0);
    pool->blocks_per_super = bps;
    pool->unit_shift = __builtin_ctz(L::kSlabBytes);
    ctrl = alloc_fill<unsigned long long>(8, 0);
    for (int i = 0; i < supers_now; ++i) grow();
  }
  ~Table() {
    free(heads);
    free(pool);
    free(ctrl);
    for (void* p : supers) free(p);
  }
  void grow() {
    const size_t units = (size_t)blocks_per_super * 1024;
    char* p = alloc_fill<char>(units * L::kSlabBytes + units / 8, 0xff);
    memset(p + units * L::kSlabBytes, 0, units / 8);
    const int i = (int)supers.size();
    supers.push_back(p);
    pool->units[i] = (unsigned long long)p;
    pool->bitmaps[i] = (unsigned long long)(p + units * L::kSlabBytes);
    pool->num_super = i + 1;
  }
  uint64_t count_bits() const {
    uint64_t n = 0;
    for (size_t s = 0; s < supers.size(); ++s) {
      const uint32_t* bm = (const uint32_t*)pool->bitmaps[s];
      for (size_t w = 0; w < (size_t)blocks_per_super * 32; ++w) n += __builtin_popcount(bm[w]);
    }
    return n;
  }

  // apply runs one batch; it returns the status word.
  uint32_t apply(const std::vector<K>& keys, std::vector<V>& vals, const std::vector<uint8_t>* ops, uint32_t op,
                 std::vector<uint8_t>& res, std::vector<uint32_t>* counts, uint32_t flags = 0) {
    memset(ctrl, 0, 8 * sizeof(*ctrl));
    const uint64_t n = keys.size();
    res.resize(n);
    vals.resize(n);
    if (counts) counts->resize(n);
    const uint64_t used_before = pool->used;
    // Every other batch gives the kernel a host block to copy the control
    // block to (the mapped pinned memory of the GPU backend): the last block
    // copies it there and zeroes the device's for the next launch.
    const bool mapped = (++applies % 2) == 0;
    unsigned long long out[kCtrlWords];
    memset(out, 0, sizeof out);
    emu::launch(grid, block, [&] {
      k.apply(heads, buckets, 0x2545f491, pool, keys.data(), vals.data(), ops ? ops->data() : nullptr, op,
              res.data(), counts ? counts->data() : nullptr, n, ctrl, flags, salt, mapped ? out : nullptr);
    });
    salt += 0x9e3779b9;
    if (mapped) {
      for (int i = 0; i < kCtrlWords; ++i) CHECK(ctrl[i] == 0, "control word %d left %llu after a mapped launch", i, ctrl[i]);
      memcpy(ctrl, out, sizeof out);
    }
    CHECK(ctrl[kCtrlDone] == grid, "%llu blocks signed off, want %u", ctrl[kCtrlDone], grid);
    CHECK(ctrl[kCtrlUsed] == pool->used, "control block says %llu units allocated, the pool %llu", ctrl[kCtrlUsed],
          pool->used);
    CHECK(pool->used == count_bits(), "pool counter %llu, bitmaps %llu", pool->used,
          (unsigned long long)count_bits());
    (void)used_before;
    return (uint32_t)ctrl[kCtrlStatus];
  }

  std::vector<std::pair<K, V>> snapshot() {
    memset(ctrl, 0, 8 * sizeof(*ctrl));
    emu::launch(grid, block, [&] { k.snapshot(heads, buckets, pool, nullptr, nullptr, 0, ctrl); });
    const uint64_t n = ctrl[kCtrlCount];
    std::vector<K> ks(n);
    std::vector<V> vs(n);
    memset(ctrl, 0, 8 * sizeof(*ctrl));
    emu::launch(grid, block, [&] { k.snapshot(heads, buckets, pool, ks.data(), vs.data(), n, ctrl); });
    CHECK(ctrl[kCtrlCount] == n, "snapshot found %llu, then %llu", (unsigned long long)n, ctrl[kCtrlCount]);
    std::vector<std::pair<K, V>> out;
    for (uint64_t i = 0; i < n; ++i) out.push_back({ks[i], L::kIsSet ? V(0) : vs[i]});
    return out;
  }

  // find_all returns the values of each key in list order: a counting pass,
  // then a pass that gathers them (which must count the same, as nothing
  // runs in between).
  std::vector<std::vector<V>> find_all(const std::vector<K>& keys) {
    const uint64_t n = keys.size();
    std::vector<std::vector<V>> out(n);
    if (n == 0) return out;
    std::vector<uint32_t> counts(n), again(n);
    memset(ctrl, 0, 8 * sizeof(*ctrl));
    emu::launch(grid, block, [&] {
      k.findall(heads, buckets, 0x2545f491, pool, keys.data(), nullptr, nullptr, 0, counts.data(), n, ctrl);
    });
    CHECK(ctrl[kCtrlStatus] == 0, "find all: status %llu", ctrl[kCtrlStatus]);
    std::vector<uint64_t> offs(n + 1, 0);
    for (uint64_t i = 0; i < n; ++i) offs[i + 1] = offs[i] + counts[i];
    std::vector<V> vals(offs[n] + 1);
    memset(ctrl, 0, 8 * sizeof(*ctrl));
    emu::launch(grid, block, [&] {
      k.findall(heads, buckets, 0x2545f491, pool, keys.data(), offs.data(), vals.data(), vals.size(), again.data(), n, ctrl);
    });
    CHECK(ctrl[kCtrlStatus] == 0, "find all: status %llu", ctrl[kCtrlStatus]);
    for (uint64_t i = 0; i < n; ++i) {
      CHECK(again[i] == counts[i], "find all: key %#llx counted %u, then %u", (unsigned long long)keys[i], counts[i],
            again[i]);
      out[i].assign(vals.begin() + offs[i], vals.begin() + offs[i] + std::min(again[i], counts[i]));
    }
    return out;
  }

  void flush() {
    memset(ctrl, 0, 8 * sizeof(*ctrl));
    emu::launch(grid, block, [&] { k.flush(heads, buckets, pool, ctrl); });
    CHECK(ctrl[kCtrlStatus] == 0, "flush status %llu", ctrl[kCtrlStatus]);
    CHECK(pool->used == count_bits(), "after flush: pool counter %llu, bitmaps %llu", pool->used,
          (unsigned long long)count_bits());
  }
};

template <typename K>
static K key_of(uint64_t i) {
  // Spread over the key range, including the neighbours of the sentinels.
  if (i == 0) return 0;
  if (i == 1) return (K)(~K(0) - 2);
  uint64_t z = i * 0x9e3779b97f4a7c15ull;
  z ^= z >> 29;
  K k = (K)z;
  if (k >= (K)(~K(0) - 1)) k = (K)i;
  return k;
}

// Unique: a Map or Set against std::map, batches of distinct keys (exact
// results) and batches with repeats (per-key linearizability).
template <class L>
static void test_unique(const char* name, Kernels<typename L::K, typename L::V> kk, uint32_t buckets, int rounds,
                        int batch, int keyspace, bool repeats, uint64_t seed) {
  using K = typename L::K;
  using V = typename L::V;
  const bool is_set = L::kIsSet;
  Table<L> t(kk, buckets, 4, 1);
  std::mt19937_64 rng(seed);
  std::map<K, V> model;
  for (int round = 0; round < rounds; ++round) {
    std::vector<K> keys;
    std::vector<V> vals, in;
    std::vector<uint8_t> ops, res;
    std::map<uint64_t, int> used;
    for (int i = 0; i < batch; ++i) {
      uint64_t ki = rng() % keyspace;
      if (used[ki] == (repeats ? 5 : 1)) continue;  // the checker tries every order of up to 5
      ++used[ki];
      keys.push_back(key_of<K>(ki));
      const int r = (int)(rng() % 10);
      const int mix = round % 3;  // insert-heavy, balanced, delete-heavy
      const int ins = mix == 0 ? 6 : mix == 1 ? 4 : 2, del = mix == 2 ? 5 : 3;
      ops.push_back(r < ins ? kOpInsert : r < ins + del ? kOpDelete : kOpFind);
      vals.push_back((V)(rng() | 1));
    }
    in = vals;
    const uint32_t st = t.apply(keys, vals, &ops, 0, res, nullptr);
    CHECK(st == 0, "%s round %d: status %#x", name, round, st);
    const long long delta = (long long)t.ctrl[kCtrlDelta];
    long long want_delta = 0, want_ins = 0;
    if (!repeats) {
      for (size_t i = 0; i < keys.size(); ++i) {
        auto it = model.find(keys[i]);
        const bool present = it != model.end();
        uint8_t want;
        switch (ops[i]) {
          case kOpInsert:
            want = present ? kResPresent : kResInserted;
            if (!present) ++want_delta, ++want_ins;
            if (!is_set || !present) model[keys[i]] = is_set ? V(0) : in[i];
            break;
          case kOpDelete:
            want = present ? kResRemoved : kResNotFound;
            if (present) --want_delta, model.erase(it);
            break;
          default:
            want = present ? kResFound : kResNotFound;
            if (present && !is_set)
              CHECK(vals[i] == it->second, "%s round %d: find %#llx = %#llx, want %#llx", name, round,
                    (unsigned long long)keys[i], (unsigned long long)vals[i], (unsigned long long)it->second);
        }
        CHECK(res[i] == want, "%s round %d: element %zu (op %d key %#llx): result %d, want %d", name, round, i, ops[i],
              (unsigned long long)keys[i], res[i], want);
      }
      CHECK(delta == want_delta, "%s round %d: delta %lld, want %lld", name, round, delta, want_delta);
      CHECK((long long)t.ctrl[kCtrlInserted] == want_ins, "%s round %d: inserted %llu, want %lld", name, round,
            t.ctrl[kCtrlInserted], want_ins);
    } else {
      // Per key: some order of its elements explains every result and the
      // state after the batch (read back with a find batch).
      std::map<K, std::vector<size_t>> by;
      for (size_t i = 0; i < keys.size(); ++i) by[keys[i]].push_back(i);
      std::vector<K> q;
      for (auto& kv : by) q.push_back(kv.first);
      std::vector<V> qv;
      std::vector<uint8_t> qr;
      CHECK(t.apply(q, qv, nullptr, kOpFind, qr, nullptr) == 0, "find status");
      size_t qi = 0;
      for (auto& kv : by) {
        const bool post_present = qr[qi] == kResFound;
        const V post_val = qv[qi];
        ++qi;
        auto it = model.find(kv.first);
        const bool pre_present = it != model.end();
        const V pre_val = pre_present ? it->second : V(0);
        std::vector<size_t> es = kv.second;
        std::sort(es.begin(), es.end());
        bool ok = false;
        do {
          bool p = pre_present;
          V v = pre_val;
          bool good = true;
          for (size_t e : es) {
            uint8_t want;
            switch (ops[e]) {
              case kOpInsert:
                want = p ? kResPresent : kResInserted;
                if (!is_set || !p) v = is_set ? V(0) : in[e];
                p = true;
                break;
              case kOpDelete:
                want = p ? kResRemoved : kResNotFound;
                p = false;
                break;
              default:
                want = p ? kResFound : kResNotFound;
                if (p && !is_set && vals[e] != v) good = false;
            }
            if (res[e] != want) good = false;
            if (!good) break;
          }
          if (good && p == post_present && (!p || is_set || v == post_val)) ok = true;
        } while (!ok && std::next_permutation(es.begin(), es.end()));
        CHECK(ok, "%s round %d: key %#llx: no order of its %zu elements explains the results", name, round,
              (unsigned long long)kv.first, es.size());
        for (size_t e : es) {
          if (res[e] == kResInserted) ++want_delta;
          if (res[e] == kResRemoved) --want_delta;
        }
        if (post_present) model[kv.first] = is_set ? V(0) : post_val;
        else model.erase(kv.first);
      }
      CHECK(delta == want_delta, "%s round %d: delta %lld, results say %lld", name, round, delta, want_delta);
    }
    if (round % 4 == 3) t.flush();
    if (round % 3 == 2 || round == rounds - 1) {
      auto snap = t.snapshot();
      CHECK(snap.size() == model.size(), "%s round %d: snapshot has %zu entries, model %zu", name, round, snap.size(),
            model.size());
      std::set<K> seen;
      for (auto& kv : snap) {
        CHECK(!seen.count(kv.first), "%s: key %#llx twice", name, (unsigned long long)kv.first);
        seen.insert(kv.first);
        auto it = model.find(kv.first);
        CHECK(it != model.end() && (is_set || it->second == kv.second), "%s round %d: snapshot key %#llx stale", name,
              round, (unsigned long long)kv.first);
      }
    }
  }
}

// multi_batch draws a multimap batch of up to batch elements over keyspace
// keys, at most per_key on one key: half inserts, then delete-ones,
// delete-alls and counts (finds), each with a non-zero value.
template <class K, class V>
static void multi_batch(std::mt19937_64& rng, int batch, int keyspace, int per_key, std::vector<K>& keys,
                        std::vector<uint8_t>& ops, std::vector<V>& vals) {
  std::map<uint64_t, int> used;
  for (int i = 0; i < batch; ++i) {
    uint64_t ki = rng() % keyspace;
    if (used[ki] == per_key) continue;
    ++used[ki];
    keys.push_back(key_of<K>(ki));
    const int r = (int)(rng() % 10);
    ops.push_back(r < 5 ? kOpInsert : r < 7 ? kOpDelete : r < 8 ? kOpDeleteAll : kOpFind);
    vals.push_back((V)(rng() | 1));
  }
}

// Multi: a MultiMap against a map of value lists, distinct keys per batch.
template <class L>
static void test_multi(const char* name, Kernels<typename L::K, typename L::V> kk, uint32_t buckets, int rounds,
                       int batch, int keyspace, uint64_t seed) {
  using K = typename L::K;
  using V = typename L::V;
  Table<L> t(kk, buckets, 4, 1);
  std::mt19937_64 rng(seed);
  std::map<K, std::deque<V>> model;
  size_t total = 0;
  for (int round = 0; round < rounds; ++round) {
    std::vector<K> keys;
    std::vector<V> vals, in;
    std::vector<uint8_t> ops, res;
    std::vector<uint32_t> counts;
    multi_batch(rng, batch, keyspace, 1, keys, ops, vals);
    in = vals;
    CHECK(t.apply(keys, vals, &ops, 0, res, &counts) == 0, "%s: status", name);
    for (size_t i = 0; i < keys.size(); ++i) {
      auto& vs = model[keys[i]];
      uint8_t want;
      uint32_t wc = 0;
      switch (ops[i]) {
        case kOpInsert:
          want = kResInserted;
          vs.push_back(in[i]);
          ++total;
          break;
        case kOpDelete:
          want = vs.empty() ? kResNotFound : kResRemoved;
          wc = vs.empty() ? 0 : 1;
          if (!vs.empty()) vs.pop_front(), --total;
          break;
        case kOpDeleteAll:
          wc = (uint32_t)vs.size();
          want = wc ? kResRemoved : kResNotFound;
          total -= vs.size();
          vs.clear();
          break;
        default:
          wc = (uint32_t)vs.size();
          want = wc ? kResFound : kResNotFound;
      }
      CHECK(res[i] == want && counts[i] == wc, "%s round %d: element %zu op %d: result %d count %u, want %d %u", name,
            round, i, ops[i], res[i], counts[i], want, wc);
    }
    if (round % 4 == 3) t.flush();
    auto snap = t.snapshot();
    CHECK(snap.size() == total, "%s round %d: snapshot %zu, model %zu", name, round, snap.size(), total);
    std::map<K, std::multiset<V>> got;
    for (auto& kv : snap) got[kv.first].insert(kv.second);
    for (auto& kv : model) {
      std::multiset<V> want(kv.second.begin(), kv.second.end());
      CHECK(got[kv.first] == want, "%s round %d: key %#llx values differ", name, round, (unsigned long long)kv.first);
    }
    // Search-all: each key's values oldest first (one insert per key and
    // batch, so the order is defined), also after flushes.
    std::vector<K> mk;
    for (auto& kv : model) mk.push_back(kv.first);
    auto fa = t.find_all(mk);
    for (size_t i = 0; i < mk.size(); ++i) {
      const auto& want = model[mk[i]];
      CHECK(fa[i].size() == want.size() && std::equal(fa[i].begin(), fa[i].end(), want.begin()),
            "%s round %d: search-all of key %#llx: %zu values, want %zu in insertion order", name, round,
            (unsigned long long)mk[i], fa[i].size(), want.size());
    }
  }
}

// MultiRepeats: a MultiMap with up to four elements per key in a batch, of
// any kinds (insert, delete-one, delete-all, count), checked per key against
// the package's contract (doc.go): inserts, delete-ones and a lone
// delete-all are linearizable, so some order of them explains their results
// and the values left (read back with search-all); counts walk the list
// without a snapshot, so each count lies between the pairs present
// throughout and the pairs present at any time. With two delete-alls the
// check is what they guarantee: every pair is removed at most once, by one
// element, and no pair that was there before survives.
template <class L>
static void test_multi_repeats(const char* name, Kernels<typename L::K, typename L::V> kk, uint32_t buckets,
                               int rounds, int batch, int keyspace, uint64_t seed) {
  using K = typename L::K;
  using V = typename L::V;
  Table<L> t(kk, buckets, 4, 1);
  std::mt19937_64 rng(seed);
  std::map<K, std::deque<V>> model;
  size_t total = 0;
  for (int round = 0; round < rounds; ++round) {
    std::vector<K> keys;
    std::vector<V> vals, in;
    std::vector<uint8_t> ops, res;
    std::vector<uint32_t> counts;
    multi_batch(rng, batch, keyspace, 4, keys, ops, vals);
    in = vals;
    CHECK(t.apply(keys, vals, &ops, 0, res, &counts) == 0, "%s: status", name);
    const long long delta = (long long)t.ctrl[kCtrlDelta];
    std::map<K, std::vector<size_t>> by;
    for (size_t i = 0; i < keys.size(); ++i) by[keys[i]].push_back(i);
    std::vector<K> q;
    for (auto& kv : by) q.push_back(kv.first);
    auto post = t.find_all(q);
    long long want_delta = 0;
    size_t qi = 0;
    for (auto& kv : by) {
      const std::deque<V> pre = model[kv.first];
      const std::vector<V>& after = post[qi++];
      std::vector<size_t> es = kv.second;
      std::sort(es.begin(), es.end());
      // Pairs ever present during the batch, pairs present throughout (those
      // of pre still there after: pairs never come back), and what counts
      // may see: at least the latter, at most the former.
      std::multiset<V> all(pre.begin(), pre.end()), ins, left(after.begin(), after.end()), kept;
      std::multiset<V> pre_set(pre.begin(), pre.end());
      std::set_intersection(pre_set.begin(), pre_set.end(), left.begin(), left.end(),
                            std::inserter(kept, kept.begin()));
      std::vector<size_t> changers;  // elements that may change the key: all but counts
      int n_all = 0;
      bool ok = true;
      for (size_t e : es) {
        if (ops[e] == kOpInsert) all.insert(in[e]), ins.insert(in[e]);
        n_all += ops[e] == kOpDeleteAll;
        if (ops[e] != kOpFind) changers.push_back(e);
      }
      for (size_t e : es)
        if (ops[e] == kOpFind)
          ok &= (res[e] == kResFound) == (counts[e] > 0) && (res[e] == kResFound || res[e] == kResNotFound) &&
                counts[e] >= kept.size() && counts[e] <= all.size();
      if (n_all <= 1) {
        // Inserts, delete-ones and one delete-all are linearizable: some
        // order of them explains their results and the pairs left.
        bool found = false;
        do {
          std::deque<V> vs = pre;
          bool good = true;
          for (size_t e : changers) {
            uint8_t want;
            uint32_t wc = 0;
            switch (ops[e]) {
              case kOpInsert:
                want = kResInserted;
                vs.push_back(in[e]);
                break;
              case kOpDelete:
                want = vs.empty() ? kResNotFound : kResRemoved;
                wc = vs.empty() ? 0 : 1;
                if (!vs.empty()) vs.pop_front();
                break;
              default:  // delete-all
                wc = (uint32_t)vs.size();
                want = wc ? kResRemoved : kResNotFound;
                vs.clear();
            }
            if (res[e] != want || counts[e] != wc) {
              good = false;
              break;
            }
          }
          if (good) found = std::multiset<V>(vs.begin(), vs.end()) == left;
        } while (!found && std::next_permutation(changers.begin(), changers.end()));
        ok &= found;
      } else {
        // Two delete-alls: every pair is removed at most once, by one
        // element, and none of pre survives.
        size_t removed = 0;
        ok &= std::includes(ins.begin(), ins.end(), left.begin(), left.end());
        for (size_t e : changers) {
          switch (ops[e]) {
            case kOpInsert:
              ok &= res[e] == kResInserted;
              break;
            case kOpDelete:
              ok &= (res[e] == kResRemoved && counts[e] == 1) || (res[e] == kResNotFound && counts[e] == 0);
              removed += counts[e];
              break;
            default:
              ok &= (res[e] == kResRemoved) == (counts[e] > 0) && (res[e] == kResRemoved || res[e] == kResNotFound);
              removed += counts[e];
          }
        }
        ok &= all.size() == left.size() + removed;
      }
      CHECK(ok, "%s round %d: key %#llx: no order of its %zu elements explains the results", name, round,
            (unsigned long long)kv.first, es.size());
      if (!ok) {
        fprintf(stderr, "  before:");
        for (V v : pre) fprintf(stderr, " %llx", (unsigned long long)v);
        fprintf(stderr, "\n  after:");
        for (V v : after) fprintf(stderr, " %llx", (unsigned long long)v);
        fprintf(stderr, "\n");
        for (size_t e : es)
          fprintf(stderr, "  element %zu: op %d value %llx: result %d count %u\n", e, ops[e],
                  (unsigned long long)in[e], res[e], counts[e]);
      }
      for (size_t e : es) {
        if (res[e] == kResInserted) ++want_delta;
        if (res[e] == kResRemoved) want_delta -= counts[e];
      }
      total = total - pre.size() + after.size();
      model[kv.first] = std::deque<V>(after.begin(), after.end());
    }
    CHECK(delta == want_delta, "%s round %d: delta %lld, results say %lld", name, round, delta, want_delta);
    if (round % 4 == 3) t.flush();
    CHECK(t.snapshot().size() == total, "%s round %d: snapshot size, model %zu", name, round, total);
  }
}

// Exhaustion: a pool of one memory block fills up; the failed inserts are
// marked, the rest applied; after the pool grows, a rerun of just the
// failed elements applies them.
template <class L>
static void test_exhaustion(const char* name, Kernels<typename L::K, typename L::V> kk) {
  using K = typename L::K;
  using V = typename L::V;
  Table<L> t(kk, 64, 1, 1);  // 64 buckets, a pool of 1024 slabs
  const size_t n = (size_t)L::kSlots * 1200;
  std::vector<K> keys;
  std::vector<V> vals;
  for (size_t i = 0; i < n; ++i) keys.push_back(key_of<K>(i + 7)), vals.push_back((V)i);
  std::vector<V> in = vals;
  std::vector<uint8_t> res;
  uint32_t st = t.apply(keys, vals, nullptr, kOpInsert, res, nullptr);
  size_t ins = 0, fail = 0;
  for (auto r : res) ins += r == kResInserted, fail += r == kResFailed;
  CHECK(st & wk::kStatusPoolExhausted, "%s: status %#x after overfilling the pool", name, st);
  CHECK(ins + fail == n && fail > 0 && ins > 0, "%s: %zu inserted, %zu failed of %zu", name, ins, fail, n);
  CHECK((size_t)t.ctrl[kCtrlFailed] == fail, "%s: control block says %llu failed, results %zu", name,
        t.ctrl[kCtrlFailed], fail);
  t.grow();
  vals = in;
  st = t.apply(keys, vals, nullptr, kOpInsert, res, nullptr, kFlagRetry);
  size_t ins2 = 0;
  for (auto r : res) ins2 += r == kResInserted;
  CHECK(st == 0 && ins2 == n, "%s: after growing, status %#x, %zu of %zu inserted", name, st, ins2, n);
  auto snap = t.snapshot();
  CHECK(snap.size() == n, "%s: snapshot %zu, want %zu", name, snap.size(), n);
  // Bad op codes fail their elements only.
  std::vector<K> k2 = {key_of<K>(1 << 20), key_of<K>(1 << 21)};
  std::vector<V> v2 = {1, 2};
  std::vector<uint8_t> o2 = {kOpInsert, 9}, r2;
  st = t.apply(k2, v2, &o2, 0, r2, nullptr);
  CHECK((st & kStatusBadOp) && r2[0] == kResInserted && r2[1] == kResFailed, "%s: bad op: status %#x results %d %d",
        name, st, r2[0], r2[1]);
  // A find batch checked in the kernel: the sentinel fails, the others find.
  std::vector<K> k3 = {keys[0], (K)~K(0), keys[1], (K)(~K(0) - 1), k2[0]};
  std::vector<V> v3;
  std::vector<uint8_t> r3;
  st = t.apply(k3, v3, nullptr, kOpFind, r3, nullptr, kFlagCheckKeys);
  CHECK((st & kStatusReservedKey) && r3[0] == kResFound && r3[1] == kResFailed && r3[2] == kResFound &&
            r3[3] == kResFailed && r3[4] == kResFound && t.ctrl[kCtrlFailed] == 2,
        "%s: find with sentinels: status %#x results %d %d %d %d %d, %llu failed", name, st, r3[0], r3[1], r3[2], r3[3],
        r3[4], t.ctrl[kCtrlFailed]);
  if (!L::kIsSet) CHECK(v3[0] == in[0] && v3[2] == in[1], "%s: find with sentinels: values", name);
}

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string(argv[1]) == "quick";
  const int rounds = quick ? 5 : 12;
  // Few buckets (lists of tens of slabs, many races per slab), then short lists.
  for (uint32_t buckets : {5u, 400u}) {
    const int keys = buckets == 5 ? 700 : 3000, few = buckets == 5 ? 150 : 600;
    test_unique<L_map_32_32_t8>("map32x32/t8", KERNELS(map_32_32_t8), buckets, rounds, 1200, keys, false, buckets);
    test_unique<L_map_32_32_t8>("map32x32/t8 repeats", KERNELS(map_32_32_t8), buckets, rounds, 1200, few, true, 3);
    test_unique<L_map_32_32_t16>("map32x32/t16", KERNELS(map_32_32_t16), buckets, rounds, 1200, keys, false, 4);
    test_unique<L_map_32_32_paper>("map32x32/paper", KERNELS(map_32_32_paper), buckets, rounds, 600, keys, false, 5);
    test_unique<L_map_32_32_paper>("map32x32/paper repeats", KERNELS(map_32_32_paper), buckets, rounds, 600, few, true,
                                   5);
    test_unique<L_map_32_64_t8>("map32x64/t8", KERNELS(map_32_64_t8), buckets, rounds, 1200, keys, false, 6);
    test_unique<L_map_32_64_t8>("map32x64/t8 repeats", KERNELS(map_32_64_t8), buckets, rounds, 1200, few, true, 7);
    test_unique<L_map_64_64_t16>("map64x64/t16", KERNELS(map_64_64_t16), buckets, rounds, 1200, keys, false, 8);
    test_unique<L_set_32_t8>("set32/t8", KERNELS(set_32_t8), buckets, rounds, 1200, keys, false, 9);
    test_unique<L_set_32_t8>("set32/t8 repeats", KERNELS(set_32_t8), buckets, rounds, 1200, few, true, 10);
    test_unique<L_set_64_t16>("set64/t16", KERNELS(set_64_t16), buckets, rounds, 1200, keys, false, 11);
    test_unique<L_set_32_t32>("set32/t32", KERNELS(set_32_t32), buckets, rounds, 600, keys, false, 12);
    test_multi<L_multi_32_32_t8>("multi32x32/t8", KERNELS(multi_32_32_t8), buckets, rounds, 1000, few, 13);
    test_multi<L_multi_64_32_t16>("multi64x32/t16", KERNELS(multi_64_32_t16), buckets, rounds, 1000, few, 14);
    test_multi<L_multi_32_32_paper>("multi32x32/paper", KERNELS(multi_32_32_paper), buckets, rounds, 600, few, 15);
    test_multi_repeats<L_multi_32_32_t8>("multi32x32/t8 repeats", KERNELS(multi_32_32_t8), buckets, rounds, 1000,
                                         few / 2, 16);
    test_multi_repeats<L_multi_64_32_t16>("multi64x32/t16 repeats", KERNELS(multi_64_32_t16), buckets, rounds,
                                          1000, few / 2, 17);
    test_multi_repeats<L_multi_32_32_paper>("multi32x32/paper repeats", KERNELS(multi_32_32_paper), buckets,
                                            rounds, 600, few / 2, 18);
  }
  test_exhaustion<L_map_32_32_t8>("exhaustion map32x32/t8", KERNELS(map_32_32_t8));
  test_exhaustion<L_map_32_64_t8>("exhaustion map32x64/t8", KERNELS(map_32_64_t8));
  test_exhaustion<L_set_64_t16>("exhaustion set64/t16", KERNELS(set_64_t16));
  test_exhaustion<L_map_32_32_paper>("exhaustion map32x32/paper", KERNELS(map_32_32_paper));
  if (failures) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  printf("ok\n");
  return 0;
}
