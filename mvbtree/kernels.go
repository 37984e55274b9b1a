package mvbtree

import (
	_ "embed"
	"fmt"
	"unsafe"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/gpurt"
)

//go:generate go run github.com/warpkit/warpkit/internal/kernelgen -o ptx/mvbtree.ptx mvbtree.cu

// mvbtreePTX holds the tree's kernels for every key/value width pair.
//
//go:embed ptx/mvbtree.ptx
var mvbtreePTX []byte

const blockSize = 256

// writeBlock is the block size of the insert kernel (one operation per tile):
// a block ends only when its slowest tile does, and at 256 threads (32
// operations) a third of the insert kernel's warp time was spent waiting at
// its end (ncu's stall sampling, H200). At the kernel's 64 registers a block
// of one warp keeps the occupancy of 256 (32 warps an SM either way); builds
// got 15-25% faster from 8M keys up (docs/benchmarks.md). The delete kernel
// (48 registers: 40 warps an SM in blocks of 256, 32 in blocks of 32) keeps
// 256 until a same-run A/B.
const writeBlock = 32

// phasedRounds is kRounds of blink_wave.cuh: the queries a tile of a phased
// wave holds.
const phasedRounds = 4

// Values shared with mvbtree.cu.
const (
	stampLatest     = 0xffffffff // the stamp of a query of the latest version
	stampIndex      = 0xfffffffe // the stamp of a version index (kIndexTs)
	indexMin        = 4          // versions a chain holds before its head gets an index (kIndexMin)
	indexStrideMask = 0xff       // an index's link: its stride, then the count of closed stamps (kStrideMask)
	ctlKeys         = 0          // control words: live keys,
	ctlVersions     = 1          // units linked behind heads (older versions and version indexes)
	ctlWords        = 2
	scanVacuum      = 0 // unit scans
	scanStats       = 1
	scanRestamp     = 2
	scanOut         = 5 // words a scan writes: heads, linked versions, pinned versions, unlinked, version indexes
)

// statusErr maps a kernel's status word to an error (the flags are the
// shared registry's, internal/devcode/status.cuh).
func statusErr(st uint32) error {
	if st&gpurt.StatusInvalidArgument != 0 {
		return fmt.Errorf("%w: a range window that is decreasing or passes the end of the output buffers", warpkit.ErrInvalidArgument)
	}
	return gpurt.StatusError("device batch", st)
}

// kernels are one width pair's functions.
type kernels struct {
	insert, del, lookup, neighbor, rng gpurt.Kernel // one operation per tile
	// The write kernels that link and unlink nothing (gpu.go, writeKind):
	// Plain, and PlainCopy under CopyAlways.
	insertPlain, delPlain, insertCopy, delCopy gpurt.Kernel
	// Phased queries of the latest version: lockstep waves of phasedRounds
	// queries per tile, on a persistent grid.
	phasedLookup, phasedNeighbor, phasedRange gpurt.Kernel
	buildLevel, scan, poison, markLast        gpurt.Kernel // grid-stride
}

func widthSuffix[T warpkit.Word]() string {
	var z T
	if unsafe.Sizeof(z) == 8 {
		return "u64"
	}
	return "u32"
}

func loadKernels[K, V warpkit.Word](dev *cuda.Device, l layout) (kernels, error) {
	var ks kernels
	mod, err := dev.LoadModule(mvbtreePTX)
	if err != nil {
		return ks, err
	}
	suf := widthSuffix[K]() + "_" + widthSuffix[V]()
	tiles := 32 / (l.NodeBytes / 16) // tiles per warp
	err = gpurt.LoadKernels(mod, dev, blockSize, []gpurt.KernelSpec{
		{Dst: &ks.insert, Name: "mvb_insert_" + suf, PerWarp: tiles, Block: writeBlock},
		{Dst: &ks.del, Name: "mvb_delete_" + suf, PerWarp: tiles},
		{Dst: &ks.insertPlain, Name: "mvb_insert_plain_" + suf, PerWarp: tiles, Block: writeBlock},
		{Dst: &ks.delPlain, Name: "mvb_delete_plain_" + suf, PerWarp: tiles},
		{Dst: &ks.insertCopy, Name: "mvb_insert_copy_" + suf, PerWarp: tiles, Block: writeBlock},
		{Dst: &ks.delCopy, Name: "mvb_delete_copy_" + suf, PerWarp: tiles},
		{Dst: &ks.lookup, Name: "mvb_lookup_" + suf, PerWarp: tiles},
		{Dst: &ks.neighbor, Name: "mvb_neighbor_" + suf, PerWarp: tiles},
		{Dst: &ks.rng, Name: "mvb_range_" + suf, PerWarp: tiles},
		{Dst: &ks.phasedLookup, Name: "mvb_phased_lookup_" + suf, PerWarp: phasedRounds * tiles, Stride: true},
		{Dst: &ks.phasedNeighbor, Name: "mvb_phased_neighbor_" + suf, PerWarp: phasedRounds * tiles, Stride: true},
		{Dst: &ks.phasedRange, Name: "mvb_phased_range_" + suf, PerWarp: phasedRounds * tiles, Stride: true},
		{Dst: &ks.buildLevel, Name: "mvb_build_level_" + suf, PerWarp: tiles, Stride: true},
		{Dst: &ks.scan, Name: "mvb_scan_" + suf, PerWarp: tiles, Stride: true},
		{Dst: &ks.poison, Name: fmt.Sprintf("mvb_poison_%d", l.NodeBytes), PerWarp: tiles, Stride: true},
		{Dst: &ks.markLast, Name: "mvb_mark_last_" + widthSuffix[K](), PerWarp: 32, Stride: true},
	})
	return ks, err
}
