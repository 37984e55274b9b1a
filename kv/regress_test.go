package kv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/warpkit/warpkit/kv/internal/arenaskl"
	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/internal/batchrepr"
	"github.com/warpkit/warpkit/kv/internal/memtable"
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

// TestReadRacesCompaction: a compaction installed while a read starts
// drops an overwritten version of a key; the read must still find the key
// (at its old or its new value), never miss it. readHook runs the
// compaction between the two steps that start a read.
func TestReadRacesCompaction(t *testing.T) {
	for _, read := range []string{"Get", "NewIter"} {
		t.Run(read, func(t *testing.T) {
			db, err := Open("/db", &Options{FS: vfs.NewMem()})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := db.Set([]byte("k"), []byte("v1"), nil); err != nil {
				t.Fatal(err)
			}
			if err := db.Compact(context.Background(), nil, nil); err != nil {
				t.Fatal(err)
			}
			db.readHook = func() {
				db.readHook = nil
				if err := db.Set([]byte("k"), []byte("v2"), nil); err != nil {
					t.Error(err)
				}
				if err := db.Compact(context.Background(), nil, nil); err != nil { // drops k=v1: no snapshot needs it
					t.Error(err)
				}
			}
			var got string
			switch read {
			case "Get":
				v, err := db.Get([]byte("k"))
				if err != nil {
					t.Fatalf("Get(k) = %v during a compaction", err)
				}
				got = string(v)
			case "NewIter":
				it, err := db.NewIter(nil)
				if err != nil {
					t.Fatal(err)
				}
				if !it.First() || string(it.Key()) != "k" {
					t.Fatalf("iterator misses k during a compaction (error %v)", it.Error())
				}
				got = string(it.Value())
				if err := it.Close(); err != nil {
					t.Fatal(err)
				}
			}
			if got != "v1" && got != "v2" {
				t.Fatalf("k = %q", got)
			}
		})
	}
}

// TestValueLargerThanCompressedBlockLimit: a value of more than 64 MiB (the
// largest compressed block a table reader decodes) survives a flush, a
// compaction and a reopen.
func TestValueLargerThanCompressedBlockLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 65 MiB value several times")
	}
	mem := vfs.NewMem()
	db, err := Open("/db", &Options{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), (64<<20+1<<10)/16)
	if err := db.Set([]byte("big"), big, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Set([]byte("small"), []byte("s"), nil); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		v, err := db.Get([]byte("big"))
		if err != nil || !bytes.Equal(v, big) {
			t.Fatalf("%s: Get(big) = %d bytes, %v", when, len(v), err)
		}
		mustGet(t, db, "small", "s")
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	check("after Flush")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = reopenClean(t, mem, Options{})
	check("after reopen")
	if err := db.Compact(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	check("after Compact")
	if err := db.CheckIntegrity(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// lowerBatchLimits lowers the batch limits for one test.
func lowerBatchLimits(t *testing.T, batchSize, memTableCapacity int) {
	oldSize, oldCap := maxBatchSize, maxMemTableCapacity
	maxBatchSize, maxMemTableCapacity = batchSize, memTableCapacity
	t.Cleanup(func() { maxBatchSize, maxMemTableCapacity = oldSize, oldCap })
}

// commitWithin commits b, failing the test if Commit does not return
// within a generous time (a livelocked writer never returns).
func commitWithin(t *testing.T, b *Batch) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- b.Commit(nil) }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Commit did not return")
		return nil
	}
}

// TestBatchTooManyEntries: a batch whose entries need more memtable than
// the largest memtable holds (each entry costs a skiplist node besides its
// bytes) fails with ErrInvalidArgument instead of livelocking every writer,
// and the store goes on working. The memtable limit is lowered from 4 GiB
// to 1 MiB.
func TestBatchTooManyEntries(t *testing.T) {
	lowerBatchLimits(t, maxBatchSize, 1<<20)
	db, err := Open("/db", &Options{FS: vfs.NewMem(), MemTableSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	// No deferred Close: after a livelock it would wait for ever.
	b := db.NewBatch()
	for range 20000 { // 40 KB encoded, about 2 MB of memtable
		b.Delete(nil)
	}
	if err := commitWithin(t, b); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Commit of 20000 entries: %v, want ErrInvalidArgument", err)
	}
	// A batch that fits only the largest memtable gets one of its own.
	b = db.NewBatch()
	for i := range 8000 {
		b.Set([]byte(fmt.Sprintf("k%05d", i)), nil)
	}
	if err := commitWithin(t, b); err != nil {
		t.Fatalf("Commit of 8000 entries: %v", err)
	}
	mustGet(t, db, "k07999", "")
	if err := db.Set([]byte("after"), []byte("1"), nil); err != nil {
		t.Fatal(err)
	}
	mustGet(t, db, "after", "1")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestBatchFillingAWholeMemTable: a batch that needs about a memtable's
// whole capacity (more than an empty memtable has left beside its skiplist
// heads) gets a memtable of its own rather than livelocking the writer.
func TestBatchFillingAWholeMemTable(t *testing.T) {
	const memTableSize = 64 << 10
	db, err := Open("/db", &Options{FS: vfs.NewMem(), MemTableSize: memTableSize})
	if err != nil {
		t.Fatal(err)
	}
	// No deferred Close: after a livelock it would wait for ever.
	for size := memTableSize - 512; size <= memTableSize; size += 8 {
		b := db.NewBatch()
		b.Set([]byte("k"), make([]byte, size-(batchrepr.HeaderLen+6+arenaskl.NodeOverhead)))
		if got := memtable.NeededBytes(b.Size(), 1); got != int64(size) {
			t.Fatalf("batch needs %d bytes, want %d", got, size)
		}
		if err := commitWithin(t, b); err != nil {
			t.Fatalf("batch needing %d bytes: %v", size, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}
