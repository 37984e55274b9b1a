package kv

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
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

// TestCrashRecoveryOnGoEngine runs the crash test with every compaction on
// the Go engine: a crash may fall while it writes its outputs in parallel.
func TestCrashRecoveryOnGoEngine(t *testing.T) {
	rounds := 12
	if testing.Short() {
		rounds = 3
	}
	var jobs uint64
	for round := range rounds {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			c := goEngine(t)
			crashRound(t, uint64(1000+round), c)
			st := c.Stats()
			if len(st.Fallbacks) != 0 {
				t.Fatalf("engine failures: %+v", st)
			}
			jobs += st.EngineJobs
		})
	}
	if jobs == 0 {
		t.Fatal("no compaction ran on the engine")
	}
	t.Logf("%d jobs on the engine", jobs)
}

// TestStallsOnGoEngine runs the L0 stall tests with the held compactions
// on the Go engine once released.
func TestStallsOnGoEngine(t *testing.T) {
	t.Run("L0Slowdown", func(t *testing.T) {
		opts := smallOptions()
		opts.Compactor = goEngine(t)
		stallL0Slowdown(t, opts)
	})
	t.Run("L0Stop", func(t *testing.T) {
		opts := smallOptions()
		opts.Compactor = goEngine(t)
		stallL0Stop(t, opts)
	})
}

// TestGoEngineFailureLeavesNoOrphans: a write error in the engine's
// parallel output writes fails the job over to compaction.CPU, which
// finishes it; the tables the failed attempt created are deleted, so the
// directory holds exactly the live tables, and a reopened store explains
// every file.
func TestGoEngineFailureLeavesNoOrphans(t *testing.T) {
	for _, nth := range []int32{1, 3} {
		t.Run(fmt.Sprint(nth), func(t *testing.T) {
			mem := vfs.NewMem()
			var armed atomic.Bool
			var writes atomic.Int32
			fault := vfs.NewFault(mem, vfs.InjectorFunc(func(op vfs.Op, path string) error {
				if armed.Load() && op == vfs.OpWrite && strings.HasSuffix(path, ".sst") && writes.Add(1) == nth {
					return errors.New("injected write error")
				}
				return nil
			}))
			c := goEngine(t)
			opts := manualOptions(fault, c)
			opts.TargetFileSize = 4 << 10 // many outputs, written in parallel
			db, err := Open("/db", &opts)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 4 {
				for k := range 400 {
					db.Set([]byte(fmt.Sprintf("k%04d", k*3+i)), []byte(fmt.Sprint(i, "-value-", k)), nil)
				}
				if err := db.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			inputs := liveTables(db)
			armed.Store(true)
			if err := db.Compact(context.Background(), nil, nil); err != nil {
				t.Fatal(err)
			}
			armed.Store(false)
			if st := c.Stats(); st.Fallbacks["write"] != 1 || writes.Load() < nth {
				t.Fatalf("compactor stats %+v after %d writes", st, writes.Load())
			}
			// The directory holds the live tables and, until their deletion
			// in the background, the inputs: nothing of the failed attempt.
			live := liveTables(db)
			for n := range tableFiles(t, mem, "/db") {
				if !live[n] && !inputs[n] {
					t.Fatalf("table %s is neither live %v nor an input %v", n, live, inputs)
				}
			}
			mustGet(t, db, "k0003", "3-value-0") // k=0 of the last round
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			checkNoOrphans(t, mem)
		})
	}
}
