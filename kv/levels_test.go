package kv

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/warpkit/warpkit/kv/manifest"
	"github.com/warpkit/warpkit/kv/vfs"
)

// versionOf builds a version whose levels hold one table each of the given
// sizes (0: empty), L1 first.
func versionOf(sizes ...uint64) *manifest.Version {
	v := &manifest.Version{}
	for i, s := range sizes {
		if s > 0 {
			v.Levels[i+1] = []*manifest.FileMetadata{{Size: s}}
		}
	}
	return v
}

func TestLevelTargets(t *testing.T) {
	const mb = 1 << 20
	o := &Options{LBaseMaxBytes: 16 * mb, LevelMultiplier: 10}
	for _, tc := range []struct {
		name  string
		v     *manifest.Version
		base  int
		check map[int]float64 // level -> target
	}{
		{"empty store", versionOf(), 6, map[int]float64{6: 16 * mb}},
		{"small last level", versionOf(0, 0, 0, 0, 0, 4*mb), 6, map[int]float64{6: 16 * mb}},
		{"last level at LBaseMaxBytes", versionOf(0, 0, 0, 0, 0, 16*mb), 6, map[int]float64{6: 16 * mb}},
		{"last level past it", versionOf(0, 0, 0, 0, 0, 17*mb), 5, map[int]float64{5: 16 * mb, 6: 17 * mb}},
		{"two levels", versionOf(0, 0, 0, 0, 16*mb, 150*mb), 5, map[int]float64{5: 16 * mb, 6: 150 * mb}},
		// L5 would hold 20 MiB, more than LBaseMaxBytes: L4 becomes the
		// base, and the ratio between neighbours sqrt(200/16).
		{"base moves up", versionOf(0, 0, 0, 0, 16*mb, 200*mb), 4, map[int]float64{4: 16 * mb, 5: 16 * mb * math.Sqrt(200.0/16), 6: 200 * mb}},
		{"three levels", versionOf(0, 0, 0, 10*mb, 100*mb, 1500*mb), 4, map[int]float64{4: 16 * mb, 6: 1500 * mb}},
		// A store of the static geometry keeps L1 as its base; its targets
		// grow from LBaseMaxBytes to the deepest level's size.
		{"static-shaped store", versionOf(16*mb, 160*mb, 40*mb), 1, map[int]float64{1: 16 * mb, 6: 40 * mb}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := computeLevelTargets(tc.v, o)
			if got.base != tc.base {
				t.Fatalf("base level %d, want %d (targets %v)", got.base, tc.base, got.maxBytes)
			}
			for l := 1; l < manifest.NumLevels; l++ {
				if inf := math.IsInf(got.maxBytes[l], 1); inf != (l < got.base) {
					t.Errorf("L%d target %g with base L%d", l, got.maxBytes[l], got.base)
				}
				if l > got.base && got.maxBytes[l] < got.maxBytes[l-1] && got.maxBytes[manifest.NumLevels-1] >= 16*mb {
					t.Errorf("L%d target %g below L%d's %g", l, got.maxBytes[l], l-1, got.maxBytes[l-1])
				}
			}
			for l, want := range tc.check {
				if math.Abs(got.maxBytes[l]-want) > 1 {
					t.Errorf("L%d target %g, want %g", l, got.maxBytes[l], want)
				}
			}
			if out := got.outputLevel(0); out != got.base {
				t.Errorf("L0 compacts into L%d, base L%d", out, got.base)
			}
		})
	}
	static := computeLevelTargets(versionOf(0, 0, 0, 0, 0, 500*mb), &Options{LBaseMaxBytes: 16 * mb, LevelMultiplier: 10, StaticLevelSizes: true})
	if static.base != 1 || static.maxBytes[1] != 16*mb || static.maxBytes[3] != 1600*mb {
		t.Fatalf("static geometry: base L%d, targets %v", static.base, static.maxBytes)
	}
}

