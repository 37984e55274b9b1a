package kv

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warpkit/warpkit/kv/compaction"
	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/vfs"
)

// countingCompactor stands in for a GPU compactor: it reads every input
// table's raw bytes, checks what the store hands it, and merges with the CPU.
type countingCompactor struct {
	t         *testing.T
	jobs      atomic.Int64
	snapshots atomic.Int64
}

func (c *countingCompactor) Compact(ctx context.Context, job *compaction.Job) (*compaction.Result, error) {
	c.jobs.Add(1)
	if len(job.Snapshots) > 0 {
		c.snapshots.Add(1)
	}
	for i := 1; i < len(job.Snapshots); i++ {
		if job.Snapshots[i] <= job.Snapshots[i-1] {
			c.t.Errorf("snapshots not ascending: %v", job.Snapshots)
		}
	}
	if in := job.Inputs[0].Level; job.OutputLevel <= in || (in > 0 && job.OutputLevel != in+1) {
		c.t.Errorf("output level %d for input level %d", job.OutputLevel, job.Inputs[0].Level)
	}
	for _, in := range job.Inputs {
		for _, f := range in.Files {
			file, err := job.Env.OpenTableFile(f)
			if err != nil {
				return nil, err
			}
			size, err := file.Size()
			file.Close()
			if err != nil || uint64(size) != f.Size {
				c.t.Errorf("raw table %s: size %d, metadata %d (%v)", f.FileNum, size, f.Size, err)
			}
		}
	}
	return compaction.CPU{}.Compact(ctx, job)
}

func TestCustomCompactor(t *testing.T) {
	cc := &countingCompactor{t: t}
	opts := smallOptions()
	opts.FS = vfs.NewMem()
	opts.Compactor = cc
	db, err := Open("/db", &opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	snap, _ := db.NewSnapshot()
	for i := range 5000 {
		db.Set([]byte(fmt.Sprintf("k%05d", i%1500)), []byte(fmt.Sprint(i)), nil)
	}
	if err := db.Compact(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := snap.Get([]byte("k00001")); err != ErrNotFound {
		t.Fatalf("snapshot taken before any write sees %v", err)
	}
	snap.Close()
	if cc.jobs.Load() == 0 || cc.snapshots.Load() == 0 {
		t.Fatalf("compactor saw %d jobs, %d with snapshots", cc.jobs.Load(), cc.snapshots.Load())
	}
	mustGet(t, db, "k01499", "4499")
}

// parallelCreateCompactor creates tables from several goroutines at once, as
// a GPU compactor encoding outputs in parallel may, and then fails.
type parallelCreateCompactor struct {
	env compaction.Env // the last job's, to call after Compact returned
}

var errCompactorFailed = errors.New("compactor failed")

func (c *parallelCreateCompactor) Compact(ctx context.Context, job *compaction.Job) (*compaction.Result, error) {
	c.env = job.Env
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 4 {
				if _, f, err := job.Env.CreateTable(); err == nil {
					f.Write([]byte("partial table"))
					f.Close()
				}
			}
		})
	}
	wg.Wait()
	return nil, errCompactorFailed
}

// TestFailedCompactionRemovesConcurrentOutputs: the store deletes every
// table a failed compaction created, also when the compactor created them
// from several goroutines (the list of created tables was appended to
// without a lock: go test -race flags it, and appends could be lost, leaving
// tables behind), and CreateTable fails once Compact has returned.
func TestFailedCompactionRemovesConcurrentOutputs(t *testing.T) {
	mem := vfs.NewMem()
	cc := &parallelCreateCompactor{}
	db, err := Open("/db", &Options{FS: mem, Compactor: cc})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range 100 {
		db.Set([]byte(fmt.Sprintf("k%03d", i)), []byte("v"), nil)
	}
	if err := db.Compact(context.Background(), nil, nil); !errors.Is(err, errCompactorFailed) {
		t.Fatalf("Compact: %v", err)
	}
	tables := func() map[base.FileNum]bool { return tableFiles(t, mem, "/db") }
	if got := tables(); len(got) != 1 { // the flushed input
		t.Fatalf("tables after the failed compaction: %v", got)
	}
	if _, f, err := cc.env.CreateTable(); err == nil {
		f.Close()
		t.Fatal("CreateTable succeeded after Compact returned")
	}
	if got := tables(); len(got) != 1 {
		t.Fatalf("tables after a late CreateTable: %v", got)
	}
	mustGet(t, db, "k042", "v")
}

