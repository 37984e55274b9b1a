package kv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/vfs"
)

// failOn fails operations of the given kinds on files whose names contain
// substr, once armed.
type failOn struct {
	ops    vfs.Op
	substr string
	armed  atomic.Bool
	hits   atomic.Int64
}

func (f *failOn) MaybeError(op vfs.Op, path string) error {
	if f.armed.Load() && op&f.ops != 0 && strings.Contains(path, f.substr) {
		f.hits.Add(1)
		return vfs.ErrInjected
	}
	return nil
}

func openFault(t *testing.T, inj vfs.Injector, opts Options) (*DB, *vfs.MemFS, *vfs.FaultFS) {
	t.Helper()
	mem := vfs.NewMem()
	ffs := vfs.NewFault(mem, inj)
	opts.FS = ffs
	db, err := Open("/db", &opts)
	if err != nil {
		t.Fatal(err)
	}
	return db, mem, ffs
}

func reopenClean(t *testing.T, mem *vfs.MemFS, opts Options) *DB {
	t.Helper()
	opts.FS = mem
	db, err := Open("/db", &opts)
	if err != nil {
		t.Fatalf("reopen without faults: %v", err)
	}
	return db
}

func mustGet(t *testing.T, db *DB, k, want string) {
	t.Helper()
	v, err := db.Get([]byte(k))
	if err != nil || string(v) != want {
		t.Fatalf("Get(%s) = %q, %v; want %q", k, v, err, want)
	}
}

func TestFaultLogSync(t *testing.T) {
	inj := &failOn{ops: vfs.OpSync, substr: ".log"}
	db, mem, _ := openFault(t, inj, smallOptions())
	for i := range 100 {
		if err := db.Set([]byte(fmt.Sprintf("k%03d", i)), []byte("v"), Sync); err != nil {
			t.Fatal(err)
		}
	}
	inj.armed.Store(true)
	err := db.Set([]byte("lost?"), []byte("v"), Sync)
	if err == nil {
		t.Fatal("synced write succeeded although the log sync failed")
	}
	if !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("error does not carry the cause: %v", err)
	}
	if err := db.Set([]byte("after"), []byte("v"), nil); !errors.Is(err, ErrWritesStopped) {
		t.Fatalf("write after a log failure: %v", err)
	}
	mustGet(t, db, "k050", "v") // reads go on
	if db.Metrics().BackgroundError == nil {
		t.Fatal("metrics do not show the stop")
	}
	db.Close()
	inj.armed.Store(false)
	db = reopenClean(t, mem, smallOptions())
	defer db.Close()
	for i := range 100 {
		mustGet(t, db, fmt.Sprintf("k%03d", i), "v")
	}
	if _, err := db.Get([]byte("after")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("rejected write present: %v", err)
	}
}

func TestFaultTableWrite(t *testing.T) {
	for _, ops := range []vfs.Op{vfs.OpWrite, vfs.OpSync, vfs.OpCreate} {
		t.Run(ops.String(), func(t *testing.T) {
			inj := &failOn{ops: ops, substr: ".sst"}
			db, mem, _ := openFault(t, inj, smallOptions())
			for i := range 200 {
				db.Set([]byte(fmt.Sprintf("k%03d", i)), []byte(fmt.Sprint(i)), nil)
			}
			inj.armed.Store(true)
			if err := db.Flush(); !errors.Is(err, ErrWritesStopped) || !errors.Is(err, vfs.ErrInjected) {
				t.Fatalf("flush with failing table %v: %v", ops, err)
			}
			mustGet(t, db, "k123", "123") // still served from the memtable
			if err := db.Close(); err != nil {
				t.Logf("close: %v", err)
			}
			inj.armed.Store(false)
			db = reopenClean(t, mem, smallOptions())
			defer db.Close()
			for i := range 200 {
				mustGet(t, db, fmt.Sprintf("k%03d", i), fmt.Sprint(i))
			}
		})
	}
}

func TestFaultManifest(t *testing.T) {
	inj := &failOn{ops: vfs.OpWrite | vfs.OpSync, substr: "MANIFEST"}
	db, mem, _ := openFault(t, inj, smallOptions())
	for i := range 100 {
		db.Set([]byte(fmt.Sprintf("k%03d", i)), []byte("v"), nil)
	}
	inj.armed.Store(true)
	if err := db.Flush(); !errors.Is(err, ErrWritesStopped) {
		t.Fatalf("flush with failing manifest: %v", err)
	}
	db.Close()
	inj.armed.Store(false)
	db = reopenClean(t, mem, smallOptions())
	defer db.Close()
	for i := range 100 {
		mustGet(t, db, fmt.Sprintf("k%03d", i), "v")
	}
}