// TestDynamicLevels fills a store of the default geometry and checks that
// the base level moves up as the store grows, that the levels between L0 and
// the base level stay empty, and that no level is left due.
func TestDynamicLevels(t *testing.T) {
	opts := smallOptions()
	db, err := Open(t.TempDir(), &opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	val := make([]byte, 100)
	seen := map[int]bool{}
	for i := range 40000 {
		k := fmt.Appendf(nil, "key-%08d", (i*7919)%40000)
		if err := db.Set(k, val, nil); err != nil {
			t.Fatal(err)
		}
		if i%2000 == 1999 {
			m := db.Metrics()
			seen[m.BaseLevel] = true
			for l := 1; l < m.BaseLevel; l++ {
				if m.Levels[l].Tables != 0 {
					t.Fatalf("L%d holds %d tables above the base level L%d: %v", l, m.Levels[l].Tables, m.BaseLevel, tablesPerLevel(m))
				}
			}
		}
	}
	if err := db.WaitForCompactions(t.Context()); err != nil {
		t.Fatal(err)
	}
	m := db.Metrics()
	if m.BaseLevel >= manifest.NumLevels-1 || len(seen) < 2 {
		t.Fatalf("base level L%d at the end, seen %v: the base never moved up (tables %v)", m.BaseLevel, seen, tablesPerLevel(m))
	}
	for l := 1; l < manifest.NumLevels-1; l++ {
		if m.Levels[l].Score >= 1 {
			t.Errorf("L%d score %.2f after WaitForCompactions", l, m.Levels[l].Score)
		}
	}
	if err := db.CheckIntegrity(); err != nil {
		t.Fatal(err)
	}
}

func TestByOverlapRatio(t *testing.T) {
	tab := func(lo, hi string, size uint64) *manifest.FileMetadata {
		f := &manifest.FileMetadata{Size: size}
		f.Smallest.UserKey, f.Largest.UserKey = []byte(lo), []byte(hi)
		return f
	}
	// next: [b,c] 10, [d,f] 30, [g,h] 5, [x,y] 100
	next := []*manifest.FileMetadata{tab("b", "c", 10), tab("d", "f", 30), tab("g", "h", 5), tab("x", "y", 100)}
	a := tab("a", "a", 10)  // overlaps nothing: 0
	b := tab("c", "e", 10)  // [b,c] and [d,f]: 40/10 = 4
	c := tab("e", "g", 20)  // [d,f] and [g,h]: 35/20 = 1.75
	d := tab("h", "w", 10)  // [g,h]: 0.5
	e := tab("x", "z", 100) // [x,y]: 1
	got := byOverlapRatio([]*manifest.FileMetadata{a, b, c, d, e}, next)
	want := []*manifest.FileMetadata{a, d, e, c, b}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("position %d: table [%s,%s], want [%s,%s]", i, got[i].Smallest.UserKey, got[i].Largest.UserKey, want[i].Smallest.UserKey, want[i].Largest.UserKey)
		}
	}
}

