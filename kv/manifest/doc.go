// Package manifest keeps the kv store's versions: which tables make up each
// level, and the counters that must survive a restart (next file number, last
// sequence number, oldest write-ahead log still needed).
//
// # On disk
//
// The MANIFEST-NNNNNN file is a record log (package record) of version
// edits; replaying every edit from an empty state gives the current version.
// CURRENT holds the name of the live manifest and a newline. A new manifest
// (written when the old one grows past a limit) starts with one edit that
// describes the whole current version; CURRENT is then replaced atomically:
// write NNNNNN.dbtmp, sync it, rename it over CURRENT, sync the directory.
//
// A version edit is a sequence of tagged fields, each a uvarint tag and its
// data (uvarints, and byte strings as uvarint length + bytes):
//
//	1  comparator      string  ("warpkit.bytewise"; checked on open)
//	2  log number      uvarint (WALs numbered below it are flushed)
//	3  next file num   uvarint
//	4  last sequence   uvarint
//	6  deleted file    level uvarint, file number uvarint
//	7  new file        level, file number, size, smallest (internal key
//	                   string), largest (internal key string), smallest seq,
//	                   largest seq, flags (bit 0: has range tombstones)
//	8  wal             uvarint: a write-ahead log the store created; logged
//	                   before any record is written to it
//	9  sealed wal      log number uvarint, size uvarint: the log is complete,
//	                   synced, and exactly this long
//	10 format          uvarint: 2 (FormatTracksWALs) in every snapshot edit
//
// In format 2 the manifest knows every log that may hold unflushed data: the
// logs recorded (tag 8) at or above the log number, each recorded before
// anything is written to it. The store keeps one spare log recorded ahead of
// time; after it switches to it, one edit seals the old log at its final size
// and records the next spare. A clean Close seals the last log and the spare.
// Open uses this to tell a crash's torn tail (only in an unsealed log: the
// one being written, and the one before it within the moment after a switch)
// from damage (anything short of a sealed size, a recorded log that is
// missing, or a non-empty log that is not recorded).
//
// An unknown tag is an error: edits have no per-field length, so a reader
// cannot skip what it does not understand.
//
// # Versions and file lifetime
//
// A Version is immutable. Readers (gets, iterators, compactions) hold a
// reference while they use it; every FileMetadata counts the versions that
// list it. When a version's last reference goes, the files only it listed
// become obsolete and are reported through the VersionSet's callback, which
// deletes them. So a table is deleted exactly when no version, and hence no
// reader, can reach it.
//
// Levels: L0 tables may overlap; they are ordered oldest first by largest
// sequence number. In L1 and below tables do not overlap and are ordered by
// smallest key. A table's bounds include its range tombstones; its largest
// key may be an exclusive sentinel (see base.TrailerRangeDelSentinel).
package manifest
