package kv

import (
	"fmt"
	"testing"

	"github.com/warpkit/warpkit/kv/gpucompact"
	"github.com/warpkit/warpkit/kv/vfs"
)

// goEngine returns a kv/gpucompact compactor taking every job (its Go
// engine), for running the store's tests on it.
func goEngine(t *testing.T) *gpucompact.Compactor {
	t.Helper()
	c, err := gpucompact.New(gpucompact.Options{MinInputBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestModelOnGoEngine runs the model test with every compaction on
// kv/gpucompact's Go engine: compressed and not, shallow and deep levels,
// two concurrent compactions.
func TestModelOnGoEngine(t *testing.T) {
	ops := 3000
	if testing.Short() {
		ops = 800
	}
	for seed := range 4 {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			c := goEngine(t)
			opts := smallOptions()
			opts.Compactor = c
			opts.MaxConcurrentCompactions = 2
			if seed%2 == 1 {
				opts.DisableCompression = true
				opts.BloomBitsPerKey = -1
			}
			keys := 300
			if seed >= 2 {
				keys = 5000
				opts.LBaseMaxBytes = 24 << 10
				opts.LevelMultiplier = 2
				opts.TargetFileSize = 6 << 10
			}
			runModel(t, uint64(100+seed), ops, keys, opts)
			if st := c.Stats(); st.EngineJobs == 0 || len(st.Fallbacks) != 0 {
				t.Fatalf("compactor stats %+v", st)
			}
		})
	}
}

// TestConcurrentOnGoEngine runs writers, readers, snapshots and manual
// compactions against a store compacting on the Go engine (meant for
// -race).
func TestConcurrentOnGoEngine(t *testing.T) {
	opts := smallOptions()
	opts.FS = vfs.NewMem()
	opts.Compactor = goEngine(t)
	opts.MaxConcurrentCompactions = 2
	runConcurrent(t, opts)
}
