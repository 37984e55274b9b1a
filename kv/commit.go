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

// The commit pipeline, as Pebble's: a writer takes d.commitMu, makes room
// under d.mu (a memtable switch, or a wait when flushes or L0 compactions
// fall behind), takes the batch's sequence numbers, and appends the batch to
// the log (record.LogWriter only copies it into a buffer; its flusher writes
// and syncs in the background, one fsync for every record before it: group
// commit). It then lets the next writer in and, with no lock held, waits for
// the sync if it asked for one and inserts its batch into the memtable,
// concurrently with the other writers (the skiplist takes concurrent
// inserts). A batch becomes visible when it and every batch before it have
// been applied: the writer that applies the last missing one publishes every
// applied batch at the head of d.mu.unpublished, in sequence order, and each
// Apply call returns once its batch is published. A memtable is flushed only
// after every writer given it has finished (MemTable.Writing).
//
// Nothing hands work from one writer to another: under contention writers
// meet only in two short critical sections, where LevelDB's leader/follower
// queue wakes a parked goroutine for every group.

// writer is one Apply call between taking its sequence numbers and being
// published.
type writer struct {
	batch     *Batch
	seq       base.SeqNum        // the batch's first sequence number
	mem       *memtable.MemTable // where the batch goes
	err       error
	applied   bool // (d.mu)
	published bool // visible to readers (d.mu)
	cond      sync.Cond
}

var writerPool = sync.Pool{New: func() any { return new(writer) }}

const slowdownDelay = time.Millisecond

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
	err := d.commit(b, opts.sync())
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

// writableLocked returns why writes cannot be accepted now, if they cannot.
func (d *DB) writableLocked() error {
	switch {
	case d.mu.closed:
		return ErrClosed
	case d.opts.ReadOnly:
		return ErrReadOnly
	case d.mu.bgErr != nil:
		return d.writeStoppedErrLocked()
	}
	return nil
}

func (d *DB) commit(b *Batch, sync bool) error {
	need := memtable.NeededBytes(len(b.repr), b.count)
	d.commitMu.Lock()
	// The writer holding commitMu is the only goroutine that changes mem,
	// wal and lastSeq, so it reads them without d.mu. That lock is needed
	// only when writes are stopped, L0 asks for a slowdown or the memtable
	// is full (makeRoomLocked).
	mem := d.mu.mem
	if d.writesStopped.Load() || int(d.l0Tables.Load()) >= d.opts.L0SlowdownWritesThreshold || !mem.Reserve(need) {
		d.mu.Lock()
		err := d.writableLocked()
		if err == nil {
			err = d.makeRoomLocked(need)
		}
		mem = d.mu.mem
		if err != nil {
			d.commitMu.Unlock()
			d.unlockReport()
			return err
		}
		d.mu.Unlock()
	}
	w := writerPool.Get().(*writer)
	*w = writer{batch: b, seq: d.mu.lastSeq + 1, mem: mem}
	w.cond.L = &d.pub.Mutex
	defer writerPool.Put(w)
	d.mu.lastSeq += base.SeqNum(b.count)
	mem.BeginWrites(1)
	d.pub.Lock()
	d.pub.unpublished = append(d.pub.unpublished, w)
	d.pub.Unlock()
	wal := d.mu.wal

	batchrepr.SetSeqNum(b.repr, w.seq)
	end, err := wal.w.WriteRecord(b.repr)
	d.commitMu.Unlock()
	d.m.walBytesIn.Add(int64(len(b.repr)))
	d.m.walRecords.Add(1)
	if err == nil && sync {
		if err = wal.w.Sync(end); err == nil {
			d.m.walSyncs.Add(1)
		}
	}
	if err != nil {
		// The log may hold part of this batch: stop writing, so that
		// nothing later is acknowledged after a hole. Its sequence numbers
		// are published with nothing behind them.
		d.mu.Lock()
		d.setBackgroundErrorLocked(fmt.Errorf("kv: write-ahead log: %w", err))
		w.err = d.writeStoppedErrLocked()
		d.unlockReport()
	} else if err := mem.Apply(b.repr); err != nil {
		d.mu.Lock()
		w.err = fmt.Errorf("kv: memtable: %w", err)
		d.setBackgroundErrorLocked(w.err)
		d.unlockReport()
	}

	d.pub.Lock()
	d.publishLocked(w)
	for !w.published {
		w.cond.Wait()
	}
	d.pub.Unlock()
	if mem.EndWrite() && mem.Immutable() {
		// The flush of this memtable may be waiting for its last writer.
		d.mu.Lock()
		d.mu.cond.Broadcast()
		d.mu.Unlock()
	}
	return w.err
}

// publishLocked records that w applied its batch and publishes every applied
// batch at the head of d.pub.unpublished, in sequence order. Called with
// d.pub held.
func (d *DB) publishLocked(w *writer) {
	w.applied = true
	q := d.pub.unpublished
	n := 0
	for n < len(q) && q[n].applied {
		x := q[n]
		d.visibleSeq.Store(uint64(x.seq) + uint64(x.batch.count) - 1)
		x.published = true
		if x != w {
			x.cond.Signal()
		}
		n++
	}
	clear(q[:n])
	d.pub.unpublished = q[n:]
	if len(d.pub.unpublished) == 0 && d.pub.closeWaits {
		d.pub.idle.Broadcast()
	}
}

// makeRoomLocked reserves need bytes in the memtable, switching memtables and
// stalling as the thresholds say. Called with d.commitMu and d.mu held.
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
		if !delayed && l0 >= d.opts.L0SlowdownWritesThreshold {
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
				// Batch.prepare keeps need within the largest memtable; should one not fit even that, fail
				// rather than rotate empty memtables for ever.
				if need > maxBatchMemory() {
					return fmt.Errorf("%w: batch needs %d bytes of memtable, more than the %d a memtable holds",
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
	if d.mu.mem.Empty() && !d.mu.mem.Writing() {
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
	d.mu.mem.MarkImmutable()
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
	d.commitMu.Lock()
	d.mu.Lock()
	err := d.writableLocked()
	if err == nil {
		err = d.rotateMemTableLocked(true)
	}
	d.commitMu.Unlock()
	d.unlockReport()
	if err != nil {
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
