package kv

import (
	"errors"

	"github.com/warpkit/warpkit/internal/errs"
	"github.com/warpkit/warpkit/kv/internal/base"
)

// Error values. Compare with errors.Is; ErrClosed and ErrInvalidArgument are
// warpkit's shared values, so errors.Is(err, warpkit.ErrClosed) holds too.
var (
	// ErrNotFound: the key has no value (Get).
	ErrNotFound = errors.New("kv: not found")
	// ErrClosed: the DB, snapshot, batch or iterator was closed.
	ErrClosed = errs.ErrClosed
	// ErrInvalidArgument: bad options or arguments (an empty batch range is
	// not an error; a batch too large to log is).
	ErrInvalidArgument = errs.ErrInvalidArgument
	// ErrCorruption: stored data failed a checksum or is malformed. The error
	// is a *CorruptionError naming the file and offset.
	ErrCorruption = base.ErrCorruption
	// ErrWritesStopped: an earlier background or log error made the store
	// stop accepting writes (its on-disk state is consistent; reopen it).
	// The error wraps the original cause.
	ErrWritesStopped = errors.New("kv: writes stopped after an earlier error")
	// ErrLocked: another DB (in this or another process) has the directory
	// open: a writer, or (for a writer's Open) a read-only DB.
	ErrLocked = errors.New("kv: directory locked by another DB")
	// ErrReadOnly: a write, flush or compaction on a DB opened with
	// Options.ReadOnly.
	ErrReadOnly = errors.New("kv: store opened read-only")
)

// CorruptionError names a damaged file and offset; it matches ErrCorruption.
type CorruptionError = base.CorruptionError
