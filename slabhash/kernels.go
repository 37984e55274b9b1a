package slabhash

import _ "embed"

//go:generate go run github.com/warpkit/warpkit/internal/kernelgen -o ptx/kv32x32.ptx -DWK_WIDTH=WK_KV32X32 slabhash.cu
//go:generate go run github.com/warpkit/warpkit/internal/kernelgen -o ptx/kv32x64.ptx -DWK_WIDTH=WK_KV32X64 slabhash.cu
//go:generate go run github.com/warpkit/warpkit/internal/kernelgen -o ptx/kv64x32.ptx -DWK_WIDTH=WK_KV64X32 slabhash.cu
//go:generate go run github.com/warpkit/warpkit/internal/kernelgen -o ptx/kv64x64.ptx -DWK_WIDTH=WK_KV64X64 slabhash.cu
//go:generate go run github.com/warpkit/warpkit/internal/kernelgen -o ptx/set.ptx -DWK_WIDTH=WK_SET slabhash.cu

// One module per key/value width (and one for sets), so a table loads and
// JIT-compiles only the kernels of its own types.
var (
	//go:embed ptx/kv32x32.ptx
	kv32x32PTX []byte
	//go:embed ptx/kv32x64.ptx
	kv32x64PTX []byte
	//go:embed ptx/kv64x32.ptx
	kv64x32PTX []byte
	//go:embed ptx/kv64x64.ptx
	kv64x64PTX []byte
	//go:embed ptx/set.ptx
	setPTX []byte
)

// modulePTX returns the PTX of a module named by geometry.module.
func modulePTX(name string) []byte {
	return map[string][]byte{
		"kv32x32": kv32x32PTX, "kv32x64": kv32x64PTX, "kv64x32": kv64x32PTX, "kv64x64": kv64x64PTX, "set": setPTX,
	}[name]
}
