package kv

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/internal/batchrepr"
	"github.com/warpkit/warpkit/kv/internal/memtable"
	"github.com/warpkit/warpkit/kv/manifest"
	"github.com/warpkit/warpkit/kv/record"
)

// The commit pipeline: group commit for the log (LevelDB's), concurrent
// apply for the memtable (Pebble's), and a writer list without a lock
// (RocksDB's write thread). A writer links itself into d.newest with one
// compare-and-swap; the writer that finds the list empty leads. The leader
// gathers the writers linked behind it into a group, makes room under d.mu
// (a memtable switch, or a wait when flushes or L0 compactions fall behind),
// assigns the group consecutive sequence numbers, and with d.mu released
// writes the group to the log as one record (one fsync if any writer asked
// for Sync). It then hands leadership to the oldest writer behind the group
// (or empties the list) and releases the group: every writer of the group,
// the leader among them, inserts its own batch into the memtable,
// concurrently with the others and with the next groups (the skiplist takes
// concurrent inserts), and returns the part of its memtable reservation its
// entries did not take. On machines of few processors the leader applies
// the whole group itself (d.leaderApplies): there the writers would only
// take turns on the processors, each at the cost of a wake-up.
//
// A batch becomes visible when it and every batch before it are in the
// memtable: logged batches wait in d.pending in sequence order, and a writer
// that has applied its batch publishes the applied batches at the head of
// the queue (d.visibleSeq ratchets up to the last of them) and wakes their
// writers; each Apply call returns once its batch is visible, so a Get after
// a Set sees it. A memtable is flushed only after every writer given it has
// finished (MemTable.Writing), which makes every batch in it visible first;
// Close waits for the list to empty and for the writers in flight
// (d.commitInflight).
//
// A writer waits for its events (leadership, its group logged or failed,
// its batch published by another writer) first by watching a word, then
// parked on a channel (writer.await): on machines of many processors the
// events come microseconds apart, and a parked goroutine costs its waker a
// wake-up and itself a trip through the scheduler (RocksDB's writers wait
// the same way).

// writer is one Apply call in the commit pipeline.
type writer struct {
	batch *Batch
	sync  bool
	flush bool // a Flush request: rotate the memtable, write nothing
	// older is the writer linked before this one (nil for a leader);
	// newer the one after it, set by the leader when it gathers.
	older, newer *writer
	// Set by the leader before it signals the writer.
	state writerState
	err   error              // the outcome, for wDone and wApplied
	seq   base.SeqNum        // first sequence number of the batch (logged)
	mem   *memtable.MemTable // where the batch goes (logged)
	// reserved is the memtable room reserved for the batch.
	reserved int64
	applied  atomic.Bool
	// followers is the group a leader gathered, without itself (the
	// leader's own scratch).
	followers []*writer
	// ev and wake deliver the writer's events: leadership, the end of its
	// group's logging, the publication of its batch by another writer. Each
	// is signalled once and awaited once, in that order.
	ev   atomic.Uint32
	wake chan struct{}
}

type writerState uint8

const (
	wQueued  writerState = iota // linked behind a leader
	wLead                       // the oldest writer in the list: lead a group
	wLogged                     // the batch is in the log: apply it
	wDone                       // finished without logging: err is the outcome
	wApplied                    // the leader applied the batch, and it is published
)

const (
	evIdle uint32 = iota
	evSet
	evParked
)

var writerPool = sync.Pool{New: func() any { return &writer{wake: make(chan struct{}, 1)} }}

// Group limits, as in LevelDB: a small first batch does not make its
// followers wait behind a large group. A group also has at most
// maxGroupWriters batches, so that it fits the publication queue.
const (
	maxGroupBytes   = 1 << 20
	smallBatchBytes = 128 << 10
	maxGroupWriters = pendingCap / 4
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
	if d.closing.Load() {
		return ErrClosed // a writer that gets past this fails in makeRoomLocked
	}
	if d.opts.ReadOnly {
		return ErrReadOnly
	}
	d.commitActive.Add(1)
	defer d.commitActive.Add(-1)
	w := writerPool.Get().(*writer)
	w.batch, w.sync, w.flush = b, sync, flush
	w.older, w.newer = nil, nil
	w.state, w.err, w.seq, w.mem, w.reserved = wQueued, nil, 0, nil, 0
	w.applied.Store(false)
	defer func() {
		w.batch, w.mem, w.err, w.older, w.newer = nil, nil, nil, nil, nil
		clear(w.followers)
		w.followers = w.followers[:0]
		writerPool.Put(w)
	}()

	if !d.join(w) {
		w.await(d) // led, logged or failed by a leader, or made leader
		switch w.state {
		case wDone:
			return w.err
		case wLogged:
			return d.applyBatch(w)
		case wApplied:
			return w.err // the leader applied the batch: the event was its publication
		}
	}
	return d.lead(w)
}

