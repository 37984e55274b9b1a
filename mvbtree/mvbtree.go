package mvbtree

import (
	"context"
	"fmt"
	"iter"
	"sync"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/front"
	"github.com/warpkit/warpkit/internal/ordmap"
)

// CopyMode is when a writer copies a node rather than changing it in place
// (the CUDA backend; the CPU backend's copy-on-write map copies a node on
// the first write after a snapshot either way).
type CopyMode int

const (
	// CopyWhenPinned copies a node only when an open snapshot can see its
	// current version, and otherwise updates it in place (the default;
	// fewer copies than the thesis's ViB-Tree).
	CopyWhenPinned CopyMode = iota
	// CopyAlways copies on every write (the thesis's VoB-Tree).
	CopyAlways
	// CopyIfStale is the thesis's ViB rule: in place only when no snapshot
	// can be taken meanwhile and the node's stamp is current.
	CopyIfStale
)

func (m CopyMode) String() string {
	switch m {
	case CopyWhenPinned:
		return "copy-when-pinned"
	case CopyAlways:
		return "copy-always"
	case CopyIfStale:
		return "copy-if-stale"
	}
	return fmt.Sprintf("CopyMode(%d)", int(m))
}

// Options configure a Tree.
type Options struct {
	// Backend: CPU, or Auto (the CPU backend until the CUDA one is built;
	// CUDA fails with an error wrapping ErrInvalidArgument).
	Backend warpkit.Backend
	// Device is the CUDA backend's device (nil: device 0).
	Device *cuda.Device
	// Copy is the copy rule of the CUDA backend's writers.
	Copy CopyMode
	// MaxPoolBytes caps the CUDA backend's node pool (0: no cap but the
	// device's memory); exhaustion fails the batch with ErrPoolExhausted
	// and leaves the tree unchanged for the operations that failed.
	MaxPoolBytes int64
}

// Stats describe a tree's size and its versions.
type Stats struct {
	Backend warpkit.Backend
	// Keys are the pairs of the latest version.
	Keys int
	// Height is the levels of the latest version (0 for an empty tree on
	// the CPU backend).
	Height int
	// Timestamp is the number of snapshots taken so far: the next
	// snapshot's Version.
	Timestamp uint64
	// OpenSnapshots are the snapshots not yet closed.
	OpenSnapshots int
	// Nodes, Versions (node versions an open snapshot can still reach,
	// heads included), PinnedVersions (older versions pinned by an open
	// snapshot), RetiredPending (versions retired, waiting for their grace
	// period), Epoch, Restamps, PoolBytes and ReclaimLeaked (retires that
	// could not be recorded: leaked, never reused unsafely) describe the
	// CUDA backend's node versions and reclamation; 0 on the CPU backend,
	// whose copy-on-write map leaves old versions to Go's garbage collector.
	Nodes, Versions, PinnedVersions, RetiredPending int
	Epoch, Restamps                                 uint64
	PoolBytes                                       int64
	ReclaimLeaked                                   uint64
}

// backend is what the CPU (and, to come, CUDA) implementations provide;
// the front has checked the closed state, the context at entry and the
// lengths.
type backend[K, V warpkit.Word] interface {
	build(ctx context.Context, keys []K, vals []V) error
	insert(ctx context.Context, keys []K, vals []V) error
	delete(ctx context.Context, keys []K) error
	// read runs a query on the latest version, atomically with respect to
	// updates.
	read(f func(v ordmap.View[K, V]) error) error
	// snapshot freezes the latest version.
	snapshot() ordmap.View[K, V]
	stats(ctx context.Context) (Stats, error)
	compact(ctx context.Context) error
	check(ctx context.Context) error
	close() error
}

// Tree is an ordered map from K to V with snapshots: readers may hold a
// Snapshot — the tree as it was when it was taken — for as long as they
// like, beside the writers. See the package documentation.
type Tree[K, V warpkit.Word] struct {
	f    *front.Front
	impl backend[K, V]

	// mu guards the snapshot registry.
	mu      sync.Mutex
	stamp   uint64 // the next snapshot's version
	open    map[*Snapshot[K, V]]struct{}
	restamp uint64
}

