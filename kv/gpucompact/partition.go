package gpucompact

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/warpkit/warpkit/internal/hostpar"
	"github.com/warpkit/warpkit/kv/compaction"
	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/internal/rangedel"
	"github.com/warpkit/warpkit/kv/manifest"
	"github.com/warpkit/warpkit/kv/sstable"
)

// Key-range partitions. A job whose estimate passes the engine's budgets
// (MemoryBudget, MaxDeviceBytes, the 4 GiB of 32-bit offsets) runs as a
// sequence of partitions, each a range of user keys that the engine
// compacts in one pass of its pipeline, in memory for that range alone,
// and whose outputs, together, are byte for byte the whole job's:
//
//   - The split keys come from the input tables' index blocks: every data
//     block's index key bounds the user keys it may hold (sstable.Reader.
//     DataBlockBounds), and a sweep over the blocks in key order cuts
//     wherever the running estimate would pass an eighth of the budgets
//     (splitJob); each partition ends at the farthest split at which its
//     estimate, with room for one output table, fits (partitionPlan.end).
//   - A partition [lo, hi) reads only the blocks that may hold its keys
//     (partition.blocks: each table's blocks from the first whose bound is
//     at least lo to the first whose bound is at least hi), so every version
//     of every key in the range is there; the boundary blocks bring keys
//     outside it, which the stages carry along and the walk leaves out.
//     Garbage collection decides an entry from its own key's versions, the
//     job's range tombstones and the levels below, so the kept entries of
//     the range are the whole job's.
//   - The output tables must end where the whole job's end, and a table's
//     cut depends on everything since it started. So a partition first
//     walks its kept entries dry (startRecorder: the plan with nothing
//     written), from an entry where the whole job's walk starts a table, to
//     find the last table that starts inside it; then it writes the tables
//     before that one, and the next partition starts at that table's first
//     key (next), where the walk's state is again a fresh table's. Entries
//     between there and hi are loaded and collected twice: at most about
//     one output table's worth per partition.
//   - A partition in which no table starts past its first (its range holds
//     less than one output, after garbage collection) is widened to the
//     farthest split within the budgets (errNoCut; none: errOverBudget, the
//     job declined); one that keeps no entry at all, before any table has
//     started, ends at hi with no output. A plan whose partitions could not
//     hold four output tables is not made.
//   - Two lanes (workspaces, and device engines with streams of their
//     own) let a partition prepare while the last one writes
//     (runPartitioned); the plan then fits each within half the budgets.
//   - The Stats are the sum of the partitions', each counting the entries
//     of [lo, next) only; their EntriesIn must add up to the input tables'
//     NumEntries, which checks that the index bounds were true (a table
//     whose index lied would lose entries between partitions): otherwise
//     the job is declined ("irregular") and Fallback's result stands.

// partition is one key range of a job: user keys [lo, hi) (nil: open).
// first says no output table of the job has started below lo (the first
// table's range tombstones then have no lower bound).
type partition struct {
	lo, hi []byte
	first  bool
	spans  *jobSpans                    // the job's range tombstones, collected once
	bounds map[base.FileNum]tableBounds // the input tables' blocks and bounds, read once (splitJob)
}

// tableBounds is an input table's data blocks and their bounds
// (blockBounds).
type tableBounds struct {
	blocks []sstable.BlockHandle
	upper  [][]byte
}

// tableBounds returns table f's blocks and bounds: those the plan read, or
// read now (r is its reader). The caller slices but does not change them.
func (p *partition) tableBounds(r *sstable.Reader, f *manifest.FileMetadata) ([]sstable.BlockHandle, [][]byte, error) {
	if b, ok := p.bounds[f.FileNum]; ok {
		return b.blocks, b.upper, nil
	}
	return blockBounds(r, f)
}

// errNoCut says no output table starts inside a partition after its first:
// it is widened (partitionPlan.widen).
var errNoCut = errors.New("gpucompact: no output table ends inside the partition")

// errOverBudget says a partition in which no output table starts after its
// first could not be widened within the budgets: the job goes to Fallback
// ("budget").
var errOverBudget = errors.New("gpucompact: a partition holding no whole output table would pass the budgets")

// errPartitionEntries says a partitioned job's partitions counted other
// entries than its input tables hold: an index block's keys did not bound
// its blocks' keys. The job goes to Fallback ("irregular").
var errPartitionEntries = errors.New("gpucompact: the partitions' entries do not add up to the input tables'")

