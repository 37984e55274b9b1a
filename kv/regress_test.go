package kv

import (
	"testing"

	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/vfs"
)

// TestEmptyDeleteRangeReopens: an empty range deletion (start >= end) is the
// only write before Close; the store must reopen and work.
func TestEmptyDeleteRangeReopens(t *testing.T) {
	opts := Options{FS: vfs.NewMem()}
	db, err := Open("/db", &opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteRange([]byte("b"), []byte("a"), Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteRange([]byte("c"), []byte("c"), Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = reopenClean(t, opts.FS.(*vfs.MemFS), Options{})
	if err := db.Set([]byte("a"), []byte("1"), Sync); err != nil {
		t.Fatal(err)
	}
	mustGet(t, db, "a", "1")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRecoverLogOfEmptyRangeDeletions replays a log whose only records are
// empty range deletions (as an earlier version wrote them): recovery flushes
// nothing and the store opens.
func TestRecoverLogOfEmptyRangeDeletions(t *testing.T) {
	mem := vfs.NewMem()
	db, err := Open("/db", &Options{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	b := db.NewBatch()
	b.add(base.KindRangeDelete, []byte("b"), []byte("a")) // what Batch.DeleteRange once logged
	if err := b.Commit(Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = reopenClean(t, mem, Options{})
	if err := db.Set([]byte("a"), []byte("1"), nil); err != nil {
		t.Fatal(err)
	}
	mustGet(t, db, "a", "1")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}
