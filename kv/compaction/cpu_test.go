package compaction

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"

	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/internal/rangedel"
	"github.com/warpkit/warpkit/kv/manifest"
	"github.com/warpkit/warpkit/kv/sstable"
	"github.com/warpkit/warpkit/kv/vfs"
)

type entry struct {
	k base.InternalKey
	v string
}

type testEnv struct {
	mu      sync.Mutex // the parts of a job call OpenTable and CreateTable concurrently
	fs      *vfs.MemFS
	next    base.FileNum
	readers map[base.FileNum]*sstable.Reader
	opened  int
	open    int // readers currently held
	// failCreate, when positive, makes the failCreate-th CreateTable from now fail.
	failCreate int
}

var errInjected = errors.New("injected CreateTable failure")

func newTestEnv() *testEnv {
	return &testEnv{fs: vfs.NewMem(), next: 1, readers: map[base.FileNum]*sstable.Reader{}}
}

func (e *testEnv) env() Env {
	return Env{
		OpenTable: func(f *manifest.FileMetadata) (*sstable.Reader, func(), error) {
			e.mu.Lock()
			defer e.mu.Unlock()
			r, ok := e.readers[f.FileNum]
			if !ok {
				file, err := e.fs.Open(fmt.Sprintf("/%s.sst", f.FileNum))
				if err != nil {
					return nil, nil, err
				}
				r, err = sstable.NewReader(file, sstable.ReaderOptions{FileName: f.FileNum.String()})
				if err != nil {
					return nil, nil, err
				}
				e.readers[f.FileNum] = r
			}
			e.opened++
			e.open++
			return r, func() { e.mu.Lock(); e.open--; e.mu.Unlock() }, nil
		},
		CreateTable: func() (base.FileNum, vfs.File, error) {
			e.mu.Lock()
			defer e.mu.Unlock()
			if e.failCreate > 0 {
				if e.failCreate--; e.failCreate == 0 {
					return 0, nil, errInjected
				}
			}
			n := e.next
			e.next++
			f, err := e.fs.Create(fmt.Sprintf("/%s.sst", n))
			return n, f, err
		},
		WriterOptions: sstable.WriterOptions{BloomBitsPerKey: 10, BlockSize: 512},
	}
}

// table writes one input table.
func (e *testEnv) table(t *testing.T, es []entry, spans []rangedel.Span) *manifest.FileMetadata {
	return e.tableWith(t, es, spans, sstable.WriterOptions{})
}