// New returns an empty tree.
func New[K, V warpkit.Word](opts Options) (*Tree[K, V], error) {
	f := front.New("mvbtree", warpkit.CPU)
	switch opts.Backend {
	case warpkit.Auto, warpkit.CPU:
	case warpkit.CUDA:
		return nil, f.Errorf("new", "the CUDA backend is not built yet (issue 18); use Backend CPU or Auto")
	default:
		return nil, f.Errorf("new", "unknown Backend %d", int(opts.Backend))
	}
	if opts.Copy < CopyWhenPinned || opts.Copy > CopyIfStale {
		return nil, f.Errorf("new", "unknown Copy mode %d", int(opts.Copy))
	}
	if opts.MaxPoolBytes < 0 {
		return nil, f.Errorf("new", "MaxPoolBytes %d is negative", opts.MaxPoolBytes)
	}
	return &Tree[K, V]{f: f, impl: newCPU[K, V](), open: map[*Snapshot[K, V]]struct{}{}}, nil
}

// Backend returns the tree's backend; it works after Close.
func (t *Tree[K, V]) Backend() warpkit.Backend { return t.f.Backend() }

// Close closes every open snapshot and frees the tree; every later call of
// the tree or of its snapshots returns ErrClosed.
func (t *Tree[K, V]) Close() error {
	return t.f.Close(func() error {
		t.mu.Lock()
		snaps := make([]*Snapshot[K, V], 0, len(t.open))
		for s := range t.open {
			snaps = append(snaps, s)
		}
		t.mu.Unlock()
		for _, s := range snaps {
			s.Close()
		}
		return t.impl.close()
	})
}

// Build replaces the tree's contents with the pairs (a repeated key keeps
// its last value). Open snapshots keep what they saw.
func (t *Tree[K, V]) Build(ctx context.Context, keys []K, vals []V) error {
	if err := t.f.Lens("build", len(keys), len(vals)); err != nil {
		return err
	}
	return t.f.Do(ctx, "build", front.Exclusive, func() error { return t.impl.build(ctx, keys, vals) })
}

// Insert inserts each pair, replacing the value of a key already present
// (within a batch, the last).
func (t *Tree[K, V]) Insert(ctx context.Context, keys []K, vals []V) error {
	if err := t.f.Lens("insert", len(keys), len(vals)); err != nil {
		return err
	}
	return t.f.Do(ctx, "insert", front.Shared, func() error { return t.impl.insert(ctx, keys, vals) })
}

// Delete removes each key that is present; absent keys are ignored.
func (t *Tree[K, V]) Delete(ctx context.Context, keys []K) error {
	return t.f.Do(ctx, "delete", front.Shared, func() error { return t.impl.delete(ctx, keys) })
}

// query runs a read of the latest version under the front.
func (t *Tree[K, V]) query(ctx context.Context, op string, f func(v ordmap.View[K, V]) error) error {
	return t.f.Do(ctx, op, front.Shared, func() error { return t.impl.read(f) })
}

// Lookup sets vals[i] and found[i] for keys[i] (vals[i] = 0 when not found).
func (t *Tree[K, V]) Lookup(ctx context.Context, keys []K, vals []V, found []bool) error {
	if err := t.f.Lens("lookup", len(keys), len(vals), len(found)); err != nil {
		return err
	}
	return t.query(ctx, "lookup", func(v ordmap.View[K, V]) error { return v.Lookup(ctx, keys, vals, found) })
}

// Successor finds, for each keys[i], the smallest stored key greater than it.
func (t *Tree[K, V]) Successor(ctx context.Context, keys, outKeys []K, outVals []V, found []bool) error {
	return t.neighbor(ctx, "successor", false, keys, outKeys, outVals, found)
}

