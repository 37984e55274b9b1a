package compactiontest

import (
	"bytes"
	"sync"
)

// LogBuffer is a bytes.Buffer safe for concurrent writes: the output of a
// slog handler that a store's or compactor's background goroutines log to
// while the test reads it.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
