package kv

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/warpkit/warpkit/kv/compaction"
	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/manifest"
	"github.com/warpkit/warpkit/kv/vfs"
)

// pickedCompaction is a compaction chosen under d.mu.
type pickedCompaction struct {
	version     *manifest.Version // referenced until the compaction ends
	level       int               // input level
	outputLevel int
	inputs      []compaction.Input
	grandparent []*manifest.FileMetadata
	lower       [][]*manifest.FileMetadata
	start, end  []byte // user-key range of all inputs (inclusive)
	score       float64
	manual      *manualCompaction
}

// manualCompaction is a Compact call working through the levels.
type manualCompaction struct {
	start, end []byte
	level      int  // level compacted next
	last       int  // the level everything ends in
	running    bool // a compaction of it is in progress
	done       chan error
	// cancel cancels the running job's context; cancelled says that the
	// Compact call's context ended and err is what it returns.
	cancel    context.CancelFunc
	cancelled bool
	err       error
}

func (d *DB) maybeScheduleCompaction() {
	d.signal(d.compactCh)
}

// compactLoop runs compactions while there are any to run.
func (d *DB) compactLoop() {
	defer d.bgWG.Done()
	for {
		select {
		case <-d.bgCtx.Done():
			return
		case <-d.compactCh:
		}
		for d.bgCtx.Err() == nil && d.compactOne() {
		}
	}
}

// compactOne picks and runs one compaction; it reports whether it ran one.
func (d *DB) compactOne() bool {
	d.mu.Lock()
	if d.mu.bgErr != nil || d.mu.closed {
		d.mu.Unlock()
		return false
	}
	c := d.pickLocked()
	if c == nil {
		d.mu.Unlock()
		return false
	}
	d.mu.compacting++
	snaps := d.snapshotSeqsLocked()
	// A manual job runs under its own context, which the Compact call
	// cancels if its context ends; background jobs under the DB's.
	ctx := d.bgCtx
	if m := c.manual; m != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(d.bgCtx)
		m.cancel = cancel
	}
	d.mu.Unlock()

	// Let another worker look for more work in parallel.
	if d.opts.MaxConcurrentCompactions > 1 {
		d.maybeScheduleCompaction()
	}
	ev := d.events()
	info := CompactionInfo{JobID: d.nextJobID(), OutputLevel: c.outputLevel, Manual: c.manual != nil}
	for _, in := range c.inputs {
		info.Input = append(info.Input, LevelInfo{Level: in.Level, Tables: tableInfos(in.Files)})
	}
	if ev.CompactionBegin != nil {
		ev.CompactionBegin(info)
	}
	start := time.Now()
	err := d.runCompaction(ctx, c, snaps, &info)
	info.Duration = time.Since(start)
	if err != nil {
		err = fmt.Errorf("kv: compaction L%d->L%d: %w", c.level, c.outputLevel, err)
		info.Err, info.Output, info.BytesRead, info.BytesWritten = err, nil, 0, 0
	}
	// Before the inputs are released and waiters woken: Compact and
	// WaitForCompactions return after the End.
	if ev.CompactionEnd != nil {
		ev.CompactionEnd(info)
	}

	d.mu.Lock()
	defer d.unlockReport()
	d.mu.compacting--
	for _, in := range c.inputs {
		for _, f := range in.Files {
			f.Compacting = false
		}
	}
	c.version.Unref()
	if m := c.manual; m != nil {
		m.running = false
		m.cancel()
		m.cancel = nil
		switch {
		case m.cancelled:
			// The Compact call gave up: no further job. A job its
			// cancellation failed deleted its outputs, as any failed job.
			d.finishManualLocked(m, m.err)
			if errors.Is(err, context.Canceled) && d.bgCtx.Err() == nil {
				err = nil // not a failure of the store
			}
		case err != nil:
			d.finishManualLocked(m, err)
		default:
			if m.level++; m.level >= m.last {
				d.finishManualLocked(m, nil)
			}
		}
	}
	if err != nil {
		if errors.Is(err, context.Canceled) && d.bgCtx.Err() != nil {
			return false // closing
		}
		// A failed compaction leaves its inputs in place and its outputs
		// deleted; as in LevelDB, writes stop (reads go on) until a reopen.
		d.setBackgroundErrorLocked(err)
		return false
	}
	d.mu.cond.Broadcast()
	return true
}

func (d *DB) finishManualLocked(m *manualCompaction, err error) {
	for i, x := range d.mu.manual {
		if x == m {
			d.mu.manual = append(d.mu.manual[:i], d.mu.manual[i+1:]...)
			break
		}
	}
	m.done <- err
}

