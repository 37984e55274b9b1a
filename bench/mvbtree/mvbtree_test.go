package mvbtreebench

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/cli"
	"github.com/warpkit/warpkit/internal/emu"
)

func TestUsage(t *testing.T) {
	for _, args := range [][]string{{"--keys", "48"}, {"--keys", "32,32"}, {"--keys", "16"}, {"--sizes", "x"}, {"--snapshots", "0"}, {"--snap-keys", "1K,2K"}, {"--no-such-flag"}} {
		if err := Run(t.Context(), args, io.Discard); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}

// TestOnEmulation runs the benchmark at tiny sizes on the CPU emulation of
// the GPU: every table printed, every answer checked by the benchmark itself.
func TestOnEmulation(t *testing.T) {
	if testing.Short() {
		t.Skip("a minute on the emulation")
	}
	defer func(f func() (*cuda.Device, error), from int) { openDevice, targetsFrom = f, from }(openDevice, targetsFrom)
	targetsFrom = 1 << 10
	openDevice = func() (*cuda.Device, error) { // Run closes the device it opens
		return emu.Device(t, emu.Options{}, "../../mvbtree/mvbtree.cu", "../../btree/btree.cu", "../../slaballoc/slaballoc.cu", "../internal/treebench/keys.cu"), nil
	}
	var out bytes.Buffer
	if err := Run(t.Context(), []string{"--keys", "32,64", "--sizes", "3K", "--snapshots", "1,3", "--snap-keys", "4K"}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"Fig 4.2 (32-bit)", "Fig 4.2 (64-bit)", "Targets (32-bit)", "Targets (64-bit)", "Snapshots held (64-bit)", "Snapshot targets (32-bit)",
		"64-bit keys and values against 32-bit", "32- and 64-bit keys"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q table in:\n%s", want, out.String())
		}
	}
}
