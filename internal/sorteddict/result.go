// Package sorteddict holds what the sorted dictionaries (packages sortedarray
// and lsm) share: range-query results on the host and on the device, argument
// checks, and the GPU plumbing both use (grow-only device scratch, pinned
// staging of Go slices, kernel launch shapes).
package sorteddict

import "github.com/warpkit/warpkit"

// RangeResult and DeviceRange are the shared range-result types.
type (
	RangeResult[K, V warpkit.Word] = warpkit.Ranges[K, V]
	DeviceRange[K, V warpkit.Word] = warpkit.DeviceRanges[K, V]
)

// ErrNoDeviceSlices is what the CPU backends' device-resident methods return.
var ErrNoDeviceSlices = warpkit.ErrNeedsCUDA
