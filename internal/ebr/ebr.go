// Package ebr is epoch-based reclamation at the granularity of kernel
// launches, for GPU structures whose writers unlink memory that concurrent
// kernels may still be reading (mvbtree's spliced node versions; slabhash's
// and graph's freed slabs can use it too).
//
// A launch that may reach shared memory registers with Begin before it is
// enqueued and ends with End once the host has seen it finish (its stream
// synchronized), handing over what it unlinked. An item unlinked by launch L
// can be reached only by launches that ran beside L: a launch that starts
// after L has ended sees L's unlinks complete (kernel completion orders
// them), so it never finds the item. So the item is reclaimable once every
// launch that started before L ended has ended too. Epochs counts Begins and
// Ends in one sequence and keeps each retired item with the sequence number
// of its launch's End; Reclaim returns the items older than every launch
// still running.
//
// This is the host half of the reclamation the spec (mvbtree.md §4, design
// decision 7) asks for, which mvbtree's write batches use. The device half,
// block-level DEBRA inside persistent kernels that retire and reuse memory
// without ending, is internal/devcode/ebr.cuh with its state laid out by
// DeviceState (device.go); what its blocks still hold when they end goes to
// a log that the host frees through Epochs. Its test is a churn of
// publish-and-retire with readers beside it (ebr.cu); no structure runs a
// persistent kernel yet (mvbtree's persistent Apply is the next issue's).
package ebr

import (
	"sync"
)

// Token is a registered launch.
type Token struct{ start uint64 }

type retired[T any] struct {
	end  uint64
	item T
}

// Epochs tracks the launches in flight and the items they retired. The zero
// value is ready to use; it is safe for concurrent use.
type Epochs[T any] struct {
	mu      sync.Mutex
	seq     uint64
	active  map[uint64]int // start sequence -> launches that began there
	pending []retired[T]   // in End order
}

// Begin registers a launch about to be enqueued.
func (e *Epochs[T]) Begin() Token {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.active == nil {
		e.active = map[uint64]int{}
	}
	e.seq++
	e.active[e.seq]++
	return Token{start: e.seq}
}

// End marks the launch of t finished and retires items: they wait until
// every launch that began before this End has ended.
func (e *Epochs[T]) End(t Token, items ...T) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.active[t.start]--; e.active[t.start] <= 0 {
		delete(e.active, t.start)
	}
	e.seq++
	for _, it := range items {
		e.pending = append(e.pending, retired[T]{end: e.seq, item: it})
	}
}

// Reclaim removes and returns the items that no launch can reach any more.
func (e *Epochs[T]) Reclaim() []T {
	e.mu.Lock()
	defer e.mu.Unlock()
	oldest := e.seq + 1 // the start of the oldest launch in flight
	for s := range e.active {
		oldest = min(oldest, s)
	}
	n := 0
	for n < len(e.pending) && e.pending[n].end < oldest {
		n++
	}
	if n == 0 {
		return nil
	}
	out := make([]T, n)
	for i := range out {
		out[i] = e.pending[i].item
	}
	e.pending = append(e.pending[:0], e.pending[n:]...)
	return out
}

// Pending returns how many retired items wait for their grace period.
func (e *Epochs[T]) Pending() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.pending)
}

// Active returns how many launches are registered and not ended.
func (e *Epochs[T]) Active() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, c := range e.active {
		n += c
	}
	return n
}

// Drain removes and returns every retired item, reachable or not: for a
// caller that knows no launch runs (one holding its structure exclusively).
func (e *Epochs[T]) Drain() []T {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]T, len(e.pending))
	for i, p := range e.pending {
		out[i] = p.item
	}
	e.pending = nil
	return out
}
