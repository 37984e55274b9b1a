package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warpkit/warpkit/internal/cli"
)

// TestGraphGenInfo: warp graph gen writes a graph that warp graph info
// reads back with the counts gen printed.
func TestGraphGenInfo(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		file string
		want string
	}{
		{[]string{"rmat", "--scale", "10", "--edge-factor", "4", "--seed", "2"}, "r.el.gz", "1024 vertices, 4096 entries"},
		{[]string{"rgg", "--scale", "10"}, "g.edges", "1024 vertices"},
		{[]string{"road", "--vertices", "5000", "--degree", "2.3"}, "road.el", "5000 vertices"},
		{[]string{"delaunay", "--scale", "10"}, "d.el", "1024 vertices"},
		{[]string{"rmat", "--scale", "9"}, "r.wkg", "512 vertices"},
		{[]string{"mesh3d", "--vertices", "3000", "--degree", "12"}, "m.el", "3000 vertices"},
		{[]string{"standin", "--name", "luxembourg_osm"}, "lux.el.gz", "114000 vertices"},
	} {
		path := filepath.Join(dir, tc.file)
		var out bytes.Buffer
		if err := graphGen(append(tc.args, "--out", path), &out); err != nil {
			t.Fatalf("gen %v: %v", tc.args, err)
		}
		if !strings.Contains(out.String(), tc.want) {
			t.Fatalf("gen %v printed %q", tc.args, out.String())
		}
		var info bytes.Buffer
		if err := graphInfo([]string{"--dedup", path}, &info); err != nil {
			t.Fatalf("info %s: %v", path, err)
		}
		if !strings.Contains(info.String(), "entries") || !strings.Contains(info.String(), "out-degree") || !strings.Contains(info.String(), "removed:") {
			t.Fatalf("info %s printed %q", path, info.String())
		}
	}
}

func TestGraphUsage(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"gen"}, {"gen", "nope", "--out", filepath.Join(dir, "x.el")}, {"gen", "rmat"}, {"gen", "rmat", "--scale", "0", "--out", "x"},
		{"gen", "rgg", "--scale", "30", "--out", filepath.Join(dir, "x.el")}, {"info"}, {"info", "a", "b"}, {"frob"},
		{"gen", "standin", "--name", "nope", "--out", filepath.Join(dir, "x.el")}, {"gen", "rmat", "--out", filepath.Join(dir, "x.mtx")},
		{"gen", "delaunay", "--scale", "1", "--out", filepath.Join(dir, "x.el")}, {"gen", "road", "--degree", "NaN", "--out", filepath.Join(dir, "x.el")}, {"gen", "road", "--degree", "5", "--out", filepath.Join(dir, "x.el")},
	} {
		if err := runGraph(args); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
	if err := runGraph([]string{"info", filepath.Join(dir, "missing.mtx")}); err == nil || errors.Is(err, cli.ErrUsage) {
		t.Errorf("info of a missing file: %v", err)
	}
}

func TestGraphStandIns(t *testing.T) {
	var out bytes.Buffer
	if err := graphStandIns([]string{"--generate", "--max-entries", "300000"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "luxembourg_osm") || !strings.Contains(out.String(), "within 15%") || strings.Count(out.String(), "\n") != 12 {
		t.Fatalf("%s", out.String())
	}
}

// TestGraphTC: warp graph tc counts a complete graph's triangles (n choose
// 3) from a file, and refuses bad usage.
func TestGraphTC(t *testing.T) {
	path := filepath.Join(t.TempDir(), "k6.el")
	var b strings.Builder
	for u := range 6 {
		for v := u + 1; v < 6; v++ {
			fmt.Fprintf(&b, "%d %d\n", u, v)
		}
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := graphTC([]string{path}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), ": 20 triangles;") {
		t.Fatalf("tc printed %q", out.String())
	}
	for _, args := range [][]string{{"tc"}, {"tc", "a", "b"}, {"tc", "--backend", "tpu", path}} {
		if err := runGraph(args); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}
