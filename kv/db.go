package kv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warpkit/warpkit/kv/cache"
	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/internal/memtable"
	"github.com/warpkit/warpkit/kv/internal/mergeiter"
	"github.com/warpkit/warpkit/kv/internal/rangedel"
	"github.com/warpkit/warpkit/kv/manifest"
	"github.com/warpkit/warpkit/kv/record"
	"github.com/warpkit/warpkit/kv/sstable"
	"github.com/warpkit/warpkit/kv/vfs"
)

// DB is an open store. All methods are safe for concurrent use.
type DB struct {
	dir    string
	opts   *Options
	fs     vfs.FS
	lock   io.Closer
	vs     *manifest.VersionSet
	tables *tableCache
	blocks *cache.Cache

	// visibleSeq is the sequence number of the newest write readers may see.
	visibleSeq atomic.Uint64
	// newest is the writer linked last into the commit pipeline's list (nil
	// when it is empty); pending holds the logged batches not yet visible,
	// in sequence order; commitInflight counts the logged writers that have
	// not finished (applied, published, done with their memtable); closing
	// is set when Close begins, so that new writers fail and the last of
	// the others wakes it (commit.go).
	// Each word every writer changes sits on a cache line of its own.
	_              cacheLinePad
	newest         atomic.Pointer[writer]
	_              cacheLinePad
	pending        pendingQueue
	commitInflight atomic.Int64
	closing        atomic.Bool
	// How commit waits and applies (commitMode, fixed at Open), the
	// writers in commit and those watching for an event (writer.await).
	commitSpins   int
	maxSpinners   int32
	leaderApplies bool
	_             cacheLinePad
	commitActive  atomic.Int64
	_             cacheLinePad
	spinners      atomic.Int32
	_             cacheLinePad

	// l0Misses counts the L0 tables reads looked in without settling
	// the read, since the last L0 compaction began; past l0MissBudget a
	// deferred L0 compaction is due (see scoreLocked).
	l0Misses, l0MissBudget atomic.Int64

	// flushBuf is writeL0's memory, kept from flush to flush: the entries
	// of the memtable it encodes in runs, and an encoder a run. writeL0
	// runs on one goroutine at a time (the flush loop; Open's recovery and
	// Repair before it starts); the mutex says so rather than trusts it.
	flushBuf struct {
		sync.Mutex
		entries []sstable.Entry
		encs    []*sstable.BlockEncoder
		blocks  []sstable.EncodedBlock // every run's blocks, for a compaction.BlockSealer
	}

	// spare receives the next log, created and recorded in the manifest
	// ahead of time (by Open, then in the background after each memtable
	// switch), so that a switch waits for neither a file creation nor a
	// manifest write. Read-write DBs only; holds one value between switches.
	spare chan spareLog

	// mu guards the fields in it, the Compacting marks of the current
	// version's tables and the state of the manual compactions. Methods
	// named ...Locked are called with it held. Exceptions: Open sets mem,
	// imm, wal and lastSeq before the DB is shared; the commit leader, the
	// only goroutine that changes wal, reads it without the lock, and so do
	// Close (once the commit queue is empty for good) and a failed Open.
	mu struct {
		sync.Mutex
		// cond is signalled when flushes, compactions or closing change
		// what writers (and Flush, WaitForCompactions, Close) wait for.
		cond sync.Cond

		mem *memtable.MemTable
		imm []*memtable.MemTable // oldest first; waiting to be flushed
		wal *walFile
		// closingLogs are the logs switched away from whose sync and close
		// are still running (rotateMemTableLocked), each true once its
		// memtable is flushed (the closer then removes it).
		closingLogs map[base.FileNum]bool
		lastSeq     base.SeqNum // last sequence number handed to a batch
		snapshots   snapshotList
		bgErr       error // sticky: stops writes
		// bgErrUnreported is bgErr until reportBackgroundError has told the
		// listener and the log (without d.mu held).
		bgErrUnreported error
		// stall is the write stall in progress (reason "" when none), for
		// Metrics and the stall events.
		stall struct {
			reason string
			start  time.Time
		}
		closed     bool
		flushing   bool
		compacting int
		// settling counts WaitForCompactions calls waiting: while one
		// waits, an L0 compaction waiting for more data is due.
		settling int
		manual   []*manualCompaction
	}

	// rs is the read state readers pin (loadReadState, under rsMu).
	// updateReadStateLocked replaces it holding both mu and rsMu, so code
	// holding mu may read it too while the DB is open; Close clears it
	// under rsMu alone, after setting mu.closed.
	rsMu sync.Mutex
	rs   *readState

	// tableTombs holds the range tombstones of live tables that have any,
	// each decoded once (tableTombstones): a new version reuses them instead
	// of reopening every such table the table cache has evicted. A table's
	// entry goes when the table is deleted.
	tableTombsMu sync.Mutex
	tableTombs   map[base.FileNum]*rangedel.Set

	// cleanMu serializes deleteObsolete (the cleaner's rounds and a
	// test's direct call).
	cleanMu        sync.Mutex
	obsoleteMu     sync.Mutex
	obsoleteTables []base.FileNum
	obsoleteFiles  []string // logs, manifests: deleted by the cleaner

	flushCh   chan struct{}
	compactCh chan struct{}
	cleanCh   chan struct{}
	bgCtx     context.Context
	bgCancel  context.CancelFunc
	bgWG      sync.WaitGroup

	jobIDs          atomic.Int64 // flush and compaction job numbers (events)
	openIters       atomic.Int64
	openTableIterFn mergeiter.OpenFunc // d.openTableIter, bound once
	m               metricsState
	recovery        recoveryReport // what Open found; fixed once Open returns

	// readHook, set only by tests before the DB is shared, runs in Get and
	// NewIter between pinning the read state and choosing the sequence
	// number to read at.
	readHook func()
}

