package kvcompactbench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/benchfmt"
	"github.com/warpkit/warpkit/internal/cli"
	"github.com/warpkit/warpkit/internal/emu"
	"github.com/warpkit/warpkit/internal/stress"
)

func TestMain(m *testing.M) {
	stress.MaybeBurn() // --cpu-stress starts copies of this test binary as burners
	os.Exit(m.Run())
}

// small is a job small enough for the default test run.
var small = []string{"--l0-kib", "64", "--l1-kib", "512", "--table-kib", "128", "--runs", "2"}

// TestRun: every cell runs on every engine, on both file systems, and
// cpu-par's outputs equal cpu's (the ident column says yes).
func TestRun(t *testing.T) {
	for _, fsKind := range []string{"mem", "os"} {
		args := append([]string{"--values", "0,40,3000", "--compression", "none,snappy,s2", "--fs", fsKind, "--json"}, small...)
		if fsKind == "os" {
			args = append(args, "--dir", t.TempDir())
		}
		var out bytes.Buffer
		if err := Run(t.Context(), args, &out); err != nil {
			t.Fatalf("--fs %s: %v", fsKind, err)
		}
		var rep benchfmt.Report
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("--fs %s: %v\n%s", fsKind, err, out.String())
		}
		rates := rep.Tables[0]
		if len(rates.Rows) != 9 {
			t.Fatalf("--fs %s: %d rows, want 9", fsKind, len(rates.Rows))
		}
		rssCol := slices.IndexFunc(rates.Columns, func(c string) bool { return strings.HasPrefix(c, "RSS+ MB ") })
		if rssCol < 0 {
			t.Fatalf("--fs %s: no RSS+ column: %v", fsKind, rates.Columns)
		}
		engines := strings.Split(strings.TrimPrefix(rates.Columns[rssCol], "RSS+ MB "), "/")
		for _, row := range rates.Rows {
			if ident := row[len(row)-1]; !allYes(ident) {
				t.Errorf("--fs %s: row %v: ident %v", fsKind, row, ident)
			}
			// A resident-memory figure per engine, in MB.
			rss := strings.Split(fmt.Sprint(row[rssCol]), "/")
			for _, mb := range rss {
				if _, err := strconv.ParseUint(mb, 10, 64); err != nil || len(rss) != len(engines) {
					t.Errorf("--fs %s: row %v: RSS+ %q for engines %v", fsKind, row, row[rssCol], engines)
					break
				}
			}
		}
		// A stage row per gpucompact engine run (cpu-par; gpu too where a
		// device made it run by default).
		if len(rep.Tables) < 2 || rep.Tables[1].Columns[4] != "load" || len(rep.Tables[1].Rows) == 0 || len(rep.Tables[1].Rows)%9 != 0 {
			t.Errorf("--fs %s: no stage table: %+v", fsKind, rep.Tables)
		}
	}
}

// TestRunText: the text report streams the tables and the notes.
func TestRunText(t *testing.T) {
	var out bytes.Buffer
	if err := Run(t.Context(), append([]string{"--values", "64", "--engines", "cpu-par"}, small...), &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"rates (median of the runs)", "gpucompact stages", "cpu-par/cpu", "compaction.CPU{Parts: 1}"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "cpu-parts MB/s") {
		t.Errorf("--engines cpu-par ran cpu-parts:\n%s", out.String())
	}
	// cpu is the baseline column whatever the order asked.
	out.Reset()
	if err := Run(t.Context(), append([]string{"--values", "64", "--engines", "cpu-par,cpu", "--json"}, small...), &out); err != nil {
		t.Fatal(err)
	}
	var rep benchfmt.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if cols := rep.Tables[0].Columns; cols[5] != "cpu MB/s" || cols[6] != "cpu-par MB/s" {
		t.Errorf("columns %v", cols)
	}
}

