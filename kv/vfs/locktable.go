package vfs

import "sync"

// lockTable models file locks held within this process: for each key, either
// one exclusive holder or a count of shared holders. The !unix osFS uses it
// in place of flock (so its locks exclude only other opens in this process);
// it has no build constraint so that its logic is tested on every platform.
type lockTable struct {
	mu sync.Mutex
	m  map[string]int // > 0: shared holders; lockExclusive: exclusive holder
}

const lockExclusive = -1

// acquire takes a shared or an exclusive hold on key, or reports false if a
// conflicting hold exists.
func (t *lockTable) acquire(key string, shared bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.m[key]
	switch {
	case n == lockExclusive, n > 0 && !shared:
		return false
	case t.m == nil:
		t.m = map[string]int{}
	}
	if shared {
		t.m[key] = n + 1
	} else {
		t.m[key] = lockExclusive
	}
	return true
}

// release drops one hold taken by acquire; each hold must be released once.
func (t *lockTable) release(key string, shared bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch n := t.m[key]; {
	case shared && n > 1:
		t.m[key] = n - 1
	case shared && n == 1, !shared && n == lockExclusive:
		delete(t.m, key)
	}
}
