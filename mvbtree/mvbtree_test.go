package mvbtree

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
)

var ctx = context.Background()

// model is the reference: a Go map per version.
type model[K, V warpkit.Word] map[K]V

func (m model[K, V]) sorted() []K { return slices.Sorted(maps.Keys(m)) }

// same checks every query of q against the model on keys drawn by key.
func same[K, V warpkit.Word](t *testing.T, where string, q interface {
	Lookup(ctx context.Context, keys []K, vals []V, found []bool) error
	Successor(ctx context.Context, keys, outKeys []K, outVals []V, found []bool) error
	Predecessor(ctx context.Context, keys, outKeys []K, outVals []V, found []bool) error
	Count(ctx context.Context, lo, hi []K, counts []uint32) error
	Len(ctx context.Context) (int, error)
}, all func() ([]K, []V), m model[K, V], probes []K) {
	t.Helper()
	ks, vs := all()
	want := m.sorted()
	if !slices.Equal(ks, want) {
		t.Fatalf("%s: keys %v, want %v", where, ks, want)
	}
	for i, k := range ks {
		if vs[i] != m[k] {
			t.Fatalf("%s: key %d value %d, want %d", where, k, vs[i], m[k])
		}
	}
	if n, err := q.Len(ctx); err != nil || n != len(m) {
		t.Fatalf("%s: Len %d (%v), want %d", where, n, err, len(m))
	}
	n := len(probes)
	vals, found := make([]V, n), make([]bool, n)
	if err := q.Lookup(ctx, probes, vals, found); err != nil {
		t.Fatal(err)
	}
	for i, k := range probes {
		v, ok := m[k]
		if found[i] != ok || vals[i] != v {
			t.Fatalf("%s: lookup %d = (%d, %v), want (%d, %v)", where, k, vals[i], found[i], v, ok)
		}
	}
	for _, pred := range []bool{false, true} {
		ok, ov, of := make([]K, n), make([]V, n), make([]bool, n)
		var err error
		if pred {
			err = q.Predecessor(ctx, probes, ok, ov, of)
		} else {
			err = q.Successor(ctx, probes, ok, ov, of)
		}
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range probes {
			j, _ := slices.BinarySearch(want, k)
			var wk K
			var has bool
			if pred && j > 0 {
				wk, has = want[j-1], true
			}
			if !pred {
				if j < len(want) && want[j] == k {
					j++
				}
				if j < len(want) {
					wk, has = want[j], true
				}
			}
			if of[i] != has || (has && (ok[i] != wk || ov[i] != m[wk])) {
				t.Fatalf("%s: pred=%v of %d = (%d, %v), want (%d, %v)", where, pred, k, ok[i], of[i], wk, has)
			}
		}
	}
	lo, hi := probes[:n/2], probes[n/2:n/2*2]
	counts := make([]uint32, len(lo))
	if err := q.Count(ctx, lo, hi, counts); err != nil {
		t.Fatal(err)
	}
	for i := range lo {
		var c uint32
		for _, k := range want {
			if k >= lo[i] && k < hi[i] {
				c++
			}
		}
		if counts[i] != c {
			t.Fatalf("%s: count [%d, %d) = %d, want %d", where, lo[i], hi[i], counts[i], c)
		}
	}
}

// collect gathers an iterator's pairs.
func collect[K, V warpkit.Word](seq func(func(K, V) bool), err error) ([]K, []V) {
	if err != nil {
		panic(err)
	}
	var ks []K
	var vs []V
	for k, v := range seq {
		ks, vs = append(ks, k), append(vs, v)
	}
	return ks, vs
}

// TestDifferential: random sequences of builds, inserts, deletes,
// snapshots, closes and queries; the latest version and every open
// snapshot answer as the model of their version, exactly, keys at both
// ends of K's range included.
func TestDifferential(t *testing.T) {
	t.Run("u32", func(t *testing.T) { differential(t, 1<<12, newCPUTree[uint32, uint32], 4, 120) })
	t.Run("u64", func(t *testing.T) { differential(t, 1<<12, newCPUTree[uint64, uint64], 4, 120) })
	t.Run("u32-full-range", func(t *testing.T) { differential(t, 0, newCPUTree[uint32, uint64], 4, 120) })
}

