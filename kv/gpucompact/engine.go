package gpucompact

import (
	"context"
	"errors"
	"time"

	"github.com/warpkit/warpkit/kv/compaction"
	"github.com/warpkit/warpkit/kv/internal/rangedel"
	"github.com/warpkit/warpkit/kv/sstable"
)

// stageTimes are the wall times of one job's stages, and (the CUDA
// engine) of its device batches (Stats.Encode).
type stageTimes struct {
	load, merge, gc, sizes, plan, write time.Duration
	encode, writeTail                   time.Duration
	batches                             uint64
}

// add adds o's times to t's.
func (t *stageTimes) add(o *stageTimes) {
	t.load += o.load
	t.merge += o.merge
	t.gc += o.gc
	t.sizes += o.sizes
	t.plan += o.plan
	t.write += o.write
	t.encode += o.encode
	t.writeTail += o.writeTail
	t.batches += o.batches
}

// addTo adds t's times to the stage times of st.
func (t *stageTimes) addTo(st *Stats) {
	st.Load += t.load
	st.Merge += t.merge
	st.GC += t.gc
	st.Sizes += t.sizes
	st.Plan += t.plan
	st.Write += t.write
	st.Encode += t.encode
	st.WriteTail += t.writeTail
	st.EncodeBatches += t.batches
}

// runGo runs a job through the pipeline on goroutines (the Go engine), in
// the arrays of ws: load, merge, garbage collection and selection, entry
// sizes, then the plan (the one sequential pass) with block encoding and
// sealing on every core behind it and a writer per output table behind
// those, writing through sstable.Writer's AddEncodedBlock (pipeline). Its
// output is byte-identical to compaction.CPU{Parts: 1} (file bytes, Result
// metadata and Stats but Duration); output tables are created in key order.
// On error the tables created stay for the caller to remove (kv removes
// every table a job created and did not return). Failures are *stageError
// naming the stage; failAt (tests) injects one.
func runGo(ctx context.Context, job *compaction.Job, ws *workspace, times *stageTimes, failAt func(stage string) error) (*compaction.Result, error) {
	return runEngine(ctx, job, ws, nil, times, failAt)
}

// runEngine is runGo, with the stages between the load and the plan (merge,
// garbage collection, entry sizes) on the device when dev is not nil (the
// CUDA engine); its output is the same. A device failure is a *stageError
// of stage "device".
func runEngine(ctx context.Context, job *compaction.Job, ws *workspace, dev *devEngine, times *stageTimes, failAt func(stage string) error) (*compaction.Result, error) {
	r, err := prepare(ctx, job, nil, ws, dev, times, failAt)
	if err != nil {
		return nil, err
	}
	return r.write()
}

// partRun is a job, or one partition of it (partition.go), between its two
// halves: prepare reads, merges, collects and sizes its entries (and plans a
// partition's walk), write walks the plan with the encoders and writers
// behind it. Partitions overlap one's write with the next one's prepare,
// each in a workspace (and device engine) of its own.
type partRun struct {
	ctx    context.Context
	job    *compaction.Job
	part   *partition // nil: the whole job
	ws     *workspace
	dev    *devEngine
	times  *stageTimes
	failAt func(stage string) error

	start, t0 time.Time // the job's start, the last stage's end
	closers   []func()  // the input tables, the range tombstones' readers

	s             *inputSet
	kept          []uint32
	keptNew       []bool
	pe            []planEntry
	jumps         *blockJumps
	contentsBound int
	st            gcStats
	outSpans      []rangedel.Span
	dropped       uint64
	opts          sstable.WriterOptions
	cutLimit      uint64
	w             walk
	// next is where the next partition starts (nil: the job's end).
	next []byte
}

// jobSpans is a job's range tombstones (compaction.CollectSpans): the
// fragments that decide its entries, those its outputs carry, and how many
// it dropped; release lets go of the tables' readers they came from.
type jobSpans struct {
	spans, outSpans []rangedel.Span
	dropped         uint64
	releases        []func()
}