// TestL0WaitsForBaseBytes: by default L0 is due once it holds
// L0CompactionThreshold tables and as many bytes as the base level, or two
// tables short of the write slowdown; with EagerL0Compactions at the
// threshold. Reads looking in the waiting tables, and WaitForCompactions,
// make it due.
func TestL0WaitsForBaseBytes(t *testing.T) {
	for _, eager := range []bool{false, true} {
		opts := smallOptions() // threshold 2
		opts.FS = vfs.NewMem()
		opts.L0SlowdownWritesThreshold, opts.L0StopWritesThreshold = 8, 12
		opts.EagerL0Compactions = eager
		db, err := Open("/db", &opts)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		// A base level of 2,000 keys (about 200 KiB), then L0 tables of 40
		// keys each, one flush at a time.
		val := strings.Repeat("v", 100)
		for i := range 2000 {
			if err := db.Set([]byte(fmt.Sprintf("k%05d", i*7%2000)), []byte(val), nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Compact(ctx, nil, nil); err != nil {
			t.Fatal(err)
		}
		m := db.Metrics()
		base := m.BaseLevel
		if m.Levels[0].Tables != 0 || m.Levels[base].Tables == 0 {
			t.Fatalf("after Compact: tables per level %v, base L%d", tablesPerLevel(m), base)
		}
		f, prev := 0, 0
		// flush writes one L0 table and returns L0's tables and whether a
		// compaction of L0 is due.
		flush := func() (int, bool) {
			for i := range 40 {
				if err := db.Set([]byte(fmt.Sprintf("k%05d", (f*40+i)*47%2000)), []byte(val), nil); err != nil {
					t.Fatal(err)
				}
			}
			f++
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
			l0 := db.Metrics().Levels[0]
			// Fewer tables than before plus this one: a compaction of L0
			// already ran; or one is running.
			due := l0.Score >= 1 || l0.Tables != prev+1 || l0Compacting(db)
			prev = l0.Tables
			return l0.Tables, due
		}
		var got []string
		for range 7 {
			n, due := flush()
			if due {
				if err := db.WaitForCompactions(ctx); err != nil {
					t.Fatal(err)
				}
				prev = db.Metrics().Levels[0].Tables
				got = append(got, "due")
				continue
			}
			got = append(got, fmt.Sprint(n))
		}
		want := "[1 2 3 4 5 due 1]" // at 6 = 8 - 2 tables
		if eager {
			want = "[1 due 1 due 1 due 1]" // at 2
		}
		if fmt.Sprint(got) != want {
			t.Fatalf("eager %v: L0 after each flush %v, want %v", eager, got, want)
		}
		if !eager {
			// Two more tables (3, waiting); then reads that look in them
			// without result, past the budget (at least 100): due.
			flush()
			if n, due := flush(); n != 3 || due {
				t.Fatalf("%d L0 tables, due %v; want 3 waiting", n, due)
			}
			for i := range 400 {
				if _, err := db.Get([]byte(fmt.Sprintf("k%05d", 1999-i))); err != nil {
					t.Fatal(err)
				}
			}
			// (No WaitForCompactions here: it would run the compaction
			// itself.)
			deadline := time.Now().Add(10 * time.Second)
			for db.Metrics().Levels[0].Tables != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("reads looked in the waiting L0 tables; still %d after 10 s", db.Metrics().Levels[0].Tables)
				}
				time.Sleep(time.Millisecond)
			}
			prev = 0
			// WaitForCompactions runs a waiting compaction.
			flush()
			if n, due := flush(); n != 2 || due {
				t.Fatalf("%d L0 tables, due %v; want 2 waiting", n, due)
			}
			if err := db.WaitForCompactions(ctx); err != nil {
				t.Fatal(err)
			}
			if n := db.Metrics().Levels[0].Tables; n != 0 {
				t.Fatalf("%d L0 tables after WaitForCompactions, want 0", n)
			}
			prev = 0
			flush()
		}
		// One table, below the threshold (eager: the sequence left it):
		// reads looking in it make it due too (LevelDB's seek compaction).
		if l0 := db.Metrics().Levels[0]; l0.Tables != 1 || l0.Score >= 1 {
			t.Fatalf("eager %v: %d L0 tables, score %.2f; want 1 not due", eager, l0.Tables, l0.Score)
		}
		for i := range 400 {
			if _, err := db.Get([]byte(fmt.Sprintf("k%05d", i))); err != nil {
				t.Fatal(err)
			}
		}
		deadline := time.Now().Add(10 * time.Second)
		for db.Metrics().Levels[0].Tables != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("eager %v: reads looked in the one L0 table; still there after 10 s", eager)
			}
			time.Sleep(time.Millisecond)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// l0Compacting says whether an L0 compaction is running.
func l0Compacting(d *DB) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	l0 := d.rs.version.Levels[0]
	return len(l0) > 0 && l0[0].Compacting
}
