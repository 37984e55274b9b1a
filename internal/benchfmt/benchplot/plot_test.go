package benchplot

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot"

	"github.com/warpkit/warpkit/internal/benchfmt"
)

// plotReport has one table of every shape the benchmarks print.
func plotReport() *benchfmt.Report {
	r := benchfmt.NewReport("plots", "Test CPU")
	t := r.Table("Fig. 5: build and search vs n (G ops/s; x = vs baseline)", "n", "util", "build", "x", "find", "x", "targets")
	for l := 10; l <= 16; l += 2 {
		t.Add("2^"+string(rune('0'+l/10))+string(rune('0'+l%10)), 0.6, float64(l)/10, 0.9, float64(l)/5, 1.1, "-")
	}
	t = r.Table("Table II: insertion rate", "b", "LSM mean", "SA mean", "LSM/SA mean")
	t.Add("2^16", 120.0, 12.0, "10.00x")
	t.Add("2^15", 100.0, math.NaN(), "-")
	t.Add("mean", 110.0, 12.0, "9.17x")
	t = r.Table("Fig. 2: queries on a bulk-built tree", "keys", "height", "lookup", "vs CPU")
	t.Add("64K", 3, 0.02, "1.00x")
	t.Add("256K", 4, 0.03, "1.10x")
	t.Add("1M", 4, 0.025, "1.20x")
	t = r.Table("Fig. 4: deleting x% of a tree", "x", "ms", "G deletes/s")
	t.Add("10%", 1.5, 0.2)
	t.Add("20%", 2.5, 0.25)
	t = r.Table("Call overhead: µs per call", "call", "slab hash", "static table")
	t.Add("find", 20.5, 11.0)
	t.Add("insert", 22.5, "-")
	t = r.Table("CUDA floors: µs per call", "median (µs)", "p99 (µs)", "call")
	t.Add(5.5, 9.0, "empty kernel launch")
	t.Add(3.0, 4.0, "Stream.Synchronize")
	t.Add(4.0, 7.0, "copy")
	t = r.Table("prim: n = 2^20", "primitive", "types", "elements", "time", "G elem/s", "met")
	t.Add("SortKeys", "u32", 1<<20, 2*time.Millisecond, 0.5, "-")
	t.Add("MergeKeys", "u32", 1<<20, time.Millisecond, 1.0, "-")
	t = r.Table("counts only", "what", "n")
	t.Add("a", 3)
	t.Add("b", 5)
	r.Table("no rows", "a", "b")
	t = r.Table("text only", "a", "b")
	t.Add("x", "y")
	t = r.Table("Fig. 5: build and search vs n (G ops/s; x = vs baseline)", "n", "build") // a second table of the same name
	t.Add(1, 2.0)
	t.Add(2, 3.0)
	return r
}

func TestSlug(t *testing.T) {
	for name, want := range map[string]string{
		"Fig. 5: build and search vs n, 60% target utilization (G ops/s)": "fig-5-build-and-search-vs-n-60-target-utilization-g-ops-s",
		"Γ":      "table",
		"  SA  ": "sa",
		"Fig. 7a: concurrent mixes, 1048576 keys built, 4 batches of n/4 mixed operations, one kernel each": "fig-7a-concurrent-mixes-1048576-keys-built-4-batches-of-n-4",
	} {
		if got := Slug(name); got != want {
			t.Errorf("Slug(%q) = %q, want %q", name, got, want)
		}
	}
}

// TestPlotKinds: which tables become line charts, bar charts, or nothing.
func TestPlotKinds(t *testing.T) {
	r := plotReport()
	want := []struct {
		kind   string // "line", "bar" or the NotPlottable reason
		series []string
	}{
		{"line", []string{"util", "build", "x (build)", "find", "x (find)"}},
		{"line", []string{"LSM mean", "SA mean"}},
		{"line", []string{"lookup"}},
		{"line", []string{"ms", "G deletes/s"}},
		{"bar", []string{"slab hash", "static table"}},
		{"bar", []string{"median (µs)", "p99 (µs)"}},
		{"bar", []string{"G elem/s"}},
		{"bar", []string{"n"}},
		{"no rows", nil},
		{"no numeric column", nil},
		{"line", []string{"build"}},
	}
	for i, tab := range r.Tables {
		l, err := tableLayout(tab)
		var np *NotPlottable
		switch {
		case errors.As(err, &np):
			if np.Why != want[i].kind {
				t.Errorf("%q: not plottable (%s), want %s", tab.Name, np.Why, want[i].kind)
			}
			continue
		case err != nil:
			t.Fatalf("%q: %v", tab.Name, err)
		}
		kind := "bar"
		if l.line {
			kind = "line"
		}
		var names []string
		for _, s := range l.series {
			names = append(names, s.name)
		}
		if kind != want[i].kind || strings.Join(names, "|") != strings.Join(want[i].series, "|") {
			t.Errorf("%q: %s chart of %q, want %s of %q", tab.Name, kind, names, want[i].kind, want[i].series)
		}
		if _, w, h, err := Plot(tab); err != nil || w <= 0 || h <= 0 {
			t.Errorf("%q: Plot: %v x %v, %v", tab.Name, w, h, err)
		}
	}
	// The 2^k axis is logarithmic, a percentage axis linear.
	p, _, _, _ := Plot(r.Tables[0])
	if _, ok := p.X.Scale.(plot.LogScale); !ok {
		t.Errorf("2^k axis: scale %T", p.X.Scale)
	}
	p, _, _, _ = Plot(r.Tables[3])
	if _, ok := p.X.Scale.(plot.LogScale); ok {
		t.Error("percentage axis is logarithmic")
	}
}

// TestWrite: every plottable table is written as a non-empty PNG and a
// well-formed SVG; the rest are named in a note.
func TestWrite(t *testing.T) {
	r := plotReport()
	dir := filepath.Join(t.TempDir(), "plots")
	files, err := Write(r, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2*9 {
		t.Fatalf("%d files written, want 18: %q", len(files), files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		switch filepath.Ext(f) {
		case ".png":
			if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) || len(b) < 1000 {
				t.Errorf("%s: not a PNG (%d bytes)", f, len(b))
			}
		case ".svg":
			if !bytes.Contains(b[:min(len(b), 512)], []byte("<svg")) || !bytes.HasSuffix(bytes.TrimSpace(b), []byte("</svg>")) {
				t.Errorf("%s: no SVG root", f)
			}
		default:
			t.Errorf("unexpected file %s", f)
		}
	}
	for _, name := range []string{"fig-5-build-and-search-vs-n-g-ops-s-x-vs-baseline.png", "fig-5-build-and-search-vs-n-g-ops-s-x-vs-baseline-2.svg", "prim-n-2-20.png"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Error(err)
		}
	}
	notes := strings.Join(r.Notes, "\n")
	for _, want := range []string{"plots: 9 of 11 tables written to " + dir, `"no rows" (no rows)`, `"text only" (no numeric column)`} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
}
