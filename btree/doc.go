// Package btree is an ordered map from K to V on the GPU: the B-link tree of
// Awad, Ashkiani, Johnson, Farach-Colton and Owens, "Engineering a
// High-Performance GPU B-Tree" (PPoPP 2019; chapter 3 of Awad's thesis), with a
// pure-Go backend (github.com/tidwall/btree) of the same semantics. It follows
// the structure contract of warpkit (docs/CONTRACT.md), with the departures
// listed below.
//
//	t, err := btree.New[uint32, uint32](btree.Options{}) // CUDA if a device is present
//	if err != nil { ... }
//	defer t.Close()
//	err = t.Insert(ctx, keys, vals)
//	err = t.Lookup(ctx, keys, out, found)
//	err = t.Count(ctx, los, his, counts)   // keys in [los[i], his[i])
//	r, err := t.Range(ctx, los, his)       // *warpkit.Ranges: r.Query(i), r.Pairs(i)
//	seq, err := t.AscendRange(ctx, 100, 200)     // iter.Seq2 over [100, 200)
//	seq, err = t.AscendGreaterOrEqual(ctx, 100)  // [100, max], the largest key included
//	err = t.Apply(ctx, btree.Ops[uint32, uint32]{
//		Kinds: []btree.OpKind{btree.OpInsert, btree.OpLookup, btree.OpCount},
//		Keys:  []uint32{7, 3, 0},
//		Vals:  []uint32{70, 0, 0},
//		His:   []uint32{0, 0, 100}, // OpCount: [0, 100)
//	}, btree.Results[uint32, uint32]{Found: found3, Vals: vals3, Counts: counts3})
//
// # Operations
//
// Batches from Go slices (parallel slices of one length) or device-resident
// cuda.Slices (the *Device methods): Build (bulk build: sort, then fill leaves
// 10/14 and internal nodes 12/14 bottom-up), Insert (insert or replace), Delete
// (no merging of underfull nodes, as in the paper), Lookup, Count and Range
// over half-open [lo, hi) (per-query offsets; results as warpkit.Ranges or
// device windows), Successor and Predecessor, Apply (mixed batches as parallel
// slices, one kernel), Compact (rebuild into fewer nodes after deletes; the
// pool keeps its size), Len, Stats and Check (the structural checker).
// Iteration: AscendRange over [lo, hi), AscendGreaterOrEqual over every key
// >= lo (the one way, with All, to reach the largest key of K, which no
// half-open range holds), All.
//
// A range with lo >= hi is empty (count 0); hi = 0 is therefore always empty.
// The kernels compare against the upper bound exclusively, so the bounds are
// the same on both backends and in CountDevice, RangeDevice and OpCount.
//
// # Keys and values
//
// K and V are uint32 or uint64, in any combination, and every key value is
// usable: there are no reserved keys. The paper took the most significant bit
// of keys for the latch and leaf flags (31-bit keys); here those live in a
// per-node meta word beside the count, and "no right sibling" is a null link
// rather than a sentinel high key.
//
// # Errors, closing and context
//
// Errors are warpkit's values (match them with errors.Is), prefixed
// "btree: method: ". Slices of different lengths, an op kind above OpCount
// and negative options wrap ErrInvalidArgument, and nothing is applied; the
// Device methods on the CPU backend return ErrNeedsCUDA. After Close, every
// method but Backend returns ErrClosed, a second Close included; Close waits
// for the calls in flight.
//
// A context that is done when a call starts stops it before anything is
// applied. Long calls check it again between their stages and loops: the CPU
// backend every 4096 batch elements (or keys a range walks), the CUDA backend
// between the kernel passes of a call (a range batch's count and collect
// passes, a writing batch's re-runs after the pool grew, a build's sort and
// its install), not inside a kernel: a batch from Go slices is one launch.
// A cancelled call returns the context's error. A cancelled Insert, Delete or
// Apply has applied some of its elements (each whole; on the CPU a prefix, and
// Apply's results of the rest are not written); a cancelled Build or Compact
// leaves the old tree. The tree stays consistent and usable either way.
//
// # Departures from the contract
//
//   - No per-element failure results. A writing batch (Insert, Delete, Apply
//     and their Device twins) that fails with ErrPoolExhausted (at
//     Options.MaxNodes) or ErrRetryLimit, or with ErrOutOfMemory when the
//     device cannot hold a larger pool, has applied some of its operations,
//     each whole, and says not which: the contract's ErrOutOfMemory leaves
//     the structure as it was, a btree batch may be half done (inserts and
//     deletes are idempotent, so re-running the batch is safe). Apply reports
//     found flags as the ordered dictionaries do.
//   - Build and Compact lay the new tree out in place when the pool has room:
//     a device error in the middle leaves the tree empty (see Bulk build).
//   - AscendGreaterOrEqual runs two batches on the CUDA backend (the range to
//     the largest key and a lookup of it): a writer running beside it may
//     change the largest key in between.
//   - Stats.Nodes is 0 on the CPU backend (the Go B-tree does not count its
//     nodes), and Stats.Height counts that tree's levels (0 when empty), whose
//     nodes hold up to 127 keys rather than 14.
//   - The CUDA backend collects at most 2^32-1 pairs per Range batch (the
//     device offsets are 32-bit); more is ErrInvalidArgument.
//
// # Node layout
//
// A node holds 14 pairs and a header {meta, link, low, high}: 128 bytes (one
// cache line) when keys and values are 32-bit, 256 bytes when either is
// 64-bit. For 64-bit we chose 256 bytes over 128 because a 128-byte node would
// hold only 7 pairs: the tree would be about 1.5 times taller and every
// operation pays a dependent memory round trip per level, while the second
// cache line of a 256-byte node is fetched in the same round trip (the same
// instruction). Both layouts therefore have fanout 14 and the same height.
// A node is read by a cooperative tile of 8 lanes (128 B) or 16 lanes (256 B),
// each loading 16 bytes, rather than the paper's full warp with one word per
// lane: the whole node arrives in one coalesced request.
//
// # Phased queries walk in lockstep waves (departure from the paper)
//
// The paper's warp-cooperative work sharing has each lane bring an operation
// and the warp perform its lanes' operations one after another, one node in
// flight per warp. Batches that may run beside writers (writes, validated
// queries, mixed batches) instead give each tile one operation of the batch: a
// queue per tile had made 2^16-key insert batches about twice as slow for
// want of parallelism (docs/benchmarks.md), and a mixed batch still
// has any operation at any position, all in one kernel. There every
// shuffle and ballot takes the tile's mask, known only at run time, which
// the JIT follows with a convergence check; these collectives, not memory,
// are most of a writer's time (ncu, docs/benchmarks.md), so a descent finds
// a child with one ballot and one shuffle a level (blink.cuh's child_for).
//
// Phased query batches (no writer can run, see Batch semantics: the tree is
// quiescent and every leaf at the same depth) walk in lockstep waves: a warp
// takes 4 queries per tile (16 queries per warp for 128-byte nodes, 8 for
// 256-byte ones) and walks them all from the root to their leaves level by
// level together, issuing the 4 loads of a tile before it searches any of
// them, through the non-coherent cache. Every shuffle and ballot is warp-wide
// with all lanes converged, so one instruction serves all the tiles of the warp
// and there are no per-tile masks or divergence checks; the leaf search, the
// side-link walks of successor and range and predecessor's re-descents below an
// empty leaf run in lockstep too. The kernels run on a persistent grid (as many
// blocks as fit on the device) and take waves grid-stride. A node that is not as
// a quiescent tree has it (wrong level, key outside the fences, a link outside
// the pool), which a correct tree never shows, sends that query to the generic
// operation. This made phased lookups, ranges and successors three to four
// times as fast as the generic walk (docs/benchmarks.md). Keys and values
// stay interleaved in a node and no levels are cached in shared memory: a tile
// fetches a whole node in one request either way, and the top levels that a
// shared-memory copy would hold (about 30 KB at 45M keys) stay in L1.
//
// The same lockstep walk for writes and mixed batches (each tile then finishing
// its operations with the generic operation from the leaf the walk found)
// stalled on an H100 once warps ran several waves (a 65536-key insert batch
// took tens of seconds), most likely because the tiles of a warp, converged at
// each operation, wait at the compiler's convergence points inside the generic
// operation while one of them holds a latch that another spins on. It is not
// used; those batches keep one operation per tile.
//
// Options.SortQueries, when positive, sorts phased batches of at least that
// many queries by key on the device first (prim's radix sort of key-position
// pairs), so that neighbouring lanes share root-to-leaf paths and leaves; each
// result is written at its query's original position. It is off by default:
// the sort cost more than the shared paths saved at every size measured
// (docs/benchmarks.md).
//
// Node memory is a pool of our own (one device buffer; node 0 is the root,
// which is split in place so it never moves). A writing batch that runs out of
// nodes is re-run in a pool at least twice as large (inserts and deletes are
// idempotent) until it fits; concurrent batches that ran out of the same pool
// grow it once. At Options.MaxNodes (at most 2^32-2^17-1 nodes: node indices
// are 32-bit) the batch fails with ErrPoolExhausted, and when the device
// cannot hold the larger pool with ErrOutOfMemory; either way it has applied
// only whole operations (some of them) and the tree stays valid. The pool
// never shrinks: Compact packs the pairs into fewer nodes and leaves the rest
// of the pool for later inserts.
//
// # Concurrency protocol (the paper's §3 and §4.1, and where we depart)
//
//   - One write latch per node (a bit of meta, set by atomicOr), taken only to
//     modify the node; readers take no latch. A writer fences after latching,
//     re-reads the node, writes, fences and releases by storing a new meta
//     whose version is one higher. The tile's other lanes are ordered against
//     the lane that latches and releases as the PTX memory model defines it:
//     the latching lane's atomic and fence precede a tile barrier that every
//     lane's later access follows, and the releasing lane fences after the
//     barrier that every lane's writes precede (a shuffle alone does not
//     synchronize at GPU scope).
//   - Side links and high keys (B-link): every traversal moves right when its
//     key is at or past a node's high key.
//   - Proactive splitting: an insert splits every full node it meets on the way
//     down, latching the node and then its parent; the new right node is
//     written completely and fenced before the parent and the split node point
//     to it. A full root is split in place (its pairs move to two new nodes).
//     A full leaf that already holds the key is not split: the insert
//     replaces the value in place, so a batch of pure updates needs no room
//     (TestGPUReplaceInFullLeaves: updates succeed in a pool at MaxNodes).
//   - Restarts instead of spinning: a failed latch on a leaf or full node
//     restarts from the last-known parent; a parent that is no longer the true
//     parent restarts from it; a full parent or an unknown parent restarts from
//     the root. Of the paper's three spin cases, (1) the parent latch during a
//     split is a bounded spin (256 tries with backoff, then a restart), and (2)
//     moving right after latching and (3) the delete latch are restarts. Every
//     loop is bounded: a descent, an insert, a delete or a predecessor gives
//     up after 131072 node visits, restarts included (a phased predecessor
//     after 131072 descents); a successor or range walk along the leaves after
//     131072 plus the pool's node count (a range may cross every leaf); a
//     validated leaf read after 16384 tries; the parent-latch spin after 256. Past a bound the batch
//     fails with ErrRetryLimit. No kernel waits without bound:
//     TestEmulatedRetryLimit and TestGPURetryLimit corrupt nodes on the
//     device (leaves linked to themselves or to each other, a child entry
//     pointing at the root) and every operation that meets them, phased or
//     validated, read or write, returns ErrRetryLimit; Check names the
//     damage, and the tree works again once the bytes are restored.
//   - Departure: routing does not trust a node read without a latch. Each node
//     carries an immutable low fence and level; a traversal that lands on a
//     node of the wrong level or whose low is above its key (a torn or stale
//     read of a parent) restarts from the root, and child pointers outside the
//     pool are rejected. Writers and validated queries route with strong
//     loads (other writers change the nodes they read: weak loads there
//     would be a data race in the memory model); phased queries, which run
//     with no writer, read through the read-only cache.
//   - Departure: queries that may run beside writers read leaves with a
//     seqlock (acquire meta, read, fence, re-read meta; retry if latched or
//     changed; every lane of the tile validates its own chunk), so a pre-existing key that no operation of the batch updates is
//     always found, even while its leaf is being modified. The paper's queries
//     read leaves without validation.
//
// # Batch semantics
//
// Query batches (Lookup, Count, Range, Successor, Predecessor) that run while no
// writing batch runs are phased: they see the tree as it is, and read through
// the read-only data cache. Batches from concurrent goroutines use separate
// streams; a writing batch waits for running unvalidated query batches, and
// queries that start while a writer runs use the validated mode instead.
//
// Within one Insert batch, a key that appears several times gets the value of
// one of its pairs (the last on the CPU; unspecified on the GPU). Deleting an
// absent key does nothing.
//
// An Insert batch that is large against the tree runs in rounds (a departure
// from the paper, which launches every batch once): consecutive launches of
// the insert kernel on the batch's stream, each growing the tree at most 8x
// (internal/blinknode.Rounds; the tree estimated from its nodes in use). In
// one launch into a tree of few leaves, every operation queues on their
// latches while they split one at a time: a 2^20-key batch into an empty
// tree ran its kernel for 3.5 ms on an H200, the next 2^20 keys for 1 ms; in
// rounds the first takes 1.8 ms (docs/benchmarks.md, "insert batches in
// rounds"). The rounds share the batch's status and re-run together when the
// pool runs out. Deletes and mixed batches run in one launch.
//
// # Mixed batches (§5.6)
//
// Apply runs a batch whose elements are any of lookup, insert, delete,
// successor, predecessor and count (of [Keys[i], His[i])), given as parallel
// slices (Ops, with the outputs in Results; DeviceOps and DeviceResults on
// the device), in one kernel. As in the paper: every key
// that the batch does not update is seen by the batch's queries exactly as it
// was before the batch; results that involve keys the batch updates (a lookup of
// a key the batch also inserts or deletes, a successor whose answer is being
// inserted) depend on the order in which the hardware schedules the operations
// and may reflect any of them. The CPU backend applies the batch in order, which
// is one of the allowed outcomes. Insert and delete results carry no
// information (a batch may be re-run after the pool grows). For strictly
// ordered semantics, use phased batches.
//
// Range queries are not a kind of Apply element: their output is of variable
// length and needs offsets computed before the kernel runs (a count pass), so
// they run as batches of their own (Range, RangeDevice); count is the form a
// range takes inside a mixed batch.
//
// # Concurrency of methods
//
// All methods are safe for concurrent use. Every batch (queries, writes,
// mixed batches, from Go slices or device buffers) runs beside the others:
// the tree coordinates them itself (see Batch semantics). Build, Compact,
// Check and Close take the tree exclusively (other calls wait). Returned
// slices and Ranges belong to the caller. Device-resident variants return
// ErrNeedsCUDA (an ErrInvalidArgument) on the CPU backend; their buffers must
// stay allocated until the call returns.
// Device-resident input that the host cannot read is checked on the device:
// RangeDevice's kernels leave a window that decreases or passes the end of the
// output buffers empty, and ApplyDevice runs a check of the kinds ahead of the
// batch kernel, which then applies nothing of a batch holding an unknown kind;
// either call returns ErrInvalidArgument.
//
// # Bulk build
//
// BuildDevice sorts on the device with package prim's stable radix sort (in
// place: it reorders the caller's buffers), keeps the last pair of each key with
// prim's selection, and lays out the nodes on the GPU, one tile per node, level
// by level. Build from Go slices uploads the pairs and takes the same path (the
// caller's slices are not reordered); only when the device sort cannot run
// (more than prim.MaxElements pairs, or too little device memory for its
// scratch) does it sort on the host (LSD radix, the same order and the same
// last-wins rule) and upload the distinct pairs. The sort's device scratch
// (about the pairs' size again) is freed before the build returns. The paper
// fills nodes 8/15;
// we fill leaves 10/14 and internal nodes 12/14.
//
// When the new tree needs a larger pool (its nodes plus half again), Build
// lays it out in a new pool and swaps that in only on success, so a failure
// leaves the old tree. Otherwise (and when the device cannot hold the larger
// pool but the tree fits the current one) Build and Compact lay the tree out
// in place, over the old nodes: a device error there (a kernel launch or
// synchronisation failure, which usually means the CUDA context is lost)
// resets the tree to empty, and the error says so. Errors found before
// anything is written (a cancelled context, MaxNodes, device memory for the
// staging buffers) leave the old tree.
//
// # Known limitations
//
// None known. (The last, the routing rule "load a node, check it, move
// right past its high key" written out at every routing step of the core,
// is one pair of checks since 4634b49, blink.cuh's misread and past_high,
// which mvbtree's snapshot descent shares: measured on an H200 against the
// code before it, every figure within 2%; docs/benchmarks.md.)
package btree
