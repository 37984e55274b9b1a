package gpucompact

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/warpkit/warpkit/kv/compaction"
	"github.com/warpkit/warpkit/kv/internal/base"
)

// Options configure a Compactor. Zero fields take the defaults.
type Options struct {
	// Fallback runs the jobs the engine does not take and reruns the ones
	// it fails; default compaction.CPU{}.
	Fallback compaction.Compactor
	// MinInputBytes and MinInputTables are the decision module's threshold
	// (the paper's K): smaller jobs go to Fallback. Defaults 8 MiB and 0; a
	// negative MinInputBytes takes every job.
	MinInputBytes  int64
	MinInputTables int
	// Logger receives a line per fallback; nil discards them.
	Logger *slog.Logger
}

// DefaultMinInputBytes is MinInputBytes' default.
const DefaultMinInputBytes = 8 << 20

// ErrClosed is what Compact returns after Close.
var ErrClosed = errors.New("gpucompact: compactor closed")

// Compactor is a compaction.Compactor that runs large enough jobs through
// the pipeline (today its Go engine) and the rest on Options.Fallback. A
// job the engine fails — for any reason but the caller's context or damaged
// input — is rerun whole on Fallback before anything is installed (kv
// deletes the tables the failed attempt created), and counted.
type Compactor struct {
	opts Options

	mu struct {
		sync.Mutex
		closed bool
		stats  Stats
	}

	// failAt, in tests, makes the engine fail at a stage.
	failAt func(stage string) error
}

// Stats count a Compactor's work.
type Stats struct {
	// EngineJobs and EngineBytesRead count the jobs the engine finished and
	// their input bytes; FallbackJobs and FallbackBytesRead the jobs
	// Fallback ran (below the threshold, or after an engine failure).
	EngineJobs, EngineBytesRead     uint64
	FallbackJobs, FallbackBytesRead uint64
	// Fallbacks counts engine failures by stage ("load", "encode", ...).
	Fallbacks map[string]uint64
	// Stage times of the engine's jobs.
	Load, Merge, GC, Plan, Write time.Duration
}

// New returns a Compactor.
func New(opts Options) (*Compactor, error) {
	if opts.MinInputTables < 0 {
		return nil, fmt.Errorf("gpucompact: MinInputTables %d below 0", opts.MinInputTables)
	}
	if opts.Fallback == nil {
		opts.Fallback = compaction.CPU{}
	}
	if opts.MinInputBytes == 0 {
		opts.MinInputBytes = DefaultMinInputBytes
	}
	c := &Compactor{opts: opts}
	c.mu.stats.Fallbacks = map[string]uint64{}
	return c, nil
}

// Compact runs a job; see Compactor.
func (c *Compactor) Compact(ctx context.Context, job *compaction.Job) (*compaction.Result, error) {
	c.mu.Lock()
	closed := c.mu.closed
	c.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if !c.accepts(job) {
		return c.fallback(ctx, job, "")
	}
	var times stageTimes
	res, err := runGo(ctx, job, &times, c.failAt)
	switch {
	case err == nil:
		c.mu.Lock()
		st := &c.mu.stats
		st.EngineJobs++
		st.EngineBytesRead += res.Stats.BytesRead
		st.Load += times.load
		st.Merge += times.merge
		st.GC += times.gc
		st.Plan += times.plan
		st.Write += times.write
		c.mu.Unlock()
		return res, nil
	case ctx.Err() != nil:
		return nil, err
	case isCorruption(err):
		// Fallback would meet the same damage.
		return nil, err
	}
	stage := "engine"
	var se *stageError
	if errors.As(err, &se) {
		stage = se.stage
	}
	if l := c.opts.Logger; l != nil {
		l.Warn("gpucompact: engine failed, job falls back", "stage", stage, "err", err)
	}
	return c.fallback(ctx, job, stage)
}

// accepts is the decision module: the job is large enough for the engine.
func (c *Compactor) accepts(job *compaction.Job) bool {
	tables := 0
	for _, in := range job.Inputs {
		tables += len(in.Files)
	}
	if tables < c.opts.MinInputTables {
		return false
	}
	return c.opts.MinInputBytes < 0 || job.InputBytes() >= uint64(c.opts.MinInputBytes)
}

// fallback runs job on Fallback; reason is the failed stage ("" when the
// job was below the threshold).
func (c *Compactor) fallback(ctx context.Context, job *compaction.Job, reason string) (*compaction.Result, error) {
	res, err := c.opts.Fallback.Compact(ctx, job)
	if err == nil && reason != "" {
		res.Stats.Fallback = reason
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if reason != "" {
		c.mu.stats.Fallbacks[reason]++
	}
	if err == nil {
		c.mu.stats.FallbackJobs++
		c.mu.stats.FallbackBytesRead += res.Stats.BytesRead
	}
	return res, err
}

// Stats returns the counters so far.
func (c *Compactor) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.mu.stats
	st.Fallbacks = make(map[string]uint64, len(c.mu.stats.Fallbacks))
	for k, v := range c.mu.stats.Fallbacks {
		st.Fallbacks[k] = v
	}
	return st
}

// Close ends the Compactor: later jobs fail with ErrClosed. Close it after
// the store that uses it.
func (c *Compactor) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return ErrClosed
	}
	c.mu.closed = true
	return nil
}

// stageError is an engine failure at a stage.
type stageError struct {
	stage string
	err   error
}

func (e *stageError) Error() string { return fmt.Sprintf("gpucompact: %s: %v", e.stage, e.err) }
func (e *stageError) Unwrap() error { return e.err }

func isCorruption(err error) bool {
	var ce *base.CorruptionError
	return errors.As(err, &ce)
}
