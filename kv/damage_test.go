package kv

// The damage matrix of issue 11 ("Open must never destroy data"): a store
// is built once, in memory, cleanly closed and as a crash would leave it;
// every scenario copies that image into a fresh directory (on the in-memory
// file system and on the operating system's), damages it as a disk, a
// careless script or a backup tool could, and opens it. Open's result must
// be an error (ErrCorruption where the issue says so) that left every file
// as it was and created nothing, or a documented recovery that reads back
// every acknowledged write (or, for a salvaged or torn log, exactly the
// writes the oracle says survive) and leaves foreign files alone. Repair of
// the damaged directory must then give a store that opens and reads back
// every acknowledged write whose data survives on disk.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/internal/batchrepr"
	"github.com/warpkit/warpkit/kv/manifest"
	"github.com/warpkit/warpkit/kv/record"
	"github.com/warpkit/warpkit/kv/vfs"
)

// ---------------------------------------------------------------------------
// The store images and their oracle.

// dmgOp is one operation of a tail write.
type dmgOp struct {
	del        bool
	key, value string
}

// dmgRecord is a record of a log holding tail writes: the log, the
// record's byte range and its operations.
type dmgRecord struct {
	log        string
	start, end int64
	ops        []dmgOp
}

// dmgWAL is a log the manifest records as holding unflushed writes.
type dmgWAL struct {
	name   string
	sealed bool
	recs   int // tail records in it
}

// dmgTable is a live table of the image, with its user-key bounds.
type dmgTable struct {
	name   string
	level  int
	size   uint64
	lo, hi string
}

// dmgImage is a store's directory (files by relative path, subdirectories
// as "name/" with nil data) and what the test knows about it.
type dmgImage struct {
	name        string
	files       map[string][]byte
	want        map[string]string          // every acknowledged (synced) write applied
	before      map[string]string          // the state before the tail writes: what the tables hold
	hist        map[string]map[string]bool // every value each key ever had
	wals        []dmgWAL                   // the logs holding the tail, oldest first
	tail        []dmgRecord                // their records, in order
	tables      []dmgTable                 // live tables, by level then key
	manifest    string                     // the manifest CURRENT names
	manifestRec [][2]int64                 // its records' byte ranges
	nextFile    base.FileNum               // the manifest's next file number
	logs        []string                   // every log in the directory
}

const (
	dmgKeys = 20000
	dmgTail = 300
)

func dmgKey(i int) string { return fmt.Sprintf("k%06d", i) }

// damageOptions: 64 KiB memtables, small tables and levels, so that 20,000
// keys make many tables in three levels.
func damageOptions(fs vfs.FS) Options {
	o := smallOptions()
	o.LBaseMaxBytes = 16 << 10
	o.FS = fs
	return o
}

var dmgImageCache struct {
	sync.Mutex
	clean, crash, crash2 *dmgImage
	err                  error
}

// damageImages returns the three images, built once per test binary: the
// store after a clean Close; the store as a crash just after the last
// synced write leaves it (only synced data; the last log unsealed); and a
// crash with the tail in two logs, the first sealed at rotation and not yet
// flushed (its flush held at the table's creation).
func damageImages(t *testing.T) (clean, crash, crash2 *dmgImage) {
	t.Helper()
	c := &dmgImageCache
	c.Lock()
	defer c.Unlock()
	if c.clean == nil && c.err == nil {
		c.clean, c.crash, c.err = buildDamageImages()
		if c.err == nil {
			c.crash2, c.err = buildTwoLogImage()
		}
	}
	if c.err != nil {
		t.Fatalf("building the store images: %v", c.err)
	}
	return c.clean, c.crash, c.crash2
}

// dmgOracle is what the writer knows it wrote.
type dmgOracle struct {
	want map[string]string
	hist map[string]map[string]bool
}

func (o *dmgOracle) set(b *Batch, k, v string) {
	b.Set([]byte(k), []byte(v))
	o.want[k] = v
	if o.hist[k] == nil {
		o.hist[k] = map[string]bool{}
	}
	o.hist[k][v] = true
}

// dmgWriteBase writes the same workload every time, in synced batches:
// 20,000 keys in random order, overwrites, deletions, a range deletion
// partly overwritten again; then it flushes and waits for the compactions,
// so that the tables hold everything.
func dmgWriteBase(db *DB) (*dmgOracle, error) {
	o := &dmgOracle{want: map[string]string{}, hist: map[string]map[string]bool{}}
	rng := rand.New(rand.NewPCG(11, 1))
	commit := func(b *Batch) error {
		if err := b.Commit(Sync); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		return nil
	}
	perm := rng.Perm(dmgKeys)
	for i := 0; i < dmgKeys; i += 100 {
		b := db.NewBatch()
		for _, j := range perm[i : i+100] {
			o.set(b, dmgKey(j), fmt.Sprintf("v0-%d", j))
		}
		if err := commit(b); err != nil {
			return nil, err
		}
	}
	for i := 0; i < 3000; i += 100 {
		b := db.NewBatch()
		for j := range 100 {
			o.set(b, dmgKey(rng.IntN(dmgKeys)), fmt.Sprintf("v1-%d", i+j))
		}
		if err := commit(b); err != nil {
			return nil, err
		}
	}
	for i := 0; i < 600; i += 50 {
		b := db.NewBatch()
		for range 50 {
			k := dmgKey(rng.IntN(dmgKeys))
			b.Delete([]byte(k))
			delete(o.want, k)
		}
		if err := commit(b); err != nil {
			return nil, err
		}
	}
	lo, hi := dmgKey(10000), dmgKey(10300)
	if err := db.DeleteRange([]byte(lo), []byte(hi), Sync); err != nil {
		return nil, err
	}
	for k := range o.want {
		if k >= lo && k < hi {
			delete(o.want, k)
		}
	}
	b := db.NewBatch()
	for j := 10100; j < 10110; j++ {
		o.set(b, dmgKey(j), fmt.Sprintf("v2-%d", j))
	}
	if err := commit(b); err != nil {
		return nil, err
	}
	if err := db.Flush(); err != nil {
		return nil, err
	}
	if err := db.WaitForCompactions(context.Background()); err != nil {
		return nil, err
	}
	// The compactions' inputs deleted, durably (the cleaner would, a
	// moment later): the images hold the store's live tables only.
	db.deleteObsolete()
	return o, nil
}

// dmgTailOps are the tail writes: 300 one-operation writes, each to a key
// no other tail write touches: new keys, overwrites and deletions.
func dmgTailOps() []dmgOp {
	rng := rand.New(rand.NewPCG(12, 2))
	touched := rng.Perm(dmgKeys)
	var tail []dmgOp
	for i := range dmgTail {
		switch {
		case i%10 == 9:
			tail = append(tail, dmgOp{del: true, key: dmgKey(touched[i])})
		case i%3 == 0:
			tail = append(tail, dmgOp{key: dmgKey(touched[i]), value: fmt.Sprintf("v3-%d", i)})
		default:
			tail = append(tail, dmgOp{key: fmt.Sprintf("t%05d", i), value: fmt.Sprintf("v3-%d", i)})
		}
	}
	return tail
}

// dmgWriteTail commits ops one synced write each.
func dmgWriteTail(db *DB, o *dmgOracle, ops []dmgOp) error {
	for _, op := range ops {
		b := db.NewBatch()
		if op.del {
			b.Delete([]byte(op.key))
			delete(o.want, op.key)
		} else {
			o.set(b, op.key, op.value)
		}
		if err := b.Commit(Sync); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
	}
	return nil
}

func buildDamageImages() (clean, crash *dmgImage, err error) {
	mem := vfs.NewMem()
	opts := damageOptions(mem)
	db, err := Open("/db", &opts)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if db != nil {
			db.Close()
		}
	}()
	o, err := dmgWriteBase(db)
	if err != nil {
		return nil, nil, err
	}
	before := dmgClone(o.want)
	tail := dmgTailOps()
	if err := dmgWriteTail(db, o, tail); err != nil {
		return nil, nil, err
	}
	crashed := mem.CrashClone(vfs.CrashOptions{}) // exactly the synced data
	err = db.Close()
	db = nil
	if err != nil {
		return nil, nil, fmt.Errorf("close: %w", err)
	}
	clean, err = analyzeImage("clean", mem, o, before, tail)
	if err != nil {
		return nil, nil, err
	}
	crash, err = analyzeImage("crash", crashed, o, before, tail)
	if err != nil {
		return nil, nil, err
	}
	ct, kt := clean.tailWALs(), crash.tailWALs()
	switch {
	case len(ct) != 1 || !ct[0].sealed:
		return nil, nil, fmt.Errorf("clean image: logs %+v, want one holding the tail, sealed", clean.wals)
	case len(kt) != 1 || kt[0].sealed:
		return nil, nil, fmt.Errorf("crash image: logs %+v, want one holding the tail, unsealed", crash.wals)
	}
	return clean, crash, nil
}

// buildTwoLogImage writes the base, then half the tail; then a Flush
// switches to a new log (sealing the first) and its table's creation is
// held; the rest of the tail goes to the new log; then the crash.
func buildTwoLogImage() (*dmgImage, error) {
	mem := vfs.NewMem()
	g := newGate()
	fault := vfs.NewFault(mem, gatedTableCreates{g})
	opts := damageOptions(fault)
	db, err := Open("/db", &opts)
	if err != nil {
		return nil, err
	}
	defer func() {
		g.release()
		db.Close()
	}()
	o, err := dmgWriteBase(db)
	if err != nil {
		return nil, err
	}
	before := dmgClone(o.want)
	tail := dmgTailOps()
	g.hold()
	if err := dmgWriteTail(db, o, tail[:dmgTail/2]); err != nil {
		return nil, err
	}
	db.mu.Lock()
	first := db.mu.wal.num
	db.mu.Unlock()
	flushed := make(chan error, 1)
	go func() { flushed <- db.Flush() }()
	select {
	case <-g.entered:
	case err := <-flushed:
		return nil, fmt.Errorf("flush finished (%v) with table creation held", err)
	case <-time.After(10 * time.Second):
		return nil, errors.New("the flush never reached the table creation")
	}
	if err := dmgWriteTail(db, o, tail[dmgTail/2:]); err != nil {
		return nil, err
	}
	// The first log's seal may be recorded in the background: wait for it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		sealed := slices.ContainsFunc(db.vs.WALs(), func(w manifest.WAL) bool { return w.Num == first && w.Size >= 0 })
		if sealed {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("log %s never sealed after the switch", first)
		}
	}
	crashed := mem.CrashClone(vfs.CrashOptions{})
	img, err := analyzeImage("crash-2logs", crashed, o, before, tail)
	if err != nil {
		return nil, err
	}
	if tw := img.tailWALs(); len(tw) != 2 || !tw[0].sealed || tw[1].sealed || tw[0].recs != dmgTail/2 {
		return nil, fmt.Errorf("two-log image: logs %+v, want two holding the tail, the first sealed and holding %d records", img.wals, dmgTail/2)
	}
	return img, nil
}

