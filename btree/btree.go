package btree

import (
	"context"
	"fmt"
	"iter"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/front"
)

// Options configures a Tree.
type Options struct {
	// Backend selects CUDA or the CPU; Auto (the zero value) uses CUDA when a
	// device is present.
	Backend warpkit.Backend
	// Device is the GPU to use. If nil and CUDA is used, the tree opens device 0
	// itself and closes it in Close.
	Device *cuda.Device
	// InitialNodes is the node pool's starting size on the GPU (0: 4096 nodes).
	// The pool grows by doubling as batches need it, and never shrinks.
	InitialNodes int
	// MaxNodes caps the node pool (0: no cap but device memory and the
	// largest pool there is, 2^32-2^17-1 nodes, which also caps larger
	// values). A batch that would need more fails with ErrPoolExhausted and
	// leaves a valid tree.
	MaxNodes int
	// Streams is the number of CUDA streams concurrent batch calls share (0: 4).
	Streams int
	// SortQueries, when positive, is the smallest phased query batch (Lookup,
	// Successor, Predecessor, Count, Range with no writer running) that is
	// sorted by key on the device before it walks the tree, so that
	// neighbouring lanes share root-to-leaf paths and leaves; results keep the
	// batch's order either way. 0 (the default) never sorts: on an H100 the
	// sort cost more than it saved at every tree size measured (see the package
	// documentation). The sort needs scratch of about three times the batch's
	// keys.
	SortQueries int
}

// OpKind is the operation of one element of a mixed batch (Apply).
type OpKind uint8

// The operations of a mixed batch. Their values are the kernel's codes. The
// comments say which inputs of Ops each reads and which fields of Results it
// sets (every other result field of the element is zeroed).
const (
	OpLookup      OpKind = 0 // Keys: Found, Keys (the key when found), Vals
	OpInsert      OpKind = 1 // Keys, Vals: insert the pair, or replace the key's value
	OpDelete      OpKind = 2 // Keys: remove the key if present
	OpSuccessor   OpKind = 3 // Keys: the smallest key > Keys[i]: Found, Keys, Vals
	OpPredecessor OpKind = 4 // Keys: the largest key < Keys[i]: Found, Keys, Vals
	OpCount       OpKind = 5 // Keys, His: the number of keys in [Keys[i], His[i]): Counts
)

func (k OpKind) String() string {
	switch k {
	case OpLookup:
		return "lookup"
	case OpInsert:
		return "insert"
	case OpDelete:
		return "delete"
	case OpSuccessor:
		return "successor"
	case OpPredecessor:
		return "predecessor"
	case OpCount:
		return "count"
	}
	return fmt.Sprintf("OpKind(%d)", uint8(k))
}

// Ops is a mixed batch (Apply) as parallel slices: element i is the operation
// Kinds[i] on Keys[i], with the value Vals[i] (OpInsert) and the exclusive
// upper bound His[i] (OpCount). Kinds and Keys have one element per operation.
// Vals may be nil, and then every insert stores the zero value; His may be
// nil, and then every count has the upper bound 0 (and counts nothing). A
// field that is not nil has one element per operation.
type Ops[K, V warpkit.Word] struct {
	Kinds []OpKind
	Keys  []K
	Vals  []V
	His   []K
}

// Len returns the number of operations.
func (o Ops[K, V]) Len() int { return len(o.Kinds) }

// Results receives a mixed batch's results as parallel slices: element i
// belongs to operation i. A nil field is not wanted and not written; a field
// that is not nil has one element per operation. Insert and delete results
// carry no information (they are zero).
type Results[K, V warpkit.Word] struct {
	Found  []bool   // lookup, successor, predecessor: a key was found
	Keys   []K      // lookup, successor, predecessor: the key found (0 when none)
	Vals   []V      // lookup, successor, predecessor: its value (0 when none)
	Counts []uint32 // count: the number of keys in [Keys[i], His[i])
}