// pickLocked chooses the next compaction: a pending manual one, else the
// level whose score (L0: tables / L0CompactionThreshold, once due; deeper:
// bytes / target) is highest and at least 1. Inputs are marked Compacting.
func (d *DB) pickLocked() *pickedCompaction {
	v := d.rs.version
	t := d.levelTargetsLocked(v)
	for _, m := range d.mu.manual {
		if m.running {
			continue
		}
		for m.level < m.last {
			if len(v.Overlapping(m.level, m.start, m.end)) > 0 {
				break
			}
			m.level++
		}
		if m.level >= m.last {
			d.finishManualLocked(m, nil)
			return d.pickLocked()
		}
		if c := d.setupLocked(v, &t, m.level, v.Overlapping(m.level, m.start, m.end)); c != nil {
			c.manual = m
			m.running = true
			return c
		}
	}
	// Levels by descending score; the first that yields a compaction wins.
	type cand struct {
		level int
		score float64
	}
	var cands []cand
	for level := 0; level < manifest.NumLevels-1; level++ {
		if sc := d.scoreLocked(v, &t, level); sc >= 1 {
			cands = append(cands, cand{level, sc})
		}
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].score > cands[j].score })
	for _, cd := range cands {
		if c := d.pickLevelLocked(v, &t, cd.level); c != nil {
			c.score = cd.score
			return c
		}
	}
	return nil
}

// pickLevelLocked picks a compaction out of one level.
func (d *DB) pickLevelLocked(v *manifest.Version, t *levelTargets, level int) *pickedCompaction {
	files := v.Levels[level]
	if level == 0 {
		for _, f := range files {
			if f.Compacting {
				return nil // one L0 compaction at a time
			}
		}
		// Start from the oldest table; setup pulls in every L0 table that
		// overlaps it, transitively.
		c := d.setupLocked(v, t, 0, files[:1])
		if c != nil {
			// Reads count afresh once the next L0 tables wait.
			d.l0MissBudget.Store(0)
			d.l0Misses.Store(0)
		}
		return c
	}
	// The table whose compaction rewrites the fewest bytes of the next
	// level per byte it moves down (RocksDB's and Pebble's
	// min-overlapping-ratio rule), where LevelDB goes round-robin: in a
	// store filled at random it keeps the write amplification lower.
	for _, f := range byOverlapRatio(files, v.Levels[t.outputLevel(level)]) {
		if f.Compacting {
			continue
		}
		if c := d.setupLocked(v, t, level, []*manifest.FileMetadata{f}); c != nil {
			return c
		}
	}
	return nil
}

// l0Missed counts L0 tables a read looked in without result; it schedules
// a compaction when that makes a deferred L0 compaction due.
func (d *DB) l0Missed(n int64) {
	// Loads first: readers write the shared counter only while a
	// compaction is deferred and its budget not yet spent.
	b := d.l0MissBudget.Load()
	if b == 0 || d.l0Misses.Load() >= b {
		return
	}
	if m := d.l0Misses.Add(n); m >= b && m-n < b {
		d.maybeScheduleCompaction()
	}
}

// byOverlapRatio orders the tables of a level by the bytes of the next
// level (next) each overlaps divided by its own size, smallest first (ties
// in key order). Both levels are sorted and disjoint, so one sweep finds
// every table's overlap.
func byOverlapRatio(files, next []*manifest.FileMetadata) []*manifest.FileMetadata {
	type scored struct {
		f     *manifest.FileMetadata
		ratio float64
	}
	out := make([]scored, len(files))
	j := 0
	for i, f := range files {
		// Skip the tables of next entirely below f; the last one that
		// overlaps f may overlap its successor too, so j stays on it.
		for j < len(next) && bytes.Compare(next[j].Largest.UserKey, f.Smallest.UserKey) < 0 {
			j++
		}
		var overlap uint64
		for k := j; k < len(next) && bytes.Compare(next[k].Smallest.UserKey, f.Largest.UserKey) <= 0; k++ {
			overlap += next[k].Size
		}
		out[i] = scored{f, float64(overlap) / float64(max(f.Size, 1))}
	}
	slices.SortStableFunc(out, func(a, b scored) int { return cmp.Compare(a.ratio, b.ratio) })
	res := make([]*manifest.FileMetadata, len(out))
	for i, s := range out {
		res[i] = s.f
	}
	return res
}