// blocks returns the blocks [from, to) of a table that may hold user keys in
// the partition's range, given each block's bound (DataBlockBounds): block
// i holds user keys in [upper[i-1], upper[i]].
func (p *partition) blocks(upper [][]byte) (from, to int) {
	n := len(upper)
	if p.lo != nil {
		from, _ = slices.BinarySearchFunc(upper, p.lo, bytes.Compare)
	}
	to = n
	if p.hi != nil {
		at, _ := slices.BinarySearchFunc(upper, p.hi, bytes.Compare)
		to = min(n, at+1)
	}
	return from, max(from, to)
}

// excludes says table f holds no key of the partition's range, by its
// bounds (the check of the entries counted covers bounds that lie).
func (p *partition) excludes(f *manifest.FileMetadata) bool {
	return p.lo != nil && bytes.Compare(f.Largest.UserKey, p.lo) < 0 || p.hi != nil && bytes.Compare(f.Smallest.UserKey, p.hi) >= 0
}

// blockBounds returns table f's data blocks and their bounds
// (DataBlockBounds), the last one no greater than the table's largest user
// key: a table's last index key is a short successor of its last key ("1"
// after "0999"), which would put the last block of every table past every
// key of the others.
func blockBounds(r *sstable.Reader, f *manifest.FileMetadata) ([]sstable.BlockHandle, [][]byte, error) {
	blocks, upper, err := r.DataBlockBounds()
	if n := len(upper); err == nil && n > 0 && bytes.Compare(f.Largest.UserKey, upper[n-1]) < 0 {
		upper[n-1] = f.Largest.UserKey
	}
	return blocks, upper, err
}

// startRecorder is the sink of a dry walk: it keeps where the last table
// started.
type startRecorder struct{ last int }

func (r *startRecorder) table(j int, _ []byte) error { r.last = j; return nil }
func (r *startRecorder) block(int, int, int, bool)   {}
func (r *startRecorder) end(int, []byte)             {}

// walk returns the partition's walk over the kept entries (kept ids into s,
// in merged order, the boundary blocks' entries with them) and next, where
// the next partition starts: for all but the job's last partition the
// first key of the last table that starts inside the range (found by a dry
// walk), or hi when the range keeps nothing and no table has started yet.
func (p *partition) walk(s *inputSet, pe []planEntry, kept []uint32, keptNew []bool, jumps *blockJumps, job *compaction.Job, opts sstable.WriterOptions, cutLimit uint64, outSpans []rangedel.Span) (walk, []byte, error) {
	at := func(k []byte) int {
		j, _ := slices.BinarySearchFunc(kept, k, func(id uint32, k []byte) int { return bytes.Compare(s.key(id), k) })
		return j
	}
	w := walk{to: len(kept), stopAt: -1, first: p.first, last: p.hi == nil}
	if p.lo != nil {
		w.from = at(p.lo)
	}
	if p.hi != nil {
		w.to = at(p.hi)
	}
	if !p.first && (w.from == w.to || !bytes.Equal(s.key(kept[w.from]), p.lo)) {
		// The table the last partition left to this one starts at lo: its
		// first entry gone means an index or the tables' bounds lied.
		return w, nil, fmt.Errorf("%w: the partition from %q lacks the first entry of its first table", errPartitionEntries, p.lo)
	}
	if w.last {
		return w, nil, nil
	}
	if w.from == w.to {
		w.stopAt = w.to
		return w, p.hi, nil
	}
	rec := startRecorder{last: -1}
	if err := s.plan(pe, kept, keptNew, jumps, job, opts, cutLimit, outSpans, &rec, w); err != nil {
		return w, nil, err
	}
	if rec.last <= w.from {
		return w, nil, errNoCut
	}
	w.stopAt = rec.last
	return w, bytes.Clone(s.key(kept[rec.last])), nil
}

// stats returns the partition's share of st, the stats of everything its
// stages saw: the entries with keys in [lo, next), the kept ones its walk
// writes, the tombstones elided among them.
func (p *partition) stats(s *inputSet, st gcStats, w walk, next []byte) gcStats {
	in := func(k []byte) bool {
		return (p.lo == nil || bytes.Compare(k, p.lo) >= 0) && (next == nil || bytes.Compare(k, next) < 0)
	}
	var n atomic.Uint64
	hostpar.ForWorkers(len(s.ents), 4096, s.workers, func(_, lo, hi int) {
		c := 0
		for i := lo; i < hi; i++ {
			if in(s.key(uint32(i))) {
				c++
			}
		}
		n.Add(uint64(c))
	})
	out := gcStats{entriesIn: n.Load(), entriesOut: uint64(w.to - w.from)}
	if !w.last {
		out.entriesOut = uint64(w.stopAt - w.from)
	}
	for _, id := range st.elided {
		if in(s.key(id)) {
			out.tombstonesElided++
		}
	}
	return out
}

