package lsm

import _ "embed"

//go:generate go run github.com/warpkit/warpkit/internal/kernelgen -o ptx/lsm.ptx lsm.cu

// lsmPTX holds the LSM's kernels (lsm.cu): batch preparation, lookup,
// successor/predecessor, the count/range stages and cleanup.
//
//go:embed ptx/lsm.ptx
var lsmPTX []byte