// analyzeImage reads the store in /db of fs and what its manifest says.
func analyzeImage(name string, fs vfs.FS, o *dmgOracle, before map[string]string, tail []dmgOp) (*dmgImage, error) {
	files, _, err := dmgReadTree(fs, "/db")
	if err != nil {
		return nil, err
	}
	img := &dmgImage{name: name, files: files, want: dmgClone(o.want), before: before, hist: o.hist}
	img.manifest = strings.TrimSuffix(string(files["CURRENT"]), "\n")
	mdata := files[img.manifest]
	r := record.NewReader(bytes.NewReader(mdata), img.manifest)
	for {
		_, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: read %s: %w", name, img.manifest, err)
		}
		img.manifestRec = append(img.manifestRec, [2]int64{r.Offset(), r.LastValidOffset()})
	}
	// Load the manifest on a copy (Load writes nothing, but be sure).
	cp := vfs.NewMem()
	if err := dmgWriteFiles(cp, "/db", files); err != nil {
		return nil, err
	}
	vs, err := manifest.Load(manifest.Options{FS: cp, Dir: "/db"})
	if err != nil {
		return nil, fmt.Errorf("%s: load manifest: %w", name, err)
	}
	defer vs.Close()
	img.nextFile = vs.Recovered().NextFileNum
	v := vs.Current()
	for level, fl := range v.Levels {
		for _, f := range fl {
			img.tables = append(img.tables, dmgTable{
				name: base.MakeFilename(base.FileTypeTable, f.FileNum), level: level, size: f.Size,
				lo: string(f.Smallest.UserKey), hi: string(f.Largest.UserKey),
			})
		}
	}
	v.Unref()
	if len(img.tables) < 10 {
		return nil, fmt.Errorf("%s: only %d tables", name, len(img.tables))
	}
	for n := range files {
		if typ, _, ok := base.ParseFilename(n); ok && typ == base.FileTypeLog {
			img.logs = append(img.logs, n)
		}
	}
	slices.Sort(img.logs)
	// Decode the logs the manifest records: together they must hold
	// exactly the tail writes, one per record.
	for _, w := range vs.WALs() {
		wal := dmgWAL{name: base.MakeFilename(base.FileTypeLog, w.Num), sealed: w.Size >= 0}
		data, ok := files[wal.name]
		if !ok {
			return nil, fmt.Errorf("%s: log %s missing", name, wal.name)
		}
		if wal.sealed && int64(len(data)) != w.Size {
			return nil, fmt.Errorf("%s: log %s is %d bytes, sealed at %d", name, wal.name, len(data), w.Size)
		}
		r := record.NewReader(bytes.NewReader(data), wal.name)
		for {
			rec, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s: read %s: %w", name, wal.name, err)
			}
			dr := dmgRecord{log: wal.name, start: r.Offset(), end: r.LastValidOffset()}
			br, err := batchrepr.NewReader(rec)
			if err != nil {
				return nil, err
			}
			for {
				kind, k, val, _, ok, err := br.Next()
				if err != nil {
					return nil, err
				}
				if !ok {
					break
				}
				switch kind {
				case base.KindSet:
					dr.ops = append(dr.ops, dmgOp{key: string(k), value: string(val)})
				case base.KindDelete:
					dr.ops = append(dr.ops, dmgOp{del: true, key: string(k)})
				default:
					return nil, fmt.Errorf("%s: unexpected %v in %s", name, kind, wal.name)
				}
			}
			if dr.end > int64(len(data)) || dr.end <= dr.start {
				return nil, fmt.Errorf("%s: record at [%d,%d) of %s, %d bytes", name, dr.start, dr.end, wal.name, len(data))
			}
			if len(dr.ops) > 0 {
				img.tail = append(img.tail, dr)
				wal.recs++
			}
		}
		img.wals = append(img.wals, wal)
	}
	if len(img.tail) != len(tail) {
		return nil, fmt.Errorf("%s: the logs hold %d records, want %d", name, len(img.tail), len(tail))
	}
	for i, rec := range img.tail {
		if len(rec.ops) != 1 || rec.ops[0] != tail[i] {
			return nil, fmt.Errorf("%s: tail record %d is %v, want %v", name, i, rec.ops, tail[i])
		}
	}
	if got := img.stateWith(nil); !mapsEqual(got, img.want) {
		return nil, fmt.Errorf("%s: the tables' state and the logs do not give the oracle's state", name)
	}
	return img, nil
}

// tailWALs are the recorded logs holding tail writes (not the empty
// spares recorded ahead of use).
func (img *dmgImage) tailWALs() []dmgWAL {
	var out []dmgWAL
	for _, w := range img.wals {
		if w.recs > 0 {
			out = append(out, w)
		}
	}
	return out
}

func dmgClone[M ~map[K]V, K comparable, V any](m M) M {
	out := make(M, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// stateWith is the state before the tail with the tail records that keep
// accepts (all, if nil) applied in order.
func (img *dmgImage) stateWith(keep func(r dmgRecord) bool) map[string]string {
	m := dmgClone(img.before)
	for _, r := range img.tail {
		if keep != nil && !keep(r) {
			continue
		}
		for _, op := range r.ops {
			if op.del {
				delete(m, op.key)
			} else {
				m[op.key] = op.value
			}
		}
	}
	return m
}

// keptBefore: the state when log is cut at off (records ending after it
// lost).
func (img *dmgImage) keptBefore(log string, off int64) map[string]string {
	return img.stateWith(func(r dmgRecord) bool { return r.log != log || r.end <= off })
}

// keptWithout: the state without the record of log holding byte p.
func (img *dmgImage) keptWithout(log string, p int64) map[string]string {
	return img.stateWith(func(r dmgRecord) bool { return r.log != log || p < r.start || p >= r.end })
}

// keptWithoutLog: the state without log's records.
func (img *dmgImage) keptWithoutLog(log string) map[string]string {
	return img.stateWith(func(r dmgRecord) bool { return r.log != log })
}

// recordOf reports whether byte p of log is in one of its tail records, and
// whether that record is the last of the log.
func (img *dmgImage) recordOf(log string, p int64) (in, last bool) {
	var recs []dmgRecord
	for _, r := range img.tail {
		if r.log == log {
			recs = append(recs, r)
		}
	}
	for i, r := range recs {
		if p >= r.start && p < r.end {
			return true, i == len(recs)-1
		}
	}
	return false, false
}

// recordEnds are the end offsets of log's records.
func (img *dmgImage) recordEnds(log string) []int64 {
	var out []int64
	for _, r := range img.tail {
		if r.log == log {
			out = append(out, r.end)
		}
	}
	return out
}

// ---------------------------------------------------------------------------
// Directories: where a scenario runs, and snapshots of them.

// dmgEnv is a directory on a file system.
type dmgEnv struct {
	kind string // "mem" or "os"
	fs   vfs.FS
	dir  string
}

func newDmgEnv(t *testing.T, kind string) dmgEnv {
	if kind == "mem" {
		return dmgEnv{kind: kind, fs: vfs.NewMem(), dir: "/db"}
	}
	return dmgEnv{kind: kind, fs: vfs.Default, dir: filepath.Join(t.TempDir(), "db")}
}

var dmgEnvKinds = []string{"mem", "os"}

// dmgReadTree reads every file under dir: relative slash paths to contents,
// subdirectories as "name/" with nil contents. A missing dir gives
// exists=false. A file that vanishes between the listing and the read (a
// running store's cleaner) is left out.
func dmgReadTree(fs vfs.FS, dir string) (files map[string][]byte, exists bool, err error) {
	files = map[string][]byte{}
	var walk func(d, prefix string) error
	walk = func(d, prefix string) error {
		names, err := fs.List(d)
		if err != nil {
			return err
		}
		for _, n := range names {
			p := fs.PathJoin(d, n)
			st, err := fs.Stat(p)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				return err
			}
			if st.IsDir() {
				files[prefix+n+"/"] = nil
				if err := walk(p, prefix+n+"/"); err != nil {
					return err
				}
				continue
			}
			data, err := vfs.ReadFile(fs, p)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				return err
			}
			files[prefix+n] = data
		}
		return nil
	}
	if _, err := fs.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err := walk(dir, ""); err != nil {
		return nil, true, err
	}
	return files, true, nil
}

func dmgMustReadTree(t *testing.T, fs vfs.FS, dir string) (map[string][]byte, bool) {
	t.Helper()
	files, exists, err := dmgReadTree(fs, dir)
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	return files, exists
}

// dmgWriteFiles creates dir and the files (unsynced: the test reads them back
// through the same file system).
func dmgWriteFiles(fs vfs.FS, dir string, files map[string][]byte) error {
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range files {
			if !yield(n) {
				return
			}
		}
	})
	for _, n := range names {
		p := fs.PathJoin(append([]string{dir}, strings.Split(strings.TrimSuffix(n, "/"), "/")...)...)
		if strings.HasSuffix(n, "/") {
			if err := fs.MkdirAll(p, 0o755); err != nil {
				return err
			}
			continue
		}
		if i := strings.LastIndexByte(n, '/'); i >= 0 {
			if err := fs.MkdirAll(fs.PathJoin(dir, n[:i]), 0o755); err != nil {
				return err
			}
		}
		f, err := fs.Create(p)
		if err != nil {
			return err
		}
		if _, err := f.Write(files[n]); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}

func (e dmgEnv) write(t *testing.T, files map[string][]byte) {
	t.Helper()
	if err := dmgWriteFiles(e.fs, e.dir, files); err != nil {
		t.Fatalf("write the image to %s: %v", e.dir, err)
	}
}

// dmgDiffTrees describes how b differs from a.
func dmgDiffTrees(a, b map[string][]byte) []string {
	var out []string
	for n, da := range a {
		db, ok := b[n]
		switch {
		case !ok:
			out = append(out, "removed "+n)
		case !bytes.Equal(da, db):
			out = append(out, fmt.Sprintf("changed %s (%d -> %d bytes)", n, len(da), len(db)))
		}
	}
	for n, db := range b {
		if _, ok := a[n]; !ok {
			out = append(out, fmt.Sprintf("created %s (%d bytes)", n, len(db)))
		}
	}
	sort.Strings(out)
	return out
}

// dmgIgnoreLock drops the creation of LOCK (empty) from a diff: a failed
// read-write Open keeps the lock file it created (removing a lock file that
// another process may be about to take would let two writers in).
func dmgIgnoreLock(diff []string) []string {
	return slices.DeleteFunc(slices.Clone(diff), func(l string) bool {
		return l == "created LOCK (0 bytes)" || strings.HasSuffix(l, "/LOCK (0 bytes)") && strings.HasPrefix(l, "created ")
	})
}

// dmgCanonical reports whether a top-level name is one the store makes.
func dmgCanonical(name string) bool {
	_, _, ok := base.ParseFilename(name)
	return ok
}

// ---------------------------------------------------------------------------
// Opening and checking.

