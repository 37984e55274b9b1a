// Package prim holds the device-wide data-parallel primitives the GPU batch
// structures (sortedarray, lsm, btree) are built from — radix sort, segmented
// sort, merge, exclusive scan, select and two-bucket multisplit — each with a
// pure-Go twin of identical semantics that the CPU backends use and the GPU
// tests are checked against.
//
// The GPU LSM paper (Ashkiani et al., IPDPS 2018) calls CUB's device-wide radix
// sort and scan and moderngpu's merge and segmented sort from C++ host code. Go
// cannot call C++ host code, so prim implements the device-wide orchestration
// itself: its kernels use CUB's block- and warp-level collectives (BlockScan,
// BlockLoad, BlockRadixSort, WarpScan) and are launched from Go.
//
// # Engine and streams
//
// Go methods cannot have type parameters, so the GPU primitives are generic
// functions taking an *[Engine], which holds a device's loaded kernels and
// cached scratch memory. An Engine is safe for concurrent use by goroutines.
//
// Every GPU function enqueues its work on stream s (nil: the legacy default
// stream) and may return before the work completes; inputs and outputs must
// stay allocated, and must not be written by other work, until s is
// synchronized. No GPU function reads results back to the host, so a sequence
// of primitives on one stream runs back to back on the device.
//
// Scratch memory is cached per stream (grown on demand, never shrunk until
// [Engine.ReleaseScratch] or [Engine.Close]); calls on the same stream from
// different goroutines are serialized while they enqueue, calls on different
// streams run independently. Growing a stream's scratch synchronizes that
// stream first. Sorting n key-value pairs needs scratch of about n keys and n
// values, plus, once a stream has run a fused sort, 2 MiB of state for it
// (kept zeroed by the sorts themselves); the other primitives need a few KiB.
//
// # Errors
//
// GPU functions return an error wrapping [warpkit.ErrInvalidArgument] for
// mismatched lengths, an invalid bit range or more than [MaxElements]
// elements (more than [MaxSegmentedElements] for segmented sorts);
// [warpkit.ErrOutOfMemory] when scratch cannot be allocated;
// [warpkit.ErrClosed] after [Engine.Close]. These are all found before
// anything that writes the outputs is enqueued. A primitive of several launches (the multi-pass radix
// sort, segmented sort, select, multisplit) whose later launch fails to enqueue
// (a driver error, in practice a lost context) may already have enqueued
// launches that write its outputs: after such an error the outputs are
// unspecified.
//
// A GPU function returns after enqueuing, so failures inside kernels (there are
// none by design: every index is bounds-checked, including for invalid segment
// offsets and unsorted merge inputs) would surface at the stream's
// synchronization.
//
// The host twins take Go slices whose lengths are the caller's own invariants:
// they panic (like an index out of range) on mismatched lengths or an invalid
// bit range. Validate user-supplied options first with [SortOptions.Validate]
// and segment offsets with [ValidateOffsets].
//
// # Semantics
//
// Radix sorts ([SortKeys], [SortPairs]) are stable LSD sorts, in place (the
// result replaces the input; a same-sized scratch buffer is used internally).
// Up to 4096 elements one block sorts in shared memory; up to 128 radix tiles
// (2^19 32-bit or 393216 64-bit keys) one launch runs every pass — blocks
// take histogram, pass and copy items in order from a counter and find each
// digit's offset by decoupled look-back — so that the batch sizes the
// dictionaries sort cost one launch instead of three per pass; larger inputs
// take three launches per pass (upsweep, scan, downsweep). Inputs of up to
// 131072 elements run that launch with tiles of 1024 instead of 4096 (3072
// for 64-bit keys), spreading each pass over four times as many blocks: a
// pass of a small input is a few blocks' latency (docs/benchmarks.md, "A
// fused sort for small inputs").
// [SortOptions] restricts the sort to the key bits [BeginBit, EndBit): keys are
// ordered by (k >> BeginBit) & (1<<(EndBit-BeginBit) - 1) and equal digits keep
// their input order. The zero value sorts on all bits.
//
// Segmented sorts ([SegmentedSortPairs], [SegmentedSortKeys]) sort each segment
// [offsets[i], offsets[i+1]) independently and stably; len(offsets) =
// segments+1, offsets[0] = 0, offsets non-decreasing, offsets[segments] = n.
// They take an optional SortOptions bit range (a refinement of the contract:
// the LSM sorts query results ignoring a status bit). The offsets live on the
// device and are not checked there: invalid offsets give an unspecified order
// but never an out-of-bounds access. Segments of up to 32 elements are sorted by
// one warp, up to 4096 by one block in shared memory, longer ones by one block
// each with a block-wide LSD radix sort through global scratch — many small
// segments are the intended use; sort one huge segment with SortPairs. The
// total length is limited to [MaxSegmentedElements] (see Limits).
//
// Merges ([MergePairs], [MergeKeys]) are one launch each (every block finds
// its output tile's share of the two runs by a 32-way search of the merge
// path). They are stable merges of two runs sorted by
// (k & KeyMask) (zero KeyMask: all bits) into out, len(out) = len(a)+len(b):
// among equal masked keys all of A's come first, each run in its own order
// ("run A first"). Keys are written unmasked. Unsorted inputs give an
// unspecified output but never an out-of-bounds access. out
// must not overlap a or b.
//
// [ExclusiveScan] writes out[i] = in[0] + ... + in[i-1] with wrapping
// (modular) addition; out may be in itself (in place). If total is non-empty,
// total[0] = the sum of all of in. It is one pass with decoupled look-back
// (Merrill & Garland 2016): each block publishes its tile's sum and waits for
// its predecessors'. That wait always ends (tiles are claimed in the order
// blocks start) and is bounded anyway: past a few seconds the kernel traps.
// The fused radix sort waits the same way (for the previous pass and for its
// look-back predecessors, always items taken earlier), with the same bound.
// No other prim kernel waits on another block. A trap is never a hang, but it
// is not a recoverable error either: it is a sticky error of the CUDA
// context, so the stream's next synchronization and every later call on the
// device, from any structure or goroutine of the process, fail; only a new
// process (or a reset of the device's primary context) recovers. The bound
// exists to turn a bug into that failure instead of a hung process.
//
// [SelectFlagged] and [SelectFlaggedPairs] copy the elements whose flag is
// non-zero to the front of out, in input order. count[0] (if count is
// non-empty) receives the number selected, even when out is shorter; elements
// that do not fit in out are dropped, so out of len(in) always suffices. out
// must not overlap in.
//
// [Multisplit2Pairs] is a stable two-bucket split: the elements with flag 0,
// in input order, then those with a non-zero flag, in input order; count0[0]
// (if non-empty) receives the size of bucket 0. Outputs have len(keys) and must
// not overlap the inputs.
//
// # Limits
//
// Every primitive handles at most [MaxElements] (2^31-1) elements per input;
// sizes are 32-bit on the device. Zero-length inputs are valid and enqueue
// nothing but the zeroing of count/total outputs.
//
// Segmented sorts handle at most [MaxSegmentedElements] (2^31-2^13) elements
// in all. Known limitation: the kernels that sort one long segment
// (segsort_large, and the histogram loop it shares with the radix upsweep)
// count with 32-bit int loop variables stepped by up to a tile (4096) past the
// segment's length, which overflows for a segment longer than 2^31-4096.
// Since the offsets are device data, the host bounds the total length
// instead, and the multi-pass radix sort launches enough blocks that no block
// counts more than MaxSegmentedElements elements. The kernel fix (64-bit loop
// counters in accumulate_histogram and segsort_large in sort.cuh) needs a
// device run to validate; with it the limit can become MaxElements.
package prim
