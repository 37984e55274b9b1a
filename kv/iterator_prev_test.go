package kv

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/warpkit/warpkit/kv/vfs"
)

// These tests check the Iterator's end-of-range contract (Pebble's): an
// iterator that ran off the end (Next, First or SeekGE found no key) moves to
// the last key on Prev; one that ran off the start (Prev, Last or SeekLT found
// no key) moves to the first key on Next. Bounds, deletions and snapshots
// decide which keys those are.

type prevKV struct{ k, v string }

// prevIterState is where the model iterator is.
type prevIterState int

const (
	prevUnpositioned prevIterState = iota
	prevAt
	prevAfterEnd
	prevBeforeStart
)

// prevModel is the expected behaviour of an Iterator over want (the visible
// keys within the bounds, sorted).
type prevModel struct {
	want         []prevKV
	lower, upper []byte
	state        prevIterState
	pos          int
}

func (m *prevModel) search(k []byte) int {
	return sort.Search(len(m.want), func(i int) bool { return m.want[i].k >= string(k) })
}

func (m *prevModel) first() {
	if len(m.want) == 0 {
		m.state = prevAfterEnd
		return
	}
	m.state, m.pos = prevAt, 0
}

func (m *prevModel) last() {
	if len(m.want) == 0 {
		m.state = prevBeforeStart
		return
	}
	m.state, m.pos = prevAt, len(m.want)-1
}

func (m *prevModel) seekGE(k []byte) {
	if m.lower != nil && bytes.Compare(k, m.lower) < 0 {
		k = m.lower
	}
	if i := m.search(k); i < len(m.want) {
		m.state, m.pos = prevAt, i
	} else {
		m.state = prevAfterEnd
	}
}

func (m *prevModel) seekLT(k []byte) {
	if m.upper != nil && bytes.Compare(k, m.upper) > 0 {
		k = m.upper
	}
	if i := m.search(k) - 1; i >= 0 {
		m.state, m.pos = prevAt, i
	} else {
		m.state = prevBeforeStart
	}
}

func (m *prevModel) next() {
	switch m.state {
	case prevAt:
		if m.pos+1 < len(m.want) {
			m.pos++
		} else {
			m.state = prevAfterEnd
		}
	case prevBeforeStart:
		m.first()
	}
}

func (m *prevModel) prev() {
	switch m.state {
	case prevAt:
		if m.pos > 0 {
			m.pos--
		} else {
			m.state = prevBeforeStart
		}
	case prevAfterEnd:
		m.last()
	}
}

// prevChecker drives an Iterator and its model together.
type prevChecker struct {
	t     *testing.T
	it    *Iterator
	m     prevModel
	trace []string
}

func newPrevChecker(t *testing.T, it *Iterator, want []prevKV, opts *IterOptions) *prevChecker {
	c := &prevChecker{t: t, it: it, m: prevModel{want: want}}
	if opts != nil {
		c.m.lower, c.m.upper = opts.LowerBound, opts.UpperBound
	}
	return c
}

// do runs op ("First", "Last", "Next", "Prev", "SeekGE k", "SeekLT k") on
// both and compares the result, Valid, Key and Value.
func (c *prevChecker) do(op string) {
	c.t.Helper()
	name, arg, _ := strings.Cut(op, " ")
	var ok bool
	switch name {
	case "First":
		c.m.first()
		ok = c.it.First()
	case "Last":
		c.m.last()
		ok = c.it.Last()
	case "Next":
		c.m.next()
		ok = c.it.Next()
	case "Prev":
		c.m.prev()
		ok = c.it.Prev()
	case "SeekGE":
		c.m.seekGE([]byte(arg))
		ok = c.it.SeekGE([]byte(arg))
	case "SeekLT":
		c.m.seekLT([]byte(arg))
		ok = c.it.SeekLT([]byte(arg))
	default:
		c.t.Fatalf("bad op %q", op)
	}
	exp := c.m.state == prevAt
	got := "-"
	if ok {
		got = string(c.it.Key())
	}
	c.trace = append(c.trace, op+"="+got)
	if len(c.trace) > 12 {
		c.trace = c.trace[len(c.trace)-12:]
	}
	fail := func(format string, args ...any) {
		c.t.Helper()
		c.t.Fatalf("%s (bounds %q %q, %d keys; last steps %s): %s", op, c.m.lower, c.m.upper,
			len(c.m.want), strings.Join(c.trace, " "), fmt.Sprintf(format, args...))
	}
	if err := c.it.Error(); err != nil {
		fail("error %v", err)
	}
	if ok != exp || c.it.Valid() != exp {
		want := "-"
		if exp {
			want = c.m.want[c.m.pos].k
		}
		fail("returned %v, Valid %v (at %q); want %v (at %q)", ok, c.it.Valid(), got, exp, want)
	}
	if !exp {
		if c.it.Key() != nil || c.it.Value() != nil {
			fail("invalid iterator has key %q value %q", c.it.Key(), c.it.Value())
		}
		return
	}
	w := c.m.want[c.m.pos]
	if string(c.it.Key()) != w.k || string(c.it.Value()) != w.v {
		fail("at %q=%q, want %q=%q", c.it.Key(), c.it.Value(), w.k, w.v)
	}
}

