package kv

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warpkit/warpkit/kv/vfs"
)

// holdSyncs is an Injector (vfs.NewFault) that makes the syncs of logs
// wait while held.
type holdSyncs struct {
	mu   sync.Mutex
	held chan struct{} // non-nil: log syncs wait for it to close
}

func (h *holdSyncs) MaybeError(op vfs.Op, path string) error {
	if op&vfs.OpSync == 0 || !strings.HasSuffix(path, ".log") {
		return nil
	}
	h.mu.Lock()
	held := h.held
	h.mu.Unlock()
	if held != nil {
		<-held
	}
	return nil
}

// hold makes log syncs wait until the returned function is called.
func (h *holdSyncs) hold() (release func()) {
	ch := make(chan struct{})
	h.mu.Lock()
	h.held = ch
	h.mu.Unlock()
	return sync.OnceFunc(func() {
		h.mu.Lock()
		h.held = nil
		h.mu.Unlock()
		close(ch)
	})
}

// wantPrefix checks that db holds, of the writes of value under key(0) to
// key(n-1), the first synced and, past them, a prefix: no key after a
// missing one. It returns how many it holds.
func wantPrefix(t *testing.T, db *DB, n, synced int, key func(int) []byte, value []byte) int {
	t.Helper()
	kept := -1
	for i := range n {
		v, err := db.Get(key(i))
		switch {
		case err == nil && !bytes.Equal(v, value):
			t.Fatalf("%s: wrong value", key(i))
		case err == nil && kept >= 0:
			t.Fatalf("%s is there but %s is not", key(i), key(kept))
		case errors.Is(err, ErrNotFound) && i < synced:
			t.Fatalf("%s, written before the last synced write, is lost", key(i))
		case errors.Is(err, ErrNotFound):
			if kept < 0 {
				kept = i
			}
		case err != nil:
			t.Fatal(err)
		}
	}
	if kept < 0 {
		kept = n
	}
	return kept
}

// logs returns the names of the logs in dir, lowest-numbered first.
func logs(t *testing.T, fs vfs.FS, dir string) []string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		if strings.HasSuffix(n, ".log") {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	if len(out) == 0 {
		t.Fatalf("no log in %s", dir)
	}
	return out
}

// oldestLog returns the lowest-numbered log in dir.
func oldestLog(t *testing.T, fs vfs.FS, dir string) string { return logs(t, fs, dir)[0] }

// newestLogSize returns the highest-numbered log in dir and its size.
func newestLogSize(t *testing.T, fs vfs.FS, dir string) (string, int64) {
	t.Helper()
	l := logs(t, fs, dir)
	newest := l[len(l)-1]
	fi, err := fs.Stat(fs.PathJoin(dir, newest))
	if err != nil {
		t.Fatal(err)
	}
	return newest, fi.Size()
}

// TestLogSwitchDoesNotWaitForSync: when the memtable fills, writes switch to
// the next log without waiting for the old log's sync; the new log's file
// holds no byte until the old log is durable (so a crash meanwhile leaves a
// log sequence that ends at the old log's torn tail, which recovery
// accepts); a synced write waits for the old log too; and every write
// survives a reopen.
func TestLogSwitchDoesNotWaitForSync(t *testing.T) {
	mem, holds := vfs.NewMem(), &holdSyncs{}
	fs := vfs.NewFault(mem, holds)
	db, err := Open("db", &Options{FS: fs, MemTableSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	value := bytes.Repeat([]byte("v"), 1000)
	key := func(i int) []byte { return fmt.Appendf(nil, "key%06d", i) }
	// Fill most of the first memtable, then hold log syncs and write on
	// past the switch, into the second memtable but not out of it.
	n := 0
	for ; n < 40; n++ {
		if err := db.Set(key(n), value, nil); err != nil {
			t.Fatal(err)
		}
	}
	release := holds.hold()
	defer release()
	wrote := make(chan error, 1)
	go func() {
		for i := n; i < n+60; i++ {
			if err := db.Set(key(i), value, nil); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	}()
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("writes past a log switch waited for the old log's sync")
	}
	n += 60
	if m := db.Metrics(); m.MemTable.Immutable+int(m.MemTable.Flushes) == 0 {
		t.Fatalf("no memtable switch: %+v", m.MemTable)
	}
	// The log writer hands records to its file in the background: watch
	// the new log for a while.
	name, _ := newestLogSize(t, fs, "db")
	oldLog := oldestLog(t, fs, "db")
	if oldLog >= name {
		t.Fatalf("logs %s and %s", oldLog, name)
	}
	for range 20 {
		if _, size := newestLogSize(t, fs, "db"); size != 0 {
			t.Fatalf("the new log %s holds %d bytes while the old log's sync is held", name, size)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// A crash now: the old log torn anywhere after its last sync, the new
	// one empty; the store opens and holds a prefix of the writes.
	rng := rand.New(rand.NewPCG(7, 8))
	crashed := mem.CrashClone(vfs.CrashOptions{Rand: rng, ZeroTail: true})
	cdb, err := Open("db", &Options{FS: crashed, MemTableSize: 64 << 10})
	if err != nil {
		t.Fatalf("open after a crash during the old log's sync: %v", err)
	}
	wantPrefix(t, cdb, n, 0, key, value)
	if err := cdb.Close(); err != nil {
		t.Fatal(err)
	}
	// The old memtable's flush does not wait for its log's sync either;
	// the log, obsolete then, stays until it is closed.
	for deadline := time.Now().Add(10 * time.Second); db.Metrics().MemTable.Flushes == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the old memtable was not flushed while its log's sync was held")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := fs.Stat(fs.PathJoin("db", oldLog)); err != nil {
		t.Fatalf("the old log %s while its sync is held: %v", oldLog, err)
	}
	// A synced write waits for the old log's sync.
	synced := make(chan error, 1)
	go func() { synced <- db.Set(key(n), value, Sync) }()
	select {
	case err := <-synced:
		t.Fatalf("a synced write returned before the old log was synced (%v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	release()
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	n++
	// (The newest log now may be the next spare, made after the sync.)
	if fi, err := fs.Stat(fs.PathJoin("db", name)); err != nil || fi.Size() == 0 {
		t.Fatalf("the new log %s after a synced write: %v", name, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat(fs.PathJoin("db", oldLog)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the flushed old log %s after its close: %v", oldLog, err)
	}
	db, err = Open("db", &Options{FS: mem, MemTableSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range n {
		if v, err := db.Get(key(i)); err != nil || !bytes.Equal(v, value) {
			t.Fatalf("key %d after reopening: %v", i, err)
		}
	}
}
