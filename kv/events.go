package kv

import (
	"time"

	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/manifest"
)

// FileNum numbers the store's files: table 000012.sst and log 000013.log
// are FileNums 12 and 13; String gives the zero-padded form.
type FileNum = base.FileNum

// EventListener receives the store's background events (Options.
// EventListener). Every field is optional.
//
// Callbacks run synchronously on the goroutine doing the work (the flush or
// compaction worker, the cleaner, the commit leader for write stalls, Open
// or Close), without the DB's lock held; a slow callback slows that work.
// They must not call back into the DB (its methods may wait for the very
// work the callback is part of); hand anything of the kind to another
// goroutine. Several callbacks may run at once on different goroutines.
//
// Pairing and order: each FlushBegin is followed by exactly one FlushEnd
// with the same JobID, and each CompactionBegin by exactly one
// CompactionEnd, also when the job fails (Err set) or Close interrupts it
// (Err wraps context.Canceled); the End comes before the Flush, Compact or
// WaitForCompactions call waiting for the job returns. Each WriteStallBegin
// is followed by exactly one WriteStallEnd before the next WriteStallBegin
// (only the commit leader stalls, so stalls never overlap), also when the
// stall ends with Close or a background error.
type EventListener struct {
	FlushBegin      func(FlushInfo)
	FlushEnd        func(FlushInfo)
	CompactionBegin func(CompactionInfo)
	CompactionEnd   func(CompactionInfo)
	// WriteStallBegin: writes stopped; Reason is "memtable" (memtables
	// wait to be flushed: MemTableStopWritesThreshold) or "L0" (L0 holds
	// L0StopWritesThreshold tables). The 1 ms delays at
	// L0SlowdownWritesThreshold (when set) are not reported as stalls (they
	// are one per write); Metrics().Stalls counts them.
	WriteStallBegin func(WriteStallBeginInfo)
	// WriteStallEnd: the stall WriteStallBegin reported is over.
	WriteStallEnd func()
	// BackgroundError: an error stopped writes (the first such error; it
	// is what Metrics().BackgroundError reports).
	BackgroundError func(error)
	// WALCreated: a write-ahead log was created (at Open, and ahead of
	// each memtable switch: the store keeps a spare).
	WALCreated func(WALInfo)
	// WALDeleted: an obsolete log was deleted (Err: the deletion failed).
	WALDeleted func(WALInfo)
	// TableDeleted: an obsolete table (one no version lists) was deleted.
	// The outputs of a failed flush or compaction, which were never part
	// of the store, are removed without an event.
	TableDeleted func(TableDeleteInfo)
}

// TableInfo describes a table.
type TableInfo struct {
	FileNum           FileNum
	Size              uint64
	Smallest, Largest []byte // user keys (not to be modified)
}

// FlushInfo describes a flush of a memtable to L0.
type FlushInfo struct {
	JobID int
	// InputBytes is the size of the memtable flushed (arena bytes in use).
	InputBytes uint64
	// Output is the L0 table written (End only); nil when the memtable held
	// nothing to write, or on error.
	Output   *TableInfo
	Duration time.Duration // End only
	Err      error         // End only
}

// LevelInfo is one level's input tables of a compaction.
type LevelInfo struct {
	Level  int
	Tables []TableInfo
}

// CompactionInfo describes a compaction.
type CompactionInfo struct {
	JobID       int
	Input       []LevelInfo
	OutputLevel int
	// Move: the single input table moves to OutputLevel without being
	// rewritten (Output is then that table, and no bytes are read or
	// written).
	Move bool
	// Manual: the job is part of a Compact call.
	Manual bool
	// End only: the tables written, the bytes read and written, how long
	// the job took, and its error (Output empty on error: the outputs are
	// deleted).
	Output       []TableInfo
	BytesRead    uint64
	BytesWritten uint64
	Duration     time.Duration
	Err          error
}

// WriteStallBeginInfo says why writes stopped.
type WriteStallBeginInfo struct {
	Reason string // "memtable" or "L0"
}

// Write stall reasons (WriteStallBeginInfo.Reason, Metrics().Stalls.Reason).
const (
	StallMemTable = "memtable"
	StallL0       = "L0"
)

// WALInfo names a write-ahead log.
type WALInfo struct {
	FileNum FileNum
	Err     error // WALDeleted only: the deletion failed
}

// TableDeleteInfo names a deleted table.
type TableDeleteInfo struct {
	FileNum FileNum
	Err     error // the deletion failed
}

func tableInfo(m *manifest.FileMetadata) TableInfo {
	return TableInfo{FileNum: m.FileNum, Size: m.Size, Smallest: m.Smallest.UserKey, Largest: m.Largest.UserKey}
}

func tableInfos(ms []*manifest.FileMetadata) []TableInfo {
	out := make([]TableInfo, len(ms))
	for i, m := range ms {
		out[i] = tableInfo(m)
	}
	return out
}

// events returns the listener, never nil.
func (d *DB) events() *EventListener {
	if d.opts.EventListener == nil {
		return &noEvents
	}
	return d.opts.EventListener
}

var noEvents EventListener

// nextJobID numbers flush and compaction jobs for the events.
func (d *DB) nextJobID() int { return int(d.jobIDs.Add(1)) }

// reportBackgroundError tells the listener (and the log) about the error
// that stopped writes, once. Called without d.mu, after whoever set the
// error released it.
func (d *DB) reportBackgroundError() {
	d.mu.Lock()
	err := d.mu.bgErrUnreported
	d.mu.bgErrUnreported = nil
	d.mu.Unlock()
	if err == nil {
		return
	}
	d.opts.logger().Error("kv: writes stopped", "err", err)
	if f := d.events().BackgroundError; f != nil {
		f(err)
	}
}

// unlockReport releases d.mu and reports a background error set meanwhile.
func (d *DB) unlockReport() {
	pending := d.mu.bgErrUnreported != nil
	d.mu.Unlock()
	if pending {
		d.reportBackgroundError()
	}
}
