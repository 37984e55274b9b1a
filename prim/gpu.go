package prim

import (
	"fmt"
	"unsafe"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
)

// Launch shapes; they mirror the constants of the .cuh files.
const (
	sortBlock      = 256  // kSortBlock
	radixDigits    = 256  // kDigits
	warpSortMax    = 32   // kWarpSortMax
	smallSortMax   = 1024 // kSmallSortMax
	blockSortMax   = 4096 // kBlockSortMax
	segClasses     = 3    // kSegClasses
	fusedMaxTiles  = 128  // kFusedMaxTiles
	fusedSmallIPT  = 4    // kFusedSmallIPT
	maxPasses      = 8    // kMaxPasses
	fusedHeader    = 16   // kFusedHeader
	mergeBlock     = 256  // kMergeBlock
	scanBlock      = 256  // kScanBlock
	selectItems    = scanBlock * 12
	warpsPerBlock  = sortBlock / 32
	smallSortBlock = 128
)

func sizeOf[T warpkit.Word]() int { return int(unsafe.Sizeof(*new(T))) }

// sortTileItems is SortTile<K>::kItems.
func sortTileItems[K warpkit.Word]() int {
	if sizeOf[K]() == 4 {
		return sortBlock * 16
	}
	return sortBlock * 12
}

// mergeTileItems is MergeTile<K>::kItems.
func mergeTileItems[K warpkit.Word]() int {
	if sizeOf[K]() == 4 {
		return mergeBlock * 11
	}
	return mergeBlock * 7
}

// scanTileItems is ScanTile<T>::kItems.
func scanTileItems[T warpkit.Word]() int {
	if sizeOf[T]() == 4 {
		return scanBlock * 16
	}
	return scanBlock * 8
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// kvName names the instantiation of a kernel for key type K and value type V
// (v0 when there are no values).
func kvName[K, V warpkit.Word](prefix string, pairs bool) string {
	v := 0
	if pairs {
		v = 8 * sizeOf[V]()
	}
	return fmt.Sprintf("%s_k%d_v%d", prefix, 8*sizeOf[K](), v)
}

// word converts a key to the kernel argument of its width (Launch accepts only
// the basic types, not named ones).
func word[K warpkit.Word](k K) any {
	if sizeOf[K]() == 4 {
		return uint32(k)
	}
	return uint64(k)
}

func invalid(op, format string, args ...any) error {
	return fmt.Errorf("%w: prim: %s: %s", warpkit.ErrInvalidArgument, op, fmt.Sprintf(format, args...))
}

func checkSize(op string, n int) error {
	if n > MaxElements {
		return invalid(op, "%d elements (at most %d)", n, MaxElements)
	}
	return nil
}

// checkSegmentedSize rejects segmented sorts of more than
// MaxSegmentedElements elements.
func checkSegmentedSize(op string, n int) error {
	if n > MaxSegmentedElements {
		return invalid(op, "%d elements (at most %d: a longer segment would overflow the kernels' 32-bit loop counters; sort one huge segment with SortPairs)", n, MaxSegmentedElements)
	}
	return nil
}

// radixGrid returns the number of blocks of a multi-pass radix sort of tiles
// tiles of tileItems elements: the blocks that fill the device (fill), but
// at least enough that every block's contiguous run of at most
// ceil(tiles/grid) tiles stays within MaxSegmentedElements, which the
// upsweep's 32-bit histogram loops share with the segmented sort.
func radixGrid(tiles, fill, tileItems int) int {
	return min(tiles, max(fill, ceilDiv(tiles, MaxSegmentedElements/tileItems)))
}

// kernelSet resolves several kernels, all with the given block size.
func (e *Engine) kernelSet(block int, names ...string) ([]*kernel, error) {
	ks := make([]*kernel, len(names))
	for i, name := range names {
		k, err := e.kernel(name, block)
		if err != nil {
			return nil, err
		}
		ks[i] = k
	}
	return ks, nil
}

// resultSlot returns the address of an optional one-element result (a total
// or a count): 0, which kernels skip, when out is empty.
func resultSlot[T cuda.Elem](out cuda.Slice[T]) cuda.DevicePtr {
	if out.Len() == 0 {
		return 0
	}
	return out.Ptr()
}

// zeroResult sets an optional one-element result to 0 (the result of an empty
// input).
func zeroResult[T cuda.Elem](out cuda.Slice[T], s *cuda.Stream) error {
	if out.Len() == 0 {
		return nil
	}
	return out.Sub(0, 1).Zero(s)
}

// alive returns ErrClosed for a closed Engine.
func (e *Engine) alive() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return warpkit.ErrClosed
	}
	return nil
}

