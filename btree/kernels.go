package btree

import (
	_ "embed"
	"fmt"
	"unsafe"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
)

//go:generate go run github.com/warpkit/warpkit/internal/kernelgen -o btree.ptx btree.cu

// btreePTX holds the tree's kernels for every key/value width pair.
//
//go:embed btree.ptx
var btreePTX []byte

// Status flags of internal/devcode/status.cuh.
const (
	statusRetryLimit    = 1 << 0
	statusPoolExhausted = 1 << 1
)

// statusErr maps a kernel's status word to an error.
func statusErr(st uint32) error {
	switch {
	case st&statusPoolExhausted != 0:
		return warpkit.ErrPoolExhausted
	case st&statusRetryLimit != 0:
		return warpkit.ErrRetryLimit
	case st != 0:
		return fmt.Errorf("unknown device status %#x", st)
	}
	return nil
}

// kernels are one width pair's functions.
type kernels struct {
	lookup, neighbor, rng, insert, del, mixed, buildLevel, markLast *cuda.Function
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
	for _, f := range []struct {
		dst  **cuda.Function
		name string
	}{
		{&ks.lookup, "bt_lookup_" + suf},
		{&ks.neighbor, "bt_neighbor_" + suf},
		{&ks.rng, "bt_range_" + suf},
		{&ks.insert, "bt_insert_" + suf},
		{&ks.del, "bt_delete_" + suf},
		{&ks.mixed, "bt_mixed_" + suf},
		{&ks.buildLevel, "bt_build_level_" + suf},
		{&ks.markLast, "bt_mark_last_" + widthSuffix[K]()},
	} {
		if *f.dst, err = mod.Function(f.name); err != nil {
			return ks, err
		}
	}
	return ks, nil
}
