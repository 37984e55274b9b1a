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

// kernel is a function with its launch shape (gpurt.Kernel).
type kernel = gpurt.Kernel

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
	suf := widthSuffix[K]() + "_" + widthSuffix[V]()
	tiles := 32 / (layoutFor(int(unsafe.Sizeof(*new(K))), int(unsafe.Sizeof(*new(V)))).NodeBytes / 16) // tiles per warp
	err = gpurt.LoadKernels(mod, dev, blockSize, []gpurt.KernelSpec{
		{Dst: &ks.lookup, Name: "bt_lookup_" + suf, PerWarp: tiles},
		{Dst: &ks.neighbor, Name: "bt_neighbor_" + suf, PerWarp: tiles},
		{Dst: &ks.rng, Name: "bt_range_" + suf, PerWarp: tiles},
		{Dst: &ks.insert, Name: "bt_insert_" + suf, PerWarp: tiles, Block: writeBlock},
		{Dst: &ks.del, Name: "bt_delete_" + suf, PerWarp: tiles},
		{Dst: &ks.mixed, Name: "bt_mixed_" + suf, PerWarp: tiles},
		{Dst: &ks.phasedLookup, Name: "bt_phased_lookup_" + suf, PerWarp: phasedRounds * tiles, Stride: true},
		{Dst: &ks.phasedNeighbor, Name: "bt_phased_neighbor_" + suf, PerWarp: phasedRounds * tiles, Stride: true},
		{Dst: &ks.phasedRange, Name: "bt_phased_range_" + suf, PerWarp: phasedRounds * tiles, Stride: true},
		{Dst: &ks.buildLevel, Name: "bt_build_level_" + suf, PerWarp: tiles, Stride: true}, // one node per tile
		{Dst: &ks.markLast, Name: "bt_mark_last_" + widthSuffix[K](), PerWarp: 32, Stride: true},
		{Dst: &ks.iota, Name: "bt_iota", PerWarp: 32, Stride: true},
		{Dst: &ks.checkKinds, Name: "bt_check_kinds", PerWarp: 32, Stride: true},
	})
	return ks, err
}
