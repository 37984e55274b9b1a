package kv

import (
	"runtime"
	"sync/atomic"
)

// pendingCap is the capacity of the publication queue: the most batches
// logged but not yet published. Leaders add at most maxGroupWriters at a
// time and wait for room beyond that.
const pendingCap = 1 << 12

// pendingQueue holds the logged batches that are not yet visible, in
// sequence order (d.pending). Only the commit leader adds (one at a time); any
// writer takes from the head, but only batches already applied, so the
// head is published in order whichever writer gets there first. The ring
// and the packed head/tail word follow Pebble's commit queue.
type pendingQueue struct {
	_ cacheLinePad
	// headTail packs the index where the next batch goes (high 32 bits) and
	// the index of the oldest batch (low 32 bits), both counting up.
	headTail atomic.Uint64
	_        cacheLinePad
	slots    [pendingCap]atomic.Pointer[writer]
}

// cacheLinePad keeps the fields around it on different cache lines (128
// bytes: two lines, as adjacent-line prefetching pairs them).
type cacheLinePad [128]byte

func unpackPending(ht uint64) (head, tail uint32) { return uint32(ht >> 32), uint32(ht) }

// enqueue adds a logged writer at the head. Called by the commit leader
// without d.mu; when the ring is full it waits for the writers of earlier
// groups to publish (they need nothing from the leader, and the leader's own
// group takes at most a quarter of the ring).
func (q *pendingQueue) enqueue(w *writer) {
	for {
		head, tail := unpackPending(q.headTail.Load())
		if head-tail < pendingCap {
			slot := &q.slots[head%pendingCap]
			// The writer that took the slot's last batch clears it just
			// after advancing the tail: wait for that.
			for slot.Load() != nil {
				runtime.Gosched()
			}
			slot.Store(w)
			q.headTail.Add(1 << 32)
			return
		}
		runtime.Gosched()
	}
}

// dequeueApplied removes and returns the oldest batch if it has been
// applied; otherwise (or when the queue is empty) nil.
func (q *pendingQueue) dequeueApplied() *writer {
	for {
		ht := q.headTail.Load()
		head, tail := unpackPending(ht)
		if head == tail {
			return nil
		}
		slot := &q.slots[tail%pendingCap]
		w := slot.Load()
		if w == nil || !w.applied.Load() {
			return nil
		}
		if q.headTail.CompareAndSwap(ht, uint64(head)<<32|uint64(tail+1)) {
			slot.Store(nil) // the slot is ours: release it to enqueue
			return w
		}
	}
}
