package graph

import (
	"fmt"
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/emu"
	"github.com/warpkit/warpkit/internal/gpurt"
	"github.com/warpkit/warpkit/internal/gputest"
	"github.com/warpkit/warpkit/prim"
)

// The CUDA backend's sources, for the CPU emulation of the GPU
// (internal/emu): its kernels and SlabAlloc's host-API kernels. prim's
// kernels run as host twins on an emulated device.
var sources = []string{"graph.cu", "../slaballoc/slaballoc.cu"}

// With WARPKIT_EMULATE=1 the GPU tests run on the emulation where there is
// no GPU.
func init() { gputest.Emulate(sources...) }

// TestEmulatedDifferential is TestDifferentialCUDA on the CPU emulation of
// the GPU: the CUDA backend's kernels (edge batches through the slab hash
// engine, vertex deletes, degrees, triangle counts) tested in every
// `go test`, with lanes interleaved as a warp's are.
func TestEmulatedDifferential(t *testing.T) {
	dev := emu.Device(t, emu.Options{}, sources...)
	seeds := uint64(3)
	if testing.Short() {
		seeds = 1
	}
	for _, directed := range []bool{false, true} {
		for _, selfLoops := range []bool{false, true} {
			t.Run(fmt.Sprintf("directed=%v/selfloops=%v", directed, selfLoops), func(t *testing.T) {
				for seed := range seeds {
					differential(t, warpkit.CUDA, dev, seed, directed, selfLoops)
				}
			})
		}
	}
}

// TestEmulatedDeviceBatches is TestCUDADeviceBatches on the emulation.
func TestEmulatedDeviceBatches(t *testing.T) {
	deviceBatches(t, emu.Device(t, emu.Options{}, sources...))
}

// TestEmulatedTablesOnDemand is TestCUDATablesOnDemand on the emulation.
func TestEmulatedTablesOnDemand(t *testing.T) {
	tablesOnDemand(t, emu.Device(t, emu.Options{}, sources...))
}

// TestEmulatedGrowForCounts is TestCUDAGrowForCounts on the emulation.
func TestEmulatedGrowForCounts(t *testing.T) {
	growForCounts(t, emu.Device(t, emu.Options{}, sources...))
}

// TestEmulatedInsertBothExhausted is TestCUDAInsertBothExhausted on the
// emulation.
func TestEmulatedInsertBothExhausted(t *testing.T) {
	insertBothExhausted(t, emu.Device(t, emu.Options{}, sources...))
}

// TestEmulatedInsertStoppedBeforeApply is TestCUDAInsertStoppedBeforeApply
// on the emulation.
func TestEmulatedInsertStoppedBeforeApply(t *testing.T) {
	insertStoppedBeforeApply(t, emu.Device(t, emu.Options{}, sources...))
}

// TestEmulatedGatherShapes is TestCUDAGatherShapes on the emulation.
func TestEmulatedGatherShapes(t *testing.T) {
	gatherShapes(t, emu.Device(t, emu.Options{}, sources...))
}

// TestEmulatedMoveChunks is TestCUDAMoveChunks on the emulation.
func TestEmulatedMoveChunks(t *testing.T) {
	moveChunks(t, emu.Device(t, emu.Options{}, sources...))
}

// TestEmulatedPlanCap: a plan that finds more movers than the host made
// room for writes none past it and says so (kStatusOverflow), and the
// graph's next Rehash, with room for them all, moves them.
func TestEmulatedPlanCap(t *testing.T) {
	dev := emu.Device(t, emu.Options{}, sources...)
	const nv, deg = 96, 40
	g, err := New(Options{Backend: warpkit.CUDA, Device: dev, VertexCapacity: nv})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var s, d []uint32
	for v := uint32(0); v < nv; v++ {
		for k := uint32(1); k <= deg; k++ {
			s, d = append(s, v), append(d, (v+k)%nv)
		}
	}
	if err := g.InsertEdges(t.Context(), s, d, nil); err != nil { // one bucket each: long lists
		t.Fatal(err)
	}
	e := g.e.(*gpuGraph[struct{}])
	func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		const room = 3
		_, mp, err := e.planScratch(room)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.ctrlPlan.Zero(e.stream); err != nil {
			t.Fatal(err)
		}
		if err := e.launch(e.fRehashPlan, int64(e.nv), e.dict, uint64(e.nv), uint32(slotsPerBucket), e.per1000(), uint32(1000),
			mp.ids, mp.old, mp.size, mp.base, mp.rows, uint64(room), e.ctrlPlan, e.planTotals()); err != nil {
			t.Fatal(err)
		}
		plan, err := e.readPlan()
		if err != nil {
			t.Fatal(err)
		}
		if plan[gpurt.CtrlCount] <= room || uint32(plan[gpurt.CtrlStatus])&gpurt.StatusOverflow == 0 {
			t.Fatalf("%d movers in room for %d: status %#x, want StatusOverflow", plan[gpurt.CtrlCount], room, plan[gpurt.CtrlStatus])
		}
	}()
	if err := g.Rehash(t.Context()); err != nil {
		t.Fatal(err)
	}
	st, err := g.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st.LongestList > 2 || st.Entries != 2*nv*deg {
		t.Fatalf("after Rehash: longest list %d, %d entries", st.LongestList, st.Entries)
	}
	if err := g.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestEmulatedArenaInPlace is TestCUDAArenaInPlace on the emulation.
func TestEmulatedArenaInPlace(t *testing.T) {
	arenaInPlace(t, emu.Device(t, emu.Options{}, sources...))
}