// dmgOpen opens the store in env and checks what Open did to the directory:
// a failed Open changed, created and removed nothing but LOCK (which a
// read-write Open keeps once created); a successful one left every non-canonical file and
// everything in subdirectories as it was, removed only canonical files, and
// moved (not removed) each file it reports as unexplained into lost/. A
// read-only Open changes nothing, failed or not.
func dmgOpen(t *testing.T, env dmgEnv, opts Options) (*DB, error) {
	t.Helper()
	before, existed := dmgMustReadTree(t, env.fs, env.dir)
	db, err := Open(env.dir, &opts)
	after, exists := dmgMustReadTree(t, env.fs, env.dir)
	if err != nil || opts.ReadOnly {
		what := "a read-only Open"
		if err != nil {
			what = fmt.Sprintf("a failed Open (%v)", err)
		}
		if exists != existed {
			t.Errorf("%s: directory existed before: %v, after: %v", what, existed, exists)
		}
		d := dmgDiffTrees(before, after)
		if !opts.ReadOnly {
			d = dmgIgnoreLock(d) // a read-write Open keeps the LOCK it created
		}
		if len(d) > 0 {
			t.Errorf("%s changed the directory: %s", what, dmgSummarize(d, 12))
		}
		return db, err
	}
	unexplained := db.Metrics().Recovery.Unexplained
	for n, data := range before {
		if dmgCanonical(n) && !strings.Contains(n, "/") {
			continue
		}
		if got, ok := after[n]; !ok || !bytes.Equal(got, data) {
			t.Errorf("Open removed or changed %s, which is not a file of the store", n)
		}
	}
	for _, n := range unexplained {
		if !dmgCanonical(n) {
			t.Errorf("Open reports %s as unexplained: not a name of the store", n)
		}
		data, ok := before[n]
		if !ok {
			t.Errorf("Open reports %s as unexplained, but it was not in the directory", n)
			continue
		}
		if _, ok := after[n]; ok {
			t.Errorf("unexplained %s left in the store's directory", n)
		}
		moved := false
		for m, got := range after {
			if (m == "lost/"+n || strings.HasPrefix(m, "lost/"+n+".")) && bytes.Equal(got, data) {
				if _, was := before[m]; !was {
					moved = true
				}
			}
		}
		if !moved {
			t.Errorf("unexplained %s not found in lost/ with its contents", n)
		}
	}
	return db, nil
}

// dmgWantCorruption checks that err is a corruption error naming file (any
// file if file is "").
func dmgWantCorruption(t *testing.T, err error, file string) {
	t.Helper()
	if err == nil {
		t.Fatalf("Open succeeded, want ErrCorruption naming %q", file)
	}
	if !errors.Is(err, ErrCorruption) {
		t.Fatalf("Open: %v, want ErrCorruption naming %q", err, file)
	}
	var ce *CorruptionError
	if !errors.As(err, &ce) {
		t.Fatalf("Open: %v matches ErrCorruption but holds no *CorruptionError", err)
	}
	if file != "" && ce.File != file {
		t.Errorf("Open: corruption in %q, want %q (%v)", ce.File, file, err)
	}
}

// dmgDescribeDiff summarizes how got differs from want.
func dmgDescribeDiff(got, want map[string]string) string {
	var missing, wrong, extra []string
	for k, v := range want {
		g, ok := got[k]
		switch {
		case !ok:
			missing = append(missing, k)
		case g != v:
			wrong = append(wrong, fmt.Sprintf("%s=%q (want %q)", k, g, v))
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			extra = append(extra, fmt.Sprintf("%s=%q", k, v))
		}
	}
	sort.Strings(missing)
	sort.Strings(wrong)
	sort.Strings(extra)
	return fmt.Sprintf("%d keys, want %d: %d missing [%s], %d wrong [%s], %d unexpected [%s]",
		len(got), len(want), len(missing), dmgSummarize(missing, 5), len(wrong), dmgSummarize(wrong, 5), len(extra), dmgSummarize(extra, 5))
}

