package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// compactTrace writes one line per finished compaction and flush, and per
// write stall's begin and end, of the stores that report them
// (--trace-compactions): how much of each level a store's jobs carry, which
// is where two stores' write amplification parts, and when writes wait for
// which flush.
type compactTrace struct {
	mu sync.Mutex
	w  io.Writer
}

// traceLevel is one input level of a compaction.
type traceLevel struct {
	level  int
	tables int
	bytes  uint64
}

// levelOf sums one input level's tables (kv's and Pebble's table infos
// alike: size reads a table's bytes).
func levelOf[T any](level int, tables []T, size func(T) uint64) traceLevel {
	l := traceLevel{level: level, tables: len(tables)}
	for _, t := range tables {
		l.bytes += size(t)
	}
	return l
}

// storeTrace writes one store's lines, timed from its open.
type storeTrace struct {
	t     *compactTrace
	store string
	t0    time.Time
}

// start returns the trace of a store opened now.
func (t *compactTrace) start(store string) *storeTrace {
	return &storeTrace{t: t, store: store, t0: time.Now()}
}

// line writes the store's name, the seconds since its open and text.
func (s *storeTrace) line(text string) {
	l := fmt.Sprintf("%-12s %8.3fs %s\n", s.store, time.Since(s.t0).Seconds(), text)
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	io.WriteString(s.t.w, l)
}

// compaction writes a finished compaction: its input levels with their
// tables and MB, its output level and MB, and note.
func (s *storeTrace) compaction(in []traceLevel, outLevel int, outBytes uint64, note string) {
	var b strings.Builder
	for _, l := range in {
		fmt.Fprintf(&b, "L%d:%d/%.2fMB ", l.level, l.tables, float64(l.bytes)/1e6)
	}
	fmt.Fprintf(&b, "-> L%d %.2fMB", outLevel, float64(outBytes)/1e6)
	if note != "" {
		b.WriteString(" " + note)
	}
	s.line(b.String())
}

// flush writes a finished flush: the memtable's MB and how long it took.
func (s *storeTrace) flush(inBytes uint64, d time.Duration, err error) {
	note := ""
	if err != nil {
		note = " failed"
	}
	s.line(fmt.Sprintf("flush %.2fMB in %.2fms%s", float64(inBytes)/1e6, float64(d)/1e6, note))
}

// stall writes that writes stopped (reason) or, with reason "", resumed.
func (s *storeTrace) stall(reason string) {
	if reason == "" {
		s.line("stall end")
		return
	}
	s.line("stall begin " + reason)
}