// Predecessor finds, for each keys[i], the largest stored key smaller than it.
func (t *Tree[K, V]) Predecessor(ctx context.Context, keys, outKeys []K, outVals []V, found []bool) error {
	return t.neighbor(ctx, "predecessor", true, keys, outKeys, outVals, found)
}

func (t *Tree[K, V]) neighbor(ctx context.Context, op string, pred bool, keys, outKeys []K, outVals []V, found []bool) error {
	if err := t.f.Lens(op, len(keys), len(outKeys), len(outVals), len(found)); err != nil {
		return err
	}
	return t.query(ctx, op, func(v ordmap.View[K, V]) error { return v.Neighbor(ctx, pred, keys, outKeys, outVals, found) })
}

// Count sets counts[i] to the number of keys in [lo[i], hi[i]) (0 when
// lo[i] >= hi[i]).
func (t *Tree[K, V]) Count(ctx context.Context, lo, hi []K, counts []uint32) error {
	if err := t.f.Lens("count", len(lo), len(hi), len(counts)); err != nil {
		return err
	}
	return t.query(ctx, "count", func(v ordmap.View[K, V]) error { return v.Count(ctx, lo, hi, counts) })
}

// Range returns, for every query i, the pairs in [lo[i], hi[i]) in key
// order. Every query of the call sees one version of the tree (Range is
// linearizable), which btree's Range does not promise beside writers.
func (t *Tree[K, V]) Range(ctx context.Context, lo, hi []K) (*warpkit.Ranges[K, V], error) {
	if err := t.f.Lens("range", len(lo), len(hi)); err != nil {
		return nil, err
	}
	var r *warpkit.Ranges[K, V]
	err := t.query(ctx, "range", func(v ordmap.View[K, V]) (err error) {
		r, err = v.Range(ctx, lo, hi)
		return err
	})
	return r, err
}

// AscendRange returns the pairs in [lo, hi) in key order, of the tree as it
// was when it was called: the iterator walks a transient snapshot, so it
// neither copies the pairs nor holds writers back.
func (t *Tree[K, V]) AscendRange(ctx context.Context, lo, hi K) (iter.Seq2[K, V], error) {
	return t.ascend(ctx, lo, hi, false)
}

// AscendGreaterOrEqual returns every pair whose key is >= lo in key order
// (the largest key of K included), as AscendRange does.
func (t *Tree[K, V]) AscendGreaterOrEqual(ctx context.Context, lo K) (iter.Seq2[K, V], error) {
	return t.ascend(ctx, lo, 0, true)
}

// All returns every pair in key order: AscendGreaterOrEqual(ctx, 0).
func (t *Tree[K, V]) All(ctx context.Context) (iter.Seq2[K, V], error) {
	return t.ascend(ctx, 0, 0, true)
}

func (t *Tree[K, V]) ascend(ctx context.Context, lo, hi K, all bool) (iter.Seq2[K, V], error) {
	return front.Value(t.f, ctx, "ascend", front.Shared, func() (iter.Seq2[K, V], error) {
		return t.impl.snapshot().Ascend(lo, hi, all), nil
	})
}

// Len returns the pairs of the latest version.
func (t *Tree[K, V]) Len(ctx context.Context) (int, error) {
	var n int
	err := t.query(ctx, "len", func(v ordmap.View[K, V]) error { n = v.Len(); return nil })
	return n, err
}

// Stats returns the tree's size and its versions.
func (t *Tree[K, V]) Stats(ctx context.Context) (Stats, error) {
	return front.Value(t.f, ctx, "stats", front.Shared, func() (Stats, error) {
		st, err := t.impl.stats(ctx)
		t.mu.Lock()
		st.Timestamp, st.OpenSnapshots, st.Restamps = t.stamp, len(t.open), t.restamp
		t.mu.Unlock()
		return st, err
	})
}

// Compact rebuilds the latest version from its pairs, packing them into
// fewer nodes; open snapshots keep theirs.
func (t *Tree[K, V]) Compact(ctx context.Context) error {
	return t.f.Do(ctx, "compact", front.Exclusive, func() error { return t.impl.compact(ctx) })
}

