package mvbtree

import (
	"fmt"
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/emu"
	"github.com/warpkit/warpkit/internal/gputest"
	"github.com/warpkit/warpkit/internal/kernelgen/ptxcheck"
)

func TestPTXUpToDate(t *testing.T) { ptxcheck.Check(t, "mvbtree.ptx") }

// The CUDA backend's sources, for the CPU emulation of the GPU
// (internal/emu): its kernels and SlabAlloc's host-API kernels.
var sources = []string{"mvbtree.cu", "../slaballoc/slaballoc.cu"}

// With WARPKIT_EMULATE=1 the GPU tests run on the emulation where there is
// no GPU.
func init() { gputest.Emulate(sources...) }

// emuDevice opens an emulated device for a test.
func emuDevice(t testing.TB) *cuda.Device { return emu.Device(t, emu.Options{}, sources...) }

// gpuTreeOn returns a constructor of CUDA-backend trees on dev, checked and
// closed at the test's end.
func gpuTreeOn[K, V warpkit.Word](dev *cuda.Device, opts Options) func(testing.TB) *Tree[K, V] {
	return func(t testing.TB) *Tree[K, V] {
		t.Helper()
		opts.Backend, opts.Device = warpkit.CUDA, dev
		if opts.MaxPoolBytes == 0 {
			opts.MaxPoolBytes = 64 << 20
		}
		tr, err := New[K, V](opts)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Backend() != warpkit.CUDA {
			t.Fatalf("backend %v", tr.Backend())
		}
		t.Cleanup(func() { tr.Close() })
		return tr
	}
}

// TestEmulatedDifferential runs the differential test on the CUDA backend,
// emulated: every query of the latest version and of every open snapshot
// against the model, exactly, with Check after every step.
func TestEmulatedDifferential(t *testing.T) {
	dev := emuDevice(t)
	steps := 60
	if testing.Short() {
		steps = 25
	}
	t.Run("u32", func(t *testing.T) { differential(t, 1<<12, gpuTreeOn[uint32, uint32](dev, Options{}), 2, steps) })
	t.Run("u64", func(t *testing.T) { differential(t, 1<<12, gpuTreeOn[uint64, uint64](dev, Options{}), 1, steps) })
	t.Run("u32-full-range", func(t *testing.T) { differential(t, 0, gpuTreeOn[uint32, uint64](dev, Options{}), 1, steps) })
	// CopyAlways: its plain batches (PlainCopy) between the snapshots.
	t.Run("copy-always", func(t *testing.T) { differentialCopyAlways(t, dev, 1<<12, steps) })
	// The versioning kernels where no snapshot is open, as every batch ran
	// before plain batches (which now take those).
	t.Run("u32-no-plain", func(t *testing.T) {
		defer func(v bool) { noPlainWrites = v }(noPlainWrites)
		noPlainWrites = true
		differential(t, 1<<12, gpuTreeOn[uint32, uint32](dev, Options{}), 1, steps)
	})
}

// TestEmulatedValidatedReads runs the differential test with every query
// taking the path of queries beside writers (heads read with the seqlock,
// each tile walking its own chains), which otherwise only races reach.
func TestEmulatedValidatedReads(t *testing.T) {
	dev := emuDevice(t)
	defer func(v bool) { validateReads = v }(validateReads)
	validateReads = true
	steps := 40
	if testing.Short() {
		steps = 20
	}
	t.Run("u32", func(t *testing.T) { differential(t, 1<<12, gpuTreeOn[uint32, uint32](dev, Options{}), 2, steps) })
	t.Run("u64", func(t *testing.T) { differential(t, 1<<12, gpuTreeOn[uint64, uint64](dev, Options{}), 1, steps) })
}

// TestEmulatedSnapshotsBesideWriters: whole batches only, snapshots stable
// while open, the registry empty at the end — on the CUDA backend.
func TestEmulatedSnapshotsBesideWriters(t *testing.T) {
	dev := emuDevice(t)
	defer func(p bool) { poisonFreed = p }(poisonFreed)
	poisonFreed = true // a version freed while a reader holds it answers wrong
	snapshotsBesideWriters(t, gpuTreeOn[uint32, uint32](dev, Options{})(t), 40, 4)
}

func TestEmulatedAscendBesideWrites(t *testing.T) {
	ascendBesideWrites(t, gpuTreeOn[uint64, uint64](emuDevice(t), Options{})(t))
}

// TestEmulatedVersions: the copy rules, the pinned versions and their
// reclamation (writers splice, Vacuum reaches the rest), with Restamp under
// a tiny stamp limit and freed units poisoned.
func TestEmulatedVersions(t *testing.T) {
	dev := emuDevice(t)
	for _, mode := range []CopyMode{CopyWhenPinned, CopyAlways, CopyIfStale} {
		t.Run(mode.String(), func(t *testing.T) { testVersions(t, gpuTreeOn[uint32, uint32](dev, Options{Copy: mode})(t), mode) })
	}
}