// ----- radix sort -----------------------------------------------------------

// SortKeys sorts keys in place, stably, on the key bits opt selects (LSD radix
// sort, 8-bit digits).
func SortKeys[K warpkit.Word](e *Engine, s *cuda.Stream, keys cuda.Slice[K], opt SortOptions) error {
	return radixSort(e, s, keys, cuda.Slice[uint32]{}, false, opt, "SortKeys")
}

// SortPairs sorts keys in place, stably, on the key bits opt selects, moving
// vals (same length) with their keys.
func SortPairs[K, V warpkit.Word](e *Engine, s *cuda.Stream, keys cuda.Slice[K], vals cuda.Slice[V], opt SortOptions) error {
	return radixSort(e, s, keys, vals, true, opt, "SortPairs")
}

func radixSort[K, V warpkit.Word](e *Engine, s *cuda.Stream, keys cuda.Slice[K], vals cuda.Slice[V], pairs bool, opt SortOptions, op string) error {
	begin, end, err := bitRange[K](opt)
	if err != nil {
		return fmt.Errorf("prim: %s: %w", op, err)
	}
	n := keys.Len()
	if pairs && vals.Len() != n {
		return invalid(op, "%d keys but %d values", n, vals.Len())
	}
	if err := checkSize(op, n); err != nil {
		return err
	}
	if err := e.alive(); err != nil || n <= 1 {
		return err
	}
	if e.emulated {
		return emulatedSort(keys, vals, pairs, nil, SortOptions{BeginBit: begin, EndBit: end})
	}
	var valsPtr cuda.DevicePtr
	if pairs {
		valsPtr = vals.Ptr()
	}
	if n <= blockSortMax {
		return sortOneSegment[K, V](e, s, keys.Ptr(), valsPtr, pairs, n, begin, end)
	}
	if n <= e.fusedSmall {
		return fusedSort[K, V](e, s, keys.Ptr(), valsPtr, pairs, n, begin, end, true)
	}
	if n <= fusedSortMax[K]() {
		return fusedSort[K, V](e, s, keys.Ptr(), valsPtr, pairs, n, begin, end, false)
	}
	ks, err := e.kernelSet(sortBlock, fmt.Sprintf("radix_upsweep_k%d", 8*sizeOf[K]()), "radix_scan_rows",
		kvName[K, V]("radix_downsweep", pairs))
	if err != nil {
		return err
	}
	up, rows, down := ks[0], ks[1], ks[2]
	tiles := ceilDiv(n, sortTileItems[K]())
	g := radixGrid(tiles, down.grid, sortTileItems[K]())
	nv := 0
	if pairs {
		nv = n
	}
	sc, err := e.scratchFor(s, scratchBytes(int64(n*sizeOf[K]()), int64(nv*sizeOf[V]()), int64(4*radixDigits*g), 4*radixDigits))
	if err != nil {
		return err
	}
	defer sc.release()
	altKeys, altVals := take[K](sc, n), take[V](sc, nv)
	counts, totals := take[uint32](sc, radixDigits*g), take[uint32](sc, radixDigits)
	srcK, dstK := keys.Ptr(), altKeys.Ptr()
	srcV, dstV := valsPtr, altVals.Ptr()
	passes := 0
	for bit := begin; bit < end; bit += 8 {
		nbits := min(8, end-bit)
		if err := up.launch(s, g, srcK, int32(n), int32(tiles), int32(bit), int32(nbits), counts); err != nil {
			return err
		}
		if err := rows.launch(s, radixDigits, counts, int32(g), totals); err != nil {
			return err
		}
		if err := down.launch(s, g, srcK, dstK, srcV, dstV, int32(n), int32(tiles), int32(bit), int32(nbits), counts, totals); err != nil {
			return err
		}
		srcK, dstK, srcV, dstV = dstK, srcK, dstV, srcV
		passes++
	}
	if passes%2 == 1 { // the result is in the scratch
		if err := cuda.CopyAsync(keys, altKeys, s); err != nil {
			return fmt.Errorf("prim: %s: %w", op, err)
		}
		if pairs {
			if err := cuda.CopyAsync(vals, altVals, s); err != nil {
				return fmt.Errorf("prim: %s: %w", op, err)
			}
		}
	}
	return nil
}

