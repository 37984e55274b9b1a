package kv

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warpkit/warpkit/kv/compaction"
	"github.com/warpkit/warpkit/kv/vfs"
)

// TestFlushGate: wait passes an open gate at once, waits for a held one
// until its last holder leaves, and never longer than flushGateMaxWait.
func TestFlushGate(t *testing.T) {
	var g flushGate
	g.wait() // open: returns
	g.enter()
	g.enter()
	var left atomic.Bool
	done := make(chan time.Duration)
	go func() {
		start := time.Now()
		g.wait()
		d := time.Since(start)
		if !left.Load() && d < flushGateMaxWait {
			t.Errorf("wait returned after %v while the gate was held", d)
		}
		done <- d
	}()
	time.Sleep(2 * time.Millisecond)
	g.exit() // one holder left: still held
	time.Sleep(2 * time.Millisecond)
	left.Store(true)
	g.exit()
	<-done
	g.wait() // open again

	// A holder that stays: the wait ends at the bound.
	g.enter()
	defer g.exit()
	start := time.Now()
	g.wait()
	if d := time.Since(start); d < flushGateMaxWait || d > 5*time.Second {
		t.Fatalf("wait at a gate held throughout took %v, want about %v", d, flushGateMaxWait)
	}
}

// TestFlushTakesGate: a flush holds the gate while L0 is below its
// compaction threshold and not once it has reached it; compactions' output
// files wait at it (and stay vfs.VectorWriters where the file system's are).
func TestFlushTakesGate(t *testing.T) {
	var dbp atomic.Pointer[DB]
	var held []int32
	g := newGate()
	opts := smallOptions()
	opts.FS = vfs.NewMem()
	opts.L0CompactionThreshold = 2
	opts.Compactor = gatedCompactor{g, compaction.CPU{}}
	opts.EventListener = &EventListener{FlushBegin: func(FlushInfo) { held = append(held, dbp.Load().fgate.held.Load()) }}
	db, err := Open("/db", &opts)
	if err != nil {
		t.Fatal(err)
	}
	dbp.Store(db)
	defer func() {
		g.release()
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	}()
	// An L1 table over every key, so that L0 tables are merged (by the held
	// compactor) rather than moved down.
	db.Set([]byte("a"), []byte("v"), nil)
	db.Set([]byte("z"), []byte("v"), nil)
	if err := db.Compact(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	held = nil
	g.hold() // L0 keeps its tables: its compaction is held
	for i := range 3 { // L0 = 0, 1, 2 at the flushes' starts
		if err := db.Set(fmt.Appendf(nil, "k%d", i), []byte("v"), nil); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(held) != "[1 1 0]" {
		t.Fatalf("gate holders seen by each flush: %v, want [1 1 0] (L0 = 0, 1, 2 against a threshold of 2)", held)
	}
	if n := db.fgate.held.Load(); n != 0 {
		t.Fatalf("%d holders after the flushes", n)
	}

	_, f, err := db.newOutputTables().create()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, ok := f.(vfs.VectorWriter); !ok {
		t.Fatal("a compaction output on MemFS is no VectorWriter")
	}
	db.fgate.enter()
	defer db.fgate.exit()
	start := time.Now()
	if _, err := f.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < flushGateMaxWait {
		t.Fatalf("a compaction output's write took %v while a flush held the gate", d)
	}
}
