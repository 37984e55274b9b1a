// Package compactiontest holds what the tests of compactors share: an
// in-memory compaction.Env, table builders, random jobs with snapshots,
// tombstones and many versions, and the visibility oracle. Tests of
// compaction.CPU and of kv/gpucompact use it, so that every compactor is
// checked against the same jobs and the same oracle.
package compactiontest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/warpkit/warpkit/kv/compaction"
	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/internal/rangedel"
	"github.com/warpkit/warpkit/kv/manifest"
	"github.com/warpkit/warpkit/kv/sstable"
	"github.com/warpkit/warpkit/kv/vfs"
)

// Entry is a point entry of a test table.
type Entry struct {
	K base.InternalKey
	V string
}

// Env is a compaction.DirEnv over an in-memory file system, failing
// CreateTable on request.
type Env struct {
	*compaction.DirEnv
	mem *vfs.MemFS

	mu sync.Mutex
	// failCreate, when positive, makes the failCreate-th CreateTable from now fail.
	failCreate int
}

// ErrInjected is the error of a CreateTable made to fail (FailCreate).
var ErrInjected = errors.New("injected CreateTable failure")

// FailCreate makes the n-th CreateTable from now fail with ErrInjected (0:
// none).
func (e *Env) FailCreate(n int) {
	e.mu.Lock()
	e.failCreate = n
	e.mu.Unlock()
}

// CreateFailurePending reports whether a FailCreate has not struck yet.
func (e *Env) CreateFailurePending() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.failCreate > 0
}

// FS returns the file system the tables live in.
func (e *Env) FS() *vfs.MemFS { return e.mem }

// NewEnv returns an empty Env.
func NewEnv() *Env {
	mem := vfs.NewMem()
	e := &Env{DirEnv: compaction.NewDirEnv(mem, "/"), mem: mem}
	e.DirEnv.CreateHook = func() error {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.failCreate > 0 {
			if e.failCreate--; e.failCreate == 0 {
				return ErrInjected
			}
		}
		return nil
	}
	return e
}

// Env returns the compaction.Env of the tables written with Table (512-byte
// blocks, bloom filters).
func (e *Env) Env() compaction.Env {
	return e.DirEnv.Env(sstable.WriterOptions{BloomBitsPerKey: 10, BlockSize: 512})
}

// table writes one input table.
func (e *Env) Table(t testing.TB, es []Entry, spans []rangedel.Span) *manifest.FileMetadata {
	return e.TableWith(t, es, spans, sstable.WriterOptions{})
}

// tableWith writes one input table with the given writer options.
func (e *Env) TableWith(t testing.TB, es []Entry, spans []rangedel.Span, opts sstable.WriterOptions) *manifest.FileMetadata {
	sort.Slice(es, func(i, j int) bool { return base.CompareInternal(es[i].K, es[j].K) < 0 })
	num, f, _ := e.Env().CreateTable()
	w := sstable.NewWriter(f, opts)
	for _, x := range es {
		if err := w.Add(x.K, []byte(x.V)); err != nil {
			t.Fatal(err)
		}
	}
	for _, sp := range spans {
		w.AddRangeDel(sp)
	}
	m, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	return &manifest.FileMetadata{FileNum: num, Size: m.Size, Smallest: m.Smallest, Largest: m.Largest,
		SmallestSeq: m.SmallestSeq, LargestSeq: m.LargestSeq, HasRangeDels: m.HasRangeDels}
}

// readAll returns every point entry and tombstone of some tables.
func (e *Env) ReadAll(t testing.TB, files []*manifest.FileMetadata) ([]Entry, []rangedel.Tombstone) {
	var es []Entry
	var ts []rangedel.Tombstone
	for _, f := range files {
		r, rel, err := e.Env().OpenTable(f)
		if err != nil {
			t.Fatal(err)
		}
		it := r.NewIter()
		for ok := it.First(); ok; ok = it.Next() {
			es = append(es, Entry{it.Key().Clone(), string(it.Value())})
		}
		if it.Error() != nil {
			t.Fatal(it.Error())
		}
		ts = append(ts, rangedel.Tombstones(r.RangeDels().Spans())...)
		rel()
	}
	return es, ts
}

// visible is the oracle: what a read of key at snap returns.
func Visible(es []Entry, ts []rangedel.Tombstone, key string, snap base.SeqNum) (string, bool) {
	var best *Entry
	for i := range es {
		if string(es[i].K.UserKey) == key && es[i].K.SeqNum() <= snap && (best == nil || es[i].K.SeqNum() > best.K.SeqNum()) {
			best = &es[i]
		}
	}
	if best == nil || best.K.Kind() == base.KindDelete {
		return "", false
	}
	for _, t := range ts {
		if string(t.Start) <= key && key < string(t.End) && t.Seq <= snap && t.Seq > best.K.SeqNum() {
			return "", false
		}
	}
	return best.V, true
}