// Stats describes the tree's size and shape.
type Stats struct {
	Backend   warpkit.Backend // CPU or CUDA
	Keys      int             // pairs stored
	Nodes     int             // nodes in use (CUDA backend; 0 on the CPU, whose Go B-tree does not count them)
	Height    int             // levels, leaves included (0 for an empty tree on the CPU, 1 on the GPU, whose root leaf always exists)
	PoolBytes int64           // device memory held by the node pool (0 on the CPU)
	NodeBytes int             // bytes per node (128 or 256; 0 on the CPU)
}

// backend is what the CPU and GPU implementations provide. The Tree's front
// has checked the closed state, the context at entry and the lengths (equal,
// or nil where optional) before any of these runs, and holds the tree shared
// or exclusively as the method documents.
type backend[K, V warpkit.Word] interface {
	build(ctx context.Context, keys []K, vals []V) error
	insert(ctx context.Context, keys []K, vals []V) error
	delete(ctx context.Context, keys []K) error
	lookup(ctx context.Context, keys []K, vals []V, found []bool) error
	neighbor(ctx context.Context, pred bool, keys, outKeys []K, outVals []V, found []bool) error
	count(ctx context.Context, lo, hi []K, counts []uint32) error
	rangeQuery(ctx context.Context, lo, hi []K) (*warpkit.Ranges[K, V], error)
	apply(ctx context.Context, ops Ops[K, V], res Results[K, V]) error
	stats(ctx context.Context) (Stats, error)
	compact(ctx context.Context) error
	check(ctx context.Context) error
	close() error
}

// Tree is an ordered map from K to V: a GPU B-link tree (CUDA backend) or a Go
// B-tree (CPU backend), with the same semantics. See the package documentation
// for the concurrency and batch contracts.
type Tree[K, V warpkit.Word] struct {
	f    *front.Front
	impl backend[K, V]
	gpu  *gpuTree[K, V] // nil on the CPU backend
}

// New returns an empty tree.
func New[K, V warpkit.Word](opts Options) (*Tree[K, V], error) {
	for _, o := range []struct {
		name string
		v    int
	}{{"InitialNodes", opts.InitialNodes}, {"MaxNodes", opts.MaxNodes}, {"Streams", opts.Streams}, {"SortQueries", opts.SortQueries}} {
		if o.v < 0 {
			return nil, fmt.Errorf("btree: new: %w: Options.%s is negative (%d)", warpkit.ErrInvalidArgument, o.name, o.v)
		}
	}
	dev, own := opts.Device, false
	if dev == nil && opts.Backend != warpkit.CPU {
		d, err := warpkit.OpenDevice(opts.Backend, 0)
		if err != nil {
			return nil, fmt.Errorf("btree: new: %w", err)
		}
		dev, own = d, d != nil
	}
	if opts.Backend == warpkit.CPU || dev == nil {
		return &Tree[K, V]{f: front.New("btree", warpkit.CPU), impl: newCPU[K, V]()}, nil
	}
	g, err := newGPU[K, V](dev, own, opts)
	if err != nil {
		if own {
			dev.Close()
		}
		return nil, fmt.Errorf("btree: new: %w", err)
	}
	return &Tree[K, V]{f: front.New("btree", warpkit.CUDA), impl: g, gpu: g}, nil
}

// Backend reports the backend in use: CPU or CUDA. It is the one method that
// works after Close.
func (t *Tree[K, V]) Backend() warpkit.Backend { return t.f.Backend() }

// Close frees the tree's device memory (and the device, if the tree opened
// it), after the calls in flight return. Every later call but Backend,
// a second Close included, returns an error wrapping ErrClosed.
func (t *Tree[K, V]) Close() error { return t.f.Close(t.impl.close) }

// shared runs a batch beside other calls (the backends coordinate concurrent
// batches themselves).
func (t *Tree[K, V]) shared(ctx context.Context, op string, run func() error) error {
	return t.f.Do(ctx, op, front.Shared, run)
}

// exclusive runs a call that needs the tree alone.
func (t *Tree[K, V]) exclusive(ctx context.Context, op string, run func() error) error {
	return t.f.Do(ctx, op, front.Exclusive, run)
}

