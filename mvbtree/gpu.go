package mvbtree

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"math"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/blinknode"
	"github.com/warpkit/warpkit/internal/ebr"
	"github.com/warpkit/warpkit/internal/gpurt"
	"github.com/warpkit/warpkit/prim"
	"github.com/warpkit/warpkit/slaballoc"
)

const (
	defaultStreams   = 4
	defaultPoolBlock = 256     // memory blocks of 1024 nodes per super block without MaxPoolBytes
	retireLogMin     = 1 << 12 // entries of a write batch's retire log, at least
	retireLogMax     = 1 << 22 // and at most (a batch that would unlink more keeps the rest linked)
	regUnknown       = ^uint64(0)
)

// ascendChunk is the pairs an iterator of the CUDA backend fetches at a
// time (tests lower it, so that an iteration spans many chunks of one
// transient snapshot).
var ascendChunk = 4096

// restampLimit is the stamp at which Snapshot renumbers the stamps first
// (tests lower it); stamps are 32-bit, and the limit leaves room for the
// sentinel stampLatest.
var restampLimit uint32 = 1 << 31

// restampFault, set by tests, fails Restamp after its scan of the i-th
// generation when it returns an error (a device error part way).
var restampFault func(i int) error

// poisonFreed makes reclamation overwrite units before it frees them (a
// debug mode of the tests: a reader that reaches a freed version fails its
// checks).
var poisonFreed bool

// validateReads, set by tests, runs every query as queries beside writers
// run (heads read with the seqlock, the generic per-tile walk) even when no
// writer runs.
var validateReads bool

// retireLogCap, set by tests, caps every write batch's retire log, so that
// splices run out of room: versions stay linked, version indexes become
// pass-throughs.
var retireLogCap int

// noPlainWrites, set by tests, has every write batch run the versioning
// kernel (what a batch did before plain batches existed).
var noPlainWrites bool

// forcePlainWrites, set by tests, has every write batch run the plain kernel
// whatever is open or linked: what a plain batch does beside chains it did
// not expect (another lane's, linked while it ran) must keep them intact.
var forcePlainWrites bool

// generation is one bulk-built tree and everything written into it since: its
// own node pool, its root. Build and Compact start a new generation; an older
// one lives while snapshots read it.
type generation struct {
	pool   *slaballoc.Pool
	root   uint32
	ctl    cuda.Slice[uint64] // ctlKeys, ctlVersions
	refs   int                // open snapshots reading it (gpuTree.snapMu)
	latest bool               // the tree's current generation (snapMu)
	dead   bool               // freed (set under gpuTree.mu held exclusively)
	// chains: a write batch that may link versions (or version indexes)
	// behind its heads ran on it; cleared by a Vacuum that leaves none.
	// While it is clear, no head has a chain to splice.
	chains atomic.Bool
	// snapped: a snapshot was taken of it (gpuTree.epochMu), so that under
	// CopyIfStale its nodes may carry stamps older than the batch's.
	snapped bool
	// retired counts units of the pool that are no nodes of the tree:
	// retired units waiting for their free, or never freed (leaked).
	retired atomic.Int64
}

// nodes estimates the tree's nodes in gen, which insert rounds are cut by
// (blinknode.Rounds): the pool's units in use (slaballoc's Observed: as
// last read back, less the units freed since), less the retired ones.
// Counting those, a tree written by CopyAlways batches, a copy retired for
// every node written, looked many times its size, and a large batch into
// it ran in too few rounds.
func (gen *generation) nodes() int {
	return int(max(gen.pool.Observed()-gen.retired.Load(), 0))
}

// retiredLog is what one write batch unlinked: units of gen's pool, freed
// once the launches that ran beside the batch have ended. units is the
// start of buf, a buffer of the tree's logBufs.
type retiredLog struct {
	gen   *generation
	units cuda.Slice[uint32]
	buf   cuda.Slice[uint32]
}

// logBufs keeps the device buffers of freed retired logs for the next
// batches' logs. With snapshots open nearly every write batch retires
// units (each version index a write replaces), and a buffer allocated and
// freed a batch cost a cuMemAlloc and a cuMemFree — which waits for the
// whole device — each time.
type logBufs struct {
	mu   sync.Mutex
	free []cuda.Slice[uint32]
}

const logBufsKept = 8 // buffers logBufs keeps at most

// get returns a buffer of at least n elements.
func (p *logBufs) get(dev *cuda.Device, n int) (cuda.Slice[uint32], error) {
	p.mu.Lock()
	best := -1
	for i, b := range p.free {
		if b.Len() >= n && (best < 0 || b.Len() < p.free[best].Len()) {
			best = i
		}
	}
	if best >= 0 {
		b := p.free[best]
		p.free = slices.Delete(p.free, best, best+1)
		p.mu.Unlock()
		return b, nil
	}
	p.mu.Unlock()
	return cuda.Alloc[uint32](dev, max(n, retireLogMin))
}

// put keeps buffer b for a later get (or frees it when enough are kept).
func (p *logBufs) put(b cuda.Slice[uint32]) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.free) < logBufsKept {
		p.free = append(p.free, b)
		return
	}
	b.Free()
}

func (p *logBufs) freeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, b := range p.free {
		b.Free()
	}
	p.free = nil
}

// lane is a stream with its status word and staging; concurrent batches use
// different lanes.
type lane[K, V warpkit.Word] struct {
	stream  *cuda.Stream
	status  cuda.Slice[uint32]
	back    *cuda.Pinned[uint32] // status, retired count
	backCtl *cuda.Pinned[uint64] // the generation's control words after a write
	stage   gpurt.Staging
	keys    gpurt.Buf[K]
	keys2   gpurt.Buf[K]
	vals    gpurt.Buf[V]
	flags   gpurt.Buf[uint8]
	counts  gpurt.Buf[uint32]
	offs    gpurt.Buf[uint32]
	outK    gpurt.Buf[K] // range results
	outV    gpurt.Buf[V]
	reg     gpurt.Buf[uint32] // the registry of open snapshots as uploaded
	regVer  uint64            // its version (regUnknown: other stamps)
	regN    int
	closes  uint32            // gpuTree.closes when the registry was uploaded
	retire  gpurt.Buf[uint32] // this lane's retire log
	retireN cuda.Slice[uint32]
	scanOut cuda.Slice[uint64]
}

// gpuTree is the CUDA backend: mvbtree.cu's kernels over SlabAlloc pools.
type gpuTree[K, V warpkit.Word] struct {
	dev    *cuda.Device
	ownDev bool
	lay    layout
	k      kernels
	opts   Options
	pool   slaballoc.Options // how each generation's pool is made
	lanes  chan *lane[K, V]
	all    []*lane[K, V]

	// mu: batches hold it shared; Build, Compact, Check, Vacuum, Restamp
	// and Close exclusively (the front also runs those alone, so this is
	// what keeps batches of snapshots, which the front runs beside them,
	// out). epochMu: write batches hold it shared, taking a snapshot
	// exclusively, so that a snapshot never sees part of a batch. Lock
	// order: mu, epochMu, snapMu.
	mu      sync.RWMutex
	epochMu sync.RWMutex
	phase   gpurt.Phase
	ebr     ebr.Epochs[retiredLog]
	logs    logBufs
	cur     *generation // mu
	// broken is set (mu held exclusively) when a Restamp failed part way:
	// some generations' stamps renumbered and others not, no snapshot's
	// view can be trusted, and every later operation returns it.
	broken error

	snapMu sync.Mutex
	gens   []*generation // every live generation, cur included
	// unread are generations whose last snapshot closed: freed by the next
	// holder of mu exclusively (never under a batch, which may use them).
	unread   []*generation
	nUnread  atomic.Int32
	views    map[*gpuView[K, V]]struct{}
	open     map[uint32]int // stamps of open snapshots -> how many
	regVer   uint64         // bumped whenever open changes
	epoch    uint32         // the stamp writes take (epochMu)
	dirty    atomic.Bool    // a batch wrote at epoch since the last snapshot
	restamps uint64
	// closes counts the stamps that left the registry: a version index
	// records it, and a writer of its head need not walk the chain for
	// versions to unlink while it has not changed (mvbtree.cu).
	closes  uint32
	plains  atomic.Int64 // write batches that ran the plain kernels, Plain or PlainCopy (tests)
	copies  atomic.Int64 // of them, those that ran PlainCopy (tests)
	rounds  atomic.Int64 // insert launches past their batch's first (blinknode.Rounds; tests)
	reruns  atomic.Int64 // write batches re-run after their pool ran out (tests)
	retired atomic.Int64 // units waiting in ebr
	leaked  atomic.Int64 // retired units never freed (a log not kept, a free that failed)

	primOnce sync.Once
	prim     *prim.Engine
	primErr  error
}

func newGPU[K, V warpkit.Word](dev *cuda.Device, own bool, opts Options) (*gpuTree[K, V], error) {
	var k K
	var v V
	g := &gpuTree[K, V]{dev: dev, ownDev: own, opts: opts, lay: layoutFor(int(unsafe.Sizeof(k)), int(unsafe.Sizeof(v))),
		views: map[*gpuView[K, V]]struct{}{}, open: map[uint32]int{}, epoch: 1}
	g.pool = poolOptions(dev, g.lay.NodeBytes, opts.MaxPoolBytes)
	var err error
	if g.k, err = loadKernels[K, V](dev, g.lay); err != nil {
		return nil, err
	}
	nl := opts.Streams
	if nl == 0 {
		nl = defaultStreams
	}
	g.lanes = make(chan *lane[K, V], nl)
	fail := func(err error) (*gpuTree[K, V], error) {
		g.free()
		return nil, err
	}
	for range nl {
		l := &lane[K, V]{regVer: regUnknown}
		g.all = append(g.all, l)
		if l.stream, err = dev.NewStream(); err != nil {
			return fail(err)
		}
		if l.status, err = cuda.Alloc[uint32](dev, 1); err != nil {
			return fail(err)
		}
		if l.retireN, err = cuda.Alloc[uint32](dev, 1); err != nil {
			return fail(err)
		}
		if l.scanOut, err = cuda.Alloc[uint64](dev, scanOut); err != nil {
			return fail(err)
		}
		if l.back, err = cuda.AllocPinned[uint32](dev, 2); err != nil {
			return fail(err)
		}
		if l.backCtl, err = cuda.AllocPinned[uint64](dev, ctlWords); err != nil {
			return fail(err)
		}
		g.lanes <- l
	}
	gen, err := g.newGeneration(1)
	if err != nil {
		return fail(err)
	}
	if err := g.writeEmptyRoot(gen); err != nil {
		g.dropGeneration(gen)
		return fail(err)
	}
	g.cur = gen
	gen.latest = true
	g.gens = []*generation{gen}
	return g, nil
}