// TestEmulatedRestampAndPoison runs the differential test with stamps
// renumbered every few snapshots and every freed unit overwritten first: a
// reader that reached a freed version, or a snapshot whose view Restamp
// moved, would answer wrong.
func TestEmulatedRestampAndPoison(t *testing.T) {
	dev := emuDevice(t)
	defer func(l uint32, p bool) { restampLimit, poisonFreed = l, p }(restampLimit, poisonFreed)
	restampLimit, poisonFreed = 6, true
	steps := 50
	if testing.Short() {
		steps = 20
	}
	differential(t, 1<<10, gpuTreeOn[uint32, uint32](dev, Options{}), 1, steps)
}

// TestEmulatedPoolExhausted: a pool capped at a few thousand nodes runs
// out in an insert batch and in the copies a snapshot forces; the batch
// fails with ErrPoolExhausted, the tree stays valid and the snapshot keeps
// its view.
func TestEmulatedPoolExhausted(t *testing.T) {
	dev := emuDevice(t)
	for _, mode := range []CopyMode{CopyWhenPinned, CopyAlways} { // CopyAlways: PlainCopy's batches run out
		t.Run(mode.String(), func(t *testing.T) {
			testPoolExhausted(t, gpuTreeOn[uint32, uint32](dev, Options{MaxPoolBytes: 2 * 1024 * 128, Copy: mode})(t))
		})
	}
}

func TestEmulatedDeviceMethods(t *testing.T) {
	dev := emuDevice(t)
	testDeviceMethods(t, dev, gpuTreeOn[uint64, uint32](dev, Options{})(t))
}

func TestEmulatedRestamp(t *testing.T) {
	testRestamp(t, gpuTreeOn[uint32, uint32](emuDevice(t), Options{})(t))
}

// TestEmulatedGenerationsBesideClose: snapshots of older generations close
// beside Check, Stats, Vacuum and writers; the generations go when the last
// snapshot does, freed under the tree's exclusive lock.
func TestEmulatedGenerationsBesideClose(t *testing.T) {
	generationsBesideClose(t, gpuTreeOn[uint32, uint32](emuDevice(t), Options{})(t), 4)
}

func TestEmulatedRestampFailsPartWay(t *testing.T) {
	restampFailsPartWay(t, gpuTreeOn[uint32, uint32](emuDevice(t), Options{})(t))
}

func TestEmulatedVersionIndexes(t *testing.T) {
	dev := emuDevice(t)
	for _, rounds := range []int{10, 34} {
		t.Run(fmt.Sprint("u32-", rounds), func(t *testing.T) { testVersionIndexes(t, gpuTreeOn[uint32, uint32](dev, Options{})(t), rounds, true) })
		t.Run(fmt.Sprint("u64-", rounds), func(t *testing.T) { testVersionIndexes(t, gpuTreeOn[uint64, uint64](dev, Options{})(t), rounds, true) })
	}
}

func TestEmulatedNoVersionIndexes(t *testing.T) {
	testNoVersionIndexes(t, gpuTreeOn[uint32, uint32](emuDevice(t), Options{NoVersionIndexes: true})(t))
}

func TestEmulatedIndexedCopyAlways(t *testing.T) {
	testIndexedCopyAlways(t, gpuTreeOn[uint32, uint32](emuDevice(t), Options{Copy: CopyAlways})(t))
}

func TestEmulatedIndexesLogFull(t *testing.T) {
	testIndexesLogFull(t, gpuTreeOn[uint32, uint32](emuDevice(t), Options{})(t))
}

func TestEmulatedPlainWrites(t *testing.T) {
	dev := emuDevice(t)
	testPlainWrites(t, func(o Options) func(testing.TB) *Tree[uint32, uint32] { return gpuTreeOn[uint32, uint32](dev, o) })
}

func TestEmulatedInsertRounds(t *testing.T) {
	dev := emuDevice(t)
	testInsertRounds(t, func(o Options) func(testing.TB) *Tree[uint32, uint32] { return gpuTreeOn[uint32, uint32](dev, o) })
}

// TestEmulatedVacuumPins: after Vacuum every linked version is one an open
// snapshot sees, under each copy rule (chains long enough for indexes).
func TestEmulatedVacuumPins(t *testing.T) {
	dev := emuDevice(t)
	for _, mode := range []CopyMode{CopyWhenPinned, CopyAlways, CopyIfStale} {
		t.Run(mode.String(), func(t *testing.T) { testVacuumPins(t, gpuTreeOn[uint32, uint32](dev, Options{Copy: mode})(t)) })
	}
}

// TestEmulatedRangeBesideWriters: the latest version's Range and
// iterators beside writers, each answer one state of the tree; iterators
// fetch 64 pairs at a time, so that one walks many chunks of its transient
// snapshot.
func TestEmulatedRangeBesideWriters(t *testing.T) {
	defer func(c int) { ascendChunk = c }(ascendChunk)
	ascendChunk = 64
	gens := 24
	if testing.Short() {
		gens = 12
	}
	rangeBesideWriters(t, gpuTreeOn[uint32, uint32](emuDevice(t), Options{})(t), 128, gens, 60, 6)
}
