package graph

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/gpurt"
	"github.com/warpkit/warpkit/internal/hostpar"
	"github.com/warpkit/warpkit/prim"
	"github.com/warpkit/warpkit/slaballoc"
	"github.com/warpkit/warpkit/slabhash"
)

// Slab hash op codes and result codes (wk::sh::Op, wk::sh::Res in
// slabhash.cuh; slabhash.Result has the same numbers).
const (
	opFind   = 0
	opInsert = 1
	opDelete = 2

	resInserted = 2
	resPresent  = 3
	resRemoved  = 4
	resFailed   = 5

	flagRetry = 1 // wk::sh::kFlagRetry
)

// The prep modes (prepUndirected ...) and placeRound are shared.cuh's
// (shared_gen.go).

// vertexWords is the size of a dictionary entry (wk::gr::Vertex) in 32-bit
// words: base, buckets, degree, flags.
const vertexWords = 4

// slotsPerBucket is a bucket's slots (every layout's slab holds 7).
const slotsPerBucket = 7

const gpuBlock = 256

// gpuGraph is the CUDA backend: every vertex's neighbours in a slab hash
// table of its own, the tables' head slabs in one arena and their overflow
// slabs in one slaballoc pool (graph.cu). W is the weight type (struct{} for
// unweighted graphs: set slabs). Batches run one at a time on one stream
// (mu); the front keeps whole-graph operations apart from batches.
type gpuGraph[W any] struct {
	dev                 *cuda.Device
	ownDev              bool
	directed, selfLoops bool
	wbytes              int // weight bytes (0: unweighted)
	slabBytes           int
	seed                uint32
	maxPool             int64
	loadFactor          float64
	rehashChain         float64

	mu     sync.Mutex
	stream *cuda.Stream
	pool   *slaballoc.Pool
	prim   *prim.Engine // made on first use (its kernels take seconds to load)

	nv     int // vertices
	nslabs int // arena buckets in use
	// tableless bounds the vertices without a table (a build gives none to
	// a vertex without entries); while it is positive an insert batch's
	// prep gives its sources tables in claimRoom buckets from claimFirst
	// (counted as used until prep's count is read: see prepCounts).
	tableless             int
	claimFirst, claimRoom int
	lateTables            int          // tables giveTables gave (tests)
	live                  atomic.Int64 // entries (read by Len beside batches)
	selfSkips             uint64

	// A placed batch (insertPlaced): applyLimit points at the count of
	// its elements not placed, which bounds run's apply launches.
	applyLimit cuda.DevicePtr
	placed     int // batches placed (tests)

	arena    cuda.Slice[uint8] // head slabs (capacity: arena.Len()/slabBytes): arenaMem's bytes
	arenaMem gpurt.Region
	dict     cuda.Slice[uint32] // vertexWords per vertex
	gone     cuda.Slice[uint32] // bitmap of vertices being deleted (all zero between calls)
	// lack is a bitmap of the vertices that may have no table, a hint for
	// insert prep's claims (graph.cu: try_claim): written by a build (by
	// gr_buckets, before the steps that may still fail it: a failed build
	// leaves a hint of the graph it did not make), cleared by the claims
	// and the host's tables (giveTables). Only a hint: a set bit on a
	// vertex with a table costs a dictionary read (the bits past a smaller
	// rebuild's vertices may be such when ensure adds them back), a clear
	// bit on one without sends its inserts to the host's fallback.
	lack cuda.Slice[uint32]
	ctrl cuda.Slice[uint64]
	host [gpurt.CtrlWords]uint64
	// ctrlPinned is host memory mapped into the device (ctrlOut): an apply
	// launch's last block copies the control block there and zeroes it
	// (slabhash.cuh: sign_off), so a batch needs neither a copy nor, when
	// ctrlClean says the block is zero, a memset.
	ctrlPinned *cuda.Pinned[uint64]
	ctrlOut    cuda.DevicePtr
	ctrlClean  bool
	// ctrlPlan is the control block of an insert batch's plan (growFor),
	// beside the one that holds prep's counts until the apply launch;
	// ctrlRead is pinned host memory the blocks are read into (ctrl's
	// words, then ctrlPlan's), so a read is one copy queued and one wait.
	ctrlPlan cuda.Slice[uint64]
	// ctrlBoth holds ctrl and then ctrlPlan: one copy reads both, one
	// memset zeroes both.
	ctrlBoth cuda.Slice[uint64]
	ctrlRead *cuda.Pinned[uint64]

	// Scratch of batches (grown on demand; freed by gpurt.FreeAll).
	bSrc, bDst, bIDs  gpurt.Buf[uint32]
	bVals, bVals2     gpurt.Buf[uint8]
	bRes, bRes2, bOut gpurt.Buf[uint8]
	// bPrep holds a prepared batch (prepare) and its repair scratch (res2).
	bPrep  gpurt.Buf[uint64]
	res2   cuda.Slice[uint8]
	bCount gpurt.Buf[uint32] // a build's entries per vertex
	// bCount's first bCountLen counts, at bCountAt, are zero while
	// bCountZero is true (gr_buckets zeroes what it reads), as the plan's
	// are while cntZero is.
	bCountZero      bool
	bCountAt        cuda.DevicePtr
	bCountLen       int
	bBuckets, bBase gpurt.Buf[uint64] // a build's buckets per vertex and their scan
	// sOwner maps arena buckets to vertices (gr_owner) for the kernels that
	// run per bucket; ownerOK says it matches the dictionary (every change
	// of a table's buckets clears it). Built on demand, not kept beside the
	// arena: 4 bytes a bucket the structure does not need between calls.
	sOwner  gpurt.Buf[uint32]
	ownerOK bool
	// The CSR that TriangleCount and ToCSR gather the tables into: offsets,
	// columns, each entry's row, oriented row lengths, per-row cursors (8
	// bytes an entry and 20 a vertex, kept for the next count: a dynamic
	// graph is counted again after every few batches), and the large
	// tables' items of an unweighted graph's gather (gatherWarpBuckets).
	tOff, tItems                 gpurt.Buf[uint64]
	tCols, tRows, tOcnt, tCursor gpurt.Buf[uint32]
	// tcEvents time a triangle count's phases (phaseEvents).
	tcEvents [5]*cuda.Event
	// Rehash's per-mover arrays: the plan's (planScratch) and the move's
	// (moveTables), each carved from one buffer; rCur, the dictionary
	// entries of neighborsDevice.
	rPlan, rMove gpurt.Buf[uint64]
	rCur         gpurt.Buf[uint32]
	// planScratch's per-source counts (cntLen of them at the front of
	// cntBuf, rPlan's buffer) are zero between insert batches
	// (gr_plan_sources zeroes what gr_count_sources counted) while cntZero
	// is true.
	cntZero bool
	cntBuf  *cuda.Buffer
	cntLen  int
	// applies counts the apply launches queued (run): a batch that failed
	// before its first one applied nothing.
	applies uint64
	// The vertices an insert batch gives their first table (giveTables).
	nIDs gpurt.Buf[uint32]

	fPrep, fCheckIDs, fCount, fBuckets, fDict, fDegrees, fMark, fOrient     *cuda.Function
	fMirror, fUndo, fUndone, fTCSorted, fNarrow, fSymmetry, fFailedPattern  *cuda.Function
	fRehashPlan, fRehashDict, fRelease, fGatherTables, fPick, fCountSources *cuda.Function
	fPlanSources, fGatherChunks, fReleaseChunks                             *cuda.Function
	fApply, fGather, fSweep, fReset, fCensus, fFlush, fTC, fOwner           *cuda.Function
	fGatherVertices, fGatherItems                                           *cuda.Function // set slabs only (nil for weighted graphs)
	fClaimTables, fGiveTables, fKept, fLost, fSettle                        *cuda.Function
}

func newGPU[W any](opts Options, dev *cuda.Device, own bool) (*gpuGraph[W], error) {
	g := &gpuGraph[W]{dev: dev, ownDev: own, directed: opts.Directed, selfLoops: opts.AllowSelfLoops,
		seed: 0x9e3779b9, maxPool: opts.MaxPoolBytes, loadFactor: opts.LoadFactor, rehashChain: opts.RehashChain}
	if g.loadFactor == 0 {
		g.loadFactor = DefaultLoadFactor
	}
	fail := func(err error) (*gpuGraph[W], error) {
		g.ownDev = false // the caller closes the device it opened
		g.close()
		return nil, fmt.Errorf("graph: new: %w", err)
	}
	layout := "set"
	switch unsafe.Sizeof(*new(W)) {
	case 0:
		g.slabBytes = 32
	case 4:
		layout, g.wbytes, g.slabBytes = "w32", 4, 64
	case 8:
		layout, g.wbytes, g.slabBytes = "w64", 8, 128
	}
	g.arenaMem.Max = int64(maxBuckets) * int64(g.slabBytes)
	var err error
	if g.stream, err = dev.NewStream(); err != nil {
		return fail(err)
	}
	if g.pool, err = g.newPool(); err != nil {
		return fail(err)
	}
	if g.ctrlBoth, err = cuda.Alloc[uint64](dev, 2*gpurt.CtrlWords); err != nil {
		return fail(err)
	}
	g.ctrl, g.ctrlPlan = g.ctrlBoth.Sub(0, gpurt.CtrlWords), g.ctrlBoth.Sub(gpurt.CtrlWords, 2*gpurt.CtrlWords)
	if g.ctrlPinned, err = cuda.AllocPinned[uint64](dev, gpurt.CtrlWords); err != nil {
		return fail(err)
	}
	if g.ctrlOut, err = g.ctrlPinned.DevicePtr(); err != nil {
		return fail(err)
	}
	if g.ctrlRead, err = cuda.AllocPinned[uint64](dev, 2*gpurt.CtrlWords); err != nil {
		return fail(err)
	}
	mod, err := dev.LoadModule(graphPTX)
	if err != nil {
		return fail(err)
	}
	for _, f := range []struct {
		dst  **cuda.Function
		name string
	}{
		{&g.fPrep, "gr_prep"}, {&g.fCheckIDs, "gr_check_ids"}, {&g.fCount, "gr_count_edges"},
		{&g.fBuckets, "gr_buckets"}, {&g.fClaimTables, "gr_claim_tables"}, {&g.fGiveTables, "gr_give_tables"}, {&g.fDict, "gr_dict"}, {&g.fDegrees, "gr_degrees"}, {&g.fMark, "gr_mark"},
		{&g.fOrient, "gr_orient"}, {&g.fMirror, "gr_mirror"}, {&g.fUndo, "gr_undo"}, {&g.fUndone, "gr_undone"},
		{&g.fTCSorted, "gr_tc_sorted"}, {&g.fNarrow, "gr_narrow"}, {&g.fSymmetry, "gr_symmetry"},
		{&g.fFailedPattern, "gr_failed_pattern"}, {&g.fRehashPlan, "gr_rehash_plan"}, {&g.fRehashDict, "gr_rehash_dict"},
		{&g.fRelease, "gr_release_" + layout}, {&g.fGatherTables, "gr_gather_tables_" + layout}, {&g.fPick, "gr_pick"},
		{&g.fReleaseChunks, "gr_release_chunks_" + layout}, {&g.fGatherChunks, "gr_gather_chunks_" + layout},
		{&g.fCountSources, "gr_count_sources"}, {&g.fPlanSources, "gr_plan_sources"}, {&g.fOwner, "gr_owner"},
		{&g.fApply, "gr_apply_" + layout}, {&g.fGather, "gr_gather_" + layout}, {&g.fSweep, "gr_sweep_" + layout},
		{&g.fReset, "gr_reset_" + layout}, {&g.fCensus, "gr_census_" + layout}, {&g.fFlush, "gr_flush_" + layout},
		{&g.fTC, "gr_tc_" + layout}, {&g.fKept, "gr_kept"}, {&g.fLost, "gr_lost"}, {&g.fSettle, "gr_settle"},
	} {
		if *f.dst, err = mod.Function(f.name); err != nil {
			return fail(err)
		}
	}
	if layout == "set" {
		if g.fGatherVertices, err = mod.Function("gr_gather_set_vertices"); err != nil {
			return fail(err)
		}
		if g.fGatherItems, err = mod.Function("gr_gather_set_items"); err != nil {
			return fail(err)
		}
	}
	if err := g.ensure(opts.VertexCapacity); err != nil {
		return fail(err)
	}
	return g, nil
}

// newPool makes the overflow pool: super blocks of 64 MiB, up to 64 of them
// (or MaxPoolBytes).
func (g *gpuGraph[W]) newPool() (*slaballoc.Pool, error) {
	const superBytes = 64 << 20
	perSuper := superBytes / slaballoc.UnitsPerBlock / g.slabBytes
	maxSupers := slaballoc.MaxSuperBlocks
	if g.maxPool > 0 {
		maxSupers = int(max(1, min(int64(maxSupers), g.maxPool/superBytes)))
		if g.maxPool < superBytes {
			perSuper = max(1, int(g.maxPool/int64(slaballoc.UnitsPerBlock*g.slabBytes)))
		}
	}
	return slaballoc.New(slaballoc.Options{
		Backend: warpkit.CUDA, Device: g.dev, UnitBytes: g.slabBytes, BlocksPerSuperBlock: perSuper,
		InitialSuperBlocks: 1, MaxSuperBlocks: maxSupers, LowWater: perSuper * slaballoc.UnitsPerBlock / 16, Fill: 0xff,
	})
}

