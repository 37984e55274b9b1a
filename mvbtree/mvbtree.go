package mvbtree

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/front"
)

// VersionIndexMin is the length of a version chain at which the CUDA
// backend's writers put an index at its head (unless
// Options.NoVersionIndexes): a chain that long exists only while at least
// VersionIndexMin-1 snapshots are open.
const VersionIndexMin = indexMin

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
	// Backend: CUDA, CPU, or Auto (CUDA when a device is present).
	Backend warpkit.Backend
	// Device is the CUDA backend's device (nil: device 0, opened by New and
	// closed by Close).
	Device *cuda.Device
	// Copy is the copy rule of the CUDA backend's writers.
	Copy CopyMode
	// NoVersionIndexes keeps the CUDA backend's writers from indexing
	// version chains (the package doc's Readers; a chain gets an index once
	// it holds VersionIndexMin versions, so only while VersionIndexMin-1 or
	// more snapshots are open): with 8 or 64 snapshots
	// open, 45M inserts ran 1.4x / 1.26x as fast without them and lookups
	// in the oldest snapshot 1.65x / 3.35x as slow (H200).
	NoVersionIndexes bool
	// MaxPoolBytes caps the CUDA backend's node pool. 0: 16M nodes (64
	// super blocks of 256K nodes: 2 GiB of 128-byte nodes, 4 GiB of
	// 256-byte ones, in super blocks of 32 or 64 MiB); a tree that needs more
	// sets it, up to 2^30 nodes (its super blocks are then a 64th of it).
	// Exhaustion fails the batch with ErrPoolExhausted, and a pool the
	// device's memory cannot grow with ErrOutOfMemory; either way the
	// operations that failed leave the tree unchanged. The cap is per
	// generation: Build and Compact start a new pool, and an older one
	// stays (with its own cap) while snapshots taken before read it.
	MaxPoolBytes int64
	// Streams is how many batches the CUDA backend runs at once (default 4).
	Streams int
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
	// Nodes (heads: the nodes of the latest version), Versions (older
	// versions linked from them), PinnedVersions (those an open snapshot
	// sees), RetiredPending (unlinked versions waiting for the launches that
	// may still read them), Epoch (the stamp writes take now), Restamps,
	// PoolBytes (the node pools of the latest version and of older
	// generations that snapshots still read, with the super blocks made
	// ahead of the next growth) and ReclaimLeaked (retired
	// units that could not be recorded or freed: leaked, never reused
	// unsafely) describe the
	// CUDA backend's node versions and reclamation; 0 on the CPU backend,
	// whose copy-on-write map leaves old versions to Go's garbage collector.
	Nodes, Versions, PinnedVersions, RetiredPending int
	// VersionIndexes are the units that index a head's chain of older
	// versions (built by a writer that leaves a chain of four or more,
	// which takes three or more open snapshots: a snapshot's query then
	// reads the head, the index and its version, however deep the
	// chain); CUDA backend only.
	VersionIndexes  int
	Epoch, Restamps uint64
	PoolBytes       int64
	ReclaimLeaked   uint64
}

// reader is a version of the tree that queries run against: the latest
// (each call sees one state of the tree) or a snapshot's. The front has
// checked the closed state, the context at entry and the lengths.
type reader[K, V warpkit.Word] interface {
	lookup(ctx context.Context, keys []K, vals []V, found []bool) error
	neighbor(ctx context.Context, pred bool, keys, outKeys []K, outVals []V, found []bool) error
	count(ctx context.Context, lo, hi []K, counts []uint32) error
	rangeQ(ctx context.Context, lo, hi []K) (*warpkit.Ranges[K, V], error)
	length(ctx context.Context) (int, error)
	// ascend iterates [lo, hi) (or [lo, max] with all) of this version
	// while alive says the handle is open.
	ascend(ctx context.Context, lo, hi K, all bool, alive func() bool) iter.Seq2[K, V]
}

// view is a snapshot's version.
type view[K, V warpkit.Word] interface {
	reader[K, V]
	check(ctx context.Context) error
	release() error
}

// backend is what the CPU and CUDA implementations provide.
type backend[K, V warpkit.Word] interface {
	build(ctx context.Context, keys []K, vals []V) error
	insert(ctx context.Context, keys []K, vals []V) error
	delete(ctx context.Context, keys []K) error
	// latest is the newest version; its rangeQ and ascend see one version
	// (linearizable).
	latest() reader[K, V]
	snapshot(ctx context.Context) (view[K, V], error)
	stats(ctx context.Context) (Stats, error)
	compact(ctx context.Context) error
	check(ctx context.Context) error
	vacuum(ctx context.Context) error
	restamp(ctx context.Context) error
	close() error
}