// poolOptions sizes each generation's SlabAlloc pool: a flat pool (the
// kernels decode node addresses as base + address × node bytes), one unit
// per node;
// without a cap, super blocks of 256 memory blocks (16M nodes at most); with
// MaxPoolBytes, super blocks of a 64th of it (at least one memory block of
// 1024 nodes), so the cap is met to within a super block.
func poolOptions(dev *cuda.Device, unitBytes int, maxBytes int64) slaballoc.Options {
	o := slaballoc.Options{Backend: warpkit.CUDA, Device: dev, UnitBytes: unitBytes, BlocksPerSuperBlock: defaultPoolBlock, Flat: true}
	if maxBytes > 0 {
		units := max(maxBytes/int64(unitBytes), slaballoc.UnitsPerBlock)
		perSuper := (units + slaballoc.MaxSuperBlocks - 1) / slaballoc.MaxSuperBlocks
		o.BlocksPerSuperBlock = int(min((perSuper+slaballoc.UnitsPerBlock-1)/slaballoc.UnitsPerBlock, slaballoc.MaxBlocksPerSuperBlock))
		o.MaxSuperBlocks = int(max(1, min(units/(int64(o.BlocksPerSuperBlock)*slaballoc.UnitsPerBlock), slaballoc.MaxSuperBlocks)))
	}
	return o
}

// newGeneration makes an empty generation whose pool holds at least units
// nodes to begin with.
func (g *gpuTree[K, V]) newGeneration(units int) (*generation, error) {
	o := g.pool
	per := o.BlocksPerSuperBlock * slaballoc.UnitsPerBlock
	o.InitialSuperBlocks = max(1, (units+units/4+per-1)/per)
	maxSupers := o.MaxSuperBlocks
	if maxSupers == 0 {
		maxSupers = slaballoc.MaxSuperBlocks
	}
	if o.InitialSuperBlocks > maxSupers {
		return nil, fmt.Errorf("%w: %d nodes need %d super blocks of %d nodes (at most %d)", warpkit.ErrPoolExhausted, units, o.InitialSuperBlocks, per, maxSupers)
	}
	p, err := slaballoc.New(o)
	if err != nil {
		return nil, err
	}
	gen := &generation{pool: p}
	if gen.ctl, err = cuda.Alloc[uint64](g.dev, ctlWords); err != nil {
		p.Close()
		return nil, err
	}
	if err := gen.ctl.Zero(nil); err != nil {
		gen.ctl.Free()
		p.Close()
		return nil, err
	}
	return gen, nil
}

// dropGeneration frees a generation nothing reads any more.
func (g *gpuTree[K, V]) dropGeneration(gen *generation) {
	if gen.dead {
		return
	}
	gen.dead = true
	gen.pool.Close()
	gen.ctl.Free()
}

// writeEmptyRoot makes gen's tree one empty leaf.
func (g *gpuTree[K, V]) writeEmptyRoot(gen *generation) error {
	ctx := context.Background()
	a := []uint32{slaballoc.Null}
	if err := gen.pool.Allocate(ctx, a); err != nil {
		return err
	}
	b := make([]byte, g.lay.NodeBytes)
	g.lay.Encode(b, &hostNode{Link: addrNone, Prev: addrNone})
	if err := gen.pool.WriteUnit(ctx, a[0], b); err != nil {
		return err
	}
	gen.root = a[0]
	return nil
}

func (g *gpuTree[K, V]) free() {
	for _, l := range g.all {
		l.stream.Close()
		for _, s := range []cuda.Slice[uint32]{l.status, l.retireN} {
			if s.Buffer() != nil {
				s.Free()
			}
		}
		if l.scanOut.Buffer() != nil {
			l.scanOut.Free()
		}
		if l.back != nil {
			l.back.Free()
		}
		if l.backCtl != nil {
			l.backCtl.Free()
		}
		gpurt.FreeAll(l)
	}
	g.all = nil
	for _, it := range g.ebr.Drain() {
		it.buf.Free()
	}
	g.logs.freeAll()
	for _, gen := range g.gens {
		g.dropGeneration(gen)
	}
	g.gens = nil
	g.dropUnreadLocked()
	if g.prim != nil {
		g.prim.Close()
	}
	if g.ownDev {
		g.dev.Close()
		g.ownDev = false
	}
}

func (g *gpuTree[K, V]) close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.free()
	return nil
}

// ---- reclamation ------------------------------------------------------------

