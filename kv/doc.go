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
// fsyncs (group commit). Writes stall, visibly in Metrics, when memtable
// flushes or L0 compactions fall behind: each write is delayed 1 ms at 8 L0
// tables and writes stop at 12 L0 tables or when memtables wait for flush.
//
// Reads: Get returns a copy of the value, which the caller owns. An
// Iterator reads a consistent state (the one at its creation, or its
// snapshot's); its Key and Value slices are valid until the next move or
// Close. A Snapshot pins a sequence number: compactions keep what it can see,
// so close it when done. Iterators pin the tables and memtables they read:
// close them promptly.
//
// Errors: ErrNotFound, ErrClosed (use after Close), ErrInvalidArgument (bad
// options), ErrCorruption (a *CorruptionError naming the damaged file and
// offset), ErrWritesStopped (after a log, flush, manifest or compaction
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
// sorted and disjoint: L0 is compacted at 4 tables, a deeper level when it
// exceeds its target size (L1: LBaseMaxBytes, then ×10 per level); outputs
// are cut at TargetFileSize (4 MiB, gLSM's setting). Compactions drop
// overwritten and deleted entries that no live snapshot can see and apply
// range tombstones. The Compactor interface (package compaction) takes the
// input tables and the live snapshots' sequence numbers and produces output
// tables; compaction.CPU is the merge used by default.
//
// The version set (package manifest) logs every change of the table set to
// the MANIFEST; CURRENT names the live manifest and is replaced atomically.
// A table or log is deleted only when no version, and so no reader, can use
// it. Data blocks go through a block cache (byte limit), open tables through
// a table cache (handle limit). All file access goes through package vfs.
//
// # Recovery
//
// Open replays the logs the manifest does not cover. The unfinished tail
// of the last log that holds records (a write a crash cut short, or zeros up
// to the end of the file) is the end of the log and is ignored; damage
// followed by intact records, in the same log or in a later one, is an error
// naming the log and offset, unless Options.WALRecovery is WALSalvage, which
// skips the damaged records and keeps the rest.
//
// # Departures from gLSM and LevelDB
//
// gLSM's contribution is the GPU compaction path; this package builds the
// store around it with a CPU compactor, and keeps the compaction boundary
// narrow so that a GPU compactor can replace compaction.CPU. Departures from
// LevelDB: a full-table bloom filter (as Pebble and RocksDB) instead of
// per-2-KiB filters; range tombstones (LevelDB has none), stored in their own
// block and fragmented; a background log flusher (as Pebble) instead of a
// write(2) per commit; no seek-triggered compactions; the recovered memtable
// is always flushed at open.
package kv
