package kv

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/internal/batchrepr"
	"github.com/warpkit/warpkit/kv/internal/memtable"
	"github.com/warpkit/warpkit/kv/manifest"
	"github.com/warpkit/warpkit/kv/record"
)

// The commit pipeline is LevelDB's: writers queue under d.mu; the writer at
// the head leads a group of the queued batches. The leader makes room (a
// memtable switch, or a wait when flushes or L0 compactions fall behind),
// assigns the group consecutive sequence numbers, and with d.mu released
// writes the group to the log as one record (one fsync if any writer asked
// for Sync), then applies it to the memtable. Finally it publishes the
// group's last sequence number, which makes the whole group visible to
// readers at once, and hands leadership to the next writer.

// writer is one Apply call waiting in the commit queue.
type writer struct {
	batch *Batch
	sync  bool
	flush bool // a Flush request: rotate the memtable, write nothing
	done  bool
	err   error
	cond  sync.Cond
}

var writerPool = sync.Pool{New: func() any { return new(writer) }}

// Group limits, as in LevelDB: a small first batch does not make its
// followers wait behind a large group.
const (
	maxGroupBytes   = 1 << 20
	smallBatchBytes = 128 << 10
	slowdownDelay   = time.Millisecond
)

// Apply commits a batch atomically.
func (d *DB) Apply(b *Batch, opts *WriteOptions) error {
	if b != nil && b.db != nil && b.db != d {
		return fmt.Errorf("%w: the batch was made by another DB's NewBatch", ErrInvalidArgument)
	}
	if b == nil || b.Empty() {
		return nil
	}
	if err := b.prepare(); err != nil {
		return err
	}
	err := d.commit(b, opts.sync(), false)
	if err == nil {
		b.committed = true
	}
	return err
}

// Set writes key = value.
func (d *DB) Set(key, value []byte, opts *WriteOptions) error {
	b := batchPool.Get().(*Batch)
	b.Reset()
	b.Set(key, value)
	err := d.Apply(b, opts)
	batchPool.Put(b)
	return err
}

// Delete deletes key (deleting an absent key is not an error).
func (d *DB) Delete(key []byte, opts *WriteOptions) error {
	b := batchPool.Get().(*Batch)
	b.Reset()
	b.Delete(key)
	err := d.Apply(b, opts)
	batchPool.Put(b)
	return err
}

// DeleteRange deletes every key in [start, end).
func (d *DB) DeleteRange(start, end []byte, opts *WriteOptions) error {
	b := batchPool.Get().(*Batch)
	b.Reset()
	b.DeleteRange(start, end)
	err := d.Apply(b, opts)
	batchPool.Put(b)
	return err
}

var batchPool = sync.Pool{New: func() any { return &Batch{} }}

func (d *DB) commit(b *Batch, sync, flush bool) error {
	w := writerPool.Get().(*writer)
	*w = writer{batch: b, sync: sync, flush: flush}
	w.cond.L = &d.mu.Mutex
	defer writerPool.Put(w)

	d.mu.Lock()
	if d.mu.closed {
		d.mu.Unlock()
		return ErrClosed
	}
	if d.opts.ReadOnly {
		d.mu.Unlock()
		return ErrReadOnly
	}
	d.mu.writers = append(d.mu.writers, w)
	for !w.done && d.mu.writers[0] != w {
		w.cond.Wait()
	}
	if w.done {
		d.mu.Unlock()
		return w.err
	}
	// w leads.
	group, err := d.leadLocked(w)
	// Hand the results out and pass leadership on.
	for _, x := range group {
		x.done, x.err = true, err
		if x != w {
			x.cond.Signal()
		}
	}
	d.mu.writers = d.mu.writers[len(group):]
	if len(d.mu.writers) > 0 {
		d.mu.writers[0].cond.Signal()
	} else {
		d.mu.cond.Broadcast() // Close waits for an empty queue
	}
	d.unlockReport()
	return err
}

// leadLocked runs one commit group; it returns the writers it covered (at
// least the leader). Called and returns with d.mu held.
func (d *DB) leadLocked(w *writer) ([]*writer, error) {
	if w.flush {
		switch {
		case d.mu.bgErr != nil:
			return []*writer{w}, d.writeStoppedErrLocked()
		case d.mu.closed:
			return []*writer{w}, ErrClosed
		}
		return []*writer{w}, d.rotateMemTableLocked(true)
	}
	// Gather the group: the leader and the batches queued behind it.
	size := len(w.batch.repr)
	limit := maxGroupBytes
	if size <= smallBatchBytes {
		limit = size + smallBatchBytes
	}
	n := 1
	count := w.batch.count
	sync := w.sync
	for ; n < len(d.mu.writers); n++ {
		x := d.mu.writers[n]
		if x.flush || (x.sync && !sync) || size+len(x.batch.repr)-batchrepr.HeaderLen > limit {
			break // do not make a non-sync group pay for an fsync it did not ask for
		}
		if memtable.NeededBytes(size+len(x.batch.repr)-batchrepr.HeaderLen, count+x.batch.count) > maxBatchMemory() {
			break // the group must fit one memtable
		}
		size += len(x.batch.repr) - batchrepr.HeaderLen
		count += x.batch.count
	}
	group := d.mu.writers[:n]
	if err := d.makeRoomLocked(memtable.NeededBytes(size, count)); err != nil {
		return group, err
	}
	seq := d.mu.lastSeq + 1
	d.mu.lastSeq += base.SeqNum(count)
	mem, wal := d.mu.mem, d.mu.wal
	d.m.walBytesIn.Add(int64(size))
	d.m.commitGroups.Add(1)
	d.mu.Unlock()

	err := d.writeGroup(group, seq, size, sync, mem, wal)

	d.mu.Lock()
	if err != nil {
		// The log may hold part of this group: stop writing, so that nothing
		// later is acknowledged after a hole. Sequence numbers already handed
		// out stay unused.
		d.setBackgroundErrorLocked(fmt.Errorf("kv: write-ahead log: %w", err))
		return group, d.writeStoppedErrLocked()
	}
	d.visibleSeq.Store(uint64(seq) + uint64(count) - 1)
	return group, nil
}

