package btreebench

import (
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/warpkit/warpkit/internal/cli"
)

func TestParseSizes(t *testing.T) {
	got, err := parseSizes("1K, 2M,4096")
	if err != nil || !slices.Equal(got, []int{1 << 10, 2 << 20, 4096}) {
		t.Fatalf("parseSizes: %v, %v", got, err)
	}
	// Sizes the benchmarks cannot run (ranges of 8 keys draw from n-8
	// positions) and malformed ones are usage errors, not panics later.
	for _, bad := range []string{"8", "1", "1023", "0", "-5", "x", "1G", ""} {
		if _, err := parseSizes(bad); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("parseSizes(%q): %v, want a usage error", bad, err)
		}
	}
}

func TestBenchBTreeRejectsSizesTooLargeForKeys(t *testing.T) {
	err := Run(t.Context(), []string{"--backend", "cpu", "--sizes", "2048M"}, io.Discard)
	if !errors.Is(err, cli.ErrUsage) {
		t.Fatalf("32-bit keys with 2^31 keys: %v, want a usage error", err)
	}
}
