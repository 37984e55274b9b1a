// Package memtable is the kv store's in-memory write buffer: two lock-free
// arena skiplists (point entries and range tombstones) sharing one arena of
// fixed capacity. A memtable fills, becomes immutable, and is flushed to an
// L0 table; until then the write-ahead log whose number it carries must be
// kept.
//
// Concurrency: Apply may run concurrently with readers and with other
// Apply calls, each on its own reservation; readers filter entries by
// sequence number, so entries of a batch that is being applied stay
// invisible until the store publishes the batch's sequence numbers. The
// store counts the writers a memtable has been given (BeginWrites,
// EndWrite) so that it is flushed only after the last one has finished.
package memtable

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/warpkit/warpkit/kv/internal/arenaskl"
	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/internal/batchrepr"
	"github.com/warpkit/warpkit/kv/internal/rangedel"
)

// MemTable is a write buffer.
type MemTable struct {
	arena    *arenaskl.Arena
	points   *arenaskl.Skiplist
	rdels    *arenaskl.Skiplist
	logNum   base.FileNum
	reserved atomic.Int64 // bytes promised to writers (upper bound of arena use)
	writers  atomic.Int64 // writers given this memtable that have not finished
	sealed   atomic.Bool  // no more writers will be given it

	rdelMu    sync.Mutex
	rdelCache atomic.Pointer[rdelSnapshot]
}

type rdelSnapshot struct {
	count int
	set   *rangedel.Set
}

// New returns a memtable of the given arena capacity whose entries are logged
// in write-ahead log logNum.
func New(capacity int, logNum base.FileNum) *MemTable {
	a := arenaskl.NewArena(capacity)
	points, err := arenaskl.New(a)
	if err != nil {
		panic(fmt.Sprintf("memtable: arena of %d bytes cannot hold a skiplist head", capacity))
	}
	rdels, err := arenaskl.New(a)
	if err != nil {
		panic(fmt.Sprintf("memtable: arena of %d bytes cannot hold a skiplist head", capacity))
	}
	m := &MemTable{arena: a, points: points, rdels: rdels, logNum: logNum}
	m.reserved.Store(int64(a.Size()))
	return m
}

// MinCapacity is the smallest capacity New accepts.
const MinCapacity = 4 * arenaskl.NodeOverhead

// MaxCapacity is the largest capacity a memtable has (New reduces a larger
// one to it): about 4 GiB.
const MaxCapacity = arenaskl.MaxCapacity

// LogNum returns the number of the write-ahead log holding this memtable's
// entries.
func (m *MemTable) LogNum() base.FileNum { return m.logNum }

// NeededBytes bounds the arena bytes a batch (its encoded length and entry
// count) can take.
func NeededBytes(batchLen int, count uint32) int64 {
	return int64(batchLen) + int64(count)*int64(arenaskl.NodeOverhead)
}

// Reserve promises n bytes of the arena to a writer; it fails when the
// memtable cannot take them. A memtable that has never had a reservation
// accepts one of any size only if it fits its capacity.
func (m *MemTable) Reserve(n int64) bool {
	for {
		r := m.reserved.Load()
		if r+n > int64(m.arena.Capacity()) {
			return false
		}
		if m.reserved.CompareAndSwap(r, r+n) {
			return true
		}
	}
}

// BeginWrites records that n writers were given this memtable (each will
// call EndWrite).
func (m *MemTable) BeginWrites(n int) { m.writers.Add(int64(n)) }

// EndWrite records that a writer has finished with the memtable; it reports
// whether it was the last of the writers given it so far.
func (m *MemTable) EndWrite() bool { return m.writers.Add(-1) == 0 }

// Writing reports whether writers given the memtable have not finished.
func (m *MemTable) Writing() bool { return m.writers.Load() != 0 }

// Seal records that no writer will be given the memtable any more (it is
// immutable once Writing reports false).
func (m *MemTable) Seal() { m.sealed.Store(true) }

// Sealed reports whether Seal was called.
func (m *MemTable) Sealed() bool { return m.sealed.Load() }

