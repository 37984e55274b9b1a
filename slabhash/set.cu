// set.cu: slab hash set kernels (keys only). 32-bit keys: 8-, 16- and 32-lane
// tiles (32-, 64- and 128-byte slabs; the last is the paper's key-only slab);
// 64-bit keys: 8- and 16-lane tiles (64- and 128-byte slabs).
#include "slabhash.cuh"

SH_TABLE(set_32_t8, uint32_t, uint32_t, wk::sh::kSet, 8, false)
SH_TABLE(set_32_t16, uint32_t, uint32_t, wk::sh::kSet, 16, false)
SH_TABLE(set_32_t32, uint32_t, uint32_t, wk::sh::kSet, 32, false)
SH_TABLE(set_64_t8, uint64_t, uint32_t, wk::sh::kSet, 8, false)
SH_TABLE(set_64_t16, uint64_t, uint32_t, wk::sh::kSet, 16, false)
SH_SCAN(k32, uint32_t)
SH_SCAN(k64, uint64_t)
