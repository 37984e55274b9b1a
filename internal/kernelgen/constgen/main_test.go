package main

import (
	"bytes"
	"os"
	"path"
	"strings"
	"testing"
)

// TestUpToDate: every generated file is what its header gives (the
// go:generate lines of the package doc).
func TestUpToDate(t *testing.T) {
	for _, g := range []struct {
		header, out, pkg, from string
		lower                  bool
	}{
		{"internal/devcode/status.cuh", "internal/gpurt/status_gen.go", "gpurt", "internal/devcode/status.cuh", false},
		{"graph/shared.cuh", "graph/shared_gen.go", "graph", "graph/shared.cuh", true},
	} {
		src, err := os.ReadFile("../../../" + g.header)
		if err != nil {
			t.Fatal(err)
		}
		want, err := generate(src, g.pkg, g.from, g.lower)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile("../../../" + g.out)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go generate ./%s", g.out, path.Dir(g.out))
		}
	}
}

func TestGenerate(t *testing.T) {
	src := []byte("// x\nenum A : uint32_t {\n  kOne = 1u << 3,  // the third bit\n  kTwo = 2,\n};\nenum B : int { kC = 0, };\n")
	_, err := generate(src, "p", "h", false)
	if err == nil || !strings.Contains(err.Error(), "one entry per line") {
		t.Fatalf("one-line enum accepted or wrong error: %v", err)
	}
	src = []byte("enum A : uint32_t {\n  kOne = 1u << 3,  // the third bit\n  kTwo = 2,\n};\n")
	out, err := generate(src, "p", "h", false)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"One = 1 << 3 // the third bit", "Two = 2", "package p"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	if out, err := generate([]byte("enum A : int {\n  kPrepPlace = 16,\n};\n"), "p", "h", true); err != nil || !strings.Contains(string(out), "prepPlace = 16") {
		t.Fatalf("-lower: %v\n%s", err, out)
	}
	if _, err := generate([]byte("enum A : int {\n kX = y,\n};\n"), "p", "h", false); err == nil {
		t.Fatal("a value that is not a number was accepted")
	}
}