// TestEmulatedBuildCalls: a build from a device batch waits for the device
// twice — once for the buckets' total with the IDs' and the symmetry's
// verdicts, once for the apply launch's status — besides a last look at
// the idle stream, and a rebuild of a graph of the same size allocates
// nothing (each wait and allocation is tens of microseconds: most of a
// small graph's build). prim's scan is counted apart (on the emulation it
// runs as a host twin, with copies and waits of its own).
func TestEmulatedBuildCalls(t *testing.T) {
	dev := emu.Device(t, emu.Options{}, sources...)
	const nv = 3000
	var src, dst []uint32
	for v := uint32(0); v+1 < nv; v++ {
		src, dst = append(src, v, v+1), append(dst, v+1, v) // both directions listed
	}
	for _, directed := range []bool{false, true} {
		t.Run(fmt.Sprintf("directed=%v", directed), func(t *testing.T) {
			opts := Options{Backend: warpkit.CUDA, Device: dev, Directed: directed, VertexCapacity: nv, MaxPoolBytes: 4 << 20}
			g, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			ds, err := cuda.FromHost(dev, src)
			if err != nil {
				t.Fatal(err)
			}
			defer ds.Free()
			dd, err := cuda.FromHost(dev, dst)
			if err != nil {
				t.Fatal(err)
			}
			defer dd.Free()
			e := g.e.(*gpuGraph[struct{}])
			var calls [2]cuda.Calls
			for i := range calls {
				before := dev.Calls()
				if err := g.BuildDevice(t.Context(), nv, ds, dd); err != nil {
					t.Fatal(err)
				}
				calls[i] = dev.Calls().Sub(before)
			}
			// The scan's own calls, on slices of the build's size.
			nb, err := cuda.Alloc[uint64](dev, nv+1)
			if err != nil {
				t.Fatal(err)
			}
			defer nb.Free()
			before := dev.Calls()
			if err := prim.ExclusiveScan(e.prim, e.stream, nb.Sub(0, nv), nb.Sub(0, nv), nb.Sub(nv, nv+1)); err != nil {
				t.Fatal(err)
			}
			scan := dev.Calls().Sub(before)
			first, again := calls[0].Sub(scan), calls[1].Sub(scan)
			t.Logf("first build %+v, rebuild %+v (scan %+v)", first, again, scan)
			if again.Waits > 3 || first.Waits > 3 {
				t.Errorf("a build waited %d / %d times, want at most 3 (two reads and a look at the idle stream)", first.Waits, again.Waits)
			}
			if again.SyncCopies != 0 || again.Allocs != 0 || again.Frees != 0 {
				t.Errorf("a rebuild made synchronous copies, allocations or frees: %+v", again)
			}
			if again.Launches > 8 { // gr_settle after the placing prep
				t.Errorf("a rebuild launched %d kernels besides the scan, want at most 8", again.Launches)
			}
			if again.Memsets > 3 || again.Copies > 2 {
				t.Errorf("a rebuild made %d memsets and %d copies besides the scan, want at most 3 and 2", again.Memsets, again.Copies)
			}
			if n, err := g.Len(t.Context()); err != nil || n != len(src) { // entries: both directions either way
				t.Fatalf("the build holds %d entries (%v)", n, err)
			}
			// A rebuild of other edges over the counts the last build left
			// (gr_buckets zeroes them for it) sizes its tables as a fresh
			// graph does.
			var hs, hd []uint32
			for v := uint32(1); v < 40; v++ {
				hs, hd = append(hs, 0, v), append(hd, v, 0) // a hub of 39
			}
			fresh, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			defer fresh.Close()
			for _, h := range []*Graph{g, fresh} {
				if err := h.Build(t.Context(), hs, hd); err != nil {
					t.Fatal(err)
				}
			}
			sg, err := g.Stats(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			sf, err := fresh.Stats(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if sg.Buckets != sf.Buckets || sg.Entries != sf.Entries {
				t.Errorf("a rebuild over another build's counts: %d buckets, %d entries; a fresh graph %d, %d", sg.Buckets, sg.Entries, sf.Buckets, sf.Entries)
			}
			// A vertex deleted before a rebuild is a vertex again after it.
			if err := g.DeleteVertices(t.Context(), []uint32{0}); err != nil {
				t.Fatal(err)
			}
			if err := g.Build(t.Context(), hs, hd); err != nil {
				t.Fatal(err)
			}
			found := make([]bool, 2)
			if err := g.HasEdges(t.Context(), []uint32{0, 5}, []uint32{5, 0}, found); err != nil || !found[0] || !found[1] {
				t.Errorf("the hub deleted before a rebuild: edges found %v (%v)", found, err)
			}
			deg := make([]uint32, 1)
			if err := g.Degrees(t.Context(), []uint32{0}, deg); err != nil || deg[0] != 39 {
				t.Errorf("the hub deleted before a rebuild has degree %d (%v), want 39", deg[0], err)
			}
		})
	}
}

// TestEmulatedPlacedBuild is TestCUDAPlacedBuild on the emulation.
func TestEmulatedPlacedBuild(t *testing.T) {
	placedBuild(t, emu.Device(t, emu.Options{}, sources...))
}

// TestEmulatedBuildSizing is TestCUDABuildSizing on the emulation.
func TestEmulatedBuildSizing(t *testing.T) {
	buildSizing(t, emu.Device(t, emu.Options{}, sources...))
}
