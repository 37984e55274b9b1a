package kv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warpkit/warpkit/kv/compaction/compactiontest"
	"github.com/warpkit/warpkit/kv/vfs"
)

// eventLog records a listener's events in order, as strings such as
// "flush-begin 3", "compaction-end 4 err", "stall-begin L0".
type eventLog struct {
	mu     sync.Mutex
	events []string
	bgErrs []error
	flush  map[int]int // job -> begins - ends
	comp   map[int]int
}

func newEventLog(t *testing.T) (*eventLog, *EventListener) {
	l := &eventLog{flush: map[int]int{}, comp: map[int]int{}}
	add := func(s string) {
		l.mu.Lock()
		l.events = append(l.events, s)
		l.mu.Unlock()
	}
	errTag := func(err error) string {
		if err != nil {
			return " err"
		}
		return ""
	}
	pair := func(m map[int]int, job int, d int, what string) {
		l.mu.Lock()
		m[job] += d
		v := m[job]
		l.mu.Unlock()
		if v < 0 || v > 1 {
			t.Errorf("%s of job %d: begins minus ends %d", what, job, v)
		}
	}
	var stalled sync.Mutex
	inStall := false
	ev := &EventListener{
		FlushBegin: func(i FlushInfo) { pair(l.flush, i.JobID, 1, "flush begin"); add(fmt.Sprint("flush-begin ", i.JobID)) },
		FlushEnd: func(i FlushInfo) {
			pair(l.flush, i.JobID, -1, "flush end")
			add(fmt.Sprint("flush-end ", i.JobID) + errTag(i.Err))
		},
		CompactionBegin: func(i CompactionInfo) {
			pair(l.comp, i.JobID, 1, "compaction begin")
			add(fmt.Sprint("compaction-begin ", i.JobID))
		},
		CompactionEnd: func(i CompactionInfo) {
			pair(l.comp, i.JobID, -1, "compaction end")
			if i.Err == nil && !i.Move && len(i.Output) == 0 && i.BytesWritten > 0 {
				t.Errorf("compaction %d wrote %d bytes but lists no output", i.JobID, i.BytesWritten)
			}
			add(fmt.Sprint("compaction-end ", i.JobID) + errTag(i.Err))
		},
		WriteStallBegin: func(i WriteStallBeginInfo) {
			stalled.Lock()
			if inStall {
				t.Errorf("stall begin (%s) during a stall", i.Reason)
			}
			inStall = true
			stalled.Unlock()
			add("stall-begin " + i.Reason)
		},
		WriteStallEnd: func() {
			stalled.Lock()
			if !inStall {
				t.Error("stall end without a begin")
			}
			inStall = false
			stalled.Unlock()
			add("stall-end")
		},
		BackgroundError: func(err error) {
			l.mu.Lock()
			l.bgErrs = append(l.bgErrs, err)
			l.mu.Unlock()
			add("background-error")
		},
		WALCreated:   func(i WALInfo) { add(fmt.Sprint("wal-created ", i.FileNum)) },
		WALDeleted:   func(i WALInfo) { add(fmt.Sprint("wal-deleted ", i.FileNum)) },
		TableDeleted: func(i TableDeleteInfo) { add(fmt.Sprint("table-deleted ", i.FileNum)) },
	}
	return l, ev
}

func (l *eventLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.events...)
}

