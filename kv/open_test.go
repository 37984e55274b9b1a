package kv

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/manifest"
	"github.com/warpkit/warpkit/kv/record"
	"github.com/warpkit/warpkit/kv/vfs"
)

func TestBatchOfAnotherDB(t *testing.T) {
	mem := vfs.NewMem()
	db1, err := Open("/a", &Options{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer db1.Close()
	db2, err := Open("/b", &Options{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	b := db1.NewBatch()
	b.Set([]byte("k"), []byte("v"))
	if err := db2.Apply(b, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("db2.Apply(db1's batch): %v", err)
	}
	if _, err := db2.Get([]byte("k")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("rejected batch applied: %v", err)
	}
	if err := db1.Apply(b, nil); err != nil {
		t.Fatal(err)
	}
	var free Batch // a zero Batch belongs to no DB
	free.Set([]byte("z"), []byte("1"))
	if err := db2.Apply(&free, nil); err != nil {
		t.Fatal(err)
	}
}

// TestReadOnlyAPI: every write of a read-only DB returns ErrReadOnly and
// reads see the replayed log; after Close every method returns ErrClosed.
func TestReadOnlyAPI(t *testing.T) {
	mem := vfs.NewMem()
	db, err := Open("/db", &Options{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	db.Set([]byte("flushed"), []byte("1"), nil)
	db.Flush()
	db.Set([]byte("logged"), []byte("2"), Sync)
	crashed := mem.CrashClone(vfs.CrashOptions{}) // a writer that never closed: the log is unsealed
	db.Close()

	ro := vfs.NewReadOnly(crashed)
	r, err := Open("/db", &Options{FS: ro, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"flushed", "logged"} {
		if _, err := r.Get([]byte(k)); err != nil {
			t.Fatalf("Get(%s): %v", k, err)
		}
	}
	for name, err := range map[string]error{
		"Set":         r.Set([]byte("x"), nil, nil),
		"Delete":      r.Delete([]byte("x"), nil),
		"DeleteRange": r.DeleteRange([]byte("a"), []byte("b"), nil),
		"Flush":       r.Flush(),
		"Compact":     r.Compact(context.Background(), nil, nil),
	} {
		if !errors.Is(err, ErrReadOnly) {
			t.Errorf("%s on a read-only DB: %v", name, err)
		}
	}
	if err := r.WaitForCompactions(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := r.CheckIntegrity(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get([]byte("flushed")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	if err := r.Set([]byte("x"), nil, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Set after Close: %v", err)
	}
	// A read-only Open of a missing store creates nothing.
	if _, err := Open("/nothing", &Options{FS: mem, ReadOnly: true}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("read-only Open of a missing store: %v", err)
	}
	if _, err := mem.Stat("/nothing"); err == nil {
		t.Fatal("read-only Open created the directory")
	}
}

// TestLogsAreSealed: a memtable switch seals the old log and records the
// new one in the manifest, and a clean Close seals the last; a byte flipped
// anywhere in a sealed log is then corruption, not a torn tail.
func TestLogsAreSealed(t *testing.T) {
	mem := vfs.NewMem()
	opts := &Options{FS: mem, MemTableSize: 64 << 10}
	db, err := Open("/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		if err := db.Set([]byte(fmt.Sprintf("k%05d", i)), make([]byte, 100), nil); err != nil {
			t.Fatal(err)
		}
	}
	db.Set([]byte("last"), []byte("synced"), Sync)
	crashed := mem.CrashClone(vfs.CrashOptions{})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	walsOf := func(fs vfs.FS) []manifest.WAL {
		vs, err := manifest.Load(manifest.Options{FS: fs, Dir: "/db"})
		if err != nil {
			t.Fatal(err)
		}
		defer vs.Close()
		return vs.WALs()
	}
	// Before Close: the live log is recorded, unsealed.
	if w := walsOf(crashed); len(w) == 0 || w[len(w)-1].Size != -1 {
		t.Fatalf("logs recorded before Close: %v", w)
	}
	w := walsOf(mem)
	// The live log and the spare (created and recorded ahead of the next
	// memtable switch, empty), both sealed; before them, the log of a
	// memtable whose flush had not finished at Close, also sealed.
	if len(w) < 2 || w[len(w)-1].Size != 0 {
		t.Fatalf("logs recorded after Close: %v", w)
	}
	for _, l := range w {
		if l.Size < 0 {
			t.Fatalf("log %s unsealed after Close: %v", l.Num, w)
		}
	}
	last := w[len(w)-2]
	name := "/db/" + base.MakeFilename(base.FileTypeLog, last.Num)
	data, err := vfs.ReadFile(mem, name)
	if err != nil {
		t.Fatal(err)
	}
	if last.Size != int64(len(data)) || last.Size == 0 {
		t.Fatalf("last log sealed at %d, is %d bytes", last.Size, len(data))
	}
	// Flip a byte in the last record (where a torn tail would be).
	bad := append([]byte(nil), data...)
	bad[len(bad)-3] ^= 1
	if err := vfs.WriteFile(mem, name, bad); err != nil {
		t.Fatal(err)
	}
	if _, err := Open("/db", opts); !errors.Is(err, ErrCorruption) {
		t.Fatalf("flipped byte in a sealed log: Open gave %v", err)
	}
	s, err := Open("/db", &Options{FS: mem, MemTableSize: 64 << 10, WALRecovery: WALSalvage})
	if err != nil {
		t.Fatal(err)
	}
	r := s.Metrics().Recovery
	if r.SalvagedRecords != 1 || len(r.Damage) != 1 || r.Damage[0].File != base.MakeFilename(base.FileTypeLog, last.Num) {
		t.Fatalf("salvage report: %+v", r)
	}
	if _, err := s.Get([]byte("last")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the damaged record read back: %v", err)
	}
	s.Close()
}

// TestOpenLegacyManifest: a manifest of an older build records no logs
// (no format tag); Open replays every log at or above its log number, as
// before, and rewrites the manifest in the format that records them.
func TestOpenLegacyManifest(t *testing.T) {
	mem := vfs.NewMem()
	mem.MkdirAll("/db", 0o755)
	abc, _ := testLog(t, 1, "a", "b", "c")
	de, _ := testLog(t, 4, "d", "e")
	vfs.WriteFile(mem, "/db/000003.log", abc)
	vfs.WriteFile(mem, "/db/000005.log", de)
	vfs.WriteFile(mem, "/db/000002.log", []byte("flushed long ago")) // below the log number
	f, err := mem.Create("/db/MANIFEST-000001")
	if err != nil {
		t.Fatal(err)
	}
	w := record.NewWriter(f)
	w.WriteRecord((&manifest.VersionEdit{Comparator: manifest.Comparator, LogNum: 3, NextFileNum: 6}).Encode(nil))
	w.Flush()
	f.Close()
	vfs.WriteFile(mem, "/db/CURRENT", []byte("MANIFEST-000001\n"))

	db, err := Open("/db", &Options{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	checkKeys(t, db, "a", "b", "c", "d", "e")
	db.Close()
	for _, gone := range []string{"000002.log", "000003.log", "000005.log", "MANIFEST-000001"} {
		if _, err := mem.Stat("/db/" + gone); err == nil {
			t.Errorf("%s not deleted after a successful Open", gone)
		}
	}
	vs, err := manifest.Load(manifest.Options{FS: mem, Dir: "/db"})
	if err != nil {
		t.Fatal(err)
	}
	defer vs.Close()
	if w := vs.WALs(); !vs.TracksWALs() || len(w) != 2 || w[0].Size < 0 || w[1].Size != 0 {
		t.Fatalf("rewritten manifest: tracks %v, logs %v", vs.TracksWALs(), vs.WALs())
	}
}

// TestUnexplainedMovedBeforeCommit: an unexplained table goes to lost/
// before the new manifest (whose next file number is above it) is live. If
// it cannot be moved (here a plain file named lost is in the way), Open
// fails and leaves it in place, and a later Open, once lost/ can be made,
// moves it: no Open ever takes it for an obsolete file.
func TestUnexplainedMovedBeforeCommit(t *testing.T) {
	mem := vfs.NewMem()
	opts := &Options{FS: mem}
	db, err := Open("/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	db.Set([]byte("k"), []byte("v"), Sync)
	db.Close()
	orphan := base.MakeFilename(base.FileTypeTable, 900000)
	vfs.WriteFile(mem, "/db/"+orphan, []byte("a table only a lost edit listed"))
	vfs.WriteFile(mem, "/db/lost", []byte("a user's file named lost"))
	before, _ := dmgMustReadTree(t, mem, "/db")
	if _, err := Open("/db", opts); err == nil {
		t.Fatal("Open succeeded although the unexplained table could not be moved")
	}
	after, _ := dmgMustReadTree(t, mem, "/db")
	if d := dmgDiffTrees(before, after); len(d) > 0 {
		t.Fatalf("the failed Open changed the directory: %v", d)
	}
	mem.Remove("/db/lost")
	db, err = Open("/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	if u := db.Metrics().Recovery.Unexplained; len(u) != 1 || u[0] != orphan {
		t.Fatalf("Unexplained %v", u)
	}
	db.Close()
	for range 2 { // later Opens leave it alone
		db, err = Open("/db", opts)
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
	}
	if b, err := vfs.ReadFile(mem, "/db/lost/"+orphan); err != nil || string(b) != "a table only a lost edit listed" {
		t.Fatalf("lost/%s: %q, %v", orphan, b, err)
	}
}

// TestSpareRecordFailureStopsWrites: when the manifest refuses edits (the
// next spare log's record, or a flush's, whichever comes first), writes stop
// (ErrWritesStopped) instead of memtable switches retrying for ever with a
// new log file each time, and the store reopens.
func TestSpareRecordFailureStopsWrites(t *testing.T) {
	mem := vfs.NewMem()
	var failManifest atomic.Bool
	inj := vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if failManifest.Load() && op == vfs.OpWrite && strings.Contains(path, "MANIFEST") {
			return vfs.ErrInjected
		}
		return nil
	})
	fs := vfs.NewFault(mem, inj)
	db, err := Open("/db", &Options{FS: fs, MemTableSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	failManifest.Store(true)
	var werr error
	for i := 0; i < 20000 && werr == nil; i++ {
		werr = db.Set([]byte(fmt.Sprintf("k%06d", i)), make([]byte, 100), nil)
	}
	if !errors.Is(werr, ErrWritesStopped) {
		t.Fatalf("writes after the manifest failed: %v, want ErrWritesStopped", werr)
	}
	for range 10 {
		if err := db.Set([]byte("x"), nil, nil); !errors.Is(err, ErrWritesStopped) {
			t.Fatalf("a later write: %v", err)
		}
	}
	names, _ := mem.List("/db")
	logs := 0
	for _, n := range names {
		if typ, _, ok := base.ParseFilename(n); ok && typ == base.FileTypeLog {
			logs++
		}
	}
	if logs > 4 {
		t.Fatalf("%d logs after the failure: switches kept creating logs", logs)
	}
	db.Close()
	failManifest.Store(false)
	db, err = Open("/db", &Options{FS: fs, MemTableSize: 64 << 10})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	db.Close()
}

// TestRepairKeepsLostSequenceNumbers: Repair's last sequence number covers
// the files in lost/, so writes after it win over a lost file moved back for
// a later Repair.
func TestRepairKeepsLostSequenceNumbers(t *testing.T) {
	mem := vfs.NewMem()
	opts := &Options{FS: mem}
	db, err := Open("/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		db.Set([]byte("x"), []byte(fmt.Sprintf("old%d", i)), nil)
	}
	db.Flush()
	db.Close()
	// The flushed table becomes a lost one: a copy numbered far above the
	// next file number, set aside by the next Open.
	names, _ := mem.List("/db")
	var table string
	for _, n := range names {
		if typ, _, ok := base.ParseFilename(n); ok && typ == base.FileTypeTable {
			table = n
		}
	}
	data, _ := vfs.ReadFile(mem, "/db/"+table)
	far := base.MakeFilename(base.FileTypeTable, 900000)
	vfs.WriteFile(mem, "/db/"+far, data)
	db, err = Open("/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	// Remove the store's own table and repair: only lost/ knows seq 300.
	mem.Remove("/db/" + table)
	mem.Remove("/db/CURRENT")
	rep, err := Repair("/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep.LastSeq < 300 {
		t.Fatalf("Repair's last sequence number %d is below the lost table's 300", rep.LastSeq)
	}
	db, err = Open("/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	db.Set([]byte("x"), []byte("new"), Sync)
	db.Close()
	mem.Rename("/db/lost/"+far, "/db/"+far)
	mem.Remove("/db/CURRENT")
	if _, err := Repair("/db", opts); err != nil {
		t.Fatal(err)
	}
	db, err = Open("/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, err := db.Get([]byte("x")); err != nil || string(v) != "new" {
		t.Fatalf("x = %q, %v; want the newest write", v, err)
	}
}
