package gpucompact

import _ "embed"

//go:generate go run github.com/warpkit/warpkit/internal/kernelgen -o ptx/gpucompact.ptx gpucompact.cu

// gpucompactPTX holds the CUDA engine's kernels (gpucompact.cu): iota,
// merge_round, gc_flags, apply_checks, entry_sizes.
//
//go:embed ptx/gpucompact.ptx
var gpucompactPTX []byte