func (g *gpuGraph[W]) primEngine() (*prim.Engine, error) {
	if g.prim == nil {
		e, err := prim.NewEngine(g.dev)
		if err != nil {
			return nil, err
		}
		g.prim = e
	}
	return g.prim, nil
}

// launch runs a grid-stride kernel over items threads on the stream.
func (g *gpuGraph[W]) launch(f *cuda.Function, items int64, args ...any) error {
	return f.Launch(gpurt.Grid(f, g.dev, items, gpuBlock, 2), cuda.D1(gpuBlock), 0, g.stream, args...)
}

// tiles is the thread count of a kernel with an 8-lane tile per item.
func tiles(items int) int64 { return int64(items) * 8 }

// readCtrl copies the control block to g.host once the stream's work is
// done (a copy queued on the stream, then one wait).
func (g *gpuGraph[W]) readCtrl() error {
	_, err := g.readBlocks(g.ctrl)
	return err
}

// readPlan is readCtrl that also returns the plan block's words (ctrlPlan),
// read with the same copy and wait (the blocks are adjacent: ctrlBoth).
func (g *gpuGraph[W]) readPlan() (plan [gpurt.CtrlWords]uint64, err error) {
	d, err := g.readBlocks(g.ctrlBoth)
	if err == nil {
		copy(plan[:], d[gpurt.CtrlWords:])
	}
	return plan, err
}

// readBlocks copies src (the control block, or both blocks) into ctrlRead
// once the stream's work is done, and the control block's words to g.host;
// it returns what it read.
func (g *gpuGraph[W]) readBlocks(src cuda.Slice[uint64]) ([]uint64, error) {
	if err := cuda.CopyToHostAsync(g.ctrlRead, 0, src, g.stream); err != nil {
		return nil, waitAfter(g.stream, err)
	}
	if err := gpurt.Wait(g.stream); err != nil {
		return nil, err
	}
	d := g.ctrlRead.Data()
	if len(d) < src.Len() {
		return nil, fmt.Errorf("graph: reading the control block: %w", cuda.ErrClosed)
	}
	copy(g.host[:], d)
	return d[:src.Len()], nil
}

// readApply waits for an apply launch and reads the control block its last
// block handed over through the mapped block (or copies it, should no block
// have signed off).
func (g *gpuGraph[W]) readApply() error {
	if err := gpurt.Wait(g.stream); err != nil {
		return err
	}
	p := g.ctrlPinned.Data()
	if atomic.LoadUint64(&p[gpurt.CtrlDone]) == 0 {
		return g.ctrl.CopyToHost(g.host[:])
	}
	copy(g.host[:], p)
	g.ctrlClean = true
	return nil
}

// zeroCtrl zeroes the control block on the stream (unless an apply launch
// left it zero).
func (g *gpuGraph[W]) zeroCtrl() error {
	if g.ctrlClean {
		g.ctrlClean = false // until an apply launch leaves it zero again
		return nil
	}
	return g.ctrl.Zero(g.stream)
}

func (g *gpuGraph[W]) vals(b *gpurt.Buf[uint8], n int) (cuda.Slice[uint8], error) {
	return b.Get(g.dev, g.stream, max(1, n*g.wbytes))
}

// grow returns a slice of at least n elements holding old's first used
// elements (old freed), the rest filled with the byte fill. On failure it
// returns old, unchanged, with the error: callers assign the result either
// way and keep a valid buffer.
func grow[T cuda.Elem](dev *cuda.Device, s *cuda.Stream, old cuda.Slice[T], used, n int, fill byte) (cuda.Slice[T], error) {
	if old.Buffer() != nil && old.Len() >= n {
		return old, nil
	}
	c := max(n, 1024)
	if old.Buffer() != nil {
		c = max(n, old.Len()+old.Len()/2)
	}
	ns, err := gpurt.GrowCopy(dev, s, old, used, c, fill)
	if err != nil {
		return old, err
	}
	old.Free()
	return ns, nil
}

// maxBuckets bounds the arena: bucket addresses are 32-bit, the top ones
// reserved.
const maxBuckets = 0xFFFFFFF0

// reserveArena makes room for slabs arena buckets in the arena (new room
// all-ones: empty slabs). The arena grows in place (gpurt.Region): no copy,
// no wait, the address kept.
func (g *gpuGraph[W]) reserveArena(slabs int) error {
	if slabs > maxBuckets {
		return fmt.Errorf("%w: %d buckets (the arena addresses 2^32)", warpkit.ErrInvalidArgument, slabs)
	}
	if err := g.arenaMem.Grow(g.dev, g.stream, int64(g.nslabs*g.slabBytes), int64(slabs*g.slabBytes), 0xff); err != nil {
		return err
	}
	g.arena = g.arenaMem.Bytes()
	return nil
}

// owners returns the owner of every arena bucket (the vertex whose table
// holds it, or kOrphan), rebuilt from the dictionary when a table's
// buckets changed since the last call (graph.cu: gr_owner). Queued on the
// stream; the caller holds mu.
func (g *gpuGraph[W]) owners() (cuda.Slice[uint32], error) {
	if g.ownerOK && g.sOwner.Cap() >= g.nslabs {
		return g.sOwner.View(g.nslabs), nil
	}
	o, err := g.sOwner.Get(g.dev, g.stream, g.nslabs)
	if err != nil || g.nslabs == 0 {
		return o, err
	}
	if err := cuda.Fill(o, ^uint32(0), g.stream); err != nil {
		return o, err
	}
	if g.nv > 0 {
		if err := g.launch(g.fOwner, int64(g.nv), g.dict, uint64(g.nv), o); err != nil {
			return o, err
		}
	}
	g.ownerOK = true
	return o, nil
}

// ensure grows the vertex capacity to n: each new vertex gets one bucket.
func (g *gpuGraph[W]) ensure(n int) error {
	if n <= g.nv {
		return nil
	}
	add := n - g.nv
	if err := g.reserveArena(g.nslabs + add); err != nil {
		return err
	}
	var err error
	if g.dict, err = grow(g.dev, g.stream, g.dict, g.nv*vertexWords, n*vertexWords, 0); err != nil {
		return err
	}
	if g.gone, err = grow(g.dev, g.stream, g.gone, (g.nv+31)/32, (n+31)/32, 0); err != nil {
		return err
	}
	if g.lack, err = grow(g.dev, g.stream, g.lack, (g.nv+31)/32, (n+31)/32, 0); err != nil {
		return err
	}
	// One bucket each (gr_dict without buckets given).
	g.ownerOK = false
	if err := g.launch(g.fDict, int64(add), cuda.DevicePtr(0), cuda.DevicePtr(0), uint64(add), uint32(g.nv), uint64(g.nslabs), g.dict, cuda.DevicePtr(0)); err != nil {
		return err
	}
	if err := gpurt.Wait(g.stream); err != nil {
		return err
	}
	g.nv, g.nslabs = n, g.nslabs+add
	return nil
}

// run launches apply over n prepared elements until none is left failed
// for want of pool memory: a launch that exhausts the pool grows it and
// reruns the failed elements (flagRetry). Degrees and the live count move
// only with elements that applied, so reruns keep them exact.
//
// reserve is the overflow slabs the launch may allocate (the pool grows
// ahead for them; the kernel's exhaustion report is the backstop). With
// prepped, prep has just run on the stream and left its counts in the
// control block: the first launch keeps them (applying nothing when prep
// rejected an ID), and run reports the rejects (ErrInvalidArgument) and
// adds the self-loops skipped.
func (g *gpuGraph[W]) run(ctx context.Context, op uint32, src, dst cuda.Slice[uint32], vals cuda.DevicePtr, res cuda.Slice[uint8], n int, flags uint32, reserve int, prepped bool) error {
	if n == 0 {
		if prepped { // nothing to run: read prep's counts
			if err := g.readCtrl(); err != nil {
				return err
			}
			return g.prepCounts(op)
		}
		return nil
	}
	if op == opInsert && reserve > 0 {
		if err := g.pool.Reserve(ctx, reserve); err != nil {
			return err
		}
		defer g.pool.Unreserve(reserve)
	}
	gave := false // giveTables ran
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if attempt > 0 || !prepped {
			if err := g.zeroCtrl(); err != nil {
				return err
			}
		}
		release, err := g.pool.Acquire()
		if err != nil {
			return err
		}
		supers := g.pool.SuperBlocks()
		g.ctrlPinned.Data()[gpurt.CtrlDone] = 0
		items := int64(n)
		if g.applyLimit != 0 {
			// A placed batch's few elements not placed: a grid for
			// an eighth of the batch (a launch's warps take any number
			// of elements; its blocks' sign-offs and scheduling cost
			// luxembourg_osm's build 13 us at a thread an element).
			items = max(1, items/8)
		}
		err = g.launch(g.fApply, items, g.arena, g.seed, g.pool.Descriptor(), g.dict, src, dst, vals, op,
			res, uint64(n), g.ctrl, flags, uint32(attempt)*0x9e3779b9, g.ctrlOut, g.applyLimit)
		if err == nil {
			g.applies++
			err = g.readApply()
		} else {
			err = waitAfter(g.stream, err)
		}
		release()
		if err != nil {
			return err
		}
		if attempt == 0 && prepped {
			if err := g.prepCounts(op); err != nil {
				return err
			}
		}
		c := g.host
		g.live.Add(int64(c[gpurt.CtrlDelta]))
		g.pool.Observe(int64(c[gpurt.CtrlUsed]))
		status := uint32(c[gpurt.CtrlStatus])
		if status == 0 {
			return nil
		}
		if status&gpurt.StatusNoTable != 0 && g.applyLimit != 0 {
			// A placed batch's sources all have tables (the build sized
			// them), and its layout past the limit is another batch's.
			return fmt.Errorf("%d edges not applied: a placed batch met a vertex without a table: %w", c[gpurt.CtrlFailed], gpurt.StatusError("device", status))
		}
		if status&gpurt.StatusNoTable != 0 {
			// Inserts into vertices without a table (a build gives none to
			// a vertex without entries): give each a bucket, rerun them.
			// Once is enough: the rerun finds every table it needs.
			if gave {
				return fmt.Errorf("%d edges not applied: %w", c[gpurt.CtrlFailed], gpurt.StatusError("device", status))
			}
			gave = true
			if err := g.giveTables(src.Sub(0, n), res.Sub(0, n)); err != nil {
				return fmt.Errorf("%d edges not applied: %w", c[gpurt.CtrlFailed], err)
			}
			flags |= flagRetry
			if status &^= gpurt.StatusNoTable; status == 0 {
				continue
			}
		}
		switch {
		case status&gpurt.StatusPoolExhausted != 0:
			if err := g.pool.GrowPast(ctx, supers); err != nil {
				// At the pool's limit a launch can still run short for a
				// moment only: the elements racing to extend one list each
				// take a slab, and all but the one linked are given back
				// (a batch holding many edges of one vertex). Rerun the
				// failed elements while a launch makes progress.
				if errors.Is(err, warpkit.ErrPoolExhausted) && c[gpurt.CtrlInserted] > 0 {
					flags |= flagRetry
					continue
				}
				return fmt.Errorf("%d edges not applied: %w", c[gpurt.CtrlFailed], err)
			}
		case attempt >= 2 || status&^gpurt.StatusRetryLimit != 0:
			return fmt.Errorf("%d edges not applied: %w", c[gpurt.CtrlFailed], gpurt.StatusError("device", status))
		}
		flags |= flagRetry
	}
}

// prepClaims lets insert batches give tables in prep (tests turn it off
// to run every such insert through giveTables).
var prepClaims = true

// per1000 is the build's bucket load in thousandths of an entry a bucket
// (the load factor times a bucket's slots): gr_buckets's and the plans'
// per1000.
func (g *gpuGraph[W]) per1000() uint32 {
	return uint32(math.Round(g.loadFactor * slotsPerBucket * 1000))
}

// fitOne is gr_buckets's fit for a build at per1000 thousandths of an entry
// a bucket: a table of at most a slab's entries takes one bucket at the
// default load factor or denser (one slab holds them without overflow);
// at sparser loads every table is sized as asked.
func (g *gpuGraph[W]) fitOne(per1000 uint32) uint32 {
	if float64(per1000) >= math.Round(DefaultLoadFactor*slotsPerBucket*1000) {
		return slotsPerBucket
	}
	return 0
}

