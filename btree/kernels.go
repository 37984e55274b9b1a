package btree

import (
	_ "embed"
	"fmt"
	"unsafe"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/gpurt"
)

//go:generate go run github.com/warpkit/warpkit/internal/kernelgen -o ptx/btree.ptx btree.cu

// btreePTX holds the tree's kernels for every key/value width pair.
//
//go:embed ptx/btree.ptx
var btreePTX []byte

// statusErr maps a kernel's status word to an error (the flags are the
// shared registry's, internal/devcode/status.cuh, generated into gpurt).
func statusErr(st uint32) error {
	if st&gpurt.StatusInvalidArgument != 0 {
		return fmt.Errorf("%w: invalid device input: an operation kind above OpCount, or a range window that is decreasing or passes the end of the output buffers", warpkit.ErrInvalidArgument)
	}
	return gpurt.StatusError("device batch", st)
}

// kernel is a function, how many items (operations, nodes, elements) one warp
// takes at a time and, for a driver that takes its work grid-stride, the
// largest grid worth launching: as many blocks as fit on the device at once (a
// larger grid would only queue blocks). maxBlocks 0: one warp per perWarp
// items, however many blocks that takes.
type kernel struct {
	f         *cuda.Function
	perWarp   int
	maxBlocks int
}

// launch runs k on enough blocks for items items.
func (k kernel) launch(stream *cuda.Stream, items int, args ...any) error {
	warps := (items + k.perWarp - 1) / k.perWarp
	blocks := max(1, (warps*32+blockSize-1)/blockSize)
	if k.maxBlocks > 0 {
		blocks = min(blocks, k.maxBlocks)
	}
	return k.f.Launch(cuda.D1(blocks), cuda.D1(blockSize), 0, stream, args...)
}

// phasedRounds is kRounds of btree.cu: the queries a tile of a phased wave holds.
const phasedRounds = 4

// kernels are one width pair's functions.
type kernels struct {
	// Validated queries (a writer may run beside them), writes, mixed batches:
	// one operation per tile.
	lookup, neighbor, rng, insert, del, mixed kernel
	// Phased queries (no writer can run): lockstep walk and finish.
	phasedLookup, phasedNeighbor, phasedRange kernel
	buildLevel, markLast, iota, checkKinds    kernel
}

func widthSuffix[T warpkit.Word]() string {
	var z T
	if unsafe.Sizeof(z) == 8 {
		return "u64"
	}
	return "u32"
}

func loadKernels[K, V warpkit.Word](dev *cuda.Device) (kernels, error) {
	var ks kernels
	mod, err := dev.LoadModule(btreePTX)
	if err != nil {
		return ks, err
	}
	sms := dev.Properties().Multiprocessors
	suf := widthSuffix[K]() + "_" + widthSuffix[V]()
	tiles := 32 / (layoutFor(int(unsafe.Sizeof(*new(K))), int(unsafe.Sizeof(*new(V)))).nodeBytes / 16) // tiles per warp
	for _, f := range []struct {
		dst     *kernel
		name    string
		perWarp int
		stride  bool // the driver takes its work grid-stride
	}{
		{&ks.lookup, "bt_lookup_" + suf, tiles, false},
		{&ks.neighbor, "bt_neighbor_" + suf, tiles, false},
		{&ks.rng, "bt_range_" + suf, tiles, false},
		{&ks.insert, "bt_insert_" + suf, tiles, false},
		{&ks.del, "bt_delete_" + suf, tiles, false},
		{&ks.mixed, "bt_mixed_" + suf, tiles, false},
		{&ks.phasedLookup, "bt_phased_lookup_" + suf, phasedRounds * tiles, true},
		{&ks.phasedNeighbor, "bt_phased_neighbor_" + suf, phasedRounds * tiles, true},
		{&ks.phasedRange, "bt_phased_range_" + suf, phasedRounds * tiles, true},
		{&ks.buildLevel, "bt_build_level_" + suf, tiles, true}, // one node per tile
		{&ks.markLast, "bt_mark_last_" + widthSuffix[K](), 32, true},
		{&ks.iota, "bt_iota", 32, true},
		{&ks.checkKinds, "bt_check_kinds", 32, true},
	} {
		if f.dst.f, err = mod.Function(f.name); err != nil {
			return ks, err
		}
		f.dst.perWarp = f.perWarp
		if !f.stride {
			continue
		}
		per, err := f.dst.f.MaxActiveBlocksPerSM(blockSize, 0)
		if err != nil {
			return ks, err
		}
		f.dst.maxBlocks = max(1, per*max(sms, 1))
	}
	return ks, nil
}
