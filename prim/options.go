package prim

import (
	"fmt"
	"unsafe"

	"github.com/warpkit/warpkit"
)

// MaxElements is the largest number of elements one primitive call handles:
// sizes and positions are 32-bit signed integers on the device.
const MaxElements = 1<<31 - 1

// MaxSegmentedElements is the largest total length SegmentedSortPairs and
// SegmentedSortKeys accept. The kernels that sort one long segment step
// 32-bit loop counters by up to a radix tile (4096 elements) past the
// segment's length, which overflows for a segment longer than 2^31 - 4096;
// the offsets live on the device, so the host bounds the total length (no
// segment is longer) with a margin of 2^13. Sort one huge segment with
// SortPairs, which has no such limit.
const MaxSegmentedElements = 1<<31 - 1<<13

// SortOptions selects the key bits [BeginBit, EndBit) to sort on; the zero
// value means all bits of the key type.
type SortOptions struct{ BeginBit, EndBit int }

// Validate reports whether the options are valid for keys of keyBits bits (32
// or 64): either the zero value, or 0 <= BeginBit < EndBit <= keyBits.
func (o SortOptions) Validate(keyBits int) error {
	if o == (SortOptions{}) {
		return nil
	}
	if o.BeginBit < 0 || o.EndBit <= o.BeginBit || o.EndBit > keyBits {
		return fmt.Errorf("%w: prim: sort bit range [%d, %d) for %d-bit keys", warpkit.ErrInvalidArgument, o.BeginBit, o.EndBit, keyBits)
	}
	return nil
}

// bitRange returns the validated, normalized range for keys of type K.
func bitRange[K warpkit.Word](o SortOptions) (begin, end int, err error) {
	kb := keyBits[K]()
	if err := o.Validate(kb); err != nil {
		return 0, 0, err
	}
	if o == (SortOptions{}) {
		return 0, kb, nil
	}
	return o.BeginBit, o.EndBit, nil
}

// optionalSortOptions returns the single optional SortOptions of a variadic
// parameter (the zero value when absent).
func optionalSortOptions(opts []SortOptions) (SortOptions, error) {
	switch len(opts) {
	case 0:
		return SortOptions{}, nil
	case 1:
		return opts[0], nil
	}
	return SortOptions{}, fmt.Errorf("%w: prim: more than one SortOptions", warpkit.ErrInvalidArgument)
}

// MergeOptions configures a merge: keys are compared as (k & KeyMask), where the
// zero KeyMask means all bits. Ties: all of A's equal elements come before B's.
type MergeOptions[K warpkit.Word] struct{ KeyMask K }

// mask returns the effective comparison mask.
func (o MergeOptions[K]) mask() K {
	if o.KeyMask == 0 {
		return ^K(0)
	}
	return o.KeyMask
}

// ValidateOffsets reports whether offsets describe segments covering n
// elements: at least one entry, offsets[0] = 0, non-decreasing, last = n.
func ValidateOffsets(offsets []uint32, n int) error {
	if len(offsets) == 0 {
		return fmt.Errorf("%w: prim: empty segment offsets (want segments+1 entries)", warpkit.ErrInvalidArgument)
	}
	if offsets[0] != 0 {
		return fmt.Errorf("%w: prim: segment offsets start at %d, not 0", warpkit.ErrInvalidArgument, offsets[0])
	}
	for i := 1; i < len(offsets); i++ {
		if offsets[i] < offsets[i-1] {
			return fmt.Errorf("%w: prim: segment offsets decrease at %d (%d < %d)", warpkit.ErrInvalidArgument, i, offsets[i], offsets[i-1])
		}
	}
	if last := offsets[len(offsets)-1]; int64(last) != int64(n) {
		return fmt.Errorf("%w: prim: segment offsets end at %d, not at the %d elements", warpkit.ErrInvalidArgument, last, n)
	}
	return nil
}

func keyBits[K warpkit.Word]() int {
	var k K
	return int(unsafe.Sizeof(k)) * 8
}