func (c *prevChecker) run(ops ...string) {
	c.t.Helper()
	for _, op := range ops {
		c.do(op)
	}
}

// prevEndScript walks off both ends in every way and comes back.
var prevEndScript = []string{
	"Next", "Prev", // unpositioned: both false
	"First", "Next", "Next", "Next", "Next", "Next", "Next", "Next", "Next", "Next", "Next", "Next",
	"Next", "Next", "Next", "Next", "Next", "Next", "Next", "Next", "Next", "Next", "Next", "Next",
	"Next", "Next", "Next", "Next", "Next", "Next", // past the end of up to 26 keys
	"Next", "Prev", "Prev", "Next", "Next", "Next", "Prev",
	"Last", "Prev", "Prev", "Prev", "Prev", "Prev", "Prev", "Prev", "Prev", "Prev", "Prev", "Prev",
	"Prev", "Prev", "Prev", "Prev", "Prev", "Prev", "Prev", "Prev", "Prev", "Prev", "Prev", "Prev",
	"Prev", "Prev", "Prev", "Prev", // before the start
	"Prev", "Next", "Next", "Prev", "Prev", "Prev", "Next",
	"Last", "Next", "Prev", "Next", "Next", "Prev", "Prev",
	"First", "Prev", "Next", "Prev", "Prev", "Next", "Next",
	"SeekGE zzz", "Prev", "SeekGE zzz", "Next", "Prev",
	"SeekLT ", "Next", "SeekLT 0", "Prev", "Next",
	"SeekGE ", "Prev", "Next", "SeekLT zzz", "Next", "Prev",
	"SeekGE m", "SeekLT m",
}

