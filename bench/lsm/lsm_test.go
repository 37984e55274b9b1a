package lsmbench

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warpkit/warpkit/bench/internal/benchtest"
	"github.com/warpkit/warpkit/internal/benchfmt"
	"github.com/warpkit/warpkit/internal/cli"
)

// TestBenchLSMUsage: bad flags are usage errors, also against the CPU
// backend's default sizes (--insert-bmax 21 exceeds its --insert-log2n 20).
func TestBenchLSMUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--sections", "insert,nope"}, {"--insert-bmin", "23", "--insert-bmax", "22"}, {"--samples", "1"},
		{"--samples", "x"}, {"--backend", "tpu"}, {"--plot"}, {"--sa-budget", "soon"}, {"--no-such-flag"},
		{"--backend", "cpu", "--insert-bmax", "21"}, {"--backend", "cpu", "--query-log2n", "15"}, {"--backend", "cpu", "--cleanup-log2b", "7"},
	} {
		if err := Run(t.Context(), args, io.Discard); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}

// TestBenchLSMPlot draws Fig. 4b from made-up series (the real ones need a GPU).
func TestBenchLSMPlot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fig4b.png")
	b := &lsmBench{dev: nil}
	for _, bs := range []int{1 << 15, 1 << 16} {
		s := insertSeries{b: bs}
		for i := range 64 {
			s.lsm = append(s.lsm, 500-float64(i))
			s.sa = append(s.sa, 400/float64(i+1))
		}
		b.series = append(b.series, s)
	}
	if err := b.plot(path); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Size() < 1000 {
		t.Fatalf("plot file: %v, %v", st, err)
	}
}

// lsmTiny are sizes that run every section in about a second on the CPU
// backend.
var lsmTiny = []string{"--insert-log2n", "12", "--insert-bmin", "8", "--insert-bmax", "9", "--query-log2n", "11",
	"--lookup-bmin", "8", "--lookup-bmax", "9", "--count-bmin", "8", "--count-bmax", "9", "--cleanup-log2b", "8", "--samples", "4"}

// lsmCPUTables are the tables of a CPU-backend run of every section.
var lsmCPUTables = []string{"Table II: insertion rate", "Fig. 4b: effective insertion rate", "Table III: lookup rate", "Table IV: count and range rate",
	"Cleanup: rate", "Cleanup and lookups", "Status layout", "Targets: LSM vs sorted array"}

// TestBenchLSMCPU runs every section on the CPU backend, as CI does without a
// GPU, with --plot: each table and Fig. 4b are written as PNG and SVG.
func TestBenchLSMCPU(t *testing.T) {
	sections, tables := "overhead,insert,lookup,count,cleanup,layout", lsmCPUTables
	if testing.Short() {
		sections, tables = "overhead,insert,lookup", []string{lsmCPUTables[0], lsmCPUTables[1], lsmCPUTables[2], lsmCPUTables[7]}
	}
	dir := filepath.Join(t.TempDir(), "plots")
	var out bytes.Buffer
	args := append([]string{"--backend", "cpu", "--json", "--sections", sections, "--plot", dir}, lsmTiny...)
	if err := Run(t.Context(), args, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	var rep benchfmt.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("not one JSON report: %v\n%s", err, out.String())
	}
	if !strings.Contains(rep.Device, "CPU backend") {
		t.Errorf("device %q", rep.Device)
	}
	if len(rep.Tables) != len(tables) {
		t.Fatalf("%d tables, want %d: %+v", len(rep.Tables), len(tables), rep.Tables)
	}
	for i, tab := range rep.Tables {
		if !strings.HasPrefix(tab.Name, tables[i]) || len(tab.Rows) == 0 {
			t.Errorf("table %d: %q with %d rows, want %q", i, tab.Name, len(tab.Rows), tables[i])
		}
	}
	// Table II: the batch sizes 2^9 and 2^8, then the means; rates are numbers.
	if rows := rep.Tables[0].Rows; len(rows) != 3 || rows[0][0] != "2^9" || rows[2][0] != "mean" {
		t.Errorf("Table II rows %v", rows)
	} else if v, ok := rows[0][3].(float64); !ok || v <= 0 {
		t.Errorf("Table II: LSM mean %v is not a rate", rows[0][3])
	}
	notes := strings.Join(rep.Notes, "\n")
	for _, want := range []string{"overhead: needs a GPU", "Fig. 4b written to " + filepath.Join(dir, "fig4b.png")} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	benchtest.CheckPlots(t, dir, len(tables), "fig4b.png", "fig4b.svg")
}

// TestBenchLSMPlotFile: a --plot name ending in .png writes Fig. 4b alone,
// as before --plot took a directory.
func TestBenchLSMPlotFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fig4b.png")
	var out bytes.Buffer
	if err := Run(t.Context(), append([]string{"--backend", "cpu", "--sections", "insert", "--plot", path}, lsmTiny...), &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if st, err := os.Stat(path); err != nil || st.Size() < 1000 {
		t.Fatalf("plot file: %v, %v", st, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 || !strings.Contains(out.String(), "Fig. 4b written to "+path) || strings.Contains(out.String(), "plots: ") {
		t.Errorf("%d files; output:\n%s", len(entries), out.String())
	}
}

// TestGPUBenchLSM runs small sections on a GPU (skipped without a device).
func TestGPUBenchLSM(t *testing.T) {
	benchtest.NeedGPU(t)
	dir := t.TempDir()
	var out bytes.Buffer
	args := append([]string{"--backend", "cuda", "--sections", "overhead,insert,lookup,count,cleanup", "--plot", dir}, lsmTiny...)
	if err := Run(t.Context(), args, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"GPU LSM vs GPU sorted array", "Call overhead", "Insert steps", "Table II", "Table IV", "Cleanup and lookups"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