// Build replaces the tree's contents with the given pairs (bulk build: sort,
// then fill the nodes bottom-up, leaves 10/14 full, internal nodes 12/14, so
// that inserts have room). If a key repeats, its last pair wins. It takes the
// tree exclusively. On failure, a cancelled context included, the tree keeps
// its old contents, except after a device error while the new tree was being
// laid out in place, which leaves it empty (see the package documentation,
// "Bulk build").
func (t *Tree[K, V]) Build(ctx context.Context, keys []K, vals []V) error {
	if err := t.f.Lens("build", len(keys), len(vals)); err != nil {
		return err
	}
	return t.exclusive(ctx, "build", func() error { return t.impl.build(ctx, keys, vals) })
}

// Insert inserts each pair, replacing the value of a key already present. If a
// key repeats within the batch, one of its pairs wins (the last one on the CPU;
// which one is unspecified on the GPU).
func (t *Tree[K, V]) Insert(ctx context.Context, keys []K, vals []V) error {
	if err := t.f.Lens("insert", len(keys), len(vals)); err != nil {
		return err
	}
	return t.shared(ctx, "insert", func() error { return t.impl.insert(ctx, keys, vals) })
}

// Delete removes each key that is present; absent keys are ignored.
func (t *Tree[K, V]) Delete(ctx context.Context, keys []K) error {
	return t.shared(ctx, "delete", func() error { return t.impl.delete(ctx, keys) })
}

// Lookup sets vals[i] and found[i] for keys[i] (vals[i] = 0 when not found).
func (t *Tree[K, V]) Lookup(ctx context.Context, keys []K, vals []V, found []bool) error {
	if err := t.f.Lens("lookup", len(keys), len(vals), len(found)); err != nil {
		return err
	}
	return t.shared(ctx, "lookup", func() error { return t.impl.lookup(ctx, keys, vals, found) })
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
	return t.shared(ctx, op, func() error { return t.impl.neighbor(ctx, pred, keys, outKeys, outVals, found) })
}

// Count sets counts[i] to the number of keys in [lo[i], hi[i]) (0 when
// lo[i] >= hi[i]).
func (t *Tree[K, V]) Count(ctx context.Context, lo, hi []K, counts []uint32) error {
	if err := t.f.Lens("count", len(lo), len(hi), len(counts)); err != nil {
		return err
	}
	return t.shared(ctx, "count", func() error { return t.impl.count(ctx, lo, hi, counts) })
}

// Range returns, for every query i, the pairs in [lo[i], hi[i]) in key order
// (none when lo[i] >= hi[i]). The result belongs to the caller.
func (t *Tree[K, V]) Range(ctx context.Context, lo, hi []K) (*warpkit.Ranges[K, V], error) {
	if err := t.f.Lens("range", len(lo), len(hi)); err != nil {
		return nil, err
	}
	return front.Value(t.f, ctx, "range", front.Shared, func() (*warpkit.Ranges[K, V], error) {
		return t.impl.rangeQuery(ctx, lo, hi)
	})
}

// AscendRange returns the pairs in [lo, hi) in key order (none when lo >= hi):
// a one-query Range, read when it is called; the iterator only walks the copy.
func (t *Tree[K, V]) AscendRange(ctx context.Context, lo, hi K) (iter.Seq2[K, V], error) {
	r, err := t.Range(ctx, []K{lo}, []K{hi})
	if err != nil {
		return nil, err
	}
	return r.Query(0), nil
}

// AscendGreaterOrEqual returns every pair whose key is >= lo in key order,
// the largest key of K included (which no half-open range reaches): the range
// [lo, max) and a lookup of max, run in one call. Like AscendRange it copies
// the pairs when it is called.
func (t *Tree[K, V]) AscendGreaterOrEqual(ctx context.Context, lo K) (iter.Seq2[K, V], error) {
	r, err := front.Value(t.f, ctx, "ascend", front.Shared, func() (*warpkit.Ranges[K, V], error) {
		return t.atLeast(ctx, lo)
	})
	if err != nil {
		return nil, err
	}
	return r.Query(0), nil
}