// ErrBroken is what every operation of a CUDA-backend tree returns after a
// Restamp failed part way (a device error between renumbering one
// generation's stamps and the next's): the snapshots' views can no longer
// be trusted. Close still frees the tree.
var ErrBroken = errors.New("mvbtree: stamps renumbered in part (a Restamp failed on the device)")

// Tree is an ordered map from K to V with snapshots: readers may hold a
// Snapshot — the tree as it was when it was taken — for as long as they
// like, beside the writers. See the package documentation.
type Tree[K, V warpkit.Word] struct {
	f    *front.Front
	impl backend[K, V]
	gpu  *gpuTree[K, V] // nil on the CPU backend

	// taking orders Snapshot calls, so that their versions follow the order
	// in which the backend took them (held across the backend's snapshot,
	// which may wait for writers; mu is not, so Close and Check do not wait).
	taking sync.Mutex
	// mu guards the snapshot registry.
	mu    sync.Mutex
	stamp uint64 // the next snapshot's version
	open  map[*Snapshot[K, V]]struct{}
}

// New returns an empty tree.
func New[K, V warpkit.Word](opts Options) (*Tree[K, V], error) {
	f := front.New("mvbtree", warpkit.CPU)
	switch {
	case opts.Backend != warpkit.Auto && opts.Backend != warpkit.CPU && opts.Backend != warpkit.CUDA:
		return nil, f.Errorf("new", "unknown Backend %d", int(opts.Backend))
	case opts.Copy < CopyWhenPinned || opts.Copy > CopyIfStale:
		return nil, f.Errorf("new", "unknown Copy mode %d", int(opts.Copy))
	case opts.MaxPoolBytes < 0:
		return nil, f.Errorf("new", "MaxPoolBytes %d is negative", opts.MaxPoolBytes)
	case opts.Streams < 0:
		return nil, f.Errorf("new", "Streams %d is negative", opts.Streams)
	}
	t := &Tree[K, V]{open: map[*Snapshot[K, V]]struct{}{}}
	if opts.Backend == warpkit.CPU {
		t.f, t.impl = f, newCPU[K, V]()
		return t, nil
	}
	dev, own := opts.Device, false
	if dev == nil {
		d, err := warpkit.OpenDevice(opts.Backend, 0)
		if err != nil {
			return nil, f.Err("new", err)
		}
		if d == nil { // Auto without a device
			t.f, t.impl = f, newCPU[K, V]()
			return t, nil
		}
		dev, own = d, true
	}
	g, err := newGPU[K, V](dev, own, opts)
	if err != nil {
		if own {
			dev.Close()
		}
		return nil, f.Err("new", err)
	}
	t.f, t.impl, t.gpu = front.New("mvbtree", warpkit.CUDA), g, g
	return t, nil
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
// (within a batch, the last on the CPU backend; one of them on the CUDA
// backend, as btree's). The batch is atomic: a snapshot sees all of it or
// none.
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

// Lookup sets vals[i] and found[i] for keys[i] (vals[i] = 0 when not found).
func (t *Tree[K, V]) Lookup(ctx context.Context, keys []K, vals []V, found []bool) error {
	return lookup(t.f, ctx, t.impl.latest(), keys, vals, found)
}

// Successor finds, for each keys[i], the smallest stored key greater than it.
func (t *Tree[K, V]) Successor(ctx context.Context, keys, outKeys []K, outVals []V, found []bool) error {
	return neighbor(t.f, ctx, t.impl.latest(), "successor", false, keys, outKeys, outVals, found)
}

// Predecessor finds, for each keys[i], the largest stored key smaller than it.
func (t *Tree[K, V]) Predecessor(ctx context.Context, keys, outKeys []K, outVals []V, found []bool) error {
	return neighbor(t.f, ctx, t.impl.latest(), "predecessor", true, keys, outKeys, outVals, found)
}

// Count sets counts[i] to the number of keys in [lo[i], hi[i]) (0 when
// lo[i] >= hi[i]).
func (t *Tree[K, V]) Count(ctx context.Context, lo, hi []K, counts []uint32) error {
	return count(t.f, ctx, t.impl.latest(), lo, hi, counts)
}

// Range returns, for every query i, the pairs in [lo[i], hi[i]) in key
// order. Every query of the call sees one version of the tree (Range is
// linearizable), which btree's Range does not promise beside writers.
func (t *Tree[K, V]) Range(ctx context.Context, lo, hi []K) (*warpkit.Ranges[K, V], error) {
	return rangeQ(t.f, ctx, t.impl.latest(), lo, hi)
}

// AscendRange returns the pairs in [lo, hi) in key order of one version of
// the tree: the iterator walks a transient snapshot, so it neither copies
// the pairs nor holds writers back. The CPU backend takes the snapshot when
// AscendRange is called; the CUDA backend when the loop starts (and lets it
// go when the loop ends), so that an iterator that is never run pins
// nothing; there, a device error or ctx done ends the loop early.
func (t *Tree[K, V]) AscendRange(ctx context.Context, lo, hi K) (iter.Seq2[K, V], error) {
	return ascend(t.f, ctx, t.impl.latest(), lo, hi, false)
}

// AscendGreaterOrEqual returns every pair whose key is >= lo in key order
// (the largest key of K included), as AscendRange does.
func (t *Tree[K, V]) AscendGreaterOrEqual(ctx context.Context, lo K) (iter.Seq2[K, V], error) {
	return ascend(t.f, ctx, t.impl.latest(), lo, 0, true)
}

// All returns every pair in key order: AscendGreaterOrEqual(ctx, 0).
func (t *Tree[K, V]) All(ctx context.Context) (iter.Seq2[K, V], error) {
	return ascend(t.f, ctx, t.impl.latest(), 0, 0, true)
}

// Len returns the pairs of the latest version.
func (t *Tree[K, V]) Len(ctx context.Context) (int, error) { return length(t.f, ctx, t.impl.latest()) }

// Stats returns the tree's size and its versions.
func (t *Tree[K, V]) Stats(ctx context.Context) (Stats, error) {
	return front.Value(t.f, ctx, "stats", front.Shared, func() (Stats, error) {
		st, err := t.impl.stats(ctx)
		t.mu.Lock()
		st.Timestamp, st.OpenSnapshots = t.stamp, len(t.open)
		t.mu.Unlock()
		return st, err
	})
}

// Compact rebuilds the latest version from its pairs, packing them into
// fewer nodes; open snapshots keep theirs.
func (t *Tree[K, V]) Compact(ctx context.Context) error {
	return t.f.Do(ctx, "compact", front.Exclusive, func() error { return t.impl.compact(ctx) })
}

// Vacuum reclaims the versions that only closed snapshots could see. The
// CUDA backend's writers reclaim those of the nodes they change; Vacuum
// reaches the rest, so that afterwards every older version is one an open
// snapshot sees. The CPU backend has nothing to do: Go's garbage collector
// frees a closed snapshot's versions.
func (t *Tree[K, V]) Vacuum(ctx context.Context) error {
	return t.f.Do(ctx, "vacuum", front.Exclusive, func() error { return t.impl.vacuum(ctx) })
}

// Restamp renumbers the CUDA backend's 32-bit node stamps, preserving every
// open snapshot's view. Snapshot calls it before the stamps could wrap; it
// is exported for tests and tools. The CPU backend has no stamps to
// renumber.
func (t *Tree[K, V]) Restamp(ctx context.Context) error {
	return t.f.Do(ctx, "restamp", front.Exclusive, func() error { return t.impl.restamp(ctx) })
}

// Check verifies the tree's invariants: the latest version's order and,
// for every open snapshot, the order of its version and the registry's
// accounting (versions below the timestamp, each open snapshot listed once);
// on the CUDA backend also every version chain (stamps decreasing, every
// link inside the pool) and the pool's accounting (every allocated unit a
// head, a linked version or a retired one waiting).
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
			// Under the snapshot's own front: a Close beside the check
			// waits for it, and a snapshot closed since is skipped.
			err := s.f.Do(ctx, "check", front.Shared, func() error { return s.view.check(ctx) })
			if err != nil && !errors.Is(err, warpkit.ErrClosed) {
				return fmt.Errorf("snapshot %d: %w", s.version, err)
			}
		}
		return nil
	})
}

