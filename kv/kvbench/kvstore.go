package kvbench

import (
	"context"
	"errors"

	"github.com/warpkit/warpkit/kv"
)

// KVStore adapts a warpkit kv.DB to Store.
type KVStore struct {
	DB    *kv.DB
	Write *kv.WriteOptions
}

// NewKVStore wraps db; sync makes every write durable before it returns.
func NewKVStore(db *kv.DB, sync bool) *KVStore {
	return &KVStore{DB: db, Write: &kv.WriteOptions{Sync: sync}}
}

// Name implements Store.
func (s *KVStore) Name() string { return "warpkit kv" }

// Set implements Store.
func (s *KVStore) Set(k, v []byte) error { return s.DB.Set(k, v, s.Write) }

// Get implements Store.
func (s *KVStore) Get(k []byte) (int, bool, error) {
	v, err := s.DB.Get(k)
	if errors.Is(err, kv.ErrNotFound) {
		return 0, false, nil
	}
	return len(v), err == nil, err
}

// Delete implements Store.
func (s *KVStore) Delete(k []byte) error { return s.DB.Delete(k, s.Write) }

// Scan implements Store.
func (s *KVStore) Scan(start []byte, n int) (int, int64, error) {
	it, err := s.DB.NewIter(nil)
	if err != nil {
		return 0, 0, err
	}
	c := 0
	var b int64
	ok := false
	if start == nil {
		ok = it.First()
	} else {
		ok = it.SeekGE(start)
	}
	for ; ok && (n < 0 || c < n); ok = it.Next() {
		b += int64(len(it.Key()) + len(it.Value()))
		c++
	}
	if err := it.Error(); err != nil {
		it.Close()
		return c, b, err
	}
	return c, b, it.Close()
}

// Settle implements Store: it waits until no compaction is due.
func (s *KVStore) Settle() error { return s.DB.WaitForCompactions(context.Background()) }

// Stats implements Store.
func (s *KVStore) Stats() StoreStats {
	m := s.DB.Metrics()
	return StoreStats{
		WriteAmp:            m.WriteAmp(),
		CompactionBytes:     m.Compaction.BytesRead + m.Compaction.BytesWritten,
		CompactionBandwidth: m.CompactionBandwidth(),
		Stalls:              m.Stalls.Slowdowns + m.Stalls.MemTableStops + m.Stalls.L0Stops,
		StallTime:           m.Stalls.Time,
	}
}

// Report returns the store's own metrics report (kv.Metrics.String): levels,
// compactions, stalls. See Reporter.
func (s *KVStore) Report() string { return s.DB.Metrics().String() }

// Close implements Store.
func (s *KVStore) Close() error { return s.DB.Close() }
