package gpucompact

import _ "embed"

//go:generate go run github.com/warpkit/warpkit/internal/kernelgen -o ptx/gpucompact.ptx gpucompact.cu

// gpucompactPTX holds the CUDA engine's kernels (gpucompact.cu): decode
// (inflate_blocks, block_intervals, scan_intervals, decode_intervals),
// merge (merge_round), gc (gc_flags, apply_checks), entry_sizes,
// block_ends, encode_blocks and encode_seal_blocks (with the tables'
// filters; the second seals each block as it builds it), and seal_blocks
// (the sealing alone, which TestCUDASealBlocks drives).
//
//go:embed ptx/gpucompact.ptx
var gpucompactPTX []byte