// newCPUTree opens a tree on the CPU backend.
func newCPUTree[K, V warpkit.Word](t testing.TB) *Tree[K, V] {
	tr, err := New[K, V](Options{Backend: warpkit.CPU})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func differential[K, V warpkit.Word](t *testing.T, span uint64, newTree func(testing.TB) *Tree[K, V], seeds uint64, steps int) {
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(seed, 11))
		key := func() K {
			switch r := rng.IntN(20); {
			case r == 0:
				return 0
			case r == 1:
				return ^K(0)
			case span == 0:
				return K(rng.Uint64())
			default:
				return K(rng.Uint64N(span))
			}
		}
		tr := newTree(t)
		latest := model[K, V]{}
		type open struct {
			s *Snapshot[K, V]
			m model[K, V]
		}
		var snaps []open
		probes := func() []K {
			p := make([]K, 64)
			for i := range p {
				p[i] = key()
			}
			return p
		}
		closes := 0
		for step := range steps {
			closed := false
			switch op := rng.IntN(12); {
			case op < 4:
				// Distinct keys: the CUDA backend keeps one of a key's values
				// within a batch, not necessarily the last.
				n := 1 + rng.IntN(300)
				var ks []K
				var vs []V
				in := map[K]bool{}
				for range n {
					k := key()
					if in[k] {
						continue
					}
					in[k] = true
					ks, vs = append(ks, k), append(vs, V(rng.Uint64()))
					latest[k] = vs[len(vs)-1]
				}
				if err := tr.Insert(ctx, ks, vs); err != nil {
					t.Fatal(err)
				}
			case op < 6:
				n := 1 + rng.IntN(200)
				ks := make([]K, n)
				for i := range n {
					ks[i] = key()
					if rng.IntN(2) == 0 && len(latest) > 0 { // a key that is there
						for k := range latest {
							ks[i] = k
							break
						}
					}
					delete(latest, ks[i])
				}
				if err := tr.Delete(ctx, ks); err != nil {
					t.Fatal(err)
				}
			case op < 8:
				s, err := tr.Snapshot(ctx)
				if err != nil {
					t.Fatal(err)
				}
				snaps = append(snaps, open{s, maps.Clone(latest)})
			case op < 10 && len(snaps) > 0:
				i := rng.IntN(len(snaps))
				if err := snaps[i].s.Close(); err != nil {
					t.Fatal(err)
				}
				if err := snaps[i].s.Close(); !errors.Is(err, warpkit.ErrClosed) {
					t.Fatalf("a second Close: %v", err)
				}
				if _, err := snaps[i].s.Len(ctx); !errors.Is(err, warpkit.ErrClosed) {
					t.Fatalf("Len of a closed snapshot: %v", err)
				}
				snaps = slices.Delete(snaps, i, i+1)
				closed, closes = true, closes+1
			case op == 10:
				n := rng.IntN(500)
				ks, vs := make([]K, n), make([]V, n)
				latest = model[K, V]{}
				for i := range n {
					ks[i], vs[i] = key(), V(rng.Uint64())
					latest[ks[i]] = vs[i]
				}
				if err := tr.Build(ctx, ks, vs); err != nil {
					t.Fatal(err)
				}
			default:
				if err := tr.Compact(ctx); err != nil {
					t.Fatal(err)
				}
			}
			where := fmt.Sprintf("seed %d step %d", seed, step)
			// Vacuum every other Close (what it leaves then is what the
			// closed snapshot no longer pins) and every sixth step, with no
			// draw from rng: the sequences stay as they were.
			if closed && closes%2 == 1 || step%6 == 5 {
				vacuumed(t, where, tr)
			}
			same[K, V](t, where+" latest", tr, func() ([]K, []V) { return collect(tr.All(ctx)) }, latest, probes())
			for _, o := range snaps {
				s := o.s
				same[K, V](t, fmt.Sprintf("%s snapshot %d", where, s.Version()), s, func() ([]K, []V) { return collect(s.All(ctx)) }, o.m, probes())
			}
			if err := tr.Check(ctx); err != nil {
				t.Fatal(err)
			}
			st, err := tr.Stats(ctx)
			if err != nil || st.OpenSnapshots != len(snaps) || st.Keys != len(latest) {
				t.Fatalf("%s: stats %+v (%v), want %d open snapshots, %d keys", where, st, err, len(snaps), len(latest))
			}
		}
		if err := tr.Close(); err != nil {
			t.Fatal(err)
		}
		for _, o := range snaps {
			if _, err := o.s.Len(ctx); !errors.Is(err, warpkit.ErrClosed) {
				t.Fatalf("a snapshot after the tree's Close: %v", err)
			}
		}
	}
}

