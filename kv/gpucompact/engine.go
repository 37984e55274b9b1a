package gpucompact

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
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
	load, merge, gc, sizes, plan, write time.Duration
}

// runGo runs a job through the pipeline on goroutines (the Go engine), in
// the arrays of ws:
// load, merge, garbage collection and selection, entry sizes, the plan
// (the one sequential pass), block encoding
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
	pe := s.planEntries(kept, ws)
	if err := stage("sizes", &times.sizes); err != nil {
		return nil, err
	}
	tables := s.plan(pe, kept, keptNew, job, opts, compaction.CutLimit(job.TargetFileSize, ratio), outSpans)
	rawLen, sealedLen := layoutOutputs(tables, opts.Compression)
	raw, sealed, hashes := take(&ws.raw, rawLen), take(&ws.sealed, sealedLen), take(&ws.hashes, len(kept))
	if err := stage("plan", &times.plan); err != nil {
		return nil, err
	}
	// The output files are created in key order (their numbers ascend as
	// compaction.CPU's do). Then every core takes blocks to encode from one
	// queue, in table order, while a goroutine per table writes the table's
	// blocks as they become ready, in order (the Writer's part — index,
	// filter, file writes — is sequential): a table's writer trails just
	// behind its encoding, and little is left to write when the last block
	// is encoded.
	type output struct {
		num    base.FileNum
		f      vfs.File
		blocks []sstable.EncodedBlock
		ready  []atomic.Bool // blocks[i] is encoded
		notify chan struct{} // a block of the table got ready (or encoding ended)
		meta   *manifest.FileMetadata
		err    error
	}
	outs := make([]output, len(tables))
	for i := range outs {
		num, f, err := job.Env.CreateTable()
		if err != nil {
			for j := range outs[:i] {
				outs[j].f.Close()
			}
			return nil, wrap("write", err)
		}
		o := &outs[i]
		n := len(tables[i].blockEnds)
		o.num, o.f, o.blocks, o.ready, o.notify = num, f, make([]sstable.EncodedBlock, n), make([]atomic.Bool, n), make(chan struct{}, 1)
	}
	var (
		next    atomic.Int64
		stop    atomic.Bool // a block failed, or the context ended: encode no more
		ended   atomic.Bool // the encoders have returned
		writers sync.WaitGroup
	)
	write := func(o *output, t *plannedTable) {
		w := sstable.NewWriter(o.f, job.Env.WriterOptions)
		var err error
		for b := range o.blocks {
			for !o.ready[b].Load() {
				if ended.Load() && !o.ready[b].Load() {
					o.f.Close()
					o.err = errSkipped // a block of this table or an earlier one failed
					return
				}
				<-o.notify
			}
			if err = w.AddEncodedBlock(o.blocks[b]); err != nil {
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
	for i := range outs {
		writers.Add(1)
		go func() {
			defer writers.Done()
			write(&outs[i], &tables[i])
		}()
	}
	type blockRef struct{ t, b int }
	var refs []blockRef
	for ti, t := range tables {
		for bi := range t.blockEnds {
			refs = append(refs, blockRef{ti, bi})
		}
	}
	blockErrs := make([]error, len(refs))
	hostpar.ForCores(len(refs), 1, func(_, _, _ int) {
		bb := sstable.NewBlockBuilder(opts.RestartInterval)
		for !stop.Load() {
			i := int(next.Add(1) - 1)
			if i >= len(refs) {
				return
			}
			r := refs[i]
			o := &outs[r.t]
			o.blocks[r.b], blockErrs[i] = s.encodeBlock(bb, &tables[r.t], r.b, kept, opts, raw, sealed, hashes)
			if failAt != nil && r.t == len(tables)/2 && r.b == len(tables[r.t].blockEnds)/2 && blockErrs[i] == nil {
				blockErrs[i] = failAt("encode") // a block in the middle of the job
			}
			if blockErrs[i] != nil || i%64 == 0 && ctx.Err() != nil {
				stop.Store(true)
				continue
			}
			o.ready[r.b].Store(true)
			select {
			case o.notify <- struct{}{}:
			default: // the writer has a wake-up pending
			}
		}
	})
	// Wake every writer still waiting: the blocks it waits for will not come.
	ended.Store(true)
	for i := range outs {
		select {
		case outs[i].notify <- struct{}{}:
		default:
		}
	}
	writers.Wait()
	for i, err := range blockErrs {
		if o := &outs[refs[i].t]; err != nil && (o.err == errSkipped || o.err == nil) {
			o.err = wrap("encode", err)
		}
	}
	if err := ctx.Err(); err != nil {
		for i := range outs {
			if outs[i].err == errSkipped {
				outs[i].err = err
			}
		}
	}
	// The job's error: the first table's that is not errSkipped.
	var firstErr error
	for i := range outs {
		if err := outs[i].err; err != nil && (firstErr == nil || firstErr == errSkipped) {
			firstErr = err
		}
	}
	if firstErr == errSkipped {
		firstErr = wrap("write", firstErr) // (never: a table is skipped only after another failed)
	}
	if firstErr != nil {
		return nil, firstErr
	}
	res := &compaction.Result{}
	for i := range outs {
		res.Outputs = append(res.Outputs, outs[i].meta)
		res.Stats.BytesWritten += outs[i].meta.Size
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

// errSkipped marks the output tables not written because another failed
// (the job returns the first table's error, so the failure's own when it
// comes first).
var errSkipped = errors.New("gpucompact: not written: an earlier output failed")