// Room returns the bytes Reserve can still promise.
func (m *MemTable) Room() int64 { return int64(m.arena.Capacity()) - m.reserved.Load() }

// Apply inserts a batch's entries; the batch's sequence numbers must be
// assigned. Room must have been reserved.
func (m *MemTable) Apply(batch []byte) error {
	_, err := m.apply(batch)
	return err
}

// ApplyReserved is Apply for a batch that reserved exactly reserved bytes
// (NeededBytes of its length and count): once the entries are in, the
// reservation drops to the bytes they took, so that the memtable fills to
// its capacity while batches apply concurrently (Reserve assumes every
// entry gets the tallest tower; most get one or two links).
func (m *MemTable) ApplyReserved(batch []byte, reserved int64) error {
	used, err := m.apply(batch)
	if used < reserved {
		m.reserved.Add(used - reserved)
	}
	return err
}

// apply inserts a batch's entries and returns the arena bytes they took.
func (m *MemTable) apply(batch []byte) (int64, error) {
	r, err := batchrepr.NewReader(batch)
	if err != nil {
		return 0, err
	}
	var used int64
	for {
		kind, key, value, seq, ok, err := r.Next()
		if err != nil {
			return used, err
		}
		if !ok {
			return used, nil
		}
		ik := base.MakeInternalKey(key, seq, kind)
		list := m.points
		if kind == base.KindRangeDelete {
			list = m.rdels
		}
		n, err := list.AddSized(ik, value)
		used += int64(n)
		if err != nil {
			return used, err
		}
	}
}

// Add inserts one entry.
func (m *MemTable) Add(k base.InternalKey, value []byte) error {
	if k.Kind() == base.KindRangeDelete {
		return m.rdels.Add(k, value)
	}
	return m.points.Add(k, value)
}

// Get returns the newest point entry of key with sequence number <= snap.
// The value aliases the arena.
func (m *MemTable) Get(key []byte, snap base.SeqNum) (value []byte, kind base.Kind, seq base.SeqNum, found bool) {
	ik, v, ok := m.points.SeekGE(key, base.MakeTrailer(snap, base.KindMax))
	if !ok || string(ik.UserKey) != string(key) {
		return nil, 0, 0, false
	}
	return v, ik.Kind(), ik.SeqNum(), true
}

// NewIter returns an iterator over the point entries.
func (m *MemTable) NewIter() base.InternalIterator { return m.points.NewIter() }

// InitIter makes it an iterator over the point entries (for pooled
// iterators).
func (m *MemTable) InitIter(it *arenaskl.Iterator) { m.points.InitIter(it) }

// RangeDels returns the memtable's range tombstones, fragmented. The result
// is cached until the next range deletion is added.
func (m *MemTable) RangeDels() *rangedel.Set {
	n := m.rdels.Len()
	if n == 0 {
		return nil
	}
	if c := m.rdelCache.Load(); c != nil && c.count == n {
		return c.set
	}
	m.rdelMu.Lock()
	defer m.rdelMu.Unlock()
	if c := m.rdelCache.Load(); c != nil && c.count == n {
		return c.set
	}
	var ts []rangedel.Tombstone
	it := m.rdels.NewIter()
	seen := 0
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		ts = append(ts, rangedel.Tombstone{Start: k.UserKey, End: it.Value(), Seq: k.SeqNum()})
		seen++
	}
	// Concurrent adds may have landed during the walk; cache what was seen.
	set := rangedel.NewSet(ts)
	m.rdelCache.Store(&rdelSnapshot{count: seen, set: set})
	return set
}

// Size returns the arena bytes in use.
func (m *MemTable) Size() int { return m.arena.Size() }

// Capacity returns the arena capacity.
func (m *MemTable) Capacity() int { return m.arena.Capacity() }

// Empty reports whether the memtable holds no entries.
func (m *MemTable) Empty() bool { return m.points.Len() == 0 && m.rdels.Len() == 0 }

// Count returns the number of entries (points and tombstones).
func (m *MemTable) Count() int { return m.points.Len() + m.rdels.Len() }
