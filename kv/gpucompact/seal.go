package gpucompact

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/klauspost/compress/s2"
)

// sealCanarySum is the SHA-256 of s2.EncodeSnappy(sealCanary()) as s2's
// amd64 assembly encoders write it, which are the bytes the device's
// encoder writes (internal/devcode/snappy.cuh). s2's pure-Go encoder, used
// on other architectures and with the noasm build tag, finds other matches
// (its output for the canary is 2,411 bytes, not 2,447): device sealing
// would then differ from the host's: SealAuto seals on the host, and New
// refuses SealOnDevice.
const sealCanarySum = "e11e927d581a94f51e2051d346545523b6ae0e977edddbbd165f1c1262df7b6c"

// sealCanary is 6,000 bytes of text-like records (s2's 12-bit table, where
// the assembly and Go encoders part).
func sealCanary() []byte {
	var b []byte
	x := uint32(1)
	words := []string{"user", "account", "balance", "status=ok", "region-eu", "value", "2026-12-02"}
	for len(b) < 6000 {
		x = x*1664525 + 1013904223
		b = fmt.Appendf(b, "%s%05d:%s;", words[x%7], (x>>8)%5000, words[(x>>16)%7])
	}
	return b[:6000]
}

// hostSealsAsDevice reports whether this process's s2 Snappy encoder writes
// the device's bytes (the canary's sum).
var hostSealsAsDevice = sync.OnceValue(func() bool {
	sum := sha256.Sum256(s2.EncodeSnappy(nil, sealCanary()))
	return hex.EncodeToString(sum[:]) == sealCanarySum
})
