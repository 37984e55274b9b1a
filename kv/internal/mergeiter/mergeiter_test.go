package mergeiter

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/manifest"
)

// sliceIter is a base.InternalIterator over sorted keys.
type sliceIter struct {
	keys   []base.InternalKey
	pos    int
	closed *int
}

func (s *sliceIter) set(p int) bool {
	s.pos = p
	return p >= 0 && p < len(s.keys)
}
func (s *sliceIter) SeekGE(k []byte) bool {
	return s.set(sort.Search(len(s.keys), func(i int) bool { return bytes.Compare(s.keys[i].UserKey, k) >= 0 }))
}
func (s *sliceIter) SeekLT(k []byte) bool {
	return s.set(sort.Search(len(s.keys), func(i int) bool { return bytes.Compare(s.keys[i].UserKey, k) >= 0 }) - 1)
}
func (s *sliceIter) First() bool { return s.set(0) }
func (s *sliceIter) Last() bool  { return s.set(len(s.keys) - 1) }
func (s *sliceIter) Next() bool {
	if s.pos >= len(s.keys) {
		return false
	}
	return s.set(s.pos + 1)
}
func (s *sliceIter) Prev() bool {
	if s.pos < 0 {
		return false
	}
	return s.set(s.pos - 1)
}
func (s *sliceIter) Key() base.InternalKey { return s.keys[s.pos] }
func (s *sliceIter) Value() []byte         { return []byte(s.keys[s.pos].String()) }
func (s *sliceIter) Error() error          { return nil }
func (s *sliceIter) Close() error {
	if s.closed != nil {
		*s.closed++
	}
	return nil
}

func sortKeys(ks []base.InternalKey) {
	sort.Slice(ks, func(i, j int) bool { return base.CompareInternal(ks[i], ks[j]) < 0 })
}

// walk drives it and a model (a sorted slice) through random moves and
// checks they agree.
func walk(t *testing.T, rng *rand.Rand, it base.InternalIterator, all []base.InternalKey, steps int) {
	t.Helper()
	pos := -1
	check := func(op string, ok bool) {
		t.Helper()
		want := pos >= 0 && pos < len(all)
		if ok != want || (ok && base.CompareInternal(it.Key(), all[pos]) != 0) {
			got := "invalid"
			if ok {
				got = it.Key().String()
			}
			exp := "invalid"
			if want {
				exp = all[pos].String()
			}
			t.Fatalf("%s: got %s want %s", op, got, exp)
		}
		if !want {
			pos = -1
		}
	}
	for range steps {
		k := []byte(fmt.Sprintf("%03d", rng.IntN(120)))
		switch r := rng.IntN(10); {
		case r == 0:
			pos = sort.Search(len(all), func(i int) bool { return bytes.Compare(all[i].UserKey, k) >= 0 })
			check("SeekGE "+string(k), it.SeekGE(k))
		case r == 1:
			pos = sort.Search(len(all), func(i int) bool { return bytes.Compare(all[i].UserKey, k) >= 0 }) - 1
			check("SeekLT "+string(k), it.SeekLT(k))
		case r == 2:
			pos = 0
			check("First", it.First())
		case r == 3:
			pos = len(all) - 1
			check("Last", it.Last())
		case r < 7:
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

func TestMergingMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for round := range 50 {
		var all []base.InternalKey
		var children []base.InternalIterator
		seq := base.SeqNum(1)
		for range 1 + rng.IntN(5) {
			var ks []base.InternalKey
			for range rng.IntN(40) {
				ks = append(ks, base.MakeInternalKey([]byte(fmt.Sprintf("%03d", rng.IntN(100))), seq, base.KindSet))
				seq++
			}
			sortKeys(ks)
			all = append(all, ks...)
			children = append(children, &sliceIter{keys: ks})
		}
		sortKeys(all)
		m := NewMerging(children...)
		walk(t, rng, m, all, 400)
		if err := m.Close(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
}

func TestLevelMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	for round := range 50 {
		// Disjoint tables over increasing key ranges, some empty of points.
		var files []*manifest.FileMetadata
		contents := map[base.FileNum][]base.InternalKey{}
		var all []base.InternalKey
		k := 0
		for f := range 1 + rng.IntN(6) {
			var ks []base.InternalKey
			for range rng.IntN(8) {
				k += 1 + rng.IntN(3)
				ks = append(ks, base.MakeInternalKey([]byte(fmt.Sprintf("%03d", k)), 5, base.KindSet))
			}
			lo := base.MakeInternalKey([]byte(fmt.Sprintf("%03d", k-7)), 5, base.KindSet)
			if len(ks) > 0 {
				lo = ks[0]
			}
			k++
			hi := base.MakeSentinel([]byte(fmt.Sprintf("%03d", k)))
			if lo.UserKey == nil || bytes.Compare(lo.UserKey, []byte(fmt.Sprintf("%03d", k-1))) > 0 {
				lo = base.MakeInternalKey([]byte(fmt.Sprintf("%03d", k-1)), 5, base.KindSet)
			}
			if len(files) > 0 && base.CompareInternal(files[len(files)-1].Largest, lo) >= 0 {
				lo = base.MakeInternalKey(hi.UserKey, 6, base.KindSet)
				hi = base.MakeSentinel([]byte(fmt.Sprintf("%03d", k+1)))
				k++
			}
			fm := &manifest.FileMetadata{FileNum: base.FileNum(f + 1), Smallest: lo, Largest: hi}
			files = append(files, fm)
			contents[fm.FileNum] = ks
			all = append(all, ks...)
		}
		open, closed := 0, 0
		l := NewLevel(files, func(f *manifest.FileMetadata) (base.InternalIterator, error) {
			open++
			return &sliceIter{keys: contents[f.FileNum], closed: &closed}, nil
		}, nil, nil)
		walk(t, rng, l, all, 300)
		l.Close()
		if open != closed {
			t.Fatalf("round %d: opened %d tables, closed %d", round, open, closed)
		}
	}
}
