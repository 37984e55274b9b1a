package sortedarray

import _ "embed"

//go:generate go run github.com/warpkit/warpkit/internal/kernelgen -o sortedarray.ptx sortedarray.cu

// saPTX holds the sorted array's kernels (sortedarray.cu).
//
//go:embed sortedarray.ptx
var saPTX []byte
