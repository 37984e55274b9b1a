package slabhash

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/gpurt"
	"github.com/warpkit/warpkit/internal/hostpar"
	"github.com/warpkit/warpkit/slaballoc"
)

// ctrlPoolUsed is the word the host appends after the shared registry's
// (status.cuh, generated into gpurt) in its pinned copy of the control block:
// after a flush, the pool's counter.
const ctrlPoolUsed = gpurt.CtrlWords

// churn is the share of ExpectedSize the pool is provisioned for beyond the
// overflow expected at ExpectedSize: deletes leave tombstones that occupy
// their slots until Compact, so a table that keeps inserting and deleting
// needs more slabs than its live entries do.
const churn = 0.25

// hostChunk is the most elements one staging round trip carries (a
// variable for tests, which shrink it to run many chunks).
var hostChunk = 1 << 20

// maxSlabsPerBucket bounds the pool at this many slabs per bucket list on
// average. The kernels give up on a list after 2^26 slabs (kMaxSteps in
// slabhash.cuh: a find or insert fails with ErrRetryLimit, and a flush that
// gives up leaves that list with entries copied forward and not yet erased,
// that is, duplicates). With the bound a list would have to be 64 times
// longer than the average over a full pool to get there, which hashing does
// not produce short of a corrupted list or keys chosen against the seed. It
// only binds for tables with very few buckets (Options.Buckets).
const maxSlabsPerBucket = 1 << 20

const blockThreads = 256

// gpuTable is the CUDA backend.
type gpuTable[K, V warpkit.Word] struct {
	kind    kind
	geo     geometry
	dev     *cuda.Device
	ownDev  bool
	heads   cuda.Slice[uint8]
	buckets uint32
	seed    uint32
	pool    *slaballoc.Pool
	lanes   chan *lane[K, V]
	all     []*lane[K, V]
	salt    atomic.Uint32
	slots   atomic.Int64 // slots holding entries or tombstones (live + deleted since Compact): what allocation grows with
	reruns  atomic.Int64 // launches rerun after the pool grew
	// mixedInserts is the share of inserts (in thousandths) that the last
	// mixed device batch held, whose ops the host does not see.
	mixedInserts atomic.Int64

	fApply, fFindAll, fSnapshot, fFlush, fScan *cuda.Function
}

// lane is one stream with its control block and staging buffers; a batch
// holds a lane for its duration, so concurrent batches run on different
// streams.
type lane[K, V warpkit.Word] struct {
	stream   *cuda.Stream
	ctrl     cuda.Slice[uint64]
	ctrlHost *cuda.Pinned[uint64]
	// ctrlOut is ctrlHost's device address: an apply launch given it copies
	// the control block there and zeroes ctrl (see launch). ctrlClean says
	// ctrl is known to be zero (left so by such a launch).
	ctrlOut   cuda.DevicePtr
	ctrlClean bool

	// Device buffers of Go-slice batches (grown on demand, freed by
	// gpurt.FreeAll with the lane).
	dKeys   gpurt.Buf[K]
	dVals   gpurt.Buf[V]
	dOps    gpurt.Buf[uint8]
	dRes    gpurt.Buf[uint8]
	dCounts gpurt.Buf[uint32]
	// host holds two sets of pinned staging buffers, kept across calls: a
	// batch of Go slices alternates between them chunk by chunk (apply).
	host [2]hostSet[K, V]
}

