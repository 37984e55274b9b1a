// kv64x64.cu: slab hash kernels for 64-bit keys and 64-bit values (wide pairs:
// 16-byte slots, values published after the key is claimed), with 8- and
// 16-lane tiles (128- and 256-byte slabs).
#include "slabhash.cuh"

SH_TABLE(map_64_64_t8, uint64_t, uint64_t, wk::sh::kMap, 8, false)
SH_TABLE(map_64_64_t16, uint64_t, uint64_t, wk::sh::kMap, 16, false)
SH_TABLE(multi_64_64_t8, uint64_t, uint64_t, wk::sh::kMulti, 8, false)
SH_TABLE(multi_64_64_t16, uint64_t, uint64_t, wk::sh::kMulti, 16, false)
SH_SCAN(k64, uint64_t)