// TestSnapshotsBesideWriters: writers insert and delete whole batches
// (batch b is the keys b*64 .. b*64+63, inserted together, later deleted
// together) while other goroutines take snapshots, read them and close
// them; every snapshot holds whole batches only (updates are atomic), its
// contents never change while it is open, and once every snapshot is
// closed the registry is empty.
func TestSnapshotsBesideWriters(t *testing.T) {
	snapshotsBesideWriters(t, newCPUTree[uint32, uint32](t), 400, 50)
}

func snapshotsBesideWriters(t *testing.T, tr *Tree[uint32, uint32], batches, snapsPerReader int) {
	defer tr.Close()
	batch := func(b int) []uint32 {
		ks := make([]uint32, 64)
		for i := range ks {
			ks[i] = uint32(b*64 + i)
		}
		return ks
	}
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := w; b < batches; b += 2 {
				ks := batch(b)
				if err := tr.Insert(ctx, ks, ks); err != nil {
					t.Error(err)
					return
				}
				if b%3 == 0 {
					if err := tr.Delete(ctx, ks); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	whole := func(s *Snapshot[uint32, uint32]) ([]uint32, error) {
		ks, _ := collect(s.All(ctx))
		per := map[uint32]int{}
		for _, k := range ks {
			per[k/64]++
		}
		for b, n := range per {
			if n != 64 {
				return nil, fmt.Errorf("snapshot %d holds %d keys of batch %d", s.Version(), n, b)
			}
		}
		return ks, nil
	}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range snapsPerReader {
				s, err := tr.Snapshot(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				a, err := whole(s)
				if err != nil {
					t.Error(err)
				}
				b, _ := whole(s)
				if !slices.Equal(a, b) {
					t.Errorf("snapshot %d changed while open", s.Version())
				}
				if err := s.Close(); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	st, err := tr.Stats(ctx)
	if err != nil || st.OpenSnapshots != 0 || st.Timestamp != uint64(4*snapsPerReader) {
		t.Fatalf("stats %+v (%v)", st, err)
	}
	if err := tr.Check(ctx); err != nil {
		t.Fatal(err)
	}
	// Every snapshot closed: Vacuum takes the versions back to none.
	if err := tr.Vacuum(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := tr.Stats(ctx); err != nil || st.Versions != 0 || st.PinnedVersions != 0 || st.RetiredPending != 0 {
		t.Fatalf("after every Close and Vacuum: %+v (%v)", st, err)
	}
	if err := tr.Check(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestAscendBesideWrites: the tree's iterators walk a transient snapshot:
// a loop may update the tree it iterates (no deadlock) and sees the tree
// as it was when the iterator was made.
func TestAscendBesideWrites(t *testing.T) { ascendBesideWrites(t, newCPUTree[uint64, uint64](t)) }

func ascendBesideWrites(t *testing.T, tr *Tree[uint64, uint64]) {
	defer tr.Close()
	ks := []uint64{1, 2, 3, 4, 5}
	if err := tr.Insert(ctx, ks, ks); err != nil {
		t.Fatal(err)
	}
	seq, err := tr.AscendRange(ctx, 2, 5)
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for k := range seq {
		got = append(got, k)
		if err := tr.Insert(ctx, []uint64{k*10 + 1}, []uint64{0}); err != nil { // 21, 31, 41
			t.Fatal(err)
		}
		if err := tr.Delete(ctx, []uint64{4}); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(got, []uint64{2, 3, 4}) {
		t.Fatalf("iterated %v, want the tree as it was: [2 3 4]", got)
	}
	if n, _ := tr.Len(ctx); n != 7 {
		t.Fatalf("Len %d after the loop's writes, want 7", n)
	}
	seq, _ = tr.AscendGreaterOrEqual(ctx, 41)
	got = got[:0]
	for k := range seq {
		got = append(got, k)
	}
	if !slices.Equal(got, []uint64{41}) {
		t.Fatalf("AscendGreaterOrEqual(41) = %v", got)
	}
}

// TestContract: the structure contract's errors for the tree and its
// snapshots.
func TestContract(t *testing.T) {
	for _, o := range []Options{{Backend: 9}, {Copy: 7}, {MaxPoolBytes: -1}, {Streams: -2}} {
		if _, err := New[uint32, uint32](o); !errors.Is(err, warpkit.ErrInvalidArgument) {
			t.Errorf("New(%+v): %v, want ErrInvalidArgument", o, err)
		}
	}
	if _, err := cuda.Open(0); errors.Is(err, warpkit.ErrNoDevice) {
		if _, err := New[uint32, uint32](Options{Backend: warpkit.CUDA}); !errors.Is(err, warpkit.ErrNoDevice) {
			t.Errorf("Backend CUDA without a device: %v, want ErrNoDevice", err)
		}
		tr, err := New[uint32, uint32](Options{})
		if err != nil || tr.Backend() != warpkit.CPU {
			t.Errorf("Backend Auto without a device: %v", err)
		}
	}
	tr, err := New[uint32, uint32](Options{Backend: warpkit.CPU})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Backend() != warpkit.CPU {
		t.Fatal(tr.Backend())
	}
	for name, err := range map[string]error{
		"insert": tr.Insert(ctx, []uint32{1}, nil),
		"lookup": tr.Lookup(ctx, []uint32{1}, []uint32{0}, nil),
		"count":  tr.Count(ctx, []uint32{1}, nil, []uint32{0}),
	} {
		if !errors.Is(err, warpkit.ErrInvalidArgument) {
			t.Errorf("%s with slices of different lengths: %v", name, err)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := tr.Insert(cancelled, []uint32{1}, []uint32{1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled context: %v", err)
	}
	if _, err := tr.Snapshot(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("a snapshot with a cancelled context: %v", err)
	}
	s, err := tr.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Count(ctx, []uint32{1}, []uint32{2, 3}, []uint32{0}); !errors.Is(err, warpkit.ErrInvalidArgument) {
		t.Fatalf("snapshot count with slices of different lengths: %v", err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	calls := map[string]error{
		"insert":  tr.Insert(ctx, []uint32{1}, []uint32{1}),
		"delete":  tr.Delete(ctx, []uint32{1}),
		"build":   tr.Build(ctx, nil, nil),
		"lookup":  tr.Lookup(ctx, nil, nil, nil),
		"vacuum":  tr.Vacuum(ctx),
		"restamp": tr.Restamp(ctx),
		"check":   tr.Check(ctx),
		"compact": tr.Compact(ctx),
		"close":   tr.Close(),
		"s.close": s.Close(),
		"s.count": s.Count(ctx, nil, nil, nil),
	}
	_, calls["snapshot"] = tr.Snapshot(ctx)
	_, calls["stats"] = tr.Stats(ctx)
	_, calls["range"] = tr.Range(ctx, nil, nil)
	_, calls["all"] = tr.All(ctx)
	_, calls["s.all"] = s.All(ctx)
	for name, err := range calls {
		if !errors.Is(err, warpkit.ErrClosed) {
			t.Errorf("%s after Close: %v", name, err)
		}
	}
}

// TestGenerationsBesideClose on the CPU backend: Check reads each open
// snapshot under the snapshot's own front, so a Close beside it neither
// races it nor leaves it a dropped view to scan.
func TestGenerationsBesideClose(t *testing.T) {
	generationsBesideClose(t, newCPUTree[uint32, uint32](t), 20)
}
