package graphbench

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/warpkit/warpkit/bench/internal/benchtest"
	"github.com/warpkit/warpkit/internal/cli"
)

// TestRunCPU: the CPU backend's quick run prints every table, with the
// thesis's figures beside, and no figure of the CUDA backend.
func TestRunCPU(t *testing.T) {
	var out bytes.Buffer
	if err := Run(t.Context(), []string{"--backend", "cpu", "--graphs", "luxembourg_osm", "--batches", "10,12"}, &out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"Table 5.5", "Table 5.2", "Table 5.3", "Table 5.4", "edge queries", "Table 5.7", "luxembourg_osm", "2^12", "0.184"} {
		if !strings.Contains(s, want) {
			t.Errorf("the report lacks %q:\n%s", want, s)
		}
	}
}

// TestRunGPU: a small run on the device; the CUDA backend's triangle
// counts agree with the CPU backend's.
func TestRunGPU(t *testing.T) {
	benchtest.NeedGPU(t)
	var out bytes.Buffer
	if err := Run(t.Context(), []string{"--graphs", "luxembourg_osm,coAuthorsDBLP", "--base", "coAuthorsDBLP", "--batches", "12,14", "--reps", "2"}, &out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	i := strings.Index(s, "Table 5.7")
	if i < 0 || !strings.Contains(s[i:], "4225865") {
		t.Fatalf("report:\n%s", s)
	}
	for _, line := range strings.Split(s[i:], "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && (f[0] == "luxembourg_osm" || f[0] == "coAuthorsDBLP") && f[len(f)-2] != "yes" { // agree, then met
			t.Errorf("the methods and backends disagree: %s", line)
		}
	}
}

// TestUsage: bad flags are usage errors.
func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--backend", "cpu", "--graphs", "nosuch"}, {"--backend", "cpu", "--base", "nosuch"},
		{"--backend", "cpu", "--batches", "3"}, {"--backend", "cpu", "--batches", "x"},
		{"--backend", "cpu", "--only", "sort"}, {"--backend", "cpu", "--reps", "0"}, {"--backend", "tpu"},
	} {
		if err := Run(t.Context(), args, io.Discard); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}
