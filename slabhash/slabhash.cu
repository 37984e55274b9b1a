// slabhash.cu: the slab hash kernels, one module per key/value width (and one
// for sets), so that a table loads and JIT-compiles only the kernels of its own
// types. kernels.go compiles this file once per module, WK_WIDTH naming the
// module (-DWK_WIDTH=WK_KV32X64 builds ptx/kv32x64.ptx); the modules are named
// as geometry.module names them (options.go).
#include "slabhash.cuh"

#define WK_KV32X32 1
#define WK_KV32X64 2
#define WK_KV64X32 3
#define WK_KV64X64 4
#define WK_SET 5

#if WK_WIDTH == WK_KV32X32
// 32-bit keys and 32-bit values: the paper's layout (a warp per 128-byte
// slab, one word per lane) and pair layouts with 8- and 16-lane tiles (64- and
// 128-byte slabs).
SH_TABLE(map_32_32_paper, uint32_t, uint32_t, wk::sh::kMap, 32, true)
SH_TABLE(map_32_32_t8, uint32_t, uint32_t, wk::sh::kMap, 8, false)
SH_TABLE(map_32_32_t16, uint32_t, uint32_t, wk::sh::kMap, 16, false)
SH_TABLE(multi_32_32_paper, uint32_t, uint32_t, wk::sh::kMulti, 32, true)
SH_TABLE(multi_32_32_t8, uint32_t, uint32_t, wk::sh::kMulti, 8, false)
SH_TABLE(multi_32_32_t16, uint32_t, uint32_t, wk::sh::kMulti, 16, false)
SH_SCAN(k32, uint32_t)

#elif WK_WIDTH == WK_KV32X64
// 32-bit keys and 64-bit values (wide pairs: 16-byte slots, values published
// after the key is claimed), with 8- and 16-lane tiles (128- and 256-byte
// slabs).
SH_TABLE(map_32_64_t8, uint32_t, uint64_t, wk::sh::kMap, 8, false)
SH_TABLE(map_32_64_t16, uint32_t, uint64_t, wk::sh::kMap, 16, false)
SH_TABLE(multi_32_64_t8, uint32_t, uint64_t, wk::sh::kMulti, 8, false)
SH_TABLE(multi_32_64_t16, uint32_t, uint64_t, wk::sh::kMulti, 16, false)
SH_SCAN(k32, uint32_t)

#elif WK_WIDTH == WK_KV64X32
// 64-bit keys and 32-bit values (wide pairs: 16-byte slots, values published
// after the key is claimed), with 8- and 16-lane tiles (128- and 256-byte
// slabs).
SH_TABLE(map_64_32_t8, uint64_t, uint32_t, wk::sh::kMap, 8, false)
SH_TABLE(map_64_32_t16, uint64_t, uint32_t, wk::sh::kMap, 16, false)
SH_TABLE(multi_64_32_t8, uint64_t, uint32_t, wk::sh::kMulti, 8, false)
SH_TABLE(multi_64_32_t16, uint64_t, uint32_t, wk::sh::kMulti, 16, false)
SH_SCAN(k64, uint64_t)

#elif WK_WIDTH == WK_KV64X64
// 64-bit keys and 64-bit values (wide pairs: 16-byte slots, values published
// after the key is claimed), with 8- and 16-lane tiles (128- and 256-byte
// slabs).
SH_TABLE(map_64_64_t8, uint64_t, uint64_t, wk::sh::kMap, 8, false)
SH_TABLE(map_64_64_t16, uint64_t, uint64_t, wk::sh::kMap, 16, false)
SH_TABLE(multi_64_64_t8, uint64_t, uint64_t, wk::sh::kMulti, 8, false)
SH_TABLE(multi_64_64_t16, uint64_t, uint64_t, wk::sh::kMulti, 16, false)
SH_SCAN(k64, uint64_t)

#elif WK_WIDTH == WK_SET
// Sets (keys only). 32-bit keys: 8-, 16- and 32-lane tiles (32-, 64- and
// 128-byte slabs; the last is the paper's key-only slab); 64-bit keys: 8- and
// 16-lane tiles (64- and 128-byte slabs).
SH_TABLE(set_32_t8, uint32_t, uint32_t, wk::sh::kSet, 8, false)
SH_TABLE(set_32_t16, uint32_t, uint32_t, wk::sh::kSet, 16, false)
SH_TABLE(set_32_t32, uint32_t, uint32_t, wk::sh::kSet, 32, false)
SH_TABLE(set_64_t8, uint64_t, uint32_t, wk::sh::kSet, 8, false)
SH_TABLE(set_64_t16, uint64_t, uint32_t, wk::sh::kSet, 16, false)
SH_SCAN(k32, uint32_t)
SH_SCAN(k64, uint64_t)

#else
#error "slabhash.cu: compile with -DWK_WIDTH=WK_KV32X32, WK_KV32X64, WK_KV64X32, WK_KV64X64 or WK_SET"
#endif
