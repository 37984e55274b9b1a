package gpucompact

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/kv/compaction"
	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/sstable"
)

// Options configure a Compactor. Zero fields take the defaults.
type Options struct {
	// Backend picks the engine: CUDA (the device decodes, merges, collects
	// garbage, sizes the entries and encodes the output blocks; New fails
	// without a device), CPU (the Go engine) or Auto (the default: CUDA when
	// a device is present, else the Go engine).
	Backend warpkit.Backend
	// Device is the device of the CUDA engine; nil: New opens device 0
	// (and Close closes it). The caller keeps a device it passes.
	Device *cuda.Device
	// MaxDeviceBytes bounds the device memory the CUDA engine may hold for
	// a job, as estimated from the input tables' properties (about twice
	// the inputs' uncompressed size plus 136 bytes per entry); a job over
	// it runs in key-range partitions that fit (see MemoryBudget), and one
	// the device runs out of memory for goes to Fallback ("budget").
	// Default half the device's free memory at New; negative: no limit.
	MaxDeviceBytes int64
	// PinnedBytes bounds the page-locked host memory the CUDA engine keeps
	// for a job (for each of the two partitions a partitioned job runs at
	// once: each has arrays of its own): its arrays that the device copies
	// to and from, its ring, and its staging. Arrays past it stay in
	// ordinary memory and travel through the ring, ChunkBytes at a time in
	// two slots (the host fills or empties one while the device copies the
	// other), which costs the host a copy of their bytes: a job whose
	// arrays fit copies them straight by DMA. Pinned memory is memory the
	// system cannot page or reclaim. Default DefaultPinnedBytes; negative:
	// no limit (every array pinned, no ring).
	PinnedBytes int64
	// ChunkBytes is the size of each of the ring's two slots (default
	// DefaultChunkBytes; at least 64 KiB).
	ChunkBytes int64
	// Fallback runs the jobs the engine does not take and reruns the ones
	// it fails; default compaction.CPU{}.
	Fallback compaction.Compactor
	// MinInputBytes and MinInputTables are the decision module's threshold
	// (the paper's K): smaller jobs go to Fallback. Defaults: 1 MiB for
	// the CUDA engine (DefaultMinInputBytesCUDA), 8 MiB for the Go engine
	// (DefaultMinInputBytes), and 0 tables; a negative MinInputBytes takes
	// every job.
	MinInputBytes  int64
	MinInputTables int
	// MemoryBudget bounds the memory the engine may use for one job, as
	// estimated from the input tables' properties before it starts (about
	// 5 times the inputs' uncompressed size plus 200 bytes per entry: what
	// the engine allocates in all, so an upper bound of what it holds). A
	// job over it — or over MaxDeviceBytes, or past 4 GiB of contents (the
	// engine's 32-bit offsets) — runs in key-range partitions cut at input
	// block boundaries, with the same output as in one piece
	// (Stats.PartitionedJobs): two at a time (one prepared while the last
	// one writes: the engine then holds a second set of arrays, and each
	// partition fits half the budgets) or, when the job does not cut so,
	// one at a time. One that cannot be cut to fit (a block too large, or
	// budgets too small to hold a few output tables a partition) goes to
	// Fallback ("budget"), as does one whose partition, holding no whole
	// output table, would have to widen past them. Default
	// DefaultMemoryBudget; negative: no limit.
	MemoryBudget int64
	// Engines is how many jobs the engine runs at once (default 1): each
	// has arrays of its own (host, pinned and device memory: Stats.
	// HeldBytes and DeviceHeldBytes are their sum; MemoryBudget and
	// MaxDeviceBytes bound each job, so the engine may hold Engines times
	// them) and, on the CUDA engine, a stream of its own. More let the engine take jobs that would
	// otherwise go to Fallback while it is busy, at the price of that
	// memory; the host's stages of concurrent jobs share the cores.
	Engines int
	// HostWorkers bounds the goroutines each of a job's host stages splits
	// its work over: reading and decompressing the inputs (and, on the Go
	// engine, decoding, merging and collecting them), the checks the host
	// decides, the sealers of the output blocks, and the output tables
	// written at once (twice HostWorkers, at least 2). The stages still
	// overlap one another (the walk, the device's encoding and the writers
	// run beside the sealers), so a job may keep a few more goroutines busy
	// than HostWorkers. Fewer leave cores to the store's other work (or
	// other processes) and make a job slower where the host's stages bound
	// it (docs/benchmarks.md). Default GOMAXPROCS (0); negative is an
	// error. Fallback's jobs are its own (compaction.CPU.Parts).
	HostWorkers int
	// WhenBusy says what a job does when the engine is running another:
	// wait for it when, at the rates measured so far, the jobs ahead and
	// the job itself would end on the engine before the job alone would on
	// Fallback, else go to Fallback (WaitWhenFaster, the default); always
	// go to Fallback (FallbackWhenBusy: with several concurrent
	// compactions the engine and Fallback then run side by side, the
	// paper's collaboration); or always wait (WaitWhenBusy).
	WhenBusy BusyPolicy
	// MaxEngineFailures consecutive engine failures (not counting damaged
	// input or a cancelled context) turn the engine off for the life of the
	// Compactor: every later job runs on Fallback, and Stats.Disabled says
	// so. Default 3; negative: never.
	MaxEngineFailures int
	// Logger receives a line per fallback; nil discards them.
	Logger *slog.Logger

	// Sort is how the CUDA engine orders a job's entries: SortMerge (the
	// default: the sorted runs merged pairwise, prim's merge path, in
	// ceil(log2 runs) rounds) or SortRadix (the paper's: an LSD radix sort
	// of whole keys — the trailer, the key's length, then every 8 bytes
	// past the job's common prefix, last first — that ignores the runs'
	// order). Outputs are the same; SortRadix is slower and is for
	// measurement (the paper's Fig. 16(c)). The Go engine always merges.
	Sort SortMode
	// MoveValues is an ablation, for measurement (the paper's Table 2): the
	// CUDA engine copies every entry's value into a new array, in the new
	// order, after each merge round (or radix pass), as an engine without
	// key-value separation moves them. Outputs are unchanged.
	MoveValues bool
	// SealFlushes makes the Compactor a store's flush sealer as well
	// (compaction.BlockSealer, SealBlocks): a kv store whose Compactor it
	// is hands it the data blocks of its memtable flushes, and the CUDA
	// engine's device compresses and checksums them when the tables are
	// Snappy and Sealing would seal a job's blocks there (the same bytes as
	// the host's). Under CPU stress that leaves the host's processors to
	// the store's writers. Off by default.
	SealFlushes bool
	// Sealing is where the CUDA engine compresses and checksums Snappy
	// output blocks (under 16 KiB; larger ones always on the host): on the
	// device by default, with s2's encoder byte for byte (outputs are
	// unchanged). On the device a Snappy job takes less than half the
	// host's CPU a GB and runs as fast on an idle host, faster the busier
	// the host's cores (1.15-1.8x at 80% CPU stress: docs/benchmarks.md).
	Sealing Sealing
}