// giveTables gives every vertex without a table (no buckets) that a failed
// insert element of a batch (src, res: kResFailed) starts from one bucket
// at the arena's end (graph.cu: gr_claim_tables, gr_give_tables), queued
// on the stream before the batch's rerun. On failure no vertex changed.
func (g *gpuGraph[W]) giveTables(src cuda.Slice[uint32], res cuda.Slice[uint8]) error {
	n := src.Len()
	ids, err := g.nIDs.Get(g.dev, g.stream, max(1, min(n, g.nv)))
	if err != nil {
		return err
	}
	if err := g.zeroCtrl(); err != nil {
		return err
	}
	if err := g.launch(g.fClaimTables, int64(n), src, res, uint64(n), g.dict, ids, g.ctrl); err != nil {
		return waitAfter(g.stream, err)
	}
	if err := g.readCtrl(); err != nil {
		return err
	}
	k := int(g.host[gpurt.CtrlCount])
	if k == 0 {
		return nil
	}
	first := g.nslabs
	if err := g.reserveArena(first + k); err != nil {
		// Drop the claims: the vertices stay without tables.
		if cerr := g.launch(g.fGiveTables, int64(k), ids, uint64(k), ^uint64(0), g.dict, g.lack); cerr != nil {
			return errors.Join(err, waitAfter(g.stream, cerr))
		}
		return errors.Join(err, gpurt.Wait(g.stream))
	}
	g.ownerOK = false
	if err := g.launch(g.fGiveTables, int64(k), ids, uint64(k), uint64(first), g.dict, g.lack); err != nil {
		return waitAfter(g.stream, err)
	}
	g.nslabs = first + k
	g.tableless = max(0, g.tableless-k)
	g.lateTables += k
	return nil
}

// prepCounts reads prep's counts in g.host: the tables an insert's prep
// gave are counted in the arena (before anything else takes buckets: the
// batch's first apply launch reads the counts), a rejected ID fails the
// batch (nothing was applied), self-loops skipped by an insert are
// counted. Should an error keep the counts from being read, the claimed
// room stays counted as used: empty buckets no table holds, never given
// twice.
func (g *gpuGraph[W]) prepCounts(op uint32) error {
	if g.claimRoom > 0 {
		// The tables prep gave (prepClaim): the buckets past them go back.
		k := min(int(g.host[gpurt.CtrlTables]), g.claimRoom)
		g.nslabs = g.claimFirst + k
		g.tableless = max(0, g.tableless-k)
		g.claimRoom = 0
		if k > 0 {
			g.ownerOK = false
		}
	}
	if r := g.host[gpurt.CtrlRejected]; r != 0 {
		return fmt.Errorf("%w: %d vertex IDs at or past the capacity %d (or reserved)", errRejected, r, g.nv)
	}
	if op == opInsert {
		g.selfSkips += g.host[gpurt.CtrlCount]
	}
	return nil
}

// errRejected is prep's refusal of a device batch: nothing was applied.
var errRejected = fmt.Errorf("%w: a device batch's IDs", warpkit.ErrInvalidArgument)

func waitAfter(s *cuda.Stream, err error) error {
	if werr := gpurt.Wait(s); werr != nil {
		return fmt.Errorf("%w (and waiting for the stream: %v)", err, werr)
	}
	return err
}

// edges runs an edge batch (device arrays of n elements; vals n weights or
// 0) of op insert or delete: prep lays it out (undirected: both
// directions), then apply runs it. res (n) gets each edge's result, that of
// its canonical direction (Failed for those not applied when it fails).
// With check the IDs are checked on the device first (device batches), and
// a bad one applies nothing.
func (g *gpuGraph[W]) edges(ctx context.Context, op uint32, src, dst cuda.Slice[uint32], vals cuda.DevicePtr, res cuda.Slice[uint8], check bool) error {
	return g.edgesReserving(ctx, op, src, dst, vals, res, check, src.Len()/7+256)
}

// edgesReserving is edges with the overflow slabs the pool is to have room
// for (an insert into full tables takes a slab per 7 entries at most; a
// build, into tables sized for it, a few percent of that).
func (g *gpuGraph[W]) edgesReserving(ctx context.Context, op uint32, src, dst cuda.Slice[uint32], vals cuda.DevicePtr, res cuda.Slice[uint8], check bool, reserve int) (err error) {
	n := src.Len()
	if n == 0 {
		return nil
	}
	if res.Buffer() != nil {
		if err := res.FillBytes(resFailed, g.stream); err != nil {
			return waitAfter(g.stream, err)
		}
	}
	undirected := !g.directed
	m := n
	mode := uint32(0)
	if undirected {
		m, mode = 2*n, prepUndirected
	}
	if g.selfLoops {
		mode |= prepSelfLoops
	}
	if check {
		mode |= prepCheckIDs
	}
	if op == opInsert && g.tableless > 0 && prepClaims {
		// Room for a bucket for every vertex without a table that the
		// batch may start from; without it such inserts fail in the apply
		// launch and giveTables serves them.
		room := min(g.tableless, m)
		if g.reserveArena(g.nslabs+room) == nil {
			mode |= prepClaim
			g.claimFirst, g.claimRoom = g.nslabs, room
			g.nslabs += room // until prepCounts learns how many were given
		}
	}
	osrc, odst, ores, err := g.prepare(src, dst, m, mode)
	if err != nil {
		return err
	}
	prepped := true // the first apply launch reads prep's counts (run)
	if op == opInsert && g.rehashChain > 0 {
		// Tables the batch would fill past RehashChain lists move to new
		// buckets first (prep's counts read there, then).
		prepped = false
		if err := g.growFor(ctx, osrc.Sub(0, m), ores.Sub(0, m)); err != nil {
			return err
		}
	}
	err = g.applyPrepared(ctx, op, osrc, odst, vals, ores, n, undirected, reserve, prepped)
	if res.Buffer() != nil { // what applied, failed or not
		cerr := cuda.CopyAsync(res, ores.Sub(0, n), g.stream)
		if werr := gpurt.Wait(g.stream); cerr == nil {
			cerr = werr
		}
		if err == nil {
			err = cerr
		}
	}
	return err
}

// prepare lays a batch (src, dst) out for the apply launches with gr_prep
// (mode; m elements: twice the batch undirected) into one scratch buffer
// (bPrep), beside m bytes for the batch's repair (repairScratch) taken
// before anything applies; prep's counts stay in the control block for the
// first apply launch.
func (g *gpuGraph[W]) prepare(src, dst cuda.Slice[uint32], m int, mode uint32) (osrc, odst cuda.Slice[uint32], ores cuda.Slice[uint8], err error) {
	var l gpurt.Layout
	pSrc := gpurt.Place[uint32](&l, m)
	pDst := gpurt.Place[uint32](&l, m)
	pRes := gpurt.Place[uint8](&l, m)
	pRes2 := gpurt.Place[uint8](&l, m)
	g.res2 = cuda.Slice[uint8]{} // a failed growth frees the buffer it was in
	mem, err := l.Get(&g.bPrep, g.dev, g.stream)
	if err != nil {
		return
	}
	osrc, odst, ores, g.res2 = pSrc.In(mem), pDst.In(mem), pRes.In(mem), pRes2.In(mem)
	if err = g.zeroCtrl(); err != nil {
		return
	}
	n := src.Len()
	first, room := uint64(0), uint64(0)
	if mode&prepClaim != 0 {
		first, room = uint64(g.claimFirst), uint64(g.claimRoom)
	}
	placing := mode&prepPlace != 0
	if placing && mode&(prepCheckIDs|prepClaim) != 0 {
		err = fmt.Errorf("graph: a placed batch with its IDs to check or tables to claim (mode %#x)", mode)
		return
	}
	items := int64(n)
	if placing {
		items = (items + placeRound - 1) / placeRound
	}
	if err = g.launch(g.fPrep, items, src, dst, uint64(n), uint32(g.nv), mode, osrc, odst, ores, g.ctrl, g.dict, g.lack, first, room, g.arena, g.seed, g.placedCount()); err != nil {
		err = waitAfter(g.stream, err)
		return
	}
	if placing {
		g.placed++
	}
	return
}

// applyPrepared applies a prepared batch (prep's layout: n elements, twice
// that undirected). An undirected insert into an unweighted graph runs
// both directions in one launch (insertBoth). Other undirected batches run
// their canonical directions first, then the reverses of the edges that
// changed (gr_mirror): the copies of an edge in the batch, and edges
// already present, add no work. A weighted insert finds, between the two,
// the weight that won in each canonical direction and gives it to the
// reverse, so that both directions of an edge hold one weight even when
// the batch holds the edge twice with different weights. When reverses fail (the pool exhausted), their
// canonical inserts are taken back (gr_undo) and reported Failed, so the
// graph stays symmetric. The reverses and the undo run to their end even
// when ctx is cancelled meanwhile.
func (g *gpuGraph[W]) applyPrepared(ctx context.Context, op uint32, osrc, odst cuda.Slice[uint32], vals cuda.DevicePtr, ores cuda.Slice[uint8], n int, undirected bool, reserve int, prepped bool) error {
	if !undirected {
		return g.run(ctx, op, osrc, odst, vals, ores, n, flagRetry, reserve, prepped)
	}
	if op == opDelete {
		return g.deletePair(ctx, osrc, odst, ores, n)
	}
	if g.wbytes == 0 {
		return g.insertBoth(ctx, osrc, odst, ores, n, reserve, prepped)
	}
	// The recovery's scratch (taken by prepare).
	res2, err := g.repairScratch(n)
	if err != nil {
		return err
	}
	var won cuda.Slice[uint8]
	if g.wbytes > 0 {
		if won, err = g.vals(&g.bVals2, n); err != nil {
			return err
		}
	}
	err = g.run(ctx, op, osrc, odst, vals, ores, n, flagRetry, reserve, prepped)
	if errors.Is(err, errRejected) {
		return err // nothing applied
	}
	// Any other error (the pool or the device out of memory, ctx, a
	// launch) may come after part of the canonical pass applied: the
	// reverses of what did run, and the undo of what they could not.
	keep := uint32(1) << resRemoved
	if op == opInsert {
		keep = 1 << resInserted
		if g.wbytes > 0 {
			keep |= 1 << resPresent // a replaced weight goes to the reverse too
		}
	}
	if lerr := g.launch(g.fMirror, int64(n), ores, uint64(n), keep); lerr != nil {
		return errors.Join(err, waitAfter(g.stream, lerr))
	}
	rctx := context.WithoutCancel(ctx)
	rvals := vals
	if op == opInsert && g.wbytes > 0 {
		if lerr := cuda.CopyAsync(res2, ores.Sub(n, 2*n), g.stream); lerr != nil {
			return errors.Join(err, waitAfter(g.stream, lerr))
		}
		if lerr := g.run(rctx, opFind, osrc, odst, won.Ptr(), res2, n, flagRetry, 0, false); lerr != nil {
			return errors.Join(err, lerr)
		}
		rvals = won.Ptr()
	}
	rerr := g.run(rctx, op, osrc.Sub(n, 2*n), odst.Sub(n, 2*n), rvals, ores.Sub(n, 2*n), n, flagRetry, reserve, false)
	if rerr == nil || op != opInsert {
		return errors.Join(err, rerr)
	}
	// Take back the canonical inserts whose reverse failed.
	if lerr := g.launch(g.fUndo, int64(n), ores, uint64(n), res2); lerr != nil {
		return errors.Join(err, rerr, waitAfter(g.stream, lerr))
	}
	if lerr := g.run(rctx, opDelete, osrc, odst, 0, res2, n, flagRetry, 0, false); lerr != nil {
		return errors.Join(err, rerr, lerr)
	}
	if lerr := g.launch(g.fUndone, int64(n), ores, uint64(n), res2); lerr != nil {
		return errors.Join(err, rerr, waitAfter(g.stream, lerr))
	}
	return errors.Join(err, rerr, gpurt.Wait(g.stream))
}

// insertBoth applies a prepared undirected insert batch of an unweighted
// graph (both directions: 2n elements) in one apply launch and one wait,
// where the weighted path runs the reverses after the canonical directions
// (which a weight that must be one for both directions needs). The
// directions are independent inserts: the copies of an edge in the batch
// and an edge already present find what is there (Present). Should part of
// the batch fail (the pool exhausted at MaxPoolBytes, ctx cancelled between
// reruns), every pair with a failed element was absent before the batch (a
// pair present has both directions present, which inserts find without
// allocating): both of its directions are deleted (deleteBoth), and a find
// of the canonical directions reported Inserted or Present turns those
// taken back into Failed (gr_kept, gr_lost), so that the graph stays
// symmetric and every result says what is in it.
func (g *gpuGraph[W]) insertBoth(ctx context.Context, osrc, odst cuda.Slice[uint32], ores cuda.Slice[uint8], n, reserve int, prepped bool) error {
	m := 2 * n
	if beforeInsertBoth != nil {
		beforeInsertBoth()
	}
	launched := g.applies
	err := g.run(ctx, opInsert, osrc.Sub(0, m), odst.Sub(0, m), 0, ores.Sub(0, m), m, flagRetry, 2*reserve, prepped)
	if err == nil || errors.Is(err, errRejected) || g.applies == launched {
		// All applied, or nothing: rejected by prep, or stopped before the
		// first launch (every element still Failed, edges present before
		// the batch among them: a repair would delete those).
		return err
	}
	if rerr := g.deleteBoth(osrc.Sub(0, m), odst.Sub(0, m), ores.Sub(0, m)); rerr != nil {
		return errors.Join(err, rerr)
	}
	res2, lerr := g.repairScratch(n)
	if lerr != nil {
		return errors.Join(err, lerr)
	}
	if lerr := g.launch(g.fKept, int64(n), ores, uint64(n), res2); lerr != nil {
		return errors.Join(err, waitAfter(g.stream, lerr))
	}
	if lerr := g.run(context.WithoutCancel(ctx), opFind, osrc.Sub(0, n), odst.Sub(0, n), 0, res2, n, flagRetry, 0, false); lerr != nil {
		return errors.Join(err, lerr)
	}
	if lerr := g.launch(g.fLost, int64(n), ores, uint64(n), res2); lerr != nil {
		return errors.Join(err, waitAfter(g.stream, lerr))
	}
	return err
}

