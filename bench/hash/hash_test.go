package hashbench

import (
	"errors"
	"io"
	"testing"

	"github.com/warpkit/warpkit/internal/cli"
)

// TestBenchHashUsage: bad flags are usage errors, found before any device is
// opened (so they hold on machines without a GPU too).
func TestBenchHashUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--mix-log2", "15"}, {"--mix-log2", "22,27"}, {"--mix-log2", "x"}, {"--mix-log2", "22x"}, {"--mix-log2", "22.5"},
		{"--mix-utils", "1.2"}, {"--mix-utils", "0.6x"}, {"--only", "fig9"}, {"--layout", "tile4"}, {"--min-log2", "20", "--max-log2", "19"},
	} {
		if err := Run(t.Context(), args, io.Discard); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}
