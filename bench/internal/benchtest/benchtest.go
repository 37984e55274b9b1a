// Package benchtest holds what the tests of the bench/... packages share:
// skipping GPU runs where there is no device, and checking the plots that
// --plot writes.
package benchtest

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warpkit/warpkit/cuda"
)

// NeedGPU skips the test where there is no CUDA device (CI has none).
func NeedGPU(t testing.TB) {
	t.Helper()
	if _, err := cuda.Devices(); err != nil {
		if errors.Is(err, cuda.ErrNoDevice) {
			t.Skip("no CUDA device")
		}
		t.Skipf("no usable CUDA device: %v", err)
	}
}

// CheckPlots checks that dir holds a PNG and an SVG plot for each of want
// tables (and nothing else but the extra files named), each non-empty and
// well-formed: the PNG signature, an <svg> root element.
func CheckPlots(t testing.TB, dir string, want int, extra ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("plot directory: %v", err)
	}
	counts := map[string]int{}
	for _, e := range entries {
		name := e.Name()
		if isExtra(name, extra) {
			counts["extra"]++
		} else {
			counts[filepath.Ext(name)]++
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		switch filepath.Ext(name) {
		case ".png":
			if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) || len(b) < 1000 {
				t.Errorf("%s: not a PNG plot (%d bytes)", name, len(b))
			}
		case ".svg":
			head := string(b[:min(len(b), 512)])
			if !strings.Contains(head, "<svg") || !bytes.HasSuffix(bytes.TrimSpace(b), []byte("</svg>")) {
				t.Errorf("%s: no SVG root element", name)
			}
		default:
			t.Errorf("%s: neither a PNG nor an SVG", name)
		}
	}
	if counts[".png"] != want || counts[".svg"] != want || counts["extra"] != len(extra) {
		t.Errorf("%s holds %d PNG and %d SVG plots and %d of the files %q, want %d, %d and %d", dir, counts[".png"], counts[".svg"], counts["extra"], extra, want, want, len(extra))
	}
}

func isExtra(name string, extra []string) bool {
	for _, e := range extra {
		if name == e {
			return true
		}
	}
	return false
}
