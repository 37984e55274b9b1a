package mvbtree

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/warpkit/warpkit"
)

// Invariants the differential test cannot see from queries alone: what
// Vacuum leaves linked, and the latest version's Range and iterators seen
// as one state of the tree beside concurrent writers.

// vacuumed runs Vacuum and checks what it promises right after (no write
// since): every older version still linked is pinned — an open snapshot
// sees it (has a stamp p with ts <= p < the stamp of its next newer version)
// — and no version index is left; nothing waits for reclamation. On the
// CUDA backend it walks every chain of every generation in the pool's
// copy; the CPU backend has no chains (Stats all 0), and the differential
// test's queries after it check that every snapshot still answers as its
// model.
func vacuumed[K, V warpkit.Word](t *testing.T, where string, tr *Tree[K, V]) {
	t.Helper()
	if err := tr.Vacuum(ctx); err != nil {
		t.Fatalf("%s: Vacuum: %v", where, err)
	}
	if tr.gpu != nil {
		if err := checkVacuumed(tr.gpu); err != nil {
			t.Fatalf("%s: after Vacuum: %v", where, err)
		}
	}
	st, err := tr.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Versions != st.PinnedVersions || st.VersionIndexes != 0 || st.RetiredPending != 0 || (tr.gpu == nil && st.Versions != 0) {
		t.Fatalf("%s: after Vacuum %d versions linked, %d pinned, %d version indexes, %d retired pending", where, st.Versions, st.PinnedVersions, st.VersionIndexes, st.RetiredPending)
	}
}

// checkVacuumed walks, under the tree's exclusive lock, every head's chain
// of every live generation: each linked unit must be a version (not an
// index) that some open snapshot's stamp sees.
func checkVacuumed[K, V warpkit.Word](g *gpuTree[K, V]) error {
	if err := g.lockExclusive(); err != nil {
		return err
	}
	defer g.mu.Unlock()
	stamps := g.openStamps()
	pinned := func(lo, hi uint32) bool { // an open stamp in [lo, hi)
		i, _ := slices.BinarySearch(stamps, lo)
		return i < len(stamps) && stamps[i] < hi
	}
	g.snapMu.Lock()
	gens := slices.Clone(g.gens)
	g.snapMu.Unlock()
	for gi, gen := range gens {
		get, _, err := g.dump(ctx, gen)
		if err != nil {
			return err
		}
		_, _, heads, err := checkVersion(g.lay, get, gen.root, stampLatest)
		if err != nil {
			return fmt.Errorf("generation %d: %w", gi, err)
		}
		for _, h := range heads {
			n, _ := get(h)
			up, steps := n.TS, 0
			for a := n.Prev; a != addrNone; steps++ {
				v, err := get(a)
				if err != nil || steps > 1<<16 {
					return fmt.Errorf("generation %d, head %#x: chain (%d steps): %v", gi, h, steps, err)
				}
				if v.TS == stampIndex {
					return fmt.Errorf("generation %d, head %#x: version index %#x still linked", gi, h, a)
				}
				if !pinned(v.TS, up) {
					return fmt.Errorf("generation %d, head %#x: version %#x (stamps [%d, %d)) linked, no open snapshot (stamps %v) sees it", gi, h, a, v.TS, up, stamps)
				}
				up, a = v.TS, v.Prev
			}
		}
	}
	return nil
}

// testVacuumPins: snapshots taken between updates of every key pin a chain
// of versions per node (long enough for version indexes); closing the
// middle ones leaves versions only they saw linked, which Vacuum must
// unlink, keeping exactly those an open snapshot sees (checked by
// vacuumed), and the snapshots left keep their views.
func testVacuumPins(t *testing.T, tr *Tree[uint32, uint32]) {
	const n, rounds = 1500, 6
	keys := make([]uint32, n)
	for i := range keys {
		keys[i] = uint32(i * 7)
	}
	fill := func(v uint32) {
		t.Helper()
		vals := make([]uint32, n)
		for i := range vals {
			vals[i] = v
		}
		if err := tr.Insert(ctx, keys, vals); err != nil {
			t.Fatal(err)
		}
	}
	fill(0)
	snaps := map[int]*Snapshot[uint32, uint32]{} // snapshot r sees value r-1
	for r := 1; r <= rounds; r++ {
		s, err := tr.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		snaps[r] = s
		fill(uint32(r))
	}
	sees := func(where string) {
		t.Helper()
		for r, s := range snaps {
			vals, found := make([]uint32, n), make([]bool, n)
			if err := s.Lookup(ctx, keys, vals, found); err != nil {
				t.Fatal(err)
			}
			for i := range keys {
				if !found[i] || vals[i] != uint32(r-1) {
					t.Fatalf("%s: snapshot %d: key %d = (%d, %v), want (%d, true)", where, r, keys[i], vals[i], found[i], r-1)
				}
			}
		}
	}
	vacuumed(t, "every snapshot open", tr)
	sees("every snapshot open")
	for _, r := range []int{2, 3, 5} {
		if err := snaps[r].Close(); err != nil {
			t.Fatal(err)
		}
		delete(snaps, r)
	}
	before := mustStats(t, tr)
	vacuumed(t, "snapshots 2, 3 and 5 closed", tr)
	sees("snapshots 2, 3 and 5 closed")
	after := mustStats(t, tr)
	if tr.gpu != nil && after.Versions >= before.Versions {
		t.Fatalf("Vacuum after three closes: %d versions linked before, %d after", before.Versions, after.Versions)
	}
	mustCheck(t, tr)
	for r, s := range snaps {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		delete(snaps, r)
	}
	vacuumed(t, "every snapshot closed", tr)
	if st := mustStats(t, tr); st.Versions != 0 {
		t.Fatalf("every snapshot closed, after Vacuum: %d versions", st.Versions)
	}
	mustCheck(t, tr)
}

