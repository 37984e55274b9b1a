package compaction_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/warpkit/warpkit/kv/compaction"
	ct "github.com/warpkit/warpkit/kv/compaction/compactiontest"
	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/manifest"
	"github.com/warpkit/warpkit/kv/sstable"
)

// gpTables returns grandparent tables [lo_i, hi_i] of size bytes each.
func gpTables(size uint64, ranges ...[2]string) []*manifest.FileMetadata {
	var gp []*manifest.FileMetadata
	for _, r := range ranges {
		gp = append(gp, &manifest.FileMetadata{
			Smallest: base.MakeInternalKey([]byte(r[0]), 0, base.KindSet),
			Largest:  base.MakeInternalKey([]byte(r[1]), 0, base.KindSet),
			Size:     size,
		})
	}
	return gp
}

// TestCutterRule walks the cut rule through each of its cases.
func TestCutterRule(t *testing.T) {
	gp := gpTables(10, [2]string{"b", "c"}, [2]string{"d", "e"}, [2]string{"f", "g"}, [2]string{"h", "i"})
	job := &compaction.Job{Grandparents: gp}
	type step struct {
		key  string
		size uint64
		cut  bool
	}
	cases := []struct {
		name   string
		lo, hi string
		max    uint64
		start  string
		steps  []step
	}{
		{name: "below half nothing cuts, not even a boundary", start: "a", steps: []step{
			{"b", 49, false}, {"d", 49, false}, {"f", 49, false}, {"h", 49, false}, {"j", 99, false},
		}},
		{name: "first boundary at half", start: "a", steps: []step{{"b", 50, true}}},
		{name: "each boundary passed raises the bar by 5%", start: "a", steps: []step{
			{"b", 10, false}, // passed 1
			{"d", 54, false}, // passed 2: 55% needed
			{"e", 70, false}, // no boundary here, 70 < 100
			{"f", 59, false}, // passed 3: 60%
			{"h", 65, true},  // passed 4: 65%
		}},
		{name: "two boundaries at once count both", start: "a", steps: []step{{"d", 54, false}, {"f", 60, true}}},
		{name: "at the limit only once no boundary is left", start: "a", steps: []step{
			{"a1", 150, false}, {"b1", 30, false}, {"j", 100, true},
		}},
		{name: "at twice the limit always", start: "a", steps: []step{{"a1", 199, false}, {"a2", 200, true}}},
		{name: "a cut restarts the count", start: "a", steps: []step{
			{"b", 10, false}, {"d", 60, true}, // passed 2 (55%): cut; the next output begins at d
			{"f", 50, true}, // its first boundary: 50%
		}},
		{name: "boundaries at or below the start are behind", start: "d", steps: []step{{"d1", 90, false}, {"f", 50, true}}},
		{name: "the part's upper bound ends the boundaries", start: "a", hi: "f", steps: []step{
			{"d", 10, false}, {"e", 100, true}, // f and h belong to the next part
		}},
		{name: "the part's lower bound", lo: "e", start: "e1", steps: []step{{"f", 50, true}}},
		{name: "the overlap rule at any size", start: "a", max: 15, steps: []step{
			{"c", 1, false},  // at c, b..c is not passed yet
			{"c1", 1, false}, // passes b..c: 10
			{"e1", 1, true},  // passes d..e: 20 > 15
			{"g1", 1, false}, // the count restarted: 10
		}},
	}
	for _, tc := range cases {
		job.MaxGrandparentOverlap = tc.max
		var lo, hi []byte
		if tc.lo != "" {
			lo = []byte(tc.lo)
		}
		if tc.hi != "" {
			hi = []byte(tc.hi)
		}
		c := compaction.NewCutter(job, 100, lo, hi)
		c.Start([]byte(tc.start))
		for i, s := range tc.steps {
			if got := c.Cut([]byte(s.key), s.size); got != s.cut {
				t.Fatalf("%s: step %d (%q at %d bytes): cut %v, want %v", tc.name, i, s.key, s.size, got, s.cut)
			}
		}
	}
}

// TestCutterQuiet: Quiet is false exactly from the first key that passes a
// grandparent or meets a boundary, and Cut leaves a quiet stretch's state
// as it was.
func TestCutterQuiet(t *testing.T) {
	gp := gpTables(10, [2]string{"b", "c"}, [2]string{"e", "f"})
	c := compaction.NewCutter(&compaction.Job{Grandparents: gp, MaxGrandparentOverlap: 100}, 100, nil, nil)
	c.Start([]byte("a"))
	for _, k := range []string{"a0", "a5", "az"} {
		if !c.Quiet([]byte(k)) {
			t.Fatalf("%q not quiet before the first boundary", k)
		}
	}
	for _, k := range []string{"b", "c", "d", "z"} {
		if c.Quiet([]byte(k)) {
			t.Fatalf("%q quiet at or past a boundary", k)
		}
	}
	if c.Cut([]byte("b"), 49) {
		t.Fatal("cut below half")
	}
	// Past b's boundary, before c is passed: quiet until c's successor.
	if !c.Quiet([]byte("c")) || c.Quiet([]byte("c0")) {
		t.Fatal("quiet stretch after b wrong")
	}
	if c.Cut([]byte("c"), 99) {
		t.Fatal("cut in a quiet stretch below the limit")
	}
}

// TestOutputsEndAtGrandparentBoundaries: a job over a level below of
// tables each holding about a third of an output's worth of the job's keys
// cuts every output but the last where a grandparent begins.
func TestOutputsEndAtGrandparentBoundaries(t *testing.T) {
	for round := range 4 {
		rng := rand.New(rand.NewPCG(uint64(round), 41))
		e := ct.NewEnv()
		opts := sstable.WriterOptions{BlockSize: 512 << rng.IntN(3)}
		job := compressibleJob(t, rng, e, opts, 48<<10)
		for i := 0; i < 4000; i += 100 {
			job.Grandparents = append(job.Grandparents, &manifest.FileMetadata{
				Smallest: base.MakeInternalKey([]byte(fmt.Sprintf("key%06d", i)), 0, base.KindSet),
				Largest:  base.MakeInternalKey([]byte(fmt.Sprintf("key%06d", i+99)), 0, base.KindSet),
				Size:     16 << 10,
			})
		}
		res, err := compaction.CPU{Parts: 1}.Compact(context.Background(), job)
		if err != nil {
			t.Fatal(err)
		}
		outs := res.Outputs
		if len(outs) < 4 {
			t.Fatalf("round %d: %d outputs", round, len(outs))
		}
		for i := 0; i+1 < len(outs); i++ {
			prev, next := outs[i].Largest.UserKey, outs[i+1].Smallest.UserKey
			aligned := false
			for _, g := range job.Grandparents {
				if s := g.Smallest.UserKey; bytes.Compare(prev, s) < 0 && bytes.Compare(s, next) <= 0 {
					aligned = true
				}
			}
			if !aligned {
				t.Fatalf("round %d: output %d ends at %q, output %d starts at %q: no grandparent begins between", round, i, prev, i+1, next)
			}
			if outs[i].Size > 2*job.TargetFileSize+uint64(opts.BlockSize)+1024 {
				t.Fatalf("round %d: output %d of %d bytes, limit %d", round, i, outs[i].Size, job.TargetFileSize)
			}
		}
	}
}