// dmgCheckExact fails unless the store holds exactly want, by a scan and by
// point reads of a sample of keys (present and absent).
func dmgCheckExact(t *testing.T, db *DB, want map[string]string, what string) {
	t.Helper()
	// Compare while scanning (building a map of the store for every
	// scenario costs more than the rest of the check); on a mismatch scan
	// again to describe it.
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	n, same := 0, true
	for k, v := range it.All() {
		n++
		if w, ok := want[string(k)]; !ok || w != string(v) {
			same = false
			break
		}
	}
	if err := it.Error(); err != nil {
		it.Close()
		t.Fatalf("%s: scan: %v", what, err)
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if !same || n != len(want) {
		t.Fatalf("%s: the store holds %s", what, dmgDescribeDiff(scanAll(t, db), want))
	}
	for i := 0; i < dmgKeys; i += 97 {
		for _, k := range []string{dmgKey(i), fmt.Sprintf("t%05d", i%300)} {
			v, err := db.Get([]byte(k))
			w, ok := want[k]
			switch {
			case ok && (err != nil || string(v) != w):
				t.Fatalf("%s: Get(%s) = %q, %v; want %q", what, k, v, err, w)
			case !ok && !errors.Is(err, ErrNotFound):
				t.Fatalf("%s: Get(%s) = %q, %v; want ErrNotFound", what, k, v, err)
			}
		}
	}
}

// dmgCheckTolerant: keys for which suspect is false read back exactly as in
// want; a suspect key (one whose newest data may have been lost with a
// damaged file) may be absent or hold any value it ever had; no key holds a
// value it never had.
func dmgCheckTolerant(t *testing.T, db *DB, img *dmgImage, want map[string]string, suspect func(k string) bool, what string) {
	t.Helper()
	got := scanAll(t, db)
	var bad []string
	for k, v := range got {
		if w, ok := want[k]; ok && v == w {
			continue
		}
		if !suspect(k) || !img.hist[k][v] {
			bad = append(bad, fmt.Sprintf("%s=%q", k, v))
		}
	}
	for k, w := range want {
		if _, ok := got[k]; !ok && !suspect(k) {
			bad = append(bad, fmt.Sprintf("%s missing (want %q)", k, w))
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		t.Fatalf("%s: %d keys wrong or missing outside the damaged file's range: %s", what, len(bad), dmgSummarize(bad, 8))
	}
}

// dmgCheckExactOrCorrupt: reads of a store with a damaged table either give
// the right answer or fail with ErrCorruption; never a wrong one.
func dmgCheckExactOrCorrupt(t *testing.T, db *DB, want map[string]string) {
	t.Helper()
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for k, v := range it.All() {
		got[string(k)] = string(v)
	}
	scanErr := it.Error()
	it.Close()
	switch {
	case scanErr != nil && !errors.Is(scanErr, ErrCorruption):
		t.Errorf("scan of a store with a damaged table: %v, want ErrCorruption", scanErr)
	case scanErr == nil && !mapsEqual(got, want):
		t.Errorf("scan of a store with a damaged table succeeded with wrong data: %s", dmgDescribeDiff(got, want))
	}
	var wrong []string
	for k, w := range want {
		v, err := db.Get([]byte(k))
		switch {
		case err == nil && string(v) == w:
		case errors.Is(err, ErrCorruption):
		default:
			wrong = append(wrong, fmt.Sprintf("%s: %q, %v (want %q)", k, v, err, w))
		}
	}
	if len(wrong) > 0 {
		sort.Strings(wrong)
		t.Errorf("Get on a store with a damaged table: %d keys neither right nor ErrCorruption: %s", len(wrong), dmgSummarize(wrong, 5))
	}
}

func dmgMustClose(t *testing.T, db *DB) {
	t.Helper()
	if db == nil {
		return
	}
	if err := db.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// dmgSummarize joins up to max items, saying how many more there are.
func dmgSummarize(items []string, max int) string {
	if len(items) <= max {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:max], ", "), len(items)-max)
}

// TestDamageImages checks the images the matrix damages: many tables in
// several levels, the tail writes in one log, sealed only after the clean
// Close.
func TestDamageImages(t *testing.T) {
	clean, crash, crash2 := damageImages(t)
	for _, img := range []*dmgImage{clean, crash, crash2} {
		levels := map[int]int{}
		for _, tb := range img.tables {
			levels[tb.level]++
		}
		size := 0
		for _, d := range img.files {
			size += len(d)
		}
		t.Logf("%s: %d files (%d bytes), %d tables %v, manifest %s (%d bytes, %d records), next file %d, logs %v, tail logs %+v",
			img.name, len(img.files), size, len(img.tables), levels, img.manifest, len(img.files[img.manifest]), len(img.manifestRec), img.nextFile,
			img.logs, img.wals)
		if len(levels) < 2 {
			t.Errorf("%s: tables in %d levels, want several", img.name, len(levels))
		}
		env := newDmgEnv(t, "mem")
		env.write(t, img.files)
		db, err := dmgOpen(t, env, damageOptions(env.fs))
		if err != nil {
			t.Fatalf("%s: Open of the undamaged image: %v", img.name, err)
		}
		dmgCheckExact(t, db, img.want, img.name+", undamaged")
		if m := db.Metrics(); m.Recovery.TornTails != 0 || m.Recovery.SalvagedRecords != 0 || len(m.Recovery.Unexplained) != 0 {
			t.Errorf("%s: undamaged image recovered with %+v", img.name, m.Recovery)
		}
		dmgMustClose(t, db)
	}
}

// ---------------------------------------------------------------------------
// The matrix.

// dmgScenario is one damage and what Open and Repair must make of it.
type dmgScenario struct {
	name    string
	damage  func(files map[string][]byte)
	salvage bool     // open with WALRecovery: WALSalvage
	envs    []string // file systems to run on; nil: all
	// open checks Open's result (db is nil when err is not); nil: Open
	// must succeed and read back every acknowledged write.
	open func(t *testing.T, db *DB, err error)
	// repair, if set, is run after Repair of the damaged directory and a
	// successful Open of the result.
	repair func(t *testing.T, db *DB, rep *RepairReport)
}

// runDmgScenario damages a copy of img in a fresh directory, opens it and
// checks the result; then repairs the damaged directory (the one the failed
// Open left, or a fresh damaged copy if Open succeeded) and checks that.
func runDmgScenario(t *testing.T, img *dmgImage, sc dmgScenario, kind string) {
	files := dmgClone(img.files)
	if sc.damage != nil {
		sc.damage(files)
	}
	env := newDmgEnv(t, kind)
	env.write(t, files)
	opts := damageOptions(env.fs)
	if sc.salvage {
		opts.WALRecovery = WALSalvage
	}
	db, err := dmgOpen(t, env, opts)
	func() {
		defer dmgMustClose(t, db)
		if sc.open != nil {
			sc.open(t, db, err)
		} else {
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			dmgCheckExact(t, db, img.want, "after Open")
		}
	}()
	if sc.repair == nil || t.Failed() {
		return
	}
	if err == nil {
		env = newDmgEnv(t, kind)
		env.write(t, files)
	}
	opts.FS = env.fs
	rep := dmgRepair(t, env, opts)
	db, err = dmgOpen(t, env, opts)
	if err != nil {
		t.Fatalf("Open after Repair: %v (report %+v)", err, rep)
	}
	defer dmgMustClose(t, db)
	if u := db.Metrics().Recovery.Unexplained; len(u) > 0 {
		t.Errorf("Open after Repair finds unexplained files %v", u)
	}
	sc.repair(t, db, rep)
}

// dmgRepair runs Repair on env and checks that it deleted and changed
// nothing but CURRENT (which it replaces), and moved only the files it
// reports as lost into lost/.
func dmgRepair(t *testing.T, env dmgEnv, opts Options) *RepairReport {
	t.Helper()
	before, _ := dmgMustReadTree(t, env.fs, env.dir)
	rep, err := Repair(env.dir, &opts)
	if err != nil {
		t.Fatalf("Repair: %v", err)
	}
	after, _ := dmgMustReadTree(t, env.fs, env.dir)
	lost := map[string]bool{}
	for _, l := range rep.Lost {
		lost[l.Name] = true
	}
	for n, data := range before {
		if n == "CURRENT" {
			continue
		}
		got, ok := after[n]
		switch {
		case ok && bytes.Equal(got, data):
		case ok:
			t.Errorf("Repair changed %s", n)
		case !lost[n]:
			t.Errorf("Repair removed %s, which it does not report as lost", n)
		default:
			if m, ok := after["lost/"+n]; !ok || !bytes.Equal(m, data) {
				if _, was := before["lost/"+n]; !was {
					t.Errorf("Repair reports %s as lost but did not keep it in lost/", n)
				}
			}
		}
	}
	return rep
}

// Expectations.

func dmgOpenFails(file string) func(t *testing.T, db *DB, err error) {
	return func(t *testing.T, db *DB, err error) {
		t.Helper()
		dmgWantCorruption(t, err, file)
	}
}

// dmgOpenFailsOrExact: Open fails with a corruption error naming file, or
// succeeds with every acknowledged write (a log the manifest lost the record
// of is refused, never set aside).
func dmgOpenFailsOrExact(img *dmgImage, file string) func(t *testing.T, db *DB, err error) {
	return func(t *testing.T, db *DB, err error) {
		t.Helper()
		if err != nil {
			dmgWantCorruption(t, err, file)
			return
		}
		for _, n := range db.Metrics().Recovery.Unexplained {
			if typ, _, _ := base.ParseFilename(n); typ == base.FileTypeLog {
				t.Errorf("Open set aside log %s: a non-empty log the manifest does not record must be refused, not moved", n)
			}
		}
		t.Logf("Open recovered from the damaged manifest (unexplained: %v)", db.Metrics().Recovery.Unexplained)
		dmgCheckExact(t, db, img.want, "Open succeeded")
	}
}

// dmgOpenRecovers: Open succeeds with exactly want; salvaged and torn say
// whether WALSalvage skipped damage and a torn tail was ignored (-1: either).
func dmgOpenRecovers(want map[string]string, log string, salvaged, torn int) func(t *testing.T, db *DB, err error) {
	return func(t *testing.T, db *DB, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		r := db.Metrics().Recovery
		dmgCheckExact(t, db, want, fmt.Sprintf("Open (recovery %d torn, %d salvaged)", r.TornTails, r.SalvagedRecords))
		switch {
		case salvaged == 1 && r.SalvagedRecords == 0:
			t.Errorf("no SalvagedRecords reported")
		case salvaged == 0 && r.SalvagedRecords != 0:
			t.Errorf("SalvagedRecords = %d, want 0", r.SalvagedRecords)
		case torn == 1 && r.TornTails != 1:
			t.Errorf("TornTails = %d, want 1", r.TornTails)
		case torn == 0 && r.TornTails != 0:
			t.Errorf("TornTails = %d, want 0", r.TornTails)
		}
		if (r.SalvagedRecords > 0 || r.TornTails > 0) && !slices.ContainsFunc(r.Damage, func(c CorruptionError) bool { return c.File == log }) {
			t.Errorf("Recovery.Damage %v does not name %s", r.Damage, log)
		}
	}
}

func dmgRepairExact(want map[string]string) func(t *testing.T, db *DB, rep *RepairReport) {
	return func(t *testing.T, db *DB, rep *RepairReport) {
		t.Helper()
		dmgCheckExact(t, db, want, "after Repair")
	}
}

// dmgRepairLosingTable: after Repair every key outside the damaged table's
// bounds reads back; the table is reported lost if lost is set.
func dmgRepairLosingTable(img *dmgImage, tb dmgTable, lost bool) func(t *testing.T, db *DB, rep *RepairReport) {
	return func(t *testing.T, db *DB, rep *RepairReport) {
		t.Helper()
		dmgCheckTolerant(t, db, img, img.want, func(k string) bool { return k >= tb.lo && k <= tb.hi }, "after Repair")
		isLost := slices.ContainsFunc(rep.Lost, func(l LostFile) bool { return l.Name == tb.name })
		if lost && !isLost {
			t.Errorf("Repair does not report the damaged %s as lost: %+v", tb.name, rep.Lost)
		}
	}
}

// dmgSample returns about n of the values, always the first and last.
func dmgSample[T any](vals []T, n int) []T {
	if n <= 0 || len(vals) <= n {
		return vals
	}
	out := []T{}
	for i := 0; i < n; i++ {
		out = append(out, vals[i*(len(vals)-1)/(n-1)])
	}
	return out
}

func dmgFlip(files map[string][]byte, name string, p int64) {
	d := slices.Clone(files[name])
	d[p] ^= 0x5a
	files[name] = d
}

func dmgTruncateTo(files map[string][]byte, name string, n int64) {
	files[name] = slices.Clone(files[name][:n])
}

func dmgOnlyMem() []string { return []string{"mem"} }

// dmgMetadataScenarios: CURRENT and MANIFEST damage.
func dmgMetadataScenarios(img *dmgImage) []dmgScenario {
	short := testing.Short()
	all := dmgRepairExact(img.want)
	m := img.manifest
	var out []dmgScenario
	add := func(sc dmgScenario) { out = append(out, sc) }
	add(dmgScenario{name: "CURRENT removed", damage: func(f map[string][]byte) { delete(f, "CURRENT") }, open: dmgOpenFails("CURRENT"), repair: all})
	add(dmgScenario{name: "CURRENT emptied", damage: func(f map[string][]byte) { f["CURRENT"] = nil }, open: dmgOpenFails("CURRENT"), repair: all})
	add(dmgScenario{name: "CURRENT without newline", damage: func(f map[string][]byte) { f["CURRENT"] = []byte(m) }, open: dmgOpenFails("CURRENT"), repair: all})
	add(dmgScenario{name: "CURRENT garbage", damage: func(f map[string][]byte) { f["CURRENT"] = []byte("\x00\xffjunk\n") }, open: dmgOpenFails("CURRENT"), repair: all})
	add(dmgScenario{name: "CURRENT names a missing manifest", damage: func(f map[string][]byte) { f["CURRENT"] = []byte("MANIFEST-999999\n") }, open: dmgOpenFails("CURRENT"), repair: all})
	add(dmgScenario{name: "CURRENT names a table", damage: func(f map[string][]byte) { f["CURRENT"] = []byte(img.tables[0].name + "\n") }, open: dmgOpenFails("CURRENT"), repair: all})
	add(dmgScenario{name: "CURRENT and LOCK removed", damage: func(f map[string][]byte) { delete(f, "CURRENT"); delete(f, "LOCK") }, open: dmgOpenFails("CURRENT"), repair: all})
	add(dmgScenario{name: "a table and LOCK removed", damage: func(f map[string][]byte) { delete(f, img.tables[1].name); delete(f, "LOCK") },
		open: dmgOpenFails(m), repair: dmgRepairLosingTable(img, img.tables[1], false)})
	add(dmgScenario{name: "MANIFEST removed", damage: func(f map[string][]byte) { delete(f, m) }, open: dmgOpenFails(""), repair: all})
	add(dmgScenario{name: "MANIFEST emptied", damage: func(f map[string][]byte) { f[m] = nil }, open: dmgOpenFails(m), repair: all})

	// Truncation at every record boundary, and inside records.
	size := int64(len(img.files[m]))
	firstEnd := img.manifestRec[0][1]
	truncCheck := func(off int64) func(t *testing.T, db *DB, err error) {
		if off < firstEnd {
			return dmgOpenFails(m)
		}
		return dmgOpenFailsOrExact(img, m)
	}
	step := 1
	if short {
		step = 8
	}
	for i, r := range img.manifestRec {
		if i%step != 0 && i != len(img.manifestRec)-1 {
			continue
		}
		off := r[0]
		sc := dmgScenario{name: fmt.Sprintf("MANIFEST truncated at record %d boundary %d of %d", i, off, size),
			damage: func(f map[string][]byte) { dmgTruncateTo(f, m, off) }, open: truncCheck(off)}
		if i%16 == 0 || i == len(img.manifestRec)-1 {
			sc.repair = all
		}
		if i%8 != 0 && i != len(img.manifestRec)-1 {
			sc.envs = dmgOnlyMem()
		}
		add(sc)
		mid := (r[0] + r[1]) / 2
		inner := []int64{mid, r[0] + 1, r[0] + 4, r[0] + 7, r[1] - 1}
		if short {
			inner = inner[:1]
		}
		seen := map[int64]bool{}
		for j, off := range inner {
			if off <= r[0] || off >= r[1] || seen[off] {
				continue
			}
			seen[off] = true
			sc := dmgScenario{name: fmt.Sprintf("MANIFEST truncated inside record %d at %d of %d", i, off, size),
				damage: func(f map[string][]byte) { dmgTruncateTo(f, m, off) }, open: truncCheck(off)}
			if j != 0 || i%16 != 0 {
				sc.envs = dmgOnlyMem()
			}
			add(sc)
		}
	}
	// Bytes flipped: in a record followed by others Open must fail; in the
	// last record (a torn tail, for all Open can tell) it may also recover.
	lastStart := img.manifestRec[len(img.manifestRec)-1][0]
	n := 40
	if short {
		n = 10
	}
	var offs []int64
	for i := range n {
		offs = append(offs, int64(i)*size/int64(n))
	}
	offs = append(offs, lastStart, size-1)
	for i, off := range offs {
		open := dmgOpenFails(m)
		if off >= lastStart {
			open = dmgOpenFailsOrExact(img, m)
		}
		sc := dmgScenario{name: fmt.Sprintf("MANIFEST byte %d of %d flipped", off, size),
			damage: func(f map[string][]byte) { dmgFlip(f, m, off) }, open: open}
		if i%8 == 0 {
			sc.repair = all
		}
		if i%8 != 0 {
			sc.envs = dmgOnlyMem()
		}
		add(sc)
	}
	return out
}

// dmgWALScenarios: each log holding tail writes truncated, flipped,
// extended and removed.
func dmgWALScenarios(img *dmgImage) []dmgScenario {
	short := testing.Short()
	var out []dmgScenario
	add := func(sc dmgScenario) { out = append(out, sc) }
	tw := img.tailWALs()
	for _, w := range img.wals {
		log := w.name
		size := int64(len(img.files[log]))
		if w.recs == 0 {
			out = append(out, dmgSpareScenarios(img, w)...)
			continue
		}
		lastLog := w.name == tw[len(tw)-1].name
		add(dmgScenario{name: log + " removed", damage: func(f map[string][]byte) { delete(f, log) },
			open: dmgOpenFails(img.manifest), repair: dmgRepairExact(img.keptWithoutLog(log))})
		add(dmgScenario{name: log + " removed, WALSalvage", salvage: true, damage: func(f map[string][]byte) { delete(f, log) },
			open: dmgOpenFails(img.manifest)})

		// Truncations: at record ends and inside records.
		ends := img.recordEnds(log)
		var cuts []int64
		nCuts := 25
		switch {
		case short:
			nCuts = 6
		case !w.sealed || len(tw) > 1:
			nCuts = 12
		}
		for _, e := range dmgSample(ends, nCuts) {
			cuts = append(cuts, e, e-1, e-10)
		}
		cuts = append(cuts, 0, 1, size-1)
		slices.Sort(cuts)
		cuts = slices.Compact(cuts)
		for i, cut := range cuts {
			if cut < 0 || cut >= size {
				continue
			}
			kept := img.keptBefore(log, cut)
			atEnd := slices.Contains(ends, cut) || cut == 0
			var envs []string
			if i%8 != 0 {
				envs = dmgOnlyMem()
			}
			var repair func(t *testing.T, db *DB, rep *RepairReport)
			if i%6 == 0 {
				repair = dmgRepairExact(kept)
			}
			name := fmt.Sprintf("%s truncated to %d of %d", log, cut, size)
			damage := func(f map[string][]byte) { dmgTruncateTo(f, log, cut) }
			if w.sealed {
				add(dmgScenario{name: name, damage: damage, envs: envs, open: dmgOpenFails(log), repair: repair})
				add(dmgScenario{name: name + ", WALSalvage", salvage: true, damage: damage, envs: envs, open: dmgOpenRecovers(kept, log, 1, -1)})
				continue
			}
			torn := 1
			if atEnd {
				torn = 0
			}
			if !lastLog {
				// Not the newest log, yet unsealed: cannot happen (a log is
				// sealed before the next is recorded).
				continue
			}
			add(dmgScenario{name: name, damage: damage, envs: envs, open: dmgOpenRecovers(kept, log, 0, torn), repair: repair})
		}

		// One byte flipped: every position of the last 250 bytes (a sample
		// in short mode and on the OS), and a sample of the rest.
		var flips []int64
		for p := max(0, size-250); p < size; p++ {
			flips = append(flips, p)
		}
		step := size / 20
		switch {
		case short:
			flips = dmgSample(flips, 12)
			step = size / 6
		case !w.sealed || len(tw) > 1:
			flips = dmgSample(flips, 40) // every position: the clean image's
		}
		for p := int64(0); p < size-250; p += step {
			flips = append(flips, p)
		}
		for i, p := range flips {
			in, last := img.recordOf(log, p)
			if !in {
				continue // between records (a block trailer): nothing to lose
			}
			kept := img.keptWithout(log, p)
			var envs []string
			if i%25 != 0 {
				envs = dmgOnlyMem()
			}
			var repair func(t *testing.T, db *DB, rep *RepairReport)
			if i%25 == 0 {
				repair = dmgRepairExact(kept)
			}
			name := fmt.Sprintf("%s byte %d of %d flipped", log, p, size)
			damage := func(f map[string][]byte) { dmgFlip(f, log, p) }
			switch {
			case w.sealed:
				add(dmgScenario{name: name, damage: damage, envs: envs, open: dmgOpenFails(log), repair: repair})
				add(dmgScenario{name: name + ", WALSalvage", salvage: true, damage: damage, envs: envs, open: dmgOpenRecovers(kept, log, 1, 0)})
			case last && lastLog:
				add(dmgScenario{name: name, damage: damage, envs: envs, open: dmgOpenRecovers(kept, log, 0, 1), repair: repair})
			default:
				add(dmgScenario{name: name, damage: damage, envs: envs, open: dmgOpenFails(log), repair: repair})
				add(dmgScenario{name: name + ", WALSalvage", salvage: true, damage: damage, envs: envs, open: dmgOpenRecovers(kept, log, 1, 0)})
			}
		}

		// Extended: zeros (a preallocated or crash-extended file) and
		// garbage appended.
		for _, ext := range []struct {
			name string
			data []byte
		}{{"zeros", make([]byte, 100)}, {"garbage", bytes.Repeat([]byte("garbage!"), 20)}} {
			name := fmt.Sprintf("%s extended by %d bytes of %s", log, len(ext.data), ext.name)
			damage := func(f map[string][]byte) { f[log] = append(slices.Clone(f[log]), ext.data...) }
			switch {
			case w.sealed:
				add(dmgScenario{name: name, damage: damage, open: dmgOpenFails(log), repair: dmgRepairExact(img.want)})
				add(dmgScenario{name: name + ", WALSalvage", salvage: true, damage: damage, open: dmgOpenRecovers(img.want, log, 1, -1)})
			default:
				add(dmgScenario{name: name, damage: damage, open: dmgOpenRecovers(img.want, log, 0, 1), repair: dmgRepairExact(img.want)})
			}
		}
	}
	// Logs the manifest does not need (flushed, below the log number):
	// Open deletes them unread, whatever their state.
	for _, log := range img.logs {
		if slices.ContainsFunc(img.wals, func(w dmgWAL) bool { return w.name == log }) {
			continue
		}
		add(dmgScenario{name: "obsolete " + log + " removed", damage: func(f map[string][]byte) { delete(f, log) }})
		add(dmgScenario{name: "obsolete " + log + " flipped", damage: func(f map[string][]byte) { dmgFlip(f, log, int64(len(f[log])/2)) }})
	}
	return out
}

// dmgSpareScenarios: a recorded log that holds nothing (a spare, created
// and recorded ahead of its use) removed or extended.
func dmgSpareScenarios(img *dmgImage, w dmgWAL) []dmgScenario {
	log := w.name
	out := []dmgScenario{
		// The manifest records it; that it held nothing, Open may or may
		// not be able to tell.
		{name: "empty " + log + " removed", damage: func(f map[string][]byte) { delete(f, log) },
			open: dmgOpenFailsOrExact(img, img.manifest), repair: dmgRepairExact(img.want)},
	}
	for _, ext := range []struct {
		name string
		data []byte
	}{{"zeros", make([]byte, 100)}, {"garbage", bytes.Repeat([]byte("garbage!"), 20)}} {
		name := fmt.Sprintf("empty %s extended by %d bytes of %s", log, len(ext.data), ext.name)
		damage := func(f map[string][]byte) { f[log] = append(slices.Clone(f[log]), ext.data...) }
		if w.sealed {
			out = append(out,
				dmgScenario{name: name, damage: damage, open: dmgOpenFails(log), repair: dmgRepairExact(img.want)},
				dmgScenario{name: name + ", WALSalvage", salvage: true, damage: damage, open: dmgOpenRecovers(img.want, log, 1, -1)})
		} else {
			out = append(out, dmgScenario{name: name, damage: damage, open: dmgOpenRecovers(img.want, log, 0, -1), repair: dmgRepairExact(img.want)})
		}
	}
	return out
}

// dmgTableScenarios: a table removed, truncated, replaced by another's
// bytes, or with a byte flipped in place.
func dmgTableScenarios(img *dmgImage) []dmgScenario {
	picks := []dmgTable{img.tables[0], img.tables[len(img.tables)/2], img.tables[len(img.tables)-1]}
	if testing.Short() {
		picks = picks[1:2]
	}
	m := img.manifest
	var out []dmgScenario
	for _, tb := range picks {
		name := tb.name
		other := img.tables[0]
		for _, o := range img.tables {
			if o.name != name && o.size != tb.size {
				other = o
				break
			}
		}
		out = append(out,
			dmgScenario{name: fmt.Sprintf("L%d table %s removed", tb.level, name), damage: func(f map[string][]byte) { delete(f, name) },
				open: dmgOpenFails(m), repair: dmgRepairLosingTable(img, tb, false)},
			dmgScenario{name: fmt.Sprintf("L%d table %s truncated to half", tb.level, name), damage: func(f map[string][]byte) { dmgTruncateTo(f, name, int64(tb.size/2)) },
				open: dmgOpenFails(m), repair: dmgRepairLosingTable(img, tb, true)},
			dmgScenario{name: fmt.Sprintf("L%d table %s short by one byte", tb.level, name), damage: func(f map[string][]byte) { dmgTruncateTo(f, name, int64(tb.size-1)) },
				open: dmgOpenFails(m), repair: dmgRepairLosingTable(img, tb, true)},
			dmgScenario{name: fmt.Sprintf("L%d table %s emptied", tb.level, name), damage: func(f map[string][]byte) { f[name] = nil },
				open: dmgOpenFails(m), repair: dmgRepairLosingTable(img, tb, true)},
			dmgScenario{name: fmt.Sprintf("L%d table %s replaced by %s", tb.level, name, other.name), damage: func(f map[string][]byte) { f[name] = slices.Clone(f[other.name]) },
				open: dmgOpenFails(m), repair: dmgRepairLosingTable(img, tb, false)},
			// Same size, so Open's check of sizes cannot see it: Open may
			// succeed (reads of the damaged block fail), Repair must keep
			// the table out and report it.
			dmgScenario{name: fmt.Sprintf("L%d table %s byte flipped", tb.level, name), damage: func(f map[string][]byte) { dmgFlip(f, name, int64(tb.size/3)) },
				open: func(t *testing.T, db *DB, err error) {
					if err != nil {
						dmgWantCorruption(t, err, "")
						return
					}
					dmgCheckExactOrCorrupt(t, db, img.want)
				}, repair: dmgRepairLosingTable(img, tb, true)},
		)
	}
	return out
}

// dmgJunkTable is bytes that are not a table.
var dmgJunkTable = bytes.Repeat([]byte("this is not a table; "), 50)

// dmgForeignScenarios: files that are not the store's (names it never
// makes) and files with its names that it cannot explain or that are
// provably obsolete.
func dmgForeignScenarios(img *dmgImage) []dmgScenario {
	var out []dmgScenario
	add := func(sc dmgScenario) { out = append(out, sc) }
	// Non-canonical names: left alone (dmgOpen checks), the store intact.
	for _, f := range []struct{ name, data string }{
		{"5.sst", "a user's table"}, {"2024.log", "a user's log\n"}, {"notes.txt", "notes\n"},
		{"0000005.sst", "seven digits"}, {"MANIFEST-5", "short number"}, {"CURRENT.bak", "MANIFEST-000001\n"},
		{"000005.SST", "upper case"}, {"OPTIONS-000005", "[Version]\n"}, {"x.ldb", "leveldb table"},
	} {
		add(dmgScenario{name: "foreign " + f.name, damage: func(fs map[string][]byte) { fs[f.name] = []byte(f.data) }, repair: dmgRepairExact(img.want)})
	}
	add(dmgScenario{name: "foreign 5.sst holding a copy of a live table", damage: func(fs map[string][]byte) { fs["5.sst"] = slices.Clone(fs[img.tables[0].name]) }, repair: dmgRepairExact(img.want)})
	add(dmgScenario{name: "foreign directory", damage: func(fs map[string][]byte) {
		fs["backup/"] = nil
		fs["backup/000001.sst"] = []byte("x")
		fs["backup/CURRENT"] = []byte("MANIFEST-000001\n")
	}, repair: dmgRepairExact(img.want)})

	// Canonical files the manifest cannot explain: kept, in lost/.
	junkNum := base.FileNum(999)
	if junkNum < img.nextFile+10 {
		junkNum = img.nextFile + 100
	}
	junk := base.MakeFilename(base.FileTypeTable, junkNum)
	far := base.MakeFilename(base.FileTypeTable, 900000)
	unexplained := func(names ...string) func(t *testing.T, db *DB, err error) {
		return func(t *testing.T, db *DB, err error) {
			t.Helper()
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			dmgCheckExact(t, db, img.want, "Open")
			got := db.Metrics().Recovery.Unexplained
			for _, n := range names {
				if !slices.Contains(got, n) {
					t.Errorf("Recovery.Unexplained = %v, want it to list %s", got, n)
				}
			}
		}
	}
	lostJunk := func(t *testing.T, db *DB, rep *RepairReport) {
		t.Helper()
		dmgCheckExact(t, db, img.want, "after Repair")
		if !slices.ContainsFunc(rep.Lost, func(l LostFile) bool { return l.Name == junk }) {
			t.Errorf("Repair does not report %s (not a table) as lost: %+v", junk, rep.Lost)
		}
	}
	add(dmgScenario{name: "junk " + junk + " above the next file number", damage: func(fs map[string][]byte) { fs[junk] = dmgJunkTable },
		open: unexplained(junk), repair: lostJunk})
	add(dmgScenario{name: "valid table copied to " + far, damage: func(fs map[string][]byte) { fs[far] = slices.Clone(fs[img.tables[0].name]) },
		open: unexplained(far), repair: dmgRepairExact(img.want)})
	logJunk := base.MakeFilename(base.FileTypeLog, junkNum+1)
	// A non-empty log the manifest does not record proves a lost edit:
	// refused; Repair skips its junk and keeps everything else.
	add(dmgScenario{name: "non-empty unrecorded log " + logJunk, damage: func(fs map[string][]byte) { fs[logJunk] = []byte("not a log record") },
		open: dmgOpenFails(img.manifest), repair: dmgRepairExact(img.want)})
	add(dmgScenario{name: "junk in lost/ already", damage: func(fs map[string][]byte) {
		fs[junk] = dmgJunkTable
		fs["lost/"] = nil
		fs["lost/"+junk] = []byte("an earlier one")
	}, open: unexplained(junk)})

	// Provably obsolete files of the store: deleted by a successful Open.
	// A free number below the log number is below the next file number too.
	var free base.FileNum
	logNum := img.nextFile
	for _, w := range img.wals {
		_, n, _ := base.ParseFilename(w.name)
		logNum = min(logNum, n)
	}
	for n := logNum - 1; n > 1; n-- {
		used := false
		for name := range img.files {
			if _, num, ok := base.ParseFilename(name); ok && num == n {
				used = true
			}
		}
		if !used {
			free = n
			break
		}
	}
	obsolete := func(names ...string) func(t *testing.T, db *DB, err error) {
		return func(t *testing.T, db *DB, err error) {
			t.Helper()
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			dmgCheckExact(t, db, img.want, "Open")
			if u := db.Metrics().Recovery.Unexplained; len(u) > 0 {
				t.Errorf("Recovery.Unexplained = %v, want none", u)
			}
		}
	}
	if free != 0 {
		oldTable := base.MakeFilename(base.FileTypeTable, free)
		add(dmgScenario{name: "unlisted table " + oldTable + " below the next file number", damage: func(fs map[string][]byte) { fs[oldTable] = slices.Clone(fs[img.tables[0].name]) },
			open: obsolete(oldTable)})
		oldLog := base.MakeFilename(base.FileTypeLog, free)
		add(dmgScenario{name: "old log " + oldLog + " below the log number", damage: func(fs map[string][]byte) { fs[oldLog] = []byte("flushed long ago") },
			open: obsolete(oldLog)})
	}
	emptyLog := base.MakeFilename(base.FileTypeLog, junkNum+2)
	add(dmgScenario{name: "empty unrecorded log " + emptyLog, damage: func(fs map[string][]byte) { fs[emptyLog] = nil }, open: obsolete()})
	tmp := base.MakeFilename(base.FileTypeTemp, junkNum+3)
	add(dmgScenario{name: "temporary file " + tmp, damage: func(fs map[string][]byte) { fs[tmp] = []byte("MANIFEST-000001\n") }, open: obsolete()})
	add(dmgScenario{name: "LOCK removed", damage: func(fs map[string][]byte) { delete(fs, "LOCK") }})
	if testing.Short() {
		// Repair after a third of them.
		for i := range out {
			if i%3 != 0 && out[i].name != "junk "+junk+" above the next file number" {
				out[i].repair = nil
			}
		}
	}
	return out
}

// TestDamageMatrix runs every scenario on every image, on the in-memory
// file system and on the operating system's.
func TestDamageMatrix(t *testing.T) {
	clean, crash, crash2 := damageImages(t)
	for _, img := range []*dmgImage{clean, crash, crash2} {
		t.Run(img.name, func(t *testing.T) {
			t.Parallel()
			var scs []dmgScenario
			scs = append(scs, dmgMetadataScenarios(img)...)
			scs = append(scs, dmgWALScenarios(img)...)
			scs = append(scs, dmgTableScenarios(img)...)
			scs = append(scs, dmgForeignScenarios(img)...)
			osRuns := 0
			for _, sc := range scs {
				for _, kind := range dmgEnvKinds {
					if sc.envs != nil && !slices.Contains(sc.envs, kind) {
						continue
					}
					if kind == "os" {
						osRuns++
						if testing.Short() && osRuns%4 != 1 {
							continue // the OS's file system for a quarter of them
						}
					}
					t.Run(sc.name+"/"+kind, func(t *testing.T) { runDmgScenario(t, img, sc, kind) })
				}
			}
		})
	}
}

// ---------------------------------------------------------------------------
// The issue's table, row by row.

// TestDamageIssueTable: the damage of issue 11's table, each on the
// in-memory file system and the OS's.
func TestDamageIssueTable(t *testing.T) {
	clean, _, _ := damageImages(t)
	img := clean
	m := img.manifest
	log := img.tailWALs()[0].name
	logSize := int64(len(img.files[log]))
	msize := int64(len(img.files[m]))
	for _, kind := range dmgEnvKinds {
		t.Run(kind, func(t *testing.T) {
			t.Run("rm CURRENT", func(t *testing.T) {
				runDmgScenario(t, img, dmgScenario{damage: func(f map[string][]byte) { delete(f, "CURRENT") },
					open: dmgOpenFails("CURRENT"), repair: dmgRepairExact(img.want)}, kind)
			})
			t.Run("rm CURRENT, Repair twice, then the store runs", func(t *testing.T) {
				env := newDmgEnv(t, kind)
				files := dmgClone(img.files)
				delete(files, "CURRENT")
				env.write(t, files)
				opts := damageOptions(env.fs)
				dmgRepair(t, env, opts)
				dmgRepair(t, env, opts) // a second Repair, before any Open
				want := dmgClone(img.want)
				for round := range 3 {
					db, err := dmgOpen(t, env, opts)
					if err != nil {
						t.Fatalf("Open %d after Repair: %v", round, err)
					}
					dmgCheckExact(t, db, want, fmt.Sprintf("Open %d after Repair", round))
					for i := range 500 {
						k, v := dmgKey(i*37%dmgKeys), fmt.Sprintf("r%d-%d", round, i)
						if err := db.Set([]byte(k), []byte(v), nil); err != nil {
							t.Fatal(err)
						}
						want[k] = v
					}
					if err := db.Compact(context.Background(), nil, nil); err != nil {
						t.Fatal(err)
					}
					dmgMustClose(t, db)
				}
			})
			cut := min(2000, msize*4/7)
			t.Run(fmt.Sprintf("MANIFEST truncated to %d of %d bytes", cut, msize), func(t *testing.T) {
				runDmgScenario(t, img, dmgScenario{damage: func(f map[string][]byte) { dmgTruncateTo(f, m, cut) },
					open: dmgOpenFailsOrExact(img, m), repair: dmgRepairExact(img.want)}, kind)
			})
			t.Run("MANIFEST truncated to 30 bytes", func(t *testing.T) {
				runDmgScenario(t, img, dmgScenario{damage: func(f map[string][]byte) { dmgTruncateTo(f, m, 30) },
					open: dmgOpenFails(m), repair: dmgRepairExact(img.want)}, kind)
			})
			t.Run("one byte of the last 250 of the last WAL flipped after a clean Close", func(t *testing.T) {
				// WALStrict must refuse every one; WALSalvage must open,
				// report the damage, and lose only the damaged record.
				n := 40
				if testing.Short() || kind == "os" {
					n = 10
				}
				for i := range n {
					p := logSize - 250 + int64(i)*250/int64(n)
					if in, _ := img.recordOf(log, p); !in {
						continue
					}
					damage := func(f map[string][]byte) { dmgFlip(f, log, p) }
					t.Run(fmt.Sprint(p), func(t *testing.T) {
						runDmgScenario(t, img, dmgScenario{damage: damage, open: dmgOpenFails(log)}, kind)
						runDmgScenario(t, img, dmgScenario{damage: damage, salvage: true, open: dmgOpenRecovers(img.keptWithout(log, p), log, 1, 0)}, kind)
					})
				}
			})
			t.Run("WAL deleted", func(t *testing.T) {
				runDmgScenario(t, img, dmgScenario{damage: func(f map[string][]byte) { delete(f, log) },
					open: dmgOpenFails(m), repair: dmgRepairExact(img.before)}, kind)
			})
			t.Run("a user's 5.sst", func(t *testing.T) {
				env := newDmgEnv(t, kind)
				files := dmgClone(img.files)
				files["5.sst"] = []byte("mine")
				env.write(t, files)
				opts := damageOptions(env.fs)
				for range 2 { // and again, after the store ran
					db, err := dmgOpen(t, env, opts)
					if err != nil {
						t.Fatal(err)
					}
					dmgCheckExact(t, db, img.want, "Open")
					if err := db.Compact(context.Background(), nil, nil); err != nil {
						t.Fatal(err)
					}
					dmgMustClose(t, db)
					if got, _ := vfs.ReadFile(env.fs, env.fs.PathJoin(env.dir, "5.sst")); string(got) != "mine" {
						t.Fatalf("5.sst holds %q after the store ran", got)
					}
				}
			})
			t.Run("2024.log in an otherwise empty directory", func(t *testing.T) {
				env := newDmgEnv(t, kind)
				env.write(t, map[string][]byte{"2024.log": []byte("a user's log\n")})
				_, err := dmgOpen(t, env, damageOptions(env.fs))
				dmgWantCorruption(t, err, "CURRENT")
				if !strings.Contains(err.Error(), "2024.log") {
					t.Errorf("the error does not name the file it found: %v", err)
				}
			})
			t.Run("read-only mount", func(t *testing.T) {
				env := newDmgEnv(t, kind)
				env.write(t, img.files)
				ro := env
				ro.fs = vfs.NewReadOnly(env.fs)
				// A read-write Open fails there, and changes nothing.
				if _, err := dmgOpen(t, ro, damageOptions(ro.fs)); err == nil {
					t.Fatal("read-write Open succeeded on a read-only mount")
				}
				opts := damageOptions(ro.fs)
				opts.ReadOnly = true
				before, _ := dmgMustReadTree(t, env.fs, env.dir)
				db, err := dmgOpen(t, ro, opts)
				if err != nil {
					t.Fatalf("read-only Open on a read-only mount: %v", err)
				}
				dmgCheckExact(t, db, img.want, "read-only Open")
				dmgCheckReadOnlyDB(t, db)
				dmgMustClose(t, db)
				after, _ := dmgMustReadTree(t, env.fs, env.dir)
				if d := dmgDiffTrees(before, after); len(d) > 0 {
					t.Errorf("the read-only DB changed the directory: %v", d)
				}
			})
		})
	}
}

// dmgCheckReadOnlyDB: every write, flush and compaction of a read-only DB
// fails with ErrReadOnly; reads work.
func dmgCheckReadOnlyDB(t *testing.T, db *DB) {
	t.Helper()
	b := db.NewBatch()
	b.Set([]byte("x"), []byte("y"))
	for name, err := range map[string]error{
		"Set":         db.Set([]byte("x"), []byte("y"), Sync),
		"Set NoSync":  db.Set([]byte("x"), []byte("y"), NoSync),
		"Delete":      db.Delete([]byte(dmgKey(1)), Sync),
		"DeleteRange": db.DeleteRange([]byte("a"), []byte("z"), Sync),
		"Apply":       db.Apply(b, Sync),
		"Flush":       db.Flush(),
		"Compact":     db.Compact(context.Background(), nil, nil),
	} {
		if !errors.Is(err, ErrReadOnly) {
			t.Errorf("%s on a read-only DB: %v, want ErrReadOnly", name, err)
		}
	}
	if err := b.Commit(Sync); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Batch.Commit on a read-only DB: %v, want ErrReadOnly", err)
	}
	if _, err := db.Get([]byte("x")); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get of a refused write: %v, want ErrNotFound", err)
	}
	if err := db.CheckIntegrity(); err != nil {
		t.Errorf("CheckIntegrity on a read-only DB: %v", err)
	}
}

