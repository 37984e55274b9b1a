// Package lsm is the GPU LSM: a dynamic dictionary for batches of updates and
// queries, after Ashkiani, Li, Farach-Colton, Amenta and Owens, "GPU LSM: A
// Dynamic Dictionary Data Structure for the GPU" (IPDPS 2018), with the same
// API on a pure-Go backend.
//
// # Structure
//
// An LSM with batch size b holds levels of b·2^i entries, each either full or
// empty: with r batches resident, the full levels are the set bits of r. Each
// level is a sorted run of (key, tag) entries; a tag holds a tombstone bit and
// the slot of the entry's value in a value log. Inserting a batch sorts it and
// merges it down through the full levels to the first empty one (a binary
// increment of r), so an entry is merged O(log r) times over its life. Deleting
// inserts a tombstone. Stale entries (replaced or deleted) stay until Compact.
//
// Batches need not have b entries. Beside the levels sits a staging run: a
// sorted run of fewer than b entries, newer than every level, that queries
// search first. An update sorts its batch, merges it with the staging run
// (the batch is newer) and, once b or more entries have gathered, sends the
// top multiple of b of them into the levels as chunks of b; the rest (the
// lowest keys) stays staged. So memory follows what was inserted: 3,000
// one-key insertions hold 3,000 entries, not 3,000 batches of b.
//
// On the GPU an insertion of one batch is a handful of launches on one
// stream and a single synchronization at the end, with nothing read back in
// between: one kernel prepares the batch, one sorts it (prim's fused radix
// sort runs every pass in one launch for batches of up to 2^19 entries with
// 32-bit keys, 393,216 with 64-bit keys), one merges it with the staging run
// when that is not empty, and one merge per full level it passes (prim's
// merge finds its tile splits itself). At the paper's small batch sizes the cost of an insertion is this
// fixed latency, not bandwidth, so the number of launches is what was cut.
//
// # Batch semantics (§III-A of the paper)
//
// Updates come in mixed batches of insertions and deletions ([LSM.Update]):
//
//  1. the batch size b fixes the level sizes (Options.BatchSize);
//  2. a batch of any size is accepted (the paper required exactly b): it is
//     sorted as a whole and merged with the staging run, and what reaches b
//     enters the levels as consecutive sorted chunks (see Structure);
//  3. across batches the later batch wins;
//  4. among several insertions of one key in a batch, the last in the batch wins
//     (the paper allows any one; we choose, deterministically);
//  5. deleting a key hides every earlier instance; deleting it several times in
//     one batch is one deletion, and deleting an absent key is a no-op;
//  6. a key both inserted and deleted in one batch is deleted, whatever the order.
//
// Updates and queries are separate phases: methods may be called from several
// goroutines; updates are serialized and exclude queries, queries run
// concurrently (each on its own CUDA stream on the GPU backend).
//
// # Queries
//
// Lookup, Count and Range follow the paper (see the departures below for short
// ranges). Lookup searches levels newest
// first; the first entry of the key's segment in the newest level that has the
// key decides. Count and Range use the paper's five stages: per-level bounds,
// a scan of the per-(query, level) candidate counts, a gather of candidates, a
// segmented sort that brings every key's entries together newest first, and a
// validation that keeps the first entry of each key unless it is a tombstone
// (Range then compacts). Successor(k) (the smallest live key > k) and
// Predecessor(k) (the largest live key < k), which the paper left out, keep a
// cursor per level and skip dead keys; their cost grows with the number of
// distinct dead keys skipped, which Compact removes.
//
// # Departures from the paper
//
//   - The whole key range is usable: no reserved keys. The paper stole the low
//     key bit for the status; we keep the status in the tag (bit 31) beside the
//     key. A merge then moves the key plus a 32-bit tag, and values are written
//     once, to the value log, instead of moving with every merge. warp bench lsm
//     measures this layout against a status bit inside a widened 64-bit key and
//     against a status byte kept in a separate array (see "status layout").
//   - Within a key, a stable sort of the batch in reverse order puts the last
//     insertion first; a fix-up pass then turns the head of every key segment
//     that contains a tombstone into a tombstone (semantics 6), instead of the
//     paper's radix sort on the status bit.
//   - Short ranges skip stages 2-4. For a chunk of queries whose ranges all hold
//     at most 128 candidates, one kernel computes the per-level bounds (stage 1)
//     and merges the per-level runs in registers, validating each key by its
//     newest entry exactly as stage 5 does (and, for Range, a second pass writes
//     the pairs at scanned offsets). This avoids the gather, the segmented sort
//     and several kernel launches and host round trips per chunk; a chunk with
//     any longer range goes through the five stages.
//   - In the five-stage pipeline, stage 5 assigns one thread per candidate
//     (finding its query by a search narrowed per block) and adds per-query
//     counts with warp-aggregated atomics, instead of one warp per 32 queries.
//   - Count and Range process queries in chunks so that the candidates of a
//     chunk fit a memory budget; any number of queries and any range widths
//     are accepted.
//   - Nothing is padded: batches shorter than b wait in the staging run (the
//     paper padded them to b), and Compact (the paper's cleanup) puts the live entries beyond the
//     last multiple of b (the smallest keys) in the staging run.
//
// # Limits and errors
//
// At most MaxResident (2^31-1) entries may be resident (r·b plus the staging
// run, including stale entries) and at most MaxLogged (2^31) values logged between
// cleanups (deletions-only batches log none); beyond that an update fails
// with ErrInvalidArgument (call Compact) and nothing is applied. Device memory
// exhaustion wraps ErrOutOfMemory. An update allocates what it needs before it
// changes anything, so ErrOutOfMemory leaves the structure as it was. Only a
// failing kernel launch or wait (a driver error) can stop an update or a
// cleanup after it has begun to change the levels; that call and every later
// one then return the error (the structure is unusable: close it).
//
// Every call waits for the device work it enqueued before it returns, also
// when it fails. An error from that wait is a device fault (a kernel trap or
// an illegal address), which is sticky: the CUDA context is lost for the whole
// process and the structure's contents are undefined (a cleanup may have
// rewritten part of the levels); close it. Use after Close gives ErrClosed.
// Device-resident methods on the CPU backend give ErrInvalidArgument.
//
// Results returned as Go slices belong to the caller. A warpkit.DeviceRanges belongs to
// the caller, who must Free it.
package lsm