// randomJob builds three overlapping L0 tables over an older two-table L1,
// with deletions, range tombstones, many versions per key and random
// snapshots, and the job that compacts them into L1; it returns the job and
// every input entry and tombstone (the oracle's view).
func RandomJob(t testing.TB, rng *rand.Rand, e *Env) (*compaction.Job, []Entry, []rangedel.Tombstone) {
	seq := base.SeqNum(1)
	key := func() string { return fmt.Sprintf("k%03d", rng.IntN(60)) }
	// Three overlapping "L0" tables and a disjoint "L1" run.
	var l0 []*manifest.FileMetadata
	var allE []Entry
	var allT []rangedel.Tombstone
	for range 3 {
		var es []Entry
		var ts []rangedel.Tombstone
		for range 40 + rng.IntN(40) {
			kind := base.KindSet
			if rng.IntN(5) == 0 {
				kind = base.KindDelete
			}
			es = append(es, Entry{base.MakeInternalKey([]byte(key()), seq, kind), fmt.Sprintf("v%d", seq)})
			seq++
		}
		if rng.IntN(2) == 0 {
			a, b := key(), key()
			if a > b {
				a, b = b, a
			}
			ts = append(ts, rangedel.Tombstone{Start: []byte(a), End: []byte(b), Seq: seq})
			seq++
		}
		// Make the table's sequence range disjoint and increasing.
		l0 = append([]*manifest.FileMetadata{e.Table(t, es, rangedel.Fragment(ts))}, l0...)
		allE = append(allE, es...)
		allT = append(allT, ts...)
	}
	// An older L1 level below, two disjoint tables.
	var l1 []*manifest.FileMetadata
	for _, rg := range [][2]int{{0, 30}, {30, 60}} {
		var es []Entry
		for k := rg[0]; k < rg[1]; k += 1 + rng.IntN(3) {
			es = append(es, Entry{base.MakeInternalKey([]byte(fmt.Sprintf("k%03d", k)), 0, base.KindSet), "old"})
		}
		l1 = append(l1, e.Table(t, es, nil))
		allE = append(allE, es...)
	}
	var snaps []base.SeqNum
	for range rng.IntN(4) {
		snaps = append(snaps, base.SeqNum(1+rng.IntN(int(seq))))
	}
	sort.Slice(snaps, func(i, j int) bool { return snaps[i] < snaps[j] })
	snaps = CompactSeqs(snaps)
	job := &compaction.Job{
		Inputs:         []compaction.Input{{Level: 0, Files: l0}, {Level: 1, Files: l1}},
		OutputLevel:    1,
		Snapshots:      snaps,
		TargetFileSize: uint64(300 + rng.IntN(2000)),
		Env:            e.Env(),
	}
	if rng.IntN(2) == 0 {
		// Something below: tombstones must survive.
		job.Lower = [][]*manifest.FileMetadata{{{Smallest: base.MakeInternalKey([]byte("k000"), 0, base.KindSet), Largest: base.MakeInternalKey([]byte("k999"), 0, base.KindSet)}}}
	}
	return job, allE, allT
}

func CompactSeqs(s []base.SeqNum) []base.SeqNum {
	var out []base.SeqNum
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}

func Covered(ts []rangedel.Tombstone, key string, snap base.SeqNum) base.SeqNum {
	var best base.SeqNum
	for _, t := range ts {
		if string(t.Start) <= key && key < string(t.End) && t.Seq <= snap && t.Seq > best {
			best = t.Seq
		}
	}
	return best
}

