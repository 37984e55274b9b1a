package sortedarray_test

import (
	"context"
	"fmt"

	"github.com/warpkit/warpkit/sortedarray"
)

// The sorted array: batches merged into one sorted run; counts over
// half-open ranges.
func ExampleSortedArray() {
	ctx := context.Background()
	a, err := sortedarray.New[uint32, uint32](sortedarray.Options{})
	if err != nil {
		panic(err)
	}
	defer a.Close()
	if err := a.Insert(ctx, []uint32{30, 10, 20, 40}, []uint32{3, 1, 2, 4}); err != nil {
		panic(err)
	}
	counts := make([]uint32, 2)
	if err := a.Count(ctx, []uint32{10, 15}, []uint32{30, 100}, counts); err != nil {
		panic(err)
	}
	fmt.Println("counts of [10, 30) and [15, 100):", counts)
	keys, vals, found := []uint32{25}, make([]uint32, 1), make([]bool, 1)
	if err := a.Successor(ctx, []uint32{25}, keys, vals, found); err != nil {
		panic(err)
	}
	fmt.Println("successor of 25:", keys[0], vals[0], found[0])
	// Output:
	// counts of [10, 30) and [15, 100): [2 3]
	// successor of 25: 30 3 true
}
