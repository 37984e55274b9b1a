package graph

import _ "embed"

//go:generate go run github.com/warpkit/warpkit/internal/kernelgen -o ptx/graph.ptx graph.cu
//go:generate go run github.com/warpkit/warpkit/internal/kernelgen/constgen -o shared_gen.go -pkg graph -from graph/shared.cuh -lower shared.cuh

// graphPTX holds the CUDA backend's kernels (graph.cu): the layout-generic
// ones and, per slab layout (set, w32, w64), the slab hash engine over the
// vertices' tables.
//
//go:embed ptx/graph.ptx
var graphPTX []byte
