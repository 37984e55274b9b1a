package record

import (
	"errors"
	"fmt"
	"io"
	"sync"
)

// SyncWriter is what a LogWriter writes to: a file.
type SyncWriter interface {
	io.Writer
	Sync() error
}

// LogWriter is a record writer for write-ahead logs. WriteRecord only copies
// the record into a block buffer; a background goroutine writes filled bytes
// to the file as soon as they exist and performs syncs, so one fsync covers
// every record appended before it started (group commit).
//
// WriteRecord must not be called concurrently with itself (the store's commit
// pipeline serialises it); Flush, Sync and WriteRecord may otherwise be used
// from different goroutines. After a write or sync error every later call
// returns that error.
type LogWriter struct {
	f     SyncWriter
	prior func() error // NewLogWriterAfter's: nothing is written before it returns

	mu      sync.Mutex
	work    sync.Cond // the flusher waits here for bytes or requests
	cur     *logBlock // block being filled
	full    []*logBlock
	free    []*logBlock
	size    int64 // logical length: every byte appended
	written int64 // bytes handed to f.Write
	synced  int64 // bytes covered by a completed Sync
	waiters []waiter
	err     error
	closing bool
	done    chan struct{}

	// Stats, under mu.
	syncs  int64
	writes int64
}

type logBlock struct {
	buf     [BlockSize]byte
	base    int64 // file offset of buf[0]
	filled  int
	written int
}

type waiter struct {
	off  int64
	sync bool
	ch   chan error
}

// NewLogWriter starts a LogWriter on an empty file.
func NewLogWriter(f SyncWriter) *LogWriter { return NewLogWriterAfter(f, nil) }

// NewLogWriterAfter starts a LogWriter on an empty file that writes nothing
// to it until prior has returned: records are taken at once (and kept in
// its blocks), while Flush and Sync wait for prior and then for the file.
// The store passes the sync of the log before this one, so that writes go
// on at a switch of logs while the old log is synced, and the new file
// still holds no byte before the old one is durable (which recovery relies
// on: a log's torn end ends the log sequence). If prior returns an error,
// the writer writes nothing and fails every call with it. A nil prior is
// NewLogWriter.
func NewLogWriterAfter(f SyncWriter, prior func() error) *LogWriter {
	w := &LogWriter{f: f, prior: prior, cur: &logBlock{}, done: make(chan struct{})}
	w.work.L = &w.mu
	go w.flushLoop()
	return w
}

// WriteRecord appends a record and returns the log length after it. Pass the
// length to Sync or Flush to wait for this record's durability.
func (w *LogWriter) WriteRecord(p []byte) (int64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return 0, w.err
	}
	if w.closing {
		return 0, errors.New("record: write to closed log")
	}
	first := true
	for {
		b := w.cur
		if BlockSize-b.filled < HeaderSize {
			clear(b.buf[b.filled:])
			w.size += int64(BlockSize - b.filled)
			b.filled = BlockSize
			w.full = append(w.full, b)
			w.cur = w.newBlock(b.base + BlockSize)
			b = w.cur
		}
		n := min(len(p), BlockSize-b.filled-HeaderSize)
		last := n == len(p)
		typ := chunkType(first, last)
		old := b.filled
		b.filled = encodeChunk(b.buf[:], b.filled, typ, p[:n])
		w.size += int64(b.filled - old)
		p = p[n:]
		first = false
		if last {
			break
		}
	}
	w.work.Signal()
	return w.size, nil
}

func (w *LogWriter) newBlock(base int64) *logBlock {
	var b *logBlock
	if n := len(w.free); n > 0 {
		b = w.free[n-1]
		w.free = w.free[:n-1]
		b.filled, b.written = 0, 0
	} else {
		b = &logBlock{}
	}
	b.base = base
	return b
}

// Sync waits until the log is durable through offset off.
func (w *LogWriter) Sync(off int64) error { return w.wait(off, true) }

