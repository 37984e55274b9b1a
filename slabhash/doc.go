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
// Pool sizing, the slab layouts, the two batch engines and the concurrency
// protocol that makes every operation linearizable per key are described in
// docs/slabhash.md of the repository.
//
// # Contract
//
// The package follows the structure contract (docs/CONTRACT.md): Len(ctx),
// Stats(ctx), Close, ErrClosed after Close, Device variants answering
// ErrNeedsCUDA on the CPU backend, Compact for the paper's flush. Its one
// departure: batches report a Result per element (Inserted, Present,
// Removed, Found, NotFound, Failed) where the ordered dictionaries report
// found flags, because a hash batch may apply in part (pool exhaustion, a
// retry bound, a context that ends between chunks): the results say which
// elements were applied. A batch whose context ends midway stops between
// chunks (the CPU backend: between elements) and marks the elements it did
// not apply Failed.
//
// # Departures from the paper
//
//   - Deletes leave tombstones that inserts never reuse before Compact. The
//     paper's deletes free slots, which lets two inserts of one key both
//     succeed (the public SlabHash's issue #27; docs/slabhash.md). The
//     wide-pair publication protocol and the re-read in the word layout are
//     ours.
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
