package lsm_test

import (
	"context"
	"fmt"

	"github.com/warpkit/warpkit/lsm"
)

// The GPU LSM takes mixed batches of insertions and deletions and answers
// lookups, counts and ranges (half-open: [lo, hi)).
func ExampleLSM() {
	ctx := context.Background()
	l, err := lsm.New[uint32, uint64](lsm.Options{BatchSize: 4})
	if err != nil {
		panic(err)
	}
	defer l.Close()

	// One batch: insert 1..6, then delete 3 (dels[i] deletes keys[i]).
	keys := []uint32{1, 2, 3, 4, 5, 6, 3}
	vals := []uint64{10, 20, 30, 40, 50, 60, 0}
	dels := []bool{false, false, false, false, false, false, true}
	if err := l.Update(ctx, keys, vals, dels); err != nil {
		panic(err)
	}
	// A later batch wins: replace 2.
	if err := l.Insert(ctx, []uint32{2}, []uint64{200}); err != nil {
		panic(err)
	}

	out, found := make([]uint64, 3), make([]bool, 3)
	if err := l.Lookup(ctx, []uint32{2, 3, 9}, out, found); err != nil {
		panic(err)
	}
	fmt.Println("lookup:", out, found)

	r, err := l.Range(ctx, []uint32{2}, []uint32{6})
	if err != nil {
		panic(err)
	}
	for k, v := range r.Query(0) {
		fmt.Println("range:", k, v)
	}

	// Compact drops the stale entries (the replaced 2, the deleted 3).
	if err := l.Compact(ctx); err != nil {
		panic(err)
	}
	n, _ := l.Len(ctx)
	fmt.Println("live keys:", n)
	// Output:
	// lookup: [200 0 0] [true false false]
	// range: 2 200
	// range: 4 40
	// range: 5 50
	// live keys: 5
}
