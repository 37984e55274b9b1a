package sortedarray

import _ "embed"

//go:generate go run github.com/warpkit/warpkit/internal/kernelgen -o ptx/sortedarray.ptx sortedarray.cu

// saPTX holds the sorted array's kernels (sortedarray.cu).
//
//go:embed ptx/sortedarray.ptx
var saPTX []byte