// Sealing is where the CUDA engine seals (compresses and checksums) Snappy
// output blocks (Options.Sealing).
type Sealing int

const (
	// SealAuto, the default: on the device where this build's s2 Snappy
	// encoder writes the bytes the device does (its amd64 assembly
	// encoder), else on the host (other architectures, the noasm tag).
	SealAuto Sealing = iota
	// SealOnHost seals on the host's sealers, as the Go engine does.
	SealOnHost
	// SealOnDevice seals on the device; New fails with
	// errors.ErrUnsupported where the host's encoder writes other bytes.
	SealOnDevice
)

// SortMode is how the CUDA engine orders a job's entries (Options.Sort).
type SortMode int

const (
	// SortMerge merges the job's sorted runs (the default).
	SortMerge SortMode = iota
	// SortRadix radix-sorts the job's entries by their whole keys.
	SortRadix
)

// String returns "merge" or "radix".
func (m SortMode) String() string {
	switch m {
	case SortMerge:
		return "merge"
	case SortRadix:
		return "radix"
	}
	return fmt.Sprintf("SortMode(%d)", int(m))
}

// slot is one job's worth of the engine: its workspace and, for the CUDA
// engine, its device side (stream, device arrays); and, once a job ran in
// partitions two at a time, a second such lane (lane2).
type slot struct {
	ws                     *workspace
	dev                    *devEngine // nil: the Go engine
	lane2                  *lane      // nil until a partitioned job needs it
	held, devHeld, pinHeld int64      // what it keeps, as of its last job
}

// lanes returns the slot's lanes for a partitioned job: its own, and a
// second (made on first use) when n is 2 and it can be had.
func (s *slot) lanes(n int) []*lane {
	lanes := []*lane{{ws: s.ws, dev: s.dev}}
	if n < 2 {
		return lanes
	}
	if s.lane2 == nil {
		l := &lane{ws: &workspace{}}
		if s.dev != nil {
			d, err := newDevEngine(s.dev.dev, false, s.dev.opts)
			if err != nil {
				return lanes // (one lane: partitions sized for two fit it)
			}
			l.dev = d
		}
		s.lane2 = l
	}
	return append(lanes, s.lane2)
}