// tableWith writes one input table with the given writer options.
func (e *testEnv) tableWith(t *testing.T, es []entry, spans []rangedel.Span, opts sstable.WriterOptions) *manifest.FileMetadata {
	sort.Slice(es, func(i, j int) bool { return base.CompareInternal(es[i].k, es[j].k) < 0 })
	num, f, _ := e.env().CreateTable()
	w := sstable.NewWriter(f, opts)
	for _, x := range es {
		if err := w.Add(x.k, []byte(x.v)); err != nil {
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
func (e *testEnv) readAll(t *testing.T, files []*manifest.FileMetadata) ([]entry, []rangedel.Tombstone) {
	var es []entry
	var ts []rangedel.Tombstone
	for _, f := range files {
		r, rel, err := e.env().OpenTable(f)
		if err != nil {
			t.Fatal(err)
		}
		it := r.NewIter()
		for ok := it.First(); ok; ok = it.Next() {
			es = append(es, entry{it.Key().Clone(), string(it.Value())})
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
func visible(es []entry, ts []rangedel.Tombstone, key string, snap base.SeqNum) (string, bool) {
	var best *entry
	for i := range es {
		if string(es[i].k.UserKey) == key && es[i].k.SeqNum() <= snap && (best == nil || es[i].k.SeqNum() > best.k.SeqNum()) {
			best = &es[i]
		}
	}
	if best == nil || best.k.Kind() == base.KindDelete {
		return "", false
	}
	for _, t := range ts {
		if string(t.Start) <= key && key < string(t.End) && t.Seq <= snap && t.Seq > best.k.SeqNum() {
			return "", false
		}
	}
	return best.v, true
}

// randomJob builds three overlapping L0 tables over an older two-table L1,
// with deletions, range tombstones, many versions per key and random
// snapshots, and the job that compacts them into L1; it returns the job and
// every input entry and tombstone (the oracle's view).
func randomJob(t *testing.T, rng *rand.Rand, e *testEnv) (*Job, []entry, []rangedel.Tombstone) {
	seq := base.SeqNum(1)
	key := func() string { return fmt.Sprintf("k%03d", rng.IntN(60)) }
	// Three overlapping "L0" tables and a disjoint "L1" run.
	var l0 []*manifest.FileMetadata
	var allE []entry
	var allT []rangedel.Tombstone
	for range 3 {
		var es []entry
		var ts []rangedel.Tombstone
		for range 40 + rng.IntN(40) {
			kind := base.KindSet
			if rng.IntN(5) == 0 {
				kind = base.KindDelete
			}
			es = append(es, entry{base.MakeInternalKey([]byte(key()), seq, kind), fmt.Sprintf("v%d", seq)})
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
		l0 = append([]*manifest.FileMetadata{e.table(t, es, rangedel.Fragment(ts))}, l0...)
		allE = append(allE, es...)
		allT = append(allT, ts...)
	}
	// An older L1 level below, two disjoint tables.
	var l1 []*manifest.FileMetadata
	for _, rg := range [][2]int{{0, 30}, {30, 60}} {
		var es []entry
		for k := rg[0]; k < rg[1]; k += 1 + rng.IntN(3) {
			es = append(es, entry{base.MakeInternalKey([]byte(fmt.Sprintf("k%03d", k)), 0, base.KindSet), "old"})
		}
		l1 = append(l1, e.table(t, es, nil))
		allE = append(allE, es...)
	}
	var snaps []base.SeqNum
	for range rng.IntN(4) {
		snaps = append(snaps, base.SeqNum(1+rng.IntN(int(seq))))
	}
	sort.Slice(snaps, func(i, j int) bool { return snaps[i] < snaps[j] })
	snaps = compactSeqs(snaps)
	job := &Job{
		Inputs:         []Input{{Level: 0, Files: l0}, {Level: 1, Files: l1}},
		OutputLevel:    1,
		Snapshots:      snaps,
		TargetFileSize: uint64(300 + rng.IntN(2000)),
		Env:            e.env(),
	}
	if rng.IntN(2) == 0 {
		// Something below: tombstones must survive.
		job.Lower = [][]*manifest.FileMetadata{{{Smallest: base.MakeInternalKey([]byte("k000"), 0, base.KindSet), Largest: base.MakeInternalKey([]byte("k999"), 0, base.KindSet)}}}
	}
	return job, allE, allT
}

func TestCPUCompactionPreservesEverySnapshot(t *testing.T) {
	for round := range 40 {
		rng := rand.New(rand.NewPCG(uint64(round), 3))
		e := newTestEnv()
		job, allE, allT := randomJob(t, rng, e)
		snaps := job.Snapshots
		res, err := CPU{}.Compact(context.Background(), job)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if e.open != 0 {
			t.Fatalf("round %d: %d readers not released", round, e.open)
		}
		outE, outT := e.readAll(t, res.Outputs)
		// Structure: sorted, disjoint, no user key split across outputs.
		v := &manifest.Version{}
		v.Levels[1] = res.Outputs
		if err := v.CheckOrdering(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		// Semantics: every key reads the same at every snapshot and at the end.
		for _, s := range append(append([]base.SeqNum(nil), snaps...), base.SeqNumMax) {
			for k := range 61 {
				ks := fmt.Sprintf("k%03d", k)
				wv, wok := visible(allE, allT, ks, s)
				gv, gok := visible(outE, outT, ks, s)
				if wv != gv || wok != gok {
					t.Fatalf("round %d: %s at snapshot %d: got %q,%v want %q,%v (snaps %v)", round, ks, s, gv, gok, wv, wok, snaps)
				}
			}
		}
		if len(outE) > len(allE) {
			t.Fatalf("round %d: compaction grew the entry count", round)
		}
		if job.Lower == nil && len(snaps) == 0 {
			for _, x := range outE {
				if x.k.Kind() == base.KindDelete {
					t.Fatalf("round %d: bottom compaction kept tombstone %v", round, x.k)
				}
			}
			if len(outT) > 0 {
				t.Fatalf("round %d: bottom compaction kept range tombstones", round)
			}
		}
	}
}

func compactSeqs(s []base.SeqNum) []base.SeqNum {
	var out []base.SeqNum
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}

func TestStripeOf(t *testing.T) {
	snaps := []base.SeqNum{10, 20}
	for _, tc := range []struct {
		q    base.SeqNum
		want int
	}{{1, 0}, {10, 0}, {11, 1}, {20, 1}, {21, 2}} {
		if got := StripeOf(snaps, tc.q); got != tc.want {
			t.Errorf("StripeOf(%d) = %d want %d", tc.q, got, tc.want)
		}
	}
	if StripeOf(nil, 5) != 0 {
		t.Error("no snapshots: one stripe")
	}
}

func TestCanceled(t *testing.T) {
	e := newTestEnv()
	var es []entry
	for i := range 5000 {
		es = append(es, entry{base.MakeInternalKey([]byte(fmt.Sprintf("k%05d", i)), base.SeqNum(i+1), base.KindSet), "v"})
	}
	f := e.table(t, es, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := CPU{}.Compact(ctx, &Job{Inputs: []Input{{0, []*manifest.FileMetadata{f}}}, OutputLevel: 1, TargetFileSize: 1 << 20, Env: e.env()})
	if err == nil {
		t.Fatal("canceled compaction succeeded")
	}
	if !bytes.Contains([]byte(err.Error()), []byte("canceled")) {
		t.Fatal(err)
	}
}

// TestSubcompactionsIdentical: a job split into parts writes exactly the
// entries the same job writes in one part — the same point entries in the
// same order, the same reads at every snapshot through the range
// tombstones — with outputs still sorted, disjoint and in key order.
func TestSubcompactionsIdentical(t *testing.T) {
	for round := range 60 {
		rng := rand.New(rand.NewPCG(uint64(round), 17))
		e := newTestEnv()
		job, _, _ := randomJob(t, rng, e)
		one, err := CPU{Parts: 1}.Compact(context.Background(), job)
		if err != nil {
			t.Fatal(err)
		}
		parts := 2 + rng.IntN(6)
		split := CPU{Parts: parts, MinPartBytes: 1}
		if b := split.splitPoints(job); len(b) == 0 {
			t.Fatalf("round %d: %d parts asked, the job was not split", round, parts)
		}
		many, err := split.Compact(context.Background(), job)
		if err != nil {
			t.Fatal(err)
		}
		if e.open != 0 {
			t.Fatalf("round %d: %d readers not released", round, e.open)
		}
		v := &manifest.Version{}
		v.Levels[1] = many.Outputs
		if err := v.CheckOrdering(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		oneE, oneT := e.readAll(t, one.Outputs)
		manyE, manyT := e.readAll(t, many.Outputs)
		if len(oneE) != len(manyE) {
			t.Fatalf("round %d: %d entries in one part, %d in %d parts", round, len(oneE), len(manyE), parts)
		}
		for i := range oneE {
			if base.CompareInternal(oneE[i].k, manyE[i].k) != 0 || oneE[i].v != manyE[i].v {
				t.Fatalf("round %d: entry %d: %v=%q in one part, %v=%q in parts", round, i, oneE[i].k, oneE[i].v, manyE[i].k, manyE[i].v)
			}
		}
		if one.Stats.EntriesIn != many.Stats.EntriesIn || one.Stats.EntriesOut != many.Stats.EntriesOut ||
			one.Stats.TombstonesElided != many.Stats.TombstonesElided || one.Stats.RangeDelsDropped != many.Stats.RangeDelsDropped {
			t.Fatalf("round %d: stats %+v in one part, %+v in parts", round, one.Stats, many.Stats)
		}
		// Range tombstones: the same cover at every key and snapshot (parts
		// only cut fragments at their boundaries).
		for _, s := range append(append([]base.SeqNum(nil), job.Snapshots...), base.SeqNumMax) {
			for k := range 61 {
				ks := fmt.Sprintf("k%03d", k)
				if covered(oneT, ks, s) != covered(manyT, ks, s) {
					t.Fatalf("round %d: %s at %d covered %v in one part, %v in parts", round, ks, s, covered(oneT, ks, s), covered(manyT, ks, s))
				}
			}
		}
	}
}

// covered returns the newest range tombstone sequence number at or below
// snap that covers key (0: none).
func covered(ts []rangedel.Tombstone, key string, snap base.SeqNum) base.SeqNum {
	var best base.SeqNum
	for _, t := range ts {
		if string(t.Start) <= key && key < string(t.End) && t.Seq <= snap && t.Seq > best {
			best = t.Seq
		}
	}
	return best
}

// TestSubcompactionFailure: a part that fails fails the job, the others
// stop, and every reader is released.
func TestSubcompactionFailure(t *testing.T) {
	for round := range 20 {
		rng := rand.New(rand.NewPCG(uint64(round), 29))
		e := newTestEnv()
		job, _, _ := randomJob(t, rng, e)
		e.failCreate = 1 + rng.IntN(3)
		_, err := CPU{Parts: 4, MinPartBytes: 1}.Compact(context.Background(), job)
		if err != nil && !errors.Is(err, errInjected) {
			t.Fatalf("round %d: %v, want the injected failure", round, err)
		}
		if err == nil && e.failCreate == 0 {
			t.Fatalf("round %d: a CreateTable failed and the job succeeded", round)
		}
		if e.open != 0 {
			t.Fatalf("round %d: %d readers not released", round, e.open)
		}
	}
}
