// Package sortedarray is a dictionary kept as one sorted array of distinct
// keys with their values, on the GPU or in Go: the "GPU SA" baseline of the GPU
// LSM paper (Ashkiani et al., IPDPS 2018), made a full dictionary with the same
// API and batch semantics as package lsm.
//
// An update batch is sorted (keys reversed first so that a stable sort puts
// the last insertion of a key first; a fix-up makes a key deleted when the
// batch deletes it anywhere), reduced to one entry per key; the array entries
// whose keys the batch replaces or deletes are dropped (a selection, only when
// there are any), and the batch's insertions are merged in. Every update
// therefore costs O(n) for an array of n keys, against the LSM's amortized
// O(log n) per element; queries are one binary search (lookup, count,
// successor, predecessor) plus a gather (range), with no stale entries to
// validate.
//
// Batch semantics (as in lsm): a key with any deletion in the batch is
// deleted; otherwise its last insertion in the batch wins; later batches win.
// Successor(k) is the smallest key > k, Predecessor(k) the largest key < k.
//
// The whole key range is usable: no reserved keys. Methods may be called from
// several goroutines: updates are serialized and exclude queries; queries run
// concurrently (each on its own CUDA stream on the GPU backend). An update
// allocates everything it needs before it changes the array: on
// ErrOutOfMemory nothing is applied. At most prim.MaxElements (2^31-1) keys.
// Every call waits for the device work it enqueued before it returns, also
// when it fails. An error from that wait is a device fault (a kernel trap or
// an illegal address), which is sticky: the CUDA context is lost for the whole
// process, and after one in an update the array's contents are undefined (the
// final merge writes the batch into the array's own buffer when the batch
// replaces or deletes keys); close it. Use after Close gives ErrClosed;
// device-resident methods on the CPU backend give ErrInvalidArgument. A
// warpkit.DeviceRanges belongs to the caller, who frees it.
package sortedarray
