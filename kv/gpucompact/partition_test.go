package gpucompact

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/kv/compaction"
	ct "github.com/warpkit/warpkit/kv/compaction/compactiontest"
	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/manifest"
	"github.com/warpkit/warpkit/kv/sstable"
)

// partitionedIn runs each job in key-range partitions (runPartitioned) cut
// at random keys: bounds of the job's input blocks, and keys just past and
// just before them (so splits fall inside blocks, between a key's
// versions' blocks, before the first key and past the last), with the
// engine of dev (nil: the Go engine), one partition at a time or, in every
// other job, two (the second lane's engine dev2). parts, when set, counts
// the partitions run.
func partitionedIn(dev, dev2 *devEngine, seed uint64, parts *int) func(*workspace) compactFunc {
	rng := rand.New(rand.NewPCG(seed, 61))
	ws2 := &workspace{}
	jobs := 0
	return func(ws *workspace) compactFunc {
		return func(ctx context.Context, job *compaction.Job) (*compaction.Result, error) {
			ratio, err := compaction.CutRatio(job)
			if err != nil {
				return nil, err
			}
			plan, err := splitJob(job, compaction.CutLimit(job.TargetFileSize, ratio), 0, func(jobSize) bool { return true })
			if err != nil {
				return nil, err
			}
			plan.splits, plan.fits = nil, nil
			for range 1 + rng.IntN(12) {
				if len(plan.blocks) == 0 {
					break
				}
				k := bytes.Clone(plan.blocks[rng.IntN(len(plan.blocks))].upper)
				switch rng.IntN(3) {
				case 1:
					k = append(k, 0)
				case 2:
					k = k[:rng.IntN(len(k)+1)]
				}
				plan.splits = append(plan.splits, k)
			}
			slices.SortFunc(plan.splits, bytes.Compare)
			plan.splits = slices.CompactFunc(plan.splits, bytes.Equal)
			lanes := []*lane{{ws: ws, dev: dev}}
			if jobs++; jobs%2 == 0 {
				lanes = append(lanes, &lane{ws: ws2, dev: dev2})
			}
			res, n, err := runPartitioned(ctx, job, plan, lanes, &stageTimes{}, nil)
			if parts != nil {
				*parts += n
			}
			return res, err
		}
	}
}

// TestGoEnginePartitioned: jobs run in key-range partitions cut at random
// keys write the same tables, metadata and Stats as compaction.CPU{Parts:
// 1} over the whole job: the identity suite's random jobs (snapshots,
// point and range tombstones, levels below, grandparents, every writer
// option), the spec's matrix and multi-MiB jobs.
func TestGoEnginePartitioned(t *testing.T) {
	rounds := 300
	if testing.Short() {
		rounds = 60
	}
	parts := 0
	checkIdentical(t, rounds, "go", partitionedIn(nil, nil, 1, &parts))
	checkMatrix(t, rounds/3, partitionedIn(nil, nil, 2, &parts)(&workspace{}))
	checkLarge(t, 3, partitionedIn(nil, nil, 3, &parts)(&workspace{}))
	if parts < 2*rounds {
		t.Fatalf("%d partitions over %d jobs: too few to test cutting", parts, rounds+rounds/3+2)
	}
	t.Logf("%d partitions", parts)
}

