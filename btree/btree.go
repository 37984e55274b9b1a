package btree

import (
	"context"
	"fmt"
	"iter"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
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

// The operations of a mixed batch. Their values are the kernel's codes.
const (
	OpLookup      OpKind = 0 // Found, Value
	OpInsert      OpKind = 1 // insert Key with Value, or replace its value
	OpDelete      OpKind = 2 // remove Key if present
	OpSuccessor   OpKind = 3 // the smallest key > Key: Found, Key, Value
	OpPredecessor OpKind = 4 // the largest key < Key: Found, Key, Value
	OpCount       OpKind = 5 // how many keys lie in [Key, Hi]: Count
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

// Op is one element of a mixed batch.
type Op[K, V warpkit.Word] struct {
	Kind  OpKind
	Key   K
	Value V // OpInsert's value
	Hi    K // OpCount's inclusive upper bound
}

// Result is the outcome of one Op. Insert and delete results are zero.
type Result[K, V warpkit.Word] struct {
	Found bool   // lookup, successor, predecessor: a key was found
	Key   K      // successor, predecessor: the key found
	Value V      // lookup, successor, predecessor: its value
	Count uint32 // count: keys in [Key, Hi]
}

// Stats describes the tree's size.
type Stats struct {
	Keys      int   // pairs stored
	Nodes     int   // nodes in use (GPU backend; 0 on the CPU)
	Height    int   // levels, leaves included (GPU backend; 0 on the CPU)
	PoolBytes int64 // device memory held by the node pool
	NodeBytes int   // bytes per node (128 or 256; 0 on the CPU)
}

// Ranges holds the results of a batch of range queries: the pairs of query i
// are Keys[Offsets[i]:Offsets[i+1]] and the matching Vals, in key order.
type Ranges[K, V warpkit.Word] struct {
	Offsets []uint32
	Keys    []K
	Vals    []V
}

// Len returns the number of queries.
func (r *Ranges[K, V]) Len() int { return max(len(r.Offsets)-1, 0) }

// Query returns the pairs of query i in key order.
func (r *Ranges[K, V]) Query(i int) iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		for j := r.Offsets[i]; j < r.Offsets[i+1]; j++ {
			if !yield(r.Keys[j], r.Vals[j]) {
				return
			}
		}
	}
}

// backend is what the CPU and GPU implementations provide.
type backend[K, V warpkit.Word] interface {
	build(ctx context.Context, keys []K, vals []V) error
	insert(ctx context.Context, keys []K, vals []V) error
	delete(ctx context.Context, keys []K) error
	lookup(ctx context.Context, keys []K, vals []V, found []bool) error
	neighbor(ctx context.Context, pred bool, keys, outKeys []K, outVals []V, found []bool) error
	count(ctx context.Context, lo, hi []K, counts []uint32) error
	rangeQuery(ctx context.Context, lo, hi []K) (*Ranges[K, V], error)
	apply(ctx context.Context, ops []Op[K, V], results []Result[K, V]) error
	stats(ctx context.Context) (Stats, error)
	compact(ctx context.Context) error
	check(ctx context.Context) error
	close() error
}

// Tree is an ordered map from K to V: a GPU B-link tree (CUDA backend) or a Go
// B-tree (CPU backend), with the same semantics. See the package documentation
// for the concurrency and batch contracts.
type Tree[K, V warpkit.Word] struct {
	kind warpkit.Backend
	impl backend[K, V]
	gpu  *gpuTree[K, V] // nil on the CPU backend
}

// New returns an empty tree.
func New[K, V warpkit.Word](opts Options) (*Tree[K, V], error) {
	if opts.InitialNodes < 0 || opts.MaxNodes < 0 || opts.Streams < 0 || opts.SortQueries < 0 {
		return nil, fmt.Errorf("btree: %w: negative option", warpkit.ErrInvalidArgument)
	}
	dev, own := opts.Device, false
	if dev == nil && opts.Backend != warpkit.CPU {
		d, err := warpkit.OpenDevice(opts.Backend, 0)
		if err != nil {
			return nil, fmt.Errorf("btree: %w", err)
		}
		dev, own = d, d != nil
	}
	if opts.Backend == warpkit.CPU || dev == nil {
		return &Tree[K, V]{kind: warpkit.CPU, impl: newCPU[K, V]()}, nil
	}
	g, err := newGPU[K, V](dev, own, opts)
	if err != nil {
		if own {
			dev.Close()
		}
		return nil, fmt.Errorf("btree: %w", err)
	}
	return &Tree[K, V]{kind: warpkit.CUDA, impl: g, gpu: g}, nil
}