// All returns every pair in key order: AscendGreaterOrEqual(ctx, 0).
func (t *Tree[K, V]) All(ctx context.Context) (iter.Seq2[K, V], error) {
	return t.AscendGreaterOrEqual(ctx, 0)
}

// atLeast returns the pairs with keys >= lo as a one-query Ranges.
func (t *Tree[K, V]) atLeast(ctx context.Context, lo K) (*warpkit.Ranges[K, V], error) {
	top := ^K(0)
	r, err := t.impl.rangeQuery(ctx, []K{lo}, []K{top}) // [lo, top): empty when lo is top
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var v [1]V
	var ok [1]bool
	if err := t.impl.lookup(ctx, []K{top}, v[:], ok[:]); err != nil {
		return nil, err
	}
	if ok[0] {
		r.Keys, r.Vals = append(r.Keys, top), append(r.Vals, v[0])
		r.Offsets[1]++
	}
	return r, nil
}

// Apply runs a mixed batch: each element any operation, all in one kernel on
// the GPU, with the semantics of the package documentation ("Mixed batches").
// ops.Kinds and ops.Keys, and every field of ops and res that is not nil, must
// have the same length; a kind above OpCount is refused (ErrInvalidArgument)
// before anything is applied.
func (t *Tree[K, V]) Apply(ctx context.Context, ops Ops[K, V], res Results[K, V]) error {
	n := len(ops.Kinds)
	lens := []int{len(ops.Keys)}
	for _, f := range []struct {
		set bool
		n   int
	}{
		{ops.Vals != nil, len(ops.Vals)}, {ops.His != nil, len(ops.His)},
		{res.Found != nil, len(res.Found)}, {res.Keys != nil, len(res.Keys)},
		{res.Vals != nil, len(res.Vals)}, {res.Counts != nil, len(res.Counts)},
	} {
		if f.set {
			lens = append(lens, f.n)
		}
	}
	if err := t.f.Lens("apply", n, lens...); err != nil {
		return err
	}
	for i, k := range ops.Kinds {
		if k > OpCount {
			return t.f.Errorf("apply", "operation %d has kind %d (above OpCount)", i, k)
		}
	}
	return t.shared(ctx, "apply", func() error { return t.impl.apply(ctx, ops, res) })
}

// Len returns the number of pairs stored.
func (t *Tree[K, V]) Len(ctx context.Context) (int, error) {
	return front.Value(t.f, ctx, "len", front.Shared, func() (int, error) {
		s, err := t.impl.stats(ctx)
		return s.Keys, err
	})
}

// Stats returns the tree's size and shape.
func (t *Tree[K, V]) Stats(ctx context.Context) (Stats, error) {
	return front.Value(t.f, ctx, "stats", front.Shared, func() (Stats, error) {
		s, err := t.impl.stats(ctx)
		s.Backend = t.f.Backend()
		return s, err
	})
}

// Compact rebuilds the tree from its pairs, packing them into fewer nodes
// (deletes never merge nodes): the nodes it frees serve later inserts. The
// pool keeps its size, so Compact returns no device memory; Close the tree
// and build a new one for that. It takes the tree exclusively: concurrent
// calls wait for it. Like Build, a device error while it lays the tree out in
// place leaves the tree empty.
func (t *Tree[K, V]) Compact(ctx context.Context) error {
	return t.exclusive(ctx, "compact", func() error { return t.impl.compact(ctx) })
}

// Check verifies the tree's structural invariants (sorted leaves, consistent
// side links and high keys, every node reachable from the root exactly once, no
// latch held, the key count). It copies the tree to the host: O(size). On the
// CPU backend it verifies the order of the Go B-tree. It takes the tree
// exclusively.
func (t *Tree[K, V]) Check(ctx context.Context) error {
	return t.exclusive(ctx, "check", func() error { return t.impl.check(ctx) })
}

// device runs a device-resident batch beside other calls, after refusing the
// CPU backend (ErrNeedsCUDA) and checking the lengths.
func (t *Tree[K, V]) device(ctx context.Context, op string, n int, lens []int, run func(g *gpuTree[K, V]) error) error {
	if err := t.f.Device(op); err != nil {
		return err
	}
	if err := t.f.Lens(op, n, lens...); err != nil {
		return err
	}
	return t.shared(ctx, op, func() error { return run(t.gpu) })
}