// reclaim frees the retired units no launch can reach any more. A freed
// unit goes back to its generation's pool, where any later launch may
// allocate it.
func (g *gpuTree[K, V]) reclaim(ctx context.Context, all bool) error {
	var items []retiredLog
	if all {
		items = g.ebr.Drain()
	} else {
		items = g.ebr.Reclaim()
	}
	var first error
	for _, it := range items {
		if err := g.freeRetired(ctx, it); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// freeRetired frees one retired log's units into their pool (nothing when the
// generation is gone) and the log. Units it could not free stay allocated
// and are counted leaked: never reused while a reader could reach them.
// The caller holds mu (shared or exclusively): no generation is freed meanwhile.
func (g *gpuTree[K, V]) freeRetired(ctx context.Context, it retiredLog) error {
	n := it.units.Len()
	g.retired.Add(-int64(n))
	var err error
	if !it.gen.dead {
		if err = g.freeUnits(ctx, it.gen, it.units); err != nil {
			g.leaked.Add(int64(n)) // (and stay it.gen.retired: allocated, no nodes)
		} else {
			it.gen.retired.Add(-int64(n))
		}
	}
	g.logs.put(it.buf)
	return err
}

// dropUnreadLocked frees the generations no snapshot reads any more; mu is
// held exclusively.
func (g *gpuTree[K, V]) dropUnreadLocked() {
	g.snapMu.Lock()
	unread := g.unread
	g.unread = nil
	g.nUnread.Store(0)
	g.snapMu.Unlock()
	for _, gen := range unread {
		g.dropGeneration(gen)
	}
}

// dropUnread frees the unread generations now, unless a batch or an
// exclusive operation holds mu (whose holder, or the next, does it).
func (g *gpuTree[K, V]) dropUnread() {
	if g.nUnread.Load() == 0 || !g.mu.TryLock() {
		return
	}
	g.dropUnreadLocked()
	g.mu.Unlock()
}

// lockExclusive takes mu exclusively for Build, Compact, Check, Vacuum and
// Restamp: it frees the unread generations and fails on a broken tree.
func (g *gpuTree[K, V]) lockExclusive() error {
	g.mu.Lock()
	g.dropUnreadLocked()
	if g.broken != nil {
		g.mu.Unlock()
		return g.broken
	}
	return nil
}

// lockShared takes mu shared for a batch, failing on a broken tree.
func (g *gpuTree[K, V]) lockShared() error {
	g.mu.RLock()
	if g.broken != nil {
		g.mu.RUnlock()
		return g.broken
	}
	return nil
}

// takeLane waits for a free lane, or for ctx.
func (g *gpuTree[K, V]) takeLane(ctx context.Context) (*lane[K, V], error) {
	select {
	case l := <-g.lanes:
		return l, nil
	default:
	}
	select {
	case l := <-g.lanes:
		return l, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// freeUnits returns units to gen's pool (poisoning them first in the tests'
// debug mode). A unit that is not allocated is a double free: an error.
func (g *gpuTree[K, V]) freeUnits(ctx context.Context, gen *generation, units cuda.Slice[uint32]) error {
	if poisonFreed {
		release, err := gen.pool.Acquire()
		if err != nil {
			return err
		}
		err = g.k.poison.Launch(nil, units.Len(), gen.pool.Descriptor(), units, uint64(units.Len()))
		if err == nil {
			err = g.dev.Synchronize()
		}
		release()
		if err != nil {
			return err
		}
	}
	if err := gen.pool.FreeDevice(ctx, units); err != nil {
		return fmt.Errorf("freeing unlinked versions: %w", err)
	}
	return nil
}

// ---- snapshots and the registry ------------------------------------------------

// registry returns the open snapshots' stamps on the lane's device buffer,
// uploading them when they changed since the lane's last upload.
func (g *gpuTree[K, V]) registry(l *lane[K, V]) (cuda.Slice[uint32], int, error) {
	g.snapMu.Lock()
	ver, closes := g.regVer, g.closes
	var stamps []uint32
	if ver != l.regVer {
		stamps = slices.Sorted(maps.Keys(g.open))
	}
	g.snapMu.Unlock()
	if ver == l.regVer {
		return l.reg.View(l.regN), l.regN, nil
	}
	if len(stamps) > 0 {
		d, err := l.reg.Get(g.dev, l.stream, len(stamps))
		if err != nil {
			return cuda.Slice[uint32]{}, 0, err
		}
		if err := l.stage.Reserve(g.dev, gpurt.Bytes[uint32](len(stamps))); err != nil {
			return cuda.Slice[uint32]{}, 0, err
		}
		if err := gpurt.Upload(&l.stage, l.stream, d, stamps); err != nil {
			return cuda.Slice[uint32]{}, 0, err
		}
		if err := l.stream.Synchronize(); err != nil { // the staging is reused
			return cuda.Slice[uint32]{}, 0, err
		}
	}
	l.regVer, l.regN, l.closes = ver, len(stamps), closes
	return l.reg.View(l.regN), l.regN, nil
}

// gpuView is a snapshot: a stamp in a generation.
type gpuView[K, V warpkit.Word] struct {
	g     *gpuTree[K, V]
	gen   *generation
	stamp uint32 // g.snapMu (Restamp renumbers it)
}

// snapshot registers a snapshot of the latest version. It waits for the
// write batches in flight; the next write batch takes a new stamp.
func (g *gpuTree[K, V]) snapshot(ctx context.Context) (view[K, V], error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := g.lockShared(); err != nil {
			return nil, err
		}
		g.epochMu.Lock()
		if g.dirty.Load() && g.epoch+1 >= restampLimit && g.restampHelps() {
			g.epochMu.Unlock()
			g.mu.RUnlock()
			if err := g.restamp(ctx); err != nil {
				return nil, err
			}
			continue
		}
		g.snapMu.Lock()
		stamp := g.epoch - 1 // nothing was written at epoch yet
		if g.dirty.Load() {
			stamp = g.epoch
			g.epoch++
			g.dirty.Store(false)
		}
		g.cur.snapped = true
		v := &gpuView[K, V]{g: g, gen: g.cur, stamp: stamp}
		g.open[stamp]++
		g.regVer++
		g.cur.refs++
		g.views[v] = struct{}{}
		g.snapMu.Unlock()
		g.epochMu.Unlock()
		g.mu.RUnlock()
		return v, nil
	}
}

// restampHelps says whether Restamp would lower the epoch: it renumbers
// the stamps to 1 + the open snapshots' distinct stamps.
func (g *gpuTree[K, V]) restampHelps() bool {
	g.snapMu.Lock()
	defer g.snapMu.Unlock()
	return uint64(len(g.open))+2 < uint64(g.epoch)
}

func (v *gpuView[K, V]) release() error {
	g := v.g
	if v.unpin() {
		g.dropUnread() // after snapMu is released (lock order: mu before snapMu)
	}
	return nil
}

// unpin drops the view from the registry; it reports whether its generation
// is left unread (no snapshot reads it, and it is not the latest).
func (v *gpuView[K, V]) unpin() bool {
	g := v.g
	g.snapMu.Lock()
	defer g.snapMu.Unlock()
	if _, ok := g.views[v]; !ok {
		return false
	}
	delete(g.views, v)
	if g.open[v.stamp]--; g.open[v.stamp] <= 0 {
		delete(g.open, v.stamp)
		g.closes++ // versions only it saw may be unlinked now
	}
	g.regVer++
	v.gen.refs--
	if v.gen.latest || v.gen.refs > 0 {
		return false
	}
	// No snapshot reads this generation any more; it is freed by the next
	// holder of mu exclusively (a Vacuum, Check or Stats beside this Close
	// may still be scanning it under mu).
	g.gens = slices.DeleteFunc(g.gens, func(x *generation) bool { return x == v.gen })
	g.unread = append(g.unread, v.gen)
	g.nUnread.Add(1)
	return true
}

// at returns the view's generation and stamp.
func (v *gpuView[K, V]) at() (*generation, uint32) {
	v.g.snapMu.Lock()
	defer v.g.snapMu.Unlock()
	return v.gen, v.stamp
}

// ---- batches -------------------------------------------------------------------

// query runs a read of one version on a free lane: run enqueues the
// kernels (and the downloads of their results, which finish completes once
// the stream is synchronized). v nil: the latest version.
func (g *gpuTree[K, V]) query(ctx context.Context, v *gpuView[K, V],
	run func(l *lane[K, V], gen *generation, at uint32, validated bool) (finish func(), err error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := g.lockShared(); err != nil {
		return err
	}
	defer g.mu.RUnlock()
	gen, at := g.cur, uint32(stampLatest)
	if v != nil {
		gen, at = v.at()
	}
	l, err := g.takeLane(ctx)
	if err != nil {
		return err
	}
	defer func() { g.lanes <- l }()
	fast := g.phase.BeginQuery()
	defer g.phase.EndQuery(fast)
	release, err := gen.pool.Acquire()
	if err != nil {
		return err
	}
	defer release()
	if err := l.status.Zero(l.stream); err != nil {
		return err
	}
	tok := g.ebr.Begin()
	finish, err := run(l, gen, at, !fast || validateReads)
	if err == nil {
		err = cuda.CopyToHostAsync(l.back, 0, l.status, l.stream)
	}
	if serr := l.stream.Synchronize(); err == nil {
		err = serr
	}
	g.ebr.End(tok)
	if err != nil {
		return err
	}
	if finish != nil {
		finish()
	}
	return statusErr(l.back.Data()[0])
}

// write runs a write batch: stage puts its inputs on the lane (once), launch
// runs the kernel with the batch's stamp, the registry and the retire log.
// A batch that runs out of nodes is re-run after its pool grew (inserts and
// deletes are idempotent, and a re-run at the same stamp changes in place
// what the first run copied). An insert batch (grows) that is large against
// the tree runs in rounds (blinknode.Rounds: the pool's units in use, as
// last read back, estimate the tree's nodes).
func (g *gpuTree[K, V]) write(ctx context.Context, n int, grows bool, stage func(l *lane[K, V]) error, launch launchWrite[K, V]) error {
	if n == 0 {
		return ctx.Err()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := g.lockShared(); err != nil {
		return err
	}
	defer g.mu.RUnlock()
	g.epochMu.RLock()
	defer g.epochMu.RUnlock()
	l, err := g.takeLane(ctx)
	if err != nil {
		return err
	}
	defer func() { g.lanes <- l }()
	g.dirty.Store(true)
	gen, w := g.cur, g.epoch
	g.phase.BeginWrite()
	defer g.phase.EndWrite()
	if err := g.reclaim(ctx, false); err != nil {
		return err
	}
	if err := stage(l); err != nil {
		return err
	}
	kind := g.writeKind(gen)
	var reg, log cuda.Slice[uint32]
	nreg := 0
	if kind == writeVersioning {
		var err error
		if reg, nreg, err = g.registry(l); err != nil {
			return err
		}
		gen.chains.Store(true) // before the launch: see writeKind
	} else {
		g.plains.Add(1)
		if kind == writeCopy {
			g.copies.Add(1)
		}
	}
	if kind != writePlain {
		logCap := min(max(retireLogMin, 2*n), retireLogMax)
		if retireLogCap > 0 {
			logCap = retireLogCap
		}
		var err error
		if log, err = l.retire.Get(g.dev, l.stream, logCap); err != nil {
			return err
		}
	}
	need := n/4 + 64
	switch {
	case kind == writeVersioning && (nreg > 0 || g.opts.Copy != CopyWhenPinned):
		need += 2 * n // a copy per node written, linked until a later write splices it
	case kind == writeCopy:
		// A copy per node written, retired by the batch (Plain copies
		// none): the leaf of every operation, and for inserts the node and
		// parent of every split (up to n/4 of them, as above). With n
		// alone, a 2^20 batch into a tree of 8K nodes, which splits ~120K
		// times, ran its pool out and failed slowly (76 ms) before its
		// re-run (1 ms). Deletes split nothing.
		need += n
		if grows {
			need += n / 2
		}
	}
	if uint32(nreg) >= g.indexMin() {
		need += n // and a version index
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		// Growing ahead only saves re-runs: when the device cannot hold
		// more, the batch runs in the pool there is and its exhaustion
		// decides.
		reserved := need
		if err := gen.pool.Reserve(ctx, need); err != nil {
			if !errors.Is(err, warpkit.ErrOutOfMemory) {
				return err
			}
			reserved = 0 // a failed Reserve leaves nothing to end
		}
		supers := gen.pool.SuperBlocks()
		ends := []int{n}
		if grows {
			ends = blinknode.Rounds(n, gen.nodes())
		}
		st, err := g.runWrite(l, gen, w, kind, reg, nreg, log, need, ends, launch)
		gen.pool.Unreserve(reserved)
		if err != nil {
			return err
		}
		if st&gpurt.StatusPoolExhausted == 0 {
			return statusErr(st)
		}
		g.reruns.Add(1)
		if err := gen.pool.GrowPast(ctx, supers); err != nil {
			return err
		}
	}
}

// writeKind is the kernel a write batch runs (gpuTree.writeKind decides).
type writeKind uint8

const (
	// writeVersioning: the versioning kernels (mvbtree.cu's MV versioner):
	// the open snapshots' registry, the copy rule, splices, a retire log.
	writeVersioning writeKind = iota
	// writePlain: the plain kernels (Plain), which copy and unlink nothing.
	writePlain
	// writeCopy: the plain kernels under CopyAlways (PlainCopy): a copy of
	// every node written, retired unlinked into a retire log.
	writeCopy
)

// writeKind says which kernels a write batch on gen runs, under epochMu
// read-locked (no snapshot can be taken until it ends). The plain ones
// (Plain, PlainCopy), which link and unlink nothing, when no snapshot is
// open, so that no version needs a copy a reader could reach (under
// CopyIfStale, none was taken of gen either: every node carries the batch's
// stamp, or the empty root's 0), and no batch that may link versions has
// run on gen since the last Vacuum that left none, so that no head has a
// chain for a writer to splice — the plain kernels would leave it for
// Vacuum. A batch that may link versions sets gen.chains before its launch;
// a plain batch that decided before that and runs beside it keeps the
// chains it meets (it stamps the head in place and leaves prev). Under
// CopyAlways the plain batch still copies every node it writes, as the
// thesis's VoB does, and retires the copies.
func (g *gpuTree[K, V]) writeKind(gen *generation) writeKind {
	var plain bool
	switch {
	case forcePlainWrites:
		plain = true
	case noPlainWrites || gen.chains.Load() || (g.opts.Copy == CopyIfStale && gen.snapped):
		plain = false
	default:
		g.snapMu.Lock()
		plain = len(g.open) == 0
		g.snapMu.Unlock()
	}
	switch {
	case !plain:
		return writeVersioning
	case g.opts.Copy == CopyAlways:
		return writeCopy
	}
	return writePlain
}

// launchWrite launches a write batch of kind on l: the plain kernels (with
// a retire log for writeCopy), or the versioning ones with the open
// snapshots' registry (nreg stamps) and a retire log, for the batch's
// elements [lo, hi): an insert batch that is large against the tree runs in
// rounds (blinknode.Rounds), a launch each, with one stamp, status word and
// retire log.
type launchWrite[K, V warpkit.Word] func(l *lane[K, V], gen *generation, w uint32, kind writeKind, reg cuda.Slice[uint32], nreg int, log cuda.Slice[uint32], lo, hi int) error

// runWrite is the launches of a write batch (its rounds: ends) and what
// follows them: the status, the control words and the retire log, handed
// to the reclamation. While the batch runs, the pool prepares the super
// blocks a next batch that reserves ahead units would need (slaballoc's
// Prepare: the growth that follows then only publishes them).
func (g *gpuTree[K, V]) runWrite(l *lane[K, V], gen *generation, w uint32, kind writeKind, reg cuda.Slice[uint32], nreg int, log cuda.Slice[uint32],
	ahead int, ends []int, launch launchWrite[K, V]) (uint32, error) {
	release, err := gen.pool.Acquire()
	if err != nil {
		return 0, err
	}
	defer release()
	if err := l.status.Zero(l.stream); err != nil {
		return 0, err
	}
	if kind != writePlain {
		if err := l.retireN.Zero(l.stream); err != nil {
			return 0, err
		}
	}
	tok := g.ebr.Begin()
	for i, lo := 0, 0; i < len(ends) && err == nil; i++ {
		err, lo = launch(l, gen, w, kind, reg, nreg, log, lo, ends[i]), ends[i]
	}
	g.rounds.Add(int64(len(ends) - 1))
	if err == nil {
		err = cuda.CopyToHostAsync(l.back, 0, l.status, l.stream)
	}
	if err == nil && kind != writePlain {
		err = cuda.CopyToHostAsync(l.back, 1, l.retireN, l.stream)
	}
	if err == nil { // the pool's allocated count, for its estimate of what is free
		err = cuda.CopyToHostAsync(l.backCtl, 0, gen.pool.UsedCounter(), l.stream)
	}
	if err == nil {
		// Best-effort: a failure to prepare is met again, and reported, by
		// the growth itself.
		_ = gen.pool.Prepare(context.Background(), ahead)
	}
	if serr := l.stream.Synchronize(); err == nil {
		err = serr
	}
	if err == nil {
		gen.pool.Observe(int64(l.backCtl.Data()[0]))
	}
	var items []retiredLog
	if err == nil && kind != writePlain {
		if n := int(min(l.back.Data()[1], uint32(log.Len()))); n > 0 {
			var buf cuda.Slice[uint32]
			if buf, err = g.logs.get(g.dev, n); err == nil {
				units := buf.Sub(0, n)
				if err = units.CopyFrom(log.Sub(0, n)); err == nil {
					items = append(items, retiredLog{gen: gen, units: units, buf: buf})
					g.retired.Add(int64(n))
					gen.retired.Add(int64(n))
				} else {
					g.logs.put(buf)
				}
			}
			if err != nil {
				// A log that could not be kept leaks its units (never
				// reused unsafely), counted in Stats.ReclaimLeaked.
				g.leaked.Add(int64(n))
				gen.retired.Add(int64(n))
			}
		}
	}
	g.ebr.End(tok, items...)
	if err != nil {
		return 0, err
	}
	return l.back.Data()[0], nil
}

func boolArg(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// ---- writes ---------------------------------------------------------------------

func (g *gpuTree[K, V]) mode() uint32 { return uint32(g.opts.Copy) }

// indexMin is the open snapshots at which writers index version chains
// (never with Options.NoVersionIndexes).
func (g *gpuTree[K, V]) indexMin() uint32 {
	if g.opts.NoVersionIndexes {
		return math.MaxUint32
	}
	return indexMin - 1
}

func (g *gpuTree[K, V]) insertWith(ctx context.Context, n int, stage func(l *lane[K, V]) (cuda.Slice[K], cuda.Slice[V], error)) error {
	var keys cuda.Slice[K]
	var vals cuda.Slice[V]
	return g.write(ctx, n, true, func(l *lane[K, V]) (err error) {
		keys, vals, err = stage(l)
		return err
	}, func(l *lane[K, V], gen *generation, w uint32, kind writeKind, reg cuda.Slice[uint32], nreg int, log cuda.Slice[uint32], lo, hi int) error {
		keys, vals, n := keys.Sub(lo, hi), vals.Sub(lo, hi), hi-lo
		switch kind {
		case writePlain:
			return g.k.insertPlain.Launch(l.stream, n, gen.pool.Descriptor(), gen.root, gen.ctl, l.status, w, keys, vals, uint64(n))
		case writeCopy:
			return g.k.insertCopy.Launch(l.stream, n, gen.pool.Descriptor(), gen.root, gen.ctl, l.status, w,
				log, uint32(log.Len()), l.retireN, keys, vals, uint64(n))
		}
		return g.k.insert.Launch(l.stream, n, gen.pool.Descriptor(), gen.root, gen.ctl, l.status, w, g.mode(), g.indexMin(), l.closes,
			reg, uint32(nreg), log, uint32(log.Len()), l.retireN, keys, vals, uint64(n))
	})
}

func (g *gpuTree[K, V]) deleteWith(ctx context.Context, n int, stage func(l *lane[K, V]) (cuda.Slice[K], error)) error {
	var keys cuda.Slice[K]
	return g.write(ctx, n, false, func(l *lane[K, V]) (err error) {
		keys, err = stage(l)
		return err
	}, func(l *lane[K, V], gen *generation, w uint32, kind writeKind, reg cuda.Slice[uint32], nreg int, log cuda.Slice[uint32], _, _ int) error {
		switch kind {
		case writePlain:
			return g.k.delPlain.Launch(l.stream, n, gen.pool.Descriptor(), gen.root, gen.ctl, l.status, w, keys, uint64(n))
		case writeCopy:
			return g.k.delCopy.Launch(l.stream, n, gen.pool.Descriptor(), gen.root, gen.ctl, l.status, w,
				log, uint32(log.Len()), l.retireN, keys, uint64(n))
		}
		return g.k.del.Launch(l.stream, n, gen.pool.Descriptor(), gen.root, gen.ctl, l.status, w, g.mode(), g.indexMin(), l.closes,
			reg, uint32(nreg), log, uint32(log.Len()), l.retireN, keys, uint64(n))
	})
}

// upload stages src on the lane into buf (synchronously complete before the
// staging is reused).
func upload[T cuda.Elem](g interface{ device() *cuda.Device }, l interface {
	staging() (*gpurt.Staging, *cuda.Stream)
}, buf *gpurt.Buf[T], src []T) (cuda.Slice[T], error) {
	st, stream := l.staging()
	d, err := buf.Get(g.device(), stream, len(src))
	if err != nil || len(src) == 0 {
		return d, err
	}
	if err := st.Reserve(g.device(), gpurt.Bytes[T](len(src))); err != nil {
		return d, err
	}
	if err := gpurt.Upload(st, stream, d, src); err != nil {
		return d, err
	}
	return d, stream.Synchronize()
}

func (g *gpuTree[K, V]) device() *cuda.Device { return g.dev }

func (l *lane[K, V]) staging() (*gpurt.Staging, *cuda.Stream) { return &l.stage, l.stream }

func (g *gpuTree[K, V]) insert(ctx context.Context, keys []K, vals []V) error {
	return g.insertWith(ctx, len(keys), func(l *lane[K, V]) (cuda.Slice[K], cuda.Slice[V], error) {
		dk, err := upload(g, l, &l.keys, keys)
		if err != nil {
			return dk, cuda.Slice[V]{}, err
		}
		dv, err := upload(g, l, &l.vals, vals)
		return dk, dv, err
	})
}

func (g *gpuTree[K, V]) insertDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V]) error {
	return g.insertWith(ctx, keys.Len(), func(*lane[K, V]) (cuda.Slice[K], cuda.Slice[V], error) { return keys, vals, nil })
}

func (g *gpuTree[K, V]) delete(ctx context.Context, keys []K) error {
	return g.deleteWith(ctx, len(keys), func(l *lane[K, V]) (cuda.Slice[K], error) { return upload(g, l, &l.keys, keys) })
}

func (g *gpuTree[K, V]) deleteDevice(ctx context.Context, keys cuda.Slice[K]) error {
	return g.deleteWith(ctx, keys.Len(), func(*lane[K, V]) (cuda.Slice[K], error) { return keys, nil })
}

// ---- queries ---------------------------------------------------------------------

// reader returns the queries of the latest version (v nil) or a snapshot's.
type gpuReader[K, V warpkit.Word] struct {
	g *gpuTree[K, V]
	v *gpuView[K, V]
}

func (g *gpuTree[K, V]) latest() reader[K, V] { return gpuReader[K, V]{g: g} }

func (r gpuReader[K, V]) lookupDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V], found cuda.Slice[uint8]) error {
	n := keys.Len()
	if n == 0 {
		return ctx.Err()
	}
	g := r.g
	return g.query(ctx, r.v, func(l *lane[K, V], gen *generation, at uint32, validated bool) (func(), error) {
		return nil, g.launchLookup(l, gen, at, validated, keys, vals, found)
	})
}

func (r gpuReader[K, V]) neighborDevice(ctx context.Context, pred bool, keys, outKeys cuda.Slice[K], outVals cuda.Slice[V], found cuda.Slice[uint8]) error {
	n := keys.Len()
	if n == 0 {
		return ctx.Err()
	}
	g := r.g
	return g.query(ctx, r.v, func(l *lane[K, V], gen *generation, at uint32, validated bool) (func(), error) {
		return nil, g.launchNeighbor(l, gen, at, validated, pred, keys, outKeys, outVals, found)
	})
}

func (r gpuReader[K, V]) rangeDevice(ctx context.Context, lo, hi cuda.Slice[K], offsets cuda.Slice[uint32], outKeys cuda.Slice[K], outVals cuda.Slice[V], counts cuda.Slice[uint32]) error {
	n := lo.Len()
	if n == 0 {
		return ctx.Err()
	}
	if r.v == nil { // the latest version's ranges run on a transient snapshot
		return r.g.transient(ctx, func(t gpuReader[K, V]) error {
			return t.rangeDevice(ctx, lo, hi, offsets, outKeys, outVals, counts)
		})
	}
	g := r.g
	return g.query(ctx, r.v, func(l *lane[K, V], gen *generation, at uint32, validated bool) (func(), error) {
		return nil, g.launchRange(l, gen, at, validated, lo, hi, n, offsets, outKeys.Len(), outKeys, outVals, counts)
	})
}

// countDevice counts without collecting (the latest version's counts are
// btree's: not linearizable, each key seen as it was or is).
func (r gpuReader[K, V]) countDevice(ctx context.Context, lo, hi cuda.Slice[K], counts cuda.Slice[uint32]) error {
	n := lo.Len()
	if n == 0 {
		return ctx.Err()
	}
	g := r.g
	return g.query(ctx, r.v, func(l *lane[K, V], gen *generation, at uint32, validated bool) (func(), error) {
		return nil, g.launchRange(l, gen, at, validated, lo, hi, n, cuda.Slice[uint32]{}, 0, cuda.Slice[K]{}, cuda.Slice[V]{}, counts)
	})
}

// launchLookup enqueues a lookup batch: with no writer beside it, in
// lockstep waves (of a snapshot: walking each node's chain to its stamp);
// otherwise one query per tile.
func (g *gpuTree[K, V]) launchLookup(l *lane[K, V], gen *generation, at uint32, validated bool, keys cuda.Slice[K], vals cuda.Slice[V], found cuda.Slice[uint8]) error {
	n := keys.Len()
	if !validated {
		return g.k.phasedLookup.Launch(l.stream, n, gen.pool.Descriptor(), gen.root, l.status, at, keys, uint64(n), vals, found)
	}
	return g.k.lookup.Launch(l.stream, n, gen.pool.Descriptor(), gen.root, l.status, at, boolArg(validated), keys, uint64(n), vals, found)
}

func (g *gpuTree[K, V]) launchNeighbor(l *lane[K, V], gen *generation, at uint32, validated, pred bool, keys, outKeys cuda.Slice[K], outVals cuda.Slice[V], found cuda.Slice[uint8]) error {
	n := keys.Len()
	if !validated {
		return g.k.phasedNeighbor.Launch(l.stream, n, gen.pool.Descriptor(), gen.root, l.status, at, keys, uint64(n), boolArg(pred), outKeys, outVals, found)
	}
	return g.k.neighbor.Launch(l.stream, n, gen.pool.Descriptor(), gen.root, l.status, at, boolArg(validated),
		keys, uint64(n), boolArg(pred), outKeys, outVals, found)
}

// launchRange enqueues a range batch (counts only without offsets), in
// lockstep waves when no writer runs beside it.
func (g *gpuTree[K, V]) launchRange(l *lane[K, V], gen *generation, at uint32, validated bool, lo, hi cuda.Slice[K], n int,
	offsets cuda.Slice[uint32], outLen int, outKeys cuda.Slice[K], outVals cuda.Slice[V], counts cuda.Slice[uint32]) error {
	if !validated {
		return g.k.phasedRange.Launch(l.stream, n, gen.pool.Descriptor(), gen.root, l.status, at, lo, hi, uint64(n), offsets, uint64(outLen), outKeys, outVals, counts)
	}
	return g.k.rng.Launch(l.stream, n, gen.pool.Descriptor(), gen.root, l.status, at, boolArg(validated),
		lo, hi, uint64(n), offsets, uint64(outLen), outKeys, outVals, counts)
}

// transient runs f on a snapshot of the latest version taken for it.
func (g *gpuTree[K, V]) transient(ctx context.Context, f func(r gpuReader[K, V]) error) error {
	v, err := g.snapshot(ctx)
	if err != nil {
		return err
	}
	gv := v.(*gpuView[K, V])
	defer gv.release()
	return f(gpuReader[K, V]{g: g, v: gv})
}

// pointQuery runs a point-query batch from Go slices on one lane: keys are
// uploaded, run enqueues the kernel with device buffers for the results,
// which are downloaded into found, outVals and (when not nil) outKeys.
func (r gpuReader[K, V]) pointQuery(ctx context.Context, keys, outKeys []K, outVals []V, found []bool,
	run func(l *lane[K, V], gen *generation, at uint32, validated bool, dk, ok cuda.Slice[K], dv cuda.Slice[V], df cuda.Slice[uint8]) error) error {
	n := len(keys)
	if n == 0 {
		return ctx.Err()
	}
	g := r.g
	flags := make([]uint8, n)
	return g.query(ctx, r.v, func(l *lane[K, V], gen *generation, at uint32, validated bool) (func(), error) {
		total := 2*gpurt.Bytes[K](n) + gpurt.Bytes[V](n) + gpurt.Bytes[uint8](n)
		if err := l.stage.Reserve(g.dev, total); err != nil {
			return nil, err
		}
		dk, err := l.keys.Get(g.dev, l.stream, n)
		if err != nil {
			return nil, err
		}
		if err := gpurt.Upload(&l.stage, l.stream, dk, keys); err != nil {
			return nil, err
		}
		var ok cuda.Slice[K]
		if outKeys != nil {
			if ok, err = l.keys2.Get(g.dev, l.stream, n); err != nil {
				return nil, err
			}
		}
		dv, err := l.vals.Get(g.dev, l.stream, n)
		if err != nil {
			return nil, err
		}
		df, err := l.flags.Get(g.dev, l.stream, n)
		if err != nil {
			return nil, err
		}
		if err := run(l, gen, at, validated, dk, ok, dv, df); err != nil {
			return nil, err
		}
		var pend gpurt.Pendings
		if err := pend.Add(gpurt.Download(&l.stage, l.stream, outVals, dv)); err != nil {
			return nil, err
		}
		if err := pend.Add(gpurt.Download(&l.stage, l.stream, flags, df)); err != nil {
			return nil, err
		}
		if outKeys != nil {
			if err := pend.Add(gpurt.Download(&l.stage, l.stream, outKeys, ok)); err != nil {
				return nil, err
			}
		}
		return func() {
			pend.Finish()
			for i, f := range flags {
				found[i] = f != 0
			}
		}, nil
	})
}

func (r gpuReader[K, V]) lookup(ctx context.Context, keys []K, vals []V, found []bool) error {
	g := r.g
	return r.pointQuery(ctx, keys, nil, vals, found, func(l *lane[K, V], gen *generation, at uint32, validated bool, dk, _ cuda.Slice[K], dv cuda.Slice[V], df cuda.Slice[uint8]) error {
		return g.launchLookup(l, gen, at, validated, dk, dv, df)
	})
}

func (r gpuReader[K, V]) neighbor(ctx context.Context, pred bool, keys, outKeys []K, outVals []V, found []bool) error {
	g := r.g
	return r.pointQuery(ctx, keys, outKeys, outVals, found, func(l *lane[K, V], gen *generation, at uint32, validated bool, dk, ok cuda.Slice[K], dv cuda.Slice[V], df cuda.Slice[uint8]) error {
		return g.launchNeighbor(l, gen, at, validated, pred, dk, ok, dv, df)
	})
}

// rangeRun counts (collect false) or collects the ranges [lo[i], hi[i]) of
// version at into windows sized by counts.
func (r gpuReader[K, V]) count(ctx context.Context, lo, hi []K, counts []uint32) error {
	n := len(lo)
	if n == 0 {
		return ctx.Err()
	}
	g := r.g
	return g.query(ctx, r.v, func(l *lane[K, V], gen *generation, at uint32, validated bool) (func(), error) {
		if err := l.stage.Reserve(g.dev, 2*gpurt.Bytes[K](n)+gpurt.Bytes[uint32](n)); err != nil {
			return nil, err
		}
		dl, dh, dc, err := r.rangeInputs(l, lo, hi)
		if err != nil {
			return nil, err
		}
		if err := g.launchRange(l, gen, at, validated, dl, dh, n, cuda.Slice[uint32]{}, 0, cuda.Slice[K]{}, cuda.Slice[V]{}, dc); err != nil {
			return nil, err
		}
		p, err := gpurt.Download(&l.stage, l.stream, counts, dc)
		return p.Finish, err
	})
}

func (r gpuReader[K, V]) rangeInputs(l *lane[K, V], lo, hi []K) (dl, dh cuda.Slice[K], dc cuda.Slice[uint32], err error) {
	g, n := r.g, len(lo)
	if dl, err = l.keys.Get(g.dev, l.stream, n); err != nil {
		return
	}
	if dh, err = l.keys2.Get(g.dev, l.stream, n); err != nil {
		return
	}
	if dc, err = l.counts.Get(g.dev, l.stream, n); err != nil {
		return
	}
	if err = gpurt.Upload(&l.stage, l.stream, dl, lo); err != nil {
		return
	}
	err = gpurt.Upload(&l.stage, l.stream, dh, hi)
	return
}

// rangeQ counts, sizes each query's window and collects, at one version: a
// snapshot's (the latest version's through a transient snapshot), which no
// writer changes between the two passes.
func (r gpuReader[K, V]) rangeQ(ctx context.Context, lo, hi []K) (*warpkit.Ranges[K, V], error) {
	n := len(lo)
	res := &warpkit.Ranges[K, V]{Offsets: make([]int, n+1)}
	if n == 0 {
		return res, ctx.Err()
	}
	if r.v == nil {
		err := r.g.transient(ctx, func(t gpuReader[K, V]) (err error) {
			res, err = t.rangeQ(ctx, lo, hi)
			return err
		})
		return res, err
	}
	counts := make([]uint32, n)
	if err := r.count(ctx, lo, hi, counts); err != nil {
		return nil, err
	}
	offsets := make([]uint32, n+1)
	total := uint64(0)
	for i, c := range counts {
		offsets[i] = uint32(total)
		res.Offsets[i] = int(total)
		total += uint64(c)
	}
	if total > 1<<32-1 {
		return nil, fmt.Errorf("%w: more than 2^32-1 range results", warpkit.ErrInvalidArgument)
	}
	offsets[n], res.Offsets[n] = uint32(total), int(total)
	res.Keys, res.Vals = make([]K, total), make([]V, total)
	g := r.g
	got := make([]uint32, n)
	err := g.query(ctx, r.v, func(l *lane[K, V], gen *generation, at uint32, validated bool) (func(), error) {
		t := int(total)
		if err := l.stage.Reserve(g.dev, 2*gpurt.Bytes[K](n)+2*gpurt.Bytes[uint32](n+1)+gpurt.Bytes[K](t)+gpurt.Bytes[V](t)); err != nil {
			return nil, err
		}
		dl, dh, dc, err := r.rangeInputs(l, lo, hi)
		if err != nil {
			return nil, err
		}
		do, err := l.offs.Get(g.dev, l.stream, n+1)
		if err != nil {
			return nil, err
		}
		if err := gpurt.Upload(&l.stage, l.stream, do, offsets); err != nil {
			return nil, err
		}
		ok, err := l.outK.Get(g.dev, l.stream, t)
		if err != nil {
			return nil, err
		}
		ov, err := l.outV.Get(g.dev, l.stream, t)
		if err != nil {
			return nil, err
		}
		if err := g.launchRange(l, gen, at, validated, dl, dh, n, do, t, ok, ov, dc); err != nil {
			return nil, err
		}
		var pend gpurt.Pendings
		if err := pend.Add(gpurt.Download(&l.stage, l.stream, got, dc)); err != nil {
			return nil, err
		}
		if err := pend.Add(gpurt.Download(&l.stage, l.stream, res.Keys, ok)); err != nil {
			return nil, err
		}
		if err := pend.Add(gpurt.Download(&l.stage, l.stream, res.Vals, ov)); err != nil {
			return nil, err
		}
		return pend.Finish, nil
	})
	if err != nil {
		return nil, err
	}
	if !slices.Equal(got, counts) {
		return nil, fmt.Errorf("mvbtree: a snapshot's range changed between its count and collect passes (counts %v then %v)", counts[:min(n, 4)], got[:min(n, 4)])
	}
	return res, nil
}

func (r gpuReader[K, V]) length(ctx context.Context) (int, error) {
	if r.v == nil {
		g := r.g
		if err := g.lockShared(); err != nil {
			return 0, err
		}
		defer g.mu.RUnlock()
		var c [ctlWords]uint64
		if err := g.cur.ctl.CopyToHost(c[:]); err != nil {
			return 0, err
		}
		return int(c[ctlKeys]), nil
	}
	// A snapshot's size: count [0, max) and look max up.
	var top K
	top--
	counts := []uint32{0}
	if err := r.count(ctx, []K{0}, []K{top}, counts); err != nil {
		return 0, err
	}
	vals, found := []V{0}, []bool{false}
	if err := r.lookup(ctx, []K{top}, vals, found); err != nil {
		return 0, err
	}
	n := int(counts[0])
	if found[0] {
		n++
	}
	return n, nil
}

// ascend iterates a version in chunks of ascendChunk pairs, each a range
// query of the version: a snapshot's (alive says whether its handle is
// open), or for the latest version a transient snapshot taken when the loop
// starts and released when it ends.
func (r gpuReader[K, V]) ascend(ctx context.Context, lo, hi K, all bool, alive func() bool) iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		if r.v == nil {
			r.g.transient(ctx, func(t gpuReader[K, V]) error {
				t.walk(ctx, lo, hi, all, alive, yield)
				return nil
			})
			return
		}
		r.walk(ctx, lo, hi, all, alive, yield)
	}
}

