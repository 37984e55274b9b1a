// Package mvbtree is a multiversion B-tree: an ordered map from K to V
// (uint32 or uint64 each, every key usable) whose readers may hold
// snapshots — the tree as it was when each was taken — for as long as they
// like, beside writers that keep changing it. It is the structure of Awad's
// thesis, chapter 4 ("A GPU Multiversion B-Tree", PACT 2022), with
// long-lived snapshot handles the thesis does not have. Design:
// shared/docs/specs/mvbtree.md.
//
// # Use
//
//	t, err := mvbtree.New[uint32, uint32](mvbtree.Options{}) // CUDA where there is a device
//	err = t.Insert(ctx, keys, vals)
//	snap, err := t.Snapshot(ctx) // the tree as it is now
//	defer snap.Close()           // unpins its versions
//	err = t.Delete(ctx, keys)    // snap still sees them
//	err = snap.Lookup(ctx, keys, vals, found)
//	all, err := snap.All(ctx)    // iter.Seq2 over the snapshot
//
// # Semantics
//
// The latest version has package btree's contracts (Build, Insert, Delete,
// Lookup, Successor, Predecessor, Count, Range, Ascend*, Len, Stats,
// Compact, Check, and the Device variants), with two promises more: an
// update batch is atomic (a snapshot sees all of it or none) and Range is
// linearizable (every query of a call sees one version). AscendRange,
// AscendGreaterOrEqual and All walk a transient snapshot: they copy
// nothing, hold no writer back, and a loop may update the tree it iterates.
// Snapshot linearizes after every update that returned before it was called;
// its queries run beside the tree's writers and each other. Snapshots are
// numbered in the order they were taken (Version). Close unpins a snapshot;
// Tree.Close closes every open snapshot. Every method of a closed tree or
// snapshot returns an error wrapping ErrClosed, a second Close included.
//
// # The CUDA backend
//
// Nodes are btree's B-link nodes (the shared core, internal/devcode/
// blink.cuh) with a version: the stamp ts of the write batch that made the
// version and prev, the next older version. A 128-byte node (32-bit keys
// and values) holds 13 pairs and then the version in its last two slots, so
// that its pairs start at a lane boundary as btree's do; a 256-byte node
// holds the version in its header and 14 pairs. Every node is
// a SlabAlloc unit (package slaballoc), so versions can be freed; a node's
// head — the address its parent and left sibling name — never moves (the
// root splits in place, as btree's).
//
// Stamps. Write batches take the host's epoch as their stamp. A snapshot
// takes the current epoch and moves it on (when a batch wrote since the
// last one; otherwise it shares the last stamp), and sees, of every node,
// the newest version with ts <= its stamp. Taking a snapshot waits for the
// write batches in flight, so a snapshot never sees part of one.
//
// Writers. A writer holding a head's latch, about to replace a version
// stamped ts, copies it first when the copy rule asks (Options.Copy):
// CopyWhenPinned (the default) copies only when an open snapshot sees the
// version (some open stamp p has ts <= p < the batch's stamp) and otherwise
// writes in place; CopyAlways copies every time (the thesis's VoB-Tree);
// CopyIfStale copies whenever the version is not the batch's own (the
// thesis's ViB rule: in place only when no snapshot was taken since). On the
// way it splices out of the head's chain every older version no open
// snapshot sees and retires them; the host frees a batch's retired versions
// once every launch that ran beside the batch has ended (launch epochs,
// package internal/ebr). So memory stays bounded by the live nodes plus one
// version per (open snapshot x node changed since it), plus a version
// index per head whose chain holds four versions or more (Readers, below);
// Vacuum reaches the chains no writer touches after their snapshots
// closed. Versions outside that bound wait, linked, for a later writer of
// their head or for Vacuum: those a splice could not retire because its
// batch's retire log was full (2*n entries, at most 2^22), and chains a
// plain batch met (Plain batches, below).
//
// Plain batches. A write batch that can copy nothing and has nothing to
// splice runs plain kernels (mvb_insert_plain, mvb_delete_plain): the
// shared writers with a versioner that stamps in place and keeps prev as it
// is, without the snapshot registry, the retire log, the splice or the
// version's decode (the insert kernel: 2,969 SASS instructions and no
// spills, against 9,359 and 396 bytes spilled). The host decides per batch:
// no snapshot open; no batch that may link versions ran on the generation
// since a Vacuum that left none; and under CopyIfStale no snapshot ever
// taken of the generation. Under CopyAlways a plain batch (mvb_insert_copy,
// mvb_delete_copy) still copies every node it writes, as the thesis's VoB
// does (allocate, copy the version out, retire the copy), but retires the
// copy into the batch's retire log unlinked: with no snapshot open no reader
// can reach it, where the versioning kernel links it as the head's prev for
// the next write of the head to splice out and retire. The warp takes its
// tiles' first copy units with one allocation before any latch (from salted
// bits of a block: slaballoc's TileAllocator Spread), and a tile holds its
// copies until its operation is done and appends them with one atomic a
// block. A plain batch that
// meets a chain anyway — one another lane linked while it ran — keeps it for
// the next versioning writer or Vacuum. Between a batch's launch and its
// wait the pool prepares the super blocks a next batch would grow it by
// (slaballoc's Prepare), so that growing costs the batches little.
//
// Readers. Queries of a snapshot read each head they reach (with a seqlock
// when writers may run: heads change in place) and walk its chain to the
// version of their stamp. A writer that leaves a chain of four versions or
// more puts a version index between the head and the chain: one unit of
// (stamp, address) pairs of the chain's versions — every one while they
// fit (13 in a 128-byte node, 14 in a 256-byte one), then every second,
// fourth, ... — and the chain's last version with the stamp above it. A
// query reads the head, the index and then its version (or the indexed
// version before it, and walks at most the stride on), so that a
// snapshot's lookup costs the same however many snapshots came after it.
// Indexes are immutable: the next writer of the head that changes its
// chain replaces the index (the old one retired as a version is); while no
// snapshot stamp has closed since an index was built, nothing in its chain
// can be unlinked, so a copy extends it without walking the chain and a
// write in place keeps it. They are left out where no unit is free,
// retired by Vacuum, which builds none, counted in Stats.VersionIndexes,
// and not built at all with Options.NoVersionIndexes (writers with many
// snapshots open are faster without them, old snapshots' readers slower). Queries of the latest version read heads as
// btree's do: validated beside writers, in btree's lockstep waves (also the
// shared core's, blink_wave.cuh) when no writer runs. Range and the
// iterators of the latest version run on a transient snapshot.
//
// Generations. Build and Compact lay out a new tree in a new pool; snapshots
// taken before keep reading the old generation, whose pool is freed when the
// last of them closes.
//
// Stamps are 32-bit: before a snapshot would move the epoch past 2^31,
// Restamp renumbers every stamp to 1 + the number of open snapshots' stamps
// below it, which keeps every snapshot's view.
//
// Failures: a pool that runs out (at MaxPoolBytes, or at 16M nodes without
// it) fails the batch with ErrPoolExhausted, and one the device's memory
// cannot grow with ErrOutOfMemory (btree's contract), after applying whole
// operations only (a copy that cannot be allocated leaves its node as it
// was); every loop in
// the kernels is bounded (ErrRetryLimit, never a hang: retry_test.go traps
// walks in corrupted leaves, child entries and version chains, and every
// latest-version, snapshot, plain and versioning operation that meets them
// returns ErrRetryLimit, on the emulation and on a GPU).
//
// The CPU backend (internal/ordmap, shared with btree's) keeps a
// tidwall/btree map whose snapshots are copy-on-write copies: O(1) to take,
// each later write copying the nodes it changes while a snapshot holds
// them; a closed snapshot's nodes go to Go's garbage collector, so Vacuum
// and Restamp have nothing to do there.
//
// # Status
//
// Issue 18 (M1-M3 of the spec's split): the API, the CPU backend and the
// CUDA backend. Tests: a differential test against a model per version over
// random sequences of builds, inserts, deletes, compactions, snapshots,
// closes and every query (keys at both ends of K's range, 32- and 64-bit,
// Check after every step: every version's order and fences, every chain's
// stamps, the pool's accounting unit by unit); snapshots taken, read twice
// and closed by goroutines beside writers; the copy rules' versions through
// Close, splices and Vacuum; Restamp under a tiny stamp limit and freed
// units poisoned; a capped pool running out in inserts and in the copies a
// snapshot forces; the device methods against the CPU backend; version
// indexes, dense and thinned, read through every path and held to their
// chains through Restamp and closes (and absent with NoVersionIndexes;
// under CopyAlways the writers still walk). They run on
// the CPU emulation of the GPU (internal/emu) in every go test, and on a GPU
// (scripts/gpu-test.sh): all passed on an H200 at every device run (the
// last at 4634b49). Also tested since: after every Vacuum, every
// linked version is one an open snapshot sees (the chains walked, under
// each copy rule), and the latest version's Range and iterators beside
// writers answer one state of the tree (both passed on an H200 at c0a9fc1). `warp bench mvbtree` measures the spec's Fig 4.2 and
// snapshot rows (docs/benchmarks.md, "btree and mvbtree: what the writers
// spend their time on"): latest finds at 6.7 G keys/s, 0.99x btree's
// (met); snapshot finds 4.8 G/s; snapshots taken and closed in 0.4-1.0
// microseconds (≤ 200 µs: met); builds 0.45 G keys/s (ViB) and 0.25 (VoB), 0.73x and 0.37x
// btree's at d4a026d. With plain batches and prepared growth (aa1b40f) ViB
// builds run at 0.54-0.57 G keys/s, 0.88-0.95x btree's over four runs
// (0.70x in the same runs before them): the 0.9x is on the line, its 0.6 G/s missed
// (btree's own builds average 0.60 there, its 1M-key build 0.26-0.31);
// 64-bit ViB builds 0.45 G/s, 0.89x btree's (docs/benchmarks.md, "plain
// write batches"). VoB builds through the plain kernels with a copy per
// write (634c259) run at 0.34-0.37 G keys/s over five runs (0.35: on the
// line), 0.53-0.55x btree's (met; 0.25, 0.38x in the same runs before),
// 64-bit 0.31, 0.59x (docs/benchmarks.md,
// "VoB builds through the plain kernels"). Insert batches large against
// the tree run in rounds (f5ff39c, as btree's: blinknode.Rounds, the tree
// estimated from its pool's units in use less its retired ones; a first 2^20 batch into an empty
// tree took 3.8-4.2 ms in one launch, 2.1-2.2 in rounds), and PlainCopy
// batches reserve the copies their splits take (32f4f15): over thirteen runs
// ViB builds 0.75-0.80 G keys/s (the 0.6 met), 0.86-0.92x btree's, whose
// builds take the same rounds (the 0.9 on the line, met in eight; 0.82-0.89x
// at 16M-45M keys, the steady batches); VoB 0.42-0.47, 0.49-0.52x (met);
// 64-bit ViB 0.56 G/s, 0.70x the 32-bit rate, VoB 0.73x (met for builds)
// (docs/benchmarks.md, "insert batches in rounds"). Those runs drew the
// keys on the host; with the bench's device-generated keys, all distinct,
// btree builds ~4% faster and ViB does not, so ViB is 0.87-0.89x btree's
// (an A/B of the two key sources, docs/benchmarks.md "device keys against
// host keys"). What is left of a plain
// build against btree's is in its kernel: 16% more instructions executed
// (the SlabAlloc allocator, 13 pairs a node against 14, the pool's checks)
// — before plain batches, ncu's per-line profile
// shows both trees' writers bound by their tile collectives — shuffles and
// ballots under a tile's run-time mask, each group followed by the JIT's
// convergence check — rather than by memory or issue; mvbtree's insert
// kernel executes 29% more instructions (the version's decode, the
// allocator, the versioner's hooks, spills at its 64-register bound), none
// of them a hot spot. Descents now take a ballot and a shuffle a level to
// find a child (was two ballots and four shuffles), and routing reads leave
// the version undecoded: both trees' writers 10-19% faster, the ratio
// unchanged. The insert kernels run one warp a block (deletes 256 threads). Node
// pools are flat (slaballoc Options.Flat: super blocks mapped into one
// reserved range at 2^24 units apart), so a node's pointer is base +
// address x node size, as in btree's dense array, and a lane's chunk of a
// node is its own base + address x node size (blink.cuh's chunk): the
// lockstep find loop takes 146 SASS instructions a level (btree's: 151).
// Snapshot lookups walked newest-first chains, one dependent load a
// version, so the oldest of k = 8 or 64 snapshots read at 0.24x and 0.09x
// the latest; with version indexes (see Readers) they read at 0.44x and
// 0.33x (1.65x and 3.35x as fast as without, in the same run). The spec's
// 0.8x stays missed for k = 8 and 64: a snapshot's query reads three units
// a level where the latest reads one; and it is on the line for k = 1
// (0.68-0.80x over 4M-45M inserts, 0.89x over 1M), where a query reads two
// (head and version). Meeting it would take a snapshot's own path to its
// versions (each head knowing where every open snapshot's version is, or
// the snapshot its own copies of the inner nodes), which head-addressed
// chains do not give. Indexes cost writers: with 8 or 64
// snapshots open, inserts run at 0.72x and 0.79x their rate with
// Options.NoVersionIndexes (docs/benchmarks.md, "version indexes"). 64-bit
// finds run at 0.54x the 32-bit ones, as btree's: both read twice the node
// bytes a level (wider lockstep waves did not help).
//
// # Departures from the spec (shared/docs/specs/mvbtree.md)
//
//   - Snapshot.Close is not idempotent: a second Close returns ErrClosed,
//     as docs/CONTRACT.md has every Close do.
//   - Version() numbers snapshots from 0 in the order they were taken (a
//     64-bit count of the host's); the device stamps and their Restamp stay
//     inside.
//   - No unstamped (TBD) versions: snapshots are host-scoped and taken while
//     no write batch runs, so every version is stamped when written. The
//     thesis's per-operation snapshots, which need them, are the next
//     issue's (M4), with Apply, Options.BagSize and VacuumPinnedBytes.
//   - A copy keeps the head's latch bit set for good: it marks a version (no
//     writer latches one), so unit scans (Vacuum, Restamp, Stats) tell heads
//     from versions without a flag of their own.
//   - The registry of open snapshots is uploaded per lane when it changed,
//     not rewritten between launches; its stamps are distinct.
//   - Node pools are flat SlabAlloc pools (the spec's SlabAlloc with its
//     super blocks mapped into one reserved address range): a device
//     without the driver's virtual memory management cannot run the CUDA
//     backend (New fails with errors.ErrUnsupported).
//   - Generations (one SlabAlloc pool per Build/Compact) instead of freeing
//     an old tree node by node: the spec does not say how Build treats open
//     snapshots.
//   - Restamp renumbers to 1 + rank (the spec: rank), so that 0 stays below
//     every stamp.
//   - The CUDA backend's AscendRange, AscendGreaterOrEqual and All take
//     their transient snapshot when the loop starts (the CPU backend's when
//     the method is called), so an iterator that is never run pins nothing;
//     iterators read in chunks of 4096 pairs, and a device error or a done
//     ctx ends the loop early — before its first pair when the transient
//     snapshot cannot be taken (an iter.Seq2 has no way to report it; a
//     lost device fails the structure's next call). The CPU backend's
//     iterators, over an in-memory snapshot, run to the end.
//   - A Restamp that fails on the device after renumbering some
//     generations leaves the tree broken: every later call returns
//     ErrBroken (Close still frees it). Generations no snapshot reads any
//     more are freed by the next exclusive operation (or at once when no
//     batch runs), not inside Snapshot.Close.
//   - The latch and seqlock follow the PTX memory model (blink.cuh's latch
//     protocol, shared with btree); routing reads of writers are strong loads.
//   - Options.Streams is the CUDA backend's lanes (concurrent batches), as
//     btree's.
//   - No in-link counts on versions (decision 1): a split's new right node
//     is a head with no older versions, so no version is shared by two
//     heads; a snapshot from before the split reaches the moved pairs
//     through the left node's version (its parent's version routes there).
//   - Open snapshots are not capped at 4096 (decision 1): the registry
//     grows with them.
//   - Version indexes (Readers, above) are not in the spec; with them a
//     chain holds index units beside versions (Stats.VersionIndexes,
//     Options.NoVersionIndexes), and the memory bound gains one per head.
//   - Launch epochs free a batch's retired units with a free launch of
//     their own (slaballoc's free kernel) queued before the next write,
//     Vacuum, Check or Restamp, not fused into the writer's prologue
//     (decision 7a).
//   - The in-kernel DEBRA layer (decision 7b: internal/devcode/ebr.cuh,
//     internal/ebr) is built and tested on its own (churn with freed units
//     poisoned, overflow that leaks and counts); its bag size is a template
//     argument and its overflow the caller's. No kernel of M1-M3 is
//     persistent, so mvbtree reclaims by launch epochs alone and
//     Stats.ReclaimLeaked counts the retires a full log could not record.
//   - Restamp runs inside Snapshot when the epoch nears 2^31 (decision 5:
//     before any launch that could push it there): host-scoped snapshots
//     are the only thing that advances it.
//   - Check verifies every version's order and fences, chains, indexes and
//     the latest generation's pool accounting; that every linked version
//     is pinned after Vacuum is checked by the tests (checkVacuumed), not
//     by Check, which may run while closed snapshots' versions still wait
//     for a writer or Vacuum.
//   - The differential tests hold both backends to a model per version (a
//     Go map for each snapshot), not the GPU backend to the CPU backend
//     directly; the device methods are compared with the CPU backend.
//   - MaxPoolBytes is per generation, and without it a pool holds 16M
//     nodes (Options).
//   - Names: AscendRange, AscendGreaterOrEqual and All (google/btree's and
//     btree's vocabulary) for the spec's Ascend; Range returns
//     *warpkit.Ranges, which btree's Range returns too.
//   - The 128-byte node keeps its version after its 13 pairs (slots 30-31),
//     not in its header: every layout's pairs then start at a lane boundary,
//     which took the lockstep find loop from 207 to 176 instructions per
//     level (btree's: 151) and finds from 0.77x to 0.92x btree's.
package mvbtree