func TestFaultTableRead(t *testing.T) {
	inj := &failOn{ops: vfs.OpRead | vfs.OpOpen, substr: ".sst"}
	opts := smallOptions()
	opts.BlockCacheSize = 1 // every block read reaches the file
	db, _, _ := openFault(t, inj, opts)
	defer db.Close()
	for i := range 2000 {
		db.Set([]byte(fmt.Sprintf("k%05d", i)), []byte(fmt.Sprint(i)), nil)
	}
	if err := db.Compact(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	inj.armed.Store(true)
	for i := 0; i < 2000; i += 97 {
		_, err := db.Get([]byte(fmt.Sprintf("k%05d", i)))
		if err == nil || errors.Is(err, ErrNotFound) {
			t.Fatalf("Get with failing reads returned %v: a read error must not look like a missing key", err)
		}
	}
	it, err := db.NewIter(nil)
	if err == nil {
		n := 0
		for range it.All() {
			n++
		}
		if it.Error() == nil {
			t.Fatalf("iteration with failing reads ended cleanly after %d keys", n)
		}
		it.Close()
	}
	inj.armed.Store(false)
	for i := 0; i < 2000; i += 97 {
		mustGet(t, db, fmt.Sprintf("k%05d", i), fmt.Sprint(i))
	}
}

// TestFaultRandom injects random errors everywhere while a workload runs.
// Whatever happens, nothing panics or hangs, every value a read returns is
// right, a read error never looks like a missing key (only a key that the
// failed batch, if any, wrote may be missing), and after a clean reopen
// every acknowledged synced write is there.
func TestFaultRandom(t *testing.T) {
	rounds := 20
	if testing.Short() {
		rounds = 5
	}
	for round := range rounds {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(round), 5))
			inj := vfs.NewRandom(vfs.OpAll&^vfs.OpLock, 0.0002+0.002*rng.Float64(), uint64(round))
			mem := vfs.NewMem()
			ffs := vfs.NewFault(mem, nil)
			opts := smallOptions()
			opts.FS = ffs
			opts.BlockCacheSize = 4 << 10
			db, err := Open("/db", &opts)
			if err != nil {
				t.Fatal(err)
			}
			ffs.SetInjector(inj)
			m := &modelRun{t: t, rng: rng, o: newOracle(), keys: 200, db: db}
			var failed []op // a batch whose commit failed: it may or may not be applied
			for range 3000 {
				if rng.IntN(3) == 0 {
					k := m.key()
					v, err := db.Get(k)
					want, ok := m.o.get(string(k), m.o.seq)
					switch {
					case err == nil:
						if !ok || !bytes.Equal(v, want) {
							t.Fatalf("Get(%s) returned %q, want %q (found %v)", k, trunc(v), trunc(want), ok)
						}
					case errors.Is(err, ErrNotFound):
						// Only a key the failed batch wrote may be missing;
						// a read error on any other must not look like one.
						if ok && !touches(failed, k) {
							t.Fatalf("Get(%s) not found; want %q (the failed batch, if any, did not write it)", k, trunc(want))
						}
					}
					continue
				}
				if failed != nil {
					continue // writes are stopped
				}
				ops := m.randomOps(1 + rng.IntN(3))
				b := opsBatch(db, ops)
				if err := b.Commit(Sync); err != nil {
					failed = ops
					continue
				}
				m.o.apply(ops)
			}
			db.Close()
			ffs.SetInjector(nil)
			t.Logf("%d batches acknowledged before writes stopped", len(m.o.batches))
			db = reopenClean(t, mem, smallOptions())
			defer db.Close()
			got := scanAll(t, db)
			if mapsEqual(got, m.o.mapAt(m.o.seq)) {
				return
			}
			if failed != nil {
				m.o.apply(failed)
				if mapsEqual(got, m.o.mapAt(m.o.seq)) {
					return
				}
			}
			t.Fatalf("after faults and a clean reopen the state is neither before nor after the failed batch")
		})
	}
}

// touches reports whether ops write key: set it, delete it, or delete a
// range holding it.
func touches(ops []op, key []byte) bool {
	for _, x := range ops {
		switch x.kind {
		case 0, 1:
			if bytes.Equal(x.key, key) {
				return true
			}
		case 2:
			if bytes.Compare(x.key, key) <= 0 && bytes.Compare(key, x.end) < 0 {
				return true
			}
		}
	}
	return false
}