// TestPartitionedCompactor: a job over MemoryBudget runs on the engine in
// partitions the plan cuts from the input tables' index blocks (Stats
// count them), with compaction.CPU's output; one whose blocks cannot be cut
// to fit the budget still goes to Fallback ("budget").
func TestPartitionedCompactor(t *testing.T) {
	for _, valueLen := range []int{100, 1024} {
		e, job := benchJob(t, 3, valueLen)
		job.TargetFileSize = 128 << 10
		want, err := compaction.CPU{Parts: 1}.Compact(context.Background(), job)
		if err != nil {
			t.Fatal(err)
		}
		wantFiles := outputsOf(t, e, want)
		size, err := memoryEstimate(job)
		if err != nil {
			t.Fatal(err)
		}
		// (The estimate counts 320 KiB per output table for its Writer: with
		// these small outputs a partition needs a third of the job's.)
		for _, div := range []float64{1.5, 2} {
			c, err := New(Options{Backend: warpkit.CPU, Fallback: compaction.CPU{Parts: 1}, MinInputBytes: -1, MemoryBudget: int64(float64(size.est) / div)})
			if err != nil {
				t.Fatal(err)
			}
			e, job := benchJob(t, 3, valueLen)
			job.TargetFileSize = 128 << 10
			got, err := c.Compact(context.Background(), job)
			if err != nil {
				t.Fatal(err)
			}
			sameFiles(t, fmt.Sprintf("%d-byte values, budget 1/%g", valueLen, div), outputsOf(t, e, got), wantFiles)
			st := c.Stats()
			if st.EngineJobs != 1 || st.PartitionedJobs != 1 || float64(st.Partitions) < div || st.Declined["budget"] != 0 {
				t.Fatalf("%d-byte values, budget 1/%g: stats %+v", valueLen, div, st)
			}
			if g, w := got.Stats, want.Stats; g.EntriesIn != w.EntriesIn || g.EntriesOut != w.EntriesOut || g.BytesWritten != w.BytesWritten {
				t.Fatalf("%d-byte values, budget 1/%g: stats %+v, compaction.CPU %+v", valueLen, div, g, w)
			}
			t.Logf("%d-byte values, budget 1/%g of %d bytes: %d partitions", valueLen, div, size.est, st.Partitions)
			c.Close()
		}
	}
	// Too small for any partition: a decline.
	e, job := benchJob(t, 1, 100)
	c, _ := New(Options{Backend: warpkit.CPU, Fallback: compaction.CPU{Parts: 1}, MinInputBytes: -1, MemoryBudget: 64 << 10})
	defer c.Close()
	res, err := c.Compact(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	outputsOf(t, e, res)
	if st := c.Stats(); st.Declined["budget"] != 1 || st.PartitionedJobs != 0 {
		t.Fatalf("a budget below any partition: stats %+v", st)
	}
}

// TestPartitionBlocks: a partition reads exactly the blocks whose bounds
// may hold its keys.
func TestPartitionBlocks(t *testing.T) {
	upper := [][]byte{[]byte("b"), []byte("d"), []byte("d"), []byte("f")}
	for _, c := range []struct {
		lo, hi   string
		from, to int
	}{
		{"", "", 0, 4}, // unbounded
		{"a", "b", 0, 1},
		{"b", "c", 0, 2}, // b may be in block 0 and block 1
		{"c", "d", 1, 2},
		{"d", "e", 1, 4},
		{"e", "", 3, 4},
		{"g", "", 4, 4},
		{"", "a", 0, 1},
	} {
		p := &partition{}
		if c.lo != "" {
			p.lo = []byte(c.lo)
		}
		if c.hi != "" {
			p.hi = []byte(c.hi)
		}
		if from, to := p.blocks(upper); from != c.from || to != c.to {
			t.Errorf("[%q, %q): blocks [%d, %d), want [%d, %d)", c.lo, c.hi, from, to, c.from, c.to)
		}
	}
}

// TestPartitionEntriesChecked: partitions whose entries do not add up to
// the tables' (an index that does not bound its blocks' keys would lose
// some between partitions) fail the job with errPartitionEntries, which
// the Compactor declines to Fallback ("irregular").
func TestPartitionEntriesChecked(t *testing.T) {
	_, job := benchJob(t, 1, 100)
	plan, err := splitJob(job, job.TargetFileSize, 0, func(jobSize) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	plan.splits = [][]byte{plan.blocks[len(plan.blocks)/2].upper}
	plan.entries++
	if _, _, err := runPartitioned(context.Background(), job, plan, []*lane{{ws: &workspace{}}, {ws: &workspace{}}}, &stageTimes{}, nil); !errors.Is(err, errPartitionEntries) {
		t.Fatalf("entries one short of the properties': %v", err)
	}
}

// TestPartitionedFallback: a partitioned job that fails at any stage of its
// second partition (after the first wrote its tables) is rerun whole on
// Fallback, with compaction.CPU's output, every reader released and the
// goroutines back to their number.
func TestPartitionedFallback(t *testing.T) {
	base := runtime.NumGoroutine()
	e0, job0 := benchJob(t, 2, 100)
	job0.TargetFileSize = 64 << 10
	want, err := compaction.CPU{Parts: 1}.Compact(context.Background(), job0)
	if err != nil {
		t.Fatal(err)
	}
	wantFiles := outputsOf(t, e0, want)
	size, err := memoryEstimate(job0)
	if err != nil {
		t.Fatal(err)
	}
	for _, stage := range []string{"load", "merge", "gc", "sizes", "plan", "encode", "write"} {
		c, err := New(Options{Backend: warpkit.CPU, Fallback: compaction.CPU{Parts: 1}, MinInputBytes: -1, MemoryBudget: int64(size.est / 2)})
		if err != nil {
			t.Fatal(err)
		}
		var calls atomic.Int64
		c.failAt = func(s string) error {
			if s == stage && calls.Add(1) == 2 {
				return errors.New("injected")
			}
			return nil
		}
		e, job := benchJob(t, 2, 100)
		job.TargetFileSize = 64 << 10
		got, err := c.Compact(context.Background(), job)
		if err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
		sameFiles(t, stage, outputsOf(t, e, got), wantFiles)
		if st := c.Stats(); st.Fallbacks[stage] != 1 || st.FallbackJobs != 1 || st.EngineJobs != 0 || calls.Load() < 2 {
			t.Fatalf("%s: stats %+v (%d calls)", stage, st, calls.Load())
		}
		if e.Held() != 0 {
			t.Fatalf("%s: %d readers held", stage, e.Held())
		}
		c.Close()
		if n := goroutinesBackTo(base); n > base {
			t.Fatalf("%s: %d goroutines after the fallback, %d before", stage, n, base)
		}
	}
}

// TestPartitionPlanLimits: budgets that leave a partition room for few
// output tables, and a block that alone takes most of a budget, either run
// in partitions — with compaction.CPU's output, each prepared about once
// (a partition that must widen jumps to the farthest split that fits) —
// or are declined ("budget"): by the plan, before any partition is read,
// or after a partition would have had to widen past the budgets.
func TestPartitionPlanLimits(t *testing.T) {
	type shape struct {
		name string
		job  func() (*ct.Env, *compaction.Job)
	}
	shapes := []shape{
		{"16 MiB, 1 MiB outputs", func() (*ct.Env, *compaction.Job) {
			e, job := benchJob(t, 16, 100)
			job.TargetFileSize = 1 << 20
			return e, job
		}},
		{"a 2 MiB value mid-job", func() (*ct.Env, *compaction.Job) {
			e := ct.NewEnv()
			opts := sstable.WriterOptions{BlockSize: 4096}
			rng := rand.New(rand.NewPCG(1, 1))
			var tables []*manifest.FileMetadata
			seq := base.SeqNum(1)
			for tt := range 2 {
				var es []ct.Entry
				for i := tt; i < 20000; i += 2 {
					v := make([]byte, 100)
					if i == 10000 {
						v = make([]byte, 2<<20)
					}
					for j := range v {
						v[j] = byte(rng.Uint32())
					}
					es = append(es, ct.Entry{K: base.MakeInternalKey([]byte(fmt.Sprintf("k%06d", i)), seq, base.KindSet), V: string(v)})
					seq++
				}
				tables = append(tables, e.TableWith(t, es, nil, opts))
			}
			env := e.Env()
			env.WriterOptions = opts
			return e, &compaction.Job{Inputs: []compaction.Input{{Level: 0, Files: tables}}, OutputLevel: 1, TargetFileSize: 256 << 10, Env: env}
		}},
	}
	for _, sh := range shapes {
		e0, job0 := sh.job()
		want, err := compaction.CPU{Parts: 1}.Compact(context.Background(), job0)
		if err != nil {
			t.Fatal(err)
		}
		wantFiles := outputsOf(t, e0, want)
		size, err := memoryEstimate(job0)
		if err != nil {
			t.Fatal(err)
		}
		for _, div := range []uint64{2, 3, 4, 6} {
			c, err := New(Options{Backend: warpkit.CPU, Fallback: compaction.CPU{Parts: 1}, MinInputBytes: -1, MemoryBudget: int64(size.est / div)})
			if err != nil {
				t.Fatal(err)
			}
			var loads atomic.Int64
			c.failAt = func(stage string) error {
				if stage == "load" {
					loads.Add(1)
				}
				return nil
			}
			e, job := sh.job()
			got, err := c.Compact(context.Background(), job)
			if err != nil {
				t.Fatal(err)
			}
			sameFiles(t, fmt.Sprintf("%s, budget 1/%d", sh.name, div), outputsOf(t, e, got), wantFiles)
			st := c.Stats()
			switch {
			case st.PartitionedJobs == 1 && int64(st.Partitions) >= 2 && loads.Load() <= 2*int64(st.Partitions)+2:
			case st.Declined["budget"] == 1 && st.EngineJobs == 0 && loads.Load() <= 4:
			default:
				t.Fatalf("%s, budget 1/%d: %d partitions prepared %d times; stats %+v", sh.name, div, st.Partitions, loads.Load(), st)
			}
			t.Logf("%s, budget 1/%d: %d partitions, %d prepares, declined %v", sh.name, div, st.Partitions, loads.Load(), st.Declined)
			c.Close()
		}
	}
}
