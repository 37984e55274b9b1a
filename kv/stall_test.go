package kv

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warpkit/warpkit/kv/compaction"
	"github.com/warpkit/warpkit/kv/vfs"
)

// gate blocks whoever calls wait while it is held, and tells the test when
// someone is waiting.
type gate struct {
	mu      sync.Mutex
	ch      chan struct{} // nil: open
	entered chan struct{} // one send per wait on a held gate
}

func newGate() *gate { return &gate{entered: make(chan struct{}, 1000)} }

func (g *gate) hold() {
	g.mu.Lock()
	g.ch = make(chan struct{})
	g.mu.Unlock()
}

// release opens the gate; releasing an open gate does nothing.
func (g *gate) release() {
	g.mu.Lock()
	if g.ch != nil {
		close(g.ch)
		g.ch = nil
	}
	g.mu.Unlock()
}

// wait blocks while the gate is held, or until ctx ends.
func (g *gate) wait(ctx context.Context) error {
	g.mu.Lock()
	ch := g.ch
	g.mu.Unlock()
	if ch == nil {
		return nil
	}
	g.entered <- struct{}{}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitEntered waits until someone is blocked at the gate.
func (g *gate) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("nothing reached the gate")
	}
}

// gatedCompactor runs compaction.CPU once its gate lets it.
type gatedCompactor struct {
	g     *gate
	inner compaction.Compactor
}

func (c gatedCompactor) Compact(ctx context.Context, job *compaction.Job) (*compaction.Result, error) {
	if err := c.g.wait(ctx); err != nil {
		return nil, err
	}
	return c.inner.Compact(ctx, job)
}

// gatedTableCreates blocks the creation of tables (flushes and compaction
// outputs) at its gate; it injects no errors.
type gatedTableCreates struct{ g *gate }

func (c gatedTableCreates) MaybeError(op vfs.Op, path string) error {
	if op == vfs.OpCreate && strings.HasSuffix(path, ".sst") {
		c.g.wait(context.Background())
	}
	return nil
}

// goSet runs db.Set in the background; the channel receives its result.
func goSet(db *DB, key string, value []byte) <-chan error {
	done := make(chan error, 1)
	go func() { done <- db.Set([]byte(key), value, nil) }()
	return done
}

