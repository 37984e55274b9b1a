// Package gpucompact is kv's accelerated compactor: gLSM's major compaction
// pipeline (Sun et al., ACM TOS 2024) — decode the input tables' blocks,
// merge the sorted runs, apply the garbage-collection rules, encode the
// output blocks — laid out for a GPU, with a Go engine that runs the same
// stages on goroutines. Design: shared/docs/specs/gpucompact.md.
//
// # Status
//
// Under construction (issues 15 and 16); nothing here is a
// compaction.Compactor yet, and kv does not use the package. Built and
// tested so far:
//
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
// Still to build for part 1: the Compactor itself (Options, the decision
// module, fallback to compaction.CPU, per-engine statistics, kv.Metrics),
// reading the inputs on HostWorkers goroutines, the full identity suite
// (large jobs, values past the compression limit, fuzzing), and the
// --compactor flag of warp kv bench and bench/peers.
package gpucompact
