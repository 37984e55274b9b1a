// Package kv is a persistent, ordered key-value store: a log-structured
// merge tree in pure Go, in the manner of LevelDB and Pebble, built so that
// its compactions can move to the GPU (gLSM, Sun et al., ACM TOS 2024).
//
//	db, err := kv.Open(dir, nil)
//	err = db.Set([]byte("k"), []byte("v"), kv.Sync)
//	v, err := db.Get([]byte("k"))            // a copy; ErrNotFound if absent
//	it, err := db.NewIter(&kv.IterOptions{LowerBound: []byte("a")})
//	for k, v := range it.All() { ... }
//	err = it.Close()
//
// Keys and values are arbitrary byte strings (empty ones included), ordered
// bytewise. Nothing is reserved.
//
// # Contracts
//
// Concurrency: every DB and Snapshot method is safe for concurrent use.
// Batches and Iterators are owned by one goroutine at a time.
//
// Writes: Set, Delete, DeleteRange and Batch.Commit are atomic; a batch's
// operations become visible to readers together. With WriteOptions.Sync the
// write (and every write before it) is durable when the call returns;
// without it the write is in the operating system's hands promptly (the log
// flusher hands it over in the background) and survives a process crash but
// not necessarily a machine crash. Concurrent writers share log writes and
// fsyncs (group commit) and insert their batches into the memtable in
// parallel; a write returns once it and every write logged before it are
// visible, so a Get after a Set sees it. On machines of four or more
// processors a writer waiting for its turn watches for it for up to about
// 20 µs before it sleeps, and at most half the processors (a quarter when
// more writers than that are in flight) watch at once. Writes stall, visibly in Metrics, when memtable
// flushes or L0 compactions fall behind: writes stop at 12 L0 tables or when
// memtables wait for flush (and, with Options.L0SlowdownWritesThreshold,
// each write is delayed 1 ms from that many L0 tables: LevelDB's slowdown).
// Metrics().Stalls says whether writes are stopped now and why ("memtable"
// or "L0"), how many stalls there have been and how long writes were held
// up in all (slowdowns included).
//
// Events: Options.EventListener receives flush and compaction begin/end
// (job id, inputs, outputs, bytes, duration, error), write stall begin/end
// (stops only, not the 1 ms slowdowns), the error that stops writes, and the
// creation and deletion of logs and deletion of tables. Every begin has
// exactly one end, also when the job fails or Close interrupts it, and the
// end comes before the Flush, Compact or WaitForCompactions call waiting for
// the job returns. Callbacks run synchronously on the goroutine doing the
// work, without the DB's lock held; they must not call into the DB.
//
// Logging: the store prints nothing; Options.Logger (log/slog) receives the
// error that stops writes (Error), write stalls (Warn when one begins, Info
// when it ends), failed deletions and what recovery or repair skipped or
// moved to lost/ (Warn), and a summary of each flush and compaction
// (Debug). It too is called without the DB's lock held.
//
// Contexts: Compact(ctx, start, end) and WaitForCompactions(ctx) return
// ctx.Err() promptly when ctx ends. A cancelled Compact starts no further
// compaction job and cancels the running one, whose outputs are deleted and
// inputs kept, as after any failed job, but writes go on; jobs that
// finished stay installed. WaitForCompactions only stops waiting.
//
// Reads: Get returns a copy of the value, which the caller owns. An
// Iterator reads a consistent state (the one at its creation, or its
// snapshot's); its Key and Value slices are valid until the next move or
// Close. A Snapshot pins a sequence number: compactions keep what it can see,
// so close it when done. Iterators pin the tables and memtables they read:
// close them promptly.
//
// Errors: ErrNotFound, ErrClosed (use after Close), ErrInvalidArgument (bad
// options, or a batch made by another DB), ErrCorruption (a *CorruptionError
// naming the damaged file and offset), ErrLocked (the directory is open
// elsewhere), ErrReadOnly (a write, Flush or Compact on a read-only DB), ErrWritesStopped (after a log, flush, manifest or compaction
// failure writes stop and reads go on; the on-disk state stays consistent and
// a reopen recovers). ErrClosed and ErrInvalidArgument are warpkit's shared
// error values.
//
// # Storage
//
// A write goes to the write-ahead log (package record: 32 KiB blocks,
// CRC-32C per chunk) and then to the memtable, a lock-free skiplist in an
// arena. A full memtable becomes immutable and a background goroutine writes
// it to an L0 table (package sstable: prefix-compressed blocks with restart
// points, index block, bloom filter at 10 bits per key, properties, CRC-32C
// per block, optional Snappy or S2). Leveled compaction keeps L1 and below
// sorted and disjoint: L0 is compacted into the base level at 4 tables once
// it holds as many bytes as the base level (or 6 tables, half the stop
// threshold; sooner when reads keep looking in its tables, as LevelDB's seek
// compactions; Options.EagerL0Compactions: at 4 tables), a deeper level
// when it exceeds its target size, picking the table of least overlap with
// the level below. Targets follow the data (RocksDB's dynamic
// level bytes, as Pebble): the last level's target is its size, each level
// above holds 10× less, and the base level is the deepest whose target stays
// at LBaseMaxBytes, so a young store is L0 plus the last level and the levels
// in between fill as it grows (Options.StaticLevelSizes: LevelDB's L1 =
// LBaseMaxBytes, then ×10 per level); outputs
// are cut at TargetFileSize (4 MiB, gLSM's setting), measured before
// compression as TargetFileSize × the inputs' compression ratio (clamped to
// 1..16, 1 for uncompressed stores), so that where outputs end does not
// depend on how their blocks compress, and past half that size where a table
// of the next level begins (compaction.Cutter), so that compacting an output
// further rewrites only the tables it covers. Compactions drop
// overwritten and deleted entries that no live snapshot can see and apply
// range tombstones. The Compactor interface (package compaction) takes the
// input tables and the live snapshots' sequence numbers and produces output
// tables; compaction.CPU is the merge used by default. A Compactor that is
// also a compaction.BlockSealer (kv/gpucompact with SealFlushes) seals the
// data blocks of memtable flushes as well: a flush then encodes its runs
// raw and has them sealed in one batch (the table's bytes are the same). Up to
// MaxConcurrentCompactions jobs run at once on disjoint levels and key ranges
// (by default GOMAXPROCS/8, 1 to 4), and compaction.CPU splits a job with
// enough input into key-range parts merged in parallel (subcompactions: cut
// at user keys, they write the same entries as one part would, and install
// in one version edit).
//
// The version set (package manifest) logs every change of the table set to
// the MANIFEST; CURRENT names the live manifest and is replaced atomically.
// A table or log is deleted only when no version, and so no reader, can use
// it. Data blocks go through a block cache (byte limit), open tables through
// a table cache (handle limit). All file access goes through package vfs.
//
// # Opening and recovery
//
// Open never destroys data. It creates a new store only in a directory with
// no CURRENT and no file of a store (CURRENT, LOCK, MANIFEST-*, OPTIONS*,
// *.log, *.sst, *.ldb, *.dbtmp, canonical or not), or one holding only what
// an interrupted creation of this store leaves (LOCK, empty logs, a manifest
// of an empty store): files of a store without a readable CURRENT are
// ErrCorruption naming them, and nothing is written. A failed Open of a new
// store removes what it created, except LOCK (an empty file: removing a lock
// file another process may be about to take would let two writers in; no
// LevelDB-family store removes it) and so the directory holding it.
//
// Before writing anything, Open proves the manifest consistent with the
// files present: every table it lists exists with its recorded size, and
// every log it records as holding unflushed writes exists. If not, Open
// fails with ErrCorruption naming what is missing and changes nothing. It
// then replays the logs into new L0 tables, moves unexplained files (below)
// to lost/ and starts a new manifest; only when CURRENT names the new
// manifest (the commit point) does it delete anything. A failed Open undoes
// its moves and removes what it created, so every file that was there is as
// it was — with one exception: if the rename of CURRENT succeeded and only
// the directory sync after it failed, the new manifest may already be the
// live one, and the Open keeps the consistent state it committed.
//
// Files: the store removes only files whose names it makes (six or more
// zero-padded digits: 000005.sst, not 5.sst) and that are provably
// obsolete: tables no version lists numbered below the manifest's next file
// number, logs below its log number or replayed into tables, old manifests
// and temporary files. A table that no version lists numbered at or above
// the next file number is unexplained (the output of a flush or compaction a
// crash interrupted, or of a manifest edit that was lost): Open moves it to
// the lost/ subdirectory, before its commit point, and lists it in
// Metrics().Recovery.Unexplained; the store never deletes anything in lost/
// (it never needs those files: after a crash they are redundant copies;
// delete them when `warp kv check` has shown the store sound, or move one
// back for kv.Repair). A non-empty log the manifest does not record proves
// that the manifest lost an edit (the store records a log before writing to
// it): Open refuses with ErrCorruption, and Repair replays it. Every other
// file is left alone.
//
// Logs: the manifest records every log before anything is written to it
// (the store keeps one spare log recorded ahead of time, so that switching
// logs waits for no manifest write), and seals it with its final size: a log
// the store switched away from is synced, closed and sealed in the
// background right after the switch (writes go on meanwhile into the next
// log, whose file receives nothing until the old one is synced, and a
// synced write in it waits for that sync too: a log's torn end still ends
// the sequence; should that sync fail, writes stop within the next
// memtable, and those made into the new log meanwhile, acknowledged but
// not synced, are not kept: a reopen holds a prefix of the writes, every
// synced one among it), and the last log at a clean Close. A sealed log must be exactly
// that long and undamaged; anything else is corruption: WALStrict (the
// default) fails naming the log and offset, WALSalvage skips the damaged
// records, keeps every intact one and reports each skipped region in
// Metrics().Recovery. After a crash the log being written is unsealed (and
// so is the one before it if the crash came within the moment between a
// switch and its seal). An unsealed log's unfinished tail (a record cut
// short, or zeros to the end of the file) is the end of a write the crash
// interrupted and is ignored, and counted, if no later log holds records;
// damage followed by intact records is corruption as above. What the store
// cannot know: it does not record how far an unsealed log was synced (that
// would cost a manifest write per sync), so damage to the last record of an
// unsealed log reads as a torn tail, and a record acknowledged as synced
// just before the crash is dropped if a later fault damaged exactly it.
//
// ReadOnly opens an existing store without writing, creating or removing
// anything (the directory may be on a read-only mount): logs are replayed
// into memory, a shared lock on LOCK admits other read-only DBs but no
// writer, and writes return ErrReadOnly. A store without a LOCK file (a copy
// no writer has opened since) is read without a lock, since a read-only
// Open creates nothing: a writer opening it meanwhile is not excluded.
//
// Repair (explicit, never run by Open) rebuilds a damaged store from the
// tables and logs present: it ignores the manifest, verifies every table
// (moving damaged ones to lost/), replays every log with salvage, merges
// everything into the bottom level and writes a new manifest.
//
// # Departures from gLSM and LevelDB
//
// gLSM's contribution is the GPU compaction path; this package builds the
// store around it with a CPU compactor, and keeps the compaction boundary
// narrow so that a GPU compactor can replace compaction.CPU. Departures from
// LevelDB: a full-table bloom filter (as Pebble and RocksDB) instead of
// per-2-KiB filters; range tombstones (LevelDB has none), stored in their own
// block and fragmented; a background log flusher (as Pebble) instead of a
// write(2) per commit; no seek-triggered compactions; level targets that
// follow the data and a min-overlapping-ratio picker (as RocksDB and Pebble)
// instead of a fixed geometry and round-robin; the recovered memtable is
// always flushed at open.
package kv