// Backend reports the backend in use: CPU or CUDA.
func (t *Tree[K, V]) Backend() warpkit.Backend { return t.kind }

// Close frees the tree's device memory (and the device, if the tree opened it).
// Later calls return ErrClosed.
func (t *Tree[K, V]) Close() error { return t.impl.close() }

func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("btree: %s: %w", op, err)
}

func lengths(op string, n int, others ...int) error {
	for _, m := range others {
		if m != n {
			return fmt.Errorf("btree: %s: %w: slices of lengths %d and %d", op, warpkit.ErrInvalidArgument, n, m)
		}
	}
	return nil
}

// Build replaces the tree's contents with the given pairs (bulk build: sort,
// then fill the nodes bottom-up, leaves 10/14 full, internal nodes 12/14, so
// that inserts have room). If a key repeats, its last pair wins. On failure
// the tree keeps its old contents, except after a device error while the new
// tree was being laid out in place, which leaves it empty (see the package
// documentation, "Bulk build").
func (t *Tree[K, V]) Build(ctx context.Context, keys []K, vals []V) error {
	if err := lengths("build", len(keys), len(vals)); err != nil {
		return err
	}
	return wrap("build", t.impl.build(ctx, keys, vals))
}

// Insert inserts each pair, replacing the value of a key already present. If a
// key repeats within the batch, one of its pairs wins (the last one on the CPU;
// which one is unspecified on the GPU).
func (t *Tree[K, V]) Insert(ctx context.Context, keys []K, vals []V) error {
	if err := lengths("insert", len(keys), len(vals)); err != nil {
		return err
	}
	return wrap("insert", t.impl.insert(ctx, keys, vals))
}

// Delete removes each key that is present; absent keys are ignored.
func (t *Tree[K, V]) Delete(ctx context.Context, keys []K) error {
	return wrap("delete", t.impl.delete(ctx, keys))
}

// Lookup sets vals[i] and found[i] for keys[i] (vals[i] = 0 when not found).
func (t *Tree[K, V]) Lookup(ctx context.Context, keys []K, vals []V, found []bool) error {
	if err := lengths("lookup", len(keys), len(vals), len(found)); err != nil {
		return err
	}
	return wrap("lookup", t.impl.lookup(ctx, keys, vals, found))
}

// Successor finds, for each keys[i], the smallest stored key greater than it.
func (t *Tree[K, V]) Successor(ctx context.Context, keys, outKeys []K, outVals []V, found []bool) error {
	if err := lengths("successor", len(keys), len(outKeys), len(outVals), len(found)); err != nil {
		return err
	}
	return wrap("successor", t.impl.neighbor(ctx, false, keys, outKeys, outVals, found))
}

// Predecessor finds, for each keys[i], the largest stored key smaller than it.
func (t *Tree[K, V]) Predecessor(ctx context.Context, keys, outKeys []K, outVals []V, found []bool) error {
	if err := lengths("predecessor", len(keys), len(outKeys), len(outVals), len(found)); err != nil {
		return err
	}
	return wrap("predecessor", t.impl.neighbor(ctx, true, keys, outKeys, outVals, found))
}

// Count sets counts[i] to the number of keys in [lo[i], hi[i]] (0 if lo > hi).
func (t *Tree[K, V]) Count(ctx context.Context, lo, hi []K, counts []uint32) error {
	if err := lengths("count", len(lo), len(hi), len(counts)); err != nil {
		return err
	}
	return wrap("count", t.impl.count(ctx, lo, hi, counts))
}

// Range returns the pairs in [lo[i], hi[i]] for every query i.
func (t *Tree[K, V]) Range(ctx context.Context, lo, hi []K) (*Ranges[K, V], error) {
	if err := lengths("range", len(lo), len(hi)); err != nil {
		return nil, err
	}
	r, err := t.impl.rangeQuery(ctx, lo, hi)
	return r, wrap("range", err)
}