// partitionPlan is how a job too large for the engine in one piece is cut:
// the keys where partitions may end, about an eighth of the budgets apart
// (splitsPerBudget), and what it needs to choose each partition's end (the
// farthest whose estimate fits: partitionPlan.end) and to check the
// entries counted.
type partitionPlan struct {
	splits  [][]byte
	blocks  []blockSize                  // the input data blocks, in groups (splitJob), by bound
	bounds  map[base.FileNum]tableBounds // each input table's blocks and bounds, for its partitions
	room    jobSize                      // an output table's worth, by which a partition may start early
	fits    func(jobSize) bool
	lanes   int    // partitions at a time (fits allows for them)
	entries uint64 // the input tables' point entries (their properties)
}

// splitsPerBudget is how many pieces between splits a partition of the
// whole budgets holds: it ends within an eighth of them of the most it
// could hold, and has that much to widen by when no output table starts
// inside it (errNoCut).
const splitsPerBudget = 8

// blockSize is some consecutive input data blocks' bound (the last one's:
// DataBlockBounds) and their share of their table's estimate.
type blockSize struct {
	upper []byte
	size  jobSize
}

// splitJob plans the partitions of job: the keys where they may end, cut
// where the running estimate of the blocks, in key order, would pass an
// eighth of the budgets (fits) less room for the output table by which a
// partition may start early (the cut limit of contents, as entries of the
// job's mean size). It returns no splits when the job cannot be cut so (a
// group of blocks too large for a partition, or budgets that would not hold
// four output tables a partition). It reads the tables' indexes on up to
// workers goroutines (0: GOMAXPROCS).
func splitJob(job *compaction.Job, cutLimit uint64, workers int, fits func(jobSize) bool) (*partitionPlan, error) {
	plan := &partitionPlan{fits: fits}
	grain := job.InputBytes() / 4096
	// Each table's index read and its blocks grouped on goroutines (a
	// store's job has a hundred tables or more, each with thousands of
	// blocks), then gathered in job order.
	var files []*manifest.FileMetadata
	for _, in := range job.Inputs {
		files = append(files, in.Files...)
	}
	type tableGroups struct {
		size    jobSize
		entries uint64
		groups  []blockSize
		bounds  tableBounds
		err     error
	}
	tables := make([]tableGroups, len(files))
	hostpar.ForWorkers(len(files), 1, workers, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			f, tg := files[i], &tables[i]
			r, release, err := job.Env.OpenTable(f)
			if err != nil {
				tg.err = err
				continue
			}
			blocks, upper, err := blockBounds(r, f)
			props := r.Properties()
			release()
			if err != nil {
				tg.err = err
				continue
			}
			tg.size, tg.entries = tableSize(f.Size, props), props.NumEntries
			tg.bounds = tableBounds{blocks, upper}
			var stored uint64
			for _, h := range blocks {
				stored += h.Length
			}
			// Blocks in groups of about grain stored bytes: a split falls
			// at a group's bound (any bound will do), and the sweep sorts
			// a few thousand groups, not every block. A group's bytes are
			// its share of the table's by stored bytes; its entries and
			// keys its share by blocks (a block of one large value holds
			// one entry, not a byte share of them).
			var group uint64
			first := 0
			for i, h := range blocks {
				group += h.Length
				if group >= grain || i == len(blocks)-1 {
					sz := tg.size.share(group, stored)
					count := tg.size.share(uint64(i+1-first), uint64(len(blocks)))
					sz.entries, sz.keys = count.entries, count.keys
					tg.groups = append(tg.groups, blockSize{upper[i], sz})
					group, first = 0, i+1
				}
			}
		}
	})
	var total jobSize
	plan.bounds = make(map[base.FileNum]tableBounds, len(files))
	for i, tg := range tables {
		if tg.err != nil {
			return nil, tg.err
		}
		plan.bounds[files[i].FileNum] = tg.bounds
		total = total.add(tg.size)
		plan.entries += tg.entries
		plan.blocks = append(plan.blocks, tg.groups...)
	}
	slices.SortStableFunc(plan.blocks, func(a, b blockSize) int { return bytes.Compare(a.upper, b.upper) })
	// Room for one output table at the job's mean entry size.
	var room jobSize
	if total.contents > 0 {
		c := min(cutLimit, total.contents)
		room = total.share(c, total.contents)
	}
	plan.room = room
	// A partition must hold a few output tables, or most would widen (or
	// fail to); and every group of blocks must fit one with that room.
	if !fits(room.scale(4)) {
		return plan, nil
	}
	for _, b := range plan.blocks {
		if !fits(b.size.add(room)) {
			return plan, nil
		}
	}
	piece := func(s jobSize) bool { return fits(s.scale(splitsPerBudget).add(room)) }
	var acc jobSize
	for _, b := range plan.blocks {
		if next := acc.add(b.size); piece(next) || acc.contents == 0 {
			acc = next
			continue
		}
		if n := len(plan.splits); n > 0 && bytes.Compare(b.upper, plan.splits[n-1]) <= 0 {
			acc = acc.add(b.size) // (a bound equal to the last split's)
			continue
		}
		plan.splits = append(plan.splits, b.upper)
		acc = b.size
	}
	if !piece(acc) || len(plan.splits) == 0 {
		plan.splits = nil
	}
	return plan, nil
}

