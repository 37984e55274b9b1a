package kv_test

import (
	"errors"
	"fmt"
	"os"

	"github.com/warpkit/warpkit/kv"
)

// A store in a directory: writes, an atomic batch with a range deletion, a
// bounded iterator ([LowerBound, UpperBound)), and a snapshot.
func Example() {
	dir, err := os.MkdirTemp("", "kv-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	db, err := kv.Open(dir, nil) // created if missing
	if err != nil {
		panic(err)
	}
	defer db.Close()

	for _, k := range []string{"apple", "banana", "cherry", "date", "fig"} {
		if err := db.Set([]byte(k), []byte("fruit:"+k), kv.NoSync); err != nil {
			panic(err)
		}
	}
	snap, err := db.NewSnapshot()
	if err != nil {
		panic(err)
	}
	defer snap.Close()

	b := db.NewBatch()
	b.Set([]byte("banana"), []byte("yellow"))
	b.DeleteRange([]byte("c"), []byte("e")) // cherry and date
	if err := b.Commit(kv.Sync); err != nil {
		panic(err)
	}

	it, err := db.NewIter(&kv.IterOptions{LowerBound: []byte("b"), UpperBound: []byte("g")})
	if err != nil {
		panic(err)
	}
	for k, v := range it.All() {
		fmt.Printf("%s=%s\n", k, v)
	}
	if err := it.Close(); err != nil {
		panic(err)
	}

	_, err = db.Get([]byte("cherry"))
	fmt.Println("cherry deleted:", errors.Is(err, kv.ErrNotFound))
	v, err := snap.Get([]byte("cherry"))
	fmt.Printf("the snapshot still sees %s (%v)\n", v, err)
	// Output:
	// banana=yellow
	// fig=fruit:fig
	// cherry deleted: true
	// the snapshot still sees fruit:cherry (<nil>)
}
