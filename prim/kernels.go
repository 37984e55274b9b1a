package prim

import _ "embed"

//go:generate go run github.com/warpkit/warpkit/internal/kernelgen -o ptx/prim.ptx prim.cu

// primPTX holds every prim kernel. Names: <kernel>_k{32,64}[_v{0,32,64}]
// for key and value widths in bits (v0: keys only), scan_*_{32,64} by element
// width; see prim.cu.
//
//go:embed ptx/prim.ptx
var primPTX []byte