func openPrevDB(t *testing.T, opts Options) *DB {
	t.Helper()
	if opts.FS == nil {
		opts.FS = vfs.NewMem()
	}
	db, err := Open("/db", &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return db
}

func prevSet(t *testing.T, db *DB, k, v string) {
	t.Helper()
	if err := db.Set([]byte(k), []byte(v), nil); err != nil {
		t.Fatal(err)
	}
}

func prevIter(t *testing.T, db *DB, snap *Snapshot, opts *IterOptions) *Iterator {
	t.Helper()
	var it *Iterator
	var err error
	if snap != nil {
		it, err = snap.NewIter(opts)
	} else {
		it, err = db.NewIter(opts)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { it.Close() })
	return it
}

// prevFilter returns the pairs of all within [lower, upper), sorted.
func prevFilter(all map[string]string, lower, upper []byte) []prevKV {
	var out []prevKV
	for k, v := range all {
		if lower != nil && k < string(lower) || upper != nil && k >= string(upper) {
			continue
		}
		out = append(out, prevKV{k, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].k < out[j].k })
	return out
}

// prevCheckAll runs the end script on db with no bounds and several bounds.
func prevCheckAll(t *testing.T, db *DB, snap *Snapshot, state map[string]string) {
	t.Helper()
	bounds := []*IterOptions{
		nil,
		{LowerBound: []byte("c"), UpperBound: []byte("x")},   // on keys
		{LowerBound: []byte("c5"), UpperBound: []byte("w5")}, // between keys
		{LowerBound: []byte("k")},
		{UpperBound: []byte("k")},
		{LowerBound: []byte("0"), UpperBound: []byte("zzzz")}, // beyond every key
		{LowerBound: []byte("m"), UpperBound: []byte("m")},    // empty
		{LowerBound: []byte("zz"), UpperBound: []byte("zzz")}, // empty, above the keys
	}
	for _, o := range bounds {
		var lo, hi []byte
		if o != nil {
			lo, hi = o.LowerBound, o.UpperBound
		}
		it := prevIter(t, db, snap, o)
		newPrevChecker(t, it, prevFilter(state, lo, hi), o).run(prevEndScript...)
		it.Close()
	}
}

// prevLetters sets a..z to values with suffix sfx, recording them in state.
func prevLetters(t *testing.T, db *DB, state map[string]string, sfx string) {
	for c := 'a'; c <= 'z'; c++ {
		k := string(c)
		state[k] = k + sfx
		prevSet(t, db, k, k+sfx)
	}
}

func TestIterPrevAfterEndLayouts(t *testing.T) {
	t.Run("memtable", func(t *testing.T) {
		db := openPrevDB(t, Options{})
		state := map[string]string{}
		prevLetters(t, db, state, "1")
		prevCheckAll(t, db, nil, state)
	})
	t.Run("flushed", func(t *testing.T) {
		db := openPrevDB(t, Options{})
		state := map[string]string{}
		prevLetters(t, db, state, "1")
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		prevCheckAll(t, db, nil, state)
	})
	t.Run("compacted", func(t *testing.T) {
		db := openPrevDB(t, smallOptions())
		state := map[string]string{}
		prevLetters(t, db, state, "1")
		if err := db.Compact(context.Background(), nil, nil); err != nil {
			t.Fatal(err)
		}
		prevCheckAll(t, db, nil, state)
	})
	t.Run("mixed", func(t *testing.T) {
		// Older versions in a deep level, some overwritten in L0, the ends
		// and a few others in the memtable only.
		db := openPrevDB(t, smallOptions())
		state := map[string]string{}
		for c := 'b'; c <= 'y'; c++ {
			k := string(c)
			state[k] = k + "1"
			prevSet(t, db, k, k+"1")
		}
		if err := db.Compact(context.Background(), nil, nil); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"c", "h", "x", "y"} {
			state[k] = k + "2"
			prevSet(t, db, k, k+"2")
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"a", "m", "y", "z"} {
			state[k] = k + "3"
			prevSet(t, db, k, k+"3")
		}
		prevCheckAll(t, db, nil, state)
	})
}

func TestIterPrevBoundsExplicit(t *testing.T) {
	db := openPrevDB(t, Options{})
	state := map[string]string{}
	prevLetters(t, db, state, "1")
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	it := prevIter(t, db, nil, &IterOptions{LowerBound: []byte("c5"), UpperBound: []byte("x")})
	for it.First(); it.Valid(); it.Next() {
	}
	if !it.Prev() || string(it.Key()) != "w" {
		t.Fatalf("Prev after the end: valid %v key %q, want w (the last key below the upper bound)", it.Valid(), it.Key())
	}
	for it.Last(); it.Valid(); it.Prev() {
	}
	if !it.Next() || string(it.Key()) != "d" {
		t.Fatalf("Next after the start: valid %v key %q, want d (the first key at or above the lower bound)", it.Valid(), it.Key())
	}

	// An empty, non-nil upper bound admits no key (a nil one is open),
	// whatever memory the iterator reuses.
	for range 5 {
		for _, o := range []*IterOptions{{UpperBound: []byte{}}, {LowerBound: []byte{}, UpperBound: []byte{}}} {
			it := prevIter(t, db, nil, o)
			newPrevChecker(t, it, nil, o).run(prevEndScript...)
			it.Close()
		}
		it := prevIter(t, db, nil, &IterOptions{LowerBound: []byte{}})
		newPrevChecker(t, it, prevFilter(state, nil, nil), nil).run(prevEndScript...)
		it.Close()
	}
}

