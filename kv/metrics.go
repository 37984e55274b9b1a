package kv

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/warpkit/warpkit/kv/cache"
	"github.com/warpkit/warpkit/kv/manifest"
)

type atomicCounter = atomic.Int64

// metricsState holds the DB's counters.
type metricsState struct {
	walBytesIn          atomicCounter // user batch bytes
	commitGroups        atomicCounter
	walSyncs            atomicCounter
	walBytesClosed      atomicCounter // bytes of logs already rotated away
	flushes             atomicCounter
	flushBytes          atomicCounter
	flushNanos          atomicCounter
	compactions         atomicCounter
	accelJobs           atomicCounter
	accelBytesRead      atomicCounter
	accelNanos          atomicCounter
	accelFallbacks      atomicCounter
	moves               atomicCounter
	compactBytesRead    atomicCounter
	compactBytesWritten atomicCounter
	compactNanos        atomicCounter
	tombstonesElided    atomicCounter
	slowdowns           atomicCounter
	slowdownNanos       atomicCounter
	memtableStops       atomicCounter
	l0Stops             atomicCounter
	stallNanos          atomicCounter
	stalls              atomicCounter // stall episodes (WriteStallBegin events)
	stallEpisodeNanos   atomicCounter // time in ended stall episodes
	tablesDeleted       atomicCounter
	deleteErrors        atomicCounter
	tornTails           atomicCounter
	salvaged            atomicCounter
	levels              [manifest.NumLevels]struct {
		bytesIn     atomicCounter
		compactions atomicCounter
	}

	groupBuf []byte // the commit leader's scratch (not a metric; lives here to keep DB small)
}

// LevelMetrics describe one level.
type LevelMetrics struct {
	Tables      int
	Bytes       uint64
	Score       float64 // compaction pressure: >= 1 means the level is due
	Target      uint64  // target size in bytes (L1 and below; 0 above the base level)
	BytesIn     int64   // bytes written into the level (flushes into L0, compactions below)
	Compactions int64   // compactions out of the level
}

// Metrics is a snapshot of the DB's counters.
type Metrics struct {
	Levels [manifest.NumLevels]LevelMetrics
	// BaseLevel is the level L0 compacts into (Options.StaticLevelSizes).
	BaseLevel int

	MemTable struct {
		Size       int   // bytes in use in the mutable memtable
		Immutable  int   // memtables waiting to be flushed
		Flushes    int64 // memtables written to L0
		FlushBytes int64
		FlushTime  time.Duration
	}
	WAL struct {
		BytesIn      int64 // bytes of committed batches
		BytesWritten int64 // bytes of log files written (records and padding)
		CommitGroups int64 // log records (one per commit group)
		Syncs        int64
	}
	Compaction struct {
		Count            int64 // compactions that merged tables
		Moves            int64 // tables moved down a level without rewriting
		BytesRead        int64
		BytesWritten     int64
		Time             time.Duration
		InProgress       int
		TombstonesElided int64 // point tombstones dropped at the bottom
		// Accelerated counts the jobs an accelerated engine of the
		// compactor ran (compaction.Stats.Engine not empty: kv/gpucompact),
		// their input bytes and time, and the jobs it gave up to its
		// fallback (compaction.Stats.Fallback).
		Accelerated struct {
			Count, BytesRead, Fallbacks int64
			Time                        time.Duration
		}
	}
	Stalls struct {
		Slowdowns     int64 // writes delayed 1 ms for L0 tables >= L0SlowdownWritesThreshold
		SlowdownTime  time.Duration
		MemTableStops int64 // waits for a memtable flush
		L0Stops       int64 // waits for L0 tables < L0StopWritesThreshold
		StopTime      time.Duration
		// Stalled: writes are stopped now, for Reason: StallMemTable
		// ("memtable": memtables wait to be flushed) or StallL0 ("L0": too
		// many L0 tables); Reason is "" when writes flow.
		Stalled bool
		Reason  string
		// Count is the number of write stalls so far: periods in which
		// writes stopped for one reason, each reported by one
		// WriteStallBegin event (a stall may span several of the waits
		// MemTableStops and L0Stops count).
		Count int64
		// Time is the total time writes were held up so far: SlowdownTime
		// plus the time of every stall, the one in progress included.
		Time time.Duration
	}
	BlockCache cache.Metrics
	TableCache struct {
		Open   int
		Hits   int64
		Misses int64
	}
	Recovery struct {
		// TornTails counts logs whose unfinished tail Open ignored: only
		// the log the store was writing when it stopped without a clean
		// Close can have one.
		TornTails int64
		// SalvagedRecords counts damaged log regions WALSalvage skipped.
		SalvagedRecords int64
		// Damage lists each ignored torn tail and each skipped region:
		// the log, the offset and what was wrong.
		Damage []CorruptionError
		// Unexplained lists tables of the store's own name pattern that
		// Open could neither use nor prove obsolete: numbered at or above
		// the manifest's next file number, listed by no version (the
		// output of a flush or compaction a crash interrupted, or of an
		// edit the manifest lost). A read-write Open moves them to the
		// lost/ subdirectory, where no later Open touches them; the store
		// never deletes them.
		Unexplained []string
	}
	Snapshots       int
	Iterators       int64
	TablesDeleted   int64
	DeleteErrors    int64
	BackgroundError error // non-nil once writes have stopped
}

