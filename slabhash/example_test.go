package slabhash_test

import (
	"context"
	"fmt"
	"slices"

	"github.com/warpkit/warpkit/slabhash"
)

// A Map on the default backend: CUDA when a device is present, the pure-Go
// backend otherwise, with the same results.
func ExampleMap() {
	ctx := context.Background()
	m, err := slabhash.NewMap[uint32, uint64](slabhash.Options{ExpectedSize: 1 << 10})
	if err != nil {
		panic(err)
	}
	defer m.Close()

	res := make([]slabhash.Result, 3)
	if err := m.Insert(ctx, []uint32{1, 2, 3}, []uint64{10, 20, 30}, res); err != nil {
		panic(err)
	}
	fmt.Println("insert:", res)

	// One mixed batch, one kernel: delete 1, look 2 up, insert 4.
	vals := []uint64{0, 0, 40}
	err = m.Apply(ctx, []slabhash.Op{slabhash.OpDelete, slabhash.OpFind, slabhash.OpInsert}, []uint32{1, 2, 4}, vals, res)
	if err != nil {
		panic(err)
	}
	fmt.Println("apply:", res, "value of 2:", vals[1])

	n, _ := m.Len(ctx)
	keys, _, _ := m.Pairs(ctx)
	slices.Sort(keys)
	fmt.Println("len:", n, "keys:", keys)
	// Output:
	// insert: [inserted inserted inserted]
	// apply: [removed found inserted] value of 2: 20
	// len: 3 keys: [2 3 4]
}

// A MultiMap keeps every value of a key, oldest first.
func ExampleMultiMap() {
	ctx := context.Background()
	m, err := slabhash.NewMultiMap[uint32, uint32](slabhash.Options{})
	if err != nil {
		panic(err)
	}
	defer m.Close()
	if err := m.Insert(ctx, []uint32{7, 7, 8, 7}, []uint32{1, 2, 3, 4}, nil); err != nil {
		panic(err)
	}
	offsets, vals, err := m.LookupAll(ctx, []uint32{7, 8, 9})
	if err != nil {
		panic(err)
	}
	for i, k := range []uint32{7, 8, 9} {
		v := vals[offsets[i]:offsets[i+1]]
		slices.Sort(v) // one batch's pairs have no order among themselves
		fmt.Println(k, v)
	}
	// Output:
	// 7 [1 2 4]
	// 8 [3]
	// 9 []
}

// A Set answers membership.
func ExampleSet() {
	ctx := context.Background()
	s, err := slabhash.NewSet[uint64](slabhash.Options{})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	if err := s.Insert(ctx, []uint64{5, 6}, nil); err != nil {
		panic(err)
	}
	res := make([]slabhash.Result, 3)
	if err := s.Lookup(ctx, []uint64{5, 6, 7}, res); err != nil {
		panic(err)
	}
	fmt.Println(res)
	// Output: [found found not-found]
}