// join links w into the writer list; it reports whether w leads (the list
// was empty).
func (d *DB) join(w *writer) bool {
	for {
		old := d.newest.Load()
		w.older = old
		if d.newest.CompareAndSwap(old, w) {
			return old == nil
		}
	}
}

// linkNewer sets the newer links of the writers linked before newest, down
// to the first that has one (or the leader, whose older is nil).
func linkNewer(newest *writer) {
	for x := newest; x.older != nil && x.older.newer == nil; x = x.older {
		x.older.newer = x
	}
}

// lead runs one commit group led by w, the oldest writer in the list, and
// hands leadership on.
func (d *DB) lead(w *writer) error {
	var (
		last  = w
		size  = len(w.batch.repr)
		count = w.batch.count
		need  = memtable.NeededBytes(len(w.batch.repr), w.batch.count)
		sync  = w.sync
	)
	if !w.flush {
		// Gather the group: the leader and the batches linked behind it.
		limit := maxGroupBytes
		if size <= smallBatchBytes {
			limit = size + smallBatchBytes
		}
		newest := d.newest.Load()
		linkNewer(newest)
		for last != newest && len(w.followers)+1 < maxGroupWriters {
			x := last.newer
			if x.flush || (x.sync && !sync) || size+len(x.batch.repr)-batchrepr.HeaderLen > limit {
				break // do not make a non-sync group pay for an fsync it did not ask for
			}
			xneed := memtable.NeededBytes(len(x.batch.repr), x.batch.count)
			if need+xneed > maxBatchMemory() {
				break // the group must fit one memtable
			}
			size += len(x.batch.repr) - batchrepr.HeaderLen
			count += x.batch.count
			need += xneed
			w.followers = append(w.followers, x)
			last = x
		}
	}

	d.mu.Lock()
	var err error
	var wal *walFile
	switch {
	case !w.flush:
		wal, err = d.assignLocked(w, need, count, size)
	case d.mu.bgErr != nil:
		err = d.writeStoppedErrLocked()
	case d.mu.closed:
		err = ErrClosed
	default:
		err = d.rotateMemTableLocked(true)
	}
	d.unlockReport()
	logged := err == nil && !w.flush
	if logged {
		if err = d.writeGroup(w, size, sync, wal); err != nil {
			logged = false
			// The log may hold part of this group: stop writing, so that
			// nothing later is acknowledged after a hole. Sequence numbers
			// already handed out stay unused.
			d.finish(w.mem, 1+len(w.followers), fmt.Errorf("kv: write-ahead log: %w", err))
			d.mu.Lock()
			err = d.writeStoppedErrLocked()
			d.mu.Unlock()
		}
	}
	if logged {
		d.pending.enqueue(w)
		for _, x := range w.followers {
			d.pending.enqueue(x)
		}
	}
	leaderApplies := logged && d.leaderApplies
	for _, x := range w.followers {
		switch {
		case leaderApplies:
			x.state = wApplied
		case logged:
			x.state = wLogged
		default:
			x.state, x.err = wDone, err
		}
	}
	// The next leader first: its group gathers while this one applies.
	d.handOff(last)
	if leaderApplies {
		return d.applyGroup(w)
	}
	for _, x := range w.followers {
		x.signal()
	}
	if !logged {
		return err
	}
	return d.applyBatch(w)
}

// handOff ends the leadership of the group that ends with last: it empties
// the list if nothing was linked behind the group, else makes the oldest
// writer behind it leader.
func (d *DB) handOff(last *writer) {
	if d.newest.Load() == last && d.newest.CompareAndSwap(last, nil) {
		if d.closing.Load() {
			d.mu.Lock()
			d.mu.cond.Broadcast() // Close waits for the list to empty
			d.mu.Unlock()
		}
		return
	}
	linkNewer(d.newest.Load())
	next := last.newer
	next.older = nil
	next.state = wLead
	next.signal()
}

