package kv

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/warpkit/warpkit/kv/vfs"
)

// openTablesFS counts the table files opened for reading and not yet
// closed, and the most ever open at once.
type openTablesFS struct {
	vfs.FS
	mu                sync.Mutex
	open, most, opens int
}

func (fs *openTablesFS) Open(name string) (vfs.File, error) {
	f, err := fs.FS.Open(name)
	if err != nil || !strings.HasSuffix(name, ".sst") {
		return f, err
	}
	fs.mu.Lock()
	fs.open++
	fs.opens++
	fs.most = max(fs.most, fs.open)
	fs.mu.Unlock()
	return &countedFile{File: f, fs: fs}, nil
}

func (fs *openTablesFS) counts() (open, most, opens int) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.open, fs.most, fs.opens
}

type countedFile struct {
	vfs.File
	fs     *openTablesFS
	closed sync.Once
}

func (f *countedFile) Close() error {
	f.closed.Do(func() {
		f.fs.mu.Lock()
		f.fs.open--
		f.fs.mu.Unlock()
	})
	return f.File.Close()
}

// TestTableCacheLimit: reads that touch more tables than MaxOpenFiles never
// have more than MaxOpenFiles table files open (the table cache evicts and
// closes the least recently used), read the right values, and Close closes
// every table file.
func TestTableCacheLimit(t *testing.T) {
	const tables, keysPerTable, limit = 40, 10, 16
	mem := vfs.NewMem()
	opts := Options{FS: mem, MaxOpenFiles: limit, // fewer than the tables
		L0CompactionThreshold: 1000, L0SlowdownWritesThreshold: 1000, L0StopWritesThreshold: 1000}
	db, err := Open("/db", &opts)
	if err != nil {
		t.Fatal(err)
	}
	key := func(tab, k int) []byte { return []byte(fmt.Sprintf("t%02d-k%d", tab, k)) }
	for tab := range tables {
		for k := range keysPerTable {
			if err := db.Set(key(tab, k), []byte(fmt.Sprint(tab*k)), nil); err != nil {
				t.Fatal(err)
			}
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

	fs := &openTablesFS{FS: mem}
	opts.FS = fs
	db, err = Open("/db", &opts)
	if err != nil {
		t.Fatal(err)
	}
	// Each Get reads one table (the tables' key ranges are disjoint); going
	// round all of them in order makes an LRU cache smaller than the set
	// miss every time.
	const rounds = 3
	for range rounds {
		for tab := range tables {
			for _, k := range []int{0, keysPerTable - 1} {
				mustGet(t, db, string(key(tab, k)), fmt.Sprint(tab*k))
			}
			if _, err := db.Get([]byte(fmt.Sprintf("t%02d-k5x", tab))); err != ErrNotFound {
				t.Fatalf("Get of an absent key: %v", err)
			}
			if open, most, _ := fs.counts(); most > limit {
				t.Fatalf("%d table files open at once (now %d), MaxOpenFiles %d", most, open, limit)
			}
		}
	}
	open, most, opens := fs.counts()
	if opens < rounds*tables {
		t.Fatalf("%d table opens for %d rounds over %d tables: the reads did not go past the cache", opens, rounds, tables)
	}
	if m := db.Metrics(); open != m.TableCache.Open || open != limit {
		t.Fatalf("%d table files open (at most %d), the cache holds %d; want %d", open, most, m.TableCache.Open, limit)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if open, _, _ := fs.counts(); open != 0 {
		t.Fatalf("%d table files open after Close", open)
	}
}
