package kv

import (
	"fmt"
	"log/slog"
	"runtime"

	"github.com/warpkit/warpkit/kv/cache"
	"github.com/warpkit/warpkit/kv/compaction"
	"github.com/warpkit/warpkit/kv/sstable"
	"github.com/warpkit/warpkit/kv/vfs"
)

// WALRecovery chooses what Open does with a damaged write-ahead log.
type WALRecovery int

const (
	// WALStrict (the default) ignores a torn tail of the last log that
	// holds records (the unfinished end of a write that a crash cut short:
	// a record cut short, or zeros up to the end of the file, as a file
	// system that extended the file or preallocated space leaves them) and
	// fails on any other damage with a *CorruptionError naming the log and
	// offset: damage followed by intact records, or a torn end of a log
	// followed by a log with records (a log is synced whole before the next
	// one is written).
	WALStrict WALRecovery = iota
	// WALSalvage skips damaged records, keeps every intact record after
	// them, and reports what it skipped in Metrics().Recovery. Batches are
	// applied whole or not at all, but a skipped batch may have been followed
	// by later ones that are kept.
	WALSalvage
)

// Options configure a DB. The zero value of every field means its default;
// Open fills defaults into a copy, never into the caller's struct.
type Options struct {
	// FS is the file system; default vfs.Default.
	FS vfs.FS
	// ErrorIfNotExists makes Open fail when the store does not exist
	// (by default it is created).
	ErrorIfNotExists bool
	// ErrorIfExists makes Open fail when the store exists.
	ErrorIfExists bool
	// ReadOnly opens an existing store for reading only: Open writes,
	// creates and removes nothing (the directory may be on a read-only
	// mount), replays the logs into memory, and takes a shared lock, so that
	// several read-only DBs, in this process or others, may open one store
	// but none beside a writer. Writes, Flush and Compact return ErrReadOnly;
	// no flush, compaction or file deletion ever runs.
	ReadOnly bool

	// MemTableSize is the write buffer size; default 4 MiB (gLSM's setting).
	MemTableSize int
	// MemTableStopWritesThreshold stops writes while this many memtables
	// (the mutable one included) wait to be flushed; default 2.
	MemTableStopWritesThreshold int

	// L0CompactionThreshold: L0 is compacted at this many tables; default 4.
	// Unless EagerL0Compactions is set, an L0 compaction also waits until L0
	// holds as many bytes as the base level or half L0StopWritesThreshold
	// tables (at most two short of L0SlowdownWritesThreshold): each one
	// rewrites the base level tables it
	// overlaps (with keys spread at random, all of them), so one carrying
	// less than the base level holds rewrites more than it moves down.
	// Reads make L0 due, at any number of tables, once Gets have looked in
	// its tables without result once per 16 KiB an L0 compaction would
	// move (LevelDB's seek-compaction cost); WaitForCompactions ends the
	// wait for bytes.
	L0CompactionThreshold int
	// EagerL0Compactions compacts L0 as soon as it holds
	// L0CompactionThreshold tables, whatever their size (LevelDB's rule):
	// fewer L0 tables for reads to check, more base-level rewrites.
	EagerL0Compactions bool
	// L0SlowdownWritesThreshold: each write is delayed by 1 ms at this many
	// L0 tables (LevelDB's slowdown). Default: none (L0StopWritesThreshold;
	// a value at or above it means none), as Pebble: on the device host's 16
	// cores the delays, spread over thousands of writes, cost 4 KiB-value
	// fills 15% of their rate and put 1 ms into their 99th percentile
	// (2.4-2.5 ms against 0.45-0.47 ms without), and on 2 cores 6% of the
	// rate, where stopping the few writes that reach L0StopWritesThreshold
	// costs less.
	L0SlowdownWritesThreshold int
	// L0StopWritesThreshold: writes stop at this many L0 tables; default 12.
	L0StopWritesThreshold int
	// LBaseMaxBytes is the target size of the base level, the one L0
	// compacts into. Default 16 MiB (L0CompactionThreshold × MemTableSize,
	// so that an L0 compaction and the base level are of a size).
	LBaseMaxBytes int64
	// LevelMultiplier is the size ratio between levels; default 10.
	LevelMultiplier int
	// StaticLevelSizes selects LevelDB's level geometry: L0 compacts into
	// L1, whose target is LBaseMaxBytes, and each deeper level's target is
	// LevelMultiplier times the one above. By default the geometry follows
	// the data, as RocksDB's dynamic level bytes and Pebble: the last level's
	// target is its size, each level above holds LevelMultiplier times less,
	// and L0 compacts into the deepest level whose target is at most
	// LBaseMaxBytes (so a small store is L0 plus one or two levels, and
	// writes are rewritten fewer times). Stores written with either setting
	// open with the other; their levels move toward its shape as they
	// compact.
	StaticLevelSizes bool
	// TargetFileSize is the stored size of compaction outputs; default 4
	// MiB. Outputs are cut on their size before compression, at
	// TargetFileSize × the inputs' compression ratio (package compaction).
	TargetFileSize int64
	// MaxGrandparentOverlap limits how much of the next-but-one level a
	// compaction output may overlap; default 10 × TargetFileSize.
	MaxGrandparentOverlap int64
	// MaxConcurrentCompactions bounds background compactions; default
	// DefaultCompactions(): GOMAXPROCS/8, at least 1 and at most 4 (two on
	// 16 cores, where it measured best; docs/benchmarks.md). Flushes run on
	// their own goroutine besides, and each compaction may split into
	// parallel parts (see Compactor).
	MaxConcurrentCompactions int
	// FlushWorkers is how many goroutines a flush encodes and compresses
	// its table's data blocks on: the memtable's entries are cut into that
	// many runs of about equal size, each encoded on its own goroutine
	// (sstable.BlockEncoder), and the blocks written in order. Default
	// DefaultFlushWorkers(); 1 writes the table entry by entry on the flush
	// goroutine, as do memtables under 512 KiB (a run takes 256 KiB or more).
	FlushWorkers int
	// BytesPerSync starts the writeback of a table being written (a
	// flush's or a compaction's) every this many bytes
	// (vfs.NewSyncingFile: sync_file_range on Linux; nothing on other
	// systems or file systems), so that its final Sync has little left to
	// write and a compaction's dirty pages do not pile up ahead of a
	// flush's sync, which stopped writes may be waiting for: RocksDB's and
	// Pebble's bytes_per_sync. Default 512 KiB (theirs); -1: none (the data
	// reaches the device at the table's Sync, or when the kernel chooses).
	// Logs are not range-synced.
	BytesPerSync int64
	// Compactor merges tables; default compaction.CPU{}, which splits a job
	// with enough input into key-range parts merged in parallel
	// (subcompactions: up to min(GOMAXPROCS, 8) parts of at least twice
	// TargetFileSize each).
	Compactor compaction.Compactor

	// BlockSize is the uncompressed data block size; default 4096.
	BlockSize int
	// BlockRestartInterval is the number of keys between restart points;
	// default 16.
	BlockRestartInterval int
	// BloomBitsPerKey sets the bloom filter size; default 10, negative for
	// no filter.
	BloomBitsPerKey int
	// Compression of data blocks; default Snappy. Set NoCompression
	// explicitly with DisableCompression.
	Compression sstable.Compression
	// DisableCompression stores data blocks uncompressed.
	DisableCompression bool

	// Cache is the block cache; it may be shared by several DBs. Nil gives
	// the DB its own of BlockCacheSize bytes.
	Cache *cache.Cache
	// BlockCacheSize is the size of the DB's own block cache; default 32 MiB.
	BlockCacheSize int64
	// MaxOpenFiles bounds the table cache (open table readers); default 1000.
	MaxOpenFiles int

	// WALRecovery chooses how Open treats damaged logs; default WALStrict.
	WALRecovery WALRecovery
	// MaxManifestSize starts a new manifest past this size; default 8 MiB.
	MaxManifestSize int64
	// EventListener, when set, receives flush, compaction, write stall,
	// background error and file events (see EventListener).
	EventListener *EventListener
	// Logger receives the store's log: at Error the error that stops
	// writes; at Warn write stalls beginning, failed deletions and what
	// recovery and repair skipped, ignored or moved to lost/; at Info the
	// end of each write stall; at Debug a summary of each flush and
	// compaction. Nil logs nothing (the library prints nothing itself). It
	// is called without the DB's lock held.
	Logger *slog.Logger
}

