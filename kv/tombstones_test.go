package kv

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/warpkit/warpkit/kv/vfs"
)

// countOpens counts the opens of files whose names end in suffix; it
// injects no errors.
type countOpens struct {
	suffix string
	n      atomic.Int64
}

func (c *countOpens) MaybeError(op vfs.Op, path string) error {
	if op == vfs.OpOpen && strings.HasSuffix(path, c.suffix) {
		c.n.Add(1)
	}
	return nil
}

// TestTombstoneTablesReadOncePerOpen: a store whose tables hold only range
// tombstones. Open reads none of them; the first iterator reads each once
// (it needs every table's tombstones); a later version, after a flush, must
// not read them again. It did: each version gathered the tombstones through
// the table cache, so every table evicted from it (more tables than
// MaxOpenFiles) was reopened by the first iterator on every new version.
func TestTombstoneTablesReadOncePerOpen(t *testing.T) {
	const tables = 40
	mem := vfs.NewMem()
	opts := Options{FS: mem, MaxOpenFiles: 16, // fewer than the tables
		L0CompactionThreshold: 1000, L0SlowdownWritesThreshold: 1000, L0StopWritesThreshold: 1000}
	db, err := Open("/db", &opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range tables {
		if err := db.DeleteRange([]byte(fmt.Sprintf("k%03d", i)), []byte(fmt.Sprintf("k%03d~", i)), nil); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if got := tablesPerLevel(db.Metrics())[0]; got != tables {
		t.Fatalf("%d L0 tables, want %d", got, tables)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	opens := &countOpens{suffix: ".sst"}
	opts.FS = vfs.NewFault(mem, opens)
	db, err = Open("/db", &opts)
	if err != nil {
		t.Fatal(err)
	}
	if n := opens.n.Load(); n != 0 {
		t.Fatalf("Open opened %d tables", n)
	}
	newIter := func() {
		t.Helper()
		it, err := db.NewIter(nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
	}
	newIter()
	if n := opens.n.Load(); n != tables {
		t.Fatalf("the first iterator opened %d tables, want each of the %d once", n, tables)
	}
	for round := range 3 {
		opens.n.Store(0)
		db.Set([]byte(fmt.Sprintf("p%d", round)), []byte("v"), nil)
		if err := db.Flush(); err != nil { // a new version, with a table without tombstones
			t.Fatal(err)
		}
		newIter()
		if n := opens.n.Load(); n != 0 {
			t.Fatalf("round %d: an iterator on a new version reopened %d tables", round, n)
		}
	}
	mustGet(t, db, "p0", "v")
	if _, err := db.Get([]byte("k005")); err != ErrNotFound {
		t.Fatalf("Get of a deleted key: %v", err)
	}
	// Deleted tables leave the tombstone cache. (Close waits for the
	// background deletions, then deletes what is left.)
	if err := db.Compact(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	live := db.vs.LiveFileNums()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for n := range db.tableTombs {
		if !live[n] {
			t.Fatalf("tombstones of deleted table %s still cached", n)
		}
	}
}
