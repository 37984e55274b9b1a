package mvbtree_test

import (
	"context"
	"fmt"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/mvbtree"
)

// A snapshot keeps the tree as it was: deletes after it do not reach it.
func Example() {
	ctx := context.Background()
	t, err := mvbtree.New[uint32, uint32](mvbtree.Options{Backend: warpkit.CPU})
	if err != nil {
		panic(err)
	}
	defer t.Close()
	if err := t.Insert(ctx, []uint32{10, 20, 30}, []uint32{1, 2, 3}); err != nil {
		panic(err)
	}
	snap, err := t.Snapshot(ctx)
	if err != nil {
		panic(err)
	}
	defer snap.Close()
	if err := t.Delete(ctx, []uint32{20}); err != nil {
		panic(err)
	}
	if err := t.Insert(ctx, []uint32{40}, []uint32{4}); err != nil {
		panic(err)
	}
	now, _ := t.All(ctx)
	for k, v := range now {
		fmt.Print(k, "=", v, " ")
	}
	fmt.Println("(latest)")
	then, _ := snap.All(ctx)
	for k, v := range then {
		fmt.Print(k, "=", v, " ")
	}
	fmt.Printf("(snapshot %d)\n", snap.Version())
	// Output:
	// 10=1 30=3 40=4 (latest)
	// 10=1 20=2 30=3 (snapshot 0)
}