func (d *DB) scoreLocked(v *manifest.Version, t *levelTargets, level int) float64 {
	if level == 0 {
		n := len(v.Levels[0])
		if n == 0 || v.Levels[0][0].Compacting {
			// Nothing there, or being compacted (one L0 compaction at a
			// time; its tables are the oldest): reads need not count.
			d.l0MissBudget.Store(0)
			return 0
		}
		score := float64(n) / float64(d.opts.L0CompactionThreshold)
		l0, lbase := sumSize(v.Levels[0]), sumSize(v.Levels[t.base])
		waitCap := min(d.opts.L0StopWritesThreshold/2, d.opts.L0SlowdownWritesThreshold-2)
		waits := !d.opts.EagerL0Compactions && d.mu.settling == 0 && n < waitCap && l0 < lbase
		if score >= 1 && !waits {
			d.l0MissBudget.Store(0) // due: reads need not count
			return score
		}
		// Not due yet (Options.L0CompactionThreshold): below the
		// threshold, or waiting for L0 to hold as much as the base level
		// (what Pebble's single compaction does by being busy elsewhere;
		// on 16 cores it took the settled write amplification of a
		// 2M-key fill from 4.35 to 3.85, Pebble 3.66). Reads pay for the
		// tables left in L0: as LevelDB's seek compactions, once Gets have
		// looked in them without result once per 16 KiB the compaction
		// would move (one such look costs about as much as compacting that
		// much), it is due. (On the device host, 16 cores, two or three
		// L0 tables left after a fill took readrandom from 507-511K to
		// 245-322K ops/s.)
		budget := max(int64(l0+lbase)/(16<<10), 100)
		d.l0MissBudget.Store(budget)
		if d.l0Misses.Load() >= budget {
			return max(score, 1)
		}
		if score < 1 {
			return score
		}
		// Waiting: how far L0 is along the way to either condition.
		return max(float64(l0)/float64(lbase), float64(n)/float64(waitCap))
	}
	var size uint64
	for _, f := range v.Levels[level] {
		if !f.Compacting {
			size += f.Size
		}
	}
	return float64(size) / t.maxBytes[level]
}

// setupLocked builds a compaction of the given upper-level tables into the
// level below (for L0, the base level), or returns nil when a table it needs
// is already compacting or its output range meets a running compaction's.
func (d *DB) setupLocked(v *manifest.Version, t *levelTargets, level int, upper []*manifest.FileMetadata) *pickedCompaction {
	if len(upper) == 0 {
		return nil
	}
	start, end := keyRange(upper)
	if level == 0 {
		// All L0 tables overlapping the range, and only if none is busy.
		upper = v.Overlapping(0, start, end)
		start, end = keyRange(upper)
	}
	for _, f := range upper {
		if f.Compacting {
			return nil
		}
	}
	out := t.outputLevel(level)
	lowerIn := v.Overlapping(out, start, end)
	for _, f := range lowerIn {
		if f.Compacting {
			return nil
		}
	}
	allStart, allEnd := keyRange(append(append([]*manifest.FileMetadata(nil), upper...), lowerIn...))
	// The output range must not meet another compaction's tables in the output level.
	for _, f := range v.Overlapping(out, allStart, allEnd) {
		if f.Compacting {
			return nil
		}
	}
	c := &pickedCompaction{
		level: level, outputLevel: out,
		inputs: []compaction.Input{{Level: level, Files: upper}},
		start:  allStart, end: allEnd,
	}
	if len(lowerIn) > 0 {
		c.inputs = append(c.inputs, compaction.Input{Level: out, Files: lowerIn})
	}
	if out+1 < manifest.NumLevels {
		c.grandparent = v.Overlapping(out+1, allStart, allEnd)
	}
	for l := out + 1; l < manifest.NumLevels; l++ {
		c.lower = append(c.lower, v.Levels[l])
	}
	for _, in := range c.inputs {
		for _, f := range in.Files {
			f.Compacting = true
		}
	}
	v.Ref()
	c.version = v
	return c
}

// keyRange returns the smallest and largest user keys of some tables.
func keyRange(files []*manifest.FileMetadata) ([]byte, []byte) {
	var lo, hi []byte
	for i, f := range files {
		if i == 0 || bytes.Compare(f.Smallest.UserKey, lo) < 0 {
			lo = f.Smallest.UserKey
		}
		if i == 0 || bytes.Compare(f.Largest.UserKey, hi) > 0 {
			hi = f.Largest.UserKey
		}
	}
	return lo, hi
}

