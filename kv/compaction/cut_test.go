package compaction_test

import (
	"bytes"
	"context"
	"fmt"
	"github.com/warpkit/warpkit/kv/compaction"
	ct "github.com/warpkit/warpkit/kv/compaction/compactiontest"
	"math/rand/v2"
	"testing"

	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/manifest"
	"github.com/warpkit/warpkit/kv/sstable"
)

// compressibleJob is a job over two overlapping L0 tables and an L1 run of
// compressible values (about 4-6x under Snappy), written with opts; the
// outputs are written with opts too.
func compressibleJob(t *testing.T, rng *rand.Rand, e *ct.Env, opts sstable.WriterOptions, target uint64) *compaction.Job {
	val := func(i int) string {
		return string(bytes.Repeat([]byte(fmt.Sprintf("value %d of some row ", i%13)), 4+rng.IntN(8)))
	}
	seq := base.SeqNum(1)
	var l0 []*manifest.FileMetadata
	for range 2 {
		var es []ct.Entry
		for k := 0; k < 4000; k += 1 + rng.IntN(3) {
			kind := base.KindSet
			if rng.IntN(10) == 0 {
				kind = base.KindDelete
			}
			es = append(es, ct.Entry{K: base.MakeInternalKey([]byte(fmt.Sprintf("key%06d", k)), seq, kind), V: val(k)})
			seq++
		}
		l0 = append([]*manifest.FileMetadata{e.TableWith(t, es, nil, opts)}, l0...)
	}
	var l1 []*manifest.FileMetadata
	for _, rg := range [][2]int{{0, 2000}, {2000, 4000}} {
		var es []ct.Entry
		for k := rg[0]; k < rg[1]; k++ {
			es = append(es, ct.Entry{K: base.MakeInternalKey([]byte(fmt.Sprintf("key%06d", k)), 0, base.KindSet), V: val(k)})
		}
		l1 = append(l1, e.TableWith(t, es, nil, opts))
	}
	env := e.Env()
	env.WriterOptions = opts
	return &compaction.Job{
		Inputs:         []compaction.Input{{Level: 0, Files: l0}, {Level: 1, Files: l1}},
		OutputLevel:    1,
		TargetFileSize: target,
		Env:            env,
	}
}

// boundaries are the outputs' key ranges and sizes: where the job cut.
func boundaries(outs []*manifest.FileMetadata) []string {
	var b []string
	for _, f := range outs {
		b = append(b, fmt.Sprintf("%v..%v %d", f.Smallest, f.Largest, f.Size))
	}
	return b
}

// TestUncompressedCutIdentity: with compression off the job's ratio is 1 and
// the uncompressed-size rule cuts every output where the old stored-size
// rule (EstimatedSize >= TargetFileSize) did, in one part and in several.
func TestUncompressedCutIdentity(t *testing.T) {
	check := func(t *testing.T, round int, job *compaction.Job, parts int) {
		if r, err := compaction.CutRatio(job); err != nil || r != 1 {
			t.Fatalf("round %d: uncompressed job's ratio %v, %v", round, r, err)
		}
		old, err := compaction.CPU{Parts: parts, MinPartBytes: 1}.WithStoredSizeCut().Compact(context.Background(), job)
		if err != nil {
			t.Fatal(err)
		}
		cur, err := compaction.CPU{Parts: parts, MinPartBytes: 1}.Compact(context.Background(), job)
		if err != nil {
			t.Fatal(err)
		}
		ob, nb := boundaries(old.Outputs), boundaries(cur.Outputs)
		if fmt.Sprint(ob) != fmt.Sprint(nb) {
			t.Fatalf("round %d, %d parts: outputs cut differently\nold: %v\nnew: %v", round, parts, ob, nb)
		}
	}
	for round := range 40 {
		rng := rand.New(rand.NewPCG(uint64(round), 23))
		e := ct.NewEnv()
		job, _, _ := ct.RandomJob(t, rng, e)
		check(t, round, job, 1)
		check(t, round, job, 1+rng.IntN(4))
	}
	for round := range 4 {
		rng := rand.New(rand.NewPCG(uint64(round), 29))
		e := ct.NewEnv()
		opts := sstable.WriterOptions{BlockSize: 512 << rng.IntN(4), BloomBitsPerKey: 10}
		job := compressibleJob(t, rng, e, opts, uint64(8<<10+rng.IntN(32<<10)))
		check(t, round, job, 1)
		check(t, round, job, 2+rng.IntN(3))
	}
}