// applyGroup is applyBatch for a whole group, by its leader: on machines of
// few processors the batches' writers would only take turns on them, and
// each would cost a wake-up more. The followers are woken when their
// batches are published.
func (d *DB) applyGroup(w *writer) error {
	err := w.mem.ApplyReserved(w.batch.repr, w.reserved)
	if err != nil {
		err = fmt.Errorf("kv: memtable: %w", err)
	}
	for _, x := range w.followers {
		if aerr := x.mem.ApplyReserved(x.batch.repr, x.reserved); aerr != nil && err == nil {
			err = fmt.Errorf("kv: memtable: %w", aerr)
		}
	}
	// A follower can be published (and return) only once the leader's
	// batch is: mark them first, then the leader's in publish.
	for _, x := range w.followers {
		x.err = err
		x.applied.Store(true)
	}
	d.publish(w)
	d.finish(w.mem, 1+len(w.followers), err)
	return err
}

// finish ends n writers' work on mem, after their batches were published
// or their group failed to log; err (an apply or log failure) stops writes.
func (d *DB) finish(mem *memtable.MemTable, n int, err error) {
	if err != nil {
		d.mu.Lock()
		d.setBackgroundErrorLocked(err)
		d.unlockReport()
	}
	last := false
	for range n {
		last = mem.EndWrite()
	}
	if last && mem.Sealed() {
		d.mu.Lock()
		d.mu.cond.Broadcast() // its flush waits for the last writer
		d.mu.Unlock()
	}
	if d.commitInflight.Add(-int64(n)) == 0 && d.closing.Load() {
		d.mu.Lock()
		d.mu.cond.Broadcast() // Close waits for the last writer
		d.mu.Unlock()
	}
}

// await waits for the writer's next event: it watches for it d.commitSpins
// times (yielding the processor now and then) before it parks, unless
// enough writers already watch — more would take the processors that the
// leader, the writers applying their batches and the background work need:
// half the processors while at most that many writers are in the pipeline,
// a quarter when more are.
func (w *writer) await(d *DB) {
	if d.commitSpins > 0 {
		limit := d.maxSpinners
		if d.commitActive.Load() > int64(limit) {
			limit /= 2
		}
		if d.spinners.Add(1) <= max(limit, 1) {
			for i := range d.commitSpins {
				if w.ev.Load() == evSet {
					d.spinners.Add(-1)
					w.ev.Store(evIdle)
					return
				}
				if i%1024 == 1023 {
					runtime.Gosched()
				}
			}
		}
		d.spinners.Add(-1)
	}
	if w.ev.CompareAndSwap(evIdle, evParked) {
		<-w.wake
	}
	w.ev.Store(evIdle)
}

// signal delivers the writer's next event.
func (w *writer) signal() {
	if w.ev.Swap(evSet) == evParked {
		w.wake <- struct{}{}
	}
}

// applyBatch inserts a logged writer's batch into its memtable, waits until
// the batch is published, and finishes the writer.
func (d *DB) applyBatch(w *writer) error {
	err := w.mem.ApplyReserved(w.batch.repr, w.reserved)
	if err != nil {
		err = fmt.Errorf("kv: memtable: %w", err)
	}
	// Published even if the memtable refused it (an arena or batch fault,
	// which stops writes), so that later batches are not held back; its
	// entries may then be visible in part.
	d.publish(w)
	d.finish(w.mem, 1, err)
	return err
}

// publish marks w's batch applied, publishes the applied batches at the
// head of d.pending, and waits until w's batch is published.
func (d *DB) publish(w *writer) {
	w.applied.Store(true)
	mine := false
	for {
		t := d.pending.dequeueApplied()
		if t == nil {
			break
		}
		// Another writer may publish a later batch first: the visible
		// sequence number only ratchets up, and every batch up to it has
		// been applied (dequeued in order, only once applied).
		last := uint64(t.seq) + uint64(t.batch.count) - 1
		for {
			cur := d.visibleSeq.Load()
			if last <= cur || d.visibleSeq.CompareAndSwap(cur, last) {
				break
			}
		}
		if t == w {
			mine = true
		} else {
			t.signal()
		}
	}
	if !mine {
		w.await(d) // published by the writer that applied the batch before it
	}
}

