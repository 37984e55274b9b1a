package compaction

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
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
//
// Subcompactions: a job with enough input is split into key-range parts
// [b_i, b_i+1) cut at user keys (taken from the input tables' boundaries, so
// that the parts hold about equal input bytes) that merge in parallel, each
// on its own goroutine with its own iterators positioned at its range. The
// merge decides every entry by its user key alone (stripes, range
// tombstones, tombstone elision), and no user key spans two parts, so the
// parts' outputs together hold exactly the entries one part would write;
// only where tables are cut differs (a table never spans a part boundary,
// and range tombstones are truncated there). Outputs come back in key order
// and the store installs them in one version edit; a failing part cancels
// the others and fails the job, and the store then deletes every table any
// part created.
type CPU struct {
	// Parts bounds the parts of one job: 0 means min(GOMAXPROCS, 8), 1
	// runs every job as one part.
	Parts int
	// MinPartBytes is the least input a part gets (0: 2 × the job's
	// TargetFileSize), so small jobs stay whole.
	MinPartBytes uint64

	// storedSizeCut cuts outputs on their stored size, the rule before the
	// cut moved to uncompressed size (tests compare the two).
	storedSizeCut bool
}

// MaxCutRatio bounds the compression ratio a job's cut limit is scaled by.
const MaxCutRatio = 16

// CutRatio is the compression ratio a job's outputs are cut with: the
// inputs' data blocks' size before compression over their stored size
// (sstable.Properties.RawDataSize / DataSize, summed over every input),
// clamped to [1, 16]; 1 when the job writes uncompressed tables or no input
// records its raw size (a table from before the property reads as ratio 1).
func CutRatio(job *Job) (float64, error) {
	if job.Env.WriterOptions.Compression == sstable.NoCompression {
		return 1, nil
	}
	var raw, stored uint64
	for _, in := range job.Inputs {
		for _, f := range in.Files {
			r, rel, err := job.Env.OpenTable(f)
			if err != nil {
				return 0, err
			}
			p := r.Properties()
			raw += p.RawDataSize
			stored += p.DataSize
			rel()
		}
	}
	if stored == 0 || raw <= stored {
		return 1, nil
	}
	return min(float64(raw)/float64(stored), MaxCutRatio), nil
}

// CutLimit is the uncompressed size (sstable.Writer.RawSize) at which an
// output is cut: TargetFileSize × ratio, exactly TargetFileSize at ratio 1.
func CutLimit(targetFileSize uint64, ratio float64) uint64 {
	if ratio <= 1 {
		return targetFileSize
	}
	return uint64(float64(targetFileSize) * min(ratio, MaxCutRatio))
}

// defaultMaxParts bounds the default number of parts: past a few, the
// job's inputs are read by too many goroutines for the merge to gain.
const defaultMaxParts = 8

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
func (c CPU) Compact(ctx context.Context, job *Job) (*Result, error) {
	start := time.Now()
	spans, outSpans, dropped, releases, err := CollectSpans(job)
	defer func() {
		for _, r := range releases {
			r()
		}
	}()
	if err != nil {
		return nil, err
	}
	ratio, err := CutRatio(job)
	if err != nil {
		return nil, err
	}
	cutLimit := CutLimit(job.TargetFileSize, ratio)
	if c.storedSizeCut {
		cutLimit = job.TargetFileSize // the old rule: stored bytes against the target
	}
	bounds := c.splitPoints(job)
	runs := make([]*cpuRun, len(bounds)+1)
	for i := range runs {
		r := &cpuRun{job: job, spans: spans, outSpans: outSpans, cutLimit: cutLimit, storedSizeCut: c.storedSizeCut}
		if i > 0 {
			r.lo = bounds[i-1]
		}
		if i < len(bounds) {
			r.hi = bounds[i]
		}
		runs[i] = r
	}
	if len(runs) == 1 {
		runs[0].ctx = ctx
		runs[0].run()
	} else {
		pctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var wg sync.WaitGroup
		for _, r := range runs {
			r.ctx = pctx
			wg.Add(1)
			go func() {
				defer wg.Done()
				if r.run(); r.err != nil {
					cancel() // one failed part fails the job: stop the others
				}
			}()
		}
		wg.Wait()
	}
	res := &Result{}
	var errs []error
	for _, r := range runs {
		if r.err != nil {
			errs = append(errs, r.err)
		}
		res.Outputs = append(res.Outputs, r.res.Outputs...)
		res.Stats.BytesWritten += r.res.Stats.BytesWritten
		res.Stats.EntriesIn += r.res.Stats.EntriesIn
		res.Stats.EntriesOut += r.res.Stats.EntriesOut
		res.Stats.TombstonesElided += r.res.Stats.TombstonesElided
	}
	if len(errs) > 0 {
		return nil, firstCause(ctx, errs)
	}
	res.Stats.RangeDelsDropped = dropped
	res.Stats.BytesRead = job.InputBytes()
	res.Stats.Duration = time.Since(start)
	return res, nil
}