// fusedSortMax is the largest input the fused sort takes: kFusedMaxTiles
// radix tiles.
func fusedSortMax[K warpkit.Word]() int { return fusedMaxTiles * sortTileItems[K]() }

// fusedSmallItems is the tile of the small-input fused sort; inputs of up to
// fusedSmallMax elements take it. Its tiles are a quarter (32-bit keys) or a
// third (64-bit keys) of the default, so a small input's passes spread over
// four or three times as many blocks, each with that much less to do: at
// 2^15 pairs a pass is a few blocks' latency with most SMs idle
// (docs/benchmarks.md, "A fused sort for small inputs").
const (
	fusedSmallItems = sortBlock * fusedSmallIPT
	fusedSmallMax   = fusedMaxTiles * fusedSmallItems
)

// fusedSort sorts blockSortMax < n <= fusedSortMax elements with every pass
// in one launch (radix_fused in sort.cuh), using and clearing the stream's
// fused-sort state; small selects the small-input tile (n <= fusedSmallMax).
func fusedSort[K, V warpkit.Word](e *Engine, s *cuda.Stream, keys, vals cuda.DevicePtr, pairs bool, n, begin, end int, small bool) error {
	name, items := "radix_fused", sortTileItems[K]()
	if small {
		name, items = "radix_fused_small", fusedSmallItems
	}
	k, err := e.kernel(kvName[K, V](name, pairs), sortBlock)
	if err != nil {
		return err
	}
	tiles, passes := ceilDiv(n, items), ceilDiv(end-begin, 8)
	nv := 0
	if pairs {
		nv = n
	}
	sc, err := e.scratchFor(s, scratchBytes(int64(n*sizeOf[K]()), int64(nv*sizeOf[V]())))
	if err != nil {
		return err
	}
	defer sc.release()
	altKeys, altVals := take[K](sc, n), take[V](sc, nv)
	st, err := e.fusedState(sc.a, s)
	if err != nil {
		return err
	}
	use, clear := st.halves()
	grid := min(tiles, k.grid)
	if e.fusedGridCap > 0 {
		grid = min(grid, e.fusedGridCap)
	}
	if err := k.launch(s, grid, keys, vals, altKeys.Ptr(), altVals.Ptr(), int32(n), int32(tiles), int32(begin), int32(end),
		use, clear, int32(st.dirty[1-st.half])); err != nil {
		return err
	}
	st.launched(fusedStateWords(passes, tiles))
	return nil
}

// sortOneSegment sorts n <= blockSortMax elements with one warp or one block,
// using the segmented sort kernels on the single segment [0, n).
func sortOneSegment[K, V warpkit.Word](e *Engine, s *cuda.Stream, keys, vals cuda.DevicePtr, pairs bool, n, begin, end int) error {
	var name string
	block := sortBlock
	switch {
	case n <= warpSortMax:
		name = "segsort_warp"
	case n <= smallSortMax:
		name, block = "segsort_small", smallSortBlock
	default:
		name = "segsort_block"
	}
	k, err := e.kernel(kvName[K, V](name, pairs), block)
	if err != nil {
		return err
	}
	var none cuda.DevicePtr // no offsets (one segment), no work lists
	return k.launch(s, 1, keys, vals, none, int32(1), int32(n), int32(begin), int32(end), none, none)
}

// ----- segmented sort ---------------------------------------------------------

// SegmentedSortPairs sorts each segment [offsets[i], offsets[i+1]) of the pairs
// independently and stably, on all key bits or on the bits of the optional
// SortOptions. len(offsets) = segments+1, offsets[0] = 0, offsets[segments] =
// keys.Len(); offsets are not validated on the device (see the package doc).
func SegmentedSortPairs[K, V warpkit.Word](e *Engine, s *cuda.Stream, keys cuda.Slice[K], vals cuda.Slice[V], offsets cuda.Slice[uint32], opt ...SortOptions) error {
	return segmentedSort(e, s, keys, vals, true, offsets, opt, "SegmentedSortPairs")
}

