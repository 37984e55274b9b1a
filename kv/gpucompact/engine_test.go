package gpucompact

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/warpkit/warpkit/kv/compaction"
	ct "github.com/warpkit/warpkit/kv/compaction/compactiontest"
	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/manifest"
	"github.com/warpkit/warpkit/kv/sstable"
)

// TestGoEngineIdentical: the Go engine writes the same tables as
// compaction.CPU{Parts: 1} — the same file bytes, metadata and Stats —
// over random jobs (overlapping L0 tables over an L1 run, snapshots, point
// and range tombstones, many versions, with and without levels below, tiny
// output targets so that jobs cut many times, grandparents), for every
// compression, block size and restart interval.
func TestGoEngineIdentical(t *testing.T) {
	rounds := 300
	if testing.Short() {
		rounds = 60
	}
	for round := range rounds {
		rng := rand.New(rand.NewPCG(uint64(round), 45))
		opts := sstable.WriterOptions{
			BlockSize:       []int{64, 256, 512, 4096}[rng.IntN(4)],
			RestartInterval: []int{0, 1, 2, 16}[rng.IntN(4)],
			BloomBitsPerKey: []int{0, 10}[rng.IntN(2)],
			Compression:     []sstable.Compression{sstable.NoCompression, sstable.SnappyCompression, sstable.S2Compression}[rng.IntN(3)],
		}
		run := func(engine func(context.Context, *compaction.Job) (*compaction.Result, error)) (*compaction.Result, [][]byte) {
			// The same job twice, in two environments: file numbers and
			// bytes must come out the same.
			e := ct.NewEnv()
			job, _, _ := ct.RandomJob(t, rand.New(rand.NewPCG(uint64(round), 45)), e)
			job.Env.WriterOptions = opts
			if round%3 == 0 {
				// Grandparents: tables of the level below the output, small
				// enough a limit that they cut outputs.
				for k := 0; k < 60; k += 6 {
					job.Grandparents = append(job.Grandparents, &manifest.FileMetadata{
						Smallest: base.MakeInternalKey([]byte(fmt.Sprintf("k%03d", k)), 0, base.KindSet),
						Largest:  base.MakeInternalKey([]byte(fmt.Sprintf("k%03d", k+4)), 0, base.KindSet),
						Size:     100,
					})
				}
				job.MaxGrandparentOverlap = 150
			}
			res, err := engine(context.Background(), job)
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			var files [][]byte
			for _, o := range res.Outputs {
				f, err := e.FS().Open(fmt.Sprintf("/%s.sst", o.FileNum))
				if err != nil {
					t.Fatal(err)
				}
				size, _ := f.Size()
				b := make([]byte, size)
				if _, err := f.ReadAt(b, 0); err != nil {
					t.Fatal(err)
				}
				f.Close()
				files = append(files, b)
			}
			if e.Held() != 0 {
				t.Fatalf("round %d: %d readers not released", round, e.Held())
			}
			return res, files
		}
		want, wantFiles := run(compaction.CPU{Parts: 1}.Compact)
		got, gotFiles := run(func(ctx context.Context, job *compaction.Job) (*compaction.Result, error) {
			return runGo(ctx, job, &stageTimes{}, nil)
		})
		if len(gotFiles) != len(wantFiles) {
			t.Fatalf("round %d (%+v): %d outputs, compaction.CPU %d", round, opts, len(gotFiles), len(wantFiles))
		}
		for i := range wantFiles {
			if !bytes.Equal(gotFiles[i], wantFiles[i]) {
				t.Fatalf("round %d (%+v): output %d: %d bytes differ from compaction.CPU's %d", round, opts, i, len(gotFiles[i]), len(wantFiles[i]))
			}
			if g, w := metaString(got.Outputs[i]), metaString(want.Outputs[i]); g != w {
				t.Fatalf("round %d: output %d metadata %s, compaction.CPU %s", round, i, g, w)
			}
		}
		gs, ws := got.Stats, want.Stats
		if gs.Engine != "go" {
			t.Fatalf("round %d: engine %q", round, gs.Engine)
		}
		gs.Duration, ws.Duration, gs.Engine = 0, 0, ""
		if gs != ws {
			t.Fatalf("round %d: stats %+v, compaction.CPU %+v", round, gs, ws)
		}
	}
}

func metaString(m *manifest.FileMetadata) string {
	return fmt.Sprintf("table %s size %d [%v, %v] seqs %d..%d rangedels %v", m.FileNum, m.Size, m.Smallest, m.Largest, m.SmallestSeq, m.LargestSeq, m.HasRangeDels)
}
