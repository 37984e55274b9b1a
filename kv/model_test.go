package kv

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/warpkit/warpkit/kv/compaction"
	"github.com/warpkit/warpkit/kv/vfs"
)

var (
	modelOps   = flag.Int("kv.model-ops", 0, "operations per model-test round (default: 3000, 600 with -short)")
	modelSeeds = flag.Int("kv.model-seeds", 0, "model-test rounds (default: 6, 2 with -short)")
)

// oracle is an in-memory model of the store: every key's history of
// (sequence number, value or deletion), with range deletions applied to the
// keys they cover. Sequence numbers follow the store's rule: each operation
// of a batch takes the next one, except an empty range deletion, which the
// batch does not record.
type oracle struct {
	seq     uint64
	hist    map[string][]version
	batches []uint64 // sequence number after each committed batch
}

type version struct {
	seq     uint64
	value   []byte
	deleted bool
}

func newOracle() *oracle { return &oracle{hist: map[string][]version{}} }

type op struct {
	kind     int // 0 set, 1 delete, 2 range delete
	key, end []byte
	value    []byte
}

func (o *oracle) apply(ops []op) {
	for _, x := range ops {
		if x.kind == 2 && string(x.key) >= string(x.end) {
			continue
		}
		o.seq++
		switch x.kind {
		case 0:
			o.hist[string(x.key)] = append(o.hist[string(x.key)], version{seq: o.seq, value: x.value})
		case 1:
			o.hist[string(x.key)] = append(o.hist[string(x.key)], version{seq: o.seq, deleted: true})
		case 2:
			for k := range o.hist {
				if k >= string(x.key) && k < string(x.end) {
					o.hist[k] = append(o.hist[k], version{seq: o.seq, deleted: true})
				}
			}
		}
	}
	o.batches = append(o.batches, o.seq)
}

func (o *oracle) get(key string, at uint64) ([]byte, bool) {
	h := o.hist[key]
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].seq <= at {
			if h[i].deleted {
				return nil, false
			}
			return h[i].value, true
		}
	}
	return nil, false
}

type kvPair struct{ k, v []byte }

// state returns the visible pairs at a sequence number within bounds.
func (o *oracle) state(at uint64, lower, upper []byte) []kvPair {
	var out []kvPair
	for k := range o.hist {
		if lower != nil && k < string(lower) || upper != nil && k >= string(upper) {
			continue
		}
		if v, ok := o.get(k, at); ok {
			out = append(out, kvPair{[]byte(k), v})
		}
	}
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i].k, out[j].k) < 0 })
	return out
}

// modelRun drives one randomized round.
type modelRun struct {
	flushes, compactions, moves int64 // summed over reopens
	t                           *testing.T
	rng                         *rand.Rand
	fs                          vfs.FS
	opts                        *Options
	db                          *DB
	o                           *oracle
	snaps                       []modelSnap
	keys                        int
}

type modelSnap struct {
	s  *Snapshot
	at uint64
}

func (m *modelRun) key() []byte {
	k := m.rng.IntN(m.keys)
	if m.rng.IntN(20) == 0 {
		return []byte(fmt.Sprintf("key%05d/%d", k, m.rng.IntN(3))) // longer keys sharing prefixes
	}
	return []byte(fmt.Sprintf("key%05d", k))
}

func (m *modelRun) value() []byte {
	var n int
	switch r := m.rng.IntN(20); {
	case r == 0:
		n = 0
	case r == 1:
		n = 2000 + m.rng.IntN(6000)
	default:
		n = 1 + m.rng.IntN(100)
	}
	v := make([]byte, n)
	for i := range v {
		v[i] = byte('a' + m.rng.IntN(26))
	}
	return v
}

func (m *modelRun) randomOps(n int) []op {
	ops := make([]op, n)
	for i := range ops {
		switch r := m.rng.IntN(20); {
		case r < 13:
			ops[i] = op{kind: 0, key: m.key(), value: m.value()}
		case r < 18:
			ops[i] = op{kind: 1, key: m.key()}
		default:
			a, b := m.key(), m.key()
			if bytes.Compare(a, b) > 0 {
				a, b = b, a
			}
			ops[i] = op{kind: 2, key: a, end: b}
		}
	}
	return ops
}

func (m *modelRun) write(ops []op) {
	t := m.t
	opts := NoSync
	if m.rng.IntN(50) == 0 {
		opts = Sync
	}
	var err error
	if len(ops) == 1 {
		switch x := ops[0]; x.kind {
		case 0:
			err = m.db.Set(x.key, x.value, opts)
		case 1:
			err = m.db.Delete(x.key, opts)
		case 2:
			err = m.db.DeleteRange(x.key, x.end, opts)
		}
	} else {
		b := opsBatch(m.db, ops)
		err = b.Commit(opts)
	}
	if err != nil {
		t.Fatalf("write: %v", err)
	}
	m.o.apply(ops)
}

// opsBatch puts operations into a batch.
func opsBatch(db *DB, ops []op) *Batch {
	b := db.NewBatch()
	for _, x := range ops {
		switch x.kind {
		case 0:
			b.Set(x.key, x.value)
		case 1:
			b.Delete(x.key)
		case 2:
			b.DeleteRange(x.key, x.end)
		}
	}
	return b
}