// heldBytes returns the host, device and pinned host memory the slot
// keeps.
func (s *slot) heldBytes() (host, dev, pinned int64) {
	host = int64(s.ws.bytes())
	pinned = s.ws.pinnedBytes()
	if s.dev != nil {
		dev = s.dev.heldBytes()
		pinned += s.dev.pinnedBytes()
	}
	if l := s.lane2; l != nil {
		host += int64(l.ws.bytes())
		pinned += l.ws.pinnedBytes()
		if l.dev != nil {
			dev += l.dev.heldBytes()
			pinned += l.dev.pinnedBytes()
		}
	}
	return host, dev, pinned
}

// dropLane2 frees the second lane (and closes its stream).
func (s *slot) dropLane2() {
	if l := s.lane2; l != nil {
		if l.dev != nil {
			l.dev.release()
		}
		l.ws.free()
		if l.dev != nil {
			l.dev.close()
		}
		s.lane2 = nil
	}
}

// drop frees the slot's memory, the device's first (its stream
// synchronized, so that no copy into the pinned arrays is in flight), and
// closes its stream; with keep it stays usable (its arrays come back with
// the next job), else it is done. The second lane goes either way.
func (s *slot) drop(keep bool) {
	s.dropLane2()
	if s.dev != nil {
		s.dev.release()
	}
	s.ws.free()
	s.ws = &workspace{}
	s.held, s.devHeld, s.pinHeld = 0, 0, 0
	if !keep && s.dev != nil {
		s.dev.close()
		s.dev = nil
	}
}

// BusyPolicy is what a job does when the engine is busy (Options.WhenBusy).
type BusyPolicy int

const (
	// WaitWhenFaster (the default) waits for the engine when that is
	// expected to end the job sooner than Fallback would: the input bytes
	// of the jobs the engine runs (less what their time so far has done)
	// and of those waiting, and the job's own, at the engine's rate so far
	// (bytes read per second of its jobs; the work ahead shared among the
	// Engines slots), against the job's bytes at Fallback's rate (of its
	// jobs of at least MinInputBytes). Before the
	// engine has finished a job it does not wait; before Fallback has run
	// one, it takes Fallback to be 4 times slower than the engine. On the
	// H200 a store's fills ran up to 14% faster under CPU stress than with
	// FallbackWhenBusy (docs/benchmarks.md).
	WaitWhenFaster BusyPolicy = iota
	// FallbackWhenBusy runs the job on Fallback.
	FallbackWhenBusy
	// WaitWhenBusy waits for the engine (or the job's context).
	WaitWhenBusy
)

// Defaults of Options.
const (
	DefaultMinInputBytes = 8 << 20
	// DefaultMinInputBytesCUDA is the CUDA engine's threshold: from jobs of
	// a quarter MiB the H100 engine outruns compaction.CPU with and without
	// subcompactions and the Go engine (docs/benchmarks.md, the job-size
	// sweep: 2.9x compaction.CPU at 1 MB); 1 MiB leaves the smallest jobs,
	// where it gains least, to the CPU while the engine is busy.
	DefaultMinInputBytesCUDA = 1 << 20
	DefaultMemoryBudget      = 2 << 30
	DefaultMaxEngineFailures = 3
	// DefaultPinnedBytes bounds the pinned memory of a job (Options.
	// PinnedBytes): the default job of warp bench kvcompact (56 MB of
	// input) pins 161 MB, a job of 1 GiB 2.2 GB.
	DefaultPinnedBytes = 1 << 30
	DefaultChunkBytes  = 16 << 20
)

// ErrClosed is what Compact returns after Close.
var ErrClosed = errors.New("gpucompact: compactor closed")

// Compactor is a compaction.Compactor that runs jobs through the pipeline
// (its CUDA engine or its Go engine: Options.Backend) when its decision
// module takes them, and the rest on Options.Fallback. The engine takes a
// job when it is large enough (MinInputBytes, MinInputTables), fits
// MemoryBudget and MaxDeviceBytes in one piece or in key-range partitions,
// and the engine is on (MaxEngineFailures) and free (WhenBusy). A job the engine fails — for
// any reason but the caller's context or damaged input — is rerun whole on
// Fallback before anything is installed (kv deletes the tables the failed
// attempt created), and counted.
type Compactor struct {
	opts Options
	// engine holds the idle engine slots (Options.Engines of them): a job
	// takes one while it runs, and with it the slot's arrays, kept between
	// jobs.
	engine chan *slot
	done   chan struct{} // closed by Close: jobs waiting for a slot give up
	cuda   bool          // the CUDA engine (else the Go engine)
	dev    *cuda.Device  // the CUDA engine's device
	ownDev *cuda.Device  // the device New opened: closed with the last slot after Close

	mu struct {
		sync.Mutex
		closed   bool
		busy     int     // slots taken by jobs
		slots    []*slot // every slot not dropped, for the stats
		failures int     // consecutive engine failures
		stats    Stats
		// For WaitWhenFaster: the engine's jobs running (their input bytes
		// and starts) and the bytes of the jobs waiting for it; the bytes
		// and time of Fallback's jobs of at least MinInputBytes.
		running       map[*slot]runningJob
		waiting       uint64
		fallbackBytes uint64
		fallbackTime  time.Duration
		// sealer seals flushes' blocks (SealBlocks); made on first use,
		// freed by Close. sealerPinned and sealerDevice are the memory it
		// kept after its last batch.
		sealer                     *flushSealer
		sealerPinned, sealerDevice int64
	}

	// failAt, in tests, makes the engine fail at a stage; the encoders call
	// it too ("encode"), concurrently.
	failAt func(stage string) error
}