// WriteOptions control one write.
type WriteOptions struct {
	// Sync makes the write durable (fsync of the write-ahead log) before it
	// returns. Without it a write survives a process crash once the log
	// flusher has handed it to the OS (promptly, in the background), but may
	// be lost in a machine crash. A synced write also makes every earlier
	// write durable.
	Sync bool
}

// Sync and NoSync are ready-made WriteOptions.
var (
	Sync   = &WriteOptions{Sync: true}
	NoSync = &WriteOptions{Sync: false}
)

func (o *WriteOptions) sync() bool { return o != nil && o.Sync }

// IterOptions bound an iterator: it sees keys in [LowerBound, UpperBound).
// Nil bounds are open.
type IterOptions struct {
	LowerBound []byte
	UpperBound []byte
}

// withDefaults returns a copy with every default filled in, or an error
// naming the first inconsistent setting.
func (o *Options) withDefaults() (*Options, error) {
	var c Options
	if o != nil {
		c = *o
	}
	if c.FS == nil {
		c.FS = vfs.Default
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def64 := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.MemTableSize, 4<<20)
	def(&c.MemTableStopWritesThreshold, 2)
	def(&c.L0CompactionThreshold, 4)
	def(&c.L0StopWritesThreshold, 12)
	def(&c.L0SlowdownWritesThreshold, c.L0StopWritesThreshold)
	def64(&c.LBaseMaxBytes, int64(c.L0CompactionThreshold)*int64(c.MemTableSize))
	def(&c.LevelMultiplier, 10)
	def64(&c.TargetFileSize, 4<<20)
	def64(&c.MaxGrandparentOverlap, 10*c.TargetFileSize)
	def(&c.MaxConcurrentCompactions, DefaultCompactions())
	def(&c.FlushWorkers, DefaultFlushWorkers())
	def64(&c.BytesPerSync, 512<<10)
	def(&c.BlockSize, 4096)
	def(&c.BlockRestartInterval, 16)
	def(&c.BloomBitsPerKey, 10)
	def64(&c.BlockCacheSize, 32<<20)
	def(&c.MaxOpenFiles, 1000)
	def64(&c.MaxManifestSize, 8<<20)
	if c.Compression == sstable.NoCompression && !c.DisableCompression {
		c.Compression = sstable.SnappyCompression
	}
	if c.DisableCompression {
		c.Compression = sstable.NoCompression
	}
	if c.Compactor == nil {
		c.Compactor = compaction.CPU{}
	}
	switch {
	case c.MemTableSize < 64<<10:
		return nil, fmt.Errorf("%w: MemTableSize %d below 64 KiB", ErrInvalidArgument, c.MemTableSize)
	case c.MemTableSize > 1<<30:
		return nil, fmt.Errorf("%w: MemTableSize %d above 1 GiB", ErrInvalidArgument, c.MemTableSize)
	case c.MemTableStopWritesThreshold < 2:
		return nil, fmt.Errorf("%w: MemTableStopWritesThreshold %d below 2", ErrInvalidArgument, c.MemTableStopWritesThreshold)
	case c.L0CompactionThreshold < 1 || c.L0SlowdownWritesThreshold < c.L0CompactionThreshold || c.L0StopWritesThreshold < c.L0SlowdownWritesThreshold:
		return nil, fmt.Errorf("%w: L0 thresholds must satisfy 1 <= compaction (%d) <= slowdown (%d) <= stop (%d)",
			ErrInvalidArgument, c.L0CompactionThreshold, c.L0SlowdownWritesThreshold, c.L0StopWritesThreshold)
	case c.LevelMultiplier < 2:
		return nil, fmt.Errorf("%w: LevelMultiplier %d below 2", ErrInvalidArgument, c.LevelMultiplier)
	case c.TargetFileSize < 4<<10:
		return nil, fmt.Errorf("%w: TargetFileSize %d below 4 KiB", ErrInvalidArgument, c.TargetFileSize)
	case c.LBaseMaxBytes < 16<<10:
		return nil, fmt.Errorf("%w: LBaseMaxBytes %d below 16 KiB", ErrInvalidArgument, c.LBaseMaxBytes)
	case c.MaxConcurrentCompactions < 1:
		return nil, fmt.Errorf("%w: MaxConcurrentCompactions %d", ErrInvalidArgument, c.MaxConcurrentCompactions)
	case c.FlushWorkers < 1 || c.FlushWorkers > maxFlushWorkers:
		return nil, fmt.Errorf("%w: FlushWorkers %d out of [1, %d]", ErrInvalidArgument, c.FlushWorkers, maxFlushWorkers)
	case c.BytesPerSync != -1 && (c.BytesPerSync < 4<<10 || c.BytesPerSync > 1<<30):
		return nil, fmt.Errorf("%w: BytesPerSync %d: want -1 (none) or 4 KiB to 1 GiB", ErrInvalidArgument, c.BytesPerSync)
	case c.BlockSize < 256 || c.BlockSize > 16<<20:
		return nil, fmt.Errorf("%w: BlockSize %d out of [256, 16 MiB]", ErrInvalidArgument, c.BlockSize)
	case c.BlockRestartInterval < 1:
		return nil, fmt.Errorf("%w: BlockRestartInterval %d", ErrInvalidArgument, c.BlockRestartInterval)
	case c.MaxOpenFiles < 16:
		return nil, fmt.Errorf("%w: MaxOpenFiles %d below 16", ErrInvalidArgument, c.MaxOpenFiles)
	case c.WALRecovery != WALStrict && c.WALRecovery != WALSalvage:
		return nil, fmt.Errorf("%w: WALRecovery %d", ErrInvalidArgument, c.WALRecovery)
	case c.ErrorIfExists && c.ErrorIfNotExists:
		return nil, fmt.Errorf("%w: ErrorIfExists and ErrorIfNotExists both set", ErrInvalidArgument)
	}
	switch c.Compression {
	case sstable.NoCompression, sstable.SnappyCompression, sstable.S2Compression:
	default:
		return nil, fmt.Errorf("%w: compression %v", ErrInvalidArgument, c.Compression)
	}
	return &c, nil
}

