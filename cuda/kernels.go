package cuda

import _ "embed"

//go:generate go run github.com/warpkit/warpkit/internal/kernelgen -o ptx/selftest.ptx selftest.cu

// selftestPTX holds the package's own kernels: fills, the bandwidth copy,
// saxpy and the argument probe.
//
//go:embed ptx/selftest.ptx
var selftestPTX []byte