// Stats count a Compactor's work.
type Stats struct {
	// EngineJobs and EngineBytesRead count the jobs the engine finished and
	// their input bytes; FallbackJobs and FallbackBytesRead the jobs
	// Fallback ran (declined, or after an engine failure).
	EngineJobs, EngineBytesRead     uint64
	FallbackJobs, FallbackBytesRead uint64
	// PartitionedJobs counts the engine's jobs that were past its budgets
	// (MemoryBudget, MaxDeviceBytes, 4 GiB of contents) and ran in
	// key-range partitions, Partitions the partitions they ran in.
	PartitionedJobs, Partitions uint64
	// Declined counts the jobs the decision module sent to Fallback, by
	// reason: "small" (under MinInputBytes or MinInputTables), "budget"
	// (over MemoryBudget, MaxDeviceBytes or the engine's 4 GiB and not cut
	// into partitions that fit: a single block too large, or a partition in
	// which no output table starts after its first widened past the
	// budgets; or out of device memory while it ran), "busy" (the engine was
	// running another job), "disabled" (the engine is off) and
	// "irregular" (found while the job ran: input entries out of order, or
	// an input block the CUDA engine cannot decode by restart interval).
	Declined map[string]uint64
	// Fallbacks counts engine failures by stage ("load", "encode", ...).
	Fallbacks map[string]uint64
	// Engine is the engine's name: "cuda" or "go".
	Engine string
	// Disabled says the engine is off: MaxEngineFailures consecutive
	// failures, or a device error that left the CUDA context unusable
	// (cuda.Error.Sticky: a kernel fault, a lost context), turned it off.
	Disabled bool
	// EngineTime and FallbackTime are the wall time of the jobs the engine
	// and Fallback finished.
	EngineTime, FallbackTime time.Duration
	// HeldBytes is the memory the engine keeps between jobs: its arrays,
	// sized by the largest job so far (under MemoryBudget), reused by the
	// next job instead of asking the system for fresh memory. Close drops
	// them. DeviceHeldBytes is the CUDA engine's device memory kept the
	// same way, PinnedBytes its page-locked host memory (the arrays among
	// HeldBytes that live there, its rings and staging: Options.PinnedBytes
	// bounds each job's). All three count the flush sealer's memory too
	// (Options.SealFlushes: a flush's blocks and their sealed bytes,
	// pinned, and its device arrays), which PinnedBytes does not bound.
	HeldBytes, DeviceHeldBytes, PinnedBytes int64
	// Stage times of the engine's jobs.
	Load, Merge, GC, Sizes, Plan, Write time.Duration
	// The CUDA engine's device batches, which run beside the plan and the
	// write stage: Encode is the time its device goroutine spent in them
	// (the blocks' encoding, sealing and filters, the copies back and the
	// waits), EncodeBatches how many there were, and WriteTail the time
	// from the end of each job's last batch to the end of the job (the host
	// writing what that batch brought back).
	Encode, WriteTail time.Duration
	EncodeBatches     uint64
	// FlushSeals counts the batches of flushed blocks the device sealed
	// (Options.SealFlushes), FlushSealedBlocks their blocks; a failed one
	// counts in Fallbacks as stage "flush seal".
	FlushSeals, FlushSealedBlocks uint64
}