// ---------------------------------------------------------------------------
// Read-only opens.

func TestDamageReadOnly(t *testing.T) {
	clean, crash, crash2 := damageImages(t)
	roOpts := func(fs vfs.FS) Options {
		o := damageOptions(fs)
		o.ReadOnly = true
		return o
	}
	for _, kind := range dmgEnvKinds {
		t.Run(kind, func(t *testing.T) {
			t.Run("two readers, no writer", func(t *testing.T) {
				env := newDmgEnv(t, kind)
				env.write(t, crash.files)
				r1, err := dmgOpen(t, env, roOpts(env.fs))
				if err != nil {
					t.Fatal(err)
				}
				defer func() { dmgMustClose(t, r1) }()
				r2, err := dmgOpen(t, env, roOpts(env.fs))
				if err != nil {
					t.Fatalf("second read-only Open: %v", err)
				}
				dmgCheckExact(t, r1, crash.want, "reader 1")
				dmgCheckExact(t, r2, crash.want, "reader 2")
				if _, err := Repair(env.dir, dmgPtr(damageOptions(env.fs))); !errors.Is(err, ErrLocked) {
					t.Errorf("Repair beside readers: %v, want ErrLocked", err)
				}
				if _, err := dmgOpen(t, env, damageOptions(env.fs)); !errors.Is(err, ErrLocked) {
					t.Fatalf("writer Open beside two readers: %v, want ErrLocked", err)
				}
				dmgMustClose(t, r2)
				if _, err := dmgOpen(t, env, damageOptions(env.fs)); !errors.Is(err, ErrLocked) {
					t.Fatalf("writer Open beside a reader: %v, want ErrLocked", err)
				}
				dmgMustClose(t, r1)
				r1 = nil
				w, err := dmgOpen(t, env, damageOptions(env.fs))
				if err != nil {
					t.Fatalf("writer Open after the readers closed: %v", err)
				}
				defer dmgMustClose(t, w)
				dmgCheckExact(t, w, crash.want, "writer")
				// Let the writer's compactions and deletions finish, so that
				// the checks of the failing Opens below see only their own
				// changes.
				if err := w.WaitForCompactions(context.Background()); err != nil {
					t.Fatal(err)
				}
				dmgWaitQuiet(t, env)
				if _, err := dmgOpen(t, env, roOpts(env.fs)); !errors.Is(err, ErrLocked) {
					t.Fatalf("read-only Open beside a writer: %v, want ErrLocked", err)
				}
				if _, err := dmgOpen(t, env, damageOptions(env.fs)); !errors.Is(err, ErrLocked) {
					t.Fatalf("second writer: %v, want ErrLocked", err)
				}
				before, _ := dmgMustReadTree(t, env.fs, env.dir)
				if _, err := Repair(env.dir, dmgPtr(damageOptions(env.fs))); !errors.Is(err, ErrLocked) {
					t.Errorf("Repair beside a writer: %v, want ErrLocked", err)
				}
				after, _ := dmgMustReadTree(t, env.fs, env.dir)
				if d := dmgDiffTrees(before, after); len(d) > 0 {
					t.Errorf("a refused Repair changed the directory: %v", d)
				}
			})
			for _, tc := range []struct {
				name   string
				img    *dmgImage
				damage func(f map[string][]byte)
				opts   func(o *Options)
				check  func(t *testing.T, db *DB, err error)
			}{
				{name: "unflushed log", img: crash, check: dmgOpenRecovers(crash.want, "", 0, 0)},
				{name: "two unflushed logs", img: crash2, check: dmgOpenRecovers(crash2.want, "", 0, 0)},
				{name: "clean", img: clean, check: dmgOpenRecovers(clean.want, "", 0, 0)},
				{name: "torn tail", img: crash, damage: func(f map[string][]byte) {
					dmgTruncateTo(f, crash.tailWALs()[0].name, crash.tail[len(crash.tail)-1].end-3)
				}, check: dmgOpenRecovers(crash.keptBefore(crash.tailWALs()[0].name, crash.tail[len(crash.tail)-1].end-3), crash.tailWALs()[0].name, 0, 1)},
				{name: "no LOCK", img: crash, damage: func(f map[string][]byte) { delete(f, "LOCK") }, check: dmgOpenRecovers(crash.want, "", 0, 0)},
				{name: "CURRENT removed", img: crash, damage: func(f map[string][]byte) { delete(f, "CURRENT") }, check: dmgOpenFails("CURRENT")},
				{name: "table removed", img: clean, damage: func(f map[string][]byte) { delete(f, clean.tables[3].name) }, check: dmgOpenFails(clean.manifest)},
				{name: "sealed log flipped", img: clean, damage: func(f map[string][]byte) { dmgFlip(f, clean.tailWALs()[0].name, 100) }, check: dmgOpenFails(clean.tailWALs()[0].name)},
				{name: "sealed log flipped, WALSalvage", img: clean, damage: func(f map[string][]byte) { dmgFlip(f, clean.tailWALs()[0].name, 100) },
					opts: func(o *Options) { o.WALRecovery = WALSalvage }, check: dmgOpenRecovers(clean.keptWithout(clean.tailWALs()[0].name, 100), clean.tailWALs()[0].name, 1, 0)},
				{name: "unexplained files", img: clean, damage: func(f map[string][]byte) {
					f["900000.sst"] = dmgJunkTable
					f["5.sst"] = []byte("mine")
					f[base.MakeFilename(base.FileTypeTemp, 7)] = []byte("tmp")
				}, check: dmgOpenRecovers(clean.want, "", 0, 0)},
				{name: "unrecorded non-empty log", img: clean, damage: func(f map[string][]byte) {
					f["900001.log"] = []byte("junk")
				}, check: dmgOpenFails(clean.manifest)},
			} {
				t.Run("read-only mount, "+tc.name, func(t *testing.T) {
					env := newDmgEnv(t, kind)
					files := dmgClone(tc.img.files)
					if tc.damage != nil {
						tc.damage(files)
					}
					env.write(t, files)
					ro := env
					ro.fs = vfs.NewReadOnly(env.fs)
					opts := roOpts(ro.fs)
					if tc.opts != nil {
						tc.opts(&opts)
					}
					db, err := dmgOpen(t, ro, opts)
					defer dmgMustClose(t, db)
					tc.check(t, db, err)
					if db != nil {
						dmgCheckReadOnlyDB(t, db)
						// A second reader beside it.
						db2, err := dmgOpen(t, ro, opts)
						if err != nil {
							t.Fatalf("second read-only Open: %v", err)
						}
						dmgMustClose(t, db2)
					}
					after, _ := dmgMustReadTree(t, env.fs, env.dir)
					if d := dmgDiffTrees(files, after); len(d) > 0 {
						t.Errorf("read-only use changed the directory: %v", d)
					}
				})
			}
			t.Run("missing directory", func(t *testing.T) {
				env := newDmgEnv(t, kind)
				if _, err := Open(env.dir, dmgPtr(roOpts(env.fs))); err == nil {
					t.Fatal("read-only Open of a missing directory succeeded")
				}
				if _, err := env.fs.Stat(env.dir); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("read-only Open created %s (%v)", env.dir, err)
				}
			})
			t.Run("empty directory", func(t *testing.T) {
				env := newDmgEnv(t, kind)
				env.write(t, nil)
				if _, err := dmgOpen(t, env, roOpts(env.fs)); err == nil {
					t.Fatal("read-only Open of an empty directory succeeded")
				}
			})
		})
	}
}

