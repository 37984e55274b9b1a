package lsmbench

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/warpkit/warpkit/internal/cli"
)

func TestBenchLSMUsage(t *testing.T) {
	for _, args := range [][]string{{"--sections", "insert,nope"}, {"--insert-bmin", "23", "--insert-bmax", "22"}, {"--samples", "1"}} {
		if err := Run(t.Context(), args, io.Discard); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}

// TestBenchLSMPlot draws Fig. 4b from made-up series (the real ones need a GPU).
func TestBenchLSMPlot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fig4b.png")
	b := &lsmBench{plotPath: path, dev: nil}
	for _, bs := range []int{1 << 15, 1 << 16} {
		s := insertSeries{b: bs}
		for i := range 64 {
			s.lsm = append(s.lsm, 500-float64(i))
			s.sa = append(s.sa, 400/float64(i+1))
		}
		b.series = append(b.series, s)
	}
	if err := b.plot(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Size() < 1000 {
		t.Fatalf("plot file: %v, %v", st, err)
	}
}
