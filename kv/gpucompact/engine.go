package gpucompact

import (
	"context"
	"errors"
	"time"

	"github.com/warpkit/warpkit/kv/compaction"
	"github.com/warpkit/warpkit/kv/sstable"
)

// stageTimes are the wall times of one job's stages.
type stageTimes struct {
	load, merge, gc, sizes, plan, write time.Duration
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
	res, _, err := runPart(ctx, job, nil, ws, dev, times, failAt)
	return res, err
}

// runPart is runEngine over the whole job (part nil) or one partition of it
// (partition.go): the part's range loaded, and its output tables from its
// first key to next, where the next partition starts (nil: the job's end),
// with the Stats of the entries in between (Duration and BytesRead are the
// caller's). A partition that cannot end a table inside its range returns
// errNoCut.
func runPart(ctx context.Context, job *compaction.Job, part *partition, ws *workspace, dev *devEngine, times *stageTimes, failAt func(stage string) error) (_ *compaction.Result, next []byte, _ error) {
	ws.pinDev = nil
	if dev != nil {
		ws.pinDev = dev.dev
	}
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
		var se *stageError
		if err == nil || ctx.Err() != nil || isCorruption(err) || errors.As(err, &se) {
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
		return nil, nil, wrap("load", err)
	}
	ratio, err := compaction.CutRatio(job)
	if err != nil {
		return nil, nil, wrap("load", err)
	}
	var (
		s             *inputSet
		kept, keptNew = []uint32(nil), []bool(nil)
		pe            []planEntry
		jumps         *blockJumps
		contentsBound int
		st            gcStats
	)
	if dev != nil {
		// The host reads and decompresses; the device decodes, merges,
		// collects garbage and sizes the entries.
		in, l, err := loadJobBlocks(ctx, job, ws, part, dev)
		if err != nil {
			return nil, nil, wrap("load", err)
		}
		defer l.close()
		durations := map[string]*time.Duration{"load": &times.load, "merge": &times.merge, "gc": &times.gc, "sizes": &times.sizes}
		s, kept, keptNew, pe, jumps, contentsBound, st, err = dev.stages(ctx, in, job, spans, ws, func(name string, err error) error {
			if err != nil {
				return err
			}
			return stage(name, durations[name])
		})
		if err != nil {
			var se *stageError
			if ctx.Err() != nil || errors.As(err, &se) || isCorruption(err) || errors.Is(err, errTooLarge) || errors.Is(err, errIrregularBlock) || errors.Is(err, errInputOrder) {
				return nil, nil, err
			}
			return nil, nil, &stageError{"device", err}
		}
	} else {
		if s, err = loadJob(ctx, job, ws, part); err != nil {
			return nil, nil, wrap("load", err)
		}
		if err := stage("load", &times.load); err != nil {
			return nil, nil, err
		}
		if _, err := s.setK0(); err != nil {
			return nil, nil, err
		}
		order := s.merge(ws)
		if err := stage("merge", &times.merge); err != nil {
			return nil, nil, err
		}
		if kept, keptNew, st, err = s.gc(order, job, spans, ws); err != nil {
			return nil, nil, err
		}
		if err := stage("gc", &times.gc); err != nil {
			return nil, nil, err
		}
		pe, contentsBound = s.planEntries(kept, ws)
		if goEngineJumps != nil {
			jumps = goEngineJumps(pe, job.Env.WriterOptions.WithDefaults())
		}
		if err := stage("sizes", &times.sizes); err != nil {
			return nil, nil, err
		}
	}
	opts := job.Env.WriterOptions.WithDefaults()
	cutLimit := compaction.CutLimit(job.TargetFileSize, ratio)
	w := wholeJob(len(kept))
	if part != nil {
		if w, next, err = part.walk(s, pe, kept, keptNew, jumps, job, opts, cutLimit, outSpans); err != nil {
			return nil, nil, err
		}
		st = part.stats(s, st, w, next)
	}
	// The plan walk, with the encoders and the writers behind it.
	p := newPipeline(ctx, s, job, ws, dev, opts, kept, contentsBound, outSpans, failAt)
	p.startEncoders()
	err = s.plan(pe, kept, keptNew, jumps, job, opts, cutLimit, outSpans, p, w)
	p.planEnded(err)
	if err == nil {
		err = stage("plan", &times.plan)
	}
	if err != nil {
		// The walk stopped (a table's file could not be created, or the
		// pipeline had stopped it) or the stage check failed: the
		// pipeline's own error, or the context's, is the job's.
		p.abort()
		_, werr := p.wait()
		switch {
		case ctx.Err() != nil:
			return nil, nil, ctx.Err()
		case errors.Is(err, errSkipped) && werr != nil:
			return nil, nil, werr
		}
		return nil, nil, wrap("write", err)
	}
	tables, err := p.wait()
	if err != nil {
		return nil, nil, err
	}
	res := &compaction.Result{}
	for _, t := range tables {
		res.Outputs = append(res.Outputs, t.meta)
		res.Stats.BytesWritten += t.meta.Size
	}
	if err := stage("write", &times.write); err != nil {
		return nil, nil, err
	}
	res.Stats.EntriesIn = st.entriesIn
	res.Stats.EntriesOut = st.entriesOut
	res.Stats.TombstonesElided = st.tombstonesElided
	res.Stats.RangeDelsDropped = dropped
	res.Stats.BytesRead = job.InputBytes()
	res.Stats.Duration = time.Since(start)
	res.Stats.Engine = "go"
	if dev != nil {
		res.Stats.Engine = "cuda"
	}
	return res, next, nil
}

// errSkipped marks the output tables not written, and the walk stopped,
// because something else failed (the job returns that failure's error).
var errSkipped = errors.New("gpucompact: not written: an earlier output failed")

// goEngineJumps, set by tests, gives the Go engine's walk the blocks that
// would start at each kept entry, so that it steps over blocks as the CUDA
// engine's walk does (nil: entry by entry).
var goEngineJumps func(pe []planEntry, opts sstable.WriterOptions) *blockJumps