// collectSpans collects a job's range tombstones (on error, having let go
// of what it read).
func collectSpans(job *compaction.Job) (*jobSpans, error) {
	spans, outSpans, dropped, releases, err := compaction.CollectSpans(job)
	js := &jobSpans{spans: spans, outSpans: outSpans, dropped: dropped, releases: releases}
	if err != nil {
		js.release()
		return nil, err
	}
	return js, nil
}

func (js *jobSpans) release() {
	for _, rel := range js.releases {
		rel()
	}
	js.releases = nil
}

// stage ends stage name, adding its time to *d, and checks the context and
// the test hook.
func (r *partRun) stage(name string, d *time.Duration) error {
	now := time.Now()
	*d += now.Sub(r.t0)
	r.t0 = now
	if err := r.ctx.Err(); err != nil {
		return err
	}
	if r.failAt != nil {
		if err := r.failAt(name); err != nil {
			return &stageError{name, err}
		}
	}
	return nil
}

// wrap gives an error of stage name its stage, unless it has one, is the
// context's, or reports damaged input.
func (r *partRun) wrap(name string, err error) error {
	var se *stageError
	if err == nil || r.ctx.Err() != nil || isCorruption(err) || errors.As(err, &se) {
		return err
	}
	return &stageError{name, err}
}

// close releases what the run holds open.
func (r *partRun) close() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
	r.closers = nil
}

// prepare runs the first half of a job or partition (part): the part's
// range loaded, and, for a partition, its walk planned: its output tables
// from its first key to next, where the next partition starts (nil: the
// job's end), with the Stats of the entries in between. A partition that
// cannot end a table inside its range returns errNoCut. On error it has
// closed what it opened.
func prepare(ctx context.Context, job *compaction.Job, part *partition, ws *workspace, dev *devEngine, times *stageTimes, failAt func(stage string) error) (_ *partRun, err error) {
	ws.pinDev, ws.pinLimit = nil, -1
	if dev != nil {
		ws.pinDev, ws.pinLimit = dev.dev, dev.pinLimit
	}
	r := &partRun{ctx: ctx, job: job, part: part, ws: ws, dev: dev, times: times, failAt: failAt, start: time.Now()}
	r.t0 = r.start
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	var js *jobSpans
	if part != nil {
		js = part.spans // (the job's, collected once for every partition)
	}
	if js == nil {
		if js, err = collectSpans(job); err != nil {
			return nil, r.wrap("load", err)
		}
		r.closers = append(r.closers, js.release)
	}
	spans := js.spans
	r.outSpans, r.dropped = js.outSpans, js.dropped
	ratio, err := compaction.CutRatio(job)
	if err != nil {
		return nil, r.wrap("load", err)
	}
	if dev != nil {
		// The host reads and decompresses; the device decodes, merges,
		// collects garbage and sizes the entries.
		in, l, err := loadJobBlocks(ctx, job, ws, part, dev, r.failAt)
		if err != nil {
			return nil, r.wrap("load", err)
		}
		r.closers = append(r.closers, l.close)
		durations := map[string]*time.Duration{"load": &times.load, "merge": &times.merge, "gc": &times.gc, "sizes": &times.sizes}
		r.s, r.kept, r.keptNew, r.pe, r.jumps, r.contentsBound, r.st, err = dev.stages(ctx, in, job, spans, ws, func(name string, err error) error {
			if err != nil {
				return err
			}
			return r.stage(name, durations[name])
		})
		if err != nil {
			var se *stageError
			if ctx.Err() != nil || errors.As(err, &se) || isCorruption(err) || errors.Is(err, errTooLarge) || errors.Is(err, errIrregularBlock) || errors.Is(err, errInputOrder) {
				return nil, err
			}
			return nil, &stageError{"device", err}
		}
	} else {
		if r.s, err = loadJob(ctx, job, ws, part); err != nil {
			return nil, r.wrap("load", err)
		}
		if err := r.stage("load", &times.load); err != nil {
			return nil, err
		}
		if _, err := r.s.setK0(); err != nil {
			return nil, err
		}
		order := r.s.merge(ws)
		if err := r.stage("merge", &times.merge); err != nil {
			return nil, err
		}
		if r.kept, r.keptNew, r.st, err = r.s.gc(order, job, spans, ws); err != nil {
			return nil, err
		}
		if err := r.stage("gc", &times.gc); err != nil {
			return nil, err
		}
		r.pe, r.contentsBound = r.s.planEntries(r.kept, ws)
		if goEngineJumps != nil {
			r.jumps = goEngineJumps(r.pe, job.Env.WriterOptions.WithDefaults())
		}
		if err := r.stage("sizes", &times.sizes); err != nil {
			return nil, err
		}
	}
	r.opts = job.Env.WriterOptions.WithDefaults()
	r.cutLimit = compaction.CutLimit(job.TargetFileSize, ratio)
	r.w = wholeJob(len(r.kept))
	if part != nil {
		if r.w, r.next, err = part.walk(r.s, r.pe, r.kept, r.keptNew, r.jumps, job, r.opts, r.cutLimit, r.outSpans); err != nil {
			return nil, err
		}
		r.st = part.stats(r.s, r.st, r.w, r.next)
		now := time.Now() // (the dry walk counts as planning)
		times.plan += now.Sub(r.t0)
		r.t0 = now
	}
	return r, nil
}

