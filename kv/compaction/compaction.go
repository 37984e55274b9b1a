// Package compaction is the boundary between the kv store and whatever
// merges its tables. The store picks a compaction (input tables from one or
// two adjacent levels, the live snapshots, the output level) and hands it to a
// Compactor as a Job; the Compactor reads the inputs, merges them, and writes
// new tables through the Job's Env. The store then installs the outputs and
// retires the inputs in one version edit.
//
// CPU is the first Compactor: a k-way heap merge on the CPU. A GPU compactor
// (gLSM, Sun et al., ACM TOS 2024: decode, radix-sort and deduplicate key
// batches on the device, encode blocks back) implements the same interface.
//
// # What a compactor must do
//
// The merged output must read exactly like the inputs at every live snapshot
// and at the newest state:
//
//   - Group the inputs' entries by user key. Snapshots cut each key's history
//     into stripes: an entry with sequence number q belongs to stripe
//     i = the number of snapshots below q. Within a stripe only the newest
//     entry is visible to anyone; drop the others.
//   - Drop an entry covered by a range tombstone of the same stripe with a
//     larger sequence number.
//   - Drop a point tombstone in stripe 0 when Job.ElideTombstone says no
//     table below the output level can hold the key; likewise range
//     tombstones (per fragment, ElideRangeTombstone). Keep one range
//     tombstone per fragment and stripe (the newest).
//   - Write outputs in key order, never splitting one user key's entries
//     across two tables. End an output before a new user key when Cutter
//     says so, given its uncompressed size (sstable.Writer.RawSize: data
//     blocks before compression, trailers included, plus the open block)
//     and the cut limit L = TargetFileSize × r, where r is the job's ratio
//     (CutRatio: the inputs' summed RawDataSize over their summed DataSize,
//     clamped to [1, 16]; 1 when the outputs are uncompressed or the inputs
//     predate the property): at the first key at or past the start of a
//     table of the level below the output level (a grandparent) once the
//     size has reached half of L (plus 5% for each such boundary already
//     passed, at most 90%), at L when no boundary is left, at 2L always, and
//     whenever the output would overlap more than MaxGrandparentOverlap
//     bytes of grandparents. Outputs then store about TargetFileSize bytes
//     and end where the grandparents begin (so that compacting one further
//     down rewrites only the grandparents it covers), and where they are
//     cut does not depend on how their blocks compress: blocks may be
//     compressed in parallel, and every compactor cuts the same job at the
//     same keys.
//     Each output holds the tombstone fragments of its key interval, so that
//     outputs do not overlap.
//   - Sync and close every output; return their metadata in key order.
//
// On error the compactor returns it; the store deletes every table the job
// created and keeps the inputs.
package compaction

import (
	"bytes"
	"context"
	"errors"
	"sort"
	"time"

	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/manifest"
	"github.com/warpkit/warpkit/kv/sstable"
	"github.com/warpkit/warpkit/kv/vfs"
)

// Compactor merges a job's input tables into output tables.
type Compactor interface {
	Compact(ctx context.Context, job *Job) (*Result, error)
}

// BlockSealer is what a Compactor may also offer the store's memtable
// flushes: sealing (compressing and checksumming) the data blocks a flush
// has encoded (sstable.BlockEncoder.EncodeRaw), where that costs the host
// less than sealing them itself — kv/gpucompact seals them on its GPU. The
// store uses it when its Compactor implements it.
//
// SealBlocks sets every block's Sealed to what sstable.SealBlock(c, nil,
// block.Raw) returns, byte for byte, and returns release, which the
// caller calls once it no longer reads the sealed bytes (they may live in
// the sealer's memory until then). An error means that no block was taken
// as sealed (their Sealed are left nil) and that the caller seals them
// itself: a sealer declines what it cannot seal (a compression it does
// not do, a closed or disabled engine) with ErrNotSealed.
type BlockSealer interface {
	// SealsBlocks reports whether SealBlocks would seal blocks compressed
	// with c now: a flush asks before it encodes (and seals its blocks on
	// its own goroutines when not).
	SealsBlocks(c sstable.Compression) bool
	SealBlocks(ctx context.Context, c sstable.Compression, blocks []sstable.EncodedBlock) (release func(), err error)
}

