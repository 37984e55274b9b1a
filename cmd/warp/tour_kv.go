package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/warpkit/warpkit/kv"
)

func init() {
	registerTourPart(tourPart{order: 60, name: "kv: persistent LSM key-value store (pure Go; compaction behind a GPU-ready interface)", run: tourKV})
}

// tourKV opens a store in a temporary directory, writes, reads, iterates,
// deletes a range, reopens, and checks that everything survived.
func tourKV(ctx context.Context, env tourEnv) error {
	dir, err := os.MkdirTemp("", "warp-tour-kv")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	const n = 50_000
	opts := &kv.Options{MemTableSize: 1 << 20} // small memtable: the tour shows flushes and compactions
	db, err := kv.Open(dir, opts)
	if err != nil {
		return err
	}
	key := func(i int) []byte { return []byte(fmt.Sprintf("user%06d", i)) }
	start := time.Now()
	b := db.NewBatch()
	for i := range n {
		b.Set(key(i), []byte(fmt.Sprintf("value-%d", i)))
		if b.Count() == 1000 {
			if err := b.Commit(kv.NoSync); err != nil {
				db.Close()
				return err
			}
			b = db.NewBatch()
		}
		if i%10_000 == 0 && ctx.Err() != nil {
			db.Close()
			return ctx.Err()
		}
	}
	if err := db.Set([]byte("last"), []byte("synced"), kv.Sync); err != nil {
		db.Close()
		return err
	}
	wrote := time.Since(start)
	fmt.Printf("   wrote %d keys in batches of 1000 (+1 synced write): %.0f keys/s\n", n, n/wrote.Seconds())

	start = time.Now()
	for i := 0; i < n; i += 7 {
		v, err := db.Get(key(i))
		if err != nil || string(v) != fmt.Sprintf("value-%d", i) {
			db.Close()
			return fmt.Errorf("get %s: %q, %v", key(i), v, err)
		}
	}
	fmt.Printf("   read every 7th key back: %.0f gets/s\n", float64(n/7)/time.Since(start).Seconds())

	if err := db.DeleteRange(key(1000), key(2000), nil); err != nil {
		db.Close()
		return err
	}
	it, err := db.NewIter(&kv.IterOptions{LowerBound: key(990), UpperBound: key(2010)})
	if err != nil {
		db.Close()
		return err
	}
	var keys []string
	for k := range it.All() {
		keys = append(keys, string(k))
	}
	if err := it.Close(); err != nil {
		db.Close()
		return err
	}
	if len(keys) != 20 {
		db.Close()
		return fmt.Errorf("after deleting [user001000, user002000) the range [user000990, user002010) holds %d keys, want 20", len(keys))
	}
	fmt.Printf("   deleted the range [%s, %s); iterating [%s, %s) gives %s .. %s (%d keys)\n",
		key(1000), key(2000), key(990), key(2010), keys[0], keys[len(keys)-1], len(keys))
	m := db.Metrics()
	fmt.Printf("   %d memtable flushes, %d compactions, write amplification %.2f\n", m.MemTable.Flushes, m.Compaction.Count, m.WriteAmp())
	if err := db.Close(); err != nil {
		return err
	}

	start = time.Now()
	db, err = kv.Open(dir, opts)
	if err != nil {
		return err
	}
	defer db.Close()
	v, err := db.Get([]byte("last"))
	if err != nil || string(v) != "synced" {
		return fmt.Errorf("after reopen: last = %q, %v", v, err)
	}
	if _, err := db.Get(key(1500)); !errors.Is(err, kv.ErrNotFound) {
		return fmt.Errorf("after reopen: deleted key present (%v)", err)
	}
	if v, err := db.Get(key(n - 1)); err != nil || string(v) != fmt.Sprintf("value-%d", n-1) {
		return fmt.Errorf("after reopen: %s = %q, %v", key(n-1), v, err)
	}
	fmt.Printf("   reopened in %v: writes and the range deletion survived\n", time.Since(start).Round(time.Millisecond))
	return db.CheckIntegrity()
}