// runCompaction executes a picked compaction and installs its result.
// It fills in info's outcome (Move, Output, bytes).
func (d *DB) runCompaction(ctx context.Context, c *pickedCompaction, snaps []base.SeqNum, info *CompactionInfo) error {
	start := time.Now()
	// A single table with nothing to merge below and little grandparent
	// overlap moves down without being rewritten.
	if len(c.inputs) == 1 && len(c.inputs[0].Files) == 1 && c.manual == nil && sumSize(c.grandparent) <= uint64(d.opts.MaxGrandparentOverlap) {
		info.Move = true
		info.Output = []TableInfo{tableInfo(c.inputs[0].Files[0])}
		return d.moveTable(c)
	}
	outs := d.newOutputTables()
	job := &compaction.Job{
		Inputs:                c.inputs,
		OutputLevel:           c.outputLevel,
		Snapshots:             snaps,
		Lower:                 c.lower,
		Grandparents:          c.grandparent,
		TargetFileSize:        uint64(d.opts.TargetFileSize),
		MaxGrandparentOverlap: uint64(d.opts.MaxGrandparentOverlap),
		Env:                   d.compactionEnv(outs),
	}
	res, err := d.opts.Compactor.Compact(ctx, job)
	var outputs []*manifest.FileMetadata
	if err == nil {
		outputs = res.Outputs
	}
	if err := outs.settle(err, outputs); err != nil {
		return err
	}
	edit := c.deleteInputs()
	for _, o := range res.Outputs {
		edit.NewFiles = append(edit.NewFiles, manifest.NewFile{Level: c.outputLevel, Meta: o})
	}
	if err := d.vs.LogAndApply(edit); err != nil {
		// The edit may be durable even though it failed: keep the outputs
		// (if the next Open finds none of its manifest listing them, it
		// moves them to lost/: it cannot tell them from a lost edit's).
		return err
	}
	st := res.Stats
	info.Output = tableInfos(res.Outputs)
	info.BytesRead, info.BytesWritten = st.BytesRead, st.BytesWritten
	d.m.compactions.Add(1)
	d.m.compactBytesRead.Add(int64(st.BytesRead))
	d.m.compactBytesWritten.Add(int64(st.BytesWritten))
	d.m.compactNanos.Add(int64(time.Since(start)))
	d.m.tombstonesElided.Add(int64(st.TombstonesElided))
	if st.Engine != "" {
		d.m.accelJobs.Add(1)
		d.m.accelBytesRead.Add(int64(st.BytesRead))
		d.m.accelNanos.Add(int64(st.Duration))
	}
	if st.Fallback != "" {
		d.m.accelFallbacks.Add(1)
	}
	d.m.levels[c.outputLevel].bytesIn.Add(int64(st.BytesWritten))
	d.m.levels[c.level].compactions.Add(1)
	d.installed()
	d.opts.logger().Debug("kv: compaction", "job", info.JobID, "from", c.level, "to", c.outputLevel,
		"input tables", len(edit.DeletedFiles), "bytes read", st.BytesRead, "output tables", len(res.Outputs), "bytes written", st.BytesWritten,
		"entries in", st.EntriesIn, "entries out", st.EntriesOut, "duration", time.Since(start), "manual", c.manual != nil)
	return nil
}

// moveTable carries out a compaction of one table into the next level by
// moving it there, without rewriting it.
func (d *DB) moveTable(c *pickedCompaction) error {
	f := c.inputs[0].Files[0]
	edit := c.deleteInputs()
	edit.NewFiles = []manifest.NewFile{{Level: c.outputLevel, Meta: f}}
	if err := d.vs.LogAndApply(edit); err != nil {
		return err
	}
	d.m.moves.Add(1)
	d.installed()
	d.opts.logger().Debug("kv: table moved down", "table", f.FileNum, "from", c.level, "to", c.outputLevel)
	return nil
}

// deleteInputs returns a version edit deleting the compaction's inputs.
func (c *pickedCompaction) deleteInputs() *manifest.VersionEdit {
	edit := &manifest.VersionEdit{}
	for _, in := range c.inputs {
		for _, f := range in.Files {
			edit.DeletedFiles = append(edit.DeletedFiles, manifest.DeletedFile{Level: in.Level, FileNum: f.FileNum})
		}
	}
	return edit
}

// compactionEnv returns the compaction.Env of a job of the store (or of
// Repair): the store's tables to read, and outs to create the outputs.
func (d *DB) compactionEnv(outs *outputTables) compaction.Env {
	return compaction.Env{
		OpenTable: d.tables.get,
		OpenTableFile: func(f *manifest.FileMetadata) (vfs.File, error) {
			return d.fs.Open(d.fs.PathJoin(d.dir, base.MakeFilename(base.FileTypeTable, f.FileNum)))
		},
		CreateTable:   outs.create,
		WriterOptions: d.opts.writerOptions(),
	}
}