// ErrNotSealed is a BlockSealer's decline: the caller seals the blocks.
var ErrNotSealed = errors.New("compaction: blocks not sealed")

// Input is one level's share of a compaction.
type Input struct {
	Level int
	// Files: for L0, every overlapping table (they may overlap each other);
	// for L1 and below, sorted and disjoint.
	Files []*manifest.FileMetadata
}

// Env gives a compactor access to the store's files.
type Env struct {
	// OpenTable returns a reader for an input table; call release when done
	// with it (readers are shared with the store's table cache; do not Close
	// them).
	OpenTable func(*manifest.FileMetadata) (r *sstable.Reader, release func(), err error)
	// OpenTableFile opens an input table's file for raw reads, for
	// compactors that decode blocks themselves (a GPU compactor ships whole
	// tables to the device; the format is in package sstable's doc). The
	// caller closes it. Input tables are immutable and stay on disk until
	// the compaction ends.
	OpenTableFile func(*manifest.FileMetadata) (vfs.File, error)
	// CreateTable allocates a file number and creates the table file. It
	// is safe for concurrent use, and fails once Compact has returned.
	CreateTable func() (base.FileNum, vfs.File, error)
	// WriterOptions configure output tables.
	WriterOptions sstable.WriterOptions
}

// Job is one compaction.
type Job struct {
	Inputs      []Input // upper level first
	OutputLevel int
	// Snapshots are the live snapshots' sequence numbers, ascending.
	Snapshots []base.SeqNum
	// Lower lists, for each level below OutputLevel, its tables (sorted): a
	// tombstone may only be elided where none of them can hold the key.
	Lower [][]*manifest.FileMetadata
	// Grandparents are the tables of level OutputLevel+1 that overlap the
	// inputs (sorted).
	Grandparents          []*manifest.FileMetadata
	TargetFileSize        uint64
	MaxGrandparentOverlap uint64
	Env                   Env
}

// Stats describe a finished compaction.
type Stats struct {
	BytesRead        uint64 // input table bytes
	BytesWritten     uint64 // output table bytes
	EntriesIn        uint64 // point entries read
	EntriesOut       uint64 // point entries written
	TombstonesElided uint64 // point tombstones dropped at the bottom
	RangeDelsDropped uint64 // range tombstone entries dropped
	Duration         time.Duration
	// Engine names what ran the job when a compactor has several ("" for
	// compaction.CPU; kv/gpucompact: "go", or its fallback's "" after a
	// failure). Fallback, when not empty, says why an accelerated engine
	// gave the job up (the stage that failed).
	Engine, Fallback string
}

// Result lists the outputs, in key order.
type Result struct {
	Outputs []*manifest.FileMetadata
	Stats   Stats
}

// StripeOf returns the snapshot stripe of sequence number q: the number of
// snapshots below q.
func StripeOf(snapshots []base.SeqNum, q base.SeqNum) int {
	return sort.Search(len(snapshots), func(i int) bool { return snapshots[i] >= q })
}

// ElideTombstone reports whether no table below the output level can hold
// user key k, so a tombstone for k visible to every snapshot can be dropped.
func (j *Job) ElideTombstone(k []byte) bool {
	for _, files := range j.Lower {
		i := sort.Search(len(files), func(i int) bool { return files[i].Overlaps(k, nil) })
		if i < len(files) && files[i].ContainsUserKey(k) {
			return false
		}
	}
	return true
}

// ElideRangeTombstone reports whether no table below the output level meets
// [start, end).
func (j *Job) ElideRangeTombstone(start, end []byte) bool {
	for _, files := range j.Lower {
		for _, f := range files {
			if f.Overlaps(start, nil) && bytes.Compare(f.Smallest.UserKey, end) < 0 {
				return false
			}
		}
	}
	return true
}

// InputBytes sums the input tables' sizes.
func (j *Job) InputBytes() uint64 {
	var n uint64
	for _, in := range j.Inputs {
		for _, f := range in.Files {
			n += f.Size
		}
	}
	return n
}
