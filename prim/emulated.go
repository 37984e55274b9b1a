package prim

import (
	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
)

// On an emulated device (cuda.OpenEmulated: kernels run on the CPU for tests
// of GPU code without a GPU) prim's kernels do not run: they are built on
// CUB, which the emulation does not compile. Each operation instead copies
// its inputs out of the device memory, runs its host twin (cpu.go: the same
// results, the oracle of the GPU tests) and copies the outputs back. The
// emulated device is synchronous, so the stream order holds. Inputs were
// validated by the caller as for the kernels.

func hostCopy[T cuda.Elem](s cuda.Slice[T]) ([]T, error) {
	if s.Len() == 0 {
		return nil, nil
	}
	return s.ToHost()
}

func deviceCopy[T cuda.Elem](s cuda.Slice[T], v []T) error {
	if s.Len() == 0 {
		return nil
	}
	return s.CopyFromHost(v)
}

func emulatedSort[K, V warpkit.Word](keys cuda.Slice[K], vals cuda.Slice[V], pairs bool, offsets *cuda.Slice[uint32], opt SortOptions) error {
	k, err := hostCopy(keys)
	if err != nil {
		return err
	}
	var v []V
	if pairs {
		if v, err = hostCopy(vals); err != nil {
			return err
		}
	}
	if offsets != nil {
		off, err := hostCopy(*offsets)
		if err != nil {
			return err
		}
		if pairs {
			SegmentedSortPairsHost(k, v, off, opt)
		} else {
			SegmentedSortKeysHost(k, off, opt)
		}
	} else if pairs {
		SortPairsHost(k, v, opt)
	} else {
		SortKeysHost(k, opt)
	}
	if err := deviceCopy(keys, k); err != nil {
		return err
	}
	if pairs {
		return deviceCopy(vals, v)
	}
	return nil
}

func emulatedMerge[K, V warpkit.Word](a cuda.Slice[K], av cuda.Slice[V], b cuda.Slice[K], bv cuda.Slice[V],
	out cuda.Slice[K], outv cuda.Slice[V], pairs bool, opt MergeOptions[K]) error {
	ak, err := hostCopy(a)
	if err != nil {
		return err
	}
	bk, err := hostCopy(b)
	if err != nil {
		return err
	}
	ok := make([]K, out.Len())
	if !pairs {
		MergeKeysHost(ak, bk, ok, opt)
		return deviceCopy(out, ok)
	}
	avs, err := hostCopy(av)
	if err != nil {
		return err
	}
	bvs, err := hostCopy(bv)
	if err != nil {
		return err
	}
	ov := make([]V, outv.Len())
	MergePairsHost(ak, avs, bk, bvs, ok, ov, opt)
	if err := deviceCopy(out, ok); err != nil {
		return err
	}
	return deviceCopy(outv, ov)
}

func emulatedScan[T warpkit.Word](in, out, total cuda.Slice[T]) error {
	v, err := hostCopy(in)
	if err != nil {
		return err
	}
	o := make([]T, len(v))
	sum := ExclusiveScanHost(v, o)
	if err := deviceCopy(out, o); err != nil {
		return err
	}
	if total.Len() > 0 {
		return deviceCopy(total.Sub(0, 1), []T{sum})
	}
	return nil
}

func emulatedSelect[K, V warpkit.Word](keys cuda.Slice[K], vals cuda.Slice[V], pairs bool, flags cuda.Slice[uint8],
	outKeys cuda.Slice[K], outVals cuda.Slice[V], count cuda.Slice[uint32], split bool) error {
	k, err := hostCopy(keys)
	if err != nil {
		return err
	}
	f, err := hostCopy(flags)
	if err != nil {
		return err
	}
	v := make([]V, len(k))
	if pairs {
		if v, err = hostCopy(vals); err != nil {
			return err
		}
	}
	ok, ov := make([]K, outKeys.Len()), make([]V, outKeys.Len())
	var n int
	if split {
		n = Multisplit2PairsHost(k, v, f, ok, ov)
	} else {
		n = SelectFlaggedPairsHost(k, v, f, ok, ov)
	}
	// Only the selected prefix is written, as the kernels write it.
	w := min(n, len(ok))
	if split {
		w = len(ok)
	}
	if w > 0 {
		if err := deviceCopy(outKeys.Sub(0, w), ok[:w]); err != nil {
			return err
		}
		if pairs {
			if err := deviceCopy(outVals.Sub(0, w), ov[:w]); err != nil {
				return err
			}
		}
	}
	if count.Len() > 0 {
		return deviceCopy(count.Sub(0, 1), []uint32{uint32(n)})
	}
	return nil
}
