package prim_test

import (
	"errors"
	"fmt"

	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/prim"
)

// SortPairs sorts device-resident pairs stably, in place (this example
// needs a GPU, so it is compiled but not run by go test).
func ExampleSortPairs() {
	dev, err := cuda.Open(0)
	if errors.Is(err, cuda.ErrNoDevice) {
		fmt.Println("no GPU here")
		return
	}
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	e, err := prim.NewEngine(dev)
	if err != nil {
		panic(err)
	}
	defer e.Close()
	keys, err := cuda.FromHost(dev, []uint32{3, 1, 2})
	if err != nil {
		panic(err)
	}
	defer keys.Free()
	vals, err := cuda.FromHost(dev, []uint32{'c', 'a', 'b'})
	if err != nil {
		panic(err)
	}
	defer vals.Free()
	if err := prim.SortPairs(e, nil, keys, vals, prim.SortOptions{}); err != nil {
		panic(err)
	}
	if err := dev.Synchronize(); err != nil { // GPU functions are asynchronous
		panic(err)
	}
	k, _ := keys.ToHost()
	v, _ := vals.ToHost()
	fmt.Printf("%v [%c %c %c]\n", k, v[0], v[1], v[2]) // [1 2 3] [a b c]
}

// Every GPU primitive has a host twin with the same semantics, the oracle
// of the tests: here a merge of two sorted runs, equal keys from a first.
func ExampleMergePairsHost() {
	ak, av := []uint32{1, 3, 5}, []uint32{10, 30, 50}
	bk, bv := []uint32{3, 4}, []uint32{31, 40}
	ok, ov := make([]uint32, 5), make([]uint32, 5)
	prim.MergePairsHost(ak, av, bk, bv, ok, ov, prim.MergeOptions[uint32]{})
	fmt.Println(ok, ov)
	// Output: [1 3 3 4 5] [10 30 31 40 50]
}
