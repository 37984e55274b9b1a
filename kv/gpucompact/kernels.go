package gpucompact

import _ "embed"

//go:generate go run github.com/warpkit/warpkit/internal/kernelgen -o ptx/gpucompact.ptx gpucompact.cu

// gpucompactPTX holds the CUDA engine's kernels (gpucompact.cu): decode
// (block_intervals, scan_intervals, decode_intervals, job_lcp, set_k0),
// merge (iota, merge_round), gc (gc_flags, apply_checks), entry_sizes,
// block_ends and encode_blocks.
//
//go:embed ptx/gpucompact.ptx
var gpucompactPTX []byte