// end returns the split that ends the partition from lo whose first
// possible end is split k (len(splits): the job's end): the farthest at
// which the partition's estimate, with room for the output table by which
// the next may start early, fits the budgets. Without fits (tests), split k.
func (pl *partitionPlan) end(lo []byte, k int) int {
	if pl.fits == nil {
		return k
	}
	j := k
	for j < len(pl.splits) && pl.fits(pl.estimate(lo, pl.split(j+1)).add(pl.room)) {
		j++
	}
	return j
}

// widen returns the split to widen a partition from lo that ended at split
// k to: the farthest past k whose estimate fits the budgets (k+1 without
// them), or -1 when even k+1 does not.
func (pl *partitionPlan) widen(lo []byte, k int) int {
	if pl.fits == nil {
		return k + 1
	}
	if !pl.fits(pl.estimate(lo, pl.split(k+1))) {
		return -1
	}
	j := k + 1
	for j < len(pl.splits) && pl.fits(pl.estimate(lo, pl.split(j+1))) {
		j++
	}
	return j
}

// estimate is the estimate of the blocks a partition [lo, hi) reads.
func (pl *partitionPlan) estimate(lo, hi []byte) jobSize {
	var s jobSize
	for i, b := range pl.blocks {
		if lo != nil && bytes.Compare(b.upper, lo) < 0 {
			continue
		}
		if hi != nil && i > 0 && bytes.Compare(pl.blocks[i-1].upper, hi) >= 0 {
			break
		}
		s = s.add(b.size)
	}
	return s
}

// split returns the end of the partitions' k-th range (nil: the job's end).
func (pl *partitionPlan) split(k int) []byte {
	if k < len(pl.splits) {
		return pl.splits[k]
	}
	return nil
}

// lane is a workspace (and, on the CUDA engine, a device engine: its
// arrays and stream) that partitions run in, with their stage times. With
// two, runPartitioned prepares each partition in one while the last one
// writes from the other.
type lane struct {
	ws    *workspace
	dev   *devEngine
	times stageTimes
}