func TestCorruptTableDetected(t *testing.T) {
	mem := vfs.NewMem()
	opts := smallOptions()
	opts.FS = mem
	opts.BlockCacheSize = 1
	db, err := Open("/db", &opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3000 {
		db.Set([]byte(fmt.Sprintf("k%05d", i)), bytes.Repeat([]byte{byte(i)}, 50), nil)
	}
	if err := db.Compact(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	db.Close()
	// Damage one data byte of every table.
	names, _ := mem.List("/db")
	damaged := 0
	for _, n := range names {
		if typ, _, _ := base.ParseFilename(n); typ == base.FileTypeTable {
			data, _ := vfs.ReadFile(mem, "/db/"+n)
			data = append([]byte(nil), data...)
			data[100] ^= 0x10
			vfs.WriteFile(mem, "/db/"+n, data)
			damaged++
		}
	}
	if damaged == 0 {
		t.Fatal("no tables")
	}
	db, err = Open("/db", &opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = db.Get([]byte("k00000"))
	var ce *CorruptionError
	if !errors.As(err, &ce) || !strings.HasSuffix(ce.File, ".sst") || ce.Offset < 0 {
		t.Fatalf("Get from a damaged block: %v", err)
	}
	it, _ := db.NewIter(nil)
	for range it.All() {
	}
	if !errors.Is(it.Error(), ErrCorruption) {
		t.Fatalf("scan over a damaged block: %v", it.Error())
	}
	it.Close()
}

func TestCorruptLogDetected(t *testing.T) {
	mem := vfs.NewMem()
	opts := smallOptions()
	opts.FS = mem
	opts.MemTableSize = 1 << 20 // keep everything in one log
	db, err := Open("/db", &opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		db.Set([]byte(fmt.Sprintf("k%05d", i)), []byte("value"), nil)
	}
	db.Close()
	var logName string
	names, _ := mem.List("/db")
	for _, n := range names {
		if typ, _, _ := base.ParseFilename(n); typ == base.FileTypeLog {
			if data, _ := vfs.ReadFile(mem, "/db/"+n); len(data) > 0 {
				logName = n
			}
		}
	}
	data, _ := vfs.ReadFile(mem, "/db/"+logName)
	data = append([]byte(nil), data...)
	data[len(data)/2] ^= 0x01
	vfs.WriteFile(mem, "/db/"+logName, data)

	_, err = Open("/db", &opts)
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.File != logName || ce.Offset <= 0 || ce.Offset > int64(len(data)) {
		t.Fatalf("open with a damaged log: %v", err)
	}
	if !strings.Contains(err.Error(), "WALSalvage") {
		t.Fatalf("error does not say how to salvage: %v", err)
	}
	opts.WALRecovery = WALSalvage
	db, err = Open("/db", &opts)
	if err != nil {
		t.Fatalf("salvage: %v", err)
	}
	defer db.Close()
	if db.Metrics().Recovery.SalvagedRecords != 1 {
		t.Fatal("salvage not reported")
	}
	mustGet(t, db, "k00000", "value")
	mustGet(t, db, "k01999", "value") // records after the damage are kept
	n := len(scanAll(t, db))
	if n < 1900 || n >= 2000 {
		t.Fatalf("salvaged %d of 2000 keys", n)
	}
}

func TestCheckIntegrity(t *testing.T) {
	mem := vfs.NewMem()
	opts := smallOptions()
	opts.FS = mem
	db, err := Open("/db", &opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3000 {
		db.Set([]byte(fmt.Sprintf("k%05d", i)), []byte("v"), nil)
		if i%100 == 0 {
			db.DeleteRange([]byte(fmt.Sprintf("k%05d", i+1)), []byte(fmt.Sprintf("k%05d", i+3)), nil)
		}
	}
	if err := db.Compact(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.CheckIntegrity(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	names, _ := mem.List("/db")
	for _, n := range names {
		if typ, _, _ := base.ParseFilename(n); typ == base.FileTypeTable {
			data, _ := vfs.ReadFile(mem, "/db/"+n)
			data = append([]byte(nil), data...)
			data[len(data)/3] ^= 0x04
			vfs.WriteFile(mem, "/db/"+n, data)
			break
		}
	}
	db, err = Open("/db", &opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.CheckIntegrity(); !errors.Is(err, ErrCorruption) {
		t.Fatalf("CheckIntegrity on a damaged table: %v", err)
	}
}

// TestFaultLogSyncAtSwitch: the old log's sync fails after a switch of logs
// (which no longer waits for it): writes stop with ErrWritesStopped within
// the next memtable, nothing hangs, Close returns, and a reopen holds every
// write up to the last synced one and, past it, a prefix of the others.
func TestFaultLogSyncAtSwitch(t *testing.T) {
	inj := &failOn{ops: vfs.OpSync, substr: ".log"}
	opts := smallOptions()
	db, mem, _ := openFault(t, inj, opts)
	value := bytes.Repeat([]byte("v"), 500)
	key := func(i int) string { return fmt.Sprintf("k%06d", i) }
	const synced = 50
	for i := range synced {
		wo := NoSync
		if i == synced-1 {
			wo = Sync
		}
		if err := db.Set([]byte(key(i)), value, wo); err != nil {
			t.Fatal(err)
		}
	}
	inj.armed.Store(true)
	n := synced
	var err error
	for ; n < synced+1000 && err == nil; n++ {
		err = db.Set([]byte(key(n)), value, nil)
	}
	if !errors.Is(err, ErrWritesStopped) && !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("%d writes past the failed log sync, then %v", n-synced, err)
	}
	if err := db.Set([]byte("after"), value, nil); !errors.Is(err, ErrWritesStopped) {
		t.Fatalf("write after the log failure: %v", err)
	}
	if !errors.Is(db.Metrics().BackgroundError, vfs.ErrInjected) {
		t.Fatalf("metrics: %v", db.Metrics().BackgroundError)
	}
	db.Close()
	inj.armed.Store(false)
	db = reopenClean(t, mem, opts)
	defer db.Close()
	kept := wantPrefix(t, db, n, synced, func(i int) []byte { return []byte(key(i)) }, value)
	t.Logf("%d writes after the last synced one, the first %d of them kept", n-synced, kept-synced)
}