// MatrixJob builds a job over the gpucompact spec's test matrix: two to
// five overlapping L0 tables over a one-to-three-table L1 run; user keys of
// 0 to 100 bytes — the empty key, 0x00 and 0xff bytes, keys sharing a
// prefix longer than the job's common prefix plus 8 — one key with
// thousands of versions; values of 0 bytes to several blocks; point
// tombstones and range tombstones (nested, and sometimes one over nearly
// the whole key space); up to 64 snapshots; sometimes levels below (no elision); targets
// from tiny to large. opts are the input tables' writer options.
func MatrixJob(t testing.TB, rng *rand.Rand, e *Env, opts sstable.WriterOptions) *compaction.Job {
	shared := string(bytes.Repeat([]byte{'p'}, 20+rng.IntN(20)))
	pool := []string{"", "\x00", "\x00\x00\x01", "\xff", "\xff\xff\xff", shared, shared + "\x00"}
	for range 150 {
		switch rng.IntN(3) {
		case 0:
			k := make([]byte, rng.IntN(101))
			for i := range k {
				k[i] = byte(rng.IntN(256))
			}
			pool = append(pool, string(k))
		default:
			pool = append(pool, fmt.Sprintf("%s%08d%s", shared, rng.IntN(40), bytes.Repeat([]byte{'z'}, rng.IntN(30))))
		}
	}
	hot := pool[rng.IntN(len(pool))]
	value := func() string {
		n := []int{0, 1, 50, 600, 5000}[rng.IntN(5)]
		v := make([]byte, n)
		for i := range v[:n/2] {
			v[i] = byte(rng.Uint32())
		}
		return string(v)
	}
	seq := base.SeqNum(100)
	var l0 []*manifest.FileMetadata
	for range 2 + rng.IntN(4) {
		var es []Entry
		used := map[string]bool{}
		for range 50 + rng.IntN(350) {
			k := pool[rng.IntN(len(pool))]
			kind := base.KindSet
			if rng.IntN(5) == 0 {
				kind = base.KindDelete
			}
			seq++
			es = append(es, Entry{K: base.MakeInternalKey([]byte(k), seq, kind), V: value()})
			used[k] = true
		}
		for range rng.IntN(700) {
			seq++
			es = append(es, Entry{K: base.MakeInternalKey([]byte(hot), seq, base.KindSet), V: value()})
		}
		var ts []rangedel.Tombstone
		for range rng.IntN(4) {
			a, b := pool[rng.IntN(len(pool))], pool[rng.IntN(len(pool))]
			if a > b {
				a, b = b, a
			}
			if a == b {
				continue
			}
			seq++
			ts = append(ts, rangedel.Tombstone{Start: []byte(a), End: []byte(b), Seq: seq})
		}
		if rng.IntN(6) == 0 {
			seq++
			ts = append(ts, rangedel.Tombstone{Start: []byte(""), End: []byte("\xff\xff\xff\xff"), Seq: seq})
		}
		l0 = append([]*manifest.FileMetadata{e.TableWith(t, es, rangedel.Fragment(ts), opts)}, l0...)
	}
	// L1: older, disjoint tables over the sorted pool.
	keys := slices.Clone(pool)
	sort.Strings(keys)
	keys = slices.Compact(keys)
	var l1 []*manifest.FileMetadata
	parts := 1 + rng.IntN(3)
	for p := range parts {
		var es []Entry
		for _, k := range keys[len(keys)*p/parts : len(keys)*(p+1)/parts] {
			if rng.IntN(3) > 0 {
				es = append(es, Entry{K: base.MakeInternalKey([]byte(k), base.SeqNum(1+rng.IntN(50)), base.KindSet), V: value()})
			}
		}
		if len(es) > 0 {
			l1 = append(l1, e.TableWith(t, es, nil, opts))
		}
	}
	var snaps []base.SeqNum
	for range rng.IntN(65) {
		snaps = append(snaps, base.SeqNum(1+rng.IntN(int(seq))))
	}
	slices.Sort(snaps)
	job := &compaction.Job{
		Inputs:         []compaction.Input{{Level: 0, Files: l0}},
		OutputLevel:    1,
		Snapshots:      slices.Compact(snaps),
		TargetFileSize: []uint64{300, 4 << 10, 64 << 10, 4 << 20}[rng.IntN(4)],
		Env:            e.Env(),
	}
	if len(l1) > 0 {
		job.Inputs = append(job.Inputs, compaction.Input{Level: 1, Files: l1})
	}
	if rng.IntN(2) == 0 {
		job.Lower = [][]*manifest.FileMetadata{{{Smallest: base.MakeInternalKey(nil, 0, base.KindSet), Largest: base.MakeInternalKey([]byte("\xff\xff\xff\xff"), 0, base.KindSet)}}}
	}
	return job
}

// ReadTable returns the bytes of the first table file (.sst) in dir's
// listing, for a test whose store has written one there (a flush's); it
// fails the test when there is none. The flush sealers' tests compare
// such tables from stores sealing on the host and through a
// compaction.BlockSealer.
func ReadTable(t testing.TB, fs vfs.FS, dir string) []byte {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasSuffix(n, ".sst") {
			b, err := vfs.ReadFile(fs, fs.PathJoin(dir, n))
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
	t.Fatalf("no table in %s", dir)
	return nil
}