func (m *modelRun) checkGet(key []byte, s *modelSnap) {
	t := m.t
	var got []byte
	var err error
	at := m.o.seq
	if s != nil {
		got, err = s.s.Get(key)
		at = s.at
	} else {
		got, err = m.db.Get(key)
	}
	want, ok := m.o.get(string(key), at)
	switch {
	case errors.Is(err, ErrNotFound) && !ok:
	case err == nil && ok && bytes.Equal(got, want):
	default:
		t.Fatalf("Get(%s) at %d: got %q, %v; want %q (found %v)", key, at, trunc(got), err, trunc(want), ok)
	}
}

func trunc(b []byte) []byte {
	if len(b) > 20 {
		return append(b[:20:20], "..."...)
	}
	return b
}

// checkIter walks an iterator with random moves against the oracle's state.
func (m *modelRun) checkIter(s *modelSnap) {
	t := m.t
	var lower, upper []byte
	if m.rng.IntN(3) == 0 {
		lower = m.key()
	}
	if m.rng.IntN(3) == 0 {
		upper = m.key()
	}
	if lower != nil && upper != nil && bytes.Compare(lower, upper) > 0 {
		lower, upper = upper, lower
	}
	opts := &IterOptions{LowerBound: lower, UpperBound: upper}
	var it *Iterator
	var err error
	at := m.o.seq
	if s != nil {
		it, err = s.s.NewIter(opts)
		at = s.at
	} else {
		it, err = m.db.NewIter(opts)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := it.Close(); err != nil {
			t.Fatalf("iterator close: %v", err)
		}
	}()
	want := m.o.state(at, lower, upper)
	pos := -1
	check := func(what string, ok bool) {
		t.Helper()
		exp := pos >= 0 && pos < len(want)
		if ok != exp || ok != it.Valid() {
			t.Fatalf("%s (bounds %q %q, at %d): valid=%v want %v (pos %d of %d, err %v)", what, lower, upper, at, ok, exp, pos, len(want), it.Error())
		}
		if ok && (!bytes.Equal(it.Key(), want[pos].k) || !bytes.Equal(it.Value(), want[pos].v)) {
			t.Fatalf("%s: at %q=%q want %q=%q", what, it.Key(), trunc(it.Value()), want[pos].k, trunc(want[pos].v))
		}
		if it.Error() != nil {
			t.Fatalf("%s: %v", what, it.Error())
		}
		if !exp {
			pos = -1
		}
	}
	search := func(k []byte) int {
		return sort.Search(len(want), func(i int) bool { return bytes.Compare(want[i].k, k) >= 0 })
	}
	for range 5 + m.rng.IntN(30) {
		switch r := m.rng.IntN(12); {
		case r == 0:
			k := m.key()
			pos = search(k)
			if lower != nil && bytes.Compare(k, lower) < 0 {
				pos = 0
			}
			check(fmt.Sprintf("SeekGE(%s)", k), it.SeekGE(k))
		case r == 1:
			k := m.key()
			pos = search(k) - 1
			if upper != nil && bytes.Compare(k, upper) > 0 {
				pos = len(want) - 1
			}
			check(fmt.Sprintf("SeekLT(%s)", k), it.SeekLT(k))
		case r == 2:
			pos = 0
			check("First", it.First())
		case r == 3:
			pos = len(want) - 1
			check("Last", it.Last())
		case r < 8:
			if pos < 0 {
				continue
			}
			pos++
			check("Next", it.Next())
		default:
			if pos < 0 {
				continue
			}
			pos--
			check("Prev", it.Prev())
		}
	}
}

func (m *modelRun) reopen() {
	for _, s := range m.snaps {
		s.s.Close()
	}
	m.snaps = nil
	met := m.db.Metrics()
	m.flushes += met.MemTable.Flushes
	m.compactions += met.Compaction.Count
	m.moves += met.Compaction.Moves
	if err := m.db.Close(); err != nil {
		m.t.Fatalf("close: %v", err)
	}
	db, err := Open("/db", m.opts)
	if err != nil {
		m.t.Fatalf("reopen: %v", err)
	}
	m.db = db
	s, _ := db.NewSnapshot()
	if s.Seq() != m.o.seq {
		m.t.Fatalf("reopened at sequence %d, oracle at %d", s.Seq(), m.o.seq)
	}
	s.Close()
}

func (m *modelRun) randomSnap() *modelSnap {
	if len(m.snaps) == 0 || m.rng.IntN(2) == 0 {
		return nil
	}
	return &m.snaps[m.rng.IntN(len(m.snaps))]
}