// installed publishes the version a compaction produced.
func (d *DB) installed() {
	d.mu.Lock()
	d.updateReadStateLocked()
	d.mu.Unlock()
}

func sumSize(files []*manifest.FileMetadata) uint64 {
	var n uint64
	for _, f := range files {
		n += f.Size
	}
	return n
}

// Compact flushes the memtable, then compacts every table overlapping
// [start, end] (nil bounds are open) level by level down to the deepest
// level holding part of the range (L0's tables go to the base level, see
// Options.StaticLevelSizes), so that the range ends up in one level. It
// waits for the compactions and returns their first error.
//
// If ctx ends first, Compact returns ctx.Err() promptly: no further
// compaction job of the call starts, and a running one is cancelled (its
// outputs deleted, its inputs left in place, as after any failed job;
// writes go on). Jobs that finished stay installed. The flush it started
// goes on in the background.
func (d *DB) Compact(ctx context.Context, start, end []byte) error {
	if start != nil && end != nil && bytes.Compare(start, end) > 0 {
		return fmt.Errorf("%w: Compact start %q above end %q", ErrInvalidArgument, start, end)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := d.flush(ctx); err != nil {
		return err
	}
	// (flush fails on a closed or read-only DB.)
	m := &manualCompaction{
		start: append([]byte(nil), start...), end: append([]byte(nil), end...),
		done: make(chan error, 1),
	}
	if start == nil {
		m.start = nil
	}
	if end == nil {
		m.end = nil
	}
	d.mu.Lock()
	if d.mu.closed {
		d.mu.Unlock()
		return ErrClosed
	}
	// Compact down to the deepest level that holds part of the range (at
	// least L1), so that the range ends up in that one level, as LevelDB's
	// CompactRange does.
	v := d.rs.version
	m.last = 1
	for l := 1; l < manifest.NumLevels; l++ {
		if len(v.Overlapping(l, m.start, m.end)) > 0 {
			m.last = l
		}
	}
	d.mu.manual = append(d.mu.manual, m)
	d.mu.Unlock()
	d.maybeScheduleCompaction()
	select {
	case err := <-m.done:
		return err
	case <-d.bgCtx.Done():
		return ErrClosed
	case <-ctx.Done():
	}
	d.mu.Lock()
	select {
	case err := <-m.done: // finished meanwhile
		d.mu.Unlock()
		return err
	default:
	}
	m.cancelled, m.err = true, ctx.Err()
	if !m.running {
		// Between jobs: none starts any more.
		d.finishManualLocked(m, m.err)
		d.mu.Unlock()
		return <-m.done
	}
	// Cancel the running job and wait for the store to clean up after it
	// (compactOne finishes m).
	m.cancel()
	d.mu.Unlock()
	select {
	case err := <-m.done:
		return err
	case <-d.bgCtx.Done():
		return ErrClosed
	}
}

// wakeOnDone makes the cond waiters look again when ctx ends; call the
// returned stop when done waiting.
func (d *DB) wakeOnDone(ctx context.Context) (stop func() bool) {
	return context.AfterFunc(ctx, func() {
		d.mu.Lock()
		d.mu.cond.Broadcast()
		d.mu.Unlock()
	})
}

// WaitForCompactions blocks until no flush or compaction is running or due
// (every level's score below 1), so that a measurement can start from a
// quiet store. While it waits, an L0 compaction waiting for L0 to grow
// (Options.L0CompactionThreshold) is due: the caller asks for the work
// pending now. It returns early with the error that stopped writes,
// ErrClosed, or ctx.Err() when ctx ends (the work goes on).
func (d *DB) WaitForCompactions(ctx context.Context) error {
	stop := d.wakeOnDone(ctx)
	defer stop()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mu.settling++
	defer func() { d.mu.settling-- }()
	for {
		switch {
		case d.mu.bgErr != nil:
			return d.writeStoppedErrLocked()
		case d.mu.closed:
			return ErrClosed
		case d.opts.ReadOnly:
			return nil // nothing ever runs
		case ctx.Err() != nil:
			return ctx.Err()
		}
		busy := len(d.mu.imm) > 0 || d.mu.flushing || d.mu.compacting > 0
		if !busy {
			due := false
			v := d.rs.version
			t := d.levelTargetsLocked(v)
			for l := 0; l < manifest.NumLevels-1; l++ {
				if d.scoreLocked(v, &t, l) >= 1 {
					due = true
				}
			}
			if !due {
				return nil
			}
		}
		d.signal(d.flushCh)
		d.maybeScheduleCompaction()
		d.mu.cond.Wait()
	}
}