func newGPU[K, V warpkit.Word](kd kind, geo geometry, o *Options, dev *cuda.Device, own bool) (*gpuTable[K, V], error) {
	g := &gpuTable[K, V]{kind: kd, geo: geo, dev: dev, ownDev: own, seed: o.Seed}
	fail := func(err error) (*gpuTable[K, V], error) {
		g.ownDev = false // the caller closes the device it opened
		g.close()
		return nil, fmt.Errorf("slabhash: new: %w", err)
	}
	b := o.Buckets
	if b == 0 {
		var err error
		if b, err = geo.bucketsFor(o.ExpectedSize, o.Utilization); err != nil {
			return nil, err
		}
	}
	g.buckets = uint32(b)

	// The pool: super blocks of about half the overflow expected at
	// ExpectedSize, enough of them for the overflow at ExpectedSize plus
	// churn more slots (with a margin), up to 64; growth adds half again.
	over := geo.overflowSlabs(o.ExpectedSize, b)
	overChurn := geo.overflowSlabs(int(float64(o.ExpectedSize)*(1+churn)), b)
	perSuper := max(8, min(slaballoc.MaxBlocksPerSuperBlock, int(over/2/slaballoc.UnitsPerBlock)+1))
	superBytes := int64(perSuper) * slaballoc.UnitsPerBlock * int64(geo.slabBytes)
	maxPool := int64(b) * maxSlabsPerBucket * int64(geo.slabBytes)
	if o.MaxPoolBytes > 0 {
		maxPool = min(maxPool, o.MaxPoolBytes)
	}
	maxSupers := int(min(slaballoc.MaxSuperBlocks, max(1, maxPool/superBytes)))
	if maxPool < superBytes {
		perSuper = max(1, int(maxPool/(slaballoc.UnitsPerBlock*int64(geo.slabBytes))))
	}
	lowWater := perSuper * slaballoc.UnitsPerBlock / 8
	initial := min(maxSupers, max(1, int((overChurn*1.1+float64(lowWater))/float64(perSuper*slaballoc.UnitsPerBlock))+1))
	var err error
	g.pool, err = slaballoc.New(slaballoc.Options{
		Backend: warpkit.CUDA, Device: dev, UnitBytes: geo.slabBytes, BlocksPerSuperBlock: perSuper,
		InitialSuperBlocks: initial, MaxSuperBlocks: maxSupers, LowWater: lowWater,
		Fill: 0xff,
	})
	if err != nil {
		return fail(err)
	}
	if g.heads, err = cuda.Alloc[uint8](dev, b*geo.slabBytes); err != nil {
		return fail(err)
	}
	if err = g.heads.FillBytes(0xff, nil); err != nil {
		return fail(err)
	}
	mod, err := dev.LoadModule(modulePTX(geo.module))
	if err != nil {
		return fail(err)
	}
	for _, f := range []struct {
		dst  **cuda.Function
		name string
	}{
		{&g.fApply, "sh_apply_" + geo.name}, {&g.fFindAll, "sh_findall_" + geo.name},
		{&g.fSnapshot, "sh_snapshot_" + geo.name}, {&g.fFlush, "sh_flush_" + geo.name},
		{&g.fScan, fmt.Sprintf("sh_scan_k%d", sizeOf[K]()*8)},
	} {
		if *f.dst, err = mod.Function(f.name); err != nil {
			return fail(err)
		}
	}
	g.lanes = make(chan *lane[K, V], o.Streams)
	for i := 0; i < o.Streams; i++ {
		ln := &lane[K, V]{}
		g.all = append(g.all, ln)
		if ln.stream, err = dev.NewStream(); err != nil {
			return fail(err)
		}
		if ln.ctrl, err = cuda.Alloc[uint64](dev, gpurt.CtrlWords); err != nil {
			return fail(err)
		}
		if ln.ctrlHost, err = cuda.AllocPinned[uint64](dev, gpurt.CtrlWords+1); err != nil {
			return fail(err)
		}
		if ln.ctrlOut, err = ln.ctrlHost.DevicePtr(); err != nil {
			return fail(err)
		}
		g.lanes <- ln
	}
	if err := dev.Synchronize(); err != nil {
		return fail(err)
	}
	return g, nil
}

func ensurePinned[T cuda.Elem](dev *cuda.Device, p **cuda.Pinned[T], n int) ([]T, error) {
	if *p == nil || (*p).Len() < n {
		if *p != nil {
			(*p).Free()
			*p = nil
		}
		c := 1024
		for c < n {
			c *= 2
		}
		np, err := cuda.AllocPinned[T](dev, c)
		if err != nil {
			return nil, err
		}
		*p = np
	}
	return (*p).Data()[:n], nil
}

// newSlabs estimates the slabs a batch of inserts may allocate: the growth
// of the expected overflow from the slots in use (tombstones included), with
// a margin. The kernel's exhaustion report is the backstop when it is short.
func (g *gpuTable[K, V]) newSlabs(inserts int) int {
	if inserts == 0 {
		return 0
	}
	now := int(g.slots.Load())
	d := g.geo.overflowSlabs(now+inserts, int(g.buckets)) - g.geo.overflowSlabs(now, int(g.buckets))
	return int(d*1.2) + 256
}

// keyCheck says where a batch's keys (and op codes) are checked.
type keyCheck int

const (
	checkedOnHost keyCheck = iota // Go slices: checked before staging
	scanOnDevice                  // device slices: a scan kernel runs first, and the apply kernel applies nothing if it found one
	checkInKernel                 // device slices of finds only: the apply kernel fails the elements with a reserved key (a find changes nothing)
)

// Apply kernel flags (wk::sh::Flags).
const (
	flagRetry     = 1
	flagCheckKeys = 2
)