func runModel(t *testing.T, seed uint64, nops, keys int, opts Options) {
	fs := vfs.NewMem()
	opts.FS = fs
	m := &modelRun{t: t, rng: rand.New(rand.NewPCG(seed, seed*31+7)), fs: fs, opts: &opts, o: newOracle(), keys: keys}
	db, err := Open("/db", m.opts)
	if err != nil {
		t.Fatal(err)
	}
	m.db = db
	defer func() {
		for _, s := range m.snaps {
			s.s.Close()
		}
		if m.db != nil {
			m.db.Close()
		}
	}()
	for i := range nops {
		switch r := m.rng.IntN(100); {
		case r < 45:
			m.write(m.randomOps(1))
		case r < 52:
			m.write(m.randomOps(1 + m.rng.IntN(20)))
		case r < 72:
			m.checkGet(m.key(), m.randomSnap())
		case r < 80:
			m.checkIter(m.randomSnap())
		case r < 84:
			s, err := m.db.NewSnapshot()
			if err != nil {
				t.Fatal(err)
			}
			if s.Seq() != m.o.seq {
				t.Fatalf("snapshot at %d, oracle at %d", s.Seq(), m.o.seq)
			}
			m.snaps = append(m.snaps, modelSnap{s, m.o.seq})
		case r < 87:
			if len(m.snaps) > 0 {
				j := m.rng.IntN(len(m.snaps))
				m.snaps[j].s.Close()
				m.snaps = append(m.snaps[:j], m.snaps[j+1:]...)
			}
		case r < 91:
			if err := m.db.Flush(); err != nil {
				t.Fatal(err)
			}
		case r < 94:
			var a, b []byte
			if m.rng.IntN(2) == 0 {
				a, b = m.key(), m.key()
				if bytes.Compare(a, b) > 0 {
					a, b = b, a
				}
			}
			if err := m.db.Compact(context.Background(), a, b); err != nil {
				t.Fatal(err)
			}
		case r < 96:
			m.reopen()
		default:
			// Check every key at once, at the latest state and at a snapshot.
			for k := range m.keys {
				m.checkGet([]byte(fmt.Sprintf("key%05d", k)), m.randomSnap())
			}
		}
		if i%500 == 499 {
			if err := m.db.Metrics().BackgroundError; err != nil {
				t.Fatal(err)
			}
		}
	}
	// Final full check after a last reopen.
	m.reopen()
	for k := range m.keys {
		m.checkGet([]byte(fmt.Sprintf("key%05d", k)), nil)
	}
	m.checkIter(nil)
	met := m.db.Metrics()
	t.Logf("seed %d: %d writes, %d flushes, %d compactions, %d moves, tables per level %v",
		seed, m.o.seq, m.flushes, m.compactions, m.moves, tablesPerLevel(met))
	if nops >= 1000 && (m.flushes == 0 || m.compactions == 0) {
		t.Fatalf("the workload did not exercise flushes (%d) and compactions (%d)", m.flushes, m.compactions)
	}
}

func tablesPerLevel(m *Metrics) []int {
	var out []int
	for _, l := range m.Levels {
		out = append(out, l.Tables)
	}
	return out
}

// smallOptions make every mechanism fire within a few thousand operations.
func smallOptions() Options {
	return Options{
		MemTableSize:          64 << 10,
		TargetFileSize:        16 << 10,
		LBaseMaxBytes:         64 << 10,
		L0CompactionThreshold: 2,
		BlockSize:             512,
		BlockCacheSize:        256 << 10,
		MaxOpenFiles:          20,
	}
}

func TestModel(t *testing.T) {
	ops, seeds := 3000, 6
	if testing.Short() {
		ops, seeds = 600, 2
	}
	if *modelOps > 0 {
		ops = *modelOps
	}
	if *modelSeeds > 0 {
		seeds = *modelSeeds
	}
	// Flushes of these 64 KiB memtables in runs of 8 KiB or more, on 1 to
	// 4 goroutines.
	defer func(b int) { flushRunBytes = b }(flushRunBytes)
	flushRunBytes = 8 << 10
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			opts := smallOptions()
			opts.FlushWorkers = 1 + seed%4
			opts.StaticLevelSizes = seed%2 == 1
			switch seed % 3 {
			case 1:
				opts.DisableCompression = true
				opts.BloomBitsPerKey = -1
			case 2:
				opts.Compression = 2 // S2
				opts.MaxConcurrentCompactions = 2
				// Every job split into key-range parts (subcompactions).
				opts.Compactor = compaction.CPU{Parts: 4, MinPartBytes: 1}
			}
			keys := 300
			if seed%2 == 1 {
				// A larger key space and steep, small levels: data reaches
				// the deep levels, and grandparent limits cut outputs.
				keys = 5000
				opts.LBaseMaxBytes = 24 << 10
				opts.LevelMultiplier = 2
				opts.TargetFileSize = 6 << 10
			}
			runModel(t, uint64(seed), ops, keys, opts)
		})
	}
}

// TestModelDeep runs long enough for data to reach L3 and below, with
// levels only twice the size of the one above.
func TestModelDeep(t *testing.T) {
	if testing.Short() {
		t.Skip("long model run")
	}
	opts := smallOptions()
	opts.LBaseMaxBytes = 24 << 10
	opts.LevelMultiplier = 2
	opts.TargetFileSize = 6 << 10
	runModel(t, 101, 15000, 20000, opts)
}