// inFlightCreateCompactor starts one CreateTable and fails once it is inside
// the file system's Create (held at g), without waiting for it, as a
// compactor whose goroutine outlives its job would.
type inFlightCreateCompactor struct {
	g    *gate
	done chan error
}

func (c *inFlightCreateCompactor) Compact(ctx context.Context, job *compaction.Job) (*compaction.Result, error) {
	go func() {
		_, f, err := job.Env.CreateTable()
		if err == nil {
			f.Close()
		}
		c.done <- err
	}()
	<-c.g.entered
	return nil, errCompactorFailed
}

// TestCreateTableInFlightWhenCompactionFails: a table whose creation was
// under way (held in the file system) when its compaction failed and cleaned
// up is removed once created, and its CreateTable fails: no table is left
// that nothing tracks.
func TestCreateTableInFlightWhenCompactionFails(t *testing.T) {
	g := newGate()
	mem := vfs.NewMem()
	cc := &inFlightCreateCompactor{g: g, done: make(chan error, 1)}
	db, err := Open("/db", &Options{FS: vfs.NewFault(mem, gatedTableCreates{g}), Compactor: cc})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range 100 {
		db.Set([]byte(fmt.Sprintf("k%03d", i)), []byte("v"), nil)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	g.hold()
	if err := db.Compact(context.Background(), nil, nil); !errors.Is(err, errCompactorFailed) {
		t.Fatalf("Compact: %v", err)
	}
	g.release() // the compactor's CreateTable is inside Create

	select {
	case err := <-cc.done:
		if err == nil {
			t.Fatal("CreateTable of a failed compaction succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("CreateTable did not return")
	}
	if got := tableFiles(t, mem, "/db"); len(got) != 1 { // the flushed input
		t.Fatalf("tables after the late creation: %v", got)
	}
	mustGet(t, db, "k042", "v")
}

// abandoningCompactor creates a table, writes nothing to it, and then runs
// the job on compaction.CPU: a compactor that fell back after a failed
// attempt.
type abandoningCompactor struct{ abandoned []base.FileNum }

func (c *abandoningCompactor) Compact(ctx context.Context, job *compaction.Job) (*compaction.Result, error) {
	num, f, err := job.Env.CreateTable()
	if err != nil {
		return nil, err
	}
	f.Close()
	c.abandoned = append(c.abandoned, num)
	return compaction.CPU{}.Compact(ctx, job)
}

// TestAbandonedOutputsRemoved: tables a successful job created but did not
// return are deleted when the job's outputs are installed, by compactions
// and by Repair.
func TestAbandonedOutputsRemoved(t *testing.T) {
	mem := vfs.NewMem()
	cc := &abandoningCompactor{}
	db, err := Open("/db", &Options{FS: mem, Compactor: cc})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		db.Set([]byte(fmt.Sprintf("k%03d", i)), []byte("v"), nil)
	}
	if err := db.Compact(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		tables := tableFiles(t, mem, "/db")
		for _, n := range cc.abandoned {
			if tables[n] {
				t.Fatalf("%s: abandoned table %s still on disk (tables %v)", when, n, tables)
			}
		}
	}
	if len(cc.abandoned) == 0 {
		t.Fatal("the compactor ran no job")
	}
	check("after Compact")
	mustGet(t, db, "k042", "v")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	n := len(cc.abandoned)
	if _, err := Repair("/db", &Options{FS: mem, Compactor: cc}); err != nil {
		t.Fatal(err)
	}
	if len(cc.abandoned) == n {
		t.Fatal("Repair ran no compaction")
	}
	check("after Repair")
}
