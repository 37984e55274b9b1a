package primbench

import (
	"errors"
	"strings"
	"testing"

	"github.com/warpkit/warpkit/internal/cli"
)

// TestBenchPrimMemory checks the device-memory bound on --log2n: 2^30
// elements (about 100 GiB) do not fit an 80 GB H100, 2^29 do, and the
// message names the largest size that fits.
func TestBenchPrimMemory(t *testing.T) {
	const h100Free = 79 << 30
	if err := checkPrimBenchMemory(29, h100Free); err != nil {
		t.Errorf("2^29 on an H100: %v", err)
	}
	err := checkPrimBenchMemory(30, h100Free)
	if !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), "at most --log2n 29") {
		t.Errorf("2^30 on an H100: %v, want a usage error naming --log2n 29", err)
	}
	if err := checkPrimBenchMemory(30, 140<<30); err != nil {
		t.Errorf("2^30 on an H200: %v", err)
	}
	if err := checkPrimBenchMemory(26, 1<<30); !errors.Is(err, cli.ErrUsage) {
		t.Errorf("2^26 in 1 GiB: %v, want a usage error", err)
	}
}
