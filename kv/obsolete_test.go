package kv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/vfs"
)

// cleanerBarrier returns once the background cleaner has deleted every
// file queued for deletion before the call: it flushes the memtable, whose
// log is then queued, and waits for that log to go (the cleaner deletes in
// queue order, tables first).
func cleanerBarrier(t *testing.T, db *DB, fs vfs.FS) {
	t.Helper()
	db.mu.Lock()
	log := fs.PathJoin("/db", base.MakeFilename(base.FileTypeLog, db.mu.mem.LogNum()))
	db.mu.Unlock()
	if err := db.Set([]byte("barrier"), []byte("v"), nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := fs.Stat(log)
		if errors.Is(err, os.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("flushed log %s not deleted: %v", log, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestObsoleteTablesDeleted: a compaction's input tables are deleted from
// the file system once no version uses them, but not while an iterator
// (also one of a snapshot) still reads the version that lists them.
func TestObsoleteTablesDeleted(t *testing.T) {
	for _, tc := range []struct {
		name    string
		newIter func(db *DB) (*Iterator, func())
	}{
		{"no iterator", nil},
		{"iterator", func(db *DB) (*Iterator, func()) {
			it, err := db.NewIter(nil)
			if err != nil {
				t.Fatal(err)
			}
			return it, func() {}
		}},
		{"snapshot iterator", func(db *DB) (*Iterator, func()) {
			s, err := db.NewSnapshot()
			if err != nil {
				t.Fatal(err)
			}
			it, err := s.NewIter(nil)
			if err != nil {
				t.Fatal(err)
			}
			return it, func() { s.Close() }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			opts := smallOptions()
			opts.FS = mem
			opts.BlockCacheSize = 1 // the iterator reads the tables' blocks from the files
			opts.L0CompactionThreshold, opts.L0SlowdownWritesThreshold, opts.L0StopWritesThreshold = 100, 100, 100
			db, err := Open("/db", &opts)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			want := map[string]string{}
			for round := range 2 {
				for i := range 300 {
					k, v := fmt.Sprintf("k%03d", i), fmt.Sprintf("v%d-%d", round, i)
					if err := db.Set([]byte(k), []byte(v), nil); err != nil {
						t.Fatal(err)
					}
					want[k] = v
				}
				if err := db.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			inputs := tableFiles(t, mem, "/db")
			if len(inputs) != 2 {
				t.Fatalf("tables before the compaction: %v", inputs)
			}
			var it *Iterator
			closeSnap := func() {}
			if tc.newIter != nil {
				it, closeSnap = tc.newIter(db)
			}
			if err := db.Compact(context.Background(), nil, nil); err != nil {
				t.Fatal(err)
			}
			if m := db.Metrics(); m.Levels[0].Tables != 0 || m.Compaction.Count != 1 {
				t.Fatalf("after Compact: tables per level %v, %d compactions", tablesPerLevel(m), m.Compaction.Count)
			}
			if it == nil {
				// The deletions are durable before anything else syncs the
				// directory: a crash does not bring the inputs back (Repair,
				// which ignores the manifest, would read them).
				// deleteObsolete waits for a cleaner round in progress.
				db.deleteObsolete()
				after := tableFiles(t, mem.CrashClone(vfs.CrashOptions{}), "/db")
				for f := range inputs {
					if after[f] {
						t.Fatalf("compaction input %s deleted, back after a crash", f)
					}
				}
			}
			cleanerBarrier(t, db, mem)
			present := func() (n int) {
				now := tableFiles(t, mem, "/db")
				for f := range inputs {
					if now[f] {
						n++
					}
				}
				return n
			}
			if it != nil {
				if n := present(); n != len(inputs) {
					t.Fatalf("%d of the %d compaction inputs deleted while an iterator reads them", len(inputs)-n, len(inputs))
				}
				if n := db.Metrics().TablesDeleted; n != 0 {
					t.Fatalf("%d tables deleted while an iterator reads them", n)
				}
				got := map[string]string{}
				for k, v := range it.All() {
					got[string(k)] = string(v)
				}
				if it.Error() != nil || !mapsEqual(got, want) {
					t.Fatalf("the iterator read %d keys (error %v), want %d", len(got), it.Error(), len(want))
				}
				if err := it.Close(); err != nil {
					t.Fatal(err)
				}
				closeSnap()
				cleanerBarrier(t, db, mem)
			}
			if n := present(); n != 0 {
				t.Fatalf("%d of the %d compaction inputs still on disk when nothing uses them", n, len(inputs))
			}

			if m := db.Metrics(); m.TablesDeleted != int64(len(inputs)) {
				t.Fatalf("%d tables deleted, want %d", m.TablesDeleted, len(inputs))
			}
			delete(want, "barrier")
			got := scanAll(t, db)
			delete(got, "barrier")
			if !mapsEqual(got, want) {
				t.Fatalf("after the compaction the store holds %d keys, want %d", len(got), len(want))
			}
		})
	}
}
