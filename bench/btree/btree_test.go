package btreebench

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/warpkit/warpkit/bench/internal/benchtest"
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

// TestBenchBTreeUsage: bad flags are usage errors.
func TestBenchBTreeUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--backend", "cpu", "--keys", "48"}, {"--keys", "x"}, {"--sizes", "x"}, {"--sizes", "1K,"}, {"--backend", "tpu"},
		{"--plot"}, {"--quick=maybe"}, {"--no-such-flag"},
	} {
		if err := Run(t.Context(), args, io.Discard); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}

// btreeTables are the tables of a run, in order.
var btreeTables = []string{"Fig. 2: queries on a bulk-built tree", "Targets (harmonic mean", "Table 3: incremental inserts",
	"Fig. 3: bulk rebuild", "Fig. 4: deleting x%", "Fig. 5: concurrent mixed batches"}

// TestBenchBTreeCPU runs the benchmark on the CPU backend (as CI does without
// a GPU) with --plot: every table is printed and plotted.
func TestBenchBTreeCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("seconds on the CPU backend: its insert and delete sizes are fixed")
	}
	dir := filepath.Join(t.TempDir(), "plots")
	var out bytes.Buffer
	if err := Run(t.Context(), []string{"--backend", "cpu", "--sizes", "1K,4K,1M", "--plot", dir}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	text := out.String()
	last := -1
	for _, want := range btreeTables {
		i := strings.Index(text, want)
		if i < last {
			t.Errorf("output lacks %q, or has it out of order:\n%s", want, text)
		}
		last = max(last, i)
	}
	for _, want := range []string{"device: CPU (no CUDA device)", "Fig. 2: no LSM comparison: no device", "plots: 6 of 6 tables written"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	for _, row := range []string{"1K", "4K"} { // Fig. 2 and Fig. 5 rows (1M is Fig. 3's m too)
		if strings.Count(text, "\n"+strings.Repeat(" ", 10-len(row))+row+" ") != 2 {
			t.Errorf("no Fig. 2 and Fig. 5 rows of %s keys:\n%s", row, text)
		}
	}
	benchtest.CheckPlots(t, dir, len(btreeTables))
}

// TestGPUBenchBTree runs a quick GPU benchmark (skipped without a device).
func TestGPUBenchBTree(t *testing.T) {
	benchtest.NeedGPU(t)
	var out bytes.Buffer
	if err := Run(t.Context(), []string{"--backend", "cuda", "--quick", "--sizes", "64K,1M"}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range btreeTables {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