// TestRunStress: --cpu-stress runs every job at each level, burners on
// every core beside the stressed ones, and still checks identity.
func TestRunStress(t *testing.T) {
	var out bytes.Buffer
	args := append([]string{"--values", "64", "--compression", "snappy", "--cpu-stress", "0,50", "--json"}, small...)
	if err := Run(t.Context(), args, &out); err != nil {
		t.Fatal(err)
	}
	var rep benchfmt.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	rows := rep.Tables[0].Rows
	if len(rows) != 2 || rows[0][0] != float64(0) || rows[1][0] != float64(50) {
		t.Fatalf("rows %v, want one at stress 0 and one at 50", rows)
	}
	for _, row := range rows {
		if !allYes(row[len(row)-1]) {
			t.Errorf("row %v: not identical", row)
		}
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--values", "-1"}, {"--compression", "zstd"}, {"--engines", "tpu"}, {"--fs", "tmpfs"}, {"--runs", "0"},
		{"--l0-kib", "1"}, {"extra"}, {"--cpu-stress", "101"}, {"--cpu-stress", "-5"},
	} {
		if err := Run(t.Context(), args, io.Discard); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}

// TestGPUEngineWithoutDevice: --engines gpu where there is no device fails
// with warpkit.ErrNoDevice (it does not fall back to the Go engine and call
// that gpu).
func TestGPUEngineWithoutDevice(t *testing.T) {
	if _, err := cuda.Devices(); err == nil {
		t.Skip("a CUDA device is present")
	}
	err := Run(t.Context(), []string{"--values", "64", "--engines", "gpu", "--runs", "1", "--l0-kib", "64", "--l1-kib", "256"}, io.Discard)
	if !errors.Is(err, warpkit.ErrNoDevice) {
		t.Fatalf("--engines gpu without a device: %v, want ErrNoDevice", err)
	}
}

// allYes says an ident cell is "yes" for every compared engine (cpu-par, and
// gpu where a device made it run by default: "yes/yes").
func allYes(cell any) bool {
	s, ok := cell.(string)
	if !ok || s == "" {
		return false
	}
	for _, p := range strings.Split(s, "/") {
		if p != "yes" {
			return false
		}
	}
	return true
}

// TestRunGPUEmulated runs the gpu engine on the CPU emulation of the GPU
// (internal/emu; where it cannot build, the test skips): its outputs equal
// cpu's, and the stage table and the gpu targets table carry its rows, with
// the device calls counted (launches a job within the issue's ≤ 20).
func TestRunGPUEmulated(t *testing.T) {
	testDevice = emu.Device(t, emu.Options{TotalMemory: 4 << 30}, "../../kv/gpucompact/gpucompact.cu")
	t.Cleanup(func() { testDevice = nil })
	args := []string{"--values", "64,1024", "--compression", "none,snappy", "--engines", "cpu,gpu", "--json",
		"--l0-kib", "64", "--l1-kib", "256", "--table-kib", "64", "--runs", "1"}
	var out bytes.Buffer
	if err := Run(t.Context(), args, &out); err != nil {
		t.Fatal(err)
	}
	var rep benchfmt.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, tab := range rep.Tables {
		col := func(name string) int {
			i := slices.Index(tab.Columns, name)
			if i < 0 {
				t.Fatalf("table %q has no column %q: %v", tab.Name, name, tab.Columns)
			}
			return i
		}
		switch {
		case strings.HasPrefix(tab.Name, "rates"):
			found["rates"] = true
			for _, row := range tab.Rows {
				if !allYes(row[col("ident")]) {
					t.Errorf("rates row %v: the gpu engine's outputs differ from cpu's", row)
				}
			}
		case strings.HasPrefix(tab.Name, "gpucompact stages"):
			for _, row := range tab.Rows {
				if row[col("engine")] == "gpu" && row[col("device calls")] != "-" {
					found["stages"] = true
				}
			}
		case strings.HasPrefix(tab.Name, "targets of gpu"):
			found["targets"] = len(tab.Rows) == 4
			i, met := col("launches"), col("launches met")
			for _, row := range tab.Rows {
				n, err := strconv.Atoi(fmt.Sprint(row[i]))
				if err != nil || n < 1 || n > 20 || row[met] != "yes" {
					t.Errorf("gpu targets row %v: launches %v (%v), met %v; want a count of 1..20, met", row, row[i], err, row[met])
				}
			}
		}
	}
	if !found["rates"] || !found["stages"] || !found["targets"] {
		t.Fatalf("tables found: %v; want the rates, the gpu's stage rows with device calls, and 4 gpu target rows", found)
	}
}