func TestVacuumPins(t *testing.T) { testVacuumPins(t, newCPUTree[uint32, uint32](t)) }

// rangeBesideWriters: two writers, each over its own keys, move their keys
// from generation to generation, one atomic batch a generation; readers
// beside them run Range (one call of several queries), All, AscendRange and
// AscendGreaterOrEqual on the latest version, and every answer must be the
// tree as it was at one moment: for each writer a generation G that had
// begun by the time the call returned, had not been overtaken before the
// call began (no older than one whose batch had returned), is no older than
// one this reader saw before, and matches every query of the call. A read
// that walks the tree piece by piece while a batch runs sees a mix of two
// generations (base values that differ, or another generation's extra keys).
//
// Writer w's keys are w<<24 | i<<12 (its base keys, i < base) and, for
// generation g >= 1, w<<24 | i<<12 | g for the i with i%4 == g%4 (its
// extras). Generation g's batch inserts the base keys and its extras, all
// with value g: at generation G the writer's keys are the base keys valued
// G and the extras of every g <= G valued g.
func rangeBesideWriters(t *testing.T, tr *Tree[uint32, uint32], base, gens, maxGens, minReads int) {
	defer tr.Close()
	if maxGens >= 1<<12 || base > 1<<12 || gens > maxGens {
		t.Fatalf("%d generations of %d base keys do not fit the key layout", maxGens, base)
	}
	const writers = 2
	batch := func(w, g int) ([]uint32, []uint32) {
		var ks, vs []uint32
		for i := range base {
			k := uint32(w)<<24 | uint32(i)<<12
			ks, vs = append(ks, k), append(vs, uint32(g))
			if g > 0 && i%4 == g%4 {
				ks, vs = append(ks, k|uint32(g)), append(vs, uint32(g))
			}
		}
		return ks, vs
	}
	var started, done [writers]atomic.Int64
	for w := range writers {
		ks, vs := batch(w, 0)
		if err := tr.Insert(ctx, ks, vs); err != nil {
			t.Fatal(err)
		}
	}
	var reads, beside atomic.Int64
	var wg sync.WaitGroup
	var writing atomic.Int32
	writing.Store(writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer writing.Add(-1)
			// gens generations, and more (up to maxGens) until minReads
			// reads ran beside them.
			for g := 1; g <= maxGens && (g <= gens || beside.Load() < int64(minReads)); g++ {
				ks, vs := batch(w, g)
				started[w].Store(int64(g))
				if err := tr.Insert(ctx, ks, vs); err != nil {
					t.Error(err)
					return
				}
				done[w].Store(int64(g))
			}
		}()
	}
	// span is a query's keys: [lo, hi), or [lo, max] with all.
	type span struct {
		lo, hi uint32
		all    bool
	}
	in := func(s span, k uint32) bool { return k >= s.lo && (s.all || k < s.hi) }
	// stateIn is writer w's pairs at generation g in s, sorted.
	stateIn := func(w, g int, s span) ([]uint32, []uint32) {
		var ks, vs []uint32
		for i := range base {
			k := uint32(w)<<24 | uint32(i)<<12
			if k|0xfff < s.lo || (!s.all && k >= s.hi) {
				continue
			}
			if in(s, k) {
				ks, vs = append(ks, k), append(vs, uint32(g))
			}
			j := i % 4
			if j == 0 {
				j = 4
			}
			for ; j <= g; j += 4 {
				if in(s, k|uint32(j)) {
					ks, vs = append(ks, k|uint32(j)), append(vs, uint32(j))
				}
			}
		}
		return ks, vs
	}
	// match finds, for each writer, a generation in [floor, ceiling] that
	// every query's answer (its pairs, sorted) is the state of, and returns
	// the oldest such, or an error.
	match := func(what string, spans []span, ks, vs [][]uint32, floor, ceiling [writers]int64) ([writers]int64, error) {
		var at [writers]int64
		for q := range spans {
			for i, k := range ks[q] {
				if !in(spans[q], k) || k>>24 >= writers || (i > 0 && ks[q][i-1] >= k) {
					return at, fmt.Errorf("%s: query %d [%#x, %#x all=%v) answered key %#x (position %d): out of the range, of no writer, or out of order", what, q, spans[q].lo, spans[q].hi, spans[q].all, k, i)
				}
			}
		}
		for w := range writers {
			gk, gv := make([][]uint32, len(spans)), make([][]uint32, len(spans))
			lo, hi := floor[w], ceiling[w]
			for q := range spans {
				for i, k := range ks[q] {
					if int(k>>24) != w {
						continue
					}
					gk[q], gv[q] = append(gk[q], k), append(gv[q], vs[q][i])
					if k&0xfff == 0 { // a base key: its value is the generation
						lo, hi = max(lo, int64(vs[q][i])), min(hi, int64(vs[q][i]))
					}
				}
			}
			found := false
			for g := lo; g <= hi && !found; g++ {
				ok := true
				for q := 0; q < len(spans) && ok; q++ {
					ek, ev := stateIn(w, int(g), spans[q])
					ok = slices.Equal(ek, gk[q]) && slices.Equal(ev, gv[q])
				}
				if ok {
					at[w], found = g, true
				}
			}
			if !found {
				return at, fmt.Errorf("%s: writer %d's keys are no one generation in [%d, %d] (queries %v; base values between %d and %d)", what, w, floor[w], ceiling[w], spans, lo, hi)
			}
		}
		return at, nil
	}
	randSpan := func(r *rand.Rand) span {
		a, b := r.Uint32N(writers<<24), r.Uint32N(writers<<24)
		return span{lo: min(a, b), hi: max(a, b)}
	}
	for reader := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(reader), 3))
			var seen [writers]int64 // the oldest generation this reader's last answer allows
			for n := 0; n < minReads || writing.Load() > 0; n++ {
				var floor, ceiling [writers]int64
				for w := range writers {
					floor[w] = max(done[w].Load(), seen[w])
				}
				var spans []span
				var ks, vs [][]uint32
				var what string
				switch reader {
				case 0: // Range: one call, three queries, one version
					spans = []span{{lo: 0, hi: ^uint32(0)}, randSpan(r), randSpan(r)}
					lo, hi := make([]uint32, len(spans)), make([]uint32, len(spans))
					for i, s := range spans {
						lo[i], hi[i] = s.lo, s.hi
					}
					res, err := tr.Range(ctx, lo, hi)
					if err != nil {
						t.Error(err)
						return
					}
					for i := range spans {
						ks = append(ks, res.Keys[res.Offsets[i]:res.Offsets[i+1]])
						vs = append(vs, res.Vals[res.Offsets[i]:res.Offsets[i+1]])
					}
					what = "Range"
				default: // the iterators
					var seq func(func(uint32, uint32) bool)
					var err error
					switch s := randSpan(r); {
					case reader == 1:
						spans = []span{{all: true}}
						seq, err = tr.All(ctx)
						what = "All"
					case n%2 == 0:
						spans = []span{s}
						seq, err = tr.AscendRange(ctx, s.lo, s.hi)
						what = "AscendRange"
					default:
						spans = []span{{lo: s.lo, all: true}}
						seq, err = tr.AscendGreaterOrEqual(ctx, s.lo)
						what = "AscendGreaterOrEqual"
					}
					if err != nil {
						t.Error(err)
						return
					}
					k, v := collect(seq, nil)
					ks, vs = [][]uint32{k}, [][]uint32{v}
				}
				wrote := writing.Load() > 0 // (the writers began before the readers)
				for w := range writers {
					ceiling[w] = started[w].Load()
				}
				at, err := match(what, spans, ks, vs, floor, ceiling)
				if err != nil {
					t.Error(err)
					return
				}
				seen = at
				reads.Add(1)
				if wrote {
					beside.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d reads, %d of them beside the writers (generations %d and %d)", reads.Load(), beside.Load(), done[0].Load(), done[1].Load())
	if beside.Load() == 0 && !t.Failed() {
		t.Fatal("no read ran beside the writers")
	}
	mustCheck(t, tr)
}

// TestRangeBesideWriters: the CPU backend's latest-version Range and
// iterators beside writers, each answer one state of the tree.
func TestRangeBesideWriters(t *testing.T) {
	gens := 300
	if testing.Short() {
		gens = 100
	}
	rangeBesideWriters(t, newCPUTree[uint32, uint32](t), 256, gens, 1000, 20)
}