// walFile is the live write-ahead log.
type walFile struct {
	num  base.FileNum
	file vfs.File
	w    *record.LogWriter
}

// spareLog is a log file created and recorded in the manifest, not yet
// written, or the error that kept it from being made (with the seal that
// was to be recorded with it, for the retry).
type spareLog struct {
	num    base.FileNum
	file   vfs.File
	err    error
	sealed *manifest.SealedWAL
}

// Open opens (or creates) the store in dir. It reads the manifest, checks it
// against the files present, and replays the logs it does not cover, but
// reads no table: tables are opened when a read needs them. The exception
// is range tombstones: the first iterator
// after Open reads (once per Open; the decoded tombstones stay in memory)
// the footer, index, properties and range-deletion block of every table
// holding range deletions, whatever the iterator's bounds, so a store with
// many such tables (tombstone-only ones included) pays a few small reads
// per table on its first scan.
//
// "Opening and recovery" in the package doc says what Open creates,
// refuses, keeps and deletes.
func Open(dir string, opts *Options) (*DB, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	d := &DB{
		dir:       dir,
		opts:      o,
		fs:        o.FS,
		flushCh:   make(chan struct{}, 1),
		compactCh: make(chan struct{}, 1),
		cleanCh:   make(chan struct{}, 1),

		tableTombs: map[base.FileNum]*rangedel.Set{},
	}
	d.mu.cond.L = &d.mu.Mutex
	d.mu.closingLogs = map[base.FileNum]bool{}
	d.commitSpins, d.maxSpinners, d.leaderApplies = commitModeFor(runtime.GOMAXPROCS(0))
	d.openTableIterFn = d.openTableIter
	d.mu.snapshots.init()
	d.blocks = o.Cache
	if d.blocks == nil {
		d.blocks = cache.New(o.BlockCacheSize)
	}
	var undo openUndo
	if err := d.open(&undo); err != nil {
		// Close what this Open opened, undo what it did while still
		// holding the lock, then release the lock.
		d.abandon()
		if !o.ReadOnly {
			undo.run(d.fs)
		}
		if d.lock != nil {
			d.lock.Close()
		}
		return nil, err
	}
	d.bgCtx, d.bgCancel = context.WithCancel(context.Background())
	if o.ReadOnly {
		return d, nil // no flushes, compactions or deletions
	}
	d.bgWG.Add(2 + o.MaxConcurrentCompactions)
	go d.flushLoop()
	go d.cleanLoop()
	for range o.MaxConcurrentCompactions {
		go d.compactLoop()
	}
	d.mu.Lock()
	d.maybeScheduleCompaction()
	d.mu.Unlock()
	return d, nil
}