// BuildDevice is Build on device-resident pairs. It sorts keys and vals in
// place. It takes the tree exclusively.
func (t *Tree[K, V]) BuildDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V]) error {
	if err := t.f.Device("build"); err != nil {
		return err
	}
	if err := t.f.Lens("build", keys.Len(), vals.Len()); err != nil {
		return err
	}
	return t.exclusive(ctx, "build", func() error { return t.gpu.buildDevice(ctx, keys, vals) })
}

// InsertDevice is Insert on device-resident pairs.
func (t *Tree[K, V]) InsertDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V]) error {
	return t.device(ctx, "insert", keys.Len(), []int{vals.Len()}, func(g *gpuTree[K, V]) error {
		return g.insertDevice(ctx, keys, vals)
	})
}

// DeleteDevice is Delete on device-resident keys.
func (t *Tree[K, V]) DeleteDevice(ctx context.Context, keys cuda.Slice[K]) error {
	return t.device(ctx, "delete", keys.Len(), nil, func(g *gpuTree[K, V]) error { return g.deleteDevice(ctx, keys) })
}

// LookupDevice is Lookup on device-resident buffers; found[i] is 1 or 0.
func (t *Tree[K, V]) LookupDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V], found cuda.Slice[uint8]) error {
	return t.device(ctx, "lookup", keys.Len(), []int{vals.Len(), found.Len()}, func(g *gpuTree[K, V]) error {
		return g.lookupDevice(ctx, keys, vals, found)
	})
}

// SuccessorDevice is Successor on device-resident buffers.
func (t *Tree[K, V]) SuccessorDevice(ctx context.Context, keys, outKeys cuda.Slice[K], outVals cuda.Slice[V], found cuda.Slice[uint8]) error {
	return t.neighborDevice(ctx, "successor", false, keys, outKeys, outVals, found)
}

// PredecessorDevice is Predecessor on device-resident buffers.
func (t *Tree[K, V]) PredecessorDevice(ctx context.Context, keys, outKeys cuda.Slice[K], outVals cuda.Slice[V], found cuda.Slice[uint8]) error {
	return t.neighborDevice(ctx, "predecessor", true, keys, outKeys, outVals, found)
}

func (t *Tree[K, V]) neighborDevice(ctx context.Context, op string, pred bool, keys, outKeys cuda.Slice[K], outVals cuda.Slice[V], found cuda.Slice[uint8]) error {
	return t.device(ctx, op, keys.Len(), []int{outKeys.Len(), outVals.Len(), found.Len()}, func(g *gpuTree[K, V]) error {
		return g.neighborDevice(ctx, pred, keys, outKeys, outVals, found)
	})
}

// CountDevice is Count on device-resident buffers: counts[i] is the number of
// keys in [lo[i], hi[i]) (0 when lo[i] >= hi[i]).
func (t *Tree[K, V]) CountDevice(ctx context.Context, lo, hi cuda.Slice[K], counts cuda.Slice[uint32]) error {
	return t.device(ctx, "count", lo.Len(), []int{hi.Len(), counts.Len()}, func(g *gpuTree[K, V]) error {
		return g.rangeDevice(ctx, lo, hi, cuda.Slice[uint32]{}, cuda.Slice[K]{}, cuda.Slice[V]{}, counts)
	})
}