// walk yields the pairs of [lo, hi) (all: [lo, max]) of the view, fetching
// ascendChunk pairs at a time; it stops at the first error (an iterator has
// no way to report one; the CPU backend's never fails).
func (r gpuReader[K, V]) walk(ctx context.Context, lo, hi K, all bool, alive func() bool, yield func(K, V) bool) {
	var top K
	top--
	end := hi
	if all {
		end = top
	}
	for lo < end {
		if !alive() {
			return
		}
		ks, vs, total, err := r.chunk(ctx, lo, end, ascendChunk)
		if err != nil {
			return
		}
		for i := range ks {
			if !alive() || !yield(ks[i], vs[i]) {
				return
			}
		}
		if total <= uint32(len(ks)) {
			break
		}
		lo = ks[len(ks)-1] + 1 // more than a chunk: go on after its last key
	}
	if all && alive() {
		vals, found := []V{0}, []bool{false}
		if err := r.lookup(ctx, []K{top}, vals, found); err == nil && found[0] && alive() {
			yield(top, vals[0])
		}
	}
}

// chunk returns the first limit pairs of [lo, hi) in the view and how many
// the range holds.
func (r gpuReader[K, V]) chunk(ctx context.Context, lo, hi K, limit int) ([]K, []V, uint32, error) {
	g := r.g
	ks, vs := make([]K, limit), make([]V, limit)
	total := []uint32{0}
	err := g.query(ctx, r.v, func(l *lane[K, V], gen *generation, at uint32, validated bool) (func(), error) {
		if err := l.stage.Reserve(g.dev, 2*gpurt.Bytes[K](1)+2*gpurt.Bytes[uint32](2)+gpurt.Bytes[K](limit)+gpurt.Bytes[V](limit)); err != nil {
			return nil, err
		}
		dl, dh, dc, err := r.rangeInputs(l, []K{lo}, []K{hi})
		if err != nil {
			return nil, err
		}
		do, err := l.offs.Get(g.dev, l.stream, 2)
		if err != nil {
			return nil, err
		}
		if err := gpurt.Upload(&l.stage, l.stream, do, []uint32{0, uint32(limit)}); err != nil {
			return nil, err
		}
		ok, err := l.outK.Get(g.dev, l.stream, limit)
		if err != nil {
			return nil, err
		}
		ov, err := l.outV.Get(g.dev, l.stream, limit)
		if err != nil {
			return nil, err
		}
		if err := g.launchRange(l, gen, at, validated, dl, dh, 1, do, limit, ok, ov, dc); err != nil {
			return nil, err
		}
		var pend gpurt.Pendings
		if err := pend.Add(gpurt.Download(&l.stage, l.stream, total, dc)); err != nil {
			return nil, err
		}
		if err := pend.Add(gpurt.Download(&l.stage, l.stream, ks, ok)); err != nil {
			return nil, err
		}
		if err := pend.Add(gpurt.Download(&l.stage, l.stream, vs, ov)); err != nil {
			return nil, err
		}
		return pend.Finish, nil
	})
	if err != nil {
		return nil, nil, 0, err
	}
	n := min(int(total[0]), limit)
	return ks[:n], vs[:n], total[0], nil
}

