package gpucompact

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/warpkit/warpkit/kv/compaction"
	ct "github.com/warpkit/warpkit/kv/compaction/compactiontest"
	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/internal/rangedel"
)

// TestKeptEntriesMatchCPU: load, merge and garbage collection keep exactly
// the entries compaction.CPU writes, in its order, with the same counts,
// over random jobs with overlapping L0 tables, an L1 run, snapshots, point
// and range tombstones, many versions of a key, and with and without levels
// below (tombstone elision).
func TestKeptEntriesMatchCPU(t *testing.T) {
	rounds := 300
	if testing.Short() {
		rounds = 60
	}
	ws := &workspace{} // shared by the rounds: each reuses the last one's arrays
	for round := range rounds {
		rng := rand.New(rand.NewPCG(uint64(round), 44))
		e := ct.NewEnv()
		job, _, _ := ct.RandomJob(t, rng, e)
		res, err := compaction.CPU{Parts: 1}.Compact(context.Background(), job)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := e.ReadAll(t, res.Outputs)

		s, err := loadJob(context.Background(), job, ws, nil)
		if err != nil {
			t.Fatal(err)
		}
		spans, _, _, releases, err := compaction.CollectSpans(job)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.setK0(); err != nil {
			t.Fatal(err)
		}
		order := s.merge(ws)
		kept, _, st, err := s.gc(order, job, spans, ws)
		if err != nil {
			t.Fatal(err)
		}
		checkHostPositions(t, round, s, order, ws, job, spans, st.tombstonesElided)
		for _, rel := range releases {
			rel()
		}
		if len(kept) != len(want) {
			t.Fatalf("round %d: %d entries kept, compaction.CPU wrote %d (snapshots %v, %d spans, lower %d)",
				round, len(kept), len(want), job.Snapshots, len(spans), len(job.Lower))
		}
		for i, id := range kept {
			if base.CompareInternal(s.internalKey(id), want[i].K) != 0 || string(s.value(id)) != want[i].V {
				t.Fatalf("round %d: entry %d is %v=%q, compaction.CPU wrote %v=%q", round, i, s.internalKey(id), s.value(id), want[i].K, want[i].V)
			}
		}
		cs := res.Stats
		if st.entriesIn != cs.EntriesIn || st.entriesOut != cs.EntriesOut || st.tombstonesElided != cs.TombstonesElided {
			t.Fatalf("round %d: in/out/elided %d/%d/%d, compaction.CPU %d/%d/%d", round,
				st.entriesIn, st.entriesOut, st.tombstonesElided, cs.EntriesIn, cs.EntriesOut, cs.TombstonesElided)
		}
		if e.Held() != 0 {
			t.Fatalf("round %d: %d readers not released", round, e.Held())
		}
	}
}

// checkHostPositions: the CUDA engine's host checks (checkPositions), given
// every position gc did not drop as shadowed, keep what gc kept and elide
// as many tombstones.
func checkHostPositions(t *testing.T, round int, s *inputSet, order []uint32, ws *workspace, job *compaction.Job, spans []rangedel.Span, elided uint64) {
	t.Helper()
	n := len(order)
	keep, newKey := ws.flags[:n], ws.flags[n:2*n]
	stripe := func(i int) int { return compaction.StripeOf(job.Snapshots, s.ents[order[i]].trailer.SeqNum()) }
	var ids []uint32
	var want []bool
	for i := range n {
		if i > 0 && !newKey[i] && stripe(i) == stripe(i-1) {
			continue // shadowed: the device drops it, the host never sees it
		}
		ids, want = append(ids, order[i]), append(want, keep[i])
	}
	verdict := make([]uint8, len(ids))
	if got := uint64(len(s.checkPositions(ids, verdict, job, spans))); got != elided {
		t.Fatalf("round %d: the host checks elided %d tombstones, gc %d", round, got, elided)
	}
	for c := range ids {
		if (verdict[c] == 1) != want[c] {
			t.Fatalf("round %d: the host checks keep %v of %v, gc %v", round, verdict[c], s.internalKey(ids[c]), want[c])
		}
	}
}