// WriteAmp is (log + flush + compaction bytes written) / bytes committed.
func (m *Metrics) WriteAmp() float64 {
	if m.WAL.BytesIn == 0 {
		return 0
	}
	return float64(m.WAL.BytesWritten+m.MemTable.FlushBytes+m.Compaction.BytesWritten) / float64(m.WAL.BytesIn)
}

// CompactionBandwidth is compaction bytes (read + written) per second of
// compaction time, the gLSM paper's measure.
func (m *Metrics) CompactionBandwidth() float64 {
	if m.Compaction.Time <= 0 {
		return 0
	}
	return float64(m.Compaction.BytesRead+m.Compaction.BytesWritten) / m.Compaction.Time.Seconds()
}

// Metrics returns the current counters (after Close: empty metrics whose
// BackgroundError is ErrClosed).
func (d *DB) Metrics() *Metrics {
	m := &Metrics{}
	rs := d.loadReadState()
	if rs == nil {
		m.BackgroundError = ErrClosed
		return m
	}
	defer rs.unref()
	v := rs.version
	d.mu.Lock()
	m.MemTable.Size = d.mu.mem.Size()
	m.MemTable.Immutable = len(d.mu.imm)
	m.Compaction.InProgress = d.mu.compacting
	m.Snapshots = d.mu.snapshots.count()
	m.BackgroundError = d.mu.bgErr
	var stallNow time.Duration
	if r := d.mu.stall.reason; r != "" {
		m.Stalls.Stalled, m.Stalls.Reason = true, r
		stallNow = time.Since(d.mu.stall.start)
	}
	m.Stalls.Count = d.m.stalls.Load()
	m.Stalls.Time = time.Duration(d.m.slowdownNanos.Load()+d.m.stallEpisodeNanos.Load()) + stallNow
	var walWritten int64
	if d.mu.wal != nil {
		walWritten = d.mu.wal.w.Size()
	}
	t := d.levelTargetsLocked(v)
	m.BaseLevel = t.base
	for l := range manifest.NumLevels {
		if l < manifest.NumLevels-1 {
			m.Levels[l].Score = d.scoreLocked(v, &t, l)
		}
		if l > 0 && !math.IsInf(t.maxBytes[l], 1) {
			m.Levels[l].Target = uint64(t.maxBytes[l])
		}
	}
	d.mu.Unlock()
	for l := range manifest.NumLevels {
		m.Levels[l].Tables = len(v.Levels[l])
		m.Levels[l].Bytes = v.LevelSize(l)
		m.Levels[l].BytesIn = d.m.levels[l].bytesIn.Load()
		m.Levels[l].Compactions = d.m.levels[l].compactions.Load()
	}
	m.MemTable.Flushes = d.m.flushes.Load()
	m.MemTable.FlushBytes = d.m.flushBytes.Load()
	m.MemTable.FlushTime = time.Duration(d.m.flushNanos.Load())
	m.WAL.BytesIn = d.m.walBytesIn.Load()
	m.WAL.BytesWritten = d.m.walBytesClosed.Load() + walWritten
	m.WAL.CommitGroups = d.m.commitGroups.Load()
	m.WAL.Syncs = d.m.walSyncs.Load()
	m.Compaction.Count = d.m.compactions.Load()
	m.Compaction.Moves = d.m.moves.Load()
	m.Compaction.BytesRead = d.m.compactBytesRead.Load()
	m.Compaction.BytesWritten = d.m.compactBytesWritten.Load()
	m.Compaction.Time = time.Duration(d.m.compactNanos.Load())
	m.Compaction.TombstonesElided = d.m.tombstonesElided.Load()
	m.Compaction.Accelerated.Count = d.m.accelJobs.Load()
	m.Compaction.Accelerated.BytesRead = d.m.accelBytesRead.Load()
	m.Compaction.Accelerated.Time = time.Duration(d.m.accelNanos.Load())
	m.Compaction.Accelerated.Fallbacks = d.m.accelFallbacks.Load()
	m.Stalls.Slowdowns = d.m.slowdowns.Load()
	m.Stalls.SlowdownTime = time.Duration(d.m.slowdownNanos.Load())
	m.Stalls.MemTableStops = d.m.memtableStops.Load()
	m.Stalls.L0Stops = d.m.l0Stops.Load()
	m.Stalls.StopTime = time.Duration(d.m.stallNanos.Load())
	m.BlockCache = d.blocks.Metrics()
	m.TableCache.Open = d.tables.size()
	m.TableCache.Hits = d.tables.hits.Load()
	m.TableCache.Misses = d.tables.misses.Load()
	m.Recovery.TornTails = d.m.tornTails.Load()
	m.Recovery.SalvagedRecords = d.m.salvaged.Load()
	m.Recovery.Damage = slices.Clone(d.recovery.Damage)
	m.Recovery.Unexplained = slices.Clone(d.recovery.Unexplained)
	m.Iterators = d.openIters.Load()
	m.TablesDeleted = d.m.tablesDeleted.Load()
	m.DeleteErrors = d.m.deleteErrors.Load()
	return m
}