// New returns a Compactor.
func New(opts Options) (*Compactor, error) {
	if opts.MinInputTables < 0 {
		return nil, fmt.Errorf("gpucompact: MinInputTables %d below 0", opts.MinInputTables)
	}
	if opts.WhenBusy != FallbackWhenBusy && opts.WhenBusy != WaitWhenBusy && opts.WhenBusy != WaitWhenFaster {
		return nil, fmt.Errorf("gpucompact: unknown WhenBusy %d", opts.WhenBusy)
	}
	if opts.Sort != SortMerge && opts.Sort != SortRadix {
		return nil, fmt.Errorf("gpucompact: unknown Sort %d", opts.Sort)
	}
	if opts.Sealing != SealAuto && opts.Sealing != SealOnHost && opts.Sealing != SealOnDevice {
		return nil, fmt.Errorf("gpucompact: unknown Sealing %d", opts.Sealing)
	}
	if opts.Fallback == nil {
		opts.Fallback = compaction.CPU{}
	}
	minInputBytesDefault := opts.MinInputBytes == 0
	if opts.MemoryBudget == 0 {
		opts.MemoryBudget = DefaultMemoryBudget
	}
	if opts.MaxEngineFailures == 0 {
		opts.MaxEngineFailures = DefaultMaxEngineFailures
	}
	if opts.Engines < 0 {
		return nil, fmt.Errorf("gpucompact: Engines %d below 0", opts.Engines)
	}
	if opts.Engines == 0 {
		opts.Engines = 1
	}
	if opts.HostWorkers < 0 {
		return nil, fmt.Errorf("gpucompact: %w: HostWorkers %d below 0", warpkit.ErrInvalidArgument, opts.HostWorkers)
	}
	if opts.PinnedBytes == 0 {
		opts.PinnedBytes = DefaultPinnedBytes
	}
	if opts.ChunkBytes == 0 {
		opts.ChunkBytes = DefaultChunkBytes
	}
	if opts.ChunkBytes < 64<<10 || opts.ChunkBytes > 1<<30 {
		return nil, fmt.Errorf("gpucompact: %w: ChunkBytes %d outside [64 KiB, 1 GiB]", warpkit.ErrInvalidArgument, opts.ChunkBytes)
	}
	c := &Compactor{opts: opts, engine: make(chan *slot, opts.Engines), done: make(chan struct{})}
	c.mu.stats.Engine = "go"
	dev := opts.Device
	if dev == nil {
		var err error
		if dev, err = warpkit.OpenDevice(opts.Backend, 0); err != nil {
			return nil, fmt.Errorf("gpucompact: %w", err)
		}
		c.ownDev = dev
	} else if opts.Backend == warpkit.CPU {
		dev = nil
	}
	fail := func(err error) (*Compactor, error) {
		for _, s := range c.mu.slots {
			s.drop(false)
		}
		if c.ownDev != nil {
			c.ownDev.Close()
		}
		return nil, err
	}
	if dev != nil && opts.Sealing == SealOnDevice && !hostSealsAsDevice() {
		return fail(fmt.Errorf("gpucompact: SealOnDevice: %w: this build's s2 Snappy encoder is not the amd64 assembly one whose bytes the device writes (another architecture, or the noasm tag)", errors.ErrUnsupported))
	}
	for range opts.Engines {
		s := &slot{ws: &workspace{}}
		if dev != nil {
			d, err := newDevEngine(dev, false, opts)
			if err != nil {
				return fail(err)
			}
			s.dev = d
		}
		c.mu.slots = append(c.mu.slots, s)
		c.engine <- s
	}
	if dev != nil {
		c.cuda, c.dev = true, dev
		c.mu.stats.Engine = "cuda"
		if c.opts.MaxDeviceBytes == 0 {
			free, _, err := dev.MemInfo()
			if err != nil {
				return fail(fmt.Errorf("gpucompact: %w", err))
			}
			c.opts.MaxDeviceBytes = int64(free / 2 / uint64(opts.Engines))
		}
	}
	if minInputBytesDefault {
		c.opts.MinInputBytes = DefaultMinInputBytes
		if c.cuda {
			c.opts.MinInputBytes = DefaultMinInputBytesCUDA
		}
	}
	c.mu.stats.Fallbacks = map[string]uint64{}
	c.mu.stats.Declined = map[string]uint64{}
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
	declined, sl, plan, err := c.decide(ctx, job)
	if err != nil {
		return nil, err
	}
	if declined != "" {
		return c.fallback(ctx, job, "", declined)
	}
	c.mu.Lock()
	if c.mu.closed { // Close while the job waited for the engine (WaitWhenBusy)
		c.retireLocked(sl)
		c.mu.Unlock()
		return nil, ErrClosed
	}
	if c.mu.stats.Disabled { // turned off while the job waited for it
		c.engine <- sl // (room: the slot came from it)
		c.mu.Unlock()
		return c.fallback(ctx, job, "", "disabled")
	}
	c.mu.busy++
	started := time.Now()
	if c.mu.running == nil {
		c.mu.running = map[*slot]runningJob{}
	}
	c.mu.running[sl] = runningJob{bytes: job.InputBytes(), start: started}
	c.mu.Unlock()
	var times stageTimes
	var res *compaction.Result
	parts := 0
	if plan != nil {
		lanes := sl.lanes(plan.lanes)
		for _, l := range lanes {
			l.ws.workers = c.opts.HostWorkers
		}
		res, parts, err = runPartitioned(ctx, job, plan, lanes, &times, c.failAt)
	} else {
		sl.ws.workers = c.opts.HostWorkers
		res, err = runEngine(ctx, job, sl.ws, sl.dev, &times, c.failAt)
	}
	if plan == nil || plan.lanes < 2 {
		// A job in one lane may grow it to the whole budgets: the second
		// lane's arrays go, so that the slot keeps no more than them.
		sl.dropLane2()
	}
	c.mu.Lock()
	c.mu.busy--
	delete(c.mu.running, sl)
	if err != nil {
		// The job failed (it may have sized the arrays from damaged
		// input): drop the slot's arrays now.
		sl.drop(true)
	} else {
		sl.held, sl.devHeld, sl.pinHeld = sl.heldBytes()
	}
	if c.mu.closed {
		c.retireLocked(sl)
	} else {
		c.engine <- sl // (room: the slot came from it)
	}
	c.sumHeldLocked()
	c.mu.Unlock()
	switch {
	case err == nil:
		c.mu.Lock()
		st := &c.mu.stats
		c.mu.failures = 0
		st.EngineJobs++
		st.EngineBytesRead += res.Stats.BytesRead
		st.EngineTime += time.Since(started)
		if plan != nil {
			st.PartitionedJobs++
			st.Partitions += uint64(parts)
		}
		times.addTo(st)
		c.mu.Unlock()
		return res, nil
	case ctx.Err() != nil:
		return nil, err
	case isCorruption(err):
		// Fallback would meet the same damage.
		return nil, err
	case errors.Is(err, errTooLarge), errors.Is(err, errOverBudget), errors.Is(err, cuda.ErrOutOfMemory):
		// Past the engine's 32-bit offsets, the budgets (a partition that
		// had to widen past them), or the device's memory (the arrays are
		// freed above): a decline, not a failure.
		return c.fallback(ctx, job, "", "budget")
	case errors.Is(err, errIrregularBlock), errors.Is(err, errInputOrder), errors.Is(err, errPartitionEntries):
		// Input the engine does not take (laid out otherwise than the
		// writer lays it out, or out of order): a decline, not a failure.
		return c.fallback(ctx, job, "", "irregular")
	}
	stage := "engine"
	var se *stageError
	if errors.As(err, &se) {
		stage = se.stage
	}
	c.engineFailed(err, "gpucompact: engine failed, job falls back", "stage", stage)
	return c.fallback(ctx, job, stage, "")
}

