package slaballoc

import _ "embed"

//go:generate go run github.com/warpkit/warpkit/internal/kernelgen -o ptx/slaballoc.ptx slaballoc.cu

// slaballocPTX holds the host-API kernels (bulk allocate and free, bitmap
// counting) and the bump-allocator baseline.
//
//go:embed ptx/slaballoc.ptx
var slaballocPTX []byte
