package kvbench

import (
	"bytes"
	"sync"

	"github.com/tidwall/btree"
)

// MemStore is the baseline warp kv bench measures the store against in the
// same run: an in-memory B-tree (tidwall/btree) under a mutex, with no log,
// no files and no durability. The ratio store/MemStore is the price of
// persistence and of the LSM structure on this machine.
type MemStore struct {
	mu sync.RWMutex
	t  *btree.BTreeG[memItem]
}

type memItem struct{ k, v []byte }

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore {
	return &MemStore{t: btree.NewBTreeGOptions(func(a, b memItem) bool { return bytes.Compare(a.k, b.k) < 0 }, btree.Options{NoLocks: true})}
}

// Name implements Store.
func (m *MemStore) Name() string { return "in-memory B-tree" }

// Set implements Store (copying, as a store must).
func (m *MemStore) Set(k, v []byte) error {
	it := memItem{append([]byte(nil), k...), append([]byte(nil), v...)}
	m.mu.Lock()
	m.t.Set(it)
	m.mu.Unlock()
	return nil
}

// Get implements Store.
func (m *MemStore) Get(k []byte) (int, bool, error) {
	m.mu.RLock()
	it, ok := m.t.Get(memItem{k: k})
	m.mu.RUnlock()
	return len(it.v), ok, nil
}

// Delete implements Store.
func (m *MemStore) Delete(k []byte) error {
	m.mu.Lock()
	m.t.Delete(memItem{k: k})
	m.mu.Unlock()
	return nil
}

// Scan implements Store.
func (m *MemStore) Scan(start []byte, n int) (int, int64, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	c := 0
	var b int64
	m.t.Ascend(memItem{k: start}, func(it memItem) bool {
		if n >= 0 && c >= n {
			return false
		}
		c++
		b += int64(len(it.k) + len(it.v))
		return true
	})
	return c, b, nil
}

// Settle implements Store.
func (m *MemStore) Settle() error { return nil }

// Stats implements Store.
func (m *MemStore) Stats() StoreStats { return StoreStats{} }

// Close implements Store.
func (m *MemStore) Close() error { return nil }
