package graph

import (
	"testing"

	"github.com/warpkit/warpkit/internal/kernelgen/ptxcheck"
)

// TestPTXUpToDate: ptx/graph.ptx is what graph.cu and its headers give
// (go generate ./graph).
func TestPTXUpToDate(t *testing.T) { ptxcheck.Check(t, "graph.ptx") }
