package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// compactTrace writes one line per finished compaction of the stores that
// report them (--trace-compactions): how much of each level a store's jobs
// carry, which is where two stores' write amplification parts.
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

// start returns the function a store calls at each finished compaction.
func (t *compactTrace) start(store string) func(in []traceLevel, outLevel int, outBytes uint64, note string) {
	t0 := time.Now()
	return func(in []traceLevel, outLevel int, outBytes uint64, note string) {
		var b strings.Builder
		fmt.Fprintf(&b, "%-12s %8.3fs", store, time.Since(t0).Seconds())
		for _, l := range in {
			fmt.Fprintf(&b, " L%d:%d/%.2fMB", l.level, l.tables, float64(l.bytes)/1e6)
		}
		fmt.Fprintf(&b, " -> L%d %.2fMB", outLevel, float64(outBytes)/1e6)
		if note != "" {
			b.WriteString(" " + note)
		}
		b.WriteByte('\n')
		t.mu.Lock()
		defer t.mu.Unlock()
		io.WriteString(t.w, b.String())
	}
}