// Snapshot returns the tree as it is now, as a handle that later updates
// do not change, until Close. It linearizes after every update that
// returned before it was called and before every update that starts after
// it returned. On the CUDA backend it waits for the write batches in flight
// (a snapshot never sees part of a batch).
func (t *Tree[K, V]) Snapshot(ctx context.Context) (*Snapshot[K, V], error) {
	return front.Value(t.f, ctx, "snapshot", front.Shared, func() (*Snapshot[K, V], error) {
		t.taking.Lock()
		defer t.taking.Unlock()
		v, err := t.impl.snapshot(ctx)
		if err != nil {
			return nil, err
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		s := &Snapshot[K, V]{f: front.New("mvbtree: snapshot", t.f.Backend()), t: t, view: v, version: t.stamp}
		s.gpu, _ = v.(*gpuView[K, V])
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
	view    view[K, V]
	gpu     *gpuView[K, V] // nil on the CPU backend
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
		return s.view.release()
	})
}

// Lookup is Tree.Lookup on the snapshot.
func (s *Snapshot[K, V]) Lookup(ctx context.Context, keys []K, vals []V, found []bool) error {
	return lookup(s.f, ctx, s.view, keys, vals, found)
}

// Successor is Tree.Successor on the snapshot.
func (s *Snapshot[K, V]) Successor(ctx context.Context, keys, outKeys []K, outVals []V, found []bool) error {
	return neighbor(s.f, ctx, s.view, "successor", false, keys, outKeys, outVals, found)
}

// Predecessor is Tree.Predecessor on the snapshot.
func (s *Snapshot[K, V]) Predecessor(ctx context.Context, keys, outKeys []K, outVals []V, found []bool) error {
	return neighbor(s.f, ctx, s.view, "predecessor", true, keys, outKeys, outVals, found)
}

// Count is Tree.Count on the snapshot.
func (s *Snapshot[K, V]) Count(ctx context.Context, lo, hi []K, counts []uint32) error {
	return count(s.f, ctx, s.view, lo, hi, counts)
}

// Range is Tree.Range on the snapshot.
func (s *Snapshot[K, V]) Range(ctx context.Context, lo, hi []K) (*warpkit.Ranges[K, V], error) {
	return rangeQ(s.f, ctx, s.view, lo, hi)
}

// AscendRange returns the snapshot's pairs in [lo, hi) in key order. The
// iterator reads the snapshot as it goes: it yields nothing more once the
// snapshot is closed.
func (s *Snapshot[K, V]) AscendRange(ctx context.Context, lo, hi K) (iter.Seq2[K, V], error) {
	return ascend(s.f, ctx, s.view, lo, hi, false)
}

// AscendGreaterOrEqual returns the snapshot's pairs with keys >= lo.
func (s *Snapshot[K, V]) AscendGreaterOrEqual(ctx context.Context, lo K) (iter.Seq2[K, V], error) {
	return ascend(s.f, ctx, s.view, lo, 0, true)
}

// All returns every pair of the snapshot in key order.
func (s *Snapshot[K, V]) All(ctx context.Context) (iter.Seq2[K, V], error) {
	return ascend(s.f, ctx, s.view, 0, 0, true)
}

// Len returns the snapshot's pairs.
func (s *Snapshot[K, V]) Len(ctx context.Context) (int, error) { return length(s.f, ctx, s.view) }

// The queries, for the tree's latest version and its snapshots alike.

func lookup[K, V warpkit.Word](f *front.Front, ctx context.Context, r reader[K, V], keys []K, vals []V, found []bool) error {
	if err := f.Lens("lookup", len(keys), len(vals), len(found)); err != nil {
		return err
	}
	return f.Do(ctx, "lookup", front.Shared, func() error { return r.lookup(ctx, keys, vals, found) })
}

func neighbor[K, V warpkit.Word](f *front.Front, ctx context.Context, r reader[K, V], op string, pred bool, keys, outKeys []K, outVals []V, found []bool) error {
	if err := f.Lens(op, len(keys), len(outKeys), len(outVals), len(found)); err != nil {
		return err
	}
	return f.Do(ctx, op, front.Shared, func() error { return r.neighbor(ctx, pred, keys, outKeys, outVals, found) })
}

func count[K, V warpkit.Word](f *front.Front, ctx context.Context, r reader[K, V], lo, hi []K, counts []uint32) error {
	if err := f.Lens("count", len(lo), len(hi), len(counts)); err != nil {
		return err
	}
	return f.Do(ctx, "count", front.Shared, func() error { return r.count(ctx, lo, hi, counts) })
}

func rangeQ[K, V warpkit.Word](f *front.Front, ctx context.Context, r reader[K, V], lo, hi []K) (*warpkit.Ranges[K, V], error) {
	if err := f.Lens("range", len(lo), len(hi)); err != nil {
		return nil, err
	}
	return front.Value(f, ctx, "range", front.Shared, func() (*warpkit.Ranges[K, V], error) { return r.rangeQ(ctx, lo, hi) })
}

func ascend[K, V warpkit.Word](f *front.Front, ctx context.Context, r reader[K, V], lo, hi K, all bool) (iter.Seq2[K, V], error) {
	return front.Value(f, ctx, "ascend", front.Shared, func() (iter.Seq2[K, V], error) {
		return r.ascend(ctx, lo, hi, all, func() bool { return !f.Closed() }), nil
	})
}

func length[K, V warpkit.Word](f *front.Front, ctx context.Context, r reader[K, V]) (int, error) {
	return front.Value(f, ctx, "len", front.Shared, func() (int, error) { return r.length(ctx) })
}
