package gpucompact

import (
	"context"
	"time"

	"github.com/warpkit/warpkit/kv/compaction"
	"github.com/warpkit/warpkit/kv/sstable"
)

// runGo runs a job through the pipeline on goroutines (the Go engine):
// load, merge, garbage collection and selection, the plan, block encoding
// and sealing, and the output tables, written through sstable.Writer's
// AddEncodedBlock. Its output is byte-identical to compaction.CPU{Parts: 1}
// (file bytes, Result metadata and Stats but Duration). Output tables are
// created in key order; on error the ones created stay for the caller to
// remove (kv removes every table a failed job created).
func runGo(ctx context.Context, job *compaction.Job) (*compaction.Result, error) {
	start := time.Now()
	spans, outSpans, dropped, releases, err := compaction.CollectSpans(job)
	defer func() {
		for _, rel := range releases {
			rel()
		}
	}()
	if err != nil {
		return nil, err
	}
	ratio, err := compaction.CutRatio(job)
	if err != nil {
		return nil, err
	}
	s, err := loadJob(ctx, job)
	if err != nil {
		return nil, err
	}
	s.setK0()
	kept, keptNew, st := s.gc(s.merge(), job, spans)
	opts := job.Env.WriterOptions.WithDefaults()
	tables := s.plan(kept, keptNew, job, opts, compaction.CutLimit(job.TargetFileSize, ratio), outSpans)
	res := &compaction.Result{}
	for _, t := range tables {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		blocks, err := s.encodeTable(t, kept, opts)
		if err != nil {
			return nil, err
		}
		num, f, err := job.Env.CreateTable()
		if err != nil {
			return nil, err
		}
		w := sstable.NewWriter(f, job.Env.WriterOptions)
		for _, b := range blocks {
			if err := w.AddEncodedBlock(b); err != nil {
				f.Close()
				return nil, err
			}
		}
		m, err := compaction.FinishOutput(w, f, num, outSpans, t.lower, t.upper)
		if err != nil {
			return nil, err
		}
		res.Outputs = append(res.Outputs, m)
		res.Stats.BytesWritten += m.Size
	}
	res.Stats.EntriesIn = st.entriesIn
	res.Stats.EntriesOut = st.entriesOut
	res.Stats.TombstonesElided = st.tombstonesElided
	res.Stats.RangeDelsDropped = dropped
	res.Stats.BytesRead = job.InputBytes()
	res.Stats.Duration = time.Since(start)
	return res, nil
}
