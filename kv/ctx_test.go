package kv

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/warpkit/warpkit/kv/compaction"
	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/vfs"
)

// createThenWait creates an output table, writes into it, and then blocks
// at its gate (or until its context ends) before merging: a job cancelled
// there has an output to delete.
type createThenWait struct{ g *gate }

func (c createThenWait) Compact(ctx context.Context, job *compaction.Job) (*compaction.Result, error) {
	_, f, err := job.Env.CreateTable()
	if err != nil {
		return nil, err
	}
	f.Write([]byte("partial output"))
	f.Close()
	if err := c.g.wait(ctx); err != nil {
		return nil, err
	}
	return nil, errors.New("createThenWait: released (the tests only cancel it)")
}

// liveTables lists the tables the DB's current version holds.
func liveTables(db *DB) map[base.FileNum]bool {
	rs := db.loadReadState()
	defer rs.unref()
	out := map[base.FileNum]bool{}
	for _, l := range rs.version.Levels {
		for _, f := range l {
			out[f.FileNum] = true
		}
	}
	return out
}

// checkNoOrphans reopens the store and checks that the directory holds
// exactly the tables its manifest lists, and nothing went to lost/.
func checkNoOrphans(t *testing.T, mem *vfs.MemFS) {
	t.Helper()
	db, err := Open("/db", &Options{FS: mem, L0CompactionThreshold: 100, L0SlowdownWritesThreshold: 100, L0StopWritesThreshold: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if u := db.Metrics().Recovery.Unexplained; len(u) > 0 {
		t.Fatalf("unexplained tables after reopening: %v", u)
	}
	if dir, live := tableFiles(t, mem, "/db"), liveTables(db); !maps.Equal(dir, live) {
		t.Fatalf("tables in the directory %v, in the manifest %v", dir, live)
	}
	if names, err := mem.List(mem.PathJoin("/db", lostDir)); err == nil && len(names) > 0 {
		t.Fatalf("lost/ holds %v", names)
	}
}

// manualOptions are small options on fs whose L0 never triggers a
// compaction (nor slows or stops writes): the tests compact by hand, on c.
func manualOptions(fs vfs.FS, c compaction.Compactor) Options {
	opts := smallOptions()
	opts.FS = fs
	opts.Compactor = c
	opts.L0CompactionThreshold = 100
	opts.L0SlowdownWritesThreshold = 100
	opts.L0StopWritesThreshold = 100
	return opts
}

// openForManualCompaction opens a store whose only compactions are manual
// ones (compactor c) and fills it with a few L0 tables.
func openForManualCompaction(t *testing.T, c compaction.Compactor, ev *EventListener) (*DB, *vfs.MemFS) {
	t.Helper()
	mem := vfs.NewMem()
	opts := manualOptions(mem, c)
	opts.EventListener = ev
	db, err := Open("/db", &opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		for k := range 50 {
			db.Set([]byte(fmt.Sprintf("k%03d", k)), []byte(fmt.Sprint(i)), nil)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	return db, mem
}

// TestCompactCancelRunningJob: cancelling Compact's context while its job
// runs returns ctx.Err() promptly, deletes the job's outputs, leaves the
// inputs in place and the store writable, and reopens with no orphan.
func TestCompactCancelRunningJob(t *testing.T) {
	for _, deadline := range []bool{false, true} {
		t.Run(fmt.Sprintf("deadline=%v", deadline), func(t *testing.T) {
			l, ev := newEventLog(t)
			g := newGate()
			g.hold()
			db, mem := openForManualCompaction(t, createThenWait{g}, ev)
			before := liveTables(db)
			ctx, cancel := context.WithCancel(context.Background())
			want := context.Canceled
			if deadline {
				ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
				want = context.DeadlineExceeded
			}
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- db.Compact(ctx, nil, nil) }()
			g.waitEntered(t)
			if len(tableFiles(t, mem, "/db")) != len(before)+1 {
				t.Fatal("the job's output does not exist")
			}
			if !deadline {
				cancel()
			}
			select {
			case err := <-done:
				if !errors.Is(err, want) {
					t.Fatalf("Compact: %v, want %v", err, want)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Compact did not return after the cancellation")
			}
			// Returned after the cleanup: the output is gone, the inputs stay.
			if dir := tableFiles(t, mem, "/db"); !maps.Equal(dir, before) {
				t.Fatalf("tables after the cancelled compaction %v, before %v", dir, before)
			}
			if n := l.count("compaction-end"); n != 1 {
				t.Fatalf("compaction ends: %v", l.snapshot())
			}
			if m := db.Metrics(); m.BackgroundError != nil || m.Compaction.InProgress != 0 {
				t.Fatalf("after the cancellation: background error %v, %d compactions running", m.BackgroundError, m.Compaction.InProgress)
			}
			if err := db.Set([]byte("after"), []byte("v"), Sync); err != nil {
				t.Fatal(err)
			}
			mustGet(t, db, "k007", "2")
			g.release()
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			l.checkPaired(t)
			checkNoOrphans(t, mem)
		})
	}
}

// TestCompactCancelBetweenJobs: a Compact whose context ends between its
// jobs (after the first, L0->L1, of a compaction down to L2 or deeper)
// installs no further job: what the finished job installed stays, a job
// picked meanwhile is cancelled.
func TestCompactCancelBetweenJobs(t *testing.T) {
	mem := vfs.NewMem()
	opts := smallOptions()
	opts.FS = mem
	opts.StaticLevelSizes = true // L0, L1 and L2 all in use
	db, err := Open("/db", &opts)
	if err != nil {
		t.Fatal(err)
	}
	// Enough data for background compactions to fill L2.
	rng := rand.New(rand.NewPCG(1, 2))
	val := make([]byte, 200)
	for k := range 3000 {
		for i := range val {
			val[i] = byte(rng.Uint32())
		}
		db.Set([]byte(fmt.Sprintf("k%05d", k)), val, nil)
	}
	if err := db.WaitForCompactions(context.Background()); err != nil {
		t.Fatal(err)
	}
	if m := db.Metrics(); m.Levels[2].Tables == 0 {
		t.Fatalf("setup: tables per level %v, want some in L2", tablesPerLevel(m))
	}
	db.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var ok, failed int
	opts.EventListener = &EventListener{CompactionEnd: func(i CompactionInfo) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case i.Err == nil:
			ok++
		case errors.Is(i.Err, context.Canceled):
			failed++
		default:
			t.Errorf("compaction failed: %v", i.Err)
		}
		if i.Manual && i.OutputLevel == 1 {
			cancel() // before the next job is picked
		}
	}}
	opts.L0CompactionThreshold = 100
	opts.L0SlowdownWritesThreshold = 100
	opts.L0StopWritesThreshold = 100
	opts.LBaseMaxBytes = 1 << 30 // no background compactions
	db, err = Open("/db", &opts)
	if err != nil {
		t.Fatal(err)
	}
	for k := range 50 {
		db.Set([]byte(fmt.Sprintf("k%05d", k)), []byte("v"), nil)
	}
	err = db.Compact(ctx, nil, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Compact: %v", err)
	}
	mu.Lock()
	if ok != 1 || failed > 1 {
		t.Fatalf("%d jobs installed, %d cancelled; want 1 installed (the cancellation came after it), at most 1 cancelled", ok, failed)
	}
	mu.Unlock()
	m := db.Metrics()
	if m.Levels[0].Tables != 0 || m.Levels[2].Tables == 0 || m.BackgroundError != nil {
		t.Fatalf("after the cancelled Compact: tables per level %v, background error %v", tablesPerLevel(m), m.BackgroundError)
	}
	mustGet(t, db, "k00010", "v")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	checkNoOrphans(t, mem)
}

// TestCompactContextDoneAtStart: a context already done returns at once.
func TestCompactContextDoneAtStart(t *testing.T) {
	db, _ := openForManualCompaction(t, compaction.CPU{}, nil)
	defer db.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := db.Compact(ctx, nil, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Compact: %v", err)
	}
	if err := db.WaitForCompactions(ctx); !errors.Is(err, context.Canceled) && err != nil {
		t.Fatalf("WaitForCompactions: %v", err)
	}
	if n := db.Metrics().Levels[0].Tables; n != 3 {
		t.Fatalf("%d L0 tables, want the 3 untouched", n)
	}
}

// TestWaitForCompactionsContext: WaitForCompactions gives up when its
// context ends while a compaction is held, and succeeds once it is done.
func TestWaitForCompactionsContext(t *testing.T) {
	opts := smallOptions()
	opts.L0CompactionThreshold, opts.EagerL0Compactions = 1, true
	db, g := openWithHeldCompactions(t, opts, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := db.WaitForCompactions(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitForCompactions: %v", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("WaitForCompactions took %v to notice its deadline", el)
	}
	if m := db.Metrics(); m.Compaction.InProgress != 1 || m.BackgroundError != nil {
		t.Fatalf("the held compaction: %d running, background error %v", m.Compaction.InProgress, m.BackgroundError)
	}
	g.release()
	if err := db.WaitForCompactions(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := db.Metrics().Levels[0].Tables; n != 0 {
		t.Fatalf("%d L0 tables after the compactions", n)
	}
}