// beforeInsertBoth, when set, runs before insertBoth's apply launch
// (tests: a context cancelled there stops the batch before it applies).
var beforeInsertBoth func()

// deletePair runs an undirected delete batch (prepared) with one wait: the
// canonical directions, gr_mirror, then the reverses of the edges removed,
// queued back to back. Deletes allocate nothing, so nothing is rerun; the
// first launch leaves its counts in the control block (and the reject of
// prep, which makes both apply nothing), the second adds its own and hands
// the sum over.
func (g *gpuGraph[W]) deletePair(ctx context.Context, osrc, odst cuda.Slice[uint32], ores cuda.Slice[uint8], n int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	release, err := g.pool.Acquire()
	if err != nil {
		return err
	}
	g.ctrlPinned.Data()[gpurt.CtrlDone] = 0
	err = g.launch(g.fApply, int64(n), g.arena, g.seed, g.pool.Descriptor(), g.dict, osrc, odst, cuda.DevicePtr(0), uint32(opDelete),
		ores, uint64(n), g.ctrl, uint32(flagRetry), uint32(0), cuda.DevicePtr(0), cuda.DevicePtr(0))
	if err == nil { // the second launch counts its own blocks
		err = g.ctrl.Sub(gpurt.CtrlDone, gpurt.CtrlDone+1).Zero(g.stream)
	}
	if err == nil {
		err = g.launch(g.fMirror, int64(n), ores, uint64(n), uint32(1)<<resRemoved)
	}
	if err == nil {
		err = g.launch(g.fApply, int64(n), g.arena, g.seed, g.pool.Descriptor(), g.dict, osrc.Sub(n, 2*n), odst.Sub(n, 2*n), cuda.DevicePtr(0),
			uint32(opDelete), ores.Sub(n, 2*n), uint64(n), g.ctrl, uint32(flagRetry), uint32(1), g.ctrlOut, cuda.DevicePtr(0))
	}
	if err == nil {
		err = g.readApply()
	} else {
		err = waitAfter(g.stream, err)
	}
	release()
	if err != nil {
		return err
	}
	if err := g.prepCounts(opDelete); err != nil {
		return err
	}
	c := g.host
	g.live.Add(int64(c[gpurt.CtrlDelta]))
	if status := uint32(c[gpurt.CtrlStatus]); status != 0 {
		return fmt.Errorf("%d edges not applied: %w", c[gpurt.CtrlFailed], gpurt.StatusError("device", status))
	}
	return nil
}

// repairScratch returns n bytes for a batch's repair (deleteBoth, the
// finds of insertBoth, the weighted reverses): the room the last prepare
// took beside its batch or, past it (a build's chunks that did not run), a
// buffer of its own.
func (g *gpuGraph[W]) repairScratch(n int) (cuda.Slice[uint8], error) {
	if n <= g.res2.Len() {
		return g.res2.Sub(0, n), nil
	}
	s, err := g.bRes2.Get(g.dev, g.stream, n)
	if err != nil {
		return s, err
	}
	return s.Sub(0, n), nil
}

// upload copies a Go slice into a scratch buffer.
func upload[T cuda.Elem](g interface {
	device() (*cuda.Device, *cuda.Stream)
}, b *gpurt.Buf[T], src []T) (cuda.Slice[T], error) {
	dev, s := g.device()
	d, err := b.Get(dev, s, max(1, len(src)))
	if err != nil {
		return d, err
	}
	d = d.Sub(0, len(src))
	if len(src) > 0 {
		if err := d.CopyFromHost(src); err != nil {
			return d, err
		}
	}
	return d, nil
}

func (g *gpuGraph[W]) device() (*cuda.Device, *cuda.Stream) { return g.dev, g.stream }

// weightBytes views weights as bytes.
func weightBytes[W any](ws []W) []byte {
	if len(ws) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&ws[0])), len(ws)*int(unsafe.Sizeof(ws[0])))
}

func resultBytes(res []slabhash.Result) []uint8 {
	if len(res) == 0 {
		return nil
	}
	return unsafe.Slice((*uint8)(unsafe.Pointer(&res[0])), len(res))
}

// uploadEdges copies an edge batch's Go slices into scratch.
func (g *gpuGraph[W]) uploadEdges(src, dst []uint32) (ds, dd cuda.Slice[uint32], err error) {
	if ds, err = upload(g, &g.bSrc, src); err != nil {
		return
	}
	dd, err = upload(g, &g.bDst, dst)
	return
}

// hostEdges uploads a Go-slice edge batch and runs it.
func (g *gpuGraph[W]) hostEdges(ctx context.Context, op uint32, src, dst []uint32, ws []W, res []slabhash.Result) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for lo := 0; lo < len(src); lo += hostBatch {
		hi := min(len(src), lo+hostBatch)
		ds, dd, err := g.uploadEdges(src[lo:hi], dst[lo:hi])
		if err != nil {
			return err
		}
		var vals cuda.DevicePtr
		if ws != nil && g.wbytes > 0 {
			dv, err := upload(g, &g.bVals, weightBytes(ws[lo:hi]))
			if err != nil {
				return err
			}
			vals = dv.Ptr()
		}
		var dres cuda.Slice[uint8]
		if res != nil {
			if dres, err = g.bOut.Get(g.dev, g.stream, hi-lo); err != nil {
				return err
			}
			dres = dres.Sub(0, hi-lo)
		}
		err = g.edges(ctx, op, ds, dd, vals, dres, false)
		if res != nil {
			if cerr := dres.CopyToHost(resultBytes(res[lo:hi])); err == nil {
				err = cerr
			}
		}
		if err != nil {
			for i := hi; i < len(res); i++ { // the parts not run
				res[i] = slabhash.Failed
			}
			return err
		}
	}
	return nil
}

// hostBatch is the most edges one upload carries: larger batches run in
// parts (each part's edges applied before the next's).
const hostBatch = 1 << 24

func (g *gpuGraph[W]) insert(ctx context.Context, src, dst []uint32, ws []W, res []slabhash.Result) error {
	return g.hostEdges(ctx, opInsert, src, dst, ws, res)
}

func (g *gpuGraph[W]) remove(ctx context.Context, src, dst []uint32, res []slabhash.Result) error {
	return g.hostEdges(ctx, opDelete, src, dst, nil, res)
}

// find looks edges up (device arrays; check: IDs checked on the device):
// res[i] = 1 found, 0 not; vals (optional) the weights.
func (g *gpuGraph[W]) find(ctx context.Context, src, dst cuda.Slice[uint32], vals cuda.DevicePtr, res cuda.Slice[uint8], check bool) error {
	n := src.Len()
	if check {
		if err := g.checkIDs(src, dst); err != nil {
			return err
		}
	}
	return g.run(ctx, opFind, src, dst, vals, res, n, 0, 0, false)
}

// checkIDs refuses device IDs at or past the capacity.
func (g *gpuGraph[W]) checkIDs(a, b cuda.Slice[uint32]) error { return g.checkIDsBelow(a, b, g.nv) }

// checkIDsBelow refuses device IDs at or past limit.
func (g *gpuGraph[W]) checkIDsBelow(a, b cuda.Slice[uint32], limit int) error {
	if err := g.zeroCtrl(); err != nil {
		return err
	}
	var bp cuda.DevicePtr
	if b.Buffer() != nil {
		bp = b.Ptr()
	}
	if err := g.launch(g.fCheckIDs, int64(a.Len()), a, bp, uint64(a.Len()), uint32(limit), g.ctrl); err != nil {
		return waitAfter(g.stream, err)
	}
	if err := g.readCtrl(); err != nil {
		return err
	}
	if g.host[gpurt.CtrlRejected] != 0 {
		return fmt.Errorf("%w: %d vertex IDs at or past the capacity %d (or reserved)", warpkit.ErrInvalidArgument, g.host[gpurt.CtrlRejected], limit)
	}
	return nil
}

func (g *gpuGraph[W]) lookup(ctx context.Context, src, dst []uint32, found []bool, out []W) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for lo := 0; lo < len(src); lo += hostBatch {
		hi := min(len(src), lo+hostBatch)
		ds, dd, err := g.uploadEdges(src[lo:hi], dst[lo:hi])
		if err != nil {
			return err
		}
		dres, err := g.bRes.Get(g.dev, g.stream, hi-lo)
		if err != nil {
			return err
		}
		dres = dres.Sub(0, hi-lo)
		var vals cuda.DevicePtr
		var dv cuda.Slice[uint8]
		if out != nil && g.wbytes > 0 {
			if dv, err = g.vals(&g.bVals, hi-lo); err != nil {
				return err
			}
			dv = dv.Sub(0, (hi-lo)*g.wbytes)
			if err := dv.Zero(g.stream); err != nil { // absent edges read 0
				return err
			}
			vals = dv.Ptr()
		}
		if err := g.find(ctx, ds, dd, vals, dres, false); err != nil {
			return err
		}
		if found != nil {
			r := make([]uint8, hi-lo)
			if err := dres.CopyToHost(r); err != nil {
				return err
			}
			for i, x := range r {
				found[lo+i] = x == uint8(slabhash.Found)
			}
		}
		if vals != 0 {
			if err := dv.CopyToHost(weightBytes(out[lo:hi])); err != nil {
				return err
			}
		}
	}
	return nil
}

// degreesDevice writes the degrees of ids (device) to out.
func (g *gpuGraph[W]) degreesDevice(ids, out cuda.Slice[uint32]) error {
	if err := g.launch(g.fDegrees, int64(ids.Len()), g.dict, ids, uint64(ids.Len()), out, cuda.DevicePtr(0)); err != nil {
		return waitAfter(g.stream, err)
	}
	return gpurt.Wait(g.stream)
}

func (g *gpuGraph[W]) degrees(ctx context.Context, ids, out []uint32) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	di, err := upload(g, &g.bSrc, ids)
	if err != nil {
		return err
	}
	do, err := g.bDst.Get(g.dev, g.stream, max(1, len(ids)))
	if err != nil {
		return err
	}
	do = do.Sub(0, len(ids))
	if err := g.degreesDevice(di, do); err != nil {
		return err
	}
	if len(ids) == 0 {
		return nil
	}
	return do.CopyToHost(out)
}

// neighborsDevice gathers the neighbours of ids (device) into out at the
// caller's offsets (len(ids)+1 of them): gr_pick, then gr_gather_tables,
// which writes nothing outside out.
func (g *gpuGraph[W]) neighborsDevice(ids cuda.Slice[uint32], offsets cuda.Slice[uint64], out cuda.Slice[uint32]) error {
	n := ids.Len()
	if err := g.checkIDs(ids, cuda.Slice[uint32]{}); err != nil {
		return err
	}
	tabs, err := g.rCur.Get(g.dev, g.stream, n*vertexWords)
	if err != nil {
		return err
	}
	if err := g.launch(g.fPick, int64(n), g.dict, ids, uint64(n), tabs); err != nil {
		return waitAfter(g.stream, err)
	}
	if err := g.zeroCtrl(); err != nil {
		return err
	}
	var outp cuda.DevicePtr
	if out.Buffer() != nil {
		outp = out.Ptr()
	}
	// No chunks: ids may repeat, so their buckets have no bound to size
	// the chunks' list by.
	if err := g.launch(g.fGatherTables, tiles(n), g.arena, tabs, ids, uint64(n), g.pool.Descriptor(), offsets, uint32(0),
		cuda.DevicePtr(0), outp, cuda.DevicePtr(0), uint64(out.Len()), cuda.DevicePtr(0), uint64(0), uint32(0), g.ctrl); err != nil {
		return waitAfter(g.stream, err)
	}
	if err := g.readCtrl(); err != nil {
		return err
	}
	status := uint32(g.host[gpurt.CtrlStatus])
	if status&gpurt.StatusOverflow != 0 {
		return fmt.Errorf("%w: a vertex's window is smaller than its degree (its first neighbours were written)", warpkit.ErrInvalidArgument)
	}
	return gpurt.StatusError("neighbors device", status)
}