// runPartitioned runs job through the engine partition by partition
// (plan), in lanes taken in turn, and returns the whole job's result and
// how many partitions ran; the lanes' stage times are added to times.
// With two lanes a partition is prepared (read, merged, collected, sized,
// its walk planned) while the last one writes; writes run one after
// another, so output tables are created in key order. On error the tables
// created stay for the caller to remove, as with runEngine.
func runPartitioned(ctx context.Context, job *compaction.Job, plan *partitionPlan, lanes []*lane, times *stageTimes, failAt func(stage string) error) (*compaction.Result, int, error) {
	start := time.Now()
	res := &compaction.Result{}
	parts := 0
	add := func(r *compaction.Result) {
		parts++
		res.Outputs = append(res.Outputs, r.Outputs...)
		res.Stats.BytesWritten += r.Stats.BytesWritten
		res.Stats.EntriesIn += r.Stats.EntriesIn
		res.Stats.EntriesOut += r.Stats.EntriesOut
		res.Stats.TombstonesElided += r.Stats.TombstonesElided
		res.Stats.RangeDelsDropped = r.Stats.RangeDelsDropped // (the job's, in each)
		res.Stats.Engine = r.Stats.Engine
	}
	defer func() {
		for _, l := range lanes {
			times.add(&l.times)
			l.times = stageTimes{}
		}
	}()
	// The job's range tombstones, for every partition (let go of after
	// the last write).
	js, err := collectSpans(job)
	if err != nil {
		if isCorruption(err) || ctx.Err() != nil {
			return nil, 0, err
		}
		return nil, 0, &stageError{"load", err}
	}
	defer js.release()
	// writing is the last partition's write, running beside the next
	// one's prepare; finish waits for it.
	type written struct {
		res *compaction.Result
		err error
	}
	var writing chan written
	finish := func() error {
		if writing == nil {
			return nil
		}
		w := <-writing
		writing = nil
		if w.err != nil {
			return w.err
		}
		add(w.res)
		return nil
	}
	defer finish() // (after an error: no write may outlive the job; before the spans' release)
	var lo []byte
	first := true
	for k, li := 0, 0; ; li = (li + 1) % len(lanes) {
		k = plan.end(lo, k)
		hi := plan.split(k)
		l := lanes[li]
		r, err := prepare(ctx, job, &partition{lo: lo, hi: hi, first: first, spans: js, bounds: plan.bounds}, l.ws, l.dev, &l.times, failAt)
		for errors.Is(err, errNoCut) && k < len(plan.splits) {
			// Widened: the same start, the farthest end that fits without
			// room for an early start (the next split's, without budgets).
			k = plan.widen(lo, k)
			if k < 0 {
				err = errOverBudget
				break
			}
			hi = plan.split(k)
			r, err = prepare(ctx, job, &partition{lo: lo, hi: hi, first: first, spans: js, bounds: plan.bounds}, l.ws, l.dev, &l.times, failAt)
		}
		// The last partition's tables come before this one's.
		if werr := finish(); werr != nil {
			if err == nil {
				r.close()
			}
			return nil, parts, werr
		}
		if err != nil {
			return nil, parts, err
		}
		next, wrote := r.next, r.wrote()
		if hi == nil || len(lanes) == 1 {
			w, err := r.write()
			if err != nil {
				return nil, parts, err
			}
			add(w)
			if hi == nil {
				break
			}
		} else {
			writing = make(chan written, 1)
			go func(r *partRun) {
				w, err := r.write()
				writing <- written{w, err}
			}(r)
		}
		lo, first = next, first && !wrote
		for k < len(plan.splits) && bytes.Compare(plan.splits[k], lo) <= 0 {
			k++ // (a partition that kept nothing ended at its split)
		}
	}
	if res.Stats.EntriesIn != plan.entries {
		return nil, parts, fmt.Errorf("%w: %d, the tables' properties say %d", errPartitionEntries, res.Stats.EntriesIn, plan.entries)
	}
	res.Stats.BytesRead = job.InputBytes()
	res.Stats.Duration = time.Since(start)
	return res, parts, nil
}

// tableSize is a table's estimate from its properties (a table written
// before RawDataSize existed counts 4 times its size).
func tableSize(size uint64, p *sstable.Properties) jobSize {
	raw := p.RawDataSize
	if raw == 0 {
		raw = 4 * size
	}
	return jobSize{stored: size, contents: raw, entries: p.NumEntries, keys: p.RawKeySize}
}

// scale returns n times j.
func (j jobSize) scale(n uint64) jobSize {
	return jobSize{stored: n * j.stored, contents: n * j.contents, entries: n * j.entries, keys: n * j.keys}
}

// add returns the sum of two estimates.
func (j jobSize) add(o jobSize) jobSize {
	return jobSize{stored: j.stored + o.stored, contents: j.contents + o.contents, entries: j.entries + o.entries, keys: j.keys + o.keys}
}

// share returns the part of j that n of its total bytes hold.
func (j jobSize) share(n, total uint64) jobSize {
	if total == 0 {
		return jobSize{}
	}
	f := float64(n) / float64(total)
	s := func(v uint64) uint64 { return uint64(math.Ceil(float64(v) * f)) }
	return jobSize{stored: s(j.stored), contents: s(j.contents), entries: s(j.entries), keys: s(j.keys)}
}
