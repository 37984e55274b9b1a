package gpucompact

import (
	"testing"

	"github.com/warpkit/warpkit/internal/kernelgen/ptxcheck"
)

// TestPTXUpToDate: ptx/gpucompact.ptx is what gpucompact.cu and its
// headers give (go generate ./kv/gpucompact).
func TestPTXUpToDate(t *testing.T) { ptxcheck.Check(t, "gpucompact.ptx") }
