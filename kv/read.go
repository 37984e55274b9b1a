package kv

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/internal/memtable"
	"github.com/warpkit/warpkit/kv/internal/rangedel"
	"github.com/warpkit/warpkit/kv/manifest"
)

// readState is what a read needs: the memtables and the version, pinned
// together. Readers take a reference; the version is released with the last.
type readState struct {
	refs    atomic.Int32
	mem     *memtable.MemTable
	imm     []*memtable.MemTable // oldest first
	version *manifest.Version

	tombOnce sync.Once
	tombs    *rangedel.Set // every table's range tombstones, fragmented
	tombErr  error
}

func (rs *readState) unref() {
	if rs == nil {
		return
	}
	if rs.refs.Add(-1) == 0 {
		rs.version.Unref()
	}
}

// loadReadState returns the current read state with a reference, or nil
// once the DB is closed.
func (d *DB) loadReadState() *readState {
	d.rsMu.Lock()
	rs := d.rs
	if rs != nil {
		rs.refs.Add(1)
	}
	d.rsMu.Unlock()
	return rs
}

// updateReadStateLocked publishes the current memtables and version. Caller
// holds d.mu.
func (d *DB) updateReadStateLocked() {
	rs := &readState{mem: d.mu.mem, imm: append([]*memtable.MemTable(nil), d.mu.imm...), version: d.vs.Current()}
	rs.refs.Store(1)
	d.rsMu.Lock()
	old := d.rs
	d.rs = rs
	d.rsMu.Unlock()
	old.unref()
}

// tableTombstones returns the range tombstones of every table in the read
// state's version, gathered once per version. Each table's tombstones are
// read from the table once per Open (tableRangeDels), so the first iterator
// after Open reads every table that has any, whatever its bounds, and later
// versions read only new tables.
func (d *DB) tableTombstones(rs *readState) (*rangedel.Set, error) {
	rs.tombOnce.Do(func() {
		var ts []rangedel.Tombstone
		for _, files := range rs.version.Levels {
			for _, f := range files {
				if !f.HasRangeDels {
					continue
				}
				set, err := d.tableRangeDels(f)
				if err != nil {
					rs.tombErr = err
					return
				}
				ts = append(ts, rangedel.Tombstones(set.Spans())...)
			}
		}
		rs.tombs = rangedel.NewSet(ts)
	})
	return rs.tombs, rs.tombErr
}

// tableRangeDels returns a table's range tombstones, read from the table
// the first time (they are immutable, and outlive the reader).
func (d *DB) tableRangeDels(f *manifest.FileMetadata) (*rangedel.Set, error) {
	d.tableTombsMu.Lock()
	set, ok := d.tableTombs[f.FileNum]
	d.tableTombsMu.Unlock()
	if ok {
		return set, nil
	}
	r, release, err := d.tables.get(f)
	if err != nil {
		return nil, err
	}
	set = r.RangeDels()
	release()
	d.tableTombsMu.Lock()
	d.tableTombs[f.FileNum] = set
	d.tableTombsMu.Unlock()
	return set, nil
}

// Get returns a copy of the value of key, or ErrNotFound.
func (d *DB) Get(key []byte) ([]byte, error) {
	return d.get(key, nil)
}

// beginRead pins the current read state and returns it with the sequence
// number to read at: the snapshot's, or (s nil) the newest visible one. The
// order matters (it is Pebble's): the read state is pinned first and the
// sequence number loaded after it. Loaded first, the sequence number could
// be older than a compaction installed in between, which may have dropped
// the version of a key visible at it (no snapshot protects it); pinned
// first, every version in the read state was compacted with a view at most
// as new as the sequence number loaded after it, and a write newer than the
// read state's memtables carries a larger sequence number than any entry in
// them, so the read sees a consistent prefix. It returns nil once the DB is
// closed.
func (d *DB) beginRead(s *Snapshot) (*readState, base.SeqNum) {
	rs := d.loadReadState()
	if rs == nil {
		return nil, 0
	}
	if d.readHook != nil {
		d.readHook()
	}
	if s != nil {
		return rs, s.seq
	}
	return rs, base.SeqNum(d.visibleSeq.Load())
}

