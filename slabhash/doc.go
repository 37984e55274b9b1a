// Package slabhash is the slab hash of "A Dynamic Hash Table for the GPU"
// (Ashkiani, Farach-Colton, Owens, IPDPS 2018; also the slab-hash chapter of
// Awad's thesis, 2022): a fully concurrent hash table with chaining whose
// bucket lists are slab lists grown through SlabAlloc (package slaballoc).
// It offers Map[K, V] (unique keys: insert-or-replace, delete, find),
// Set[K], and MultiMap[K, V] (duplicates: insert, count, search-all,
// delete-one, delete-all), K and V each uint32 or uint64, on the GPU or on a
// pure-Go backend with the same semantics.
//
// # Batches and results
//
// Every operation is a batch: Go slices (staged through pinned memory, in
// chunks of up to 1M elements) or device-resident cuda.Slices (Device
// variants; no copies; a MultiMap search-all there is two calls, CountDevice
// and then LookupAllDevice into the rooms the caller laid out from the
// counts). Apply runs a mixed batch — each element its own
// find, insert or delete — in one kernel with the paper's warp-cooperative
// work sharing: each tile of lanes serves its lanes' operations one at a
// time. The elements of a batch run concurrently: each is linearizable, and
// elements on the same key take effect in some order the batch does not fix
// (use separate batches to order them; the CPU backend applies index order,
// one of the allowed orders). Results report per element: Inserted (new),
// Present (Map: value replaced; Set: left), Removed, Found, NotFound, or
// Failed. Batch calls are synchronous and safe for concurrent use: each holds
// one of Options.Streams streams with its own staging buffers.
//
// Reserved keys: all ones (empty) and all ones minus one (deleted). A batch
// holding one fails with warpkit.ErrReservedKey before anything is applied:
// Go slices are checked on the host, device slices by a scan kernel that the
// batch kernel, queued behind it, reads before touching the table. Unknown
// op codes are rejected the same way with ErrInvalidArgument. Device batches
// of finds only (Map.LookupDevice, Set.LookupDevice) skip the scan: a find changes
// nothing, so the find kernel itself fails the elements holding a sentinel
// (they would otherwise match empty or deleted slots) and the batch returns
// ErrReservedKey; its outputs are then unspecified.
//
// Failures: when the allocator is exhausted at its maximum (MaxPoolBytes),
// inserts that needed a new slab return Failed, the batch returns
// ErrPoolExhausted, every other element is applied, and the table stays
// consistent; Delete plus Compact give the memory back. Kernels bound every
// loop; a bound that is hit becomes ErrRetryLimit. Before reporting
// exhaustion the host grows the pool (between launches) and reruns only the
// failed elements.
//
// Pool sizing: the pool starts with room for the overflow slabs expected at
// ExpectedSize entries plus a quarter more (deletes leave tombstones that
// hold their slots until Compact, so churn needs slabs beyond the live
// entries), and a growth step adds at least half the super blocks the pool
// has (slaballoc), so a growing table takes few steps: each waits for the
// kernels in flight and synchronizes the device, which costs far more than a
// batch. Before a launch the host reserves slabs for the batch's inserts,
// estimated from the slots in use (live entries plus tombstones); a mixed
// device batch, whose ops the host does not see, reserves for the share of
// inserts the previous one had, at least a quarter. Stats reports the
// tombstones, the growth steps and the reruns.
//
// # Layouts (CUDA)
//
// A slab is the list node: a few slots and a 32-bit next pointer (a
// SlabAlloc address). Bucket heads are a separate array of slabs.
//
//   - LayoutPaper: the paper's 32/32 layout — a whole warp reads a 128-byte
//     slab, one 32-bit word per lane: keys in even lanes 0..28, values in odd
//     lanes, lane 30 unused (the paper's auxiliary lane), lane 31 the next
//     pointer; 15 pairs. For 32-bit sets: a warp reads 128 bytes of 31 keys.
//   - LayoutTile8, LayoutTile16 (pair layouts): a tile of 8 or 16 lanes, one
//     slot per lane read with one vector access; the last lane's slot holds
//     the next pointer. 32/32 pairs are 8-byte slots (64-byte slabs of 7
//     pairs with 8 lanes; 128 bytes of 15 with 16 — the paper's bytes, read
//     by half a warp); wider pairs are 16-byte slots (a 32-bit key or value
//     is padded), sets use key-sized slots.
//
// Why tiles: a one-probe open-addressing table reads one 32-byte sector per
// lookup where a warp-per-128-byte slab reads four, and a warp that serves
// one operation at a time has one memory access in flight. The default
// (LayoutAuto) is LayoutTile8, the fastest correct configuration measured:
// on an H100 at n = 2^22 and 60% utilization it built at 6.7 G/s and found
// at 13.3 (all present) and 10.4 G/s (none present), against 5.4/10.4/8.4
// for LayoutTile16 and 3.5/4.7/5.6 for LayoutPaper (`warp bench hash`,
// commit bcae406, before the round engine refilled its lanes and when a
// driver call cost 18.5 µs; docs/benchmarks.md). The paper's layout stays
// available.
//
// Measured since (H100, commit 7040164, the refilling engine): the
// concurrent mix Γ1 = (.2, .2, .3, .3) on 2^22 keys at 60% runs at 3.6 G
// ops/s in batches of 2^20, 0.67x the static open-addressing table running
// the same batches at the same footprint (it was 2.1 G ops/s before; no
// pool growth inside the timed calls now). One call of one element costs
// about 94 µs (find) to 133 µs (insert, mixed) there, against 50 to 103 µs
// for the static table, so batches of 2^20 are still dominated by per-call
// cost.
//
// # Two engines (CUDA)
//
// The paper's layout (and 32-bit sets with 32-lane tiles) run the paper's
// warp-cooperative work sharing: the warp takes its lanes' operations one
// at a time and walks each list with warp-wide ballots and shuffles.
//
// The tile layouts run a round engine. Running independent tiles of 8 or 16
// lanes inside a warp does not pay: their paths diverge, the compiler then
// emulates every partial-mask shuffle and ballot (WARPSYNC.COLLECTIVE), and
// each tile still has one access in flight — measured on an H100, 8-lane
// tiles were no faster than whole warps. Instead every lane owns one
// element and control flow stays uniform over the warp, so every intrinsic
// uses the full mask. In each round every unfinished element advances by one
// slab: the W lanes of a tile read one element's slab, 32/W elements per
// load instruction, and all loads of a round are issued before any is used
// (32 slab reads in flight per warp). Then each lane acts on its own element
// — a CAS on its slot, a step to the next slab, or a request for a new slab,
// which the warp serves for all requesting lanes with one allocation
// (SlabAlloc's allocate_many); an insert that links the new slab claims its
// first slot at once, without reading it. A lane whose element is done takes
// the warp's next element before the next round (refill): without it a warp
// ran as many rounds as its slowest element — nearly every warp of 32 finds
// has one whose key sits in a second slab — with the other lanes idle. An
// insert whose claim loses tries the next empty slot of the same read at
// once (see the protocol); other CASes that lose re-read that slab in the
// next round. The protocol below is the same for both engines; only the
// scheduling differs. Multimap delete-all lets the reading lanes tombstone
// their own slots in the same round.
//
// Each apply launch ends with every warp signing off on a counter; the last
// one copies the pool's allocation counter into the launch's control block,
// so the host reads the batch's outcome and the pool's state with one copy.
//
// The engines also run on the CPU: testdata/emu compiles the device code
// with g++ against an emulation of warps (lanes as fibers switched at each
// warp collective, warps as threads racing on the same memory), and the
// package's tests check every layout's kernels there against sequential
// models. It checks logic, bounds and the use of *_sync masks, not the GPU
// memory model.
//
// Buckets are sized from ExpectedSize and Utilization by the paper's
// B = n/(M·β), with the mean slab count β of a list taken from a Poisson
// model of the bucket loads instead of the paper's measured table; the
// benchmark reports the utilization actually reached.
//
// # Concurrency protocol: linearizable per key, every layout
//
// Slot keys change only EMPTY → key → TOMBSTONE while a list is live (a
// deleted slot is never reused until Compact), and an insert claims only the
// first EMPTY slot of the list in list order (the frontier), by CAS on the
// empty slot. New slabs are linked at the tail by CAS on the null next
// pointer. Hence EMPTY slots exist only at the frontier, and:
//
//   - No duplicate keys. An insert of k claims slot p only after reading
//     every earlier slot as non-empty and not k; those slots can never become
//     k afterwards. A claim CAS that loses returns the slot's new contents:
//     if that is another key or a tombstone, the slot is now non-empty and
//     not k, so the next slot the same read saw empty is the frontier and is
//     claimed at once; if it is k, a concurrent insert of k won (a set
//     reports Present, a 32/32 map replaces the value it just saw, wide
//     pairs read again). A slab whose slots were all taken by other keys
//     this way is left for the next one, as if read full. Two racing inserts of k aim at the same frontier slot, or
//     the later one reads the earlier one's slot holding k; the CAS lets one
//     win and the loser sees k and replaces instead. This is what the public
//     SlabHash gets wrong (its issue #27): deletes there turn a slot back to
//     EMPTY, so two inserts of one key can claim different empty slots. Here
//     the scenario of that issue — [A, empty], delete A, two inserts of B —
//     leaves [TOMB, B] with exactly one insert reporting Inserted.
//   - No lost keys. A find reads each slab once, in list order; a key present
//     for the whole duration of the find sits in a slot linked before the find
//     began and holds k at every read, so "not found" is only reported when
//     there was a moment k was absent, which is where it linearizes.
//   - No stale values, 32/32 pairs: key and value share one 64-bit word.
//     Insert claims with one 64-bit CAS (EMPTY pair → (k, v)); replace is a
//     64-bit CAS from the pair it read to (k, v'), retried while the key is
//     still k; delete CASes (k, v) → (TOMB, v). Pair layouts read the slot
//     with one 64-bit (single-copy atomic) load, so the value read belongs to
//     the key read. In the paper's word-per-lane layout key and value are
//     read by different lanes; a match is therefore re-read as one 64-bit
//     load before its value is returned (the paper's code skips this and can
//     return the value of an empty slot).
//   - Wide pairs (a 64-bit key or value; no 128-bit CAS on compute_70):
//     key-claim then value-publish. Each slab's tail slot holds an
//     "unpublished" bit per slot (all set in a fresh slab). Insert CASes the
//     key word EMPTY → k (claim; racing inserts of k still meet at this CAS),
//     stores the value, issues a fence, and clears the slot's bit (release).
//     Readers treat a claimed slot whose bit is still set as absent — the
//     insert has not taken effect — and before using a published slot's value
//     they fence and re-read it (acquire), so the value is at least the
//     published one. A replace of k waits (bounded) until k's slot is
//     published, then atomically exchanges the value word; a delete CASes the
//     key word k → TOMB. Because a slot belongs to one key for its whole life,
//     a value word only ever holds values written for that key; a replace
//     whose exchange lands after a concurrent delete linearizes just before
//     that delete.
//   - Sets have no value: the key CAS is the whole operation.
//   - Multimaps: insert claims the frontier like any insert (duplicates
//     allowed, so it never replaces) and delete-one CASes the first live
//     pair of k; both are linearizable. Count and search-all read the list
//     once without a snapshot, so they count every pair present throughout
//     and none that never existed, but concurrent changes to the key in the
//     same batch may or may not be seen. Delete-all tombstones each pair it
//     reads: every pair is removed once, by one element.
//
// A slab that a lost linking race allocated was never visible and goes back
// to the pool at once. Compact (exclusive: it waits for batches in flight and
// holds them off) moves each list's live entries to its front in list order,
// empties the rest of the last slab used, cuts the list there, and resets
// and frees the slabs after it; slots become reusable only then. Pairs
// (All) is also exclusive, so it sees each key once.
//
// # Departures from the paper
//
//   - Deletes leave tombstones that inserts never reuse before Compact (the
//     paper's deletes free slots; see issue #27 above), and the wide-pair
//     publication protocol and the re-read in the word layout are ours.
//   - Tiles of 8 and 16 lanes, pair-per-lane slabs, and the round engine,
//     besides the paper's warp per slab; 64-bit keys and values.
//   - The bucket hash is the murmur3/splitmix64 finalizer mapped to [0, B)
//     by a multiply-high, not ((ak+b) mod p) mod B: no division, and full
//     avalanche for sequential keys.
//   - Slab addresses decode through a per-super-block base table (the paper's
//     SlabAlloc, not SlabAlloc-light), so the pool can grow without a
//     contiguous reservation; the table read is one read-only-cache load.
//   - Results, mixed batches with per-element outcomes, device-side reserved
//     key checks, bounded loops with status words, and Compact as a kernel
//     over all buckets (the paper flushes one bucket per call).
//
// # CPU backend
//
// Go maps in 64 shards, each behind a mutex; batches apply in index order.
// MultiMap keeps each key's values oldest first, as the GPU lists do.
// Compact has nothing to do there. Device slices return ErrNeedsCUDA (an ErrInvalidArgument).
//
// # Lifetimes
//
// Slices passed to a call are used only during it. Pairs returns fresh
// slices. Close frees all device memory; any later call returns
// warpkit.ErrClosed. Len is maintained from each batch's counts and is exact
// whenever no batch is in flight.
package slabhash