// Vacuum reclaims the versions that only closed snapshots could see (the
// CUDA backend's writers reclaim the versions of the nodes they change;
// Vacuum reaches the rest). The CPU backend has nothing to do: Go's garbage
// collector frees a closed snapshot's versions.
func (t *Tree[K, V]) Vacuum(ctx context.Context) error {
	return t.f.Do(ctx, "vacuum", front.Exclusive, func() error { return nil })
}

// Restamp renumbers the CUDA backend's 32-bit node timestamps before they
// can wrap, preserving every open snapshot's view (writers call it when
// needed; it is exported for tests and tools). The CPU backend has no
// timestamps to renumber.
func (t *Tree[K, V]) Restamp(ctx context.Context) error {
	return t.f.Do(ctx, "restamp", front.Exclusive, func() error { return nil })
}

// Check verifies the tree's invariants: the latest version's order and,
// for every open snapshot, the order of its version and the registry's
// accounting (versions below the timestamp, each open snapshot listed once).
func (t *Tree[K, V]) Check(ctx context.Context) error {
	return t.f.Do(ctx, "check", front.Exclusive, func() error {
		if err := t.impl.check(ctx); err != nil {
			return err
		}
		t.mu.Lock()
		snaps := make([]*Snapshot[K, V], 0, len(t.open))
		for s := range t.open {
			snaps = append(snaps, s)
		}
		stamp := t.stamp
		t.mu.Unlock()
		seen := map[uint64]bool{}
		for _, s := range snaps {
			if s.version >= stamp {
				return fmt.Errorf("open snapshot %d at or past the timestamp %d", s.version, stamp)
			}
			if seen[s.version] {
				return fmt.Errorf("snapshot version %d handed out twice", s.version)
			}
			seen[s.version] = true
			if err := s.view.Check(ctx); err != nil {
				return fmt.Errorf("snapshot %d: %w", s.version, err)
			}
		}
		return nil
	})
}

// Snapshot returns the tree as it is now, as a handle that later updates
// do not change, until Close. It linearizes after every update that
// returned before it was called and before every update that starts after
// it returned.
func (t *Tree[K, V]) Snapshot(ctx context.Context) (*Snapshot[K, V], error) {
	return front.Value(t.f, ctx, "snapshot", front.Shared, func() (*Snapshot[K, V], error) {
		view := t.impl.snapshot()
		t.mu.Lock()
		defer t.mu.Unlock()
		s := &Snapshot[K, V]{f: front.New("mvbtree: snapshot", t.f.Backend()), t: t, view: view, version: t.stamp}
		t.stamp++
		t.open[s] = struct{}{}
		return s, nil
	})
}

// Snapshot is the tree as it was when Tree.Snapshot returned it. Its
// queries run beside the tree's writers and each other; Close unpins it.
type Snapshot[K, V warpkit.Word] struct {
	f       *front.Front
	t       *Tree[K, V]
	view    ordmap.View[K, V]
	version uint64
}

// Backend returns the snapshot's backend (the tree's); it works after
// Close.
func (s *Snapshot[K, V]) Backend() warpkit.Backend { return s.f.Backend() }

// Version is the snapshot's number: the tree's snapshots are numbered in
// the order they were taken, from 0.
func (s *Snapshot[K, V]) Version() uint64 { return s.version }

// Close unpins the snapshot: the versions only it could see may be
// reclaimed. Every later call of the snapshot, a second Close included,
// returns ErrClosed.
func (s *Snapshot[K, V]) Close() error {
	return s.f.Close(func() error {
		s.t.mu.Lock()
		delete(s.t.open, s)
		s.t.mu.Unlock()
		s.view = ordmap.View[K, V]{}
		return nil
	})
}

func (s *Snapshot[K, V]) query(ctx context.Context, op string, f func(v ordmap.View[K, V]) error) error {
	return s.f.Do(ctx, op, front.Shared, func() error { return f(s.view) })
}