// firstCause returns the error that failed a job: the caller's context's,
// else the first part's error that is not the cancellation a failing part
// caused in the others.
func firstCause(ctx context.Context, errs []error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, err := range errs {
		if !errors.Is(err, context.Canceled) {
			return err
		}
	}
	return errs[0]
}

// splitPoints returns the user keys that cut job into parts (none: one part).
func (c CPU) splitPoints(job *Job) [][]byte {
	parts := c.Parts
	if parts == 0 {
		parts = min(runtime.GOMAXPROCS(0), defaultMaxParts)
	}
	minBytes := c.MinPartBytes
	if minBytes == 0 {
		minBytes = 2 * job.TargetFileSize
	}
	total := job.InputBytes()
	if minBytes > 0 {
		parts = min(parts, int(total/minBytes))
	}
	if parts <= 1 {
		return nil
	}
	var files []*manifest.FileMetadata
	for _, in := range job.Inputs {
		files = append(files, in.Files...)
	}
	slices.SortFunc(files, func(a, b *manifest.FileMetadata) int { return bytes.Compare(a.Smallest.UserKey, b.Smallest.UserKey) })
	// A boundary at a table's smallest key, once the tables before it hold
	// the next share of the input bytes.
	var bounds [][]byte
	var seen uint64
	for _, f := range files {
		if len(bounds) == parts-1 {
			break
		}
		if seen >= uint64(len(bounds)+1)*total/uint64(parts) {
			k := f.Smallest.UserKey
			if bytes.Compare(k, files[0].Smallest.UserKey) > 0 && (len(bounds) == 0 || bytes.Compare(k, bounds[len(bounds)-1]) > 0) {
				bounds = append(bounds, append([]byte(nil), k...))
			}
		}
		seen += f.Size
	}
	return bounds
}

// CollectSpans reads every input's range tombstones: fragmented (spans:
// what point entries are checked against), and reduced to what the outputs
// keep (outSpans); dropped counts the entries reduction removed. Every
// compactor decides with these, so that all drop the same entries. The
// releases hold the readers open until the job ends; call them also on
// error.
func CollectSpans(job *Job) (spans, outSpans []rangedel.Span, dropped uint64, releases []func(), err error) {
	var tombs []rangedel.Tombstone
	for _, in := range job.Inputs {
		for _, f := range in.Files {
			if !f.HasRangeDels {
				continue
			}
			r, rel, err := job.Env.OpenTable(f)
			if err != nil {
				return nil, nil, 0, releases, err
			}
			releases = append(releases, rel)
			tombs = append(tombs, rangedel.Tombstones(r.RangeDels().Spans())...)
		}
	}
	spans = rangedel.Fragment(tombs)
	outSpans, dropped = reduceSpans(job, spans)
	return spans, outSpans, dropped, releases, nil
}

// cpuRun merges one part of a job: the user keys in [lo, hi) (nil: no
// bound).
type cpuRun struct {
	job      *Job
	ctx      context.Context
	lo, hi   []byte
	iters    []base.InternalIterator
	merged   *mergeiter.Merging
	releases []func()
	spans    []rangedel.Span // every input tombstone, fragmented (shared, read-only)
	outSpans []rangedel.Span // what the outputs keep (shared, read-only)
	res      Result
	err      error

	// cutLimit is the uncompressed size at which an output is cut
	// (CutLimit); storedSizeCut cuts at TargetFileSize stored bytes instead
	// (the old rule, for tests).
	cutLimit      uint64
	storedSizeCut bool

	// current output
	out      *sstable.Writer
	outFile  vfs.File
	outNum   base.FileNum
	outLower []byte // first user key of the current output (nil for the first)

	cut *Cutter
}

// run merges the part into its outputs (or sets err).
func (c *cpuRun) run() {
	defer c.cleanup()
	c.outLower = c.lo
	if c.err = c.openInputs(); c.err == nil {
		c.err = c.merge()
	}
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
	for _, in := range c.job.Inputs {
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
		}, c.lo, c.hi))
	}
	c.merged = mergeiter.NewMerging(c.iters...)
	c.cut = NewCutter(c.job, c.cutLimit, c.lo, c.hi)
	return nil
}

