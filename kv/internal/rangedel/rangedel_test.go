package rangedel

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/warpkit/warpkit/kv/internal/base"
)

// bruteMax is the oracle for MaxCovering.
func bruteMax(ts []Tombstone, key string, snap base.SeqNum) base.SeqNum {
	var m base.SeqNum
	for _, t := range ts {
		if string(t.Start) <= key && key < string(t.End) && t.Seq <= snap && t.Seq > m {
			m = t.Seq
		}
	}
	return m
}

func TestFragmentMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	k := func() []byte { return []byte(fmt.Sprintf("%02d", rng.IntN(30))) }
	for round := range 300 {
		var ts []Tombstone
		for i := range rng.IntN(12) {
			ts = append(ts, Tombstone{Start: k(), End: k(), Seq: base.SeqNum(i + 1 + rng.IntN(3))})
		}
		set := NewSet(ts)
		spans := set.Spans()
		for i := range spans {
			if string(spans[i].Start) >= string(spans[i].End) || len(spans[i].Seqs) == 0 {
				t.Fatalf("round %d: bad span %+v", round, spans[i])
			}
			if i > 0 && string(spans[i-1].End) > string(spans[i].Start) {
				t.Fatalf("round %d: overlapping spans", round)
			}
		}
		for key := range 31 {
			ks := fmt.Sprintf("%02d", key)
			for snap := base.SeqNum(0); snap < 16; snap++ {
				if got, want := set.MaxCovering([]byte(ks), snap), bruteMax(ts, ks, snap); got != want {
					t.Fatalf("round %d: MaxCovering(%s,%d)=%d want %d (%v)", round, ks, snap, got, want, ts)
				}
			}
		}
		// Flattening and refragmenting is the identity on coverage.
		again := NewSet(Tombstones(spans))
		for key := range 31 {
			ks := []byte(fmt.Sprintf("%02d", key))
			if again.MaxCovering(ks, 100) != set.MaxCovering(ks, 100) {
				t.Fatalf("refragmenting changed coverage at %s", ks)
			}
		}
	}
}

func TestTruncate(t *testing.T) {
	spans := Fragment([]Tombstone{{[]byte("a"), []byte("m"), 5}, {[]byte("k"), []byte("z"), 7}})
	got := Truncate(spans, []byte("c"), []byte("l"))
	if len(got) != 2 || string(got[0].Start) != "c" || string(got[1].End) != "l" {
		t.Fatalf("%+v", got)
	}
	if len(Truncate(spans, []byte("z"), nil)) != 0 {
		t.Fatal("empty truncation kept spans")
	}
	var nilSet *Set
	if !nilSet.Empty() || nilSet.MaxCovering([]byte("a"), 9) != 0 {
		t.Fatal("nil set")
	}
}