// engineFailed counts a failure of the engine (a job's, or a flush seal's),
// turns the engine off after MaxEngineFailures in a row or a device error
// that leaves the device unusable, and logs msg with args and err.
func (c *Compactor) engineFailed(err error, msg string, args ...any) {
	c.mu.Lock()
	c.mu.failures++
	failures := c.mu.failures
	disable := !c.mu.stats.Disabled && (c.opts.MaxEngineFailures > 0 && failures >= c.opts.MaxEngineFailures || deviceFatal(err))
	if disable {
		c.mu.stats.Disabled = true
	}
	c.mu.Unlock()
	if l := c.opts.Logger; l != nil {
		l.Warn(msg, append(args, "err", err)...)
		if disable {
			l.Error("gpucompact: engine off (consecutive failures, or a device error); every later job runs on the fallback", "failures", failures)
		}
	}
}

// decide is the decision module. It returns why the job goes to Fallback,
// or "" with an engine slot taken (the caller gives it back) and, for a
// job past the engine's budgets, how to cut it into partitions.
func (c *Compactor) decide(ctx context.Context, job *compaction.Job) (string, *slot, *partitionPlan, error) {
	tables := 0
	for _, in := range job.Inputs {
		tables += len(in.Files)
	}
	if tables < c.opts.MinInputTables || c.opts.MinInputBytes >= 0 && job.InputBytes() < uint64(c.opts.MinInputBytes) {
		return "small", nil, nil, nil
	}
	c.mu.Lock()
	disabled := c.mu.stats.Disabled
	c.mu.Unlock()
	if disabled {
		return "disabled", nil, nil, nil
	}
	// Past a budget, the job runs in key-range partitions (partition.go),
	// planned once it has the engine (planJob).
	size, err := memoryEstimate(job)
	over := err == nil && !c.fits(job, size) // (else the engine meets the error, and reports it as compaction.CPU would)
	withPlan := func(sl *slot) (string, *slot, *partitionPlan, error) {
		if !over {
			return "", sl, nil, nil
		}
		plan := c.planJob(job)
		if plan == nil {
			c.mu.Lock()
			if c.mu.closed { // (Close has retired the idle slots: this one goes too)
				c.retireLocked(sl)
			} else {
				c.engine <- sl // (room: the slot came from it)
			}
			c.mu.Unlock()
			return "budget", nil, nil, nil
		}
		return "", sl, plan, nil
	}
	select {
	case sl := <-c.engine:
		return withPlan(sl)
	default:
	}
	switch c.opts.WhenBusy {
	case FallbackWhenBusy:
		return "busy", nil, nil, nil
	case WaitWhenFaster:
		bytes := job.InputBytes()
		c.mu.Lock()
		wait := c.waitFasterLocked(bytes)
		if wait {
			c.mu.waiting += bytes
		}
		c.mu.Unlock()
		if !wait {
			return "busy", nil, nil, nil
		}
		defer func() {
			c.mu.Lock()
			c.mu.waiting -= bytes
			c.mu.Unlock()
		}()
	}
	select {
	case sl := <-c.engine:
		return withPlan(sl)
	case <-c.done: // Close retires the slots: none comes back
		return "", nil, nil, ErrClosed
	case <-ctx.Done():
		return "", nil, nil, ctx.Err()
	}
}

