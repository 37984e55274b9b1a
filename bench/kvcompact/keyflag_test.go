package kvcompactbench

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/warpkit/warpkit/internal/benchfmt"
	"github.com/warpkit/warpkit/internal/cli"
)

// runJSON runs the bench with args and the small job, and returns its
// report.
func runJSON(t *testing.T, args ...string) benchfmt.Report {
	t.Helper()
	var out bytes.Buffer
	if err := Run(t.Context(), append(append(args, "--json"), small...), &out); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	var rep benchfmt.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out.String())
	}
	return rep
}

// TestRunKeyRange: --key MIN..MAX runs every job with keys of varying
// length, the title names the range, the tables keep their columns (no key
// column for one item), and the gpucompact engines' outputs equal cpu's.
func TestRunKeyRange(t *testing.T) {
	fixed := runJSON(t, "--values", "32", "--compression", "none", "--key", "16")
	if !strings.Contains(fixed.Title, ", 16-byte keys,") {
		t.Errorf("--key 16: title %q", fixed.Title)
	}
	rep := runJSON(t, "--values", "32,3000", "--compression", "none,snappy", "--key", "8..64")
	if !strings.Contains(rep.Title, ", 8..64-byte keys,") {
		t.Errorf("--key 8..64: title %q", rep.Title)
	}
	rates := rep.Tables[0]
	if !slices.Equal(rates.Columns, fixed.Tables[0].Columns) || !slices.Equal(rep.Tables[1].Columns, fixed.Tables[1].Columns) {
		t.Errorf("--key 8..64: columns %v and %v, --key 16's %v and %v", rates.Columns, rep.Tables[1].Columns, fixed.Tables[0].Columns, fixed.Tables[1].Columns)
	}
	if len(rates.Rows) != 4 {
		t.Fatalf("--key 8..64: %d rows, want 4", len(rates.Rows))
	}
	for _, row := range rates.Rows {
		if ident := row[len(row)-1]; !allYes(ident) {
			t.Errorf("--key 8..64: row %v: ident %v", row, ident)
		}
	}
	// The range's mean (36 bytes) sizes the tables: fewer entries than
	// 16-byte keys at the same value size.
	if got, want := rates.Rows[0][3].(float64), fixed.Tables[0].Rows[0][3].(float64); got >= want {
		t.Errorf("--key 8..64: %v entries, --key 16 %v", got, want)
	}
}

// TestRunKeySweep: a --key list mixing a length and a range runs every job
// at each, in a key B column before value B of every table.
func TestRunKeySweep(t *testing.T) {
	rep := runJSON(t, "--values", "64", "--compression", "snappy", "--key", "16,8..64", "--engines", "cpu-par")
	if !strings.Contains(rep.Title, ", 16/8..64-byte keys,") {
		t.Errorf("title %q", rep.Title)
	}
	rates := rep.Tables[0]
	if rates.Columns[2] != "key B" || rates.Columns[3] != "value B" || rates.Columns[6] != "cpu MB/s" {
		t.Fatalf("columns %v", rates.Columns)
	}
	if len(rates.Rows) != 2 || rates.Rows[0][2] != float64(16) || rates.Rows[1][2] != "8..64" {
		t.Fatalf("rows %v, want --key 16's then 8..64's", rates.Rows)
	}
	for _, row := range rates.Rows {
		if !allYes(row[len(row)-1]) {
			t.Errorf("row %v: not identical", row)
		}
	}
	for _, tb := range rep.Tables[1:] {
		if !slices.Contains(tb.Columns, "key B") {
			t.Errorf("table %q: no key B column: %v", tb.Name, tb.Columns)
		}
		for _, row := range tb.Rows {
			if len(row) != len(tb.Columns) {
				t.Errorf("table %q: row %v under %d columns", tb.Name, row, len(tb.Columns))
			}
		}
	}
	if stages := rep.Tables[1]; stages.Columns[3] != "key B" || stages.Columns[5] != "load" || len(stages.Rows) != 2 || stages.Rows[1][3] != "8..64" {
		t.Errorf("stage table %v: %v", stages.Columns, stages.Rows)
	}
}

func TestKeyFlag(t *testing.T) {
	for in, want := range map[string]string{
		"16": "16", "8,16,32,64": "8,16,32,64", "8..64": "8..64", "16,8..64": "16,8..64", "32..32": "32", " 8 .. 64 ": "8..64",
		"1024": "1024", "8..1024": "8..1024",
	} {
		var v keyLens
		err := v.Set(in)
		if want == "" {
			if err == nil {
				t.Errorf("%q: parsed as %v", in, v.String())
			}
			continue
		}
		if err != nil || v.String() != want {
			t.Errorf("%q: %v, %v; want %s", in, v.String(), err, want)
		}
	}
	for _, key := range []string{"7", "1025", "64..8", "8..", "..64", "8...64", "x", "16,", "8..64..128", "8..2000", "-8..64"} {
		if err := Run(t.Context(), []string{"--key", key}, io.Discard); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("--key %s: %v, want a usage error", key, err)
		}
	}
}
