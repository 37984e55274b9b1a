package kv

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/warpkit/warpkit/kv/compaction"
	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/vfs"
)

// tableFiles returns the tables in a store's directory.
func tableFiles(t *testing.T, fs vfs.FS, dir string) map[base.FileNum]bool {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[base.FileNum]bool{}
	for _, n := range names {
		if typ, num, ok := base.ParseFilename(n); ok && typ == base.FileTypeTable {
			out[num] = true
		}
	}
	return out
}

// TestMetricsFlushAndCompaction checks the metrics through a known
// sequence: two flushes of the same keys, then the L0 compaction they
// trigger, held by a gated compactor until WaitForCompactions is seen
// waiting for it.
func TestMetricsFlushAndCompaction(t *testing.T) {
	g := newGate()
	mem := vfs.NewMem()
	opts := smallOptions() // L0CompactionThreshold 2
	opts.FS = mem
	opts.Compactor = gatedCompactor{g, compaction.CPU{}}
	opts.DisableCompression = true // tables at least as large as the values they hold
	db, err := Open("/db", &opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	defer g.release()

	m := db.Metrics()
	if m.WriteAmp() != 0 || m.CompactionBandwidth() != 0 {
		t.Fatalf("fresh store: write amplification %v, compaction bandwidth %v", m.WriteAmp(), m.CompactionBandwidth())
	}
	checkWriteAmp := func(m *Metrics) {
		t.Helper()
		want := float64(m.WAL.BytesWritten+m.MemTable.FlushBytes+m.Compaction.BytesWritten) / float64(m.WAL.BytesIn)
		if got := m.WriteAmp(); got != want {
			t.Fatalf("WriteAmp() = %v, want (log %d + flush %d + compaction %d) / committed %d = %v",
				got, m.WAL.BytesWritten, m.MemTable.FlushBytes, m.Compaction.BytesWritten, m.WAL.BytesIn, want)
		}
	}

	const keys, valueLen = 200, 100
	write := func(round int) {
		t.Helper()
		for i := range keys {
			v := strings.Repeat(fmt.Sprint(round), valueLen)
			if err := db.Set([]byte(fmt.Sprintf("k%03d", i)), []byte(v), nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}

	g.hold()
	write(0)
	m = db.Metrics()
	if m.MemTable.Flushes != 1 || m.Levels[0].Tables != 1 || m.MemTable.FlushBytes != int64(m.Levels[0].Bytes) ||
		m.Levels[0].BytesIn != m.MemTable.FlushBytes || m.Compaction.Count != 0 {
		t.Fatalf("after one flush: %d flushes of %d bytes, L0: %+v, %d compactions",
			m.MemTable.Flushes, m.MemTable.FlushBytes, m.Levels[0], m.Compaction.Count)
	}
	if m.WAL.BytesIn < keys*valueLen || m.WAL.BytesWritten < m.WAL.BytesIn || m.MemTable.FlushBytes < keys*valueLen {
		t.Fatalf("after one flush of %d values of %d bytes: committed %d, logged %d, flushed %d",
			keys, valueLen, m.WAL.BytesIn, m.WAL.BytesWritten, m.MemTable.FlushBytes)
	}
	checkWriteAmp(m)
	if wa := m.WriteAmp(); wa < 2 {
		t.Fatalf("write amplification %v after logging and flushing everything", wa)
	}

	// The second flush makes two L0 tables: the compaction starts and is
	// held.
	write(1)
	g.waitEntered(t)
	held := time.Now()
	inputs := tableFiles(t, mem, "/db")
	flushed := db.Metrics()
	if len(inputs) != 2 || flushed.Levels[0].Tables != 2 || flushed.Compaction.InProgress != 1 ||
		flushed.MemTable.FlushBytes != int64(flushed.Levels[0].Bytes) {
		t.Fatalf("after the second flush: tables %v, L0 %+v, %d compactions running", inputs, flushed.Levels[0], flushed.Compaction.InProgress)
	}
	waited := make(chan error, 1)
	go func() { waited <- db.WaitForCompactions(context.Background()) }()
	select {
	case err := <-waited:
		t.Fatalf("WaitForCompactions returned %v while a compaction was held", err)
	case <-time.After(20 * time.Millisecond):
	}
	heldFor := time.Since(held)
	g.release()
	select {
	case err := <-waited:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WaitForCompactions did not return after the compaction")
	}

	m = db.Metrics()
	c := m.Compaction
	if m.Levels[0].Tables != 0 || m.Levels[m.BaseLevel].Tables == 0 || c.InProgress != 0 || c.Count != 1 || c.Moves != 0 || m.Levels[0].Compactions != 1 {
		t.Fatalf("after WaitForCompactions: tables per level %v, compactions %+v, L0 %+v", tablesPerLevel(m), c, m.Levels[0])
	}
	if c.BytesRead != flushed.MemTable.FlushBytes || c.BytesWritten != int64(m.Levels[m.BaseLevel].Bytes) || m.Levels[m.BaseLevel].BytesIn != c.BytesWritten {
		t.Fatalf("compaction read %d bytes (flushed %d), wrote %d (base level %+v)", c.BytesRead, flushed.MemTable.FlushBytes, c.BytesWritten, m.Levels[m.BaseLevel])
	}
	if c.BytesWritten < keys*valueLen || c.BytesWritten >= c.BytesRead {
		t.Fatalf("compaction of two versions of %d values of %d bytes wrote %d bytes of %d read", keys, valueLen, c.BytesWritten, c.BytesRead)
	}
	// The compaction's time includes the time it was held.
	if c.Time < heldFor {
		t.Fatalf("compaction time %v, but it was held for %v", c.Time, heldFor)
	}
	bw := m.CompactionBandwidth()
	if want := float64(c.BytesRead+c.BytesWritten) / c.Time.Seconds(); math.Abs(bw-want) > 1e-9*want || bw <= 0 {
		t.Fatalf("CompactionBandwidth() = %v, want %v", bw, want)
	}
	if limit := float64(c.BytesRead+c.BytesWritten) / heldFor.Seconds(); bw > limit {
		t.Fatalf("CompactionBandwidth() = %v, more than %v bytes/s over the time the compaction was held", bw, limit)
	}
	checkWriteAmp(m)
	if m.WriteAmp() <= flushed.WriteAmp() {
		t.Fatalf("write amplification %v after the compaction, %v before", m.WriteAmp(), flushed.WriteAmp())
	}

	// The inputs are deleted (by the background cleaner).
	deadline := time.Now().Add(10 * time.Second)
	for db.Metrics().TablesDeleted < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	m = db.Metrics()
	if m.TablesDeleted != 2 || m.DeleteErrors != 0 {
		t.Fatalf("%d tables deleted (%d errors), want the 2 compaction inputs", m.TablesDeleted, m.DeleteErrors)
	}
	now := tableFiles(t, mem, "/db")
	for n := range inputs {
		if now[n] {
			t.Fatalf("compaction input %s still on disk", n)
		}
	}
	if len(now) != m.Levels[m.BaseLevel].Tables {
		t.Fatalf("tables on disk %v, %d in the base level", now, m.Levels[m.BaseLevel].Tables)
	}

	// A Get consults one table through the table cache; the second Get of
	// the same key finds it there.
	before := m.TableCache
	mustGet(t, db, "k007", strings.Repeat("1", valueLen))
	mustGet(t, db, "k007", strings.Repeat("1", valueLen))
	after := db.Metrics().TableCache
	if lookups := after.Hits + after.Misses - before.Hits - before.Misses; lookups != 2 || after.Hits-before.Hits < 1 {
		t.Fatalf("table cache before two Gets %+v, after %+v: want 2 lookups, at least 1 hit", before, after)
	}
	if after.Open < 1 || after.Open > m.Levels[m.BaseLevel].Tables {
		t.Fatalf("%d tables open in the cache, %d live", after.Open, m.Levels[m.BaseLevel].Tables)
	}
}
