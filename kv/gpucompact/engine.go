package gpucompact

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"time"

	"github.com/warpkit/warpkit/internal/hostpar"
	"github.com/warpkit/warpkit/kv/compaction"
	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/manifest"
	"github.com/warpkit/warpkit/kv/sstable"
	"github.com/warpkit/warpkit/kv/vfs"
)

// stageTimes are the wall times of one job's stages.
type stageTimes struct {
	load, merge, gc, plan, write time.Duration
}

// runGo runs a job through the pipeline on goroutines (the Go engine), in
// the arrays of ws:
// load, merge, garbage collection and selection, the plan, block encoding
// and sealing, and the output tables, written through sstable.Writer's
// AddEncodedBlock. Its output is byte-identical to compaction.CPU{Parts: 1}
// (file bytes, Result metadata and Stats but Duration). Output tables are
// created in key order, then encoded and written in parallel; on error the
// ones created stay for the caller to remove (kv removes every table a job
// created and did not return).
// Failures are *stageError naming the stage; failAt (tests) injects one.
func runGo(ctx context.Context, job *compaction.Job, ws *workspace, times *stageTimes, failAt func(stage string) error) (*compaction.Result, error) {
	start := time.Now()
	t0 := start
	stage := func(name string, d *time.Duration) error {
		now := time.Now()
		*d += now.Sub(t0)
		t0 = now
		if err := ctx.Err(); err != nil {
			return err
		}
		if failAt != nil {
			if err := failAt(name); err != nil {
				return &stageError{name, err}
			}
		}
		return nil
	}
	wrap := func(name string, err error) error {
		if err == nil || ctx.Err() != nil || isCorruption(err) {
			return err
		}
		return &stageError{name, err}
	}
	spans, outSpans, dropped, releases, err := compaction.CollectSpans(job)
	defer func() {
		for _, rel := range releases {
			rel()
		}
	}()
	if err != nil {
		return nil, wrap("load", err)
	}
	ratio, err := compaction.CutRatio(job)
	if err != nil {
		return nil, wrap("load", err)
	}
	s, err := loadJob(ctx, job, ws)
	if err != nil {
		return nil, wrap("load", err)
	}
	if err := stage("load", &times.load); err != nil {
		return nil, err
	}
	s.setK0()
	order := s.merge(ws)
	if err := stage("merge", &times.merge); err != nil {
		return nil, err
	}
	kept, keptNew, st := s.gc(order, job, spans, ws)
	if err := stage("gc", &times.gc); err != nil {
		return nil, err
	}
	opts := job.Env.WriterOptions.WithDefaults()
	tables := s.plan(kept, keptNew, job, opts, compaction.CutLimit(job.TargetFileSize, ratio), outSpans, ws)
	rawLen, sealedLen := layoutOutputs(tables, opts.Compression)
	raw, sealed, hashes := take(&ws.raw, rawLen), take(&ws.sealed, sealedLen), take(&ws.hashes, len(kept))
	if err := stage("plan", &times.plan); err != nil {
		return nil, err
	}
	// The output files are created in key order (their numbers ascend as
	// compaction.CPU's do). Then the tables are encoded in batches of
	// consecutive tables, every core on a batch's blocks, and each table,
	// once encoded, is written by a goroutine of its own while later
	// batches encode (the Writer's part of a table — index, filter, file
	// writes — is sequential).
	type output struct {
		num    base.FileNum
		f      vfs.File
		blocks []sstable.EncodedBlock
		meta   *manifest.FileMetadata
		err    error
	}
	outs := make([]output, len(tables))
	for i := range outs {
		num, f, err := job.Env.CreateTable()
		if err != nil {
			for _, o := range outs[:i] {
				o.f.Close()
			}
			return nil, wrap("write", err)
		}
		outs[i] = output{num: num, f: f, blocks: make([]sstable.EncodedBlock, len(tables[i].blockEnds))}
	}
	write := func(o *output, t *plannedTable) {
		w := sstable.NewWriter(o.f, job.Env.WriterOptions)
		var err error
		for _, b := range o.blocks {
			if err = w.AddEncodedBlock(b); err != nil {
				break
			}
		}
		if err != nil {
			o.f.Close()
			o.err = wrap("write", err)
			return
		}
		o.meta, err = compaction.FinishOutput(w, o.f, o.num, outSpans, t.lower, t.upper)
		o.err = wrap("write", err)
	}
	type blockRef struct{ t, b int }
	var refs []blockRef
	var writers sync.WaitGroup
	failed := false
	for first := 0; first < len(tables); {
		if failed {
			// A table failed: the rest are not encoded.
			for i := first; i < len(tables); i++ {
				outs[i].f.Close()
				outs[i].err = errSkipped
			}
			break
		}
		// A batch: at least encodeBatchBlocks blocks per core, or one table.
		refs = refs[:0]
		last := first
		for last < len(tables) && (last == first || len(refs) < encodeBatchBlocks*runtime.GOMAXPROCS(0)) {
			for bi := range tables[last].blockEnds {
				refs = append(refs, blockRef{last, bi})
			}
			last++
		}
		blockErrs := make([]error, len(refs))
		hostpar.ForCores(len(refs), 1, func(_, lo, hi int) {
			bb := sstable.NewBlockBuilder(opts.RestartInterval)
			for i := lo; i < hi; i++ {
				r := refs[i]
				outs[r.t].blocks[r.b], blockErrs[i] = s.encodeBlock(bb, &tables[r.t], r.b, kept, opts, raw, sealed, hashes)
			}
		})
		errs := make([]error, last-first)
		for i, err := range blockErrs {
			if t := refs[i].t - first; err != nil && errs[t] == nil {
				errs[t] = err
			}
		}
		for i := first; i < last; i++ {
			o := &outs[i]
			if o.err = ctx.Err(); o.err == nil && errs[i-first] != nil {
				o.err = wrap("encode", errs[i-first])
			}
			if o.err != nil {
				o.f.Close()
				failed = true
				continue
			}
			writers.Add(1)
			go func() {
				defer writers.Done()
				write(o, &tables[i])
			}()
		}
		first = last
	}
	writers.Wait()
	res := &compaction.Result{}
	for _, o := range outs {
		if o.err != nil {
			return nil, o.err
		}
		res.Outputs = append(res.Outputs, o.meta)
		res.Stats.BytesWritten += o.meta.Size
	}
	if err := stage("write", &times.write); err != nil {
		return nil, err
	}
	res.Stats.EntriesIn = st.entriesIn
	res.Stats.EntriesOut = st.entriesOut
	res.Stats.TombstonesElided = st.tombstonesElided
	res.Stats.RangeDelsDropped = dropped
	res.Stats.BytesRead = job.InputBytes()
	res.Stats.Duration = time.Since(start)
	res.Stats.Engine = "go"
	return res, nil
}

// encodeBatchBlocks is how many blocks per core one encode batch takes at
// least (tests make it 0: a table per batch).
var encodeBatchBlocks = 8

// errSkipped marks the output tables not written after an earlier one
// failed (the job returns the earlier one's error).
var errSkipped = errors.New("gpucompact: not written: an earlier output failed")