// launch runs one kernel on ln's stream: it zeroes the control block, runs
// prep (kernels that must come first on the stream; may be nil), takes the
// pool's use lock, launches f, copies the control block back (with
// poolUsed, the pool's counter too, at ctrlPoolUsed), and waits for the
// stream before releasing the lock (the kernel reads the pool's
// descriptor). It waits on every path, so nothing queued on the lane — the
// caller's staging copies included — is in flight when it returns.
//
// With mapped (an apply launch, whose last argument is ln.ctrlOut), the
// kernel's last block copies the control block into the lane's pinned block
// and zeroes it, so the launch needs neither the copy nor (when the block
// is known to be zero) the memset: a small batch costs one launch (two with
// a scan) and one wait. A launch whose last block did not sign off (the
// sentinel in the pinned block stays zero) falls back to the copy.
func (g *gpuTable[K, V]) launch(ln *lane[K, V], prep func() error, f *cuda.Function, grid cuda.Dim3, poolUsed, mapped bool, args ...any) (r launched, err error) {
	s := ln.stream
	if !mapped || !ln.ctrlClean {
		err = ln.ctrl.Zero(s)
	}
	ln.ctrlClean = false // until a mapped launch leaves it zero again
	if err == nil && prep != nil {
		err = prep()
	}
	if err != nil {
		return r, waitAfter(s, err)
	}
	release, err := g.pool.Acquire()
	if err != nil {
		return r, waitAfter(s, err)
	}
	r.supers = g.pool.SuperBlocks() // growth waits for the use lock
	host := ln.ctrlHost.Data()
	if mapped {
		host[gpurt.CtrlDone] = 0 // the last block writes the number of blocks
	}
	err = f.Launch(grid, cuda.D1(blockThreads), 0, s, args...)
	r.ok = err == nil
	if err == nil && !mapped {
		err = cuda.CopyToHostAsync(ln.ctrlHost, 0, ln.ctrl, s)
	}
	if err == nil && poolUsed {
		err = cuda.CopyToHostAsync(ln.ctrlHost, ctrlPoolUsed, g.pool.UsedCounter(), s)
	}
	if werr := gpurt.Wait(s); err == nil {
		err = werr
	}
	if err == nil && mapped {
		if atomic.LoadUint64(&host[gpurt.CtrlDone]) != 0 {
			ln.ctrlClean = true
		} else {
			// No sign-off reached the pinned block (never expected; the
			// kernel signs off on every path): read it the slow way.
			err = cuda.CopyToHostAsync(ln.ctrlHost, 0, ln.ctrl, s)
			if werr := gpurt.Wait(s); err == nil {
				err = werr
			}
		}
	}
	release()
	if err != nil {
		return r, err
	}
	r.ctrl = host
	return r, nil
}

// launched is what launch reports.
type launched struct {
	ok     bool     // the kernel was queued: its outputs were written
	supers int      // the pool's super blocks while it ran
	ctrl   []uint64 // the control block (pinned), copied back after it (nil on error)
}

// waitAfter waits for the stream after err (so that pinned staging buffers
// are no longer in use) and returns err.
func waitAfter(s *cuda.Stream, err error) error {
	if werr := gpurt.Wait(s); werr != nil {
		return fmt.Errorf("%w (and waiting for the stream: %v)", err, werr)
	}
	return err
}

// grid returns the launch grid for a grid-stride kernel over items threads.
func (g *gpuTable[K, V]) grid(f *cuda.Function, items int64) cuda.Dim3 {
	return gpurt.Grid(f, g.dev, items, blockThreads, 2)
}