func TestIterPrevDeletionsHideEnds(t *testing.T) {
	for _, layout := range []string{"memtable", "flushed", "deletions-flushed"} {
		t.Run(layout, func(t *testing.T) {
			db := openPrevDB(t, smallOptions())
			state := map[string]string{}
			prevLetters(t, db, state, "1")
			if layout != "memtable" {
				if err := db.Compact(context.Background(), nil, nil); err != nil {
					t.Fatal(err)
				}
			}
			// Hide the last key by a point deletion and the next three by a
			// range deletion; the first two likewise.
			del := func(k string) {
				if err := db.Delete([]byte(k), nil); err != nil {
					t.Fatal(err)
				}
				delete(state, k)
			}
			delRange := func(a, b string) {
				if err := db.DeleteRange([]byte(a), []byte(b), nil); err != nil {
					t.Fatal(err)
				}
				for k := range state {
					if k >= a && k < b {
						delete(state, k)
					}
				}
			}
			del("z")
			delRange("w", "z")
			del("a")
			delRange("b", "c")
			delRange("m", "o")
			if layout == "deletions-flushed" {
				if err := db.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			it := prevIter(t, db, nil, nil)
			for it.First(); it.Valid(); it.Next() {
			}
			if !it.Prev() || string(it.Key()) != "v" || string(it.Value()) != "v1" {
				t.Fatalf("Prev after the end: valid %v at %q, want v", it.Valid(), it.Key())
			}
			for it.Last(); it.Valid(); it.Prev() {
			}
			if !it.Next() || string(it.Key()) != "c" || string(it.Value()) != "c1" {
				t.Fatalf("Next after the start: valid %v at %q, want c", it.Valid(), it.Key())
			}
			prevCheckAll(t, db, nil, state)
		})
	}
}

func TestIterPrevEmpty(t *testing.T) {
	check := func(t *testing.T, db *DB) {
		for _, o := range []*IterOptions{nil, {LowerBound: []byte("b"), UpperBound: []byte("y")}} {
			it := prevIter(t, db, nil, o)
			newPrevChecker(t, it, nil, o).run(prevEndScript...)
			it.Close()
		}
	}
	t.Run("new", func(t *testing.T) {
		check(t, openPrevDB(t, Options{}))
	})
	t.Run("all-deleted", func(t *testing.T) {
		db := openPrevDB(t, smallOptions())
		prevLetters(t, db, map[string]string{}, "1")
		if err := db.Compact(context.Background(), nil, nil); err != nil {
			t.Fatal(err)
		}
		if err := db.DeleteRange([]byte("a"), []byte("n"), nil); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		for c := 'n'; c <= 'z'; c++ {
			if err := db.Delete([]byte{byte(c)}, nil); err != nil {
				t.Fatal(err)
			}
		}
		check(t, db)
	})
}

func TestIterPrevSnapshot(t *testing.T) {
	db := openPrevDB(t, smallOptions())
	old := map[string]string{}
	for c := 'b'; c <= 'y'; c++ {
		old[string(c)] = string(c) + "1"
		prevSet(t, db, string(c), string(c)+"1")
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	snap, err := db.NewSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	// After the snapshot: new keys beyond both ends, the old ends deleted,
	// the old second-to-last key overwritten.
	cur := map[string]string{}
	for k, v := range old {
		cur[k] = v
	}
	prevSet(t, db, "a", "a2")
	prevSet(t, db, "z", "z2")
	prevSet(t, db, "x", "x2")
	cur["a"], cur["z"], cur["x"] = "a2", "z2", "x2"
	if err := db.Delete([]byte("y"), nil); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteRange([]byte("b"), []byte("d"), nil); err != nil {
		t.Fatal(err)
	}
	delete(cur, "y")
	delete(cur, "b")
	delete(cur, "c")

	it := prevIter(t, db, snap, nil)
	for it.First(); it.Valid(); it.Next() {
	}
	if !it.Prev() || string(it.Key()) != "y" || string(it.Value()) != "y1" {
		t.Fatalf("snapshot Prev after the end: valid %v at %q=%q, want y=y1", it.Valid(), it.Key(), it.Value())
	}
	for it.Last(); it.Valid(); it.Prev() {
	}
	if !it.Next() || string(it.Key()) != "b" {
		t.Fatalf("snapshot Next after the start: valid %v at %q, want b", it.Valid(), it.Key())
	}
	prevCheckAll(t, db, snap, old)
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	prevCheckAll(t, db, snap, old)
	prevCheckAll(t, db, nil, cur)
}

func TestIterPrevSeek(t *testing.T) {
	db := openPrevDB(t, Options{})
	state := map[string]string{}
	for _, k := range []string{"b", "d", "f", "h"} {
		state[k] = k + "1"
		prevSet(t, db, k, k+"1")
	}
	c := newPrevChecker(t, prevIter(t, db, nil, nil), prevFilter(state, nil, nil), nil)
	// SeekGE past every key leaves the iterator after the end.
	c.run("SeekGE i", "Prev") // h
	c.run("SeekGE i", "Next", "Next", "Prev")
	c.run("SeekGE h", "Next", "Prev") // h
	// SeekLT before every key leaves it before the start.
	c.run("SeekLT b", "Next") // b
	c.run("SeekLT a", "Prev", "Prev", "Next")
	c.run("SeekLT ", "Next")
	// A seek that finds a key moves normally from it.
	c.run("SeekGE c", "Prev", "Prev", "Next")
	c.run("SeekLT g", "Next", "Next", "Prev")
	if !c.it.SeekGE([]byte("z")) {
		if !c.it.Prev() || string(c.it.Key()) != "h" {
			t.Fatalf("Prev after SeekGE past the keys: at %q, want h", c.it.Key())
		}
	} else {
		t.Fatal("SeekGE(z) found a key")
	}
	if c.it.SeekLT([]byte("a")) || !c.it.Next() || string(c.it.Key()) != "b" {
		t.Fatalf("Next after SeekLT before the keys: at %q, want b", c.it.Key())
	}

	// With bounds: a seek beyond the upper bound is after the end, one below
	// the lower bound before the start.
	o := &IterOptions{LowerBound: []byte("c"), UpperBound: []byte("g")}
	c = newPrevChecker(t, prevIter(t, db, nil, o), prevFilter(state, o.LowerBound, o.UpperBound), o)
	c.run("SeekGE g", "Prev")  // f
	c.run("SeekGE z", "Prev")  // f
	c.run("SeekGE f5", "Prev") // f
	c.run("SeekLT d", "Next")  // d
	c.run("SeekLT a", "Next")  // d
	c.run("SeekLT c", "Prev", "Next")
	c.run("SeekGE a", "Prev", "Prev", "Next") // d, before start, d
}

func TestIterPrevUnpositionedAndClosed(t *testing.T) {
	db := openPrevDB(t, Options{})
	prevSet(t, db, "a", "1")
	prevSet(t, db, "b", "2")
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	if it.Next() || it.Prev() || it.Valid() {
		t.Fatal("an unpositioned iterator moved")
	}
	for it.First(); it.Valid(); it.Next() {
	}
	// Closed after running off the end: every move stays false.
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if it.Prev() || it.Next() || it.Valid() || it.First() || it.Last() || it.SeekGE([]byte("a")) || it.SeekLT([]byte("z")) {
		t.Fatal("a closed iterator moved")
	}
	if it.Key() != nil || it.Value() != nil {
		t.Fatal("a closed iterator has a key")
	}
	it, err = db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	for it.Last(); it.Valid(); it.Prev() {
	}
	it.Close()
	if it.Next() || it.Valid() {
		t.Fatal("a closed iterator moved")
	}
}

// TestIterPrevAfterError: an iterator stopped by an error stays invalid,
// whichever end it was moving towards, even once reads work again.
func TestIterPrevAfterError(t *testing.T) {
	var armed atomic.Bool
	inj := vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if armed.Load() && op&(vfs.OpRead|vfs.OpOpen) != 0 && strings.HasSuffix(path, ".sst") {
			return vfs.ErrInjected
		}
		return nil
	})
	opts := smallOptions()
	opts.BlockCacheSize = 1 // every block read reaches the file
	opts.FS = vfs.NewFault(vfs.NewMem(), inj)
	db := openPrevDB(t, opts)
	for i := range 2000 {
		prevSet(t, db, fmt.Sprintf("k%05d", i), fmt.Sprint(i))
	}
	if err := db.Compact(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	for _, start := range []string{"First", "Last", "SeekGE", "SeekLT", "scan"} {
		it, err := db.NewIter(nil)
		if err != nil {
			t.Fatal(err)
		}
		armed.Store(true)
		var ok bool
		switch start {
		case "First":
			ok = it.First()
		case "Last":
			ok = it.Last()
		case "SeekGE":
			ok = it.SeekGE([]byte("k01000"))
		case "SeekLT":
			ok = it.SeekLT([]byte("k01000"))
		case "scan":
			// Fail part way through a forward scan: a few blocks in, before
			// the scan reads ahead (sstable's readAheadAfter) — from 700
			// entries in, the read-ahead window could already hold the rest
			// of the table, and no read was left to fail.
			armed.Store(false)
			n := 0
			for ok = it.First(); ok && n < 50; ok = it.Next() {
				n++
			}
			armed.Store(true)
			for ok {
				ok = it.Next()
			}
		}
		if ok || it.Error() == nil {
			t.Fatalf("%s with failing reads: ok %v, error %v", start, ok, it.Error())
		}
		armed.Store(false)
		e := it.Error()
		for i, move := range []func() bool{it.Prev, it.Next, it.Prev, it.Prev, it.Next, it.Next} {
			if got := move(); got || it.Valid() || it.Error() != e {
				t.Fatalf("after %s failed: move %d returned %v, Valid %v, error %v (was %v)", start, i, got, it.Valid(), it.Error(), e)
			}
		}
		it.Close()
	}
}

// TestIterPrevRandom compares random walks (walking off both ends included)
// against a sorted-slice model, over random stores of memtable, L0 and
// deeper-level data with point and range deletions, with random bounds and
// snapshots.
func TestIterPrevRandom(t *testing.T) {
	seeds := 8
	steps := 400
	if testing.Short() {
		seeds, steps = 3, 200
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			prevRandom(t, seed, steps)
		})
	}
}