// ---- the device methods of a snapshot are the reader's ---------------------------

func (v *gpuView[K, V]) reader() gpuReader[K, V] { return gpuReader[K, V]{g: v.g, v: v} }

func (v *gpuView[K, V]) lookup(ctx context.Context, keys []K, vals []V, found []bool) error {
	return v.reader().lookup(ctx, keys, vals, found)
}

func (v *gpuView[K, V]) neighbor(ctx context.Context, pred bool, keys, outKeys []K, outVals []V, found []bool) error {
	return v.reader().neighbor(ctx, pred, keys, outKeys, outVals, found)
}

func (v *gpuView[K, V]) count(ctx context.Context, lo, hi []K, counts []uint32) error {
	return v.reader().count(ctx, lo, hi, counts)
}

func (v *gpuView[K, V]) rangeQ(ctx context.Context, lo, hi []K) (*warpkit.Ranges[K, V], error) {
	return v.reader().rangeQ(ctx, lo, hi)
}

func (v *gpuView[K, V]) length(ctx context.Context) (int, error) { return v.reader().length(ctx) }

func (v *gpuView[K, V]) ascend(ctx context.Context, lo, hi K, all bool, alive func() bool) iter.Seq2[K, V] {
	return v.reader().ascend(ctx, lo, hi, all, alive)
}