// exec runs one device batch on ln: the device scan when the contents were
// not checked on the host, the apply kernel, and reruns of the failed
// elements after the pool grew. It returns the change in live entries, the
// number of elements inserted, and whether the apply kernel wrote the
// batch's outputs (false when it failed before its first launch or the scan
// rejected the batch: then nothing was applied and the outputs are as they
// were).
func (g *gpuTable[K, V]) exec(ctx context.Context, ln *lane[K, V], b *devBatch[K, V], inserts int, check keyCheck) (delta, inserted int64, applied bool, err error) {
	n := b.keys.Len()
	slabs := g.newSlabs(inserts)
	if err := g.pool.Reserve(ctx, slabs); err != nil {
		return 0, 0, false, err
	}
	defer g.pool.Unreserve(slabs)
	res := b.res
	if res.Buffer() == nil {
		if res, err = ln.dRes.Get(g.dev, ln.stream, n); err != nil {
			return 0, 0, false, err
		}
	}
	var opsPtr, valsPtr, countsPtr cuda.DevicePtr
	if b.ops.Buffer() != nil {
		opsPtr = b.ops.Ptr()
	}
	if b.vals.Buffer() != nil {
		valsPtr = b.vals.Ptr()
	}
	if b.counts.Buffer() != nil {
		countsPtr = b.counts.Ptr()
	}
	var scan func() error
	if check == scanOnDevice {
		scan = func() error {
			return g.fScan.Launch(g.grid(g.fScan, int64(n)), cuda.D1(blockThreads), 0, ln.stream,
				b.keys, opsPtr, uint32(g.kind.maxOp()), uint64(n), ln.ctrl)
		}
	}
	flags := uint32(0)
	if check == checkInKernel {
		flags = flagCheckKeys
	}
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return delta, inserted, applied, err
		}
		// Every apply launch hands its control block over through the
		// lane's pinned block (see launch), a scanned one too: after a
		// reject the kernel applies nothing but still signs off.
		r, err := g.launch(ln, scan, g.fApply, g.grid(g.fApply, int64(n)), false, true,
			g.heads, g.buckets, g.seed, g.pool.Descriptor(),
			b.keys, valsPtr, opsPtr, uint32(b.op), res, countsPtr, uint64(n), ln.ctrl, flags, g.salt.Add(0x9e3779b9), ln.ctrlOut)
		applied = applied || r.ok
		scan = nil // the keys were checked; reruns skip the scan
		if err != nil {
			return delta, inserted, applied, err
		}
		c := r.ctrl
		status := uint32(c[gpurt.CtrlStatus])
		if c[gpurt.CtrlRejected] != 0 { // the apply kernel saw the scan's reject and wrote nothing
			return 0, 0, false, gpurt.StatusError("device scan", status)
		}
		if status&gpurt.StatusReservedKey != 0 { // a find batch checked in the kernel: nothing changed
			return 0, 0, true, gpurt.StatusError("device batch", status)
		}
		delta += int64(c[gpurt.CtrlDelta])
		inserted += int64(c[gpurt.CtrlInserted])
		g.slots.Add(int64(c[gpurt.CtrlInserted]))
		g.pool.Observe(int64(c[gpurt.CtrlUsed]))
		if status == 0 {
			return delta, inserted, true, nil
		}
		switch {
		case status&gpurt.StatusPoolExhausted != 0:
			if err := g.pool.GrowPast(ctx, r.supers); err != nil {
				return delta, inserted, true, fmt.Errorf("%d elements not applied: %w", c[gpurt.CtrlFailed], err)
			}
		case attempt >= 2 || status&^gpurt.StatusRetryLimit != 0:
			return delta, inserted, true, fmt.Errorf("%d elements not applied: %w", c[gpurt.CtrlFailed], gpurt.StatusError("device", status))
		}
		flags |= flagRetry
		g.reruns.Add(1)
	}
}

// inserts counts the insert elements of a host batch.
func inserts[K, V warpkit.Word](b *batch[K, V]) int {
	if b.ops == nil {
		if b.op == OpInsert {
			return len(b.keys)
		}
		return 0
	}
	n := 0
	for _, o := range b.ops {
		if o == OpInsert {
			n++
		}
	}
	return n
}

func (g *gpuTable[K, V]) apply(ctx context.Context, b *batch[K, V]) (int64, error) {
	ln := <-g.lanes
	defer func() { g.lanes <- ln }()
	n := len(b.keys)
	for i := range min(2, (n+hostChunk-1)/hostChunk) {
		if err := g.reserveHost(&ln.host[i], b, min(n, hostChunk)); err != nil {
			markFailed(b.res, b.counts)
			return 0, err
		}
	}
	// A batch longer than hostChunk runs chunk by chunk on the lane's stream,
	// alternating between its two pinned sets: while chunk i's copies and
	// kernel run on the device, another goroutine copies chunk i-1's outputs
	// out of the other set and chunk i+1's inputs into it.
	g.fill(&ln.host[0], b.sub(0, min(n, hostChunk)))
	var pending *batch[K, V] // a chunk whose outputs wait in pendingSet
	var pendingSet *hostSet[K, V]
	total, err := runChunks(n, hostChunk, b.res, b.counts, func(lo, hi int) (int64, error) {
		hs, other := &ln.host[lo/hostChunk%2], &ln.host[1-lo/hostChunk%2]
		prev, next := pending, (*batch[K, V])(nil)
		if hi < n {
			next = b.sub(hi, min(n, hi+hostChunk))
		}
		var done chan struct{}
		if prev != nil || next != nil {
			done = make(chan struct{})
			go func() {
				defer close(done)
				if prev != nil {
					g.drain(other, prev)
				}
				if next != nil {
					g.fill(other, next)
				}
			}()
		}
		part := b.sub(lo, hi)
		delta, outputs, err := g.runChunk(ctx, ln, hs, part)
		if done != nil {
			<-done
		}
		pending, pendingSet = nil, nil
		if outputs {
			pending, pendingSet = part, hs
		}
		return delta, err
	})
	if pending != nil { // the last chunk that ran (runChunks may stop early)
		g.drain(pendingSet, pending)
	}
	return total, err
}