// Ascend returns the pairs in [lo, hi] in key order: a one-query Range.
func (t *Tree[K, V]) Ascend(ctx context.Context, lo, hi K) (iter.Seq2[K, V], error) {
	r, err := t.Range(ctx, []K{lo}, []K{hi})
	if err != nil {
		return nil, err
	}
	return r.Query(0), nil
}

// Apply runs a mixed batch: each element any operation, all in one kernel on
// the GPU, with the semantics of the package documentation ("Mixed batches").
// results must have len(ops) elements.
func (t *Tree[K, V]) Apply(ctx context.Context, ops []Op[K, V], results []Result[K, V]) error {
	if err := lengths("apply", len(ops), len(results)); err != nil {
		return err
	}
	for i, op := range ops {
		if op.Kind > OpCount {
			return fmt.Errorf("btree: apply: %w: op %d has kind %d", warpkit.ErrInvalidArgument, i, op.Kind)
		}
	}
	return wrap("apply", t.impl.apply(ctx, ops, results))
}

// Len returns the number of pairs stored.
func (t *Tree[K, V]) Len(ctx context.Context) (int, error) {
	s, err := t.impl.stats(ctx)
	return s.Keys, wrap("len", err)
}

// Stats returns the tree's size and shape.
func (t *Tree[K, V]) Stats(ctx context.Context) (Stats, error) {
	s, err := t.impl.stats(ctx)
	return s, wrap("stats", err)
}

// Compact rebuilds the tree from its pairs, packing them into fewer nodes
// (deletes never merge nodes): the nodes it frees serve later inserts. The
// pool keeps its size, so Compact returns no device memory; Close the tree
// and build a new one for that. It needs exclusive use of the tree:
// concurrent calls wait for it. Like Build, a device error while it lays the
// tree out in place leaves the tree empty.
func (t *Tree[K, V]) Compact(ctx context.Context) error { return wrap("compact", t.impl.compact(ctx)) }

// Check verifies the tree's structural invariants (sorted leaves, consistent
// side links and high keys, every node reachable from the root exactly once, no
// latch held, the key count). It copies the tree to the host: O(size). On the
// CPU backend it verifies the order of the Go B-tree.
func (t *Tree[K, V]) Check(ctx context.Context) error { return wrap("check", t.impl.check(ctx)) }

// errDeviceOnCPU is returned by the device-resident variants on the CPU backend.
var errDeviceOnCPU = fmt.Errorf("%w: device-resident batches need the CUDA backend", warpkit.ErrInvalidArgument)

// deviceTree returns the GPU implementation or the CPU backend's error.
func (t *Tree[K, V]) deviceTree(op string) (*gpuTree[K, V], error) {
	if t.gpu == nil {
		return nil, fmt.Errorf("btree: %s: %w", op, errDeviceOnCPU)
	}
	return t.gpu, nil
}

// BuildDevice is Build on device-resident pairs. It sorts keys and vals in place.
func (t *Tree[K, V]) BuildDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V]) error {
	g, err := t.deviceTree("build")
	if err != nil {
		return err
	}
	if err := lengths("build", keys.Len(), vals.Len()); err != nil {
		return err
	}
	return wrap("build", g.buildDevice(ctx, keys, vals))
}

// InsertDevice is Insert on device-resident pairs.
func (t *Tree[K, V]) InsertDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V]) error {
	g, err := t.deviceTree("insert")
	if err != nil {
		return err
	}
	if err := lengths("insert", keys.Len(), vals.Len()); err != nil {
		return err
	}
	return wrap("insert", g.insertDevice(ctx, keys, vals))
}

// DeleteDevice is Delete on device-resident keys.
func (t *Tree[K, V]) DeleteDevice(ctx context.Context, keys cuda.Slice[K]) error {
	g, err := t.deviceTree("delete")
	if err != nil {
		return err
	}
	return wrap("delete", g.deleteDevice(ctx, keys))
}