// check verifies the snapshot's version of an older generation (the tree's
// check covers the latest generation's snapshots with one copy of its pool).
func (v *gpuView[K, V]) check(ctx context.Context) error {
	g := v.g
	if err := g.lockShared(); err != nil {
		return err
	}
	defer g.mu.RUnlock()
	gen, at := v.at()
	if gen == g.cur {
		return nil
	}
	get, _, err := g.dump(ctx, gen)
	if err != nil {
		return err
	}
	_, _, _, err = checkVersion(g.lay, get, gen.root, at)
	return err
}

// ---- build and compact ------------------------------------------------------------

func (g *gpuTree[K, V]) primEngine() (*prim.Engine, error) {
	g.primOnce.Do(func() { g.prim, g.primErr = prim.NewEngine(g.dev) })
	return g.prim, g.primErr
}

func (g *gpuTree[K, V]) build(ctx context.Context, keys []K, vals []V) error {
	return g.onDevice(ctx, keys, vals, g.buildDevice)
}

// onDevice runs f on device copies of the pairs (no pairs: an empty tree).
func (g *gpuTree[K, V]) onDevice(ctx context.Context, keys []K, vals []V, f func(context.Context, cuda.Slice[K], cuda.Slice[V]) error) error {
	if len(keys) == 0 {
		return g.install(ctx, cuda.Slice[K]{}, cuda.Slice[V]{})
	}
	dk, err := cuda.FromHost(g.dev, keys)
	if err != nil {
		return err
	}
	defer dk.Free()
	dv, err := cuda.FromHost(g.dev, vals)
	if err != nil {
		return err
	}
	defer dv.Free()
	return f(ctx, dk, dv)
}