// TestCutOnRawSizeSnappy: with Snappy the job's ratio comes from the inputs'
// properties, outputs hold about TargetFileSize × ratio raw bytes, and so
// store about TargetFileSize.
func TestCutOnRawSizeSnappy(t *testing.T) {
	for round := range 4 {
		rng := rand.New(rand.NewPCG(uint64(round), 31))
		e := ct.NewEnv()
		opts := sstable.WriterOptions{BlockSize: 4096, BloomBitsPerKey: 10, Compression: sstable.SnappyCompression}
		const target = 16 << 10
		job := compressibleJob(t, rng, e, opts, target)
		ratio, err := compaction.CutRatio(job)
		if err != nil {
			t.Fatal(err)
		}
		if ratio < 2 || ratio > compaction.MaxCutRatio {
			t.Fatalf("round %d: ratio %v on compressible inputs", round, ratio)
		}
		limit := compaction.CutLimit(target, ratio)
		res, err := compaction.CPU{Parts: 1}.Compact(context.Background(), job)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Outputs) < 4 {
			t.Fatalf("round %d: %d outputs", round, len(res.Outputs))
		}
		for i, f := range res.Outputs {
			r, rel, err := job.Env.OpenTable(f)
			if err != nil {
				t.Fatal(err)
			}
			p := *r.Properties()
			rel()
			if i == len(res.Outputs)-1 {
				if p.RawDataSize > limit+uint64(opts.BlockSize)+1024 {
					t.Fatalf("round %d: last output raw %d over the limit %d", round, p.RawDataSize, limit)
				}
				break
			}
			// Cut at the first user key once RawSize reached the limit: at
			// most one entry (values here < 1 KiB) and the open block's
			// trailer past it.
			if p.RawDataSize < limit || p.RawDataSize > limit+1024+5 {
				t.Fatalf("round %d: output %d raw %d, limit %d (ratio %.2f)", round, i, p.RawDataSize, limit, ratio)
			}
			if lo, hi := uint64(target*3/4), uint64(target*5/4); f.Size < lo || f.Size > hi {
				t.Fatalf("round %d: output %d stores %d bytes, target %d (raw %d, ratio %.2f)", round, i, f.Size, target, p.RawDataSize, ratio)
			}
		}
		if e.Held() != 0 {
			t.Fatalf("round %d: %d readers not released", round, e.Held())
		}
	}
}

// TestCutRatio: the ratio is 1 for uncompressed stores and for inputs
// without the property, and clamped to 16.
func TestCutRatio(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 37))
	e := ct.NewEnv()
	snappy := sstable.WriterOptions{Compression: sstable.SnappyCompression}
	job := compressibleJob(t, rng, e, snappy, 1<<20)
	if r, err := compaction.CutRatio(job); err != nil || r <= 1 {
		t.Fatalf("Snappy inputs: ratio %v, %v", r, err)
	}
	job.Env.WriterOptions.Compression = sstable.NoCompression
	if r, _ := compaction.CutRatio(job); r != 1 {
		t.Fatalf("uncompressed store: ratio %v", r)
	}
	// Inputs written uncompressed, outputs to be compressed: ratio 1.
	job = compressibleJob(t, rng, e, sstable.WriterOptions{}, 1<<20)
	job.Env.WriterOptions = snappy
	if r, _ := compaction.CutRatio(job); r != 1 {
		t.Fatalf("uncompressed inputs: ratio %v", r)
	}
	// No inputs: 1.
	if r, _ := compaction.CutRatio(&compaction.Job{Env: job.Env}); r != 1 {
		t.Fatalf("no inputs: ratio %v", r)
	}
	for _, c := range []struct {
		ratio float64
		want  uint64
	}{{1, 1000}, {0.5, 1000}, {2.5, 2500}, {16, 16000}, {40, 16000}} {
		if got := compaction.CutLimit(1000, c.ratio); got != c.want {
			t.Fatalf("compaction.CutLimit(1000, %v) = %d, want %d", c.ratio, got, c.want)
		}
	}
}