// get reads key at snapshot s, or at the newest state for s nil.
func (d *DB) get(key []byte, s *Snapshot) ([]byte, error) {
	rs, snap := d.beginRead(s)
	if rs == nil {
		return nil, ErrClosed
	}
	defer rs.unref()
	// Search newest to oldest. A tombstone found in one source deletes
	// every older entry of the key, all of which live in older sources (the
	// store keeps a key's newer entries, tombstones included, in newer
	// memtables and upper levels).
	var maxTomb base.SeqNum
	check := func(v []byte, kind base.Kind, seq base.SeqNum, found bool, tomb base.SeqNum) (done bool, val []byte, err error) {
		maxTomb = max(maxTomb, tomb)
		if found && seq > maxTomb {
			if kind == base.KindDelete {
				return true, nil, ErrNotFound
			}
			return true, append(make([]byte, 0, len(v)), v...), nil
		}
		if maxTomb > 0 {
			return true, nil, ErrNotFound
		}
		return false, nil, nil
	}
	for i := len(rs.imm); i >= 0; i-- {
		m := rs.mem // then the immutable ones, newest first
		if i < len(rs.imm) {
			m = rs.imm[i]
		}
		v, kind, seq, found := m.Get(key, snap)
		var tomb base.SeqNum
		if rd := m.RangeDels(); rd != nil {
			tomb = rd.MaxCovering(key, snap)
		}
		if done, val, err := check(v, kind, seq, found, tomb); done {
			return val, err
		}
	}
	v := rs.version
	var missed int64
	for i := len(v.Levels[0]) - 1; i >= 0; i-- {
		f := v.Levels[0][i]
		if !f.ContainsUserKey(key) {
			continue
		}
		if done, val, err := d.getFromTable(f, key, snap, check); done || err != nil {
			return val, err
		}
		missed++
	}
	if missed > 0 {
		d.l0Missed(missed)
	}
	for level := 1; level < manifest.NumLevels; level++ {
		f := v.FindFile(level, key)
		if f == nil {
			continue
		}
		if done, val, err := d.getFromTable(f, key, snap, check); done || err != nil {
			return val, err
		}
	}
	return nil, ErrNotFound
}

type checkFunc func(v []byte, kind base.Kind, seq base.SeqNum, found bool, tomb base.SeqNum) (bool, []byte, error)

func (d *DB) getFromTable(f *manifest.FileMetadata, key []byte, snap base.SeqNum, check checkFunc) (bool, []byte, error) {
	if f.SmallestSeq > snap {
		return false, nil, nil // every entry is newer than the snapshot
	}
	e, err := d.tables.acquire(f)
	if err != nil {
		return true, nil, err
	}
	defer d.tables.release(e)
	r := e.reader
	var tomb base.SeqNum
	if f.HasRangeDels {
		tomb = r.RangeDels().MaxCovering(key, snap)
	}
	v, kind, seq, found, err := r.Get(key, snap)
	if err != nil {
		return true, nil, err
	}
	return check(v, kind, seq, found, tomb)
}

// Snapshot is a consistent view of the store at one sequence number: reads
// through it see exactly the writes committed before it was taken.
// Compactions keep every entry a live snapshot can see, so close snapshots
// when done. Safe for concurrent use.
type Snapshot struct {
	db         *DB
	seq        base.SeqNum
	prev, next *Snapshot
	closed     atomic.Bool
}

type snapshotList struct {
	root Snapshot
	n    int
}

func (l *snapshotList) init()      { l.root.next, l.root.prev = &l.root, &l.root }
func (l *snapshotList) count() int { return l.n }

func (l *snapshotList) push(s *Snapshot) {
	s.prev, s.next = l.root.prev, &l.root
	l.root.prev.next = s
	l.root.prev = s
	l.n++
}

func (l *snapshotList) remove(s *Snapshot) {
	s.prev.next = s.next
	s.next.prev = s.prev
	l.n--
}

func (l *snapshotList) seqs() []base.SeqNum {
	out := make([]base.SeqNum, 0, l.n)
	for s := l.root.next; s != &l.root; s = s.next {
		out = append(out, s.seq)
	}
	return out
}

// NewSnapshot returns a snapshot of the current state.
func (d *DB) NewSnapshot() (*Snapshot, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.closed {
		return nil, ErrClosed
	}
	s := &Snapshot{db: d, seq: base.SeqNum(d.visibleSeq.Load())}
	d.mu.snapshots.push(s)
	return s, nil
}

// Seq returns the snapshot's sequence number.
func (s *Snapshot) Seq() uint64 { return uint64(s.seq) }

// Get returns a copy of key's value as of the snapshot, or ErrNotFound.
func (s *Snapshot) Get(key []byte) ([]byte, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	return s.db.get(key, s)
}

// NewIter returns an iterator over the snapshot.
func (s *Snapshot) NewIter(opts *IterOptions) (*Iterator, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	return s.db.newIter(opts, s)
}

// Close releases the snapshot. Closing twice returns ErrClosed.
func (s *Snapshot) Close() error {
	if s.closed.Swap(true) {
		return ErrClosed
	}
	d := s.db
	d.mu.Lock()
	d.mu.snapshots.remove(s)
	d.mu.Unlock()
	return nil
}

// boundsOrdered checks iterator bounds.
func boundsOrdered(lower, upper []byte) error {
	if lower != nil && upper != nil && bytes.Compare(lower, upper) > 0 {
		return fmt.Errorf("%w: iterator lower bound %q above upper bound %q", ErrInvalidArgument, lower, upper)
	}
	return nil
}
