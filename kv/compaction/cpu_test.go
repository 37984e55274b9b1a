package compaction_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/warpkit/warpkit/kv/compaction"
	ct "github.com/warpkit/warpkit/kv/compaction/compactiontest"
	"math/rand/v2"
	"testing"

	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/manifest"
)

func TestCPUCompactionPreservesEverySnapshot(t *testing.T) {
	for round := range 40 {
		rng := rand.New(rand.NewPCG(uint64(round), 3))
		e := ct.NewEnv()
		job, allE, allT := ct.RandomJob(t, rng, e)
		snaps := job.Snapshots
		res, err := compaction.CPU{}.Compact(context.Background(), job)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if e.Held() != 0 {
			t.Fatalf("round %d: %d readers not released", round, e.Held())
		}
		outE, outT := e.ReadAll(t, res.Outputs)
		// Structure: sorted, disjoint, no user key split across outputs.
		v := &manifest.Version{}
		v.Levels[1] = res.Outputs
		if err := v.CheckOrdering(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		// Semantics: every key reads the same at every snapshot and at the end.
		for _, s := range append(append([]base.SeqNum(nil), snaps...), base.SeqNumMax) {
			for k := range 61 {
				ks := fmt.Sprintf("k%03d", k)
				wv, wok := ct.Visible(allE, allT, ks, s)
				gv, gok := ct.Visible(outE, outT, ks, s)
				if wv != gv || wok != gok {
					t.Fatalf("round %d: %s at snapshot %d: got %q,%v want %q,%v (snaps %v)", round, ks, s, gv, gok, wv, wok, snaps)
				}
			}
		}
		if len(outE) > len(allE) {
			t.Fatalf("round %d: compaction grew the entry count", round)
		}
		if job.Lower == nil && len(snaps) == 0 {
			for _, x := range outE {
				if x.K.Kind() == base.KindDelete {
					t.Fatalf("round %d: bottom compaction kept tombstone %v", round, x.K)
				}
			}
			if len(outT) > 0 {
				t.Fatalf("round %d: bottom compaction kept range tombstones", round)
			}
		}
	}
}

func TestStripeOf(t *testing.T) {
	snaps := []base.SeqNum{10, 20}
	for _, tc := range []struct {
		q    base.SeqNum
		want int
	}{{1, 0}, {10, 0}, {11, 1}, {20, 1}, {21, 2}} {
		if got := compaction.StripeOf(snaps, tc.q); got != tc.want {
			t.Errorf("compaction.StripeOf(%d) = %d want %d", tc.q, got, tc.want)
		}
	}
	if compaction.StripeOf(nil, 5) != 0 {
		t.Error("no snapshots: one stripe")
	}
}

func TestCanceled(t *testing.T) {
	e := ct.NewEnv()
	var es []ct.Entry
	for i := range 5000 {
		es = append(es, ct.Entry{K: base.MakeInternalKey([]byte(fmt.Sprintf("k%05d", i)), base.SeqNum(i+1), base.KindSet), V: "v"})
	}
	f := e.Table(t, es, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := compaction.CPU{}.Compact(ctx, &compaction.Job{Inputs: []compaction.Input{{0, []*manifest.FileMetadata{f}}}, OutputLevel: 1, TargetFileSize: 1 << 20, Env: e.Env()})
	if err == nil {
		t.Fatal("canceled compaction succeeded")
	}
	if !bytes.Contains([]byte(err.Error()), []byte("canceled")) {
		t.Fatal(err)
	}
}

// TestSubcompactionsIdentical: a job split into parts writes exactly the
// entries the same job writes in one part — the same point entries in the
// same order, the same reads at every snapshot through the range
// tombstones — with outputs still sorted, disjoint and in key order.
func TestSubcompactionsIdentical(t *testing.T) {
	for round := range 60 {
		rng := rand.New(rand.NewPCG(uint64(round), 17))
		e := ct.NewEnv()
		job, _, _ := ct.RandomJob(t, rng, e)
		one, err := compaction.CPU{Parts: 1}.Compact(context.Background(), job)
		if err != nil {
			t.Fatal(err)
		}
		parts := 2 + rng.IntN(6)
		split := compaction.CPU{Parts: parts, MinPartBytes: 1}
		if b := split.SplitPoints(job); len(b) == 0 {
			t.Fatalf("round %d: %d parts asked, the job was not split", round, parts)
		}
		many, err := split.Compact(context.Background(), job)
		if err != nil {
			t.Fatal(err)
		}
		if e.Held() != 0 {
			t.Fatalf("round %d: %d readers not released", round, e.Held())
		}
		v := &manifest.Version{}
		v.Levels[1] = many.Outputs
		if err := v.CheckOrdering(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		oneE, oneT := e.ReadAll(t, one.Outputs)
		manyE, manyT := e.ReadAll(t, many.Outputs)
		if len(oneE) != len(manyE) {
			t.Fatalf("round %d: %d entries in one part, %d in %d parts", round, len(oneE), len(manyE), parts)
		}
		for i := range oneE {
			if base.CompareInternal(oneE[i].K, manyE[i].K) != 0 || oneE[i].V != manyE[i].V {
				t.Fatalf("round %d: entry %d: %v=%q in one part, %v=%q in parts", round, i, oneE[i].K, oneE[i].V, manyE[i].K, manyE[i].V)
			}
		}
		if one.Stats.EntriesIn != many.Stats.EntriesIn || one.Stats.EntriesOut != many.Stats.EntriesOut ||
			one.Stats.TombstonesElided != many.Stats.TombstonesElided || one.Stats.RangeDelsDropped != many.Stats.RangeDelsDropped {
			t.Fatalf("round %d: stats %+v in one part, %+v in parts", round, one.Stats, many.Stats)
		}
		// Range tombstones: the same cover at every key and snapshot (parts
		// only cut fragments at their boundaries).
		for _, s := range append(append([]base.SeqNum(nil), job.Snapshots...), base.SeqNumMax) {
			for k := range 61 {
				ks := fmt.Sprintf("k%03d", k)
				if ct.Covered(oneT, ks, s) != ct.Covered(manyT, ks, s) {
					t.Fatalf("round %d: %s at %d covered %v in one part, %v in parts", round, ks, s, ct.Covered(oneT, ks, s), ct.Covered(manyT, ks, s))
				}
			}
		}
	}
}

// covered returns the newest range tombstone sequence number at or below
// snap that covers key (0: none).
// TestSubcompactionFailure: a part that fails fails the job, the others
// stop, and every reader is released.
func TestSubcompactionFailure(t *testing.T) {
	for round := range 20 {
		rng := rand.New(rand.NewPCG(uint64(round), 29))
		e := ct.NewEnv()
		job, _, _ := ct.RandomJob(t, rng, e)
		e.FailCreate(1 + rng.IntN(3))
		_, err := compaction.CPU{Parts: 4, MinPartBytes: 1}.Compact(context.Background(), job)
		if err != nil && !errors.Is(err, ct.ErrInjected) {
			t.Fatalf("round %d: %v, want the injected failure", round, err)
		}
		if err == nil && !e.CreateFailurePending() {
			t.Fatalf("round %d: a CreateTable failed and the job succeeded", round)
		}
		if e.Held() != 0 {
			t.Fatalf("round %d: %d readers not released", round, e.Held())
		}
	}
}