// wrote says whether the run's walk writes an output table (a partition
// that keeps nothing, before any table of the job has started, does not).
func (r *partRun) wrote() bool {
	if r.w.last {
		return true // (whether it does or not, no partition follows)
	}
	return r.w.stopAt > r.w.from
}

// write runs the second half of a prepared run: the plan walk, with the
// encoders and the writers behind it, and the result. It closes the run.
func (r *partRun) write() (*compaction.Result, error) {
	defer r.close()
	ctx, times := r.ctx, r.times
	r.t0 = time.Now() // (a partition's write may wait for the last one's)
	// The plan walk, with the encoders and the writers behind it.
	p := newPipeline(ctx, r.s, r.job, r.ws, r.dev, r.opts, r.kept, r.contentsBound, r.outSpans, r.failAt)
	p.startEncoders()
	err := r.s.plan(r.pe, r.kept, r.keptNew, r.jumps, r.job, r.opts, r.cutLimit, r.outSpans, p, r.w)
	p.planEnded(err)
	if err == nil {
		err = r.stage("plan", &times.plan)
	}
	if err != nil {
		// The walk stopped (a table's file could not be created, or the
		// pipeline had stopped it) or the stage check failed: the
		// pipeline's own error, or the context's, is the job's.
		p.abort()
		_, werr := p.wait()
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, errSkipped) && werr != nil:
			return nil, werr
		}
		return nil, r.wrap("write", err)
	}
	tables, err := p.wait()
	if err != nil {
		return nil, err
	}
	if r.dev != nil {
		times.encode += p.encTime
		times.batches += uint64(p.encBatches)
		if !p.encEnd.IsZero() {
			times.writeTail += time.Since(p.encEnd)
		}
	}
	res := &compaction.Result{}
	for _, t := range tables {
		res.Outputs = append(res.Outputs, t.meta)
		res.Stats.BytesWritten += t.meta.Size
	}
	if err := r.stage("write", &times.write); err != nil {
		return nil, err
	}
	res.Stats.EntriesIn = r.st.entriesIn
	res.Stats.EntriesOut = r.st.entriesOut
	res.Stats.TombstonesElided = r.st.tombstonesElided
	res.Stats.RangeDelsDropped = r.dropped
	res.Stats.BytesRead = r.job.InputBytes()
	res.Stats.Duration = time.Since(r.start)
	res.Stats.Engine = "go"
	if r.dev != nil {
		res.Stats.Engine = "cuda"
	}
	return res, nil
}

// errSkipped marks the output tables not written, and the walk stopped,
// because something else failed (the job returns that failure's error).
var errSkipped = errors.New("gpucompact: not written: an earlier output failed")

// goEngineJumps, set by tests, gives the Go engine's walk the blocks that
// would start at each kept entry, so that it steps over blocks as the CUDA
// engine's walk does (nil: entry by entry).
var goEngineJumps func(pe []planEntry, opts sstable.WriterOptions) *blockJumps