// deleteVerticesDevice removes the vertices' edges: a sweep tombstones the
// entries into them in every other vertex's table, then their own tables
// are emptied and their overflow slabs freed (graph.cu: gr_sweep, gr_reset).
func (g *gpuGraph[W]) deleteVerticesDevice(ctx context.Context, ids cuda.Slice[uint32]) error {
	n := ids.Len()
	if n == 0 {
		return nil
	}
	if err := g.zeroCtrl(); err != nil {
		return err
	}
	release, err := g.pool.Acquire()
	if err != nil {
		return err
	}
	defer release()
	// A launch that fails leaves marks behind: clear the bitmap (it is all
	// zero between calls).
	failed := func(err error) error {
		return waitAfter(g.stream, errors.Join(err, g.gone.Zero(g.stream)))
	}
	if err := g.launch(g.fMark, int64(n), ids, uint64(n), g.gone); err != nil {
		return failed(err)
	}
	owner, err := g.owners()
	if err != nil {
		return failed(err)
	}
	if err := g.launch(g.fSweep, tiles(g.nslabs), g.arena, uint64(g.nslabs), owner, g.dict, g.pool.Descriptor(), g.gone, g.ctrl); err != nil {
		return failed(err)
	}
	if err := g.launch(g.fReset, tiles(n), g.arena, g.dict, g.pool.Descriptor(), ids, uint64(n), g.gone, g.ctrl); err != nil {
		return failed(err)
	}
	if err := g.readCtrl(); err != nil {
		return err
	}
	g.live.Add(int64(g.host[gpurt.CtrlDelta]))
	return gpurt.StatusError("delete vertices", uint32(g.host[gpurt.CtrlStatus]))
}

func (g *gpuGraph[W]) deleteVertices(ctx context.Context, ids []uint32) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	di, err := upload(g, &g.bIDs, ids)
	if err != nil {
		return err
	}
	return g.deleteVerticesDevice(ctx, di)
}

// offsets writes the exclusive scan of the degrees (nv+1 entries) and
// returns the total.
func (g *gpuGraph[W]) offsets() (cuda.Slice[uint64], uint64, error) {
	off, err := g.tOff.Get(g.dev, g.stream, g.nv+1)
	if err != nil {
		return off, 0, err
	}
	fail := func(err error) (cuda.Slice[uint64], uint64, error) {
		return cuda.Slice[uint64]{}, 0, waitAfter(g.stream, err)
	}
	deg := off.Sub(0, g.nv)
	if g.nv > 0 {
		if err := g.launch(g.fDegrees, int64(g.nv), g.dict, cuda.DevicePtr(0), uint64(g.nv), cuda.DevicePtr(0), deg); err != nil {
			return fail(err)
		}
	}
	total, err := g.scan(deg, off)
	if err != nil {
		return cuda.Slice[uint64]{}, 0, err
	}
	return off, total, nil
}

// scan writes the exclusive scan of in to out[:len(in)] (out may be in)
// and the total to out[len(in)], waits, and returns the total.
func (g *gpuGraph[W]) scan(in, out cuda.Slice[uint64]) (uint64, error) {
	e, err := g.primEngine()
	if err != nil {
		return 0, err
	}
	n := in.Len()
	if err := prim.ExclusiveScan(e, g.stream, in, out.Sub(0, n), out.Sub(n, n+1)); err != nil {
		return 0, waitAfter(g.stream, err)
	}
	if err := gpurt.Wait(g.stream); err != nil {
		return 0, err
	}
	var total [1]uint64
	err = out.Sub(n, n+1).CopyToHost(total[:])
	return total[0], err
}

// gatherWarpBuckets is the largest table (in buckets) whose buckets an
// unweighted graph's gather shares among the lanes of a warp with those of
// 31 other vertices (gr_gather_set_vertices); a larger one takes a warp per
// 64 buckets (gr_gather_set_items). Below 32: the kernel's bound on items.
const gatherWarpBuckets = 31

// gatherAll lays every table out as rows of a CSR (in no order within a
// row): cols, weights (optional), rows (optional: each entry's vertex).
// With ocnt (an unweighted graph only) it lays out the triangle count's
// oriented CSR instead: each row's neighbours ranked above its vertex at
// its front, their number in ocnt, the rest of the row not written
// (graph.cu: gr_gather_set_vertices).
func (g *gpuGraph[W]) gatherAll(off cuda.Slice[uint64], total uint64, cols cuda.Slice[uint32], vals cuda.DevicePtr, rows cuda.DevicePtr, ocnt cuda.Slice[uint32]) error {
	cursor, orient := ocnt, cuda.DevicePtr(0)
	if ocnt.Len() > 0 {
		if g.fGatherVertices == nil {
			return fmt.Errorf("%w: graph: an oriented gather of a weighted graph", warpkit.ErrInvalidArgument)
		}
		orient = g.dict.Ptr()
	} else {
		var err error
		if cursor, err = g.tCursor.Get(g.dev, g.stream, max(1, g.nv)); err != nil {
			return err
		}
	}
	if err := g.zeroCtrl(); err != nil {
		return err
	}
	switch {
	case g.nslabs == 0:
	case g.fGatherVertices != nil: // set slabs: in vertex order, large tables a warp per 64 buckets
		maxItems := g.nslabs/(gatherWarpBuckets+1) + 1
		items, err := g.tItems.Get(g.dev, g.stream, maxItems)
		if err != nil {
			return err
		}
		if err := g.launch(g.fGatherVertices, int64(g.nv), g.arena, g.dict, uint64(g.nv), g.pool.Descriptor(), off, cursor, cols, rows,
			uint32(gatherWarpBuckets), items, uint64(maxItems), orient, g.ctrl); err != nil {
			return waitAfter(g.stream, err)
		}
		if err := g.launch(g.fGatherItems, int64(maxItems)*32, g.arena, g.dict, g.pool.Descriptor(), off, cursor, cols, rows,
			items, uint64(maxItems), orient, g.ctrl); err != nil {
			return waitAfter(g.stream, err)
		}
	default:
		if err := cursor.Zero(g.stream); err != nil {
			return waitAfter(g.stream, err)
		}
		owner, err := g.owners()
		if err != nil {
			return waitAfter(g.stream, err)
		}
		if err := g.launch(g.fGather, tiles(g.nslabs), g.arena, uint64(0), uint64(g.nslabs), owner, uint32(0),
			g.pool.Descriptor(), off, cursor, cols, vals, rows, g.ctrl); err != nil {
			return waitAfter(g.stream, err)
		}
	}
	if err := g.readCtrl(); err != nil {
		return err
	}
	return gpurt.StatusError("gather", uint32(g.host[gpurt.CtrlStatus]))
}

func (g *gpuGraph[W]) csr(ctx context.Context, sorted bool) (*CSR, []W, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	off, total, err := g.offsets()
	if err != nil {
		return nil, nil, err
	}
	cols, err := g.tCols.Get(g.dev, g.stream, int(max(1, total)))
	if err != nil {
		return nil, nil, err
	}
	var dv cuda.Slice[uint8]
	var vals cuda.DevicePtr
	if g.wbytes > 0 {
		if dv, err = cuda.Alloc[uint8](g.dev, int(max(1, total))*g.wbytes); err != nil {
			return nil, nil, err
		}
		defer dv.Free()
		vals = dv.Ptr()
	}
	if err := g.gatherAll(off, total, cols, vals, 0, cuda.Slice[uint32]{}); err != nil {
		return nil, nil, err
	}
	out := &CSR{Offsets: make([]uint64, g.nv+1), Cols: make([]uint32, total)}
	if err := off.CopyToHost(out.Offsets); err != nil {
		return nil, nil, err
	}
	if total > 0 {
		if err := cols.Sub(0, int(total)).CopyToHost(out.Cols); err != nil {
			return nil, nil, err
		}
	}
	ws := make([]W, total)
	if g.wbytes > 0 && total > 0 {
		if err := dv.Sub(0, int(total)*g.wbytes).CopyToHost(weightBytes(ws)); err != nil {
			return nil, nil, err
		}
	}
	if sorted {
		sortRows(out, ws)
	}
	return out, ws, nil
}

// sortRows sorts each row of a CSR by neighbour, weights alongside.
func sortRows[W any](c *CSR, ws []W) {
	n := len(c.Offsets) - 1
	hostpar.ForCores(n, 1<<10, func(_, lo, hi int) {
		type nw struct {
			v uint32
			w W
		}
		var tmp []nw
		for v := lo; v < hi; v++ {
			row := c.Cols[c.Offsets[v]:c.Offsets[v+1]]
			if len(ws) == 0 {
				slices.Sort(row)
				continue
			}
			wr := ws[c.Offsets[v]:c.Offsets[v+1]]
			tmp = tmp[:0]
			for i := range row {
				tmp = append(tmp, nw{row[i], wr[i]})
			}
			slices.SortFunc(tmp, func(a, b nw) int { return int(int64(a.v) - int64(b.v)) })
			for i, x := range tmp {
				row[i], wr[i] = x.v, x.w
			}
		}
	})
}

// neighbors copies v's table out.
func (g *gpuGraph[W]) neighbors(ctx context.Context, v uint32) (iter.Seq2[uint32, W], error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var e [vertexWords]uint32
	if err := g.dict.Sub(int(v)*vertexWords, int(v+1)*vertexWords).CopyToHost(e[:]); err != nil {
		return nil, err
	}
	base, nb, deg := e[0], e[1], e[2]
	off, err := cuda.FromHost(g.dev, []uint64{0, uint64(deg)})
	if err != nil {
		return nil, err
	}
	defer off.Free()
	cursor, err := cuda.Alloc[uint32](g.dev, 1)
	if err != nil {
		return nil, err
	}
	defer cursor.Free()
	cols, err := g.bDst.Get(g.dev, g.stream, max(1, int(deg)))
	if err != nil {
		return nil, err
	}
	var dv cuda.Slice[uint8]
	var vals cuda.DevicePtr
	if g.wbytes > 0 {
		if dv, err = g.vals(&g.bVals, int(deg)); err != nil {
			return nil, err
		}
		vals = dv.Ptr()
	}
	if err := cursor.Zero(g.stream); err != nil {
		return nil, waitAfter(g.stream, err)
	}
	if err := g.zeroCtrl(); err != nil {
		return nil, err
	}
	if err := g.launch(g.fGather, tiles(int(nb)), g.arena, uint64(base), uint64(base)+uint64(nb), cuda.DevicePtr(0), v,
		g.pool.Descriptor(), off, cursor, cols, vals, cuda.DevicePtr(0), g.ctrl); err != nil {
		return nil, waitAfter(g.stream, err)
	}
	if err := g.readCtrl(); err != nil {
		return nil, err
	}
	if err := gpurt.StatusError("neighbors", uint32(g.host[gpurt.CtrlStatus])); err != nil {
		return nil, err
	}
	ns := make([]uint32, deg)
	ws := make([]W, deg)
	if deg > 0 {
		if err := cols.Sub(0, int(deg)).CopyToHost(ns); err != nil {
			return nil, err
		}
		if g.wbytes > 0 {
			if err := dv.Sub(0, int(deg)*g.wbytes).CopyToHost(weightBytes(ws)); err != nil {
				return nil, err
			}
		}
	}
	return func(yield func(uint32, W) bool) {
		for i, u := range ns {
			if !yield(u, ws[i]) {
				return
			}
		}
	}, nil
}

// phaseEvents returns the events that time a triangle count's phases
// (made on the first count, kept until Close).
func (g *gpuGraph[W]) phaseEvents() ([5]*cuda.Event, error) {
	for i := range g.tcEvents {
		if g.tcEvents[i] != nil {
			continue
		}
		e, err := g.dev.NewEvent()
		if err != nil {
			return g.tcEvents, err
		}
		g.tcEvents[i] = e
	}
	return g.tcEvents, nil
}

