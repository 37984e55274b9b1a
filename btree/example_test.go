package btree_test

import (
	"context"
	"fmt"

	"github.com/warpkit/warpkit/btree"
)

// An ordered map: bulk build, inserts, half-open ranges, neighbours and one
// mixed batch.
func ExampleTree() {
	ctx := context.Background()
	t, err := btree.New[uint64, uint64](btree.Options{})
	if err != nil {
		panic(err)
	}
	defer t.Close()

	if err := t.Build(ctx, []uint64{10, 20, 30, 40}, []uint64{1, 2, 3, 4}); err != nil {
		panic(err)
	}
	if err := t.Insert(ctx, []uint64{25, 20}, []uint64{250, 200}); err != nil { // 20 is replaced
		panic(err)
	}
	seq, err := t.AscendRange(ctx, 20, 40) // [20, 40)
	if err != nil {
		panic(err)
	}
	for k, v := range seq {
		fmt.Println(k, v)
	}

	keys, vals, found := make([]uint64, 1), make([]uint64, 1), make([]bool, 1)
	if err := t.Predecessor(ctx, []uint64{25}, keys, vals, found); err != nil {
		panic(err)
	}
	fmt.Println("predecessor of 25:", keys[0], vals[0])

	// One mixed batch: delete 10, count [15, 100) (its elements run
	// concurrently on the GPU, so they touch different keys).
	ops := btree.Ops[uint64, uint64]{
		Kinds: []btree.OpKind{btree.OpDelete, btree.OpCount},
		Keys:  []uint64{10, 15},
		His:   []uint64{0, 100},
	}
	res := btree.Results[uint64, uint64]{Counts: make([]uint32, 2)}
	if err := t.Apply(ctx, ops, res); err != nil {
		panic(err)
	}
	n, _ := t.Len(ctx)
	fmt.Println("count:", res.Counts[1], "len:", n)
	// Output:
	// 20 200
	// 25 250
	// 30 3
	// predecessor of 25: 20 200
	// count: 4 len: 4
}