// planJob plans the partitions of a job past the budgets: two at a time
// (one prepared while the last writes), each within half the budgets, or
// else one at a time in the whole budgets; nil when neither cuts (a block
// too large, or a partition that could not hold a few output tables).
func (c *Compactor) planJob(job *compaction.Job) *partitionPlan {
	ratio, err := compaction.CutRatio(job)
	if err != nil {
		return nil
	}
	limit := compaction.CutLimit(job.TargetFileSize, ratio)
	for _, lanes := range []uint64{2, 1} {
		plan, err := splitJob(job, limit, c.opts.HostWorkers, func(s jobSize) bool { return c.fits(job, s.scale(lanes)) })
		if err != nil {
			return nil
		}
		if len(plan.splits) > 0 {
			plan.lanes = int(lanes)
			return plan
		}
	}
	return nil
}

// runningJob is a job the engine runs: its input bytes and its start.
type runningJob struct {
	bytes uint64
	start time.Time
}

// waitFasterLocked says whether a job of bytes input bytes should wait for
// the busy engine (WaitWhenFaster): whether the work ahead of it on the
// engine and its own, at the engine's rate so far, would take less time
// than it alone at Fallback's rate.
func (c *Compactor) waitFasterLocked(bytes uint64) bool {
	st := &c.mu.stats
	if st.EngineJobs == 0 || st.EngineTime <= 0 || st.EngineBytesRead == 0 {
		return false
	}
	engineRate := float64(st.EngineBytesRead) / st.EngineTime.Seconds()
	fallbackRate := engineRate / 4
	if c.mu.fallbackTime > 0 && c.mu.fallbackBytes > 0 {
		fallbackRate = float64(c.mu.fallbackBytes) / c.mu.fallbackTime.Seconds()
	}
	// The work ahead, shared among the slots.
	ahead := float64(c.mu.waiting) / engineRate
	for _, r := range c.mu.running {
		ahead += max(0, float64(r.bytes)/engineRate-time.Since(r.start).Seconds())
	}
	ahead /= float64(c.opts.Engines)
	return ahead+float64(bytes)/engineRate < float64(bytes)/fallbackRate
}

// fits says a job (or a partition) of size s is within the engine's
// budgets: MemoryBudget, MaxDeviceBytes on the CUDA engine, and the 32-bit
// offsets of its contents.
func (c *Compactor) fits(job *compaction.Job, s jobSize) bool {
	return s.contents <= math.MaxUint32 &&
		(c.opts.MemoryBudget <= 0 || s.host(job.TargetFileSize) <= uint64(c.opts.MemoryBudget)) &&
		(!c.cuda || c.opts.MaxDeviceBytes <= 0 || s.device() <= uint64(c.opts.MaxDeviceBytes))
}

// jobSize is what the decision module learns of a job (or a partition of
// one) from its input tables' properties: est bounds the host memory an
// engine allocates for it (memoryEstimate), stored is the inputs' size,
// contents their uncompressed size, entries and keys their entries and
// encoded keys' bytes.
type jobSize struct{ est, stored, contents, entries, keys uint64 }

// host bounds the host memory an engine allocates for a job of this size
// (see memoryEstimate) whose outputs are cut at targetFileSize.
func (j jobSize) host(targetFileSize uint64) uint64 {
	outputs := j.contents/max(targetFileSize, 4<<10) + 2
	return j.stored + 4*j.contents + 200*j.entries + 2*j.keys + outputs*(320<<10)
}