// triangles counts triangles on the device: the tables laid out as a CSR
// (rows in no order; gather), each row cut to the neighbours ranked above
// its vertex by (degree, ID) (gr_orient), then for each oriented edge
// (u, v) the later entries w of u's row probed in v's table (gr_tc). With
// TrianglesSorted the rows are sorted first (prim's segmented sort) and
// the probes are binary searches of the oriented rows (gr_tc_sorted); with
// TrianglesThesis no row is cut: every pair of u's neighbours is probed,
// each triangle found three times.
func (g *gpuGraph[W]) triangles(ctx context.Context, method TriangleMethod) (TriangleStats, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var st TriangleStats
	// The phases are timed by events on the stream (ev[0] before the
	// gather, ev[1..4] after it, the sort, the orientation and the count),
	// not by waits: a dynamic graph is counted after every few batches, and
	// two waits were a few percent of a road graph's count.
	ev, err := g.phaseEvents()
	if err != nil {
		return st, err
	}
	if err := ev[0].Record(g.stream); err != nil {
		return st, err
	}
	next := 1
	phase := func() error {
		if err := ev[next].Record(g.stream); err != nil {
			return waitAfter(g.stream, err)
		}
		next++
		if err := ctx.Err(); err != nil {
			return waitAfter(g.stream, err)
		}
		return nil
	}
	off, total, err := g.offsets()
	if err != nil {
		return st, err
	}
	if total == 0 {
		return st, nil
	}
	if method == TrianglesSorted && total >= 1<<32 {
		return st, fmt.Errorf("%w: %d entries: TrianglesSorted sorts rows with 32-bit offsets", warpkit.ErrInvalidArgument, total)
	}
	cols, err := g.tCols.Get(g.dev, g.stream, int(total))
	if err != nil {
		return st, err
	}
	rows, err := g.tRows.Get(g.dev, g.stream, int(total))
	if err != nil {
		return st, err
	}
	ocnt, err := g.tOcnt.Get(g.dev, g.stream, g.nv+1)
	if err != nil {
		return st, err
	}
	// The hash method of an unweighted graph gathers its rows oriented
	// (one pass: no orientation launch, half the entries written).
	fused := method == TrianglesHash && g.fGatherVertices != nil
	gatherOcnt := cuda.Slice[uint32]{}
	if fused {
		gatherOcnt = ocnt
	}
	if err := g.gatherAll(off, total, cols, 0, rows.Ptr(), gatherOcnt); err != nil {
		return st, err
	}
	if err := phase(); err != nil { // gathered
		return st, err
	}
	if method == TrianglesSorted {
		e, err := g.primEngine()
		if err != nil {
			return st, err
		}
		if err := g.launch(g.fNarrow, int64(g.nv+1), off, uint64(g.nv+1), ocnt); err != nil {
			return st, waitAfter(g.stream, err)
		}
		if err := prim.SegmentedSortKeys(e, g.stream, cols, ocnt); err != nil {
			return st, waitAfter(g.stream, err)
		}
		if err := phase(); err != nil { // sorted
			return st, err
		}
	} else {
		next++ // no sort: its phase stays 0
	}
	if err := g.zeroCtrl(); err != nil {
		return st, err
	}
	switch {
	case fused: // oriented by the gather
	case method == TrianglesThesis:
		err = g.launch(g.fDegrees, int64(g.nv), g.dict, cuda.DevicePtr(0), uint64(g.nv), ocnt, cuda.DevicePtr(0))
	default:
		err = g.launch(g.fOrient, int64(g.nv), off, cols, g.dict, uint64(g.nv), ocnt)
	}
	if err != nil {
		return st, waitAfter(g.stream, err)
	}
	if err := phase(); err != nil { // oriented
		return st, err
	}
	release, err := g.pool.Acquire()
	if err != nil {
		return st, err
	}
	if method == TrianglesSorted {
		tiled, items := sortedPairLoop(total, g.nv)
		err = g.launch(g.fTCSorted, items, off, cols, rows, ocnt, total, uint64(g.nv), g.dict, tiled, g.ctrl)
	} else {
		err = g.launch(g.fTC, int64(total), off, cols, rows, ocnt, total, uint64(g.nv), g.arena, g.dict, g.pool.Descriptor(), g.seed, g.ctrl)
	}
	if err == nil {
		err = ev[next].Record(g.stream)
	}
	if err == nil {
		err = g.readCtrl()
	} else {
		err = waitAfter(g.stream, err)
	}
	release()
	if err != nil {
		return st, err
	}
	from := 0
	for i, d := range []*time.Duration{&st.Gather, &st.Sort, &st.Orient, &st.Count} {
		if i == 1 && method != TrianglesSorted {
			continue // the orientation is timed from the gather's end
		}
		if *d, err = cuda.Elapsed(ev[from], ev[i+1]); err != nil {
			return st, err
		}
		from = i + 1
	}
	st.Triangles = g.host[0]
	if method == TrianglesThesis {
		st.Triangles /= 3
	}
	return st, nil
}

// build replaces the graph with a batch (Go slices): every table sized for
// its entries in the batch (Options.LoadFactor, repeats counted), laid out
// in a new arena, then filled by one insert batch.
func (g *gpuGraph[W]) build(ctx context.Context, n int, src, dst []uint32, ws []W) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	ds, dd, err := g.uploadEdges(src, dst)
	if err != nil {
		return err
	}
	var vals cuda.DevicePtr
	if ws != nil && g.wbytes > 0 {
		dv, err := upload(g, &g.bVals, weightBytes(ws))
		if err != nil {
			return err
		}
		vals = dv.Ptr()
	}
	return g.buildDevice(ctx, n, ds, dd, vals, false)
}

// buildChecked is buildDevice for device batches: the IDs checked first
// (with the symmetry sums: one read of the edges, one wait).
func (g *gpuGraph[W]) buildChecked(ctx context.Context, n int, src, dst cuda.Slice[uint32], vals cuda.DevicePtr) error {
	if n < 0 || n > ReservedTombstone {
		return fmt.Errorf("%w: %d vertices outside 0..%d", warpkit.ErrInvalidArgument, n, ReservedTombstone)
	}
	return g.buildDevice(ctx, n, src, dst, vals, true)
}

// planTotal is the word of the plan block (ctrlPlan) where a build reads
// its buckets' total; words 0 and 1 hold gr_symmetry's sums.
const planTotal = 2

// planPlaced is the plan block's word where a placed batch's prep counts
// its elements not placed (insertPlaced); zeroed by the build with the
// rest of the block. (Words 2 and 3 are also the move plans' totals,
// planBuckets and planEntries, which a placed batch never runs.)
const planPlaced = 5

// placedCount is the device address of the plan block's planPlaced word.
func (g *gpuGraph[W]) placedCount() cuda.DevicePtr {
	return g.ctrlPlan.Sub(planPlaced, planPlaced+1).Ptr()
}

// buildDevice replaces the graph with a device batch; with check its IDs
// are checked first (nothing changes for a bad one).
func (g *gpuGraph[W]) buildDevice(ctx context.Context, n int, src, dst cuda.Slice[uint32], vals cuda.DevicePtr, check bool) error {
	if _, err := g.primEngine(); err != nil {
		return err
	}
	// Everything that can fail for want of memory comes first; the old
	// graph stays whole (its dictionary and arena only grow, contents kept)
	// until the new one replaces it. The pool is the old graph's, emptied
	// then (Reset: no allocation, unlike a new pool, which cost a build
	// 0.3-0.4 ms on the H200).
	var err error
	if g.dict, err = grow(g.dev, g.stream, g.dict, g.nv*vertexWords, n*vertexWords, 0); err != nil {
		return err
	}
	if g.gone, err = grow(g.dev, g.stream, g.gone, (g.nv+31)/32, (n+31)/32, 0); err != nil {
		return err
	}
	if g.lack, err = grow(g.dev, g.stream, g.lack, (g.nv+31)/32, (n+31)/32, 0); err != nil {
		return err
	}
	m := src.Len()
	mode := uint32(0)
	if !g.directed {
		mode = prepUndirected
	}
	if g.selfLoops {
		mode |= prepSelfLoops
	}
	// Scratch kept for the next build (a rebuild of a graph of the same
	// size allocates nothing here).
	cnt, err := g.bCount.Get(g.dev, g.stream, max(1, n))
	if err != nil {
		return err
	}
	nb, err := g.bBuckets.Get(g.dev, g.stream, n+1)
	if err != nil {
		return err
	}
	base, err := g.bBase.Get(g.dev, g.stream, n+1)
	if err != nil {
		return err
	}
	// gr_buckets leaves the counts it read zero for the next build: the
	// scratch needs a fill only when it is new or longer than they were.
	if !g.bCountZero || cnt.Ptr() != g.bCountAt || n > g.bCountLen {
		if err := cnt.Zero(g.stream); err != nil {
			return waitAfter(g.stream, err)
		}
	}
	g.bCountZero = false // until gr_buckets has run
	// One wait before the old graph goes: gr_symmetry's verdicts (a device
	// batch's IDs checked, and whether an undirected build's edges list
	// both directions, so that it counts each edge at its source only) are
	// read on the device by gr_count_edges, and by the host together with
	// the buckets' total. A rejected ID stops the count and the buckets
	// kernels on the device (lack stays the old graph's).
	var sums cuda.DevicePtr
	g.ctrlClean = false
	if err := g.ctrlBoth.Zero(g.stream); err != nil { // the control and plan blocks
		return waitAfter(g.stream, err)
	}
	if !g.directed {
		sums = g.ctrlPlan.Ptr()
	}
	if m > 0 {
		if check || !g.directed {
			chk := uint32(0)
			if check {
				chk = 1
			}
			if err := g.launch(g.fSymmetry, int64(m), src, dst, uint64(m), chk, uint32(n), sums, g.ctrl); err != nil {
				return waitAfter(g.stream, err)
			}
		}
		if err := g.launch(g.fCount, int64(m), src, dst, uint64(m), mode, sums, uint32(n), g.ctrl, cnt); err != nil {
			return waitAfter(g.stream, err)
		}
	}
	var plan [gpurt.CtrlWords]uint64
	if n > 0 {
		per := g.per1000()
		if err := g.launch(g.fBuckets, int64(n), cnt, uint64(n), per, g.fitOne(per), nb, g.lack, g.ctrl); err != nil {
			return waitAfter(g.stream, err)
		}
		g.bCountZero, g.bCountAt, g.bCountLen = true, cnt.Ptr(), n
		if err := prim.ExclusiveScan(g.prim, g.stream, nb.Sub(0, n), base.Sub(0, n), base.Sub(n, n+1)); err != nil {
			return waitAfter(g.stream, err)
		}
		if err := cuda.CopyAsync(g.ctrlPlan.Sub(planTotal, planTotal+1), base.Sub(n, n+1), g.stream); err != nil {
			return waitAfter(g.stream, err)
		}
	}
	tableless := 0
	if n > 0 || m > 0 {
		if plan, err = g.readPlan(); err != nil {
			return err
		}
		if r := g.host[gpurt.CtrlRejected]; check && r != 0 {
			return fmt.Errorf("%w: %d vertex IDs at or past the capacity %d (or reserved)", warpkit.ErrInvalidArgument, r, n)
		}
		if n > 0 {
			tableless = int(g.host[gpurt.CtrlCount])
		}
	}
	symmetric := !g.directed && m > 0 && plan[0] == plan[1]
	slabs := uint64(0)
	if n > 0 {
		slabs = plan[planTotal]
	}
	if err := g.reserveArena(int(slabs)); err != nil {
		return err
	}
	// The old graph goes: its pool emptied on the stream (nothing else
	// runs there, read above), an empty arena, the new dictionary.
	// ResetOn fails only when the device does (it allocates nothing),
	// which leaves no graph usable.
	if err := g.pool.ResetOn(ctx, g.stream); err != nil {
		return err
	}
	g.nv, g.nslabs, g.selfSkips, g.tableless = n, int(slabs), 0, tableless
	g.ownerOK = false
	g.live.Store(0)
	if err := g.arena.FillBytes(0xff, g.stream); err != nil {
		return waitAfter(g.stream, err)
	}
	if n > 0 { // the dictionary, and the deleted-vertex bitmap zeroed
		if err := g.launch(g.fDict, int64(n), nb, base, uint64(n), uint32(0), uint64(0), g.dict, g.gone); err != nil {
			return waitAfter(g.stream, err)
		}
	}
	// The edges go in as insert batches of at most buildChunk (bounding
	// the scratch: 10 bytes an element, 20 an undirected edge); the
	// overflow of a build at the default load factor is a few percent of
	// its slabs. The first batch of an unweighted graph's build is placed
	// in the empty head slabs (insertPlaced), its overflow and any later
	// batch inserted by the apply launches.
	// A symmetric build that stops part way deletes both directions of
	// the edges of the chunks not run: they may hold the reverses of edges
	// of those that ran.
	unrun := func(err error, hi int) error {
		for rlo := hi; symmetric && rlo < m; rlo += buildChunk {
			rhi := min(m, rlo+buildChunk)
			if derr := g.deleteBoth(src.Sub(rlo, rhi), dst.Sub(rlo, rhi), cuda.Slice[uint8]{}); derr != nil {
				return errors.Join(err, derr)
			}
		}
		return err
	}
	for lo := 0; lo < m; lo += buildChunk {
		hi := min(m, lo+buildChunk)
		if lo == 0 && placeBuilds && g.wbytes == 0 {
			if err := g.insertPlaced(ctx, src.Sub(lo, hi), dst.Sub(lo, hi), symmetric, base.Sub(0, n+1), (hi-lo)/28+256); err != nil {
				return unrun(err, hi)
			}
			continue
		}
		if symmetric && g.wbytes == 0 {
			if err := g.insertAsGiven(ctx, src.Sub(lo, hi), dst.Sub(lo, hi), (hi-lo)/28+256); err != nil {
				return unrun(err, hi)
			}
			continue
		}
		v := vals
		if v != 0 {
			v += cuda.DevicePtr(lo * g.wbytes)
		}
		if err := g.edgesReserving(ctx, opInsert, src.Sub(lo, hi), dst.Sub(lo, hi), v, cuda.Slice[uint8]{}, false, (hi-lo)/28+256); err != nil {
			return err
		}
	}
	return gpurt.Wait(g.stream)
}