// Lookup is Tree.Lookup on the snapshot.
func (s *Snapshot[K, V]) Lookup(ctx context.Context, keys []K, vals []V, found []bool) error {
	if err := s.f.Lens("lookup", len(keys), len(vals), len(found)); err != nil {
		return err
	}
	return s.query(ctx, "lookup", func(v ordmap.View[K, V]) error { return v.Lookup(ctx, keys, vals, found) })
}

// Successor is Tree.Successor on the snapshot.
func (s *Snapshot[K, V]) Successor(ctx context.Context, keys, outKeys []K, outVals []V, found []bool) error {
	return s.neighbor(ctx, "successor", false, keys, outKeys, outVals, found)
}

// Predecessor is Tree.Predecessor on the snapshot.
func (s *Snapshot[K, V]) Predecessor(ctx context.Context, keys, outKeys []K, outVals []V, found []bool) error {
	return s.neighbor(ctx, "predecessor", true, keys, outKeys, outVals, found)
}

func (s *Snapshot[K, V]) neighbor(ctx context.Context, op string, pred bool, keys, outKeys []K, outVals []V, found []bool) error {
	if err := s.f.Lens(op, len(keys), len(outKeys), len(outVals), len(found)); err != nil {
		return err
	}
	return s.query(ctx, op, func(v ordmap.View[K, V]) error { return v.Neighbor(ctx, pred, keys, outKeys, outVals, found) })
}

// Count is Tree.Count on the snapshot.
func (s *Snapshot[K, V]) Count(ctx context.Context, lo, hi []K, counts []uint32) error {
	if err := s.f.Lens("count", len(lo), len(hi), len(counts)); err != nil {
		return err
	}
	return s.query(ctx, "count", func(v ordmap.View[K, V]) error { return v.Count(ctx, lo, hi, counts) })
}

// Range is Tree.Range on the snapshot.
func (s *Snapshot[K, V]) Range(ctx context.Context, lo, hi []K) (*warpkit.Ranges[K, V], error) {
	if err := s.f.Lens("range", len(lo), len(hi)); err != nil {
		return nil, err
	}
	var r *warpkit.Ranges[K, V]
	err := s.query(ctx, "range", func(v ordmap.View[K, V]) (err error) {
		r, err = v.Range(ctx, lo, hi)
		return err
	})
	return r, err
}

// AscendRange returns the snapshot's pairs in [lo, hi) in key order. The
// iterator reads the snapshot as it goes: it yields nothing more once the
// snapshot is closed.
func (s *Snapshot[K, V]) AscendRange(ctx context.Context, lo, hi K) (iter.Seq2[K, V], error) {
	return s.ascend(ctx, lo, hi, false)
}

// AscendGreaterOrEqual returns the snapshot's pairs with keys >= lo.
func (s *Snapshot[K, V]) AscendGreaterOrEqual(ctx context.Context, lo K) (iter.Seq2[K, V], error) {
	return s.ascend(ctx, lo, 0, true)
}

// All returns every pair of the snapshot in key order.
func (s *Snapshot[K, V]) All(ctx context.Context) (iter.Seq2[K, V], error) {
	return s.ascend(ctx, 0, 0, true)
}

func (s *Snapshot[K, V]) ascend(ctx context.Context, lo, hi K, all bool) (iter.Seq2[K, V], error) {
	return front.Value(s.f, ctx, "ascend", front.Shared, func() (iter.Seq2[K, V], error) {
		seq := s.view.Ascend(lo, hi, all)
		return func(yield func(K, V) bool) {
			seq(func(k K, v V) bool { return !s.f.Closed() && yield(k, v) })
		}, nil
	})
}

// Len returns the snapshot's pairs.
func (s *Snapshot[K, V]) Len(ctx context.Context) (int, error) {
	var n int
	err := s.query(ctx, "len", func(v ordmap.View[K, V]) error { n = v.Len(); return nil })
	return n, err
}