// buildDevice sorts the device pairs in place with prim's radix sort, keeps
// the last pair of each key and builds a new generation from them.
func (g *gpuTree[K, V]) buildDevice(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V]) error {
	n := keys.Len()
	if n == 0 {
		return g.install(ctx, cuda.Slice[K]{}, cuda.Slice[V]{})
	}
	eng, err := g.primEngine()
	if err != nil {
		return err
	}
	flags, err := cuda.Alloc[uint8](g.dev, n)
	if err != nil {
		return err
	}
	defer flags.Free()
	uk, err := cuda.Alloc[K](g.dev, n)
	if err != nil {
		return err
	}
	defer uk.Free()
	uv, err := cuda.Alloc[V](g.dev, n)
	if err != nil {
		return err
	}
	defer uv.Free()
	cnt, err := cuda.Alloc[uint32](g.dev, 1)
	if err != nil {
		return err
	}
	defer cnt.Free()
	err = prim.SortPairs(eng, nil, keys, vals, prim.SortOptions{})
	if err == nil {
		err = g.k.markLast.Launch(nil, n, keys, uint64(n), flags)
	}
	if err == nil {
		err = prim.SelectFlaggedPairs(eng, nil, keys, vals, flags, uk, uv, cnt)
	}
	if err == nil {
		err = g.dev.Synchronize()
	}
	if rerr := eng.ReleaseScratch(); err == nil {
		err = rerr
	}
	if err != nil {
		return err
	}
	var m [1]uint32
	if err := cnt.CopyToHost(m[:]); err != nil {
		return err
	}
	return g.install(ctx, uk.Sub(0, int(m[0])), uv.Sub(0, int(m[0])))
}

// install makes a new generation of the sorted, distinct device pairs the
// latest version. The old generation stays while snapshots read it. A
// failure leaves the tree as it was.
func (g *gpuTree[K, V]) install(ctx context.Context, keys cuda.Slice[K], vals cuda.Slice[V]) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := g.lockExclusive(); err != nil {
		return err
	}
	defer g.mu.Unlock()
	g.epochMu.Lock()
	defer g.epochMu.Unlock()
	m := keys.Len()
	p := planBuild(m)
	gen, err := g.newGeneration(p.nodes)
	if err != nil {
		return err
	}
	w := g.epoch
	if err := g.layOut(ctx, gen, p, keys, vals, w); err != nil {
		g.dropGeneration(gen)
		return err
	}
	if err := gen.ctl.CopyFromHost([]uint64{uint64(m), 0}); err != nil {
		g.dropGeneration(gen)
		return err
	}
	g.dirty.Store(true)
	// No launch runs (mu is held): everything retired so far is free to go.
	if err := g.reclaim(ctx, true); err != nil {
		g.dropGeneration(gen)
		return err
	}
	g.snapMu.Lock()
	old := g.cur
	old.latest = false
	gen.latest = true
	g.cur = gen
	g.gens = append(g.gens, gen)
	if old.refs == 0 {
		g.gens = slices.DeleteFunc(g.gens, func(x *generation) bool { return x == old })
		g.dropGeneration(old)
	}
	g.snapMu.Unlock()
	return nil
}

// layOut allocates the plan's nodes in gen's pool and writes them level by
// level (leaves first); the last node is the root.
func (g *gpuTree[K, V]) layOut(ctx context.Context, gen *generation, p buildPlan, keys cuda.Slice[K], vals cuda.Slice[V], w uint32) error {
	addrs, err := cuda.Alloc[uint32](g.dev, p.nodes)
	if err != nil {
		return err
	}
	defer addrs.Free()
	if err := gen.pool.AllocateDeviceBulk(ctx, addrs); err != nil {
		return err
	}
	release, err := gen.pool.Acquire()
	if err != nil {
		return err
	}
	defer release()
	for lv := range p.counts {
		nodes := p.counts[lv]
		childBase, children, childSpan := 0, 0, 0
		if lv > 0 {
			childBase, children, childSpan = p.bases[lv-1], p.counts[lv-1], p.spans[lv-1]
		}
		err := g.k.buildLevel.Launch(nil, nodes, gen.pool.Descriptor(), addrs, keys, vals, uint64(p.m), uint32(lv),
			uint64(p.bases[lv]), uint64(nodes), uint64(childBase), uint64(children), uint32(buildFill), uint32(buildFan),
			uint64(p.spans[lv]), uint64(childSpan), w)
		if err != nil {
			g.dev.Synchronize()
			return err
		}
	}
	if err := g.dev.Synchronize(); err != nil {
		return err
	}
	var root [1]uint32
	if err := addrs.Sub(p.nodes-1, p.nodes).CopyToHost(root[:]); err != nil {
		return err
	}
	gen.root = root[0]
	return nil
}

// compact rebuilds the latest version into a new generation.
func (g *gpuTree[K, V]) compact(ctx context.Context) error {
	var top K
	top--
	r := gpuReader[K, V]{g: g}
	n, err := r.length(ctx)
	if err != nil {
		return err
	}
	res, err := r.rangeQ(ctx, []K{0}, []K{top})
	if err != nil {
		return err
	}
	keys, vals := res.Keys, res.Vals
	if len(keys) < n { // the largest key of K
		v, f := []V{0}, []bool{false}
		if err := r.lookup(ctx, []K{top}, v, f); err != nil {
			return err
		}
		if f[0] {
			keys, vals = append(keys, top), append(vals, v[0])
		}
	}
	return g.onDevice(ctx, keys, vals, g.install) // sorted and distinct already
}

// ---- unit scans: vacuum, restamp, stats ------------------------------------------

// scan runs the unit scan op over gen with the registry stamps (ascending)
// and returns its four counters; the caller holds mu exclusively or shared
// as op needs.
func (g *gpuTree[K, V]) scan(ctx context.Context, gen *generation, op uint32, stamps []uint32, log cuda.Slice[uint32]) ([scanOut]uint64, uint32, error) {
	var out [scanOut]uint64
	l, err := g.takeLane(ctx)
	if err != nil {
		return out, 0, err
	}
	defer func() { g.lanes <- l }()
	reg, err := g.uploadStamps(l, stamps)
	if err != nil {
		return out, 0, err
	}
	release, err := gen.pool.Acquire()
	if err != nil {
		return out, 0, err
	}
	defer release()
	return g.scanOn(l, gen, op, reg, log)
}

// uploadStamps puts stamps on the lane's registry buffer (synchronously).
func (g *gpuTree[K, V]) uploadStamps(l *lane[K, V], stamps []uint32) (cuda.Slice[uint32], error) {
	reg, err := l.reg.Get(g.dev, l.stream, len(stamps))
	if err != nil {
		return reg, err
	}
	l.regVer = regUnknown // the lane's registry buffer now holds these stamps
	if len(stamps) > 0 {
		if err := reg.CopyFromHost(stamps); err != nil {
			return reg, err
		}
	}
	return reg.Sub(0, len(stamps)), nil
}

// scanOn runs the scan on lane l with gen's pool acquired.
func (g *gpuTree[K, V]) scanOn(l *lane[K, V], gen *generation, op uint32, reg, log cuda.Slice[uint32]) ([scanOut]uint64, uint32, error) {
	var out [scanOut]uint64
	if err := l.scanOut.Zero(l.stream); err != nil {
		return out, 0, err
	}
	if err := l.retireN.Zero(l.stream); err != nil {
		return out, 0, err
	}
	units := int(gen.pool.Capacity())
	err := g.k.scan.Launch(l.stream, units, gen.pool.Descriptor(), gen.root, op, reg, uint32(reg.Len()),
		log, uint32(log.Len()), l.retireN, l.scanOut)
	if serr := l.stream.Synchronize(); err == nil {
		err = serr
	}
	if err != nil {
		return out, 0, err
	}
	if err := l.scanOut.CopyToHost(out[:]); err != nil {
		return out, 0, err
	}
	var n [1]uint32
	if err := l.retireN.CopyToHost(n[:]); err != nil {
		return out, 0, err
	}
	return out, n[0], nil
}

// openStamps returns the open snapshots' stamps, ascending.
func (g *gpuTree[K, V]) openStamps() []uint32 {
	g.snapMu.Lock()
	defer g.snapMu.Unlock()
	return slices.Sorted(maps.Keys(g.open))
}

// vacuum splices out of every chain the versions no open snapshot sees and
// frees them at once (no launch runs beside it).
func (g *gpuTree[K, V]) vacuum(ctx context.Context) error {
	if err := g.lockExclusive(); err != nil {
		return err
	}
	defer g.mu.Unlock()
	if err := g.reclaim(ctx, true); err != nil {
		return err
	}
	stamps := g.openStamps()
	g.snapMu.Lock()
	gens := slices.Clone(g.gens)
	g.snapMu.Unlock()
	for _, gen := range gens {
		var c [ctlWords]uint64
		if err := gen.ctl.CopyToHost(c[:]); err != nil {
			return err
		}
		for {
			capacity := int(min(max(c[ctlVersions], 1), retireLogMax))
			log, err := cuda.Alloc[uint32](g.dev, capacity)
			if err != nil {
				return err
			}
			out, n, err := g.scan(ctx, gen, scanVacuum, stamps, log)
			if err == nil && out[3] > 0 {
				err = g.freeUnits(ctx, gen, log.Sub(0, int(out[3])))
			}
			log.Free()
			if err != nil {
				return err
			}
			c[ctlVersions] -= out[3]
			if err := gen.ctl.CopyFromHost(c[:]); err != nil {
				return err
			}
			if uint64(n) <= uint64(capacity) { // every version it found unlinked fit the log
				break
			}
		}
		if c[ctlVersions] == 0 { // no chains left: plain batches may run again (writeKind)
			gen.chains.Store(false)
		}
	}
	return nil
}