func (l *eventLog) count(prefix string) int {
	n := 0
	for _, e := range l.snapshot() {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}

// checkPaired: every begin has exactly one end, after it, and every stall
// ended.
func (l *eventLog) checkPaired(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for job, v := range l.flush {
		if v != 0 {
			t.Errorf("flush job %d: begins minus ends %d", job, v)
		}
	}
	for job, v := range l.comp {
		if v != 0 {
			t.Errorf("compaction job %d: begins minus ends %d", job, v)
		}
	}
	stalls := 0
	for _, e := range l.events {
		switch {
		case strings.HasPrefix(e, "stall-begin"):
			stalls++
		case e == "stall-end":
			stalls--
		}
	}
	if stalls != 0 {
		t.Errorf("%d stalls without an end: %v", stalls, l.events)
	}
}

func TestEventsFlushAndCompaction(t *testing.T) {
	l, ev := newEventLog(t)
	opts := smallOptions()
	opts.FS = vfs.NewMem()
	opts.EventListener = ev
	db, err := Open("/db", &opts)
	if err != nil {
		t.Fatal(err)
	}
	if n := l.count("wal-created"); n != 2 {
		t.Fatalf("%d logs created at Open, want 2 (the log and the spare): %v", n, l.snapshot())
	}
	for i := range 3000 {
		if err := db.Set([]byte(fmt.Sprintf("k%05d", i%1000)), []byte(fmt.Sprint(i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Compact(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	// Compact returns after the End of its last job.
	if n, m := l.count("compaction-begin"), l.count("compaction-end"); n == 0 || n != m {
		t.Fatalf("after Compact: %d compaction begins, %d ends", n, m)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	l.checkPaired(t)
	for _, what := range []string{"flush-begin", "flush-end", "compaction-end", "table-deleted", "wal-deleted"} {
		if l.count(what) == 0 {
			t.Errorf("no %s event: %v", what, l.snapshot())
		}
	}
	// Each job's events come in order: begin before end.
	seen := map[string]bool{}
	for _, e := range l.snapshot() {
		f := strings.Fields(e)
		if len(f) < 2 {
			continue // stall-end
		}
		if strings.HasSuffix(f[0], "-end") && !seen[strings.TrimSuffix(f[0], "-end")+"-begin "+f[1]] {
			t.Fatalf("%q before its begin", e)
		}
		seen[f[0]+" "+f[1]] = true
	}
	if len(l.bgErrs) != 0 {
		t.Fatalf("background errors: %v", l.bgErrs)
	}
}

// TestEventsFailedFlush: a failing flush ends with an error, and the error
// that stops writes is reported once.
func TestEventsFailedFlush(t *testing.T) {
	l, ev := newEventLog(t)
	inj := &failOn{ops: vfs.OpCreate, substr: ".sst"}
	opts := smallOptions()
	opts.EventListener = ev
	db, _, _ := openFault(t, inj, opts)
	db.Set([]byte("k"), []byte("v"), nil)
	inj.armed.Store(true)
	if err := db.Flush(); !errors.Is(err, ErrWritesStopped) {
		t.Fatalf("Flush: %v", err)
	}
	db.Close()
	l.checkPaired(t)
	if n := l.count("flush-end 1 err"); n != 1 {
		t.Fatalf("want one failed flush end: %v", l.snapshot())
	}
	if len(l.bgErrs) != 1 || !errors.Is(l.bgErrs[0], vfs.ErrInjected) {
		t.Fatalf("background errors %v", l.bgErrs)
	}
}

// TestEventsFailedCompaction: a failing compaction ends with an error.
func TestEventsFailedCompaction(t *testing.T) {
	l, ev := newEventLog(t)
	db, err := Open("/db", &Options{FS: vfs.NewMem(), Compactor: &parallelCreateCompactor{}, EventListener: ev})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		db.Set([]byte(fmt.Sprintf("k%03d", i)), []byte("v"), nil)
	}
	if err := db.Compact(context.Background(), nil, nil); !errors.Is(err, errCompactorFailed) {
		t.Fatalf("Compact: %v", err)
	}
	db.Close()
	l.checkPaired(t)
	failed := 0
	for _, e := range l.snapshot() {
		if strings.HasPrefix(e, "compaction-end") && strings.HasSuffix(e, " err") {
			failed++
		}
	}
	if l.count("compaction-end") != 1 || failed != 1 {
		t.Fatalf("want one failed compaction: %v", l.snapshot())
	}
	if len(l.bgErrs) != 1 || !errors.Is(l.bgErrs[0], errCompactorFailed) {
		t.Fatalf("background errors %v", l.bgErrs)
	}
}

// TestEventsCloseDuringCompaction: Close cancels a running compaction, which
// still ends (with context.Canceled) before Close returns.
func TestEventsCloseDuringCompaction(t *testing.T) {
	l, ev := newEventLog(t)
	var ends []CompactionInfo
	var mu sync.Mutex
	end := ev.CompactionEnd
	ev.CompactionEnd = func(i CompactionInfo) {
		mu.Lock()
		ends = append(ends, i)
		mu.Unlock()
		end(i)
	}
	opts := smallOptions()
	opts.L0CompactionThreshold, opts.EagerL0Compactions = 1, true
	opts.EventListener = ev
	db, _ := openWithHeldCompactions(t, opts, 1)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	l.checkPaired(t)
	mu.Lock()
	defer mu.Unlock()
	last := ends[len(ends)-1]
	if !errors.Is(last.Err, context.Canceled) {
		t.Fatalf("last compaction ended with %v, want context.Canceled", last.Err)
	}
	if len(l.bgErrs) != 0 {
		t.Fatalf("Close reported background errors %v", l.bgErrs)
	}
}

// TestEventsStallL0: a stop for L0 tables shows in the events and in
// Metrics while it lasts, and ends when the compaction runs.
func TestEventsStallL0(t *testing.T) {
	l, ev := newEventLog(t)
	opts := smallOptions()
	opts.L0CompactionThreshold, opts.EagerL0Compactions = 1, true
	opts.L0SlowdownWritesThreshold = 3
	opts.L0StopWritesThreshold = 3
	opts.EventListener = ev
	db, g := openWithHeldCompactions(t, opts, 3)
	if err := db.Set([]byte("big0"), bigValue, nil); err != nil {
		t.Fatal(err)
	}
	done := goSet(db, "big1", bigValue)
	waitStalled(t, done, func() bool { return db.Metrics().Stalls.Stalled })
	s := db.Metrics().Stalls
	if s.Reason != StallL0 || s.Count != 1 || s.Time < 20*time.Millisecond {
		t.Fatalf("during the stall: %+v", s)
	}
	if got := l.count("stall-begin L0"); got != 1 {
		t.Fatalf("stall begins %d: %v", got, l.snapshot())
	}
	time.Sleep(10 * time.Millisecond)
	if s2 := db.Metrics().Stalls; s2.Time <= s.Time {
		t.Fatalf("stall time does not grow during the stall: %v then %v", s.Time, s2.Time)
	}
	g.release()
	waitDone(t, done)
	s = db.Metrics().Stalls
	if s.Stalled || s.Reason != "" || s.Count != 1 || s.Time < s.SlowdownTime+30*time.Millisecond {
		t.Fatalf("after the stall: %+v", s)
	}
	if l.count("stall-end") != 1 {
		t.Fatalf("stall ends: %v", l.snapshot())
	}
	if err := db.WaitForCompactions(context.Background()); err != nil { // the flush the write started
		t.Fatal(err)
	}
	l.checkPaired(t)
}

// TestEventsStallMemTable: a stop for a flush that cannot finish is a
// "memtable" stall; Close during it ends it.
func TestEventsStallMemTable(t *testing.T) {
	l, ev := newEventLog(t)
	g := newGate()
	opts := smallOptions()
	opts.FS = vfs.NewFault(vfs.NewMem(), gatedTableCreates{g})
	opts.EventListener = ev
	db, err := Open("/db", &opts)
	if err != nil {
		t.Fatal(err)
	}
	g.hold()
	db.Set([]byte("big0"), bigValue, nil)
	db.Set([]byte("big1"), bigValue, nil) // rotates; the flush blocks
	g.waitEntered(t)
	done := goSet(db, "big2", bigValue)
	waitStalled(t, done, func() bool { return db.Metrics().Stalls.Stalled })
	if s := db.Metrics().Stalls; s.Reason != StallMemTable || s.Count != 1 {
		t.Fatalf("during the stall: %+v", s)
	}
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	// The stalled write ends with ErrClosed; then Close waits for the flush.
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("stalled write: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the stall")
	}
	g.release()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if l.count("stall-begin memtable") != 1 || l.count("stall-end") != 1 {
		t.Fatalf("events: %v", l.snapshot())
	}
	l.checkPaired(t)
}

// TestLogger: flushes and compactions are summarized at Debug, and the
// error that stops writes is logged at Error.
func TestLogger(t *testing.T) {
	var buf compactiontest.LogBuffer
	inj := &failOn{ops: vfs.OpCreate, substr: ".sst"}
	opts := smallOptions()
	opts.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	db, _, _ := openFault(t, inj, opts)
	for i := range 100 {
		db.Set([]byte(fmt.Sprintf("k%03d", i)), []byte("v"), nil)
	}
	if err := db.Compact(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	db.Set([]byte("k"), []byte("v"), nil)
	inj.armed.Store(true)
	if err := db.Flush(); !errors.Is(err, ErrWritesStopped) {
		t.Fatalf("Flush: %v", err)
	}
	db.Close()
	out := buf.String()
	for _, want := range []string{`level=DEBUG msg="kv: flush"`, `level=DEBUG msg="kv: compaction"`, `level=ERROR msg="kv: writes stopped"`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "writes stopped"); n != 1 {
		t.Errorf("writes stopped logged %d times", n)
	}
}