func (o *Options) writerOptions() sstable.WriterOptions {
	bits := o.BloomBitsPerKey
	if bits < 0 {
		bits = 0
	}
	return sstable.WriterOptions{
		BlockSize:       o.BlockSize,
		RestartInterval: o.BlockRestartInterval,
		BloomBitsPerKey: bits,
		Compression:     o.Compression,
		// The Writer compresses each block on its own goroutine (no
		// CompressionWorkers); flushes spread their encoding over
		// goroutines a run of entries each (FlushWorkers, writeL0)
		// instead. Blocks of 4 KiB compress in microseconds, less than
		// handing each to another goroutine costs: on the device host's 16
		// cores, with 4 workers, a 4 MiB table took 5.9-6.3 ms against
		// 3.6-5.1 sequentially (BenchmarkFlushTable), and the stores'
		// flushes 18-33 ms against 13-23, so sequential flushes ran
		// fillrandom 1.2-1.4x faster and halved the stall time
		// (docs/benchmarks.md, "flushes on one goroutine").
	}
}

// logger returns the Logger, or one that discards everything.
func (o *Options) logger() *slog.Logger {
	if o.Logger == nil {
		return discardLogger
	}
	return o.Logger
}

var discardLogger = slog.New(slog.DiscardHandler)

// DefaultFlushWorkers is the default of Options.FlushWorkers: GOMAXPROCS/4,
// at least 1 and at most 4 (four on 16 cores).
func DefaultFlushWorkers() int { return min(max(runtime.GOMAXPROCS(0)/4, 1), 4) }

// maxFlushWorkers bounds Options.FlushWorkers.
const maxFlushWorkers = 64

// DefaultCompactions is the default of Options.MaxConcurrentCompactions:
// GOMAXPROCS/8, clamped to 1..4.
func DefaultCompactions() int { return min(max(runtime.GOMAXPROCS(0)/8, 1), 4) }