// assignLocked makes room for the group led by w (need bytes of memtable,
// count entries, size bytes of log record), assigns its sequence numbers and
// memtable, and returns the log to write it to. Called and returns with d.mu
// held (makeRoomLocked may release it: the leader stays the leader).
func (d *DB) assignLocked(w *writer, need int64, count uint32, size int) (*walFile, error) {
	if err := d.makeRoomLocked(need); err != nil {
		return nil, err
	}
	seq := d.mu.lastSeq + 1
	d.mu.lastSeq += base.SeqNum(count)
	mem := d.mu.mem
	assign := func(x *writer) {
		x.seq, x.mem = seq, mem
		x.reserved = memtable.NeededBytes(len(x.batch.repr), x.batch.count)
		batchrepr.SetSeqNum(x.batch.repr, seq)
		seq += base.SeqNum(x.batch.count)
	}
	assign(w)
	for _, x := range w.followers {
		assign(x)
	}
	// Counted before d.mu is released: a memtable switch by the next leader
	// must not let this one be flushed before the group is in it.
	n := 1 + len(w.followers)
	mem.BeginWrites(n)
	d.commitInflight.Add(int64(n))
	d.m.walBytesIn.Add(int64(size))
	d.m.commitGroups.Add(1)
	return d.mu.wal, nil
}

// writeGroup logs the group led by w as one record; the batches' sequence
// numbers are assigned. It runs without d.mu; only the leader touches the
// log and the group's batches.
func (d *DB) writeGroup(w *writer, size int, sync bool, wal *walFile) error {
	rec := w.batch.repr
	if len(w.followers) > 0 {
		rec = d.groupBuf(size)
		rec = append(rec, w.batch.repr[batchrepr.HeaderLen:]...)
		count := w.batch.count
		for _, x := range w.followers {
			rec = append(rec, x.batch.repr[batchrepr.HeaderLen:]...)
			count += x.batch.count
		}
		batchrepr.SetSeqNum(rec, w.seq)
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
	old := d.mu.wal
	// No record goes to the old log any more (the leader switching logs
	// is the only writer): its length is final.
	oldSize := old.w.Size()
	d.m.walBytesClosed.Add(oldSize)
	// The old log is synced and closed in the background while writes go
	// on into the new one, whose writer writes nothing to its file until
	// that is done: a sync in the new log waits for the old log's, and a
	// log's torn end still ends the log sequence at recovery (the new file
	// holds no byte before the old one is durable). Writers do not stop
	// for the old log's sync.
	closed := make(chan struct{})
	var oldErr error
	wal := &walFile{num: sp.num, file: sp.file, w: record.NewLogWriterAfter(sp.file, func() error {
		<-closed
		return oldErr
	})}
	d.mu.Lock()
	// Listed before its closer starts (which takes d.mu once the
	// switch is done): a flush of its memtable leaves its removal to it.
	d.mu.closingLogs[old.num] = false
	go func() {
		oldErr = old.w.Close()
		if cerr := old.file.Close(); oldErr == nil {
			oldErr = cerr
		}
		var sealed *manifest.SealedWAL
		if oldErr == nil {
			// Sealing records where the old log ends (it is complete): the
			// next Open treats damage anywhere in it as corruption. The
			// seal goes with the next spare's record.
			sealed = &manifest.SealedWAL{Num: old.num, Size: oldSize}
		}
		d.mu.Lock()
		if d.mu.closingLogs[old.num] { // its memtable is flushed meanwhile
			d.addObsoleteFile(base.MakeFilename(base.FileTypeLog, old.num))
		}
		delete(d.mu.closingLogs, old.num)
		if oldErr != nil {
			d.setBackgroundErrorLocked(fmt.Errorf("kv: close log %s: %w", old.num, oldErr))
		}
		close(closed)
		d.unlockReport()
		d.prepareSpare(sealed)
	}()
	d.mu.wal = wal
	d.mu.mem.Seal()
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

// commitMode sets how writers wait and who applies a group's batches, from
// the processors the store may use (GOMAXPROCS at Open). Measured on the
// 16-core device host (docs/benchmarks.md, "kv: the commit pipeline"):
// watching writers doubled the 8-client fill rate at 16 and 8 processors and
// left 4 unchanged; leaders applying their groups won at 8 processors and
// fewer, writers applying their own at 16.
func commitMode(procs int) (spins int, maxSpinners int32, leaderApplies bool) {
	if procs >= 4 {
		spins = commitSpins
	}
	return spins, int32(procs / 2), procs <= 8
}

// commitModeFor is commitMode; tests replace it to run every mode on any
// machine.
var commitModeFor = commitMode

// commitSpins is how many times a waiting writer looks for its event before
// it parks: 10–20 µs.
const commitSpins = 8192