// hostSet is one set of a lane's pinned staging buffers: a chunk's inputs
// and outputs on the host side.
type hostSet[K, V warpkit.Word] struct {
	keys   *cuda.Pinned[K]
	vals   *cuda.Pinned[V]
	ops    *cuda.Pinned[uint8]
	res    *cuda.Pinned[uint8]
	counts *cuda.Pinned[uint32]
}

func (hs *hostSet[K, V]) free() error {
	var errs []error
	for _, p := range []interface{ Free() error }{hs.keys, hs.vals, hs.ops, hs.res, hs.counts} {
		if err := p.Free(); !errors.Is(err, warpkit.ErrClosed) { // nil: never grown
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// reserveHost makes hs hold chunks of n elements of b's shape. The buffers
// are kept for later calls.
func (g *gpuTable[K, V]) reserveHost(hs *hostSet[K, V], b *batch[K, V], n int) error {
	if _, err := ensurePinned(g.dev, &hs.keys, n); err != nil {
		return err
	}
	if b.ops != nil {
		if _, err := ensurePinned(g.dev, &hs.ops, n); err != nil {
			return err
		}
	}
	if g.valsIn(b) || g.valsOut(b) {
		if _, err := ensurePinned(g.dev, &hs.vals, n); err != nil {
			return err
		}
	}
	if b.res != nil {
		if _, err := ensurePinned(g.dev, &hs.res, n); err != nil {
			return err
		}
	}
	if b.counts != nil {
		if _, err := ensurePinned(g.dev, &hs.counts, n); err != nil {
			return err
		}
	}
	return nil
}

// fill copies chunk b's inputs into hs (host memory only: no driver call,
// so it may run beside another chunk's device work).
func (g *gpuTable[K, V]) fill(hs *hostSet[K, V], b *batch[K, V]) {
	hostpar.Copy(hs.keys.Data(), b.keys)
	if b.ops != nil {
		hostpar.Copy(hs.ops.Data(), bytesOf(b.ops))
	}
	if g.valsIn(b) {
		hostpar.Copy(hs.vals.Data(), b.vals)
	}
}

// drain copies chunk b's outputs out of hs (host memory only).
func (g *gpuTable[K, V]) drain(hs *hostSet[K, V], b *batch[K, V]) {
	if b.res != nil {
		hostpar.Copy(bytesOf(b.res), hs.res.Data())
	}
	if b.counts != nil {
		hostpar.Copy(b.counts, hs.counts.Data())
	}
	if g.valsOut(b) {
		hv := hs.vals.Data()
		if b.ops == nil {
			hostpar.Copy(b.vals, hv)
			return
		}
		for i := range b.vals {
			if b.ops[i] == OpFind {
				b.vals[i] = hv[i]
			}
		}
	}
}

// bytesOf views a slice of a one-byte code (Op, Result) as its bytes, so
// that staging copies are memmoves rather than loops over elements.
func bytesOf[T ~uint8](s []T) []uint8 {
	return unsafe.Slice((*uint8)(unsafe.Pointer(unsafe.SliceData(s))), len(s))
}

// runChunk runs chunk b, whose inputs fill put in hs: it copies them to the
// lane's device buffers, runs the batch, and copies the outputs into hs
// (also when the kernel reported an error: the results say which elements
// failed), reporting whether it did (then drain them). When it fails before
// the kernel wrote the outputs, nothing of the chunk was applied: it marks
// every element Failed (count 0). Nothing it queued is in flight when it
// returns.
func (g *gpuTable[K, V]) runChunk(ctx context.Context, ln *lane[K, V], hs *hostSet[K, V], b *batch[K, V]) (delta int64, outputs bool, err error) {
	db, err := g.upload(ln, hs, b)
	if err != nil {
		markFailed(b.res, b.counts)
		return 0, false, waitAfter(ln.stream, err)
	}
	delta, _, applied, kerr := g.exec(ctx, ln, &db, inserts(b), checkedOnHost)
	if !applied { // exec returns an error whenever it wrote no outputs
		markFailed(b.res, b.counts)
		return delta, false, waitAfter(ln.stream, kerr)
	}
	if err := g.download(ln, hs, b, &db); err != nil {
		return delta, false, err
	}
	return delta, true, kerr
}

// upload queues the copies of one chunk's inputs from hs to the lane's
// device buffers and returns the device batch that names them.
func (g *gpuTable[K, V]) upload(ln *lane[K, V], hs *hostSet[K, V], b *batch[K, V]) (devBatch[K, V], error) {
	n, s := len(b.keys), ln.stream
	db := devBatch[K, V]{op: b.op}
	var err error
	if db.keys, err = ln.dKeys.Get(g.dev, ln.stream, n); err != nil {
		return db, err
	}
	if err := cuda.CopyToDeviceAsync(db.keys, hs.keys, 0, s); err != nil {
		return db, err
	}
	if b.ops != nil {
		if db.ops, err = ln.dOps.Get(g.dev, ln.stream, n); err != nil {
			return db, err
		}
		if err := cuda.CopyToDeviceAsync(db.ops, hs.ops, 0, s); err != nil {
			return db, err
		}
	}
	if g.valsIn(b) || g.valsOut(b) {
		if db.vals, err = ln.dVals.Get(g.dev, ln.stream, n); err != nil {
			return db, err
		}
		if g.valsIn(b) {
			if err := cuda.CopyToDeviceAsync(db.vals, hs.vals, 0, s); err != nil {
				return db, err
			}
		}
	}
	if db.res, err = ln.dRes.Get(g.dev, ln.stream, n); err != nil {
		return db, err
	}
	if b.counts != nil {
		if db.counts, err = ln.dCounts.Get(g.dev, ln.stream, n); err != nil {
			return db, err
		}
	}
	return db, nil
}

// valsIn and valsOut say whether a host chunk's values go to the device
// (insert values) and come back (values found by a Map).
func (g *gpuTable[K, V]) valsIn(b *batch[K, V]) bool {
	return b.vals != nil && g.kind != kindSet && (b.ops != nil || b.op == OpInsert)
}

func (g *gpuTable[K, V]) valsOut(b *batch[K, V]) bool {
	return b.vals != nil && g.kind == kindMap && (b.ops != nil || b.op == OpFind)
}

// download copies the outputs of db, the device side of chunk b, into hs
// and waits for them.
func (g *gpuTable[K, V]) download(ln *lane[K, V], hs *hostSet[K, V], b *batch[K, V], db *devBatch[K, V]) error {
	s := ln.stream
	if b.res != nil {
		if err := cuda.CopyToHostAsync(hs.res, 0, db.res, s); err != nil {
			return waitAfter(s, err)
		}
	}
	if b.counts != nil {
		if err := cuda.CopyToHostAsync(hs.counts, 0, db.counts, s); err != nil {
			return waitAfter(s, err)
		}
	}
	if g.valsOut(b) {
		if err := cuda.CopyToHostAsync(hs.vals, 0, db.vals, s); err != nil {
			return waitAfter(s, err)
		}
	}
	return gpurt.Wait(s)
}

func (g *gpuTable[K, V]) applyDevice(ctx context.Context, b *devBatch[K, V]) (int64, error) {
	ln := <-g.lanes
	defer func() { g.lanes <- ln }()
	// Reserve for the inserts a batch may hold: all of them for InsertDevice;
	// for a mixed batch, whose ops stay on the device, the share of inserts
	// the last mixed batch had, at least a quarter (if more of them need
	// slabs, the kernel's exhaustion report makes exec grow the pool and
	// rerun just those elements).
	n := b.keys.Len()
	ins := 0
	switch {
	case b.ops.Buffer() != nil:
		ins = max(n/4, int(int64(n)*g.mixedInserts.Load()/1000))
	case b.op == OpInsert:
		ins = n
	}
	check := scanOnDevice
	if b.ops.Buffer() == nil && b.op == OpFind {
		check = checkInKernel
	}
	delta, inserted, _, err := g.exec(ctx, ln, b, ins, check)
	if b.ops.Buffer() != nil && err == nil {
		g.mixedInserts.Store(inserted * 1000 / int64(n))
	}
	return delta, err
}

// findAll counts the values of each key, lays out room for them, gathers
// them, and redoes the keys that grew in between.
func (g *gpuTable[K, V]) findAll(ctx context.Context, keys []K) ([]int, []V, error) {
	ln := <-g.lanes
	defer func() { g.lanes <- ln }()
	per := make([][]V, len(keys))
	todo := make([]int, len(keys))
	for i := range todo {
		todo[i] = i
	}
	for round := 0; len(todo) > 0; round++ {
		if round == 4 {
			return nil, nil, fmt.Errorf("%w: values kept changing during the search", warpkit.ErrRetryLimit)
		}
		var redo []int
		for lo := 0; lo < len(todo); lo += hostChunk {
			idx := todo[lo:min(len(todo), lo+hostChunk)]
			more, err := g.findAllChunk(ctx, ln, keys, idx, per)
			if err != nil {
				return nil, nil, err
			}
			redo = append(redo, more...)
		}
		todo = redo
	}
	offsets := make([]int, len(keys)+1)
	for i, vs := range per {
		offsets[i+1] = offsets[i] + len(vs)
	}
	vals := make([]V, 0, offsets[len(keys)])
	for _, vs := range per {
		vals = append(vals, vs...)
	}
	return offsets, vals, nil
}

func (g *gpuTable[K, V]) findAllChunk(ctx context.Context, ln *lane[K, V], keys []K, idx []int, per [][]V) ([]int, error) {
	n := len(idx)
	s := ln.stream
	hk, err := ensurePinned(g.dev, &ln.host[0].keys, n)
	if err != nil {
		return nil, err
	}
	for j, i := range idx {
		hk[j] = keys[i]
	}
	dk, err := ln.dKeys.Get(g.dev, ln.stream, n)
	if err != nil {
		return nil, err
	}
	dc, err := ln.dCounts.Get(g.dev, ln.stream, n)
	if err != nil {
		return nil, err
	}
	if err := cuda.CopyToDeviceAsync(dk, ln.host[0].keys, 0, s); err != nil {
		return nil, err
	}
	// Pass 1: counts.
	if err := g.launchFindAll(ln, false, dk, cuda.Slice[uint64]{}, cuda.Slice[V]{}, dc); err != nil {
		return nil, err
	}
	counts := make([]uint32, n)
	if err := dc.CopyToHost(counts); err != nil {
		return nil, err
	}
	offs := make([]uint64, n+1)
	for j, c := range counts {
		offs[j+1] = offs[j] + uint64(c)
	}
	total := int(offs[n])
	dOffs, err := cuda.FromHost(g.dev, offs)
	if err != nil {
		return nil, err
	}
	defer dOffs.Free()
	dVals, err := cuda.Alloc[V](g.dev, max(total, 1))
	if err != nil {
		return nil, err
	}
	defer dVals.Free()
	// Pass 2: values (the counts again, which may have grown).
	if err := g.launchFindAll(ln, false, dk, dOffs, dVals, dc); err != nil {
		return nil, err
	}
	got := make([]uint32, n)
	if err := dc.CopyToHost(got); err != nil {
		return nil, err
	}
	vals := make([]V, max(total, 1))
	if err := dVals.CopyToHost(vals); err != nil {
		return nil, err
	}
	var redo []int
	for j, i := range idx {
		room := uint32(offs[j+1] - offs[j])
		if got[j] > room {
			redo = append(redo, i)
			continue
		}
		per[i] = append([]V(nil), vals[offs[j]:offs[j]+uint64(got[j])]...)
	}
	return redo, nil
}

// findAllDevice is the gathering pass of a search-all on the caller's device
// slices (MultiMap.LookupAllDevice): the scan kernel checks the keys, then the
// find-all kernel writes each key's values into its room and its count.
func (g *gpuTable[K, V]) findAllDevice(ctx context.Context, keys cuda.Slice[K], offs cuda.Slice[uint64], vals cuda.Slice[V], counts cuda.Slice[uint32]) error {
	ln := <-g.lanes
	defer func() { g.lanes <- ln }()
	if err := ctx.Err(); err != nil {
		return err
	}
	return g.launchFindAll(ln, true, keys, offs, vals, counts)
}

// statusBadRoom is the find-all kernel's flag for a room outside dst
// (kStatusBadRoom in slabhash.cuh).
const statusBadRoom = 1 << 11

// launchFindAll runs the find-all kernel: with offs the zero Slice it only
// counts; with offs it also stores each key's values, at most
// offs[i+1]-offs[i] of them, at dst[offs[i]:], and fails with
// ErrInvalidArgument where a room lies outside dst (which it leaves
// unwritten; nothing is written outside dst). With scan (device keys the
// host has not checked), the scan kernel runs first; a reserved key then
// fails the call with ErrReservedKey (the outputs are unspecified).
func (g *gpuTable[K, V]) launchFindAll(ln *lane[K, V], scan bool, keys cuda.Slice[K], offs cuda.Slice[uint64], dst cuda.Slice[V], counts cuda.Slice[uint32]) error {
	n := keys.Len()
	var prep func() error
	if scan {
		prep = func() error {
			return g.fScan.Launch(g.grid(g.fScan, int64(n)), cuda.D1(blockThreads), 0, ln.stream,
				keys, cuda.DevicePtr(0), uint32(g.kind.maxOp()), uint64(n), ln.ctrl)
		}
	}
	r, err := g.launch(ln, prep, g.fFindAll, g.grid(g.fFindAll, int64(n)), false, false,
		g.heads, g.buckets, g.seed, g.pool.Descriptor(), keys, offs, dst, uint64(dst.Len()), counts, uint64(n), ln.ctrl)
	if err != nil {
		return err
	}
	status := uint32(r.ctrl[gpurt.CtrlStatus])
	switch {
	case r.ctrl[gpurt.CtrlRejected] != 0:
		return gpurt.StatusError("device scan", status)
	case status&statusBadRoom != 0:
		return fmt.Errorf("%w: find all: offsets that decrease or pass the %d values", warpkit.ErrInvalidArgument, dst.Len())
	}
	return gpurt.StatusError("find all", status)
}

// snapshot counts the live entries, then copies them out. The table lock
// (held by the caller) keeps the count stable.
func (g *gpuTable[K, V]) snapshot(ctx context.Context) ([]K, []V, error) {
	ln := <-g.lanes
	defer func() { g.lanes <- ln }()
	count, err := g.launchSnapshot(ln, cuda.Slice[K]{}, cuda.Slice[V]{}, 0)
	if err != nil {
		return nil, nil, err
	}
	if count == 0 {
		return nil, nil, nil
	}
	dk, err := cuda.Alloc[K](g.dev, count)
	if err != nil {
		return nil, nil, err
	}
	defer dk.Free()
	var dv cuda.Slice[V]
	if g.kind != kindSet {
		if dv, err = cuda.Alloc[V](g.dev, count); err != nil {
			return nil, nil, err
		}
		defer dv.Free()
	}
	again, err := g.launchSnapshot(ln, dk, dv, count)
	if err != nil {
		return nil, nil, err
	}
	if again != count {
		return nil, nil, fmt.Errorf("snapshot found %d entries, then %d", count, again)
	}
	keys, err := dk.ToHost()
	if err != nil {
		return nil, nil, err
	}
	var vals []V
	if g.kind != kindSet {
		if vals, err = dv.ToHost(); err != nil {
			return nil, nil, err
		}
	}
	return keys, vals, nil
}

func (g *gpuTable[K, V]) launchSnapshot(ln *lane[K, V], keys cuda.Slice[K], vals cuda.Slice[V], capacity int) (int, error) {
	r, err := g.launch(ln, nil, g.fSnapshot, g.grid(g.fSnapshot, int64(g.buckets)*int64(g.geo.tile)), false, false,
		g.heads, g.buckets, g.pool.Descriptor(), keys, vals, uint64(capacity), ln.ctrl)
	if err != nil {
		return 0, err
	}
	return int(r.ctrl[gpurt.CtrlCount]), gpurt.StatusError("snapshot", uint32(r.ctrl[gpurt.CtrlStatus]))
}

// flush compacts every list; live is the number of live entries (exact: the
// caller holds the table alone).
func (g *gpuTable[K, V]) flush(ctx context.Context, live int) error {
	ln := <-g.lanes
	defer func() { g.lanes <- ln }()
	r, err := g.launch(ln, nil, g.fFlush, g.grid(g.fFlush, int64(g.buckets)*int64(g.geo.tile)), true, false,
		g.heads, g.buckets, g.pool.Descriptor(), ln.ctrl)
	if err != nil {
		return err
	}
	g.pool.Observe(int64(r.ctrl[ctrlPoolUsed]))
	if err := gpurt.StatusError("flush", uint32(r.ctrl[gpurt.CtrlStatus])); err != nil {
		return err
	}
	g.slots.Store(int64(live)) // the tombstones are gone
	return nil
}

func (g *gpuTable[K, V]) stats(ctx context.Context, n int) (Stats, error) {
	ps, err := g.pool.Stats(ctx)
	if err != nil {
		return Stats{}, err
	}
	mem := (int64(g.buckets) + ps.Allocated) * int64(g.geo.slabBytes)
	return Stats{
		Layout:  fmt.Sprintf("%s (%d-byte slabs, %d entries, %d-lane tiles)", g.geo.layout, g.geo.slabBytes, g.geo.slots, g.geo.tile),
		Buckets: int(g.buckets), SlabBytes: g.geo.slabBytes, PoolSlabs: ps.Allocated, MemoryBytes: mem,
		Utilization:  float64(n) * float64(g.geo.entryBytes) / float64(mem),
		PoolCapacity: ps.Capacity, PoolGrowths: ps.Growths, Reruns: g.reruns.Load(),
		Tombstones: g.slots.Load() - int64(n),
	}, nil
}

func (g *gpuTable[K, V]) close() error {
	var first error
	keep := func(err error) {
		if err != nil && first == nil && !errors.Is(err, warpkit.ErrClosed) {
			first = err
		}
	}
	for _, ln := range g.all {
		if ln.stream != nil {
			keep(ln.stream.Close())
		}
		// Zero slices and nil pinned buffers (never grown) free as no-ops or ErrClosed.
		gpurt.FreeAll(ln) // the device buffers of Go-slice batches
		for _, b := range []interface{ Free() error }{ln.ctrl, ln.ctrlHost} {
			keep(b.Free())
		}
		keep(ln.host[0].free())
		keep(ln.host[1].free())
	}
	g.all = nil
	if g.heads.Buffer() != nil {
		keep(g.heads.Free())
	}
	if g.pool != nil {
		keep(g.pool.Close())
	}
	if g.ownDev {
		keep(g.dev.Close())
	}
	return first
}
