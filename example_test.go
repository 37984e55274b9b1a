package warpkit_test

import (
	"errors"
	"fmt"

	"github.com/warpkit/warpkit"
)

// OpenDevice with Auto opens a device when one is present and returns nil
// otherwise; structures do this themselves when Options.Device is nil.
func ExampleOpenDevice() {
	dev, err := warpkit.OpenDevice(warpkit.Auto, 0)
	if err != nil {
		panic(err)
	}
	if dev != nil {
		defer dev.Close()
	}
	_, err = warpkit.ParseBackend("tpu")
	fmt.Println(errors.Is(err, warpkit.ErrInvalidArgument))
	// Output: true
}

// Ranges holds a batch of range answers: query i's pairs in key order.
func ExampleRanges() {
	r := &warpkit.Ranges[uint32, uint64]{
		Offsets: []int{0, 2, 2, 3},
		Keys:    []uint32{1, 4, 9},
		Vals:    []uint64{10, 40, 90},
	}
	for i := range r.Len() {
		fmt.Print(i, ":")
		for k, v := range r.Query(i) {
			fmt.Print(" ", k, "=", v)
		}
		fmt.Println()
	}
	// Output:
	// 0: 1=10 4=40
	// 1:
	// 2: 9=90
}
