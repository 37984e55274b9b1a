// Package gpucompact is kv's accelerated compactor: gLSM's major compaction
// pipeline (Sun et al., ACM TOS 2024) — decode the input tables' blocks,
// merge the sorted runs, apply the garbage-collection rules, encode the
// output blocks — laid out for a GPU, with a Go engine that runs the same
// stages on goroutines. Design: shared/docs/specs/gpucompact.md.
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
// (MinInputBytes, default 8 MiB; MinInputTables), fits MemoryBudget (an
// estimate from the input tables' properties), and the engine is on and
// free; otherwise Options.Fallback (compaction.CPU) runs it, so with
// several concurrent compactions the engine and the CPU compact side by
// side (WhenBusy). Any job the engine fails is rerun on Fallback. Outputs
// are byte-identical to compaction.CPU{Parts: 1}'s; Stats count jobs,
// bytes, declines by reason, failures by stage and stage times.
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
//     (uncompressed size, compaction.GrandparentLimit, a tombstone-only
//     output) into block and table boundaries with exact block sizes;
//   - encode and write, behind the plan (pipeline): each block, as soon as
//     it is planned, built with sstable.BlockBuilder (the Writer's own
//     block code) by one of the encoders on every core, into its planned
//     place, and sealed (checksum, compression) while hot; each output
//     table, as soon as it is planned, written by a goroutine of its own
//     that takes its blocks in order as they are encoded
//     (Writer.AddEncodedBlock, then compaction.FinishOutput). The walk,
//     the encoding and the writing overlap; at most 2×GOMAXPROCS output
//     files are open at once.
//
// The engine keeps its arrays between jobs (a workspace: Stats.HeldBytes;
// Close drops it): fresh memory costs the kernel a page fault and a
// zeroing per 4 KiB, which on 16 cores cost more than the stages' work.
// The first job after New pays it (warp bench kvcompact's "1st" column).
//
// # Status
//
// Part 1 of two (issues 15 and 16): the pipeline runs on its Go engine; the
// CUDA engine, Options.Backend and the device options of the spec are part
// 2. Tested: byte identity with compaction.CPU over random jobs, the
// spec's matrix (compactiontest.MatrixJob), multi-MiB jobs, a value past
// the 64 MiB compression limit and FuzzGoEngine, every round reusing one
// workspace; each stage against its CPU counterpart; FuzzLoadDamagedBlock
// (damage the checksum cannot see reaches the decoder: same entries or the
// same corruption error as the table's iterator); a failure at every
// stage falls back with identical output, no orphan tables and goroutines
// back to baseline; the decision module (budget, busy, engine turned off);
// and kv's model, crash, concurrency and stall tests with the engine as
// the store's compactor. warp bench kvcompact measures it against
// compaction.CPU (docs/benchmarks.md).
//
// # Departures from the spec (shared/docs/specs/gpucompact.md)
//
//   - Options today are Fallback, MinInputBytes, MinInputTables,
//     MemoryBudget, WhenBusy, MaxEngineFailures and a *slog.Logger (the
//     project's logging hook, for the spec's Logf); Backend, Device,
//     MaxDeviceBytes, PinnedBytes, ChunkBytes, HostWorkers, Sort and
//     DeviceCompression come with the CUDA engine. MemoryBudget (default
//     2 GiB) bounds the Go engine's memory for a job; the spec's budget is
//     the device's.
//   - Stats: Fallbacks counts engine failures by stage ("load", "merge",
//     "gc", "sizes", "plan", "encode", "write"); Declined counts the
//     decision module's refusals by reason ("small", "budget", "busy",
//     "disabled"); Disabled and HeldBytes are added; stage times are Load,
//     Merge, GC, Sizes, Plan and Write (the encoding and writing overlap
//     the plan: Write is what is left of them after it).
//   - SealBlock returns a SealedBlock (stored bytes, type, masked CRC) that
//     EncodedBlock carries as Sealed, where the spec lists Stored, Type and
//     CRC fields of EncodedBlock. Added hooks: Reader.DecodeBlock,
//     Reader.DecodedLen, BlockEntries, BlockBuilder, SealBound,
//     compaction.FinishOutput and compaction.GrandparentLimit.
//   - The Go engine keeps an array of entry structs rather than separate
//     arrays per field, and decodes a block per goroutine step rather than
//     a restart interval per thread; the CUDA engine lays them out for the
//     device.
//   - kv.Metrics.Compaction's field is Accelerated, not GPU: the Go engine
//     counts there too.
package gpucompact