// SegmentedSortKeys sorts each segment of keys independently and stably.
func SegmentedSortKeys[K warpkit.Word](e *Engine, s *cuda.Stream, keys cuda.Slice[K], offsets cuda.Slice[uint32], opt ...SortOptions) error {
	return segmentedSort(e, s, keys, cuda.Slice[uint32]{}, false, offsets, opt, "SegmentedSortKeys")
}

func segmentedSort[K, V warpkit.Word](e *Engine, s *cuda.Stream, keys cuda.Slice[K], vals cuda.Slice[V], pairs bool, offsets cuda.Slice[uint32], opts []SortOptions, op string) error {
	opt, err := optionalSortOptions(opts)
	if err != nil {
		return fmt.Errorf("prim: %s: %w", op, err)
	}
	begin, end, err := bitRange[K](opt)
	if err != nil {
		return fmt.Errorf("prim: %s: %w", op, err)
	}
	n := keys.Len()
	if pairs && vals.Len() != n {
		return invalid(op, "%d keys but %d values", n, vals.Len())
	}
	if offsets.Len() == 0 {
		return invalid(op, "empty offsets (want segments+1 entries)")
	}
	segments := offsets.Len() - 1
	if err := checkSize(op, max(n, segments)); err != nil {
		return err
	}
	if err := checkSegmentedSize(op, n); err != nil {
		return err
	}
	if err := e.alive(); err != nil || n <= 1 || segments == 0 {
		return err
	}
	if e.emulated {
		return emulatedSort(keys, vals, pairs, &offsets, SortOptions{BeginBit: begin, EndBit: end})
	}
	ks, err := e.kernelSet(sortBlock, kvName[K, V]("segsort_warp", pairs), kvName[K, V]("segsort_block", pairs),
		kvName[K, V]("segsort_large", pairs))
	if err != nil {
		return err
	}
	small, err := e.kernel(kvName[K, V]("segsort_small", pairs), smallSortBlock)
	if err != nil {
		return err
	}
	warp, block, large := ks[0], ks[1], ks[2]
	var valsPtr cuda.DevicePtr
	nv := 0
	if pairs {
		valsPtr, nv = vals.Ptr(), n
	}
	sc, err := e.scratchFor(s, scratchBytes(4*segClasses, int64(4*segClasses*segments), int64(n*sizeOf[K]()), int64(nv*sizeOf[V]())))
	if err != nil {
		return err
	}
	defer sc.release()
	count, list := take[int32](sc, segClasses), take[int32](sc, segClasses*segments)
	altKeys, altVals := take[K](sc, n), take[V](sc, nv)
	if err := count.Zero(s); err != nil {
		return fmt.Errorf("prim: %s: %w", op, err)
	}
	args := []any{keys.Ptr(), valsPtr, offsets, int32(segments), int32(n), int32(begin), int32(end), count, list}
	if err := warp.launch(s, min(ceilDiv(segments, 32*warpsPerBlock), warp.grid), args...); err != nil {
		return err
	}
	if err := small.launch(s, min(segments, small.grid), args...); err != nil {
		return err
	}
	if err := block.launch(s, min(segments, block.grid), args...); err != nil {
		return err
	}
	return large.launch(s, min(segments, large.grid), keys.Ptr(), valsPtr, altKeys.Ptr(), altVals.Ptr(), offsets,
		int32(segments), int32(n), int32(begin), int32(end), count, list)
}

// ----- merge ------------------------------------------------------------------

// MergePairs merges the runs A and B, each sorted by (k & KeyMask), stably into
// out (len = len(A)+len(B)): on equal masked keys all of A's elements come
// first. Merge path, one launch: each block finds its output tile's share of A
// and B by a 32-way search of the path and merges the tile in shared memory.
func MergePairs[K, V warpkit.Word](e *Engine, s *cuda.Stream, aKeys cuda.Slice[K], aVals cuda.Slice[V],
	bKeys cuda.Slice[K], bVals cuda.Slice[V], outKeys cuda.Slice[K], outVals cuda.Slice[V], opt MergeOptions[K]) error {
	const op = "MergePairs"
	if aVals.Len() != aKeys.Len() || bVals.Len() != bKeys.Len() || outVals.Len() != outKeys.Len() {
		return invalid(op, "keys and values differ in length (A %d/%d, B %d/%d, out %d/%d)",
			aKeys.Len(), aVals.Len(), bKeys.Len(), bVals.Len(), outKeys.Len(), outVals.Len())
	}
	return merge(e, s, aKeys, aVals, bKeys, bVals, outKeys, outVals, true, opt, op)
}