// RangeDevice runs range queries on device-resident buffers. Query i writes the
// pairs in [lo[i], hi[i]) (none when lo[i] >= hi[i]), in key order, to
// outKeys/outVals[offsets[i]:offsets[i+1]] (its window; len(offsets) =
// len(lo)+1) and sets counts[i] to the number of keys in [lo[i], hi[i]). When
// counts[i] exceeds the window, the first window-size pairs were written: size
// windows with CountDevice and a scan for exact results, or use fixed windows
// (offsets[i] = i*L) for bounded ranges.
//
// Every window must lie within outKeys and outVals: offsets[i] <= offsets[i+1]
// <= outKeys.Len() (so the offsets never decrease; an empty window has
// offsets[i] == offsets[i+1]). The kernel checks each query's window: one that
// decreases or passes the end of the buffers is left empty (nothing is written
// for that query, and nothing ever outside the buffers), the other queries'
// windows and every count are written as usual, and the call returns an error
// wrapping ErrInvalidArgument.
func (t *Tree[K, V]) RangeDevice(ctx context.Context, lo, hi cuda.Slice[K], offsets cuda.Slice[uint32], outKeys cuda.Slice[K], outVals cuda.Slice[V], counts cuda.Slice[uint32]) error {
	if err := t.f.Device("range"); err != nil {
		return err
	}
	if err := t.f.Lens("range", outKeys.Len(), outVals.Len()); err != nil {
		return err
	}
	return t.device(ctx, "range", lo.Len(), []int{hi.Len(), counts.Len(), offsets.Len() - 1}, func(g *gpuTree[K, V]) error {
		return g.rangeDevice(ctx, lo, hi, offsets, outKeys, outVals, counts)
	})
}

// DeviceOps is a mixed batch in device memory (structure of arrays), Ops's
// device twin. Kinds and Keys have one element per operation. Vals may be
// empty (Len 0), and then every insert stores the zero value; His may be
// empty, and then every count has the upper bound 0 (and counts nothing). A
// field that is not empty has one element per operation.
//
// Kinds holds OpKind values. A batch holding a value above OpCount is rejected
// on the device before any of it runs (a small check kernel ahead of the batch
// kernel): ApplyDevice returns an error wrapping ErrInvalidArgument, the tree is
// unchanged and no result is written.
type DeviceOps[K, V warpkit.Word] struct {
	Kinds cuda.Slice[uint8] // OpKind values
	Keys  cuda.Slice[K]
	Vals  cuda.Slice[V]
	His   cuda.Slice[K] // OpCount's exclusive upper bounds
}

// DeviceResults receives a mixed batch's results, Results's device twin
// (Found as 1 or 0); any field may be empty (Len 0), and then that result is
// not written (an empty view of a larger buffer is left untouched too).
type DeviceResults[K, V warpkit.Word] struct {
	Found  cuda.Slice[uint8]
	Keys   cuda.Slice[K]
	Vals   cuda.Slice[V]
	Counts cuda.Slice[uint32]
}

// orNull returns s, or the zero value of its type when s is empty. The kernels
// test optional buffers for a null pointer, and an empty view of a real buffer
// still carries that buffer's address: passed as is, the kernel would read or
// write past the view.
func orNull[S interface{ Len() int }](s S) S {
	if s.Len() == 0 {
		var zero S
		return zero
	}
	return s
}

// kernelArgs returns the batch with every empty optional field null.
func (o DeviceOps[K, V]) kernelArgs() DeviceOps[K, V] {
	o.Vals, o.His = orNull(o.Vals), orNull(o.His)
	return o
}

// kernelArgs returns the results with every empty field null.
func (r DeviceResults[K, V]) kernelArgs() DeviceResults[K, V] {
	r.Found, r.Keys, r.Vals, r.Counts = orNull(r.Found), orNull(r.Keys), orNull(r.Vals), orNull(r.Counts)
	return r
}

// ApplyDevice is Apply on device-resident buffers (see DeviceOps and
// DeviceResults for the optional fields).
func (t *Tree[K, V]) ApplyDevice(ctx context.Context, ops DeviceOps[K, V], res DeviceResults[K, V]) error {
	n := ops.Kinds.Len()
	lens := []int{ops.Keys.Len()}
	for _, m := range []int{ops.Vals.Len(), ops.His.Len(), res.Found.Len(), res.Keys.Len(), res.Vals.Len(), res.Counts.Len()} {
		if m != 0 {
			lens = append(lens, m)
		}
	}
	return t.device(ctx, "apply", n, lens, func(g *gpuTree[K, V]) error { return g.applyDevice(ctx, ops, res) })
}
