package arenaskl

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"

	"github.com/warpkit/warpkit/kv/internal/base"
)

type entry struct {
	k base.InternalKey
	v string
}

func sortEntries(es []entry) {
	sort.Slice(es, func(i, j int) bool { return base.CompareInternal(es[i].k, es[j].k) < 0 })
}

func newList(t testing.TB, size int) *Skiplist {
	s, err := New(NewArena(size))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAddAndIterate(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	s := newList(t, 8<<20)
	var model []entry
	for i := range 20000 {
		k := base.MakeInternalKey([]byte(fmt.Sprintf("key%05d", rng.IntN(5000))), base.SeqNum(i+1), base.KindSet)
		v := fmt.Sprint(i)
		if err := s.Add(k, []byte(v)); err != nil {
			t.Fatal(err)
		}
		model = append(model, entry{k, v})
	}
	if err := s.Add(model[7].k, nil); !errors.Is(err, ErrRecordExists) {
		t.Fatalf("duplicate add: %v", err)
	}
	sortEntries(model)
	if s.Len() != len(model) {
		t.Fatalf("Len %d", s.Len())
	}
	it := s.NewIter()
	i := 0
	for ok := it.First(); ok; ok = it.Next() {
		if base.CompareInternal(it.Key(), model[i].k) != 0 || string(it.Value()) != model[i].v {
			t.Fatalf("entry %d: %v=%q want %v=%q", i, it.Key(), it.Value(), model[i].k, model[i].v)
		}
		i++
	}
	if i != len(model) {
		t.Fatalf("forward: %d entries", i)
	}
	i = len(model) - 1
	for ok := it.Last(); ok; ok = it.Prev() {
		if base.CompareInternal(it.Key(), model[i].k) != 0 {
			t.Fatalf("backward %d: %v want %v", i, it.Key(), model[i].k)
		}
		i--
	}
	if i != -1 {
		t.Fatalf("backward stopped at %d", i)
	}
	for range 2000 {
		probe := []byte(fmt.Sprintf("key%05d", rng.IntN(5100)))
		j := sort.Search(len(model), func(j int) bool { return bytes.Compare(model[j].k.UserKey, probe) >= 0 })
		if ok := it.SeekGE(probe); ok != (j < len(model)) || (ok && base.CompareInternal(it.Key(), model[j].k) != 0) {
			t.Fatalf("SeekGE(%s)", probe)
		}
		if ok := it.SeekLT(probe); ok != (j > 0) || (ok && base.CompareInternal(it.Key(), model[j-1].k) != 0) {
			t.Fatalf("SeekLT(%s)", probe)
		}
	}
}

func TestArenaFull(t *testing.T) {
	s := newList(t, 4096)
	n := 0
	for {
		err := s.Add(base.MakeInternalKey([]byte(fmt.Sprint(n)), base.SeqNum(n+1), base.KindSet), make([]byte, 100))
		if errors.Is(err, ErrArenaFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n == 0 || n > 4096/100 {
		t.Fatalf("%d entries fit", n)
	}
	if s.arena.Size() > s.arena.Capacity() {
		t.Fatal("arena overran")
	}
	it := s.NewIter()
	c := 0
	for ok := it.First(); ok; ok = it.Next() {
		c++
	}
	if c != n {
		t.Fatalf("iterated %d, added %d", c, n)
	}
}

func TestConcurrentAddAndRead(t *testing.T) {
	s := newList(t, 32<<20)
	const writers, per = 4, 5000
	var wg sync.WaitGroup
	stop := make(chan struct{})
	// A reader checks order while writers insert.
	wg.Add(1)
	go func() {
		defer wg.Done()
		it := s.NewIter()
		for {
			select {
			case <-stop:
				return
			default:
			}
			var prev base.InternalKey
			have := false
			for ok := it.First(); ok; ok = it.Next() {
				if have && base.CompareInternal(prev, it.Key()) >= 0 {
					t.Errorf("out of order: %v then %v", prev, it.Key())
					return
				}
				prev, have = it.Key().Clone(), true
			}
		}
	}()
	var ww sync.WaitGroup
	for w := range writers {
		ww.Add(1)
		go func() {
			defer ww.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			for i := range per {
				seq := base.SeqNum(w*per + i + 1)
				k := base.MakeInternalKey([]byte(fmt.Sprintf("k%06d", rng.IntN(20000))), seq, base.KindSet)
				if err := s.Add(k, []byte("v")); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	ww.Wait()
	close(stop)
	wg.Wait()
	if s.Len() != writers*per {
		t.Fatalf("Len %d", s.Len())
	}
	n := 0
	it := s.NewIter()
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	if n != writers*per {
		t.Fatalf("iterated %d", n)
	}
	// Concurrent adds of the same key: exactly one wins.
	var wins sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for range 8 {
		wins.Add(1)
		go func() {
			defer wins.Done()
			if s.Add(base.MakeInternalKey([]byte("same"), 1<<40, base.KindSet), nil) == nil {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		}()
	}
	wins.Wait()
	if ok != 1 {
		t.Fatalf("%d concurrent adds of one key succeeded", ok)
	}
}

func BenchmarkAdd(b *testing.B) {
	s := newList(b, 1<<30)
	rng := rand.New(rand.NewPCG(1, 1))
	key := make([]byte, 16)
	val := make([]byte, 100)
	b.ResetTimer()
	for i := range b.N {
		for j := range key {
			key[j] = byte(rng.Uint32())
		}
		if err := s.Add(base.MakeInternalKey(key, base.SeqNum(i+1), base.KindSet), val); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAddMemtable inserts random 16-byte keys with 100-byte values
// into lists of a memtable's size (a 4 MiB arena, about 28,000 entries),
// starting a new list whenever one is full: the commit path's insert.
func BenchmarkAddMemtable(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	key := make([]byte, 16)
	val := make([]byte, 100)
	s := newList(b, 4<<20)
	b.ResetTimer()
	for i := range b.N {
		for j := range key {
			key[j] = byte(rng.Uint32())
		}
		err := s.Add(base.MakeInternalKey(key, base.SeqNum(i+1), base.KindSet), val)
		if err == ErrArenaFull {
			b.StopTimer()
			s = newList(b, 4<<20)
			b.StartTimer()
			err = s.Add(base.MakeInternalKey(key, base.SeqNum(i+1), base.KindSet), val)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}
