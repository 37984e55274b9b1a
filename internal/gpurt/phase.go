package gpurt

import "sync"

// Phase lets query batches skip validation when no writing batch can run
// beside them (btree's and mvbtree's phased queries). A query joins as a fast
// reader when no writer runs or waits; otherwise it runs in validated mode
// beside the writers. A writer waits for fast readers to drain (and keeps new
// ones out meanwhile). The zero value is ready to use.
type Phase struct {
	mu                       sync.Mutex
	cond                     *sync.Cond
	readers, writers, queued int
}

func (p *Phase) condLocked() *sync.Cond {
	if p.cond == nil {
		p.cond = sync.NewCond(&p.mu)
	}
	return p.cond
}

// BeginQuery starts a query batch and says whether it is fast (no writer
// can run until EndQuery).
func (p *Phase) BeginQuery() (fast bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.writers == 0 && p.queued == 0 {
		p.readers++
		return true
	}
	return false
}

// EndQuery ends a query batch begun with BeginQuery.
func (p *Phase) EndQuery(fast bool) {
	if !fast {
		return
	}
	p.mu.Lock()
	p.readers--
	if p.readers == 0 {
		p.condLocked().Broadcast()
	}
	p.mu.Unlock()
}

// BeginWrite starts a writing batch once the fast readers have drained.
func (p *Phase) BeginWrite() {
	p.mu.Lock()
	p.queued++
	for p.readers > 0 {
		p.condLocked().Wait()
	}
	p.queued--
	p.writers++
	p.mu.Unlock()
}

// EndWrite ends a writing batch.
func (p *Phase) EndWrite() {
	p.mu.Lock()
	p.writers--
	p.mu.Unlock()
}