func prevRandom(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	db := openPrevDB(t, smallOptions())
	nkeys := 10 + rng.IntN(50)
	key := func(i int) string { return fmt.Sprintf("k%03d", i) }
	// A seek or bound key: mostly near the keys, at times before or after
	// all of them or between two.
	anyKey := func() string {
		switch rng.IntN(10) {
		case 0:
			return ""
		case 1:
			return "l"
		case 2:
			return key(rng.IntN(nkeys+4)-2) + "5"
		default:
			return key(rng.IntN(nkeys+4) - 2)
		}
	}
	state := map[string]string{}
	type snapState struct {
		s     *Snapshot
		state map[string]string
	}
	var snaps []snapState
	defer func() {
		for _, s := range snaps {
			s.s.Close()
		}
	}()
	phases := 1 + rng.IntN(5)
	for phase := range phases {
		for i := range 5 + rng.IntN(4*nkeys) {
			k := key(rng.IntN(nkeys))
			switch r := rng.IntN(10); {
			case r < 7:
				v := fmt.Sprintf("v%d.%d.%d", seed, phase, i)
				prevSet(t, db, k, v)
				state[k] = v
			case r < 9:
				if err := db.Delete([]byte(k), nil); err != nil {
					t.Fatal(err)
				}
				delete(state, k)
			default:
				end := key(rng.IntN(nkeys))
				if err := db.DeleteRange([]byte(k), []byte(end), nil); err != nil {
					t.Fatal(err)
				}
				for x := range state {
					if x >= k && x < end {
						delete(state, x)
					}
				}
			}
		}
		switch rng.IntN(4) {
		case 0:
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		case 1:
			if err := db.Compact(context.Background(), nil, nil); err != nil {
				t.Fatal(err)
			}
		}
		if rng.IntN(3) == 0 {
			s, err := db.NewSnapshot()
			if err != nil {
				t.Fatal(err)
			}
			cp := make(map[string]string, len(state))
			for k, v := range state {
				cp[k] = v
			}
			snaps = append(snaps, snapState{s, cp})
		}
	}
	for range 6 {
		var o *IterOptions
		if rng.IntN(3) > 0 {
			o = &IterOptions{}
			if rng.IntN(2) == 0 {
				o.LowerBound = []byte(anyKey())
			}
			if rng.IntN(2) == 0 {
				o.UpperBound = []byte(anyKey())
			}
			if o.LowerBound != nil && o.UpperBound != nil && bytes.Compare(o.LowerBound, o.UpperBound) > 0 {
				o.LowerBound, o.UpperBound = o.UpperBound, o.LowerBound
			}
		}
		var snap *Snapshot
		st := state
		if len(snaps) > 0 && rng.IntN(2) == 0 {
			s := snaps[rng.IntN(len(snaps))]
			snap, st = s.s, s.state
		}
		var lo, hi []byte
		if o != nil {
			lo, hi = o.LowerBound, o.UpperBound
		}
		it := prevIter(t, db, snap, o)
		c := newPrevChecker(t, it, prevFilter(st, lo, hi), o)
		defer it.Close()
		for range steps {
			switch r := rng.IntN(20); {
			case r == 0:
				c.do("First")
			case r == 1:
				c.do("Last")
			case r < 4:
				c.do("SeekGE " + anyKey())
			case r < 6:
				c.do("SeekLT " + anyKey())
			case r == 6:
				// Run off the end and a little further.
				for range len(c.m.want) + 1 + rng.IntN(3) {
					c.do("Next")
				}
			case r == 7:
				for range len(c.m.want) + 1 + rng.IntN(3) {
					c.do("Prev")
				}
			case r < 14:
				c.do("Next")
			default:
				c.do("Prev")
			}
		}
	}
}