// waitStalled waits until stalled reports the write's stall, failing the
// test if the write completes first; then it checks that the write stays
// stalled (the short wait gives a write that wrongly goes ahead the time to
// finish).
func waitStalled(t *testing.T, done <-chan error, stalled func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !stalled() {
		select {
		case err := <-done:
			t.Fatalf("write completed without stalling: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for the stall")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("write completed during the stall: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
}

func waitDone(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("write did not complete after the stall ended")
	}
}

// bigValue is most of a 64 KiB memtable: two do not fit in one.
var bigValue = bytes.Repeat([]byte("v"), 40<<10)

// openWithHeldCompactions opens a store whose L0 compactions block until
// the returned gate is released: L1 first gets a table spanning every key
// the test writes, so that each L0 table overlaps it and is merged (by the
// gated compactor) rather than moved down. It then flushes l0 tables; the
// first is held in its compaction, and the others wait behind it. The
// compactions run on opts.Compactor (default compaction.CPU{}) once released.
func openWithHeldCompactions(t *testing.T, opts Options, l0 int) (*DB, *gate) {
	t.Helper()
	g := newGate()
	opts.FS = vfs.NewMem()
	inner := opts.Compactor
	if inner == nil {
		inner = compaction.CPU{}
	}
	opts.Compactor = gatedCompactor{g, inner}
	db, err := Open("/db", &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		g.release()
		if err := db.Close(); err != nil && err != ErrClosed {
			t.Error(err)
		}
	})
	db.Set([]byte("a"), []byte("v"), nil)
	db.Set([]byte("z"), []byte("v"), nil)
	if err := db.Compact(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	g.hold()
	for i := range l0 {
		if err := db.Set([]byte(fmt.Sprintf("l0-%d", i)), []byte("v"), nil); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil { // Flush never stalls
			t.Fatal(err)
		}
		if i == 0 {
			g.waitEntered(t)
		}
	}
	m := db.Metrics()
	if m.Levels[0].Tables != l0 || m.Levels[m.BaseLevel].Tables != 1 || m.Compaction.InProgress != 1 {
		t.Fatalf("setup: tables per level %v, %d compactions running; want %d in L0, 1 in the base level, 1 running",
			tablesPerLevel(m), m.Compaction.InProgress, l0)
	}
	return db, g
}

// TestNoSlowdownByDefault: without L0SlowdownWritesThreshold no write is
// delayed, whatever L0 holds; with it at the stop threshold neither.
func TestNoSlowdownByDefault(t *testing.T) {
	for _, slowdown := range []int{0, 12} {
		opts := smallOptions()
		opts.L0CompactionThreshold, opts.EagerL0Compactions = 1, true
		opts.L0SlowdownWritesThreshold = slowdown
		// At the default stop threshold (12); the memtable has room, so
		// the writes are not stopped either.
		db, _ := openWithHeldCompactions(t, opts, 12)
		for i := range 5 {
			if err := db.Set([]byte(fmt.Sprintf("k%d", i)), []byte("v"), nil); err != nil {
				t.Fatal(err)
			}
		}
		if s := db.Metrics().Stalls; s.Slowdowns != 0 || s.Count != 0 {
			t.Fatalf("slowdown %d: with 12 L0 tables: %+v", slowdown, s)
		}
	}
}

// TestStallL0Slowdown: at L0SlowdownWritesThreshold L0 tables each write is
// delayed once by 1 ms, counted in Stalls.Slowdowns and SlowdownTime, and
// is not stopped; once compactions empty L0 writes go at full speed.
func TestStallL0Slowdown(t *testing.T) { stallL0Slowdown(t, smallOptions()) }

func stallL0Slowdown(t *testing.T, opts Options) {
	opts.L0CompactionThreshold, opts.EagerL0Compactions = 1, true
	opts.L0SlowdownWritesThreshold = 2
	opts.L0StopWritesThreshold = 100
	db, g := openWithHeldCompactions(t, opts, 2)
	if s := db.Metrics().Stalls; s.Slowdowns != 0 {
		t.Fatalf("%d slowdowns below the threshold", s.Slowdowns)
	}
	const writes = 5
	start := time.Now()
	for i := range writes {
		if err := db.Set([]byte(fmt.Sprintf("k%d", i)), []byte("v"), nil); err != nil {
			t.Fatal(err)
		}
	}
	if el := time.Since(start); el < writes*slowdownDelay {
		t.Fatalf("%d writes at the slowdown threshold took %v, less than %v", writes, el, writes*slowdownDelay)
	}
	s := db.Metrics().Stalls
	if s.Slowdowns != writes || s.SlowdownTime != writes*slowdownDelay || s.L0Stops != 0 || s.MemTableStops != 0 || s.StopTime != 0 {
		t.Fatalf("after %d slowed writes: %+v", writes, s)
	}

	g.release()
	if err := db.WaitForCompactions(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := db.Metrics().Levels[0].Tables; n != 0 {
		t.Fatalf("%d L0 tables after the compactions", n)
	}
	for i := range writes {
		if err := db.Set([]byte(fmt.Sprintf("k%d", i)), []byte("w"), nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := db.Metrics().Stalls.Slowdowns; n != writes {
		t.Fatalf("%d slowdowns after L0 emptied, want still %d", n, writes)
	}
	mustGet(t, db, "k4", "w")
}

// TestStallL0Stop: with L0StopWritesThreshold L0 tables and the memtable
// full, a write waits (Stalls.L0Stops) until a compaction brings L0 below
// the threshold; reads go on meanwhile.
func TestStallL0Stop(t *testing.T) { stallL0Stop(t, smallOptions()) }

func stallL0Stop(t *testing.T, opts Options) {
	opts.L0CompactionThreshold, opts.EagerL0Compactions = 1, true
	opts.L0SlowdownWritesThreshold = 2 // (at the stop threshold it would mean none)
	opts.L0StopWritesThreshold = 3
	db, g := openWithHeldCompactions(t, opts, 3)
	if err := db.Set([]byte("big0"), bigValue, nil); err != nil { // fills the memtable
		t.Fatal(err)
	}
	done := goSet(db, "big1", bigValue) // needs a new memtable: stops
	waitStalled(t, done, func() bool { return db.Metrics().Stalls.L0Stops > 0 })
	m := db.Metrics()
	if m.Levels[0].Tables != 3 || m.MemTable.Immutable != 0 || m.Stalls.MemTableStops != 0 {
		t.Fatalf("during the stop: tables per level %v, %d memtables waiting, %d memtable stops",
			tablesPerLevel(m), m.MemTable.Immutable, m.Stalls.MemTableStops)
	}
	mustGet(t, db, "l0-1", "v") // reads go on
	mustGet(t, db, "big0", string(bigValue))

	g.release()
	waitDone(t, done)
	mustGet(t, db, "big1", string(bigValue))
	if err := db.WaitForCompactions(context.Background()); err != nil {
		t.Fatal(err)
	}
	m = db.Metrics()
	s := m.Stalls
	// Both writes were at the slowdown threshold: one delay each (and
	// the setup's last write, at two tables).
	if s.L0Stops < 1 || s.StopTime <= 0 || s.MemTableStops != 0 || s.Slowdowns < 2 {
		t.Fatalf("after the stop: %+v", s)
	}
	if m.Levels[0].Tables != 0 {
		t.Fatalf("tables per level %v after the compactions", tablesPerLevel(m))
	}
}

// TestStallMemTableStop: with a memtable waiting for a flush that cannot
// finish and the mutable one full, a write waits (Stalls.MemTableStops)
// until the flush is done; reads go on meanwhile.
func TestStallMemTableStop(t *testing.T) {
	g := newGate()
	opts := smallOptions() // MemTableStopWritesThreshold 2: one waiting memtable stops writes
	opts.FS = vfs.NewFault(vfs.NewMem(), gatedTableCreates{g})
	db, err := Open("/db", &opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	defer g.release() // before Close, which waits for the flush
	g.hold()
	if err := db.Set([]byte("big0"), bigValue, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Set([]byte("big1"), bigValue, nil); err != nil { // rotates; the flush blocks
		t.Fatal(err)
	}
	g.waitEntered(t)
	done := goSet(db, "big2", bigValue) // the second memtable is full too: stops
	waitStalled(t, done, func() bool { return db.Metrics().Stalls.MemTableStops > 0 })
	m := db.Metrics()
	if m.MemTable.Immutable != 1 || m.MemTable.Flushes != 0 || m.Stalls.L0Stops != 0 || m.Stalls.Slowdowns != 0 {
		t.Fatalf("during the stop: %d memtables waiting, %d flushes, stalls %+v", m.MemTable.Immutable, m.MemTable.Flushes, m.Stalls)
	}
	mustGet(t, db, "big0", string(bigValue)) // reads go on, from the waiting memtable
	mustGet(t, db, "big1", string(bigValue))

	g.release()
	waitDone(t, done)
	mustGet(t, db, "big2", string(bigValue))
	m = db.Metrics()
	if s := m.Stalls; s.MemTableStops < 1 || s.StopTime <= 0 || s.L0Stops != 0 || s.Slowdowns != 0 {
		t.Fatalf("after the stop: %+v", s)
	}
	if m.MemTable.Flushes < 1 {
		t.Fatalf("%d flushes after the stop", m.MemTable.Flushes)
	}
}