// device bounds the device memory the CUDA engine holds for a job: the
// input arena and the output blocks (the contents each), the entries and
// keys, about 130 bytes per entry over the stages' arrays, 64 MiB for
// prim's scratch and the small arrays, and what the device's sealing takes with
// Snappy (a batch's sealed blocks).
// TestCUDADeviceEstimate checks it.
func (j jobSize) device() uint64 {
	return 2*j.contents + 2*j.keys + 136*j.entries + 64<<20 + sealDeviceBytes(j.contents)
}

// sealDeviceBytes bounds the device sealing's array for a job of contents bytes:
// a batch's sealed blocks (at most deviceBatchMax blocks, each under
// sealMaxBlock bytes and sealed into at most s2.MaxEncodedLen of it).
func sealDeviceBytes(contents uint64) uint64 {
	batch := uint64(deviceBatchMax * sstable.SealBound(sstable.SnappyCompression, sealMaxBlock))
	return min(contents+contents/4+deviceBatchMax*64, batch)
}

// memoryEstimate bounds what the Go engine allocates for a job in all (and
// so the most it holds at once), from its input tables' properties: the
// inputs' stored bytes (read buffers) and contents (the arena), the output
// blocks and what copies them (their contents, sealed copies and the
// Writers' buffers: 3 times the inputs' contents), about 200 bytes per
// entry over the stages' arrays, the keys twice, and 320 KiB per output
// table (a Writer's buffer, index and filter). contents is the inputs'
// contents alone. A table written before RawDataSize existed counts 4
// times its size. TestMemoryEstimate checks the bound.
func memoryEstimate(job *compaction.Job) (jobSize, error) {
	var j jobSize
	for _, in := range job.Inputs {
		for _, f := range in.Files {
			r, release, err := job.Env.OpenTable(f)
			if err != nil {
				return jobSize{}, err
			}
			j = j.add(tableSize(f.Size, r.Properties()))
			release()
		}
	}
	j.est = j.host(job.TargetFileSize)
	return j, nil
}

// fallback runs job on Fallback: failedStage names the engine stage that
// failed, declined the decision module's reason (one of the two is set).
func (c *Compactor) fallback(ctx context.Context, job *compaction.Job, failedStage, declined string) (*compaction.Result, error) {
	start := time.Now()
	res, err := c.opts.Fallback.Compact(ctx, job)
	took := time.Since(start)
	if err == nil && failedStage != "" {
		res.Stats.Fallback = failedStage
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		c.mu.stats.FallbackTime += took
		if declined != "small" && res.Stats.BytesRead > 0 && (c.opts.MinInputBytes < 0 || res.Stats.BytesRead >= uint64(c.opts.MinInputBytes)) {
			c.mu.fallbackBytes += res.Stats.BytesRead
			c.mu.fallbackTime += took
		}
	}
	if failedStage != "" {
		c.mu.stats.Fallbacks[failedStage]++
	}
	if declined != "" {
		c.mu.stats.Declined[declined]++
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
	st.Fallbacks = maps.Clone(c.mu.stats.Fallbacks)
	st.Declined = maps.Clone(c.mu.stats.Declined)
	return st
}

// Close ends the Compactor: later jobs fail with ErrClosed. Close it after
// the store that uses it.
func (c *Compactor) Close() error {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.mu.closed = true
	close(c.done)
	s := c.mu.sealer
	c.mu.sealer, c.mu.sealerPinned, c.mu.sealerDevice = nil, 0, 0
	c.mu.Unlock()
	if s != nil { // after a flush's release, before the device closes
		s.mu.Lock()
		s.free()
		s.mu.Unlock()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for { // the idle slots; a running job retires its own
		select {
		case sl := <-c.engine:
			c.retireLocked(sl)
			continue
		default:
		}
		break
	}
	c.sumHeldLocked()
	return nil
}

// retireLocked drops a slot for good after Close, and closes the device
// New opened once no job holds a slot.
func (c *Compactor) retireLocked(sl *slot) {
	sl.drop(false)
	c.mu.slots = slices.DeleteFunc(c.mu.slots, func(x *slot) bool { return x == sl })
	if c.mu.busy == 0 && len(c.mu.slots) == 0 && c.ownDev != nil {
		c.ownDev.Close()
		c.ownDev = nil
	}
}

// sumHeldLocked sets the stats' held memory from the slots' and the flush
// sealer's.
func (c *Compactor) sumHeldLocked() {
	c.mu.stats.HeldBytes, c.mu.stats.DeviceHeldBytes, c.mu.stats.PinnedBytes = c.mu.sealerPinned, c.mu.sealerDevice, c.mu.sealerPinned
	for _, sl := range c.mu.slots {
		c.mu.stats.HeldBytes += sl.held
		c.mu.stats.DeviceHeldBytes += sl.devHeld
		c.mu.stats.PinnedBytes += sl.pinHeld
	}
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