// MergeKeys merges the sorted runs a and b stably into out.
func MergeKeys[K warpkit.Word](e *Engine, s *cuda.Stream, a, b, out cuda.Slice[K], opt MergeOptions[K]) error {
	return merge(e, s, a, cuda.Slice[uint32]{}, b, cuda.Slice[uint32]{}, out, cuda.Slice[uint32]{}, false, opt, "MergeKeys")
}

func merge[K, V warpkit.Word](e *Engine, s *cuda.Stream, a cuda.Slice[K], av cuda.Slice[V], b cuda.Slice[K], bv cuda.Slice[V],
	out cuda.Slice[K], outv cuda.Slice[V], pairs bool, opt MergeOptions[K], op string) error {
	na, nb := a.Len(), b.Len()
	if out.Len() != na+nb {
		return invalid(op, "output of %d for %d+%d elements", out.Len(), na, nb)
	}
	if err := checkSize(op, na+nb); err != nil {
		return err
	}
	if err := e.alive(); err != nil || na+nb == 0 {
		return err
	}
	if e.emulated {
		return emulatedMerge(a, av, b, bv, out, outv, pairs, opt)
	}
	tile, err := e.kernel(kvName[K, V]("merge", pairs), mergeBlock)
	if err != nil {
		return err
	}
	tiles := ceilDiv(na+nb, mergeTileItems[K]())
	return tile.launch(s, tiles, a, av.Ptr(), int32(na), b, bv.Ptr(), int32(nb), word(opt.mask()), out, outv.Ptr())
}

// ----- scan, select, multisplit ----------------------------------------------

// ExclusiveScan writes out[i] = in[0] + ... + in[i-1] (wrapping; out may be in
// itself) and, if total is non-empty, total[0] = the sum of all of in. It is
// a single pass with decoupled look-back: every element is read once and
// written once.
func ExclusiveScan[T warpkit.Word](e *Engine, s *cuda.Stream, in, out cuda.Slice[T], total cuda.Slice[T]) error {
	const op = "ExclusiveScan"
	n := in.Len()
	if out.Len() != n {
		return invalid(op, "output of %d for %d elements", out.Len(), n)
	}
	if err := checkSize(op, n); err != nil {
		return err
	}
	if err := e.alive(); err != nil {
		return err
	}
	totalPtr := resultSlot(total)
	if n == 0 {
		return zeroResult(total, s)
	}
	if e.emulated {
		return emulatedScan(in, out, total)
	}
	scan, err := e.kernel(fmt.Sprintf("scan_%d", 8*sizeOf[T]()), scanBlock)
	if err != nil {
		return err
	}
	tiles := ceilDiv(n, scanTileItems[T]())
	if sizeOf[T]() == 4 {
		// Look-back state: the tile counter (word 0) and one word per tile
		// packing status and value, zeroed together.
		sc, err := e.scratchFor(s, scratchBytes(int64(8*(1+tiles))))
		if err != nil {
			return err
		}
		defer sc.release()
		state := take[uint64](sc, 1+tiles)
		if err := state.Zero(s); err != nil {
			return fmt.Errorf("prim: %s: %w", op, err)
		}
		return scan.launch(s, tiles, in, out, int32(n), int32(tiles), state.Ptr(), state.Sub(1, 1+tiles), totalPtr)
	}
	// Look-back state: the tile counter and the tile status words, zeroed
	// together, then the published aggregates and inclusive prefixes.
	sc, err := e.scratchFor(s, scratchBytes(int64(4*(1+tiles)), int64(8*tiles), int64(8*tiles)))
	if err != nil {
		return err
	}
	defer sc.release()
	state := take[uint32](sc, 1+tiles)
	aggregate, inclusive := take[uint64](sc, tiles), take[uint64](sc, tiles)
	if err := state.Zero(s); err != nil {
		return fmt.Errorf("prim: %s: %w", op, err)
	}
	return scan.launch(s, tiles, in, out, int32(n), int32(tiles), state.Ptr(), state.Sub(1, 1+tiles), aggregate, inclusive, totalPtr)
}