// String formats the metrics as a small report.
func (m *Metrics) String() string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "level\ttables\tsize\ttarget\tscore\tbytes in\tcompactions\t")
	for l, lm := range m.Levels {
		target := "-"
		if lm.Target > 0 {
			target = humanBytes(float64(lm.Target))
		}
		fmt.Fprintf(tw, "L%d\t%d\t%s\t%s\t%.2f\t%s\t%d\t\n", l, lm.Tables, humanBytes(float64(lm.Bytes)), target, lm.Score, humanBytes(float64(lm.BytesIn)), lm.Compactions)
	}
	tw.Flush()
	fmt.Fprintf(&b, "base level: L%d\n", m.BaseLevel)
	fmt.Fprintf(&b, "memtable: %s in use, %d waiting; %d flushes (%s)\n", humanBytes(float64(m.MemTable.Size)), m.MemTable.Immutable, m.MemTable.Flushes, humanBytes(float64(m.MemTable.FlushBytes)))
	fmt.Fprintf(&b, "wal: %s committed, %s written, %d groups, %d syncs\n", humanBytes(float64(m.WAL.BytesIn)), humanBytes(float64(m.WAL.BytesWritten)), m.WAL.CommitGroups, m.WAL.Syncs)
	fmt.Fprintf(&b, "compactions: %d (+%d moves), read %s, wrote %s, %v, %s/s\n", m.Compaction.Count, m.Compaction.Moves,
		humanBytes(float64(m.Compaction.BytesRead)), humanBytes(float64(m.Compaction.BytesWritten)), m.Compaction.Time.Round(time.Millisecond), humanBytes(m.CompactionBandwidth()))
	if a := m.Compaction.Accelerated; a.Count > 0 || a.Fallbacks > 0 {
		fmt.Fprintf(&b, "accelerated compactions: %d, read %s, %v; %d fell back\n", a.Count, humanBytes(float64(a.BytesRead)), a.Time.Round(time.Millisecond), a.Fallbacks)
	}
	fmt.Fprintf(&b, "write amplification: %.2f\n", m.WriteAmp())
	fmt.Fprintf(&b, "stalls: %d slowdowns (%v), %d memtable stops, %d L0 stops (%v); %d stalls, %v held up in all",
		m.Stalls.Slowdowns, m.Stalls.SlowdownTime.Round(time.Millisecond),
		m.Stalls.MemTableStops, m.Stalls.L0Stops, m.Stalls.StopTime.Round(time.Millisecond), m.Stalls.Count, m.Stalls.Time.Round(time.Millisecond))
	if m.Stalls.Stalled {
		fmt.Fprintf(&b, "; stalled now (%s)", m.Stalls.Reason)
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "block cache: %s of %s, hit rate %.1f%%; table cache: %d open, hit rate %.1f%%\n",
		humanBytes(float64(m.BlockCache.Size)), humanBytes(float64(m.BlockCache.Capacity)), 100*m.BlockCache.HitRate(),
		m.TableCache.Open, 100*ratio(m.TableCache.Hits, m.TableCache.Hits+m.TableCache.Misses))
	if r := m.Recovery; r.TornTails > 0 || r.SalvagedRecords > 0 || len(r.Unexplained) > 0 {
		fmt.Fprintf(&b, "recovery: %d torn log tails ignored, %d damaged log regions skipped, %d unexplained files moved to lost/\n",
			r.TornTails, r.SalvagedRecords, len(r.Unexplained))
		for _, c := range r.Damage {
			fmt.Fprintf(&b, "  %v\n", &c)
		}
		for _, n := range r.Unexplained {
			fmt.Fprintf(&b, "  unexplained: %s\n", n)
		}
	}
	if m.BackgroundError != nil {
		fmt.Fprintf(&b, "writes stopped: %v\n", m.BackgroundError)
	}
	return b.String()
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func humanBytes(n float64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", n/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", n/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", n/(1<<10))
	}
	return fmt.Sprintf("%.0f B", n)
}

// recoveryReport is what Open found: set during Open, read-only after.
type recoveryReport struct {
	Damage      []CorruptionError
	Unexplained []string
}
