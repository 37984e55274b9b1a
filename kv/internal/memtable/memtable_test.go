package memtable

import (
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

// TestReclaimFillsArena: reserving with Reclaim between batches (the
// store's commit path) fills the arena to what its capacity says, where the
// worst-case reservations alone stop at about two thirds, and every Apply
// after a successful Reserve still fits.
func TestReclaimFillsArena(t *testing.T) {
	const capacity = 1 << 20
	fill := func(reclaim bool) int {
		m := New(capacity, 1)
		n := 0
		for {
			k := []byte{byte(n >> 16), byte(n >> 8), byte(n), 'k', 'e', 'y', '-', '-', '-', '-', '-', '-', '-', '-', '-', '-'}
			b := batch(base.SeqNum(n+1), [3]string{"set", string(k), string(make([]byte, 100))})
			need := NeededBytes(len(b), 1)
			if !m.Reserve(need) {
				if !reclaim {
					break
				}
				m.Reclaim()
				if !m.Reserve(need) {
					break
				}
			}
			if err := m.Apply(b); err != nil {
				t.Fatalf("entry %d: apply after successful reserve: %v", n, err)
			}
			n++
		}
		if m.Size() > m.Capacity() {
			t.Fatalf("arena %d bytes of %d", m.Size(), m.Capacity())
		}
		return n
	}
	plain, reclaimed := fill(false), fill(true)
	// 124 bytes of key, value and trailer, a node header and one or two links.
	if perEntry := float64(capacity) / float64(reclaimed); perEntry > 160 {
		t.Fatalf("with Reclaim %d entries, %.0f arena bytes each", reclaimed, perEntry)
	}
	if float64(reclaimed) < 1.25*float64(plain) {
		t.Fatalf("Reclaim fits %d entries, reservations alone %d", reclaimed, plain)
	}
	if testing.Verbose() {
		t.Logf("%d entries with Reclaim, %d without", reclaimed, plain)
	}
}