// SelectFlagged copies in[i] where flags[i] != 0 to the front of out, in order;
// count[0] (if count is non-empty) = how many were selected. Elements beyond
// out's length are dropped (still counted); out must not overlap in.
func SelectFlagged[T warpkit.Word](e *Engine, s *cuda.Stream, in cuda.Slice[T], flags cuda.Slice[uint8], out cuda.Slice[T], count cuda.Slice[uint32]) error {
	return selectOrSplit(e, s, in, cuda.Slice[uint32]{}, false, flags, out, cuda.Slice[uint32]{}, count, false, "SelectFlagged")
}

// SelectFlaggedPairs is SelectFlagged for key/value pairs; outKeys and outVals
// have the same length.
func SelectFlaggedPairs[K, V warpkit.Word](e *Engine, s *cuda.Stream, keys cuda.Slice[K], vals cuda.Slice[V], flags cuda.Slice[uint8],
	outKeys cuda.Slice[K], outVals cuda.Slice[V], count cuda.Slice[uint32]) error {
	const op = "SelectFlaggedPairs"
	if vals.Len() != keys.Len() || outVals.Len() != outKeys.Len() {
		return invalid(op, "keys and values differ in length (in %d/%d, out %d/%d)", keys.Len(), vals.Len(), outKeys.Len(), outVals.Len())
	}
	return selectOrSplit(e, s, keys, vals, true, flags, outKeys, outVals, count, false, op)
}

// Multisplit2Pairs is a stable two-bucket split: the pairs with flags[i] == 0
// first, then the rest, each in input order; count0[0] (if count0 is
// non-empty) = the size of bucket 0. The outputs have len(keys) elements and
// must not overlap the inputs.
func Multisplit2Pairs[K, V warpkit.Word](e *Engine, s *cuda.Stream, keys cuda.Slice[K], vals cuda.Slice[V], flags cuda.Slice[uint8],
	outKeys cuda.Slice[K], outVals cuda.Slice[V], count0 cuda.Slice[uint32]) error {
	const op = "Multisplit2Pairs"
	n := keys.Len()
	if vals.Len() != n || outKeys.Len() != n || outVals.Len() != n {
		return invalid(op, "lengths differ (keys %d, values %d, out %d/%d)", n, vals.Len(), outKeys.Len(), outVals.Len())
	}
	return selectOrSplit(e, s, keys, vals, true, flags, outKeys, outVals, count0, true, op)
}

func selectOrSplit[K, V warpkit.Word](e *Engine, s *cuda.Stream, keys cuda.Slice[K], vals cuda.Slice[V], pairs bool, flags cuda.Slice[uint8],
	outKeys cuda.Slice[K], outVals cuda.Slice[V], count cuda.Slice[uint32], split bool, op string) error {
	n := keys.Len()
	if flags.Len() != n {
		return invalid(op, "%d flags for %d elements", flags.Len(), n)
	}
	if err := checkSize(op, max(n, outKeys.Len())); err != nil {
		return err
	}
	if err := e.alive(); err != nil {
		return err
	}
	countPtr := resultSlot(count)
	if n == 0 {
		return zeroResult(count, s)
	}
	if e.emulated {
		return emulatedSelect(keys, vals, pairs, flags, outKeys, outVals, count, split)
	}
	ks, err := e.kernelSet(scanBlock, "count_flags", "count_spine", kvName[K, V]("select", pairs))
	if err != nil {
		return err
	}
	countFlags, spine, move := ks[0], ks[1], ks[2]
	tiles := ceilDiv(n, selectItems)
	g := min(tiles, move.grid)
	sc, err := e.scratchFor(s, scratchBytes(int64(4*(g+1))))
	if err != nil {
		return err
	}
	defer sc.release()
	partials := take[uint32](sc, g+1)
	flag := int32(0)
	if split {
		flag = 1
	}
	if err := countFlags.launch(s, g, flags, int32(n), int32(tiles), flag, partials); err != nil {
		return err
	}
	if err := spine.launch(s, 1, partials, int32(g), countPtr); err != nil {
		return err
	}
	return move.launch(s, g, keys, vals.Ptr(), flags, int32(n), int32(tiles), partials, flag, outKeys, outVals.Ptr(), int32(outKeys.Len()))
}
