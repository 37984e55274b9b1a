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