// insertPlaced runs a build's first batch into an unweighted graph placed
// (graph.cu: place, gr_settle): the arena's buckets all empty (the build
// filled them), prep puts each entry in its table's head slab with one
// atomic and lays out only the entries that did not fit, each in its own
// direction; gr_settle then puts the slabs in order, and run's apply
// launches insert the entries laid out, bounded by their count on the
// device (applyLimit). Undirected edges are inserted in both directions
// unless the edges list both (symmetric: each as given). base is the
// build's first buckets (nv+1: gr_settle finds a slab's vertex there).
// Should the apply launches stop part way or not start (the pool
// exhausted, ctx cancelled, a device error), the placed entries stay
// counted, and both directions of every entry that failed are deleted
// (undirected graphs), so the graph stays symmetric.
func (g *gpuGraph[W]) insertPlaced(ctx context.Context, src, dst cuda.Slice[uint32], symmetric bool, base cuda.Slice[uint64], reserve int) error {
	n := src.Len()
	m, mode := n, uint32(prepPlace)
	if !g.directed && !symmetric {
		m, mode, reserve = 2*n, mode|prepUndirected, 2*reserve
	}
	if g.selfLoops {
		mode |= prepSelfLoops
	}
	osrc, odst, ores, err := g.prepare(src, dst, m, mode)
	if err != nil {
		return err
	}
	if err := g.launch(g.fSettle, int64(g.nslabs), g.arena, uint64(g.nslabs), base, uint64(base.Len()-1), g.dict, g.ctrl); err != nil {
		return waitAfter(g.stream, err)
	}
	if beforePlacedApply != nil {
		beforePlacedApply()
	}
	launched := g.applies
	g.applyLimit = g.placedCount()
	err = g.run(ctx, opInsert, osrc.Sub(0, m), odst.Sub(0, m), 0, ores.Sub(0, m), m, flagRetry, reserve, true)
	g.applyLimit = 0
	if err == nil {
		return nil
	}
	if g.applies == launched {
		// No apply launch took the counts prep and gr_settle left in
		// the control block (the placed entries, the self-loops skipped).
		if cerr := g.readCtrl(); cerr != nil {
			return errors.Join(err, cerr)
		}
		g.live.Add(int64(g.host[gpurt.CtrlDelta]))
		if perr := g.prepCounts(opInsert); perr != nil {
			return errors.Join(err, perr)
		}
	}
	if g.directed {
		return err
	}
	plan, perr := g.readPlan()
	if perr != nil {
		return errors.Join(err, perr)
	}
	k := int(min(plan[planPlaced], uint64(m)))
	if k == 0 {
		return err
	}
	return errors.Join(err, g.deleteBoth(osrc.Sub(0, k), odst.Sub(0, k), ores.Sub(0, k)))
}

// beforePlacedApply, when set, runs between a placed batch's settle and
// its apply launches (tests: a context cancelled there stops the batch
// with its placed entries in the graph).
var beforePlacedApply func()

// insertAsGiven inserts a build's unweighted edges that list both
// directions of every edge (gr_symmetry said so) each as given, in one
// launch: no canonical pass, no reverses. Should it stop part way (the pool
// exhausted, ctx cancelled, a device error), both directions of every edge
// that failed are deleted (deleteBoth), so the graph stays symmetric.
func (g *gpuGraph[W]) insertAsGiven(ctx context.Context, src, dst cuda.Slice[uint32], reserve int) error {
	n := src.Len()
	mode := uint32(0)
	if g.selfLoops {
		mode |= prepSelfLoops
	}
	osrc, odst, ores, err := g.prepare(src, dst, n, mode) // with deleteBoth's scratch
	if err != nil {
		return err
	}
	err = g.run(ctx, opInsert, osrc.Sub(0, n), odst.Sub(0, n), 0, ores.Sub(0, n), n, flagRetry, reserve, true)
	if err == nil {
		return nil
	}
	return errors.Join(err, g.deleteBoth(osrc.Sub(0, n), odst.Sub(0, n), ores.Sub(0, n)))
}

// deleteBoth deletes both directions of the edges (src[i], dst[i]) whose
// res[i] is Failed (all of them when res is not given): the repair of a
// build that stopped part way. Deletes take no memory; they run to the end
// whatever the context.
func (g *gpuGraph[W]) deleteBoth(src, dst cuda.Slice[uint32], res cuda.Slice[uint8]) error {
	n := src.Len()
	fres, err := g.repairScratch(n)
	if err != nil {
		return err
	}
	all, rp := uint32(1), cuda.DevicePtr(0)
	if res.Buffer() != nil {
		all, rp = 0, res.Ptr()
	}
	ctx := context.Background()
	for _, d := range [2][2]cuda.Slice[uint32]{{src, dst}, {dst, src}} {
		if err := g.launch(g.fFailedPattern, int64(n), rp, uint64(n), all, fres); err != nil {
			return waitAfter(g.stream, err)
		}
		if err := g.run(ctx, opDelete, d[0], d[1], 0, fres, n, flagRetry, 0, false); err != nil {
			return err
		}
	}
	return nil
}

// buildChunk is the most edges a build inserts in one batch (a variable
// for tests, which shrink it to build in many chunks): 2^27 edges take
// about 1.3 GB of scratch, kept for the next build (10 bytes an element;
// 2.7 GB for an undirected batch that does not list both directions: two
// elements an edge), and hold the whole of soc-LiveJournal1's 97M entries
// in the batch that is placed (only a build's first: the later ones meet
// slabs already filled).
var buildChunk = 1 << 27

// placeBuilds lets a build's first batch be placed by prep (tests turn it
// off to build through the apply launches alone).
var placeBuilds = true

// rehash moves every table holding more entries than its head slabs have
// slots into a new run of buckets at the end of the arena, sized at the
// load factor: the movers' entries are gathered (a tile per table), their
// dictionary entries point at the new buckets, the entries are inserted
// there, and only then are the old lists emptied (their heads left
// orphaned in the arena: it only grows). Should the insert fail, the new
// tables are emptied and the old dictionary entries come back: the graph is
// as it was. A graph with nothing to move costs one plan launch and one
// wait.
func (g *gpuGraph[W]) rehash(ctx context.Context) (err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.rehashLocked(ctx, 1000)
}

// growFor moves the tables a prepared insert batch (src, res: prep's
// layout) would fill past Options.RehashChain lists to new buckets sized
// for their entries and the batch's. It reads prep's counts (prepCounts)
// with the plan's, one wait for both; the plan looks at the batch's
// sources (gr_count_sources counts them, gr_plan_sources plans those it
// finds counted and leaves the counts zero for the next batch).
func (g *gpuGraph[W]) growFor(ctx context.Context, src cuda.Slice[uint32], res cuda.Slice[uint8]) error {
	plan, mp, err := g.planSources(src, res)
	if err != nil {
		// prep's counts still settle the tables it gave (prepCounts).
		if rerr := g.readCtrl(); rerr == nil {
			_ = g.prepCounts(opInsert) // err says what went wrong first
		}
		return err
	}
	if err := g.prepCounts(opInsert); err != nil {
		return err
	}
	return g.moveTables(ctx, plan, mp)
}

// The plan block's words (ctrlPlan) besides the movers (gpurt.CtrlCount):
// the movers' new buckets and their entries, summed by the plan kernels
// (graph.cu: plan_list) so that a move is sized without a wait for its
// scans' totals.
const (
	planBuckets = 2
	planEntries = 3
)

// planTotals is where the plan kernels sum the movers' buckets and entries.
func (g *gpuGraph[W]) planTotals() cuda.Slice[uint64] {
	return g.ctrlPlan.Sub(planBuckets, planEntries+1)
}

// planSources queues growFor's count and plan and reads the plan's block
// (and prep's, into g.host) with one wait.
func (g *gpuGraph[W]) planSources(src cuda.Slice[uint32], res cuda.Slice[uint8]) (plan [gpurt.CtrlWords]uint64, mp movePlan, err error) {
	n := src.Len()
	// A mover is a source of the batch: at most min(nv, n) of them.
	cnt, mp, err := g.planScratch(min(max(1, g.nv), n))
	if err != nil {
		return
	}
	if err = g.ctrlPlan.Zero(g.stream); err != nil {
		err = waitAfter(g.stream, err)
		return
	}
	g.cntZero = false // until the plan has run
	if err = g.launch(g.fCountSources, int64(n), src, res, uint64(n), uint32(g.nv), cnt); err != nil {
		err = waitAfter(g.stream, err)
		return
	}
	per := g.per1000()
	chain := uint32(math.Round(g.rehashChain * 1000))
	if err = g.launch(g.fPlanSources, int64(g.nv), g.dict, uint64(g.nv), cnt, uint32(slotsPerBucket), per, chain, mp.ids, mp.old, mp.size, mp.base, mp.rows, uint64(mp.ids.Len()), g.ctrlPlan, g.planTotals()); err != nil {
		err = waitAfter(g.stream, err)
		return
	}
	if plan, err = g.readPlan(); err != nil {
		return
	}
	g.cntZero = true // the plan zeroed what it read, whatever its status
	err = gpurt.StatusError("grow plan", uint32(plan[gpurt.CtrlStatus]))
	return
}

// movePlan is a plan's list of the tables to move (graph.cu: plan_list):
// for mover i its vertex ids[i], its dictionary entry old[i]
// (vertexWords words), its new buckets size[i], their first base[i] (from
// the move's first bucket) and the first of its entries in the move's
// arrays rows[i].
type movePlan struct {
	ids, old         cuda.Slice[uint32]
	size, base, rows cuda.Slice[uint64]
}

// planScratch returns the plans' arrays, carved from one buffer (a fresh
// graph's first batch paid 25–40 µs an allocation for five): an insert
// batch's count per source (cnt: nv, zero between batches — the plan zeroes
// what the count wrote — and zeroed here when the buffer or nv changed or a
// plan did not run: cntZero), then the movePlan of at most movers movers
// (every plan writes what a move reads of it).
func (g *gpuGraph[W]) planScratch(movers int) (cnt cuda.Slice[uint32], mp movePlan, err error) {
	var l gpurt.Layout
	pCnt := gpurt.Place[uint32](&l, max(1, g.nv))
	pSize := gpurt.Place[uint64](&l, movers)
	pBase := gpurt.Place[uint64](&l, movers)
	pRows := gpurt.Place[uint64](&l, movers)
	pOld := gpurt.Place[uint32](&l, movers*vertexWords)
	pIDs := gpurt.Place[uint32](&l, movers)
	mem, err := l.Get(&g.rPlan, g.dev, g.stream)
	if err != nil {
		return
	}
	cnt = pCnt.In(mem)
	mp = movePlan{ids: pIDs.In(mem), old: pOld.In(mem), size: pSize.In(mem), base: pBase.In(mem), rows: pRows.In(mem)}
	// A buffer grown is a new Buffer (its address may be the old one's:
	// not a sign that the counts survived).
	if !g.cntZero || mem != g.cntBuf || cnt.Len() != g.cntLen {
		if err = cnt.Zero(g.stream); err != nil {
			err = waitAfter(g.stream, err)
			return
		}
		g.cntZero, g.cntBuf, g.cntLen = true, mem, cnt.Len()
	}
	return
}

// rehashLocked is rehash with a threshold: a table moves when its entries
// exceed chain1000/1000 lists' worth of its head slabs' slots; its new
// buckets hold them all.
func (g *gpuGraph[W]) rehashLocked(ctx context.Context, chain1000 uint32) (err error) {
	if g.nv == 0 {
		return nil
	}
	_, mp, err := g.planScratch(g.nv)
	if err != nil {
		return err
	}
	if err := g.ctrlPlan.Zero(g.stream); err != nil {
		return waitAfter(g.stream, err)
	}
	per := g.per1000()
	if err := g.launch(g.fRehashPlan, int64(g.nv), g.dict, uint64(g.nv), uint32(slotsPerBucket), per, chain1000, mp.ids, mp.old, mp.size, mp.base, mp.rows, uint64(mp.ids.Len()), g.ctrlPlan, g.planTotals()); err != nil {
		return waitAfter(g.stream, err)
	}
	plan, err := g.readPlan()
	if err != nil {
		return err
	}
	if err := gpurt.StatusError("rehash plan", uint32(plan[gpurt.CtrlStatus])); err != nil {
		return err
	}
	return g.moveTables(ctx, plan, mp)
}

// chunkBuckets is the size, in buckets, of the chunks that a move gathers
// and releases a large table in, a tile each (graph.cu: list_chunks): one
// tile walking a hub's thousands of buckets held up a whole launch (the
// gathers and releases took 103 of the 140 ms that Table 5.6's grow mode
// spent on soc-LiveJournal1 in batches of 2^22).
const chunkBuckets = 32

// chunkItems is the room for the chunks of distinct tables of at most
// buckets buckets in all, which a move gathers or releases: a table of
// more than chunkBuckets buckets b has ceil(b/chunkBuckets) <
// 2b/chunkBuckets chunks.
func chunkItems(buckets int) int { return max(1, 2*buckets/chunkBuckets) }

