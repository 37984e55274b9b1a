package memtable

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/internal/batchrepr"
)

func batch(seq base.SeqNum, entries ...[3]string) []byte {
	b := make([]byte, batchrepr.HeaderLen)
	for _, e := range entries {
		kind := map[string]base.Kind{"set": base.KindSet, "del": base.KindDelete, "rdel": base.KindRangeDelete}[e[0]]
		b = batchrepr.AppendEntry(b, kind, []byte(e[1]), []byte(e[2]))
	}
	batchrepr.SetSeqNum(b, seq)
	batchrepr.SetCount(b, uint32(len(entries)))
	return b
}

func TestGetSeesNewestVisible(t *testing.T) {
	m := New(1<<20, 7)
	for _, b := range [][]byte{
		batch(1, [3]string{"set", "a", "1"}, [3]string{"set", "b", "1"}),
		batch(3, [3]string{"set", "a", "2"}, [3]string{"del", "b", ""}),
		batch(5, [3]string{"rdel", "a", "c"}),
	} {
		_, n, _ := batchrepr.Header(b)
		if !m.Reserve(NeededBytes(len(b), n)) {
			t.Fatal("reserve")
		}
		if err := m.Apply(b); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		key  string
		snap base.SeqNum
		val  string
		kind base.Kind
		ok   bool
	}{
		{"a", 0, "", 0, false},
		{"a", 1, "1", base.KindSet, true},
		{"a", 2, "1", base.KindSet, true},
		{"a", 3, "2", base.KindSet, true},
		{"b", 4, "", base.KindDelete, true},
		{"c", 9, "", 0, false},
	} {
		v, kind, _, ok := m.Get([]byte(tc.key), tc.snap)
		if ok != tc.ok || (ok && (kind != tc.kind || string(v) != tc.val)) {
			t.Errorf("Get(%s@%d) = %q %v %v", tc.key, tc.snap, v, kind, ok)
		}
	}
	rd := m.RangeDels()
	if rd.MaxCovering([]byte("b"), 9) != 5 || rd.MaxCovering([]byte("b"), 4) != 0 || rd.MaxCovering([]byte("c"), 9) != 0 {
		t.Fatal("range tombstone coverage")
	}
	if m.Count() != 5 || m.LogNum() != 7 || m.Empty() {
		t.Fatal("counts")
	}
}

func TestReserveBoundsArena(t *testing.T) {
	m := New(MinCapacity*4, 1)
	b := batch(1, [3]string{"set", "k", string(make([]byte, 100))})
	n := 0
	for m.Reserve(NeededBytes(len(b), 1)) {
		batchrepr.SetSeqNum(b, base.SeqNum(n+1))
		if err := m.Apply(b); err != nil {
			t.Fatalf("apply after successful reserve: %v", err)
		}
		n++
	}
	if n == 0 {
		t.Fatal("nothing fit")
	}
}

// TestApplyReservedFillsArena: batches that return what their reservation
// did not take (the store's commit path and recovery) fill the arena to what
// its capacity says, where the worst-case reservations alone stop at about
// two thirds; every Apply after a successful Reserve still fits, also with
// batches applied concurrently.
func TestApplyReservedFillsArena(t *testing.T) {
	const capacity = 1 << 20
	entry := func(n int) ([]byte, int64) {
		k := []byte{byte(n >> 16), byte(n >> 8), byte(n), 'k', 'e', 'y', '-', '-', '-', '-', '-', '-', '-', '-', '-', '-'}
		b := batch(base.SeqNum(n+1), [3]string{"set", string(k), string(make([]byte, 100))})
		return b, NeededBytes(len(b), 1)
	}
	fill := func(exact bool) int {
		m := New(capacity, 1)
		n := 0
		for {
			b, need := entry(n)
			if !m.Reserve(need) {
				break
			}
			var err error
			if exact {
				err = m.ApplyReserved(b, need)
			} else {
				err = m.Apply(b)
			}
			if err != nil {
				t.Fatalf("entry %d: apply after successful reserve: %v", n, err)
			}
			n++
		}
		if m.Size() > m.Capacity() {
			t.Fatalf("arena %d bytes of %d", m.Size(), m.Capacity())
		}
		if exact && m.Room() != int64(m.Capacity()-m.Size()) {
			t.Fatalf("room %d after every batch applied, arena has %d free", m.Room(), m.Capacity()-m.Size())
		}
		return n
	}
	plain, exact := fill(false), fill(true)
	// 124 bytes of key, value and trailer, a node header and one or two links.
	if perEntry := float64(capacity) / float64(exact); perEntry > 160 {
		t.Fatalf("with ApplyReserved %d entries, %.0f arena bytes each", exact, perEntry)
	}
	if float64(exact) < 1.25*float64(plain) {
		t.Fatalf("ApplyReserved fits %d entries, reservations alone %d", exact, plain)
	}

	// Concurrent writers, each reserving and applying its own batches.
	m := New(capacity, 1)
	var wg sync.WaitGroup
	var next atomic.Int64
	var fails atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				b, need := entry(int(next.Add(1)))
				if !m.Reserve(need) {
					return
				}
				if err := m.ApplyReserved(b, need); err != nil {
					fails.Add(1)
					return
				}
			}
		}()
	}
	wg.Wait()
	if fails.Load() != 0 {
		t.Fatalf("%d concurrent applies failed after successful reserves", fails.Load())
	}
	if float64(m.Count()) < 0.9*float64(exact) {
		t.Fatalf("concurrent writers fit %d entries, one writer %d", m.Count(), exact)
	}
	if testing.Verbose() {
		t.Logf("%d entries with ApplyReserved (%d concurrently), %d without", exact, m.Count(), plain)
	}
}