// Flush waits until the log has been handed to the file through offset off.
func (w *LogWriter) Flush(off int64) error { return w.wait(off, false) }

func (w *LogWriter) wait(off int64, sync bool) error {
	w.mu.Lock()
	if w.err != nil {
		err := w.err
		w.mu.Unlock()
		return err
	}
	off = min(off, w.size)
	if (sync && w.synced >= off) || (!sync && w.written >= off) {
		w.mu.Unlock()
		return nil
	}
	ch := make(chan error, 1)
	w.waiters = append(w.waiters, waiter{off: off, sync: sync, ch: ch})
	w.work.Signal()
	w.mu.Unlock()
	return <-ch
}

// Size returns the log's logical length.
func (w *LogWriter) Size() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.size
}

// Stats returns how many write and sync calls the file has seen.
func (w *LogWriter) Stats() (writes, syncs int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writes, w.syncs
}

// Close flushes and syncs everything, stops the flusher and returns the first
// error seen. It does not close the file.
func (w *LogWriter) Close() error {
	w.mu.Lock()
	size := w.size
	w.mu.Unlock()
	err := w.Sync(size)
	w.mu.Lock()
	w.closing = true
	w.work.Signal()
	w.mu.Unlock()
	<-w.done
	return err
}

type segment struct {
	b        *logBlock
	from, to int
}

func (w *LogWriter) flushLoop() {
	defer close(w.done)
	var perr error
	if w.prior != nil {
		perr = w.prior()
	}
	var segs []segment
	w.mu.Lock()
	defer w.mu.Unlock()
	if perr != nil && w.err == nil {
		w.err = fmt.Errorf("record: the log before this one failed: %w", perr)
	}
	for {
		for w.err == nil && !w.closing && w.written == w.size && !w.needSync() {
			w.work.Wait()
		}
		if w.err != nil || (w.closing && w.written == w.size && !w.needSync()) {
			w.failWaiters()
			return
		}
		// Collect every unwritten byte: filled blocks, then the current one.
		segs = segs[:0]
		for _, b := range w.full {
			segs = append(segs, segment{b, b.written, b.filled})
		}
		segs = append(segs, segment{w.cur, w.cur.written, w.cur.filled})
		target := w.size
		doSync := w.needSync()
		w.mu.Unlock()

		var err error
		nwrites := 0
		for _, s := range segs {
			if s.to > s.from {
				if _, err = w.f.Write(s.b.buf[s.from:s.to]); err != nil {
					break
				}
				nwrites++
			}
		}
		if err == nil && doSync {
			err = w.f.Sync()
		}

		w.mu.Lock()
		w.writes += int64(nwrites)
		if err != nil {
			w.err = err
			continue
		}
		if doSync {
			w.syncs++
		}
		for _, s := range segs {
			s.b.written = s.to
		}
		kept := w.full[:0]
		for _, b := range w.full {
			if b.written == BlockSize {
				w.free = append(w.free, b)
			} else {
				kept = append(kept, b)
			}
		}
		clear(w.full[len(kept):])
		w.full = kept
		w.written = target
		if doSync {
			w.synced = target
		}
		w.wakeWaiters()
	}
}

// needSync reports whether a waiter needs a sync beyond what is synced.
func (w *LogWriter) needSync() bool {
	for _, wt := range w.waiters {
		if wt.sync && wt.off > w.synced {
			return true
		}
	}
	return false
}

func (w *LogWriter) wakeWaiters() {
	kept := w.waiters[:0]
	for _, wt := range w.waiters {
		if (wt.sync && wt.off <= w.synced) || (!wt.sync && wt.off <= w.written) {
			wt.ch <- nil
		} else {
			kept = append(kept, wt)
		}
	}
	clear(w.waiters[len(kept):])
	w.waiters = kept
}

func (w *LogWriter) failWaiters() {
	err := w.err
	if err == nil {
		err = errors.New("record: log closed")
	}
	for _, wt := range w.waiters {
		wt.ch <- err
	}
	w.waiters = nil
}