// writeGroup logs a group as one record and applies it to the memtable. It
// runs without d.mu; only the leader touches the log and the group's batches.
func (d *DB) writeGroup(group []*writer, seq base.SeqNum, size int, sync bool, mem *memtable.MemTable, wal *walFile) error {
	var rec []byte
	if len(group) == 1 {
		rec = group[0].batch.repr
		batchrepr.SetSeqNum(rec, seq)
	} else {
		rec = d.groupBuf(size)
		var count uint32
		for _, x := range group {
			rec = append(rec, x.batch.repr[batchrepr.HeaderLen:]...)
			count += x.batch.count
		}
		batchrepr.SetSeqNum(rec, seq)
		batchrepr.SetCount(rec, count)
	}
	end, err := wal.w.WriteRecord(rec)
	if err != nil {
		return err
	}
	if sync {
		if err := wal.w.Sync(end); err != nil {
			return err
		}
		d.m.walSyncs.Add(1)
	}
	if err := mem.Apply(rec); err != nil {
		return fmt.Errorf("kv: memtable: %w", err)
	}
	return nil
}

// groupBuf returns the leader's scratch buffer for a combined record.
func (d *DB) groupBuf(size int) []byte {
	if cap(d.m.groupBuf) < size {
		d.m.groupBuf = make([]byte, 0, size)
	}
	return append(d.m.groupBuf[:0], make([]byte, batchrepr.HeaderLen)...)
}

// makeRoomLocked reserves need bytes in the memtable, switching memtables and
// stalling as the thresholds say. Called with d.mu held by the leader.
func (d *DB) makeRoomLocked(need int64) error {
	defer d.endStallLocked() // whatever way the wait ends
	delayed := false
	for {
		switch {
		case d.mu.bgErr != nil:
			return d.writeStoppedErrLocked()
		case d.mu.closed:
			return ErrClosed
		}
		l0 := len(d.rs.version.Levels[0])
		if !delayed && l0 >= d.opts.L0SlowdownWritesThreshold && d.opts.L0SlowdownWritesThreshold < d.opts.L0StopWritesThreshold {
			// Give the compaction some CPU, once per write, rather than
			// stopping hard later (LevelDB's slowdown).
			delayed = true
			d.mu.Unlock()
			time.Sleep(slowdownDelay)
			d.mu.Lock()
			d.m.slowdowns.Add(1)
			d.m.slowdownNanos.Add(int64(slowdownDelay))
			continue
		}
		if d.mu.mem.Reserve(need) {
			return nil
		}
		// Groups apply one at a time and the last one has finished (its
		// leader handed over after Apply): the reservation may drop to the
		// bytes the entries took before the memtable is called full.
		d.mu.mem.Reclaim()
		if d.mu.mem.Reserve(need) {
			return nil
		}
		switch {
		case len(d.mu.imm)+1 >= d.opts.MemTableStopWritesThreshold:
			if d.beginStallLocked(StallMemTable) {
				continue // d.mu was released: look again
			}
			d.stallLocked(&d.m.memtableStops)
		case l0 >= d.opts.L0StopWritesThreshold:
			if d.beginStallLocked(StallL0) {
				continue
			}
			d.stallLocked(&d.m.l0Stops)
		default:
			if d.endStallLocked() {
				continue // d.mu was released: look again
			}
			if err := d.rotateMemTableLocked(false); err != nil {
				return err
			}
			if d.mu.mem.Empty() && need > d.mu.mem.Room() {
				// A batch larger than an empty memtable's room (its capacity
				// less the skiplist heads) gets a memtable of its own.
				// Batch.prepare and the grouping keep need within the
				// largest memtable; should one not fit even that, fail
				// rather than rotate empty memtables for ever.
				if need > maxBatchMemory() {
					return fmt.Errorf("%w: commit group needs %d bytes of memtable, more than the %d a memtable holds",
						ErrInvalidArgument, need, maxBatchMemory())
				}
				d.mu.mem = memtable.New(int(need)+memtable.MinCapacity, d.mu.mem.LogNum())
				d.updateReadStateLocked()
			}
		}
	}
}

