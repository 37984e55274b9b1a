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
// Jobs of at least MinInputBytes (8 MiB) run through the pipeline; smaller
// ones, and any job the engine fails, run on Options.Fallback
// (compaction.CPU); Stats count both. Outputs are byte-identical to
// compaction.CPU{Parts: 1}'s.
//
// # Status
//
// Part 1 of two (issues 15 and 16): the pipeline runs on its Go engine only
// — the CUDA engine, Options.Backend and the device options of the spec are
// part 2. Built and tested:
//
//   - the Compactor: the decision module (MinInputBytes, MinInputTables),
//     fallback of a failed job to Options.Fallback (counted by stage; damaged
//     input and the caller's context are returned, not rerun; kv deletes the
//     tables a failed attempt created), Stats with stage times;
//   - the input stage: an input table's data region read in one call, its
//     blocks checked and decompressed into one arena (sstable.Reader.DataBlocks
//     and DecodeBlock), every entry decoded into a flat entry array whose
//     values stay where they are in the arena (the paper's key-value
//     separation: later stages move 4-byte entry ids, never values);
//   - the merge stage: the job's sorted runs (each L0 table, and each deeper
//     level's tables together) merged pairwise in ⌈log2 runs⌉ rounds, entries
//     compared first by K0 — the 8 bytes after the job's common key prefix,
//     big-endian — and only on a K0 tie by their key bytes and trailers
//     (the spec's decision 4: merge instead of gLSM's radix sort);
//   - garbage collection and selection: every position of the merged order
//     decided independently (a GPU thread per entry) by compaction.CPU's
//     rules through the same helpers (StripeOf, CollectSpans,
//     CoveredInStripe, Job.ElideTombstone); the kept entries and the counts
//     equal compaction.CPU's on random jobs with snapshots, tombstones and
//     levels below (compactiontest.RandomJob);
//   - the plan: one walk over the kept entries replaying the block builder's
//     flush rule and compaction.CPU's output cuts (uncompressed size,
//     compaction.GrandparentLimit, a tombstone-only output), on shared
//     prefixes computed per entry beforehand;
//   - encoding: each planned block built with sstable.BlockBuilder (the
//     Writer's own block code) on goroutines, checked against the plan,
//     sealed in parallel, and written with Writer.AddEncodedBlock;
//     compaction.FinishOutput finishes every output for both compactors.
//     The whole Go engine (runGo) writes byte-identical tables, metadata and
//     Stats to compaction.CPU{Parts: 1} on random jobs with every
//     compression, block size and restart interval;
//   - in package sstable, the hooks that let a Writer take blocks built in
//     bulk (Writer.AddEncodedBlock, SetFilter, SealBlock), byte-identical to
//     writing the entries one by one.
//
// Also built: parallel loading (a goroutine per input table) and merge
// rounds cut along merge paths; kv.Metrics.Compaction.Accelerated; the
// --compactor flag of warp kv bench and bench/peers; BenchmarkJob against
// compaction.CPU with and without subcompactions (docs/benchmarks.md);
// identity over the spec's matrix (compactiontest.MatrixJob), multi-MiB jobs
// and FuzzGoEngine; kv's model and concurrency tests on the engine.
//
// Still to build for part 1: a faster data-parallel engine (the issue's
// cpu-par target, 6x compaction.CPU at small values, is missed: 2.3-3.0x;
// loading splits only by table and the plan is one sequential walk), warp
// bench kvcompact, a memory budget in the decision module, crash and stall
// tests on the engine, an interval-decoder fuzz target, and values past the
// compression limit.
//
// # Departures from the spec (shared/docs/specs/gpucompact.md)
//
//   - Options today are Fallback, MinInputBytes, MinInputTables and a
//     *slog.Logger (the project's logging hook, for the spec's Logf);
//     Backend, Device, WhenBusy, the memory and worker sizes, Sort and
//     DeviceCompression come with the CUDA engine.
//   - Stats.Fallbacks counts by the stage that failed ("load", "merge",
//     "gc", "plan", "encode", "write").
//   - SealBlock returns a SealedBlock (stored bytes, type, masked CRC) that
//     EncodedBlock carries as Sealed, where the spec lists Stored, Type and
//     CRC fields of EncodedBlock.
//   - The Go engine keeps an array of entry structs rather than separate
//     arrays per field, and decodes a block per goroutine step rather than
//     a restart interval per thread; the CUDA engine lays them out for the
//     device.
package gpucompact
