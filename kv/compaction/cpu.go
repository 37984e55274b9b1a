package compaction

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/internal/mergeiter"
	"github.com/warpkit/warpkit/kv/internal/rangedel"
	"github.com/warpkit/warpkit/kv/manifest"
	"github.com/warpkit/warpkit/kv/sstable"
	"github.com/warpkit/warpkit/kv/vfs"
)

// CPU merges on the CPU: a heap over the input tables' iterators (one per L0
// table, one concatenating iterator per deeper level), one pass, outputs
// written as the merge goes.
type CPU struct{}

// releasingIter closes a table iterator and releases its reader.
type releasingIter struct {
	*sstable.Iter
	release func()
}

func (r *releasingIter) Close() error {
	err := r.Iter.Close()
	r.release()
	return err
}

// Compact implements Compactor.
func (CPU) Compact(ctx context.Context, job *Job) (*Result, error) {
	start := time.Now()
	c := &cpuRun{job: job, ctx: ctx}
	defer c.cleanup()
	if err := c.openInputs(); err != nil {
		return nil, err
	}
	if err := c.merge(); err != nil {
		return nil, err
	}
	c.res.Stats.BytesRead = job.InputBytes()
	c.res.Stats.Duration = time.Since(start)
	return &c.res, nil
}

type cpuRun struct {
	job      *Job
	ctx      context.Context
	iters    []base.InternalIterator
	merged   *mergeiter.Merging
	releases []func()
	spans    []rangedel.Span // every input tombstone, fragmented
	outSpans []rangedel.Span // what the outputs keep
	res      Result

	// current output
	out      *sstable.Writer
	outFile  vfs.File
	outNum   base.FileNum
	outLower []byte // first user key of the current output (nil for the first)

	gpIndex   int
	gpOverlap uint64
}

func (c *cpuRun) cleanup() {
	if c.merged != nil {
		c.merged.Close()
	} else {
		for _, it := range c.iters {
			it.Close()
		}
	}
	for _, r := range c.releases {
		r()
	}
	if c.outFile != nil {
		c.outFile.Close()
	}
}

func (c *cpuRun) openInputs() error {
	env := c.job.Env
	var tombs []rangedel.Tombstone
	collect := func(f *manifest.FileMetadata) error {
		if !f.HasRangeDels {
			return nil
		}
		r, rel, err := env.OpenTable(f)
		if err != nil {
			return err
		}
		tombs = append(tombs, rangedel.Tombstones(r.RangeDels().Spans())...)
		c.releases = append(c.releases, rel)
		return nil
	}
	for _, in := range c.job.Inputs {
		for _, f := range in.Files {
			if err := collect(f); err != nil {
				return err
			}
		}
		if in.Level == 0 {
			for _, f := range in.Files {
				r, rel, err := env.OpenTable(f)
				if err != nil {
					return err
				}
				c.iters = append(c.iters, &releasingIter{Iter: r.NewCompactionIter(), release: rel})
			}
			continue
		}
		c.iters = append(c.iters, mergeiter.NewLevel(in.Files, func(f *manifest.FileMetadata) (base.InternalIterator, error) {
			r, rel, err := env.OpenTable(f)
			if err != nil {
				return nil, err
			}
			return &releasingIter{Iter: r.NewCompactionIter(), release: rel}, nil
		}, nil, nil))
	}
	c.merged = mergeiter.NewMerging(c.iters...)
	c.spans = rangedel.Fragment(tombs)
	c.outSpans = c.reduceSpans(c.spans)
	return nil
}

// reduceSpans keeps the newest tombstone of each snapshot stripe in every
// fragment, and drops stripe-0 tombstones where nothing lies below.
func (c *cpuRun) reduceSpans(spans []rangedel.Span) []rangedel.Span {
	snaps := c.job.Snapshots
	var out []rangedel.Span
	for _, sp := range spans {
		elide := c.job.ElideRangeTombstone(sp.Start, sp.End)
		var seqs []base.SeqNum
		last := -1
		for _, q := range sp.Seqs { // newest first
			s := StripeOf(snaps, q)
			if s == last {
				c.res.Stats.RangeDelsDropped++
				continue
			}
			last = s
			if s == 0 && elide {
				c.res.Stats.RangeDelsDropped++
				continue
			}
			seqs = append(seqs, q)
		}
		if len(seqs) > 0 {
			out = append(out, rangedel.Span{Start: sp.Start, End: sp.End, Seqs: seqs})
		}
	}
	return out
}

