// kv32x32.cu: slab hash kernels for 32-bit keys and 32-bit values: the
// paper's layout (a warp per 128-byte slab, one word per lane) and pair
// layouts with 8- and 16-lane tiles (64- and 128-byte slabs).
#include "slabhash.cuh"

SH_TABLE(map_32_32_paper, uint32_t, uint32_t, wk::sh::kMap, 32, true)
SH_TABLE(map_32_32_t8, uint32_t, uint32_t, wk::sh::kMap, 8, false)
SH_TABLE(map_32_32_t16, uint32_t, uint32_t, wk::sh::kMap, 16, false)
SH_TABLE(multi_32_32_paper, uint32_t, uint32_t, wk::sh::kMulti, 32, true)
SH_TABLE(multi_32_32_t8, uint32_t, uint32_t, wk::sh::kMulti, 8, false)
SH_TABLE(multi_32_32_t16, uint32_t, uint32_t, wk::sh::kMulti, 16, false)
SH_SCAN(k32, uint32_t)