// restamp renumbers every stamp to 1 + the number of open snapshots' stamps
// below it (their own become 1, 2, ...), which keeps every snapshot's view:
// ts <= p exactly when the renumbered ts <= the renumbered p.
func (g *gpuTree[K, V]) restamp(ctx context.Context) error {
	if err := g.lockExclusive(); err != nil {
		return err
	}
	defer g.mu.Unlock()
	g.epochMu.Lock()
	defer g.epochMu.Unlock()
	if err := g.reclaim(ctx, true); err != nil {
		return err
	}
	stamps := g.openStamps()
	g.snapMu.Lock()
	gens := slices.Clone(g.gens)
	g.snapMu.Unlock()
	// Everything that can fail for want of memory or a lane comes first;
	// once the first generation is renumbered, a failure leaves stamps
	// the host cannot reconcile: the tree is broken from then on.
	l, err := g.takeLane(ctx)
	if err != nil {
		return err
	}
	defer func() { g.lanes <- l }()
	reg, err := g.uploadStamps(l, stamps)
	if err != nil {
		return err
	}
	for _, gen := range gens {
		release, err := gen.pool.Acquire()
		if err != nil {
			return err
		}
		defer release()
	}
	for i, gen := range gens {
		_, _, err := g.scanOn(l, gen, scanRestamp, reg, cuda.Slice[uint32]{})
		if err == nil && restampFault != nil {
			err = restampFault(i)
		}
		if err != nil {
			g.broken = fmt.Errorf("%w: %w", ErrBroken, err)
			return g.broken
		}
	}
	rank := func(s uint32) uint32 {
		i, _ := slices.BinarySearch(stamps, s)
		return uint32(i) + 1
	}
	g.snapMu.Lock()
	defer g.snapMu.Unlock()
	for v := range g.views {
		v.stamp = rank(v.stamp)
	}
	open := map[uint32]int{}
	for s, n := range g.open {
		open[rank(s)] += n
	}
	g.open = open
	g.regVer++
	// Versions written since the last snapshot, and those stamped between
	// the newest open snapshot and the epoch, now all carry the new epoch:
	// the next snapshot must take it (and move on) to see them.
	g.epoch = uint32(len(stamps)) + 1
	g.dirty.Store(true)
	g.restamps++
	return nil
}

func (g *gpuTree[K, V]) stats(ctx context.Context) (Stats, error) {
	if err := g.lockShared(); err != nil {
		return Stats{}, err
	}
	defer g.mu.RUnlock()
	st := Stats{Backend: warpkit.CUDA}
	gen := g.cur
	var c [ctlWords]uint64
	if err := gen.ctl.CopyToHost(c[:]); err != nil {
		return st, err
	}
	st.Keys = int(c[ctlKeys])
	// The scan reads versions beside write batches: registered as a
	// launch, so that none it can reach is freed and reused under it.
	tok := g.ebr.Begin()
	out, _, err := g.scan(ctx, gen, scanStats, g.openStamps(), cuda.Slice[uint32]{})
	g.ebr.End(tok)
	if err != nil {
		return st, err
	}
	st.Nodes, st.Versions, st.PinnedVersions, st.VersionIndexes = int(out[0]), int(out[1]), int(out[2]), int(out[4])
	root := make([]byte, g.lay.NodeBytes)
	if err := gen.pool.ReadUnit(ctx, gen.root, root); err != nil {
		return st, err
	}
	rn := g.lay.Decode(root)
	st.Height = rn.Level() + 1
	st.RetiredPending = int(g.retired.Load())
	st.ReclaimLeaked = uint64(g.leaked.Load())
	g.epochMu.RLock()
	st.Epoch = uint64(g.epoch)
	g.epochMu.RUnlock()
	g.snapMu.Lock()
	st.Restamps = g.restamps
	for _, x := range g.gens {
		ps, err := x.pool.Stats(ctx)
		if err != nil {
			g.snapMu.Unlock()
			return st, err
		}
		st.PoolBytes += ps.Capacity * int64(ps.UnitBytes)
		if ps.SuperBlocks > 0 { // prepared ahead of a growth (slaballoc's Prepare)
			st.PoolBytes += int64(ps.Prepared) * ps.Capacity / int64(ps.SuperBlocks) * int64(ps.UnitBytes)
		}
	}
	g.snapMu.Unlock()
	return st, nil
}

// ---- check ---------------------------------------------------------------------------

// dump copies gen's pool to the host and returns a node source over it and
// the allocated units.
func (g *gpuTree[K, V]) dump(ctx context.Context, gen *generation) (nodeSource, map[uint32]bool, error) {
	sbs, err := gen.pool.Dump(ctx)
	if err != nil {
		return nil, nil, err
	}
	allocated := map[uint32]bool{}
	for s, sb := range sbs {
		for w, word := range sb.Bitmap {
			for word != 0 {
				b := bits.TrailingZeros32(word)
				word &= word - 1
				allocated[uint32(s)<<24|uint32(w*32+b)] = true
			}
		}
	}
	nb := g.lay.NodeBytes
	get := func(a uint32) (hostNode, error) {
		if !allocated[a] {
			return hostNode{}, fmt.Errorf("address %#x is not an allocated node", a)
		}
		u := int(a & 0xffffff)
		return g.lay.Decode(sbs[a>>24].Units[u*nb : (u+1)*nb]), nil
	}
	return get, allocated, nil
}

// check verifies the latest version (and every open snapshot's version of
// the latest generation), every chain and the pool's accounting.
func (g *gpuTree[K, V]) check(ctx context.Context) error {
	if err := g.lockExclusive(); err != nil {
		return err
	}
	defer g.mu.Unlock()
	gen := g.cur
	get, allocated, err := g.dump(ctx, gen)
	if err != nil {
		return err
	}
	keys, _, heads, err := checkVersion(g.lay, get, gen.root, stampLatest)
	if err != nil {
		return fmt.Errorf("latest version: %w", err)
	}
	var c [ctlWords]uint64
	if err := gen.ctl.CopyToHost(c[:]); err != nil {
		return err
	}
	if uint64(len(keys)) != c[ctlKeys] {
		return fmt.Errorf("the latest version holds %d keys, its counter says %d", len(keys), c[ctlKeys])
	}
	g.epochMu.RLock()
	epoch := g.epoch
	g.epochMu.RUnlock()
	// Chains: every head's older versions, stamps decreasing, each a
	// version (latch bit set), reached once; a version index only first
	// (and then exact) or emptied (a pass-through).
	inChain := map[uint32]bool{}
	for _, h := range heads {
		n, _ := get(h)
		if n.Latched() {
			return fmt.Errorf("head %#x is latched at rest", h)
		}
		if n.TS > epoch {
			return fmt.Errorf("head %#x has stamp %d past the epoch %d", h, n.TS, epoch)
		}
		prevTS := n.TS
		var index *hostNode
		var chain []uint32 // the versions, indexes left out
		for a := n.Prev; a != addrNone; {
			if inChain[a] {
				return fmt.Errorf("version %#x linked twice (from head %#x)", a, h)
			}
			inChain[a] = true
			v, err := get(a)
			if err != nil {
				return fmt.Errorf("head %#x's chain: %w", h, err)
			}
			if !v.Latched() {
				return fmt.Errorf("version %#x of head %#x is not marked a version", a, h)
			}
			if v.TS == stampIndex {
				if a == n.Prev && v.Count() > 0 {
					index = &v
				} else if v.Count() != 0 || v.High != 0 {
					return fmt.Errorf("version index %#x of head %#x is not its first unit but holds %d entries", a, h, v.Count())
				}
				a = v.Prev
				continue
			}
			if v.TS > prevTS {
				return fmt.Errorf("version %#x of head %#x has stamp %d above its newer version's %d", a, h, v.TS, prevTS)
			}
			prevTS = v.TS
			chain = append(chain, a)
			a = v.Prev
		}
		if index != nil {
			if err := checkIndex(g.lay, get, *index, chain); err != nil {
				return fmt.Errorf("head %#x's version index: %w", h, err)
			}
		}
	}
	if uint64(len(inChain)) != c[ctlVersions] {
		return fmt.Errorf("%d versions linked, the counter says %d", len(inChain), c[ctlVersions])
	}
	// Nothing runs (mu is held): what waits for reclamation is freed now,
	// after it is counted.
	pending := 0
	var freeErr error
	for _, it := range g.ebr.Drain() {
		if it.gen == gen {
			pending += it.units.Len()
		}
		if err := g.freeRetired(ctx, it); err != nil && freeErr == nil {
			freeErr = err
		}
	}
	if freeErr != nil {
		return freeErr
	}
	if want := len(heads) + len(inChain) + pending; len(allocated) != want {
		return fmt.Errorf("pool accounting: %d units allocated, %d heads + %d linked versions + %d retired = %d", len(allocated), len(heads), len(inChain), pending, want)
	}
	g.snapMu.Lock()
	var views []*gpuView[K, V]
	for v := range g.views {
		if v.gen == gen {
			views = append(views, v)
		}
	}
	g.snapMu.Unlock()
	for _, v := range views {
		if _, _, _, err := checkVersion(g.lay, get, gen.root, v.stamp); err != nil {
			return fmt.Errorf("the version at stamp %d: %w", v.stamp, err)
		}
	}
	return nil
}