func (c *cpuRun) merge() error {
	snaps := c.job.Snapshots
	var prevKey []byte
	havePrev := false
	lastStripe := -1
	spanIdx := 0
	var span *rangedel.Span
	splitPending := false
	n := 0
	for ok := c.merged.First(); ok; ok = c.merged.Next() {
		if n++; n&1023 == 0 {
			if err := c.ctx.Err(); err != nil {
				return err
			}
		}
		k := c.merged.Key()
		c.res.Stats.EntriesIn++
		newKey := !havePrev || !bytes.Equal(k.UserKey, prevKey)
		if newKey {
			prevKey = append(prevKey[:0], k.UserKey...)
			havePrev = true
			lastStripe = -1
			for spanIdx < len(c.spans) && bytes.Compare(c.spans[spanIdx].End, k.UserKey) <= 0 {
				spanIdx++
			}
			span = nil
			if spanIdx < len(c.spans) && bytes.Compare(c.spans[spanIdx].Start, k.UserKey) <= 0 {
				span = &c.spans[spanIdx]
			}
		}
		q := k.SeqNum()
		stripe := StripeOf(snaps, q)
		if stripe == lastStripe {
			continue // shadowed by a newer entry no snapshot can tell apart
		}
		lastStripe = stripe
		if span != nil && coveredInStripe(span, q, stripe, snaps) {
			continue
		}
		if k.Kind() == base.KindDelete && stripe == 0 && c.job.ElideTombstone(k.UserKey) {
			c.res.Stats.TombstonesElided++
			continue
		}
		if newKey && c.out != nil && (splitPending || c.grandparentLimit(k.UserKey)) {
			if err := c.finishOutput(k.UserKey); err != nil {
				return err
			}
			splitPending = false
		}
		if c.out == nil {
			if err := c.newOutput(); err != nil {
				return err
			}
		}
		if err := c.out.Add(k, c.merged.Value()); err != nil {
			return err
		}
		c.res.Stats.EntriesOut++
		if c.out.EstimatedSize() >= c.job.TargetFileSize {
			splitPending = true
		}
	}
	if err := c.merged.Error(); err != nil {
		return err
	}
	if c.out == nil && len(c.outSpans) > 0 {
		if err := c.newOutput(); err != nil {
			return err
		}
	}
	if c.out != nil {
		return c.finishOutput(nil)
	}
	return nil
}

// coveredInStripe reports whether a tombstone of the span newer than q lies
// in q's stripe.
func coveredInStripe(sp *rangedel.Span, q base.SeqNum, stripe int, snaps []base.SeqNum) bool {
	for _, t := range sp.Seqs { // descending
		if t <= q {
			return false
		}
		if StripeOf(snaps, t) == stripe {
			return true
		}
	}
	return false
}

// grandparentLimit reports whether the output, extended to k, would overlap
// too much of the level below the output level (LevelDB's ShouldStopBefore).
func (c *cpuRun) grandparentLimit(k []byte) bool {
	gp := c.job.Grandparents
	for c.gpIndex < len(gp) {
		f := gp[c.gpIndex]
		cmp := bytes.Compare(k, f.Largest.UserKey)
		if cmp < 0 || (cmp == 0 && !f.Largest.IsExclusiveSentinel()) {
			break
		}
		c.gpOverlap += f.Size
		c.gpIndex++
	}
	if c.job.MaxGrandparentOverlap > 0 && c.gpOverlap > c.job.MaxGrandparentOverlap {
		c.gpOverlap = 0
		return true
	}
	return false
}

func (c *cpuRun) newOutput() error {
	num, f, err := c.job.Env.CreateTable()
	if err != nil {
		return err
	}
	c.outNum, c.outFile = num, f
	c.out = sstable.NewWriter(f, c.job.Env.WriterOptions)
	return nil
}

// finishOutput closes the current output at user key upper (exclusive; nil
// for the last output), adding its share of the range tombstones.
func (c *cpuRun) finishOutput(upper []byte) error {
	for _, sp := range rangedel.Truncate(c.outSpans, c.outLower, upper) {
		if err := c.out.AddRangeDel(sp); err != nil {
			return err
		}
	}
	meta, err := c.out.Finish()
	if err != nil {
		return err
	}
	if err := c.outFile.Sync(); err != nil {
		return fmt.Errorf("compaction: sync table %s: %w", c.outNum, err)
	}
	err = c.outFile.Close()
	c.outFile = nil
	if err != nil {
		return fmt.Errorf("compaction: close table %s: %w", c.outNum, err)
	}
	c.res.Outputs = append(c.res.Outputs, &manifest.FileMetadata{
		FileNum:      c.outNum,
		Size:         meta.Size,
		Smallest:     meta.Smallest,
		Largest:      meta.Largest,
		SmallestSeq:  meta.SmallestSeq,
		LargestSeq:   meta.LargestSeq,
		HasRangeDels: meta.HasRangeDels,
	})
	c.res.Stats.BytesWritten += meta.Size
	c.out = nil
	c.outLower = append([]byte(nil), upper...)
	return nil
}