// moveTables moves the movers a plan listed (mp; its block's words in
// plan) to new buckets: see rehash.
func (g *gpuGraph[W]) moveTables(ctx context.Context, plan [gpurt.CtrlWords]uint64, mp movePlan) (err error) {
	movers := int(plan[gpurt.CtrlCount])
	if movers == 0 {
		return nil
	}
	buckets, entries := int(plan[planBuckets]), int(plan[planEntries])
	ids, old := mp.ids, mp.old
	// The move's scratch, one buffer (a fresh graph's first move took
	// seven allocations): the gathered entries (sources, columns, weights,
	// results), the movers' dictionary entries should the move fail, the
	// chunks' room and the tables' cursors. The chunks' room is for the old
	// tables (within the arena's nslabs buckets) and, should the move fail,
	// the new ones (buckets): taken here, so that a failed move's release
	// allocates nothing.
	var l gpurt.Layout
	pSrc := gpurt.Place[uint32](&l, entries)
	pCols := gpurt.Place[uint32](&l, entries)
	pVals := gpurt.Place[uint8](&l, entries*g.wbytes)
	pRes := gpurt.Place[uint8](&l, entries)
	pCur := gpurt.Place[uint32](&l, movers*vertexWords)
	pItems := gpurt.Place[uint64](&l, chunkItems(max(g.nslabs, buckets)))
	pCursor := gpurt.Place[uint64](&l, movers)
	mem, err := l.Get(&g.rMove, g.dev, g.stream)
	if err != nil {
		return err
	}
	src, cols, res, cur, items, cursor := pSrc.In(mem), pCols.In(mem), pRes.In(mem), pCur.In(mem), pItems.In(mem), pCursor.In(mem)
	var vals cuda.DevicePtr
	if g.wbytes > 0 {
		vals = pVals.In(mem).Ptr()
	}
	if err := cursor.Zero(g.stream); err != nil {
		return waitAfter(g.stream, err)
	}
	if err := g.zeroCtrl(); err != nil {
		return err
	}
	if err := g.launch(g.fGatherTables, tiles(movers), g.arena, old, ids, uint64(movers), g.pool.Descriptor(), mp.rows, uint32(1), src, cols, vals, uint64(entries), items, uint64(items.Len()), uint32(chunkBuckets), g.ctrl); err != nil {
		return waitAfter(g.stream, err)
	}
	if err := g.launch(g.fGatherChunks, tiles(items.Len()), g.arena, old, ids, g.pool.Descriptor(), mp.rows, uint32(1), src, cols, vals, items, uint64(items.Len()), uint32(chunkBuckets), cursor, g.ctrl); err != nil {
		return waitAfter(g.stream, err)
	}
	if err := g.readCtrl(); err != nil {
		return err
	}
	if err := gpurt.StatusError("rehash gather", uint32(g.host[gpurt.CtrlStatus])); err != nil {
		return err
	}
	// New buckets for the movers; nothing is lost until the insert is done.
	first := g.nslabs
	if err := g.reserveArena(first + buckets); err != nil {
		return err
	}
	g.ownerOK = false
	if err := g.launch(g.fRehashDict, int64(movers), ids, uint64(movers), mp.size, mp.base, uint64(first), old, g.dict); err != nil {
		return waitAfter(g.stream, err)
	}
	g.nslabs = first + buckets
	live0 := g.live.Load()
	g.live.Add(-int64(entries)) // the insert counts them back
	err = g.run(context.WithoutCancel(ctx), opInsert, src.Sub(0, entries), cols.Sub(0, entries), vals, res.Sub(0, entries), entries, 0, entries/28+256, false)
	release := func(tabs cuda.Slice[uint32]) error {
		if err := g.zeroCtrl(); err != nil {
			return err
		}
		rel, err := g.pool.Acquire()
		if err != nil {
			return err
		}
		defer rel()
		if err := g.launch(g.fRelease, tiles(movers), g.arena, tabs, uint64(movers), g.pool.Descriptor(), items, uint64(items.Len()), uint32(chunkBuckets), g.ctrl); err != nil {
			return waitAfter(g.stream, err)
		}
		if err := g.launch(g.fReleaseChunks, tiles(items.Len()), g.arena, tabs, g.pool.Descriptor(), items, uint64(items.Len()), uint32(chunkBuckets), g.ctrl); err != nil {
			return waitAfter(g.stream, err)
		}
		if err := g.readCtrl(); err != nil {
			return err
		}
		return gpurt.StatusError("rehash release", uint32(g.host[gpurt.CtrlStatus]))
	}
	if err != nil {
		// Restore the old tables (whose lists are untouched), then give
		// the new ones back: should that fail, they are only orphans.
		cerr := g.launch(g.fPick, int64(movers), g.dict, ids, uint64(movers), cur)
		if cerr == nil {
			cerr = g.launch(g.fRehashDict, int64(movers), ids, uint64(movers), cuda.DevicePtr(0), cuda.DevicePtr(0), uint64(0), old, g.dict)
		}
		if cerr == nil {
			cerr = release(cur)
		}
		if cerr == nil {
			cerr = gpurt.Wait(g.stream)
		}
		g.live.Store(live0)
		return errors.Join(fmt.Errorf("rehash: %w", err), cerr)
	}
	return release(old)
}

func (g *gpuGraph[W]) flush(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.zeroCtrl(); err != nil {
		return err
	}
	release, err := g.pool.Acquire()
	if err != nil {
		return err
	}
	defer release()
	if g.nslabs > 0 {
		if err := g.launch(g.fFlush, tiles(g.nslabs), g.arena, uint32(g.nslabs), g.pool.Descriptor(), g.ctrl); err != nil {
			return waitAfter(g.stream, err)
		}
	}
	if err := g.readCtrl(); err != nil {
		return err
	}
	if err := gpurt.StatusError("flush", uint32(g.host[gpurt.CtrlStatus])); err != nil {
		return err
	}
	// The device scratch kept between calls goes too (readCtrl waited for
	// the stream: nothing queued uses it); the next call that needs it
	// allocates it again.
	gpurt.FreeAll(g)
	g.ownerOK = false
	g.cntZero = false            // the plan's counts go with rPlan
	g.bCountZero = false         // and the build's with bCount (new memory may come back at the old address)
	g.res2 = cuda.Slice[uint8]{} // with bPrep
	return nil
}

// census walks every list (gr_census): per-vertex live entries (when
// live is given), overflow slabs, the longest list, the self-loops.
type censusOut struct {
	overflow, longest, loops, holes uint64
}

func (g *gpuGraph[W]) census(live cuda.DevicePtr) (censusOut, error) {
	if err := g.zeroCtrl(); err != nil {
		return censusOut{}, err
	}
	release, err := g.pool.Acquire()
	if err != nil {
		return censusOut{}, err
	}
	defer release()
	if g.nslabs > 0 {
		if err := g.launch(g.fCensus, tiles(g.nv), g.arena, g.dict, uint64(g.nv), g.pool.Descriptor(), live, g.ctrl); err != nil {
			return censusOut{}, waitAfter(g.stream, err)
		}
	}
	if err := g.readCtrl(); err != nil {
		return censusOut{}, err
	}
	c := g.host
	return censusOut{overflow: c[gpurt.CtrlCount], longest: c[gpurt.CtrlFailed], loops: c[gpurt.CtrlInserted], holes: c[gpurt.CtrlDelta]},
		gpurt.StatusError("census", uint32(c[gpurt.CtrlStatus]))
}

func (g *gpuGraph[W]) hostDegrees() ([]uint32, error) {
	dict := make([]uint32, g.nv*vertexWords)
	if g.nv > 0 {
		if err := g.dict.Sub(0, len(dict)).CopyToHost(dict); err != nil {
			return nil, err
		}
	}
	d := make([]uint32, g.nv)
	for v := range d {
		d[v] = dict[v*vertexWords+2]
	}
	return d, nil
}

func (g *gpuGraph[W]) stats(ctx context.Context) (Stats, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	cs, err := g.census(0)
	if err != nil {
		return Stats{}, err
	}
	deg, err := g.hostDegrees()
	if err != nil {
		return Stats{}, err
	}
	st := Stats{Backend: warpkit.CUDA, Vertices: g.nv, Entries: uint64(g.live.Load()), SelfLoopsSkipped: g.selfSkips,
		Buckets: uint64(g.nslabs), OverflowSlabs: cs.overflow, LongestList: int(cs.longest)}
	for _, d := range deg {
		st.MaxDegree = max(st.MaxDegree, d)
	}
	st.Edges = st.Entries
	if !g.directed {
		st.Edges = (st.Entries-cs.loops)/2 + cs.loops
	}
	st.Bytes = int64(g.nv)*vertexWords*4 + int64(g.nslabs)*int64(g.slabBytes) + int64(cs.overflow)*int64(g.slabBytes)
	st.ScratchBytes = gpurt.DeviceBytes(g)
	return st, nil
}

// check verifies the device structure: every list walks to its end, each
// vertex's live entries are its degree, the degrees sum to the live count,
// the overflow slabs linked are the pool's allocated units; then, on the
// CSR copied out, the invariants Check states (checkCSR).
func (g *gpuGraph[W]) check(ctx context.Context) error {
	err := func() error {
		g.mu.Lock()
		defer g.mu.Unlock()
		live, err := cuda.Alloc[uint32](g.dev, max(1, g.nv))
		if err != nil {
			return err
		}
		defer live.Free()
		if err := live.Zero(g.stream); err != nil {
			return waitAfter(g.stream, err)
		}
		cs, err := g.census(live.Ptr())
		if err != nil {
			return err
		}
		counted := make([]uint32, g.nv)
		if g.nv > 0 {
			if err := live.Sub(0, g.nv).CopyToHost(counted); err != nil {
				return err
			}
		}
		deg, err := g.hostDegrees()
		if err != nil {
			return err
		}
		if cs.holes != 0 {
			return fmt.Errorf("%d slabs hold an empty slot before an entry or a next slab (the frontier rule)", cs.holes)
		}
		var sum int64
		for v, d := range deg {
			if counted[v] != d {
				return fmt.Errorf("vertex %d: degree %d, its table holds %d entries", v, d, counted[v])
			}
			sum += int64(d)
		}
		if sum != g.live.Load() {
			return fmt.Errorf("degrees sum to %d entries, the count says %d", sum, g.live.Load())
		}
		ps, err := g.pool.Stats(ctx)
		if err != nil {
			return err
		}
		if uint64(ps.Allocated) != cs.overflow {
			return fmt.Errorf("%d overflow slabs linked, the pool has %d allocated", cs.overflow, ps.Allocated)
		}
		return nil
	}()
	if err != nil {
		return err
	}
	c, ws, err := g.csr(ctx, true)
	if err != nil {
		return err
	}
	return checkCSR(c, ws, g.directed, g.selfLoops)
}

func (g *gpuGraph[W]) vertices() int { return g.nv }

func (g *gpuGraph[W]) entries() int64 { return g.live.Load() }

func (g *gpuGraph[W]) ensureVertices(n int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ensure(n)
}

func (g *gpuGraph[W]) close() error {
	if g.prim != nil {
		g.prim.Close()
	}
	if g.pool != nil {
		g.pool.Close()
	}
	g.arenaMem.Free()
	g.dict.Free()
	g.gone.Free()
	g.lack.Free()
	g.ctrlBoth.Free()
	if g.ctrlPinned != nil {
		g.ctrlPinned.Free()
	}
	if g.ctrlRead != nil {
		g.ctrlRead.Free()
	}
	for _, e := range g.tcEvents {
		if e != nil {
			e.Close()
		}
	}
	gpurt.FreeAll(g)
	if g.stream != nil {
		g.stream.Close()
	}
	if g.ownDev {
		return g.dev.Close()
	}
	return nil
}

// checkCSR verifies, on a graph laid out as a CSR with sorted rows (and its
// weights, if any), what Check states: every neighbour is a vertex, no row
// repeats one, no self-loop unless allowed, and an undirected graph holds
// every edge both ways with one weight.
func checkCSR[W any](c *CSR, ws []W, directed, selfLoops bool) error {
	n := len(c.Offsets) - 1
	row := func(v uint32) []uint32 { return c.Cols[c.Offsets[v]:c.Offsets[v+1]] }
	for v := range n {
		r := row(uint32(v))
		for i, u := range r {
			switch {
			case int(u) >= n:
				return fmt.Errorf("vertex %d has neighbour %d past the capacity %d", v, u, n)
			case i > 0 && r[i-1] == u:
				return fmt.Errorf("vertex %d holds neighbour %d twice", v, u)
			case u == uint32(v) && !selfLoops:
				return fmt.Errorf("vertex %d has a self-loop", v)
			case !directed:
				j, ok := slices.BinarySearch(row(u), uint32(v))
				if !ok {
					return fmt.Errorf("edge %d-%d is stored one way only", v, u)
				}
				if len(ws) > 0 {
					a, b := ws[c.Offsets[v]+uint64(i)], ws[c.Offsets[u]+uint64(j)]
					if any(a) != any(b) {
						return fmt.Errorf("edge %d-%d has two weights, %v and %v", v, u, a, b)
					}
				}
			}
		}
	}
	return nil
}
