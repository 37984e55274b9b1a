package latencybench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/warpkit/warpkit/bench/internal/benchtest"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/benchfmt"
	"github.com/warpkit/warpkit/internal/cli"
)

// latTiny are settings that run every section in well under a second on the
// CPU backend.
var latTiny = []string{"--calls", "5", "--warmup", "1", "--table-log2", "8", "--max-log2", "6"}

// latStructRows are the structure rows every backend prints (from Go slices);
// a GPU adds the same with "device" data and the method's Device variant.
var latStructRows = [][2]string{
	{"slabhash", "Find"}, {"slabhash", "Insert"},
	{"lsm", "Lookup"}, {"lsm", "Update"},
	{"btree", "Lookup"}, {"btree", "Insert"},
	{"sortedarray", "Lookup"},
}

// latRows returns the whitespace-separated fields of the output's lines that
// have exactly width fields and whose numeric columns (from first on) parse.
func latRows(out string, width, first int) [][]string {
	var rows [][]string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) != width {
			continue
		}
		ok := true
		for _, c := range f[first:] {
			if _, err := strconv.ParseFloat(c, 64); err != nil {
				ok = false
			}
		}
		if ok {
			rows = append(rows, f)
		}
	}
	return rows
}

func runLatency(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	start := time.Now()
	if err := Run(t.Context(), args, &out); err != nil {
		t.Fatalf("warp bench latency %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	t.Logf("%s: %v", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	return out.String()
}

// checkLatencyOutput checks the structure and rate tables of a text run:
// every row that should be there is, once, with numbers.
func checkLatencyOutput(t *testing.T, out string, gpu bool) {
	t.Helper()
	for _, want := range []string{"warp bench latency", "device: ", "date: ", "commit: ",
		"Structures: one call, 256-key structures", "Slab hash rate vs batch size", "Legend: "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	rows := latRows(out, 7, 4)
	var got []string
	for _, r := range rows {
		got = append(got, strings.Join(r[:4], " "))
	}
	var want []string
	for _, sr := range latStructRows {
		for _, n := range []string{"1", "1024"} {
			if gpu {
				want = append(want, fmt.Sprintf("%s %sDevice %s device", sr[0], sr[1], n))
			}
			want = append(want, fmt.Sprintf("%s %s %s Go", sr[0], sr[1], n))
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("structure rows:\n got %q\nwant %q\n%s", got, want, out)
	}
	var sizes []string
	for _, r := range latRows(out, 6, 1) {
		sizes = append(sizes, r[0])
		if r[1] != "5" {
			t.Errorf("rate row %v: %s calls, want 5", r, r[1])
		}
	}
	if want := []string{"2^0", "2^2", "2^4", "2^6"}; !slices.Equal(sizes, want) {
		t.Errorf("rate rows: got sizes %v, want %v\n%s", sizes, want, out)
	}
}

// TestBenchLatencyCPU runs the whole benchmark on the CPU backend with tiny
// settings, as CI does without a GPU.
func TestBenchLatencyCPU(t *testing.T) {
	out := runLatency(t, append([]string{"--backend", "cpu"}, latTiny...)...)
	if !strings.Contains(out, "CUDA floors: skipped, no CUDA device") {
		t.Errorf("no note that the floors were skipped:\n%s", out)
	}
	if strings.Contains(out, "device slices") || strings.Contains(out, "Device ") {
		t.Errorf("device-slice rows on the CPU backend:\n%s", out)
	}
	checkLatencyOutput(t, out, false)
}

// TestBenchLatencyAuto: with the default backend the command works whether or
// not this machine has a GPU.
func TestBenchLatencyAuto(t *testing.T) {
	_, err := cuda.Devices()
	gpu := err == nil
	out := runLatency(t, latTiny...)
	checkLatencyOutput(t, out, gpu)
	if gpu {
		for _, row := range []string{"empty kernel launch, async", "empty kernel launch + Stream.Synchronize",
			"Stream.Synchronize, idle stream", "Slice.CopyFromHost, 4 bytes", "Slice.CopyToHost, 4 bytes",
			"empty kernel + Event.Record: device time between the events"} {
			if !strings.Contains(out, row) {
				t.Errorf("floors lack the row %q:\n%s", row, out)
			}
		}
	} else if !strings.Contains(out, "CUDA floors: skipped, no CUDA device") {
		t.Errorf("no GPU and no note that the floors were skipped:\n%s", out)
	}
}

// TestBenchLatencyJSON: --json prints one report whose tables hold numbers;
// --only picks and orders the sections.
func TestBenchLatencyJSON(t *testing.T) {
	out := runLatency(t, append([]string{"--backend", "cpu", "--json", "--only", "rates,structures"}, latTiny...)...)
	var rep benchfmt.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not one JSON report: %v\n%s", err, out)
	}
	if len(rep.Tables) != 2 || !strings.HasPrefix(rep.Tables[0].Name, "Slab hash rate") || !strings.HasPrefix(rep.Tables[1].Name, "Structures") {
		t.Fatalf("tables: %+v", rep.Tables)
	}
	if n := len(rep.Tables[0].Rows); n != 4 {
		t.Errorf("%d rate rows, want 4", n)
	}
	if n := len(rep.Tables[1].Rows); n != 2*len(latStructRows) {
		t.Errorf("%d structure rows, want %d", n, 2*len(latStructRows))
	}
	for _, row := range rep.Tables[1].Rows {
		for _, c := range row[4:] {
			if v, ok := c.(float64); !ok || v <= 0 {
				t.Errorf("row %v: time %v is not a positive number", row, c)
			}
		}
	}
	if rep.Device == "" || rep.Commit == "" || rep.Date == "" {
		t.Errorf("header: %+v", rep)
	}
}

// TestBenchLatencyUsage: bad flags are usage errors, found before anything is
// built or measured.
func TestBenchLatencyUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--calls", "0"}, {"--calls", "-3"}, {"--calls", "x"}, {"--calls", "20001"}, {"--warmup", "-1"},
		{"--only", "bogus"}, {"--only", "floors,nope"}, {"--only", ","},
		{"--table-log2", "3"}, {"--table-log2", "29"}, {"--max-log2", "-1"}, {"--max-log2", "27"},
		{"--backend", "tpu"}, {"--no-such-flag"}, {"extra"}, {"--plot"},
	} {
		if err := Run(t.Context(), args, io.Discard); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}

func TestLatencySummary(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Microsecond)
	}
	st := summarize(ds)
	if st.min != time.Microsecond || st.median != 51*time.Microsecond || st.p99 != 99*time.Microsecond || st.n != 100 {
		t.Errorf("1..100 µs: %+v", st)
	}
	st = summarize(ds[95:]) // 5..1 µs: p99 of 5 calls is the slowest
	if st.min != time.Microsecond || st.median != 3*time.Microsecond || st.p99 != 5*time.Microsecond {
		t.Errorf("1..5 µs: %+v", st)
	}
	if got := rateSizes(6); !slices.Equal(got, []int{0, 2, 4, 6}) {
		t.Errorf("rateSizes(6) = %v", got)
	}
	if got := rateSizes(5); !slices.Equal(got, []int{0, 2, 4, 5}) {
		t.Errorf("rateSizes(5) = %v", got)
	}
}

// TestBenchLatencyPlot: --plot writes the structure and rate tables as PNG
// and SVG plots on the CPU backend.
func TestBenchLatencyPlot(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "plots")
	out := runLatency(t, append([]string{"--backend", "cpu", "--plot", dir}, latTiny...)...)
	if !strings.Contains(out, "plots: 2 of 2 tables written to "+dir) {
		t.Errorf("no note of the plots:\n%s", out)
	}
	benchtest.CheckPlots(t, dir, 2)
}
