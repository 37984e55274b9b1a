package gpucompact

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/warpkit/warpkit/internal/gputest"
	"github.com/warpkit/warpkit/kv/compaction"
	ct "github.com/warpkit/warpkit/kv/compaction/compactiontest"
	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/manifest"
	"github.com/warpkit/warpkit/kv/sstable"
)

// benchJob builds an L0→L1 job as a store's would look: four overlapping L0
// tables of random keys over a two-table L1 run, 16-byte keys, values of
// valueLen bytes (half of each random, half repeated), Snappy, about
// inputMiB MiB of entries in all.
// benchGrandparents returns count tables evenly over benchJob's key space
// (the metadata of a level below its output).
func benchGrandparents(inputMiB, valueLen, count int) []*manifest.FileMetadata {
	keySpace := 2 * (inputMiB << 20 / (16 + 8 + valueLen))
	var gp []*manifest.FileMetadata
	for i := range count {
		lo, hi := i*keySpace/count, (i+1)*keySpace/count-1
		gp = append(gp, &manifest.FileMetadata{
			Smallest: base.MakeInternalKey(fmt.Appendf(nil, "key-%011d", lo), 0, base.KindSet),
			Largest:  base.MakeInternalKey(fmt.Appendf(nil, "key-%011d", hi), 0, base.KindSet),
			Size:     uint64(inputMiB<<20) / uint64(count),
		})
	}
	return gp
}

func benchJob(b testing.TB, inputMiB, valueLen int) (*ct.Env, *compaction.Job) {
	return benchJobWith(b, inputMiB, valueLen, sstable.SnappyCompression)
}

// benchJobWith is benchJob with the tables' compression given.
func benchJobWith(b testing.TB, inputMiB, valueLen int, c sstable.Compression) (*ct.Env, *compaction.Job) {
	e := ct.NewEnv()
	opts := sstable.WriterOptions{BlockSize: 4096, BloomBitsPerKey: 10, Compression: c}
	perEntry := 16 + 8 + valueLen
	n := inputMiB << 20 / perEntry
	rng := rand.New(rand.NewPCG(1, 2))
	val := func() string {
		v := make([]byte, valueLen)
		for i := range v[:valueLen/2] {
			v[i] = byte(rng.Uint32())
		}
		return string(v)
	}
	keySpace := n * 2
	seq := base.SeqNum(1)
	var l0 []*manifest.FileMetadata
	for range 4 {
		var es []ct.Entry
		seen := map[int]bool{}
		for len(es) < n/8 {
			k := rng.IntN(keySpace)
			if seen[k] {
				continue
			}
			seen[k] = true
			es = append(es, ct.Entry{K: base.MakeInternalKey(fmt.Appendf(nil, "key-%011d", k), seq, base.KindSet), V: val()})
			seq++
		}
		l0 = append([]*manifest.FileMetadata{e.TableWith(b, es, nil, opts)}, l0...)
	}
	var l1 []*manifest.FileMetadata
	for half := range 2 {
		var es []ct.Entry
		for k := half * keySpace / 2; k < (half+1)*keySpace/2; k += 4 {
			es = append(es, ct.Entry{K: base.MakeInternalKey(fmt.Appendf(nil, "key-%011d", k), 0, base.KindSet), V: val()})
		}
		l1 = append(l1, e.TableWith(b, es, nil, opts))
	}
	env := e.Env()
	env.WriterOptions = opts
	return e, &compaction.Job{
		Inputs:         []compaction.Input{{Level: 0, Files: l0}, {Level: 1, Files: l1}},
		OutputLevel:    1,
		TargetFileSize: 4 << 20,
		Env:            env,
	}
}

// BenchmarkJob compacts one job with compaction.CPU on one goroutine, with
// its subcompactions (GOMAXPROCS parts, at most 8), and with the Go engine;
// MB/s is of input bytes.
func BenchmarkJob(b *testing.B) {
	for _, size := range []struct {
		mib, value int
		c          sstable.Compression
	}{{16, 100, sstable.SnappyCompression}, {64, 100, sstable.SnappyCompression}, {64, 1024, sstable.SnappyCompression},
		{64, 32, sstable.NoCompression}, {64, 128, sstable.NoCompression}} {
		_, job := benchJobWith(b, size.mib, size.value, size.c)
		name := fmt.Sprintf("%dMiB-%dB", size.mib, size.value)
		if size.c == sstable.NoCompression {
			name += "-none"
		}
		engines := []struct {
			name string
			run  func(context.Context, *compaction.Job) (*compaction.Result, error)
		}{
			{"cpu", compaction.CPU{Parts: 1}.Compact},
			{"cpu-parts", compaction.CPU{}.Compact},
			{"go-engine", goEngine},
		}
		for _, eng := range engines {
			b.Run(name+"/"+eng.name, func(b *testing.B) {
				b.SetBytes(int64(job.InputBytes()))
				for b.Loop() {
					if _, err := eng.run(context.Background(), job); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		// The engines' stage times (ms per job): the Go engine, and the CUDA
		// engine where there is a device.
		for _, engine := range []string{"go-engine", "cuda-engine"} {
			b.Run(name+"/"+engine+"-stages", func(b *testing.B) {
				var dev *devEngine
				if engine == "cuda-engine" {
					d, err := newDevEngine(gputest.Device(b), false, Options{})
					if err != nil {
						b.Fatal(err)
					}
					defer d.close()
					dev = d
				}
				b.SetBytes(int64(job.InputBytes()))
				var times stageTimes
				ws := &workspace{} // kept between jobs, as a Compactor keeps it
				defer ws.free()
				for b.Loop() {
					if _, err := runEngine(context.Background(), job, ws, dev, &times, nil); err != nil {
						b.Fatal(err)
					}
				}
				per := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 / float64(b.N) }
				b.ReportMetric(per(times.load), "load-ms")
				b.ReportMetric(per(times.merge), "merge-ms")
				b.ReportMetric(per(times.gc), "gc-ms")
				b.ReportMetric(per(times.sizes), "sizes-ms")
				b.ReportMetric(per(times.plan), "plan-ms")
				b.ReportMetric(per(times.write), "write-ms")
			})
		}
	}
}
