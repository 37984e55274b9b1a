package oahash

import _ "embed"

//go:generate go run github.com/warpkit/warpkit/internal/kernelgen -o oahash.ptx oahash.cu

//go:embed oahash.ptx
var oahashPTX []byte
