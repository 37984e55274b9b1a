package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestUpToDate: internal/gpurt/status_gen.go is what the header gives.
func TestUpToDate(t *testing.T) {
	src, err := os.ReadFile("../../devcode/status.cuh")
	if err != nil {
		t.Fatal(err)
	}
	want, err := generate(src, "gpurt", "internal/devcode/status.cuh")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../gpurt/status_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("internal/gpurt/status_gen.go is stale: run go generate ./internal/gpurt")
	}
}

func TestGenerate(t *testing.T) {
	src := []byte("// x\nenum A : uint32_t {\n  kOne = 1u << 3,  // the third bit\n  kTwo = 2,\n};\nenum B : int { kC = 0, };\n")
	_, err := generate(src, "p", "h")
	if err == nil || !strings.Contains(err.Error(), "one entry per line") {
		t.Fatalf("one-line enum accepted or wrong error: %v", err)
	}
	src = []byte("enum A : uint32_t {\n  kOne = 1u << 3,  // the third bit\n  kTwo = 2,\n};\n")
	out, err := generate(src, "p", "h")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"One = 1 << 3 // the third bit", "Two = 2", "package p"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	if _, err := generate([]byte("enum A : int {\n kX = y,\n};\n"), "p", "h"); err == nil {
		t.Fatal("a value that is not a number was accepted")
	}
}