func dmgPtr[T any](v T) *T { return &v }

// dmgWaitQuiet waits until the directory stops changing (a writer's cleaner
// deleting what its last compaction made obsolete).
func dmgWaitQuiet(t *testing.T, env dmgEnv) {
	t.Helper()
	last, _ := dmgMustReadTree(t, env.fs, env.dir)
	for same := 0; same < 3; {
		time.Sleep(5 * time.Millisecond)
		cur, _ := dmgMustReadTree(t, env.fs, env.dir)
		if len(dmgDiffTrees(last, cur)) == 0 {
			same++
		} else {
			same = 0
		}
		last = cur
	}
}

// ---------------------------------------------------------------------------
// New stores: Open creates one only where there is none, and a failed
// creation leaves the directory as it was.

// dmgEmptyStoreLeftovers is what creating a store, and closing it without a
// write, leaves without its CURRENT: an interrupted creation, for all Open
// can tell. With a write, it is a store that lost its CURRENT.
func dmgEmptyStoreLeftovers(t *testing.T, write bool) map[string][]byte {
	t.Helper()
	mem := vfs.NewMem()
	db, err := Open("/db", &Options{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	if write {
		if err := db.Set([]byte("k"), []byte("v"), Sync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := dmgMustReadTree(t, mem, "/db")
	delete(files, "CURRENT")
	return files
}

func TestDamageNewStore(t *testing.T) {
	for _, kind := range dmgEnvKinds {
		t.Run(kind, func(t *testing.T) {
			// Traces of a store without CURRENT: refused, nothing touched.
			for _, tc := range []struct {
				name  string
				files map[string][]byte
			}{
				{"2024.log", map[string][]byte{"2024.log": []byte("a user's log")}},
				{"5.sst", map[string][]byte{"5.sst": []byte("a user's table")}},
				{"000005.sst", map[string][]byte{"000005.sst": dmgJunkTable}},
				{"non-empty 000005.log", map[string][]byte{"000005.log": []byte("x")}},
				{"OPTIONS-000005", map[string][]byte{"OPTIONS-000005": []byte("[Version]")}},
				{"junk MANIFEST-000001", map[string][]byte{"MANIFEST-000001": []byte("junk")}},
				{"x.ldb and notes", map[string][]byte{"x.ldb": []byte("leveldb"), "notes.txt": []byte("n")}},
				{"LOCK and a table", map[string][]byte{"LOCK": nil, "000007.sst": dmgJunkTable}},
				{"a store that lost CURRENT", dmgEmptyStoreLeftovers(t, true)},
			} {
				t.Run("refused: "+tc.name, func(t *testing.T) {
					env := newDmgEnv(t, kind)
					env.write(t, tc.files)
					_, err := dmgOpen(t, env, damageOptions(env.fs))
					dmgWantCorruption(t, err, "CURRENT")
					ro := damageOptions(env.fs)
					ro.ReadOnly = true
					if _, err := dmgOpen(t, env, ro); err == nil {
						t.Error("read-only Open succeeded")
					}
				})
			}
			// Nothing of a store, or only an interrupted creation's
			// leftovers: a new store, foreign files left alone.
			for _, tc := range []struct {
				name  string
				files map[string][]byte // nil: no directory
			}{
				{"missing directory", nil},
				{"empty directory", map[string][]byte{}},
				{"notes.txt", map[string][]byte{"notes.txt": []byte("mine")}},
				{"LOCK", map[string][]byte{"LOCK": nil}},
				{"empty log", map[string][]byte{"LOCK": nil, "000003.log": nil}},
				{"temporary file", map[string][]byte{"000004.dbtmp": []byte("MANIFEST-000003\n")}},
				{"an interrupted creation", dmgEmptyStoreLeftovers(t, false)},
			} {
				t.Run("new store: "+tc.name, func(t *testing.T) {
					env := newDmgEnv(t, kind)
					if tc.files != nil {
						env.write(t, tc.files)
					}
					db, err := dmgOpen(t, env, damageOptions(env.fs))
					if err != nil {
						t.Fatalf("Open: %v", err)
					}
					if err := db.Set([]byte("a"), []byte("1"), Sync); err != nil {
						t.Fatal(err)
					}
					dmgMustClose(t, db)
					db, err = dmgOpen(t, env, damageOptions(env.fs))
					if err != nil {
						t.Fatalf("reopen: %v", err)
					}
					dmgCheckExact(t, db, map[string]string{"a": "1"}, "reopened")
					dmgMustClose(t, db)
				})
			}
			// A failed creation removes what it created (the log, the
			// manifest, CURRENT), except LOCK and so the directories
			// holding it.
			for _, tc := range []struct {
				name  string
				files map[string][]byte // nil: no directory
			}{
				{"missing directories", nil},
				{"empty directory", map[string][]byte{}},
				{"notes.txt", map[string][]byte{"notes.txt": []byte("mine")}},
			} {
				t.Run("failed creation: "+tc.name, func(t *testing.T) {
					for n := int64(1); ; n++ {
						env := newDmgEnv(t, kind)
						root := env.dir
						if tc.files == nil {
							env.dir = env.fs.PathJoin(env.dir, "a", "b", "db") // three directories to create
						} else {
							env.write(t, tc.files)
						}
						before, _ := dmgMustReadTree(t, env.fs, root)
						cd := vfs.NewCountdown(vfs.OpCreate|vfs.OpWrite|vfs.OpSync|vfs.OpRename|vfs.OpMkdir|vfs.OpLock, n, false)
						fenv := env
						ffs := vfs.NewFault(env.fs, cd)
						fenv.fs = ffs
						db, err := Open(fenv.dir, dmgPtr(damageOptions(fenv.fs)))
						if err == nil {
							ffs.SetInjector(nil) // a later fault would hit Close
							dmgMustClose(t, db)
							if n == 1 {
								t.Fatal("no fault was injected")
							}
							t.Logf("Open succeeded after %d injected faults, one at a time", n-1)
							return
						}
						if !errors.Is(err, vfs.ErrInjected) {
							t.Errorf("fault %d: Open: %v, want the injected error", n, err)
						}
						after, _ := dmgMustReadTree(t, env.fs, root)
						// LOCK stays once created, and with it the
						// directories that hold it.
						d := slices.DeleteFunc(dmgIgnoreLock(dmgDiffTrees(before, after)), func(l string) bool {
							return strings.HasPrefix(l, "created ") && strings.HasSuffix(l, "/ (0 bytes)") && strings.Contains(root+"/a/b/db/", strings.TrimSuffix(strings.TrimPrefix(l, "created "), " (0 bytes)"))
						})
						if len(d) > 0 {
							t.Errorf("fault %d (%v): the failed creation left %v", n, err, d)
						}
						if n > 100 {
							t.Fatal("Open still failing after 100 faults")
						}
					}
				})
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Faults during the recovery of an existing store.

// TestDamageOpenFaults: an I/O error at any point of Open (replaying the
// logs into a table, starting the new log, writing the new manifest and
// CURRENT) leaves every file as it was and creates nothing; the store then
// opens with every acknowledged write.
func TestDamageOpenFaults(t *testing.T) {
	clean, crash, crash2 := damageImages(t)
	for _, img := range []*dmgImage{crash, crash2, clean} {
		for _, kind := range dmgEnvKinds {
			t.Run(img.name+"/"+kind, func(t *testing.T) {
				for n := int64(1); ; n++ {
					env := newDmgEnv(t, kind)
					env.write(t, img.files)
					cd := vfs.NewCountdown(vfs.OpCreate|vfs.OpWrite|vfs.OpSync|vfs.OpRename|vfs.OpMkdir|vfs.OpLock, n, false)
					fenv := env
					fenv.fs = vfs.NewFault(env.fs, cd)
					ffs := fenv.fs.(*vfs.FaultFS)
					db, err := Open(fenv.dir, dmgPtr(damageOptions(fenv.fs)))
					if err == nil {
						// The store's background work may have met the fault
						// after Open returned; stop injecting, and let it fail.
						ffs.SetInjector(nil)
						db.Close()
						t.Logf("Open succeeded with fault %d (%d operations counted)", n, cd.Count())
						return
					}
					after, _ := dmgMustReadTree(t, env.fs, env.dir)
					if d := dmgDiffTrees(img.files, after); len(d) > 0 {
						// The one documented exception: CURRENT was replaced
						// but the directory sync making it durable failed, so
						// the new manifest may be live; Open keeps what it
						// committed (and nothing that was there changes).
						committed := !errors.Is(err, manifest.ErrCurrentUnchanged) && slices.ContainsFunc(d, func(s string) bool { return strings.HasPrefix(s, "changed CURRENT ") }) &&
							!slices.ContainsFunc(d, func(s string) bool {
								return !strings.HasPrefix(s, "created ") && !strings.HasPrefix(s, "changed CURRENT ")
							})
						if committed {
							t.Logf("fault %d (%v): CURRENT replaced before the failure; Open kept the state it committed: %v", n, err, d)
						} else {
							t.Errorf("fault %d (%v): the failed Open changed the directory: %v", n, err, d)
						}
					}
					db, err = Open(env.dir, dmgPtr(damageOptions(env.fs)))
					if err != nil {
						t.Errorf("fault %d: Open after the failed one: %v", n, err)
						continue
					}
					dmgCheckExact(t, db, img.want, fmt.Sprintf("fault %d: Open after the failed one", n))
					dmgMustClose(t, db)
					if n > 200 {
						t.Fatal("Open still failing after 200 faults")
					}
				}
			})
		}
	}
}

// ---------------------------------------------------------------------------
// A manifest that lost the record of a log holding acknowledged writes.

// TestDamageLostLogRecord: the crash-2logs image with a manifest that lost
// the record of the second log (and nothing else), whose records are
// acknowledged synced writes. Open refuses (ErrCorruption naming the
// manifest) and changes nothing; Repair replays the log, and every
// acknowledged write reads back; the store then takes writes and reopens.
func TestDamageLostLogRecord(t *testing.T) {
	_, _, img := damageImages(t)
	m := img.manifest
	second := img.tailWALs()[1].name
	_, secondNum, _ := base.ParseFilename(second)
	// The manifest as it would be had it lost the record of the second log
	// (and nothing else): its edits re-encoded without that log.
	var rewritten bytes.Buffer
	w := record.NewWriter(&rewritten)
	r := record.NewReader(bytes.NewReader(img.files[m]), m)
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var e manifest.VersionEdit
		if err := e.Decode(rec); err != nil {
			t.Fatal(err)
		}
		e.WALs = slices.DeleteFunc(e.WALs, func(n base.FileNum) bool { return n == secondNum })
		e.SealedWALs = slices.DeleteFunc(e.SealedWALs, func(s manifest.SealedWAL) bool { return s.Num == secondNum })
		if _, err := w.WriteRecord(e.Encode(nil)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, kind := range dmgEnvKinds {
		t.Run(kind, func(t *testing.T) {
			env := newDmgEnv(t, kind)
			files := dmgClone(img.files)
			files[m] = rewritten.Bytes()
			env.write(t, files)
			opts := damageOptions(env.fs)
			db, err := dmgOpen(t, env, opts) // checks that a failed Open changed nothing
			if err == nil {
				dmgMustClose(t, db)
				t.Fatalf("Open accepted a manifest that does not record %s, which holds acknowledged writes", second)
			}
			dmgWantCorruption(t, err, m)
			if !strings.Contains(err.Error(), second) {
				t.Errorf("the error does not name %s: %v", second, err)
			}
			rep := dmgRepair(t, env, opts)
			if !slices.Contains(rep.Logs, second) {
				t.Errorf("Repair replayed %v, not %s", rep.Logs, second)
			}
			db, err = dmgOpen(t, env, opts)
			if err != nil {
				t.Fatalf("Open after Repair: %v", err)
			}
			dmgCheckExact(t, db, img.want, "after Repair")
			want := maps.Clone(img.want)
			for i := range 50 {
				k, v := fmt.Sprintf("after-repair-%03d", i), fmt.Sprintf("v%d", i)
				if err := db.Set([]byte(k), []byte(v), Sync); err != nil {
					t.Fatal(err)
				}
				want[k] = v
			}
			dmgMustClose(t, db)
			db, err = dmgOpen(t, env, opts)
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			defer dmgMustClose(t, db)
			dmgCheckExact(t, db, want, "after writes and a reopen")
		})
	}
}
