package hashbench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/warpkit/warpkit/bench/internal/benchtest"
	"github.com/warpkit/warpkit/internal/benchfmt"
	"github.com/warpkit/warpkit/internal/cli"
)

// TestBenchHashUsage: bad flags are usage errors, found before any device is
// opened (so they hold on machines without a GPU too).
func TestBenchHashUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--mix-log2", "15"}, {"--mix-log2", "22,27"}, {"--mix-log2", "x"}, {"--mix-log2", "22x"}, {"--mix-log2", "22.5"},
		{"--mix-utils", "1.2"}, {"--mix-utils", "0.6x"}, {"--only", "fig9"}, {"--layout", "tile4"}, {"--min-log2", "20", "--max-log2", "19"},
		{"--min-log2", "9"}, {"--max-log2", "29"}, {"--reps", "0"}, {"--reps", "x"}, {"--backend", "tpu"}, {"--backend", "cpu", "--only", "fig5,nope"},
		{"--plot"}, {"--json=maybe"}, {"--no-such-flag"},
	} {
		if err := Run(t.Context(), args, io.Discard); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}

// hashCPUTables are the tables of a CPU-backend run of every experiment.
var hashCPUTables = []string{"Call overhead, CPU backend", "Fig. 5, CPU backend", "Fig. 6, CPU backend", "Fig. 7a, CPU backend", "SlabAlloc, CPU backend"}

// TestBenchHashCPU runs every experiment on the CPU backend, as CI does
// without a GPU: the ones with a CPU variant print their tables (and plots),
// the others say that they need a GPU.
func TestBenchHashCPU(t *testing.T) {
	only, tables := "overhead,layouts,fig4,fig5,fig6,fig7,alloc", hashCPUTables
	if testing.Short() {
		only, tables = "overhead,layouts,fig4,fig5", hashCPUTables[:2]
	}
	dir := filepath.Join(t.TempDir(), "plots")
	var out bytes.Buffer
	if err := Run(t.Context(), []string{"--backend", "cpu", "--min-log2", "10", "--max-log2", "13", "--only", only, "--plot", dir}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	text := out.String()
	for _, want := range append(slices.Clone(tables), "device: CPU backend", "layouts: needs a GPU", "fig4: needs a GPU",
		"no baseline columns and no targets", fmt.Sprintf("plots: %d of %d tables written", len(tables), len(tables))) {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	var sizes []string
	for _, line := range strings.Split(text, "\n") {
		if f := strings.Fields(line); len(f) == 4 && strings.HasPrefix(f[0], "2^1") { // Fig. 5 (Fig. 7a's row is 2^20)
			sizes = append(sizes, f[0])
		}
	}
	if !slices.Equal(sizes, []string{"2^10", "2^12"}) {
		t.Errorf("Fig. 5 sizes %q, want 2^10 and 2^12 (the even ones, as --quick)\n%s", sizes, text)
	}
	benchtest.CheckPlots(t, dir, len(tables))
}

// TestBenchHashJSON: --json prints one report whose rates are numbers.
func TestBenchHashJSON(t *testing.T) {
	var out bytes.Buffer
	if err := Run(t.Context(), []string{"--backend", "cpu", "--json", "--only", "fig5,overhead", "--min-log2", "10", "--max-log2", "11"}, &out); err != nil {
		t.Fatal(err)
	}
	var rep benchfmt.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("not one JSON report: %v\n%s", err, out.String())
	}
	if len(rep.Tables) != 2 || !strings.HasPrefix(rep.Tables[0].Name, "Fig. 5") || len(rep.Tables[0].Rows) != 1 || len(rep.Tables[1].Rows) != 3 {
		t.Fatalf("tables: %+v", rep.Tables)
	}
	for _, row := range rep.Tables[0].Rows {
		for _, c := range row[1:] {
			if v, ok := c.(float64); !ok || v <= 0 {
				t.Errorf("Fig. 5 row %v: %v is not a positive rate", row, c)
			}
		}
	}
}

// TestGPUBenchHash runs a quick GPU benchmark (skipped without a device).
func TestGPUBenchHash(t *testing.T) {
	benchtest.NeedGPU(t)
	dir := t.TempDir()
	var out bytes.Buffer
	if err := Run(t.Context(), []string{"--quick", "--backend", "cuda", "--only", "overhead,fig5", "--min-log2", "16", "--max-log2", "18", "--plot", dir}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"Call overhead: µs per synchronous call", "Fig. 5: build and search vs n", "static open addressing"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	benchtest.CheckPlots(t, dir, 2)
}
