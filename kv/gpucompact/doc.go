// Package gpucompact is kv's accelerated compactor: gLSM's major compaction
// pipeline (Sun et al., ACM TOS 2024) — decode the input tables' blocks,
// merge the sorted runs, apply the garbage-collection rules, encode the
// output blocks — on a GPU (the CUDA engine), or on goroutines (the Go
// engine, the same stages). Design: shared/docs/specs/gpucompact.md.
//
// # Use
//
//	gc, err := gpucompact.New(gpucompact.Options{})
//	db, err := kv.Open(dir, &kv.Options{Compactor: gc})
//	...
//	db.Close()
//	gc.Close()
//
// The decision module sends a job to the engine when it is large enough
// (MinInputBytes, default 1 MiB on the CUDA engine and 8 MiB on the Go
// engine; MinInputTables) and the engine is on; otherwise Options.Fallback
// (compaction.CPU) runs it. A job that finds the engine busy waits for it
// when, at the rates measured so far, that ends it sooner than Fallback
// would, and otherwise runs on Fallback beside it (WhenBusy). A job
// past MemoryBudget or, on the CUDA engine, MaxDeviceBytes (estimates from
// the input tables' properties) runs in key-range partitions that fit
// (below). Any job the engine fails is rerun on Fallback. Outputs are
// byte-identical to compaction.CPU{Parts: 1}'s; Stats count jobs, bytes,
// partitions, declines by reason, failures by stage and stage times.
//
// Options.Backend picks the engine: Auto (the default) runs the CUDA engine
// where a device is present and the Go engine elsewhere; CPU and CUDA
// force one (CUDA without a device: New fails with warpkit.ErrNoDevice).
// Options.Device passes a device the caller keeps (its kernels are loaded
// once per device: several Compactors should share one).
//
// # The Go engine
//
// One pipeline of data-parallel stages, each a loop over independent items
// split among goroutines (a GPU runs the same items as threads):
//
//   - load: the input tables cut into pieces of about 256 KiB of blocks; each
//     piece read in one call, every block's length learned from its
//     compression header (sstable.Reader.DecodedLen) so that all get their
//     place in one arena, then checked, decompressed in place and decoded
//     into an entry array whose values stay in the arena (the paper's
//     key-value separation: later stages move 4-byte ids, never values);
//   - merge: the job's sorted runs (each L0 table, and each deeper level's
//     tables together) merged pairwise in ceil(log2 runs) rounds, each round
//     cut along merge paths into pieces; entries compared first by K0 — the
//     8 bytes after the job's common key prefix, big-endian — and only on a
//     K0 tie by their key bytes and trailers (the spec's decision 4);
//   - gc and select: every position of the merged order decided
//     independently by compaction.CPU's rules through the same helpers
//     (StripeOf, CollectSpans, CoveredInStripe, Job.ElideTombstone), then a
//     two-pass select of the kept ids;
//   - sizes: each kept entry's encoded size at and off a restart point
//     (its shared prefix with the previous kept key computed per entry);
//   - plan: the one sequential pass, about 4 ns an entry, replaying the
//     block builder's flush rule and compaction.CPU's output cuts
//     (uncompressed size and compaction.Cutter, a tombstone-only
//     output) into block and table boundaries with exact block sizes;
//   - encode and write, behind the plan (pipeline): each block, as soon as
//     it is planned, built with sstable.BlockBuilder (the Writer's own
//     block code) by one of the encoders (one a core, or Options.
//     HostWorkers), into its planned
//     place, and sealed (checksum, compression) while hot; each output
//     table, as soon as it is planned, written by a goroutine of its own
//     that takes its blocks in order as they are encoded, the ready run
//     of them at once (Writer.AddEncodedBlocks: up to 256 blocks, their
//     sealed bytes written as vectors where the file can; then
//     compaction.FinishOutput). The walk,
//     the encoding and the writing overlap; at most 2×HostWorkers output
//     files (2×GOMAXPROCS by default, at least 2) are open at once. Every
//     loop the host splits over goroutines (reads, decoding, merges,
//     checks) splits over at most HostWorkers.
//
// The engine keeps its arrays between jobs (a workspace: Stats.HeldBytes;
// Close drops it): fresh memory costs the kernel a page fault and a
// zeroing per 4 KiB, which on 16 cores cost more than the stages' work.
// The first job after New pays it (warp bench kvcompact's "1st" column).
//
// # The CUDA engine
//
// The same pipeline with the per-entry stages on the device (gpucompact.cu;
// one stream per engine slot):
//
//   - load: the arena lives in pinned memory and goes up by DMA. The
//     pieces of a table stored uncompressed are read straight into their
//     places in it, trailers and all, and the device checks every such
//     block's checksum (in block_intervals' launch, a thread a block,
//     slicing-by-4 tables derived from record.CRCTable); the stored bytes of tables stored
//     with Snappy (in pinned memory) go up piece by piece as the host
//     reads them, and the device checks and decompresses each block into
//     its place (inflate_blocks, a warp a block); the host decompresses S2 blocks into the arena
//     (checking their checksums). The device counts each block's restart
//     intervals (checking its restart array), walks every interval twice —
//     counting entries and key bytes (one word, scanned once by prim),
//     then decoding them into the entry array and the key arena, with each
//     entry's merge key (the 8 bytes after the job's common prefix, which
//     the host takes from the input tables' bounds: a key outside it makes
//     the job "irregular") and the merge's first order; the entries and keys
//     come back by DMA for the host's plan and checks. A block the device
//     flags is decoded again on the host: its corruption error is the
//     job's (as the Go engine reports it), else the job is declined
//     ("irregular") to Fallback;
//   - merge: one launch per round over every pair of runs
//     (internal/devcode/merge_path.cuh, prim's merge path with a
//     comparator: K0, then key bytes, then trailer);
//   - gc: a thread per position flags new keys, shadowed entries and the
//     positions only the host can decide (every one under a range
//     tombstone, point tombstones in stripe 0: elision asks the levels
//     below: the launch counts them, and only a job with some selects
//     them), which come back with their ids, are decided by the Go
//     engine's rules and go up again; prim's select keeps the rest;
//   - sizes: each kept entry's plan entry, shared prefix and new-key flag;
//   - plan: the host's walk, as in the Go engine but stepping over whole
//     blocks (the device gives every kept entry the block that would start
//     there: block_ends) wherever no cut can fall inside one, handing
//     planned blocks to a device goroutine that encodes whatever has been
//     planned since its last batch (encode_blocks: a warp per block, 32
//     entries at a time at scanned offsets, restart array, block stats,
//     its size checked against the plan and, when the job stores blocks
//     uncompressed, its checksum) and brings the blocks back by DMA into
//     the pinned output arena; each output table's bloom filter is built on
//     the device in the launch of the batch after the walk ends the table
//     (blocks of encode_blocks' launch past its encoding grid: a thread per
//     kept entry, atomicOr into words whose little-endian bytes are the
//     Writer's filter, sized by sstable.FilterShape from the count of its
//     kept entries that start a new user key, which come back with the
//     sizes). With Snappy the device also seals each batch's blocks right
//     after encoding them, in the same launch (Options.Sealing;
//     encode_seal_blocks: the warp that built a block seals it,
//     eight warps a block of threads, each warp with its own hash table
//     of 16-bit positions in shared memory, compresses it with
//     internal/devcode/snappy.cuh, s2's amd64 Snappy encoder byte for byte,
//     keeps it compressed when that saves an eighth as sstable's compress
//     does, and checksums what is stored, the warp's lanes each a 128-byte
//     part), into the pipeline's pinned sealed buffer, and a batch whose
//     every block it sealed brings back the sealed bytes only; blocks of
//     16 KiB and more, and S2 tables, are compressed by the host. The host's sealers (two fewer than cores)
//     finish the blocks (mask the device's checksum, or compress and
//     checksum what the device did not seal) and the writers write them,
//     each table's filter handed to its Writer (SetFilter).
//
// Flushes (Options.SealFlushes, off by default). The Compactor is also a
// compaction.BlockSealer: a kv store whose Compactor it is encodes each
// memtable flush's runs without sealing them and hands every block to
// SealBlocks, which runs seal_blocks (the sealing of encode_seal_blocks,
// alone) on a stream (the device's most urgent, cuda.Device.NewPriorityStream,
// so that its blocks start before the compaction kernels' pending ones: on
// the H200 a flush took 5.5 ms with it and without it idle, 6.9-7.1 ms
// against 7.2-7.5 at 60% stress), staging and device arrays of its own, from pinned
// memory it copies the blocks into, and waits asleep (polling the stream
// every 50 µs: the driver's wait spins a processor). Blocks of 16 KiB and
// more it seals on the host; batches under 64 KiB, tables other than
// Snappy and a Compactor without SealFlushes, closed or with its engine
// off decline (the store seals on its own goroutines); a device failure
// counts as the engine's (Fallbacks["flush seal"]) and the store seals on
// the host. Tables are byte-identical either way (TestCUDAFlushSeal).
// On the H200's host at 60% CPU stress (files in memory, 1 KiB values)
// the gpu store filled 1.055x as fast with it and its p99.9 write latency
// fell by a fifth; at 80% neither moved (docs/benchmarks.md).
//
// # Key-range partitions
//
// A job past the budgets runs as a sequence of partitions, each a range of
// user keys that goes through the whole pipeline alone (partition.go):
//
//   - the split keys come from the input tables' index blocks (each data
//     block's index key bounds its user keys: sstable.Reader.
//     DataBlockBounds), about an eighth of the budgets apart, and each
//     partition ends at the farthest one (at least the next) at which its
//     estimate, with room for one output table, fits; a job whose budgets
//     would not hold four output tables a partition, or one of whose
//     blocks alone would not fit, is declined ("budget");
//   - a partition reads only the blocks that may hold its keys, so every
//     version of each of its keys is there, and garbage collection decides
//     its entries as in the whole job;
//   - its walk starts where the whole job's starts an output table, walks
//     its kept entries once dry to find the last table that starts inside
//     it, writes the tables before that one, and hands that table's first
//     key to the next partition as its start: the outputs end where the
//     whole job's end, byte for byte. A partition in which no table starts
//     after its first is widened to the farthest split within the budgets
//     (the job is declined, "budget", when there is none);
//   - the Stats add up the partitions' entries in [start, next start), and
//     their EntriesIn must equal the input tables' NumEntries (an index
//     that lied about its blocks' keys would lose entries between
//     partitions): otherwise the job is declined ("irregular").
//
// A partition runs in two halves: prepare (read, merge, collect, size, plan
// its walk) and write (the walk with the encoders and writers behind it).
// Two lanes — workspaces and, on the CUDA engine, device engines with
// streams of their own, each partition within half the budgets — let the
// next partition prepare while the last one writes; writes run one after
// another, so output tables are created in key order. A job that cannot be
// cut for two lanes runs one partition at a time in the whole budgets, and
// the second lane's arrays are freed after any job that ran in one lane.
// Entries between a partition's last table start and its end are loaded
// twice (docs/benchmarks.md measures what partitions cost).
//
// Options.Engines (default 1) lets the engine run several jobs at once,
// each slot with arrays and a stream of its own; measured on the store, two
// slots were slower than one (the jobs' host stages compete for the cores:
// docs/benchmarks.md).
//
// Both engines check that every key has the job's common prefix (K0 orders
// only such keys) and that the merged order is strictly ascending (a merge
// keeps each run's order, so it is exactly when every input run is
// sorted): damaged input out of order is declined ("irregular") to
// Fallback, whose result stands. A device error falls back for the job; an
// error that left the CUDA context unusable (cuda.Error.Sticky: a kernel
// fault, a lost context) turns the engine off at once, and other driver
// errors (out of memory, a launch out of resources) count toward
// MaxEngineFailures. The engine is off for its Compactor; a sticky error
// is the context's, so every Compactor on that device meets it at its next
// job and turns off as well (the "for the process"). Device arrays
// and pinned host arrays are kept between jobs (Stats.DeviceHeldBytes,
// HeldBytes, PinnedBytes) and freed after a failure and by Close.
//
// Pinned memory: the arrays the device copies whole (the arena, the Snappy
// tables' stored bytes, the entries and keys, the kept entries and their
// plan, the output blocks) are page-locked while they fit
// Options.PinnedBytes (default 1 GiB a job, less the ring's two slots and
// 8 MiB for the staging of small transfers), so that they travel by DMA
// straight from and to where the host reads and writes them. Those past it
// stay in ordinary memory and travel through the engine's ring
// (gpurt.Ring: two slots of ChunkBytes, default 16 MiB, allocated at its
// first use and kept; the host fills or empties one while the device
// copies the other), as do the job-sized lists (block places, checksums,
// the positions the host decides): a copy on the host of each byte, paid
// by jobs past the bound only. A plain arena goes up piece by piece
// through the ring as the host reads it, as a pinned one does by DMA.
//
// # Status
//
// Issue 15 (the pipeline and its Go engine) is done. Issue 16 (the CUDA
// engine) is in part: the engine above works and is measured
// (docs/benchmarks.md), with the paper's two ablations (Options.Sort =
// SortRadix, Options.MoveValues: measured, docs/benchmarks.md) and the
// Snappy inputs decompressed on the device, Snappy outputs compressed on
// the device (Options.Sealing, by default where the host's s2 is the
// encoder the device reproduces: as fast as the host's sealers on an idle
// host, 1.15-1.8x as fast at 80% CPU stress, with 0.4-0.6x the host's CPU a
// GB), and key-range partitions for
// jobs past the budgets, and a bound on its pinned memory
// (Options.PinnedBytes: arrays past it travel through a ring of two
// pinned slots), and one on the goroutines of its host stages
// (Options.HostWorkers).
// Tested: byte identity
// with compaction.CPU over random jobs, the spec's matrix
// (compactiontest.MatrixJob), multi-MiB jobs, a value past the 64 MiB
// compression limit and FuzzGoEngine, every round reusing one workspace;
// the same suites in partitions cut at random keys (block bounds, keys
// just past and before them, before the first key and past the last), and
// jobs the decision module partitions for a small MemoryBudget; each stage
// against its CPU counterpart; FuzzLoadDamagedBlock
// (damage the checksum cannot see reaches the decoder: same entries or the
// same corruption error as the table's iterator); a failure at every
// stage falls back with identical output, no orphan tables and goroutines
// back to baseline; the decision module (budget, busy and WaitWhenFaster's
// choice, engine turned off), partitions planned for small budgets and
// the plan's limits (few output tables a partition, a block too large, a
// partition widened past the budgets), a failure at every stage of a
// second partition;
// and kv's model, crash, concurrency and stall tests with the engine as
// the store's compactor. warp bench kvcompact measures it against
// compaction.CPU (docs/benchmarks.md). The CUDA engine runs the same
// identity suites on a device (gpu_test.go: random jobs, the matrix, 12 MiB,
// 192 MiB and 1 GiB jobs — and, in partitions, the random jobs, the matrix,
// the 12 MiB job and the 1 GiB job in those a quarter of its estimate
// plans —, a failure at every stage, out of device memory,
// unsorted runs, two engine slots, a job cancelled mid-way, a kernel's
// status word: TestCUDAEncodeStatusWord plans a block a byte longer than
// encode_blocks writes, and the job falls back with the CPU's outputs, the
// engine's arrays freed and the engine still on; TestEmulatedDeviceFault
// adds launch failures, illegal addresses and refused launches, sticky and
// not, on the emulation), and checkDamaged compares both
// engines with compaction.CPU on input damaged where the checksum cannot
// see it. TestCUDASealBlocks compares the device's sealing (seal_blocks,
// which runs encode_seal_blocks' seal_block alone) with sstable.SealBlock
// block by block (every s2 size class, contents that take every path of
// the encoder); the identity suites run with host and device sealing, and
// with nothing pinned (every copy staged, TestCUDAEngineStaged). gpucompact.cu also builds for the CPU emulation of the GPU
// (internal/emu): TestEmulatedCUDAEngine runs the CUDA engine's suites,
// kernels and host code together, in every go test.
//
// # Departures from the spec (shared/docs/specs/gpucompact.md)
//
//   - Options today are Backend, Device, Fallback, MinInputBytes,
//     MinInputTables, MemoryBudget, MaxDeviceBytes, Engines, WhenBusy,
//     MaxEngineFailures, a *slog.Logger (the project's logging hook, for
//     the spec's Logf), Sort and MoveValues (an ablation the spec's bench
//     flag --ablate names) and Sealing (the spec's DeviceCompression, a
//     bool off by default: where Snappy blocks are sealed, on the device by
//     default, see Options), PinnedBytes and ChunkBytes (the ring's slots,
//     two, shared by both directions, and allocated at first use rather
//     than in New: a job that fits the bound never needs one); HostWorkers
//     bounds each host stage's goroutines, not the job's in all (the walk,
//     the device's encoding and the writers overlap the sealers).
//     SortRadix sorts whole keys (the
//     trailer, the length, every 8 bytes past the common prefix: LSD
//     passes of prim's stable radix sort), not K0 alone, so that its order
//     is exact; the Go engine ignores Sort and MoveValues, and the device
//     estimate does not count their arrays. MemoryBudget (default 2 GiB) bounds
//     the host memory of a job, on either engine; MaxDeviceBytes (default
//     half the device's free memory) the device's. A job over either runs
//     in key-range partitions (the spec's, cut at input block bounds, but
//     each written up to the last output table that starts inside it, the
//     next partition starting there, two at a time); one that
//     cannot be cut to fit, or that the device runs out of memory for, is
//     declined ("budget") to Fallback.
//   - The CUDA engine decodes, checksums uncompressed blocks (in and out),
//     checks and decompresses Snappy inputs and builds the filters on the
//     device (and compresses and checksums Snappy outputs under 16 KiB,
//     where the host's s2 is its amd64 assembly encoder: a canary checks
//     it; Options.Sealing), but the host still decompresses S2 inputs,
//     compresses outputs (S2, larger Snappy blocks, and Snappy blocks with
//     SealOnHost or another encoder) and plans. The input checksums of uncompressed blocks are checked on the
//     device after the copy, not in K1 with the decoding (one launch more);
//     a mismatch flags the block as damage the decoder finds does. The
//     pinned arrays are the workspace's (grown as jobs grow, within
//     PinnedBytes) and the ring carries only what does not fit, rather than
//     every copy going through a ring of chunks: a job that fits copies its
//     arrays once, by DMA. One stream, whose copies overlap the host's
//     reading for tables stored uncompressed (their arena) and with Snappy
//     (their stored bytes), when pinned (startUpload).
//     Launches per job: 11 (with Snappy inputs on the device, 12: inflate)
//     plus one per merge round and one per encode batch (device sealing
//     included: encode_seal_blocks seals in the encoding launch), and 4
//     more when some positions need the
//     host's verdict (range tombstones, point tombstones at the bottom).
//   - A merged order that is not strictly ascending is a decline
//     ("irregular") rather than the spec's device-bug fallback: it is
//     damaged input, on either engine; a device-flagged block that the host
//     finds undamaged (laid out otherwise than the writer lays blocks out)
//     is a decline too.
//   - Stats: Fallbacks counts engine failures by stage ("load", "merge",
//     "gc", "sizes", "plan", "encode", "write", and "device" for the CUDA
//     engine's own); Declined counts the decision module's refusals by
//     reason ("small", "budget", "busy", "disabled", "irregular"); Engine,
//     Disabled, HeldBytes, DeviceHeldBytes, PinnedBytes, PartitionedJobs, Partitions,
//     EngineTime and FallbackTime are added; the busy policy
//     WaitWhenFaster (the default) is beyond the spec's WhenBusy values; stage times are Load,
//     Merge, GC, Sizes, Plan and Write (the encoding and writing overlap
//     the plan: Write is what is left of them after it), and for the CUDA
//     engine's device batches Encode (their time), EncodeBatches (how
//     many) and WriteTail (the write stage after a job's last batch).
//   - SealBlock returns a SealedBlock (stored bytes, type, masked CRC) that
//     EncodedBlock carries as Sealed, where the spec lists Stored, Type and
//     CRC fields of EncodedBlock. Added hooks: Reader.DecodeBlock,
//     Reader.DecodedLen, BlockEntries, BlockBuilder, SealBound,
//     compaction.FinishOutput and compaction.Cutter.
//   - Both engines keep an array of 32-byte entry structs (the device's
//     Entry is the same layout) rather than separate arrays per field; the
//     Go engine decodes a block per goroutine step, the CUDA engine a
//     restart interval per thread.
//   - kv.Metrics.Compaction's field is Accelerated, not GPU: the Go engine
//     counts there too.
//   - Beyond the spec: the Compactor seals a store's flushed blocks too
//     (Options.SealFlushes, compaction.BlockSealer; Stats.FlushSeals,
//     FlushSealedBlocks).
//   - The cut rule the plan replays is compaction.Cutter: besides the raw
//     size and LevelDB's overlap limit of the spec's §3 (splitPending, the
//     grandparent short-circuit), outputs end at grandparent boundaries once
//     half full and may grow to twice the limit waiting for one (RocksDB's
//     and Pebble's rule), so uncompressed stores no longer cut "exactly as
//     today". The plan asks the Cutter only at keys where it is not quiet
//     (binary search) or past the limit; no grandparent index per entry
//     comes from the device.
package gpucompact