// mkdirAllDurable creates dir and any missing parents, and makes their
// entries durable: it syncs the parent of dir (always, in case an earlier
// Open created dir and crashed before syncing) and of every ancestor it
// created. An ancestor that an earlier Open created, and crashed (the process,
// not the machine) before syncing, is not synced again: it exists, and only a
// machine crash before the file system writes it back could lose it.
//
// It returns the directories it created, deepest first, so that a failed
// Open can remove them again.
func mkdirAllDurable(fs vfs.FS, dir string) ([]string, error) {
	// dir and the ancestors MkdirAll will create, deepest first.
	var dirs []string
	if _, err := fs.Stat(dir); errors.Is(err, os.ErrNotExist) {
		dirs = append(dirs, dir)
	} else if err != nil {
		return nil, fmt.Errorf("kv: create %s: %w", dir, err)
	}
	for p := parentDir(fs, dir); p != "" && fs.PathBase(p) != ".."; p = parentDir(fs, p) {
		if _, err := fs.Stat(p); err == nil {
			break
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("kv: create %s: %w", dir, err)
		}
		dirs = append(dirs, p)
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("kv: create %s: %w", dir, err)
	}
	// Top down, so that each synced entry names a directory whose own
	// entry is already durable.
	synced := append([]string{dir}, dirs...)
	if len(dirs) > 0 && dirs[0] == dir {
		synced = dirs
	}
	for i := len(synced) - 1; i >= 0; i-- {
		parent := parentDir(fs, synced[i])
		if parent == "" {
			continue // a root has no entry to sync
		}
		if err := vfs.SyncDir(fs, parent); err != nil {
			return dirs, fmt.Errorf("kv: sync %s: %w", parent, err)
		}
	}
	return dirs, nil
}

// parentDir returns the directory containing dir: "." for a relative
// single-element path such as "mydb", and "" only for a root, which has no
// parent.
func parentDir(fs vfs.FS, dir string) string {
	p := fs.PathJoin(dir, "..")
	if p == "" || p == fs.PathJoin(dir) {
		return "" // "/" (or a volume root): its ".." is itself
	}
	return p
}

// abandon closes what a failed Open opened (not the lock: the caller undoes
// the Open's changes first).
func (d *DB) abandon() {
	if d.mu.wal != nil {
		d.mu.wal.w.Close()
		d.mu.wal.file.Close()
	}
	if d.spare != nil {
		select {
		case sp := <-d.spare:
			if sp.file != nil {
				sp.file.Close()
			}
		default:
		}
	}
	if d.rs != nil {
		d.rs.unref()
	}
	if d.vs != nil {
		d.vs.Close()
	}
	if d.tables != nil {
		d.tables.close()
	}
}

