package oahash

import _ "embed"

//go:generate go run github.com/warpkit/warpkit/internal/kernelgen -o ptx/oahash.ptx oahash.cu

//go:embed ptx/oahash.ptx
var oahashPTX []byte