// reduceSpans keeps the newest tombstone of each snapshot stripe in every
// fragment, and drops stripe-0 tombstones where nothing lies below; dropped
// counts the tombstone entries it removed.
func reduceSpans(job *Job, spans []rangedel.Span) (out []rangedel.Span, dropped uint64) {
	snaps := job.Snapshots
	for _, sp := range spans {
		elide := job.ElideRangeTombstone(sp.Start, sp.End)
		var seqs []base.SeqNum
		last := -1
		for _, q := range sp.Seqs { // newest first
			s := StripeOf(snaps, q)
			if s == last {
				dropped++
				continue
			}
			last = s
			if s == 0 && elide {
				dropped++
				continue
			}
			seqs = append(seqs, q)
		}
		if len(seqs) > 0 {
			out = append(out, rangedel.Span{Start: sp.Start, End: sp.End, Seqs: seqs})
		}
	}
	return out, dropped
}

func (c *cpuRun) merge() error {
	snaps := c.job.Snapshots
	var prevKey []byte
	havePrev := false
	lastStripe := -1
	spanIdx := 0
	var span *rangedel.Span
	n := 0
	first := c.merged.First
	if c.lo != nil {
		first = func() bool { return c.merged.SeekGE(c.lo) }
	}
	for ok := first(); ok; ok = c.merged.Next() {
		if n++; n&1023 == 0 {
			if err := c.ctx.Err(); err != nil {
				return err
			}
		}
		k := c.merged.Key()
		if c.hi != nil && bytes.Compare(k.UserKey, c.hi) >= 0 {
			break // the next part's
		}
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
		if span != nil && CoveredInStripe(span, q, stripe, snaps) {
			continue
		}
		if k.Kind() == base.KindDelete && stripe == 0 && c.job.ElideTombstone(k.UserKey) {
			c.res.Stats.TombstonesElided++
			continue
		}
		if newKey && c.out != nil && c.cut.Cut(k.UserKey, c.outSize()) {
			if err := c.finishOutput(k.UserKey); err != nil {
				return err
			}
		}
		if c.out == nil {
			if err := c.newOutput(); err != nil {
				return err
			}
			c.cut.Start(k.UserKey)
		}
		if err := c.out.Add(k, c.merged.Value()); err != nil {
			return err
		}
		c.res.Stats.EntriesOut++
	}
	if err := c.merged.Error(); err != nil {
		return err
	}
	if err := c.ctx.Err(); err != nil {
		return err
	}
	if c.out == nil && len(rangedel.Truncate(c.outSpans, c.outLower, c.hi)) > 0 {
		if err := c.newOutput(); err != nil {
			return err
		}
	}
	if c.out != nil {
		return c.finishOutput(c.hi)
	}
	return nil
}

// outSize is the current output's size as the cut rule counts it: its
// uncompressed size, so that where an output ends does not depend on how
// its blocks compress.
func (c *cpuRun) outSize() uint64 {
	if c.storedSizeCut {
		return c.out.EstimatedSize()
	}
	return c.out.RawSize()
}

// CoveredInStripe reports whether a tombstone of the span newer than q lies
// in q's stripe: the range-deletion rule every compactor applies.
func CoveredInStripe(sp *rangedel.Span, q base.SeqNum, stripe int, snaps []base.SeqNum) bool {
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
	f := c.outFile
	c.outFile = nil
	m, err := FinishOutput(c.out, f, c.outNum, c.outSpans, c.outLower, upper)
	if err != nil {
		return err
	}
	c.res.Outputs = append(c.res.Outputs, m)
	c.res.Stats.BytesWritten += m.Size
	c.out = nil
	c.outLower = append([]byte(nil), upper...)
	return nil
}

// FinishOutput completes an output table of every compactor: its share of
// the job's kept range tombstones (outSpans truncated to [lower, upper),
// nil bounds open), Finish, sync and close (f is closed also on error),
// and the table's metadata.
func FinishOutput(w *sstable.Writer, f vfs.File, num base.FileNum, outSpans []rangedel.Span, lower, upper []byte) (*manifest.FileMetadata, error) {
	fail := func(err error) (*manifest.FileMetadata, error) {
		f.Close()
		return nil, err
	}
	for _, sp := range rangedel.Truncate(outSpans, lower, upper) {
		if err := w.AddRangeDel(sp); err != nil {
			return fail(err)
		}
	}
	meta, err := w.Finish()
	if err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(fmt.Errorf("compaction: sync table %s: %w", num, err))
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("compaction: close table %s: %w", num, err)
	}
	return &manifest.FileMetadata{
		FileNum:      num,
		Size:         meta.Size,
		Smallest:     meta.Smallest,
		Largest:      meta.Largest,
		SmallestSeq:  meta.SmallestSeq,
		LargestSeq:   meta.LargestSeq,
		HasRangeDels: meta.HasRangeDels,
	}, nil
}
