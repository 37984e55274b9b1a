package main

import (
	"context"
	"fmt"
	"time"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/kv/compaction"
	"github.com/warpkit/warpkit/kv/gpucompact"
	"github.com/warpkit/warpkit/kv/kvbench"
	"github.com/warpkit/warpkit/kv/sstable"
	"github.com/warpkit/warpkit/kv/vfs"
)

func init() {
	registerTourPart(tourPart{order: 70, name: "kv/gpucompact: one compaction job through the accelerated pipeline, byte for byte against compaction.CPU", run: tourCompact})
}

// tourCompact builds one L0→L1 job in memory and runs it on compaction.CPU
// and on gpucompact (its CUDA engine on the CUDA backend, else its Go
// engine), three times each, comparing the outputs byte for byte.
func tourCompact(ctx context.Context, env tourEnv) error {
	e := kvbench.NewCompactEnv(vfs.NewMem(), "/")
	defer e.Remove()
	job, err := e.Build(kvbench.CompactJob{L0Tables: 4, L0Bytes: 2 << 20, L1Bytes: 20 << 20, TableSize: 4 << 20,
		KeyLen: 16, ValueLen: 100, Compression: sstable.SnappyCompression, Seed: 1})
	if err != nil {
		return err
	}
	backend := warpkit.CPU
	if env.Backend == warpkit.CUDA {
		backend = warpkit.CUDA
	}
	gc, err := gpucompact.New(gpucompact.Options{Backend: backend, Device: env.Device, MinInputBytes: -1, Fallback: compaction.CPU{Parts: 1}})
	if err != nil {
		return err
	}
	defer gc.Close()
	run := func(c compaction.Compactor) (string, time.Duration, error) {
		best := time.Duration(0)
		var print string
		for range 3 {
			start := time.Now()
			res, err := c.Compact(ctx, job)
			d := time.Since(start)
			if err != nil {
				return "", 0, err
			}
			if print, err = e.Fingerprint(res); err != nil {
				return "", 0, err
			}
			if err := e.Drop(); err != nil {
				return "", 0, err
			}
			if best == 0 || d < best {
				best = d
			}
		}
		return print, best, nil
	}
	want, cpuTime, err := run(compaction.CPU{Parts: 1})
	if err != nil {
		return err
	}
	got, gcTime, err := run(gc)
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("the %s engine's tables differ from compaction.CPU's", gc.Stats().Engine)
	}
	mb := float64(job.InputBytes()) / 1e6
	st := gc.Stats()
	fmt.Printf("   one job, %.1f MB of input tables: compaction.CPU %.0f MB/s, gpucompact's %s engine %.0f MB/s (%.1fx), outputs identical\n",
		mb, mb/cpuTime.Seconds(), st.Engine, mb/gcTime.Seconds(), cpuTime.Seconds()/gcTime.Seconds())
	fmt.Printf("   engine jobs %d, fallbacks %d; memory kept for the next job: %.0f MB host, %.0f MB device\n",
		st.EngineJobs, st.FallbackJobs, float64(st.HeldBytes)/1e6, float64(st.DeviceHeldBytes)/1e6)
	return nil
}