// Close waits for the running flush (a compaction in progress is
// cancelled), syncs and closes the log, and releases the directory. Writes
// not yet flushed stay in the log and are replayed by the next Open.
// Iterators and snapshots must be closed first; Close reports any that were
// not (and closes the store anyway). Close is idempotent: later calls return
// ErrClosed.
func (d *DB) Close() error {
	d.mu.Lock()
	if d.mu.closed {
		d.mu.Unlock()
		return ErrClosed
	}
	d.mu.closed = true
	d.closing.Store(true)
	d.mu.cond.Broadcast()
	// Wait for an in-flight commit group to finish with the log, and for
	// the writers of logged batches to finish with their memtables.
	for d.newest.Load() != nil || d.commitInflight.Load() > 0 {
		d.mu.cond.Wait()
	}
	d.mu.Unlock()

	d.bgCancel()
	d.signal(d.flushCh)
	d.signal(d.compactCh)
	d.signal(d.cleanCh)
	d.bgWG.Wait()

	var errs []error
	if d.mu.wal != nil {
		werr := d.mu.wal.w.Close()
		if werr != nil {
			errs = append(errs, fmt.Errorf("kv: close log: %w", werr))
		}
		if err := d.mu.wal.file.Close(); err != nil {
			errs = append(errs, fmt.Errorf("kv: close log: %w", err))
		}
		// A clean Close seals the log (and the spare, empty): the next Open
		// knows where they end, so damage anywhere in them is corruption,
		// not a crash's torn tail.
		seal := []manifest.SealedWAL{{Num: d.mu.wal.num, Size: d.mu.wal.w.Size()}}
		if sp := <-d.spare; sp.err == nil {
			sp.file.Close()
			seal = append(seal, manifest.SealedWAL{Num: sp.num, Size: 0})
		}
		d.mu.Lock()
		bgErr := d.mu.bgErr
		d.mu.Unlock()
		if werr == nil && bgErr == nil {
			if err := d.vs.LogAndApply(&manifest.VersionEdit{SealedWALs: seal}); err != nil {
				errs = append(errs, fmt.Errorf("kv: seal log %s: %w", d.mu.wal.num, err))
			}
		}
	}
	d.rsMu.Lock()
	rs := d.rs
	d.rs = nil
	d.rsMu.Unlock()
	rs.unref()
	d.deleteObsolete()
	if err := d.vs.Close(); err != nil {
		errs = append(errs, err)
	}
	d.tables.close()
	if d.lock != nil {
		if err := d.lock.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if n := d.openIters.Load(); n > 0 {
		errs = append(errs, fmt.Errorf("kv: Close with %d iterators still open", n))
	}
	d.mu.Lock()
	nsnaps := d.mu.snapshots.count()
	d.mu.Unlock()
	if nsnaps > 0 {
		errs = append(errs, fmt.Errorf("kv: Close with %d snapshots still open", nsnaps))
	}
	return errors.Join(errs...)
}

// signal wakes a background loop without blocking.
func (d *DB) signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// setBackgroundErrorLocked records the first error that stops writes.
func (d *DB) setBackgroundErrorLocked(err error) {
	if d.mu.bgErr == nil {
		d.mu.bgErr = err
		d.mu.bgErrUnreported = err // unlockReport tells the listener
	}
	d.mu.cond.Broadcast()
}

// writeStoppedErrLocked is the error writes return once bgErr is set.
func (d *DB) writeStoppedErrLocked() error {
	return fmt.Errorf("%w: %w", ErrWritesStopped, d.mu.bgErr)
}

// createLogs creates n new, empty logs and syncs the directory, so that
// their entries are durable. On error it removes what it created.
func (d *DB) createLogs(n int) ([]spareLog, error) {
	var out []spareLog
	fail := func(err error) ([]spareLog, error) {
		for _, l := range out {
			l.file.Close()
			d.removeFile(base.MakeFilename(base.FileTypeLog, l.num))
		}
		return nil, err
	}
	for range n {
		num := d.vs.NewFileNum()
		name := base.MakeFilename(base.FileTypeLog, num)
		f, err := d.fs.Create(d.fs.PathJoin(d.dir, name))
		if err != nil {
			return fail(fmt.Errorf("kv: create log %s: %w", name, err))
		}
		out = append(out, spareLog{num: num, file: f})
	}
	if err := vfs.SyncDir(d.fs, d.dir); err != nil {
		return fail(fmt.Errorf("kv: sync directory: %w", err))
	}
	if f := d.events().WALCreated; f != nil {
		for _, l := range out {
			f(WALInfo{FileNum: l.num})
		}
	}
	return out, nil
}

// prepareSpare creates the next log and records it in the manifest, together
// with the seal of the log just switched away from (if any), and hands it to
// the next memtable switch through d.spare. It runs in the background; the
// edit's order relative to a flush's does not matter (a flush only moves the
// log number past logs recorded before).
func (d *DB) prepareSpare(sealed *manifest.SealedWAL) {
	logs, err := d.createLogs(1)
	if err != nil {
		d.spare <- spareLog{err: err, sealed: sealed}
		return
	}
	sp := logs[0]
	e := &manifest.VersionEdit{WALs: []base.FileNum{sp.num}}
	if sealed != nil {
		e.SealedWALs = []manifest.SealedWAL{*sealed}
	}
	if err := d.vs.LogAndApply(e); err != nil {
		// The log stays: the edit may be durable. An unrecorded empty
		// log is deleted by the next Open. The manifest takes no more
		// edits: writes stop.
		sp.file.Close()
		err = fmt.Errorf("kv: record log %s in the manifest: %w", sp.num, err)
		d.mu.Lock()
		d.setBackgroundErrorLocked(err)
		d.unlockReport()
		d.spare <- spareLog{err: err}
		return
	}
	d.spare <- sp
}

// snapshotSeqsLocked returns the live snapshots' sequence numbers, ascending
// and without duplicates.
func (d *DB) snapshotSeqsLocked() []base.SeqNum {
	seqs := d.mu.snapshots.seqs()
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	out := seqs[:0]
	for i, s := range seqs {
		if i == 0 || s != seqs[i-1] {
			out = append(out, s)
		}
	}
	return out
}