// beginStallLocked records that writes stop for reason, ending a stall for
// another reason first. It reports whether it released d.mu (to log and run
// the listener), after which the caller must look at the state again.
func (d *DB) beginStallLocked(reason string) bool {
	if d.mu.stall.reason == reason {
		return false
	}
	d.endStallLocked()
	d.mu.stall.reason = reason
	d.mu.stall.start = time.Now()
	d.m.stalls.Add(1)
	l0, imm := len(d.rs.version.Levels[0]), len(d.mu.imm)
	d.mu.Unlock()
	d.opts.logger().Warn("kv: write stall begins", "reason", reason, "L0 tables", l0, "memtables waiting", imm)
	if f := d.events().WriteStallBegin; f != nil {
		f(WriteStallBeginInfo{Reason: reason})
	}
	d.mu.Lock()
	return true
}

// endStallLocked ends the stall in progress, if any; it reports whether it
// released d.mu (to log and run the listener).
func (d *DB) endStallLocked() bool {
	if d.mu.stall.reason == "" {
		return false
	}
	dur := time.Since(d.mu.stall.start)
	d.m.stallEpisodeNanos.Add(int64(dur))
	reason := d.mu.stall.reason
	d.mu.stall.reason = ""
	d.mu.Unlock()
	d.opts.logger().Info("kv: write stall ends", "reason", reason, "duration", dur)
	if f := d.events().WriteStallEnd; f != nil {
		f()
	}
	d.mu.Lock()
	return true
}

// stallLocked waits for background work to make progress.
func (d *DB) stallLocked(counter *atomicCounter) {
	counter.Add(1)
	start := time.Now()
	d.mu.cond.Wait()
	d.m.stallNanos.Add(int64(time.Since(start)))
}

// rotateMemTableLocked makes the memtable immutable, starts a new log, and
// schedules a flush. With force false an empty memtable is kept. d.mu is
// released while the new log is created and the old one synced.
func (d *DB) rotateMemTableLocked(force bool) error {
	if d.mu.mem.Empty() {
		if force {
			d.signal(d.flushCh) // flush the waiting memtables, if any
		}
		return nil
	}
	d.mu.Unlock()
	// The new log is the spare: created, and recorded in the manifest (so
	// that the manifest knows every log that may hold unflushed writes)
	// before anything is written to it. Normally it has been ready since the
	// last switch.
	sp := <-d.spare
	if sp.err != nil {
		d.mu.Lock()
		if d.mu.bgErr != nil {
			d.spare <- sp // the manifest failed: nothing to retry
			return d.writeStoppedErrLocked()
		}
		// Creating the file failed: try again (with the seal it was to
		// carry) for the next switch; the old log still works.
		go d.prepareSpare(sp.sealed)
		return sp.err
	}
	wal := &walFile{num: sp.num, file: sp.file, w: record.NewLogWriter(sp.file)}
	old := d.mu.wal
	// The old log must be durable before any write in the new one can be
	// acknowledged as synced.
	oldErr := old.w.Close()
	d.m.walBytesClosed.Add(old.w.Size())
	if cerr := old.file.Close(); oldErr == nil {
		oldErr = cerr
	}
	var sealed *manifest.SealedWAL
	if oldErr == nil {
		// Sealing records where the old log ends (it is complete): the next
		// Open treats damage anywhere in it as corruption. The seal goes
		// with the next spare's record, in the background.
		sealed = &manifest.SealedWAL{Num: old.num, Size: old.w.Size()}
	}
	go d.prepareSpare(sealed)
	d.mu.Lock()
	d.mu.wal = wal
	if oldErr != nil {
		d.setBackgroundErrorLocked(fmt.Errorf("kv: close log %s: %w", old.num, oldErr))
		return d.writeStoppedErrLocked()
	}
	d.mu.imm = append(d.mu.imm, d.mu.mem)
	d.mu.mem = memtable.New(d.opts.MemTableSize, wal.num)
	d.updateReadStateLocked()
	d.signal(d.flushCh)
	return nil
}

// Flush makes the current memtable immutable and waits until every
// memtable is written to an L0 table.
func (d *DB) Flush() error { return d.flush(context.Background()) }

// flush is Flush, giving up waiting (not the flush) when ctx ends.
func (d *DB) flush(ctx context.Context) error {
	b := &Batch{}
	if err := d.commit(b, false, true); err != nil {
		return err
	}
	stop := d.wakeOnDone(ctx)
	defer stop()
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.mu.imm) == 0 {
		return nil
	}
	// Wait for the newest waiting memtable (ours, or a later one) to go.
	target := d.mu.imm[len(d.mu.imm)-1]
	for slices.Contains(d.mu.imm, target) {
		if d.mu.bgErr != nil {
			return d.writeStoppedErrLocked()
		}
		if d.mu.closed {
			return ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		d.signal(d.flushCh)
		d.mu.cond.Wait()
	}
	return nil
}
