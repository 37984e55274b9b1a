package primbench

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warpkit/warpkit/bench/internal/benchtest"
	"github.com/warpkit/warpkit/internal/benchfmt"
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

// TestBenchPrimUsage: bad flags are usage errors, the CPU backend's size
// limit included.
func TestBenchPrimUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--log2n", "9"}, {"--log2n", "31"}, {"--log2n", "x"}, {"--reps", "0"}, {"--backend", "tpu"},
		{"--backend", "cpu", "--log2n", "27"}, {"--plot"}, {"--no-such-flag"},
	} {
		if err := Run(t.Context(), args, io.Discard); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}

// primRows are the table's rows: primitive and types.
var primRows = []string{
	"SortKeys u32", "SortKeys u64", "SortPairs u32/u32", "SortPairs u64/u32", "SortPairs u64/u64", "SortKeys bits [0,16) u32",
	"SegmentedSortPairs u32/u32", "SegmentedSortPairs u64/u32", "MergeKeys u32", "MergePairs u32/u32", "MergePairs u64/u64",
	"ExclusiveScan u32", "ExclusiveScan u64", "SelectFlagged (50%) u32", "SelectFlaggedPairs (50%) u32/u32", "SelectFlagged (50%) u64",
	"Multisplit2Pairs u32/u32",
}

// TestBenchPrimCPU times the host twins on the CPU backend (as CI does
// without a GPU): every row of the GPU table, with numbers, and a plot.
func TestBenchPrimCPU(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "plots")
	var out bytes.Buffer
	if err := Run(t.Context(), []string{"--backend", "cpu", "--log2n", "12", "--reps", "1", "--json", "--plot", dir}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	var rep benchfmt.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("not one JSON report: %v\n%s", err, out.String())
	}
	if len(rep.Tables) != 1 || !strings.HasPrefix(rep.Tables[0].Name, "n = 2^12 elements, Go slices") {
		t.Fatalf("tables: %+v", rep.Tables)
	}
	var got []string
	for _, row := range rep.Tables[0].Rows {
		name, _, _ := strings.Cut(row[0].(string), " (")
		if strings.HasPrefix(row[0].(string), "SelectFlagged") || strings.HasPrefix(row[0].(string), "SortKeys bits") {
			name = row[0].(string)
		}
		got = append(got, name+" "+row[1].(string))
		if n, ok := row[2].(float64); !ok || n != 4096 {
			t.Errorf("%v: elements %v", row, row[2])
		}
		for _, c := range []any{row[4], row[6], row[7]} {
			if v, ok := c.(float64); !ok || v <= 0 {
				t.Errorf("%v: %v is not a positive rate", row, c)
			}
		}
	}
	if strings.Join(got, "|") != strings.Join(primRows, "|") {
		t.Errorf("rows\n %q\nwant\n %q", got, primRows)
	}
	if notes := strings.Join(rep.Notes, "\n"); !strings.Contains(notes, "host twin") || !strings.Contains(notes, "plots: 1 of 1 tables") {
		t.Errorf("notes:\n%s", notes)
	}
	benchtest.CheckPlots(t, dir, 1)
}

// TestGPUBenchPrim runs the benchmark on a GPU at 2^16 elements (skipped
// without a device).
func TestGPUBenchPrim(t *testing.T) {
	benchtest.NeedGPU(t)
	var out bytes.Buffer
	if err := Run(t.Context(), []string{"--backend", "cuda", "--log2n", "16", "--reps", "1"}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "device-wide primitives") || !strings.Contains(out.String(), "Multisplit2Pairs") {
		t.Errorf("output:\n%s", out.String())
	}
}