// LookupDevice is Lookup on device-resident buffers; found[i] is 1 or 0.
func (t *Tree[K, V]) LookupDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V], found cuda.Slice[uint8]) error {
	g, err := t.deviceTree("lookup")
	if err != nil {
		return err
	}
	if err := lengths("lookup", keys.Len(), vals.Len(), found.Len()); err != nil {
		return err
	}
	return wrap("lookup", g.lookupDevice(ctx, keys, vals, found))
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
	g, err := t.deviceTree(op)
	if err != nil {
		return err
	}
	if err := lengths(op, keys.Len(), outKeys.Len(), outVals.Len(), found.Len()); err != nil {
		return err
	}
	return wrap(op, g.neighborDevice(ctx, pred, keys, outKeys, outVals, found))
}

// CountDevice is Count on device-resident buffers.
func (t *Tree[K, V]) CountDevice(ctx context.Context, lo, hi cuda.Slice[K], counts cuda.Slice[uint32]) error {
	g, err := t.deviceTree("count")
	if err != nil {
		return err
	}
	if err := lengths("count", lo.Len(), hi.Len(), counts.Len()); err != nil {
		return err
	}
	return wrap("count", g.rangeDevice(ctx, lo, hi, cuda.Slice[uint32]{}, cuda.Slice[K]{}, cuda.Slice[V]{}, counts))
}

// RangeDevice runs range queries on device-resident buffers. Query i writes its
// pairs, in key order, to outKeys/outVals[offsets[i]:offsets[i+1]] (its window;
// len(offsets) = len(lo)+1) and sets counts[i] to the number of keys in [lo[i],
// hi[i]]. When counts[i] exceeds the window, the first window-size pairs were
// written: size windows with CountDevice and a scan for exact results, or use
// fixed windows (offsets[i] = i*L) for bounded ranges.
//
// Every window must lie within outKeys and outVals: offsets[i] <= offsets[i+1]
// <= outKeys.Len() (so the offsets never decrease; an empty window has
// offsets[i] == offsets[i+1]). The kernel checks each query's window: one that
// decreases or passes the end of the buffers is left empty (nothing is written
// for that query, and nothing ever outside the buffers), the other queries'
// windows and every count are written as usual, and the call returns an error
// wrapping ErrInvalidArgument.
func (t *Tree[K, V]) RangeDevice(ctx context.Context, lo, hi cuda.Slice[K], offsets cuda.Slice[uint32], outKeys cuda.Slice[K], outVals cuda.Slice[V], counts cuda.Slice[uint32]) error {
	g, err := t.deviceTree("range")
	if err != nil {
		return err
	}
	if err := lengths("range", lo.Len(), hi.Len(), counts.Len(), offsets.Len()-1); err != nil {
		return err
	}
	if err := lengths("range", outKeys.Len(), outVals.Len()); err != nil {
		return err
	}
	return wrap("range", g.rangeDevice(ctx, lo, hi, offsets, outKeys, outVals, counts))
}

// DeviceOps is a mixed batch in device memory (structure of arrays). Kinds and
// Keys have one element per operation. Vals may be empty (Len 0), and then
// every insert stores the zero value; His may be empty, and then every count
// has the upper bound 0. A field that is not empty has one element per
// operation.
//
// Kinds holds OpKind values. A batch holding a value above OpCount is rejected
// on the device before any of it runs (a small check kernel ahead of the batch
// kernel): ApplyDevice returns an error wrapping ErrInvalidArgument, the tree is
// unchanged and no result is written.
type DeviceOps[K, V warpkit.Word] struct {
	Kinds cuda.Slice[uint8] // OpKind values
	Keys  cuda.Slice[K]
	Vals  cuda.Slice[V]
	His   cuda.Slice[K]
}

// DeviceResults receives a mixed batch's results; any field may be empty (Len
// 0), and then that result is not written (an empty view of a larger buffer
// is left untouched too).
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
	g, err := t.deviceTree("apply")
	if err != nil {
		return err
	}
	n := ops.Kinds.Len()
	if err := lengths("apply", n, ops.Keys.Len()); err != nil {
		return err
	}
	for _, m := range []int{ops.Vals.Len(), ops.His.Len(), res.Found.Len(), res.Keys.Len(), res.Vals.Len(), res.Counts.Len()} {
		if m != 0 && m != n {
			return lengths("apply", n, m)
		}
	}
	return wrap("apply", g.applyDevice(ctx, ops, res))
}
