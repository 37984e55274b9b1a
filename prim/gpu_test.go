package prim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/gputest"
)

var (
	engineOnce sync.Once
	sharedEng  *Engine
	engineErr  error
)

// gpuEngine returns an Engine on device 0 shared by the whole test binary (one
// JIT compile of the kernels), or skips without a device.
func gpuEngine(t testing.TB) *Engine {
	t.Helper()
	gputest.Device(t) // skips without a device
	engineOnce.Do(func() {
		dev, err := cuda.Open(0) // held for the process: the context and module stay loaded
		if err != nil {
			engineErr = err
			return
		}
		sharedEng, engineErr = NewEngine(dev)
	})
	if engineErr != nil {
		t.Fatalf("prim engine: %v", engineErr)
	}
	return sharedEng
}

// upload copies host data to a new device slice freed at cleanup.
func upload[T cuda.Elem](t testing.TB, e *Engine, host []T) cuda.Slice[T] {
	t.Helper()
	s, err := cuda.FromHost(e.Device(), host)
	if err != nil {
		t.Fatalf("upload of %d elements: %v", len(host), err)
	}
	t.Cleanup(func() { s.Free() })
	return s
}

// alloc returns a device slice of n elements filled with a marker byte.
func alloc[T cuda.Elem](t testing.TB, e *Engine, n int) cuda.Slice[T] {
	t.Helper()
	s, err := cuda.Alloc[T](e.Device(), max(n, 1))
	if err != nil {
		t.Fatalf("alloc of %d elements: %v", n, err)
	}
	t.Cleanup(func() { s.Free() })
	if err := s.FillBytes(0xa5, nil); err != nil {
		t.Fatal(err)
	}
	return s.Sub(0, n)
}

func download[T cuda.Elem](t testing.TB, s cuda.Slice[T]) []T {
	t.Helper()
	out, err := s.ToHost()
	if err != nil {
		t.Fatalf("download: %v", err)
	}
	return out
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// gpuSortSizes cover the one-warp, one-block and multi-pass paths, tile
// boundaries (4096 / 3072 keys) and non-multiples.
var gpuSortSizes = []int{0, 1, 2, 31, 32, 33, 100, 1023, 1024, 1025, 3071, 3072, 3073, 4095, 4096, 4097, 8192, 12289, 100007, 1<<20 + 13}

func TestGPUSort(t *testing.T) {
	e := gpuEngine(t)
	t.Run("k32_v0", func(t *testing.T) { testGPUSort[uint32, uint32](t, e, false) })
	t.Run("k64_v0", func(t *testing.T) { testGPUSort[uint64, uint32](t, e, false) })
	t.Run("k32_v32", func(t *testing.T) { testGPUSort[uint32, uint32](t, e, true) })
	t.Run("k32_v64", func(t *testing.T) { testGPUSort[uint32, uint64](t, e, true) })
	t.Run("k64_v32", func(t *testing.T) { testGPUSort[uint64, uint32](t, e, true) })
	t.Run("k64_v64", func(t *testing.T) { testGPUSort[uint64, uint64](t, e, true) })
}

func testGPUSort[K, V warpkit.Word](t *testing.T, e *Engine, pairs bool) {
	rng := rand.New(rand.NewPCG(11, uint64(keyBits[K]()+sizeOf[V]())))
	for _, n := range gpuSortSizes {
		pats, opts := patterns, bitRanges[K]()
		if n > 200000 {
			pats, opts = []string{"random", "equal", "reverse"}, opts[:3]
		}
		for _, pat := range pats {
			for _, opt := range opts {
				checkGPUSort[K, V](t, e, rng, n, pat, opt, pairs)
			}
		}
	}
}

// checkGPUSort sorts n keys of the pattern (with values when pairs) on the
// device and compares the result with the host twin's.
func checkGPUSort[K, V warpkit.Word](t *testing.T, e *Engine, rng *rand.Rand, n int, pat string, opt SortOptions, pairs bool) {
	t.Helper()
	name := fmt.Sprintf("n=%d/%s/bits=%v", n, pat, opt)
	keys, vals := genKeys[K](rng, n, pat), genVals[V](n)
	wantK, wantV := slices.Clone(keys), slices.Clone(vals)
	SortPairsHost(wantK, wantV, opt)
	dk := upload(t, e, keys)
	if pairs {
		dv := upload(t, e, vals)
		must(t, SortPairs(e, nil, dk, dv, opt))
		mustEqual(t, name+" keys", download(t, dk), wantK)
		mustEqual(t, name+" values", download(t, dv), wantV)
	} else {
		must(t, SortKeys(e, nil, dk, opt))
		mustEqual(t, name+" keys", download(t, dk), wantK)
	}
}

// TestGPUSortFused covers the fused sort (every pass in one launch): sizes
// around both of its limits for every width, every bit range (an odd number
// of passes ends with a copy phase), against the host twin.
func TestGPUSortFused(t *testing.T) {
	e := gpuEngine(t)
	t.Run("k32_v0", func(t *testing.T) { testGPUSortFused[uint32, uint32](t, e, false) })
	t.Run("k64_v0", func(t *testing.T) { testGPUSortFused[uint64, uint32](t, e, false) })
	t.Run("k32_v32", func(t *testing.T) { testGPUSortFused[uint32, uint32](t, e, true) })
	t.Run("k32_v64", func(t *testing.T) { testGPUSortFused[uint32, uint64](t, e, true) })
	t.Run("k64_v32", func(t *testing.T) { testGPUSortFused[uint64, uint32](t, e, true) })
	t.Run("k64_v64", func(t *testing.T) { testGPUSortFused[uint64, uint64](t, e, true) })
}

// fusedSortSizes are the sizes around the fused sort's limits for keys K.
func fusedSortSizes[K warpkit.Word]() []int {
	tile, most := sortTileItems[K](), fusedSortMax[K]()
	small, smallMost := fusedSmallItems, fusedSmallMax
	return []int{blockSortMax, blockSortMax + 1, 5*small - 1, 5 * small, 7*small + 17, smallMost - 1, smallMost, smallMost + 1,
		2*tile - 1 + smallMost, 3*tile + 17 + smallMost, most - 1, most, most + 1}
}

func testGPUSortFused[K, V warpkit.Word](t *testing.T, e *Engine, pairs bool) {
	rng := rand.New(rand.NewPCG(21, uint64(keyBits[K]()+sizeOf[V]())))
	opts := append(bitRanges[K](), SortOptions{BeginBit: 3, EndBit: 27}) // three passes
	for _, n := range fusedSortSizes[K]() {
		pats := patterns
		if n > 100000 {
			pats = []string{"random", "equal", "lowbits"}
		}
		for _, pat := range pats {
			for _, opt := range opts {
				checkGPUSort[K, V](t, e, rng, n, pat, opt, pairs)
			}
		}
	}
}

// TestGPUSortFusedFewBlocks runs the fused sort with its grid capped at 1, 2
// and 3 blocks, far fewer than its tiles: each block then takes histogram,
// pass and copy items in turn, and every wait is on items it or another
// capped block took earlier. Without the cap the grid fills the device, so
// this case is reached only here.
func TestGPUSortFusedFewBlocks(t *testing.T) {
	dev := gpuEngine(t).Device()
	for _, blocks := range []int{1, 2, 3} {
		e, err := NewEngine(dev)
		must(t, err)
		e.fusedGridCap = blocks
		t.Run(fmt.Sprintf("grid%d/k32_v32", blocks), func(t *testing.T) { testGPUSortFusedCapped[uint32, uint32](t, e, true) })
		t.Run(fmt.Sprintf("grid%d/k64_v0", blocks), func(t *testing.T) { testGPUSortFusedCapped[uint64, uint32](t, e, false) })
		t.Run(fmt.Sprintf("grid%d/k64_v64", blocks), func(t *testing.T) { testGPUSortFusedCapped[uint64, uint64](t, e, true) })
		must(t, e.Close())
	}
}

func testGPUSortFusedCapped[K, V warpkit.Word](t *testing.T, e *Engine, pairs bool) {
	rng := rand.New(rand.NewPCG(23, uint64(keyBits[K]()+sizeOf[V]())))
	tile, most := sortTileItems[K](), fusedSortMax[K]()
	for _, n := range []int{blockSortMax + 1, 3*fusedSmallItems + 17, fusedSmallMax, fusedSmallMax + 3*tile + 17, most} {
		for _, opt := range []SortOptions{{}, {BeginBit: 3, EndBit: 27}} { // even and odd pass counts
			checkGPUSort[K, V](t, e, rng, n, "random", opt, pairs)
		}
	}
}

// TestGPUSortFusedBackToBack enqueues fused sorts of different sizes and
// pass counts on one stream without waiting in between: each clears the
// state the one before it left, so a mistake in that hand-over shows here.
func TestGPUSortFusedBackToBack(t *testing.T) {
	e := gpuEngine(t)
	s, err := e.Device().NewStream()
	must(t, err)
	defer s.Close()
	rng := rand.New(rand.NewPCG(22, 1))
	most := fusedSortMax[uint32]()
	type job struct {
		opt        SortOptions
		keys, vals []uint32
		dk, dv     cuda.Slice[uint32]
	}
	var jobs []*job
	for i, n := range []int{most, 5000, most - 7, 70001, 4097 * 3, most, 9000, 200003, most, 4097, fusedSmallMax, fusedSmallMax + 1, 131000} {
		opt := []SortOptions{{}, {BeginBit: 27, EndBit: 32}, {BeginBit: 3, EndBit: 27}, {BeginBit: 0, EndBit: 16}}[i%4]
		j := &job{opt: opt, keys: genKeys[uint32](rng, n, "random"), vals: genVals[uint32](n)}
		j.dk, j.dv = upload(t, e, j.keys), upload(t, e, j.vals)
		jobs = append(jobs, j)
	}
	for round := range 3 {
		for _, j := range jobs {
			must(t, SortPairs(e, s, j.dk, j.dv, j.opt))
		}
		must(t, s.Synchronize())
		for i, j := range jobs {
			if round == 0 {
				SortPairsHost(j.keys, j.vals, j.opt)
			}
			mustEqual(t, fmt.Sprintf("round %d job %d keys", round, i), download(t, j.dk), j.keys)
			mustEqual(t, fmt.Sprintf("round %d job %d values", round, i), download(t, j.dv), j.vals)
		}
	}
}

// TestGPUSortUnaligned sorts views that start one element into a buffer.
func TestGPUSortUnaligned(t *testing.T) {
	e := gpuEngine(t)
	rng := rand.New(rand.NewPCG(12, 1))
	for _, n := range []int{1000, 50001} {
		keys := genKeys[uint32](rng, n+1, "random")
		vals := genVals[uint64](n + 1)
		dk, dv := upload(t, e, keys), upload(t, e, vals)
		must(t, SortPairs(e, nil, dk.Sub(1, n+1), dv.Sub(1, n+1), SortOptions{}))
		wk, wv := slices.Clone(keys[1:]), slices.Clone(vals[1:])
		SortPairsHost(wk, wv, SortOptions{})
		gk, gv := download(t, dk), download(t, dv)
		if gk[0] != keys[0] || gv[0] != vals[0] {
			t.Fatalf("n=%d: element before the view was overwritten", n)
		}
		mustEqual(t, "keys", gk[1:], wk)
		mustEqual(t, "values", gv[1:], wv)
	}
}

func TestGPUSegmentedSort(t *testing.T) {
	e := gpuEngine(t)
	t.Run("k32_v0", func(t *testing.T) { testGPUSegSort[uint32, uint32](t, e, false) })
	t.Run("k64_v0", func(t *testing.T) { testGPUSegSort[uint64, uint32](t, e, false) })
	t.Run("k32_v32", func(t *testing.T) { testGPUSegSort[uint32, uint32](t, e, true) })
	t.Run("k32_v64", func(t *testing.T) { testGPUSegSort[uint32, uint64](t, e, true) })
	t.Run("k64_v32", func(t *testing.T) { testGPUSegSort[uint64, uint32](t, e, true) })
	t.Run("k64_v64", func(t *testing.T) { testGPUSegSort[uint64, uint64](t, e, true) })
}

func testGPUSegSort[K, V warpkit.Word](t *testing.T, e *Engine, pairs bool) {
	rng := rand.New(rand.NewPCG(13, uint64(keyBits[K]()+sizeOf[V]())))
	type layout struct {
		name string
		offs func(n int) []uint32
	}
	layouts := []layout{
		{"mixed", func(n int) []uint32 { return genOffsets(rng, n, 20000) }},
		{"tiny", func(n int) []uint32 { return genOffsets(rng, n, 40) }},
		{"one", func(n int) []uint32 { return []uint32{0, uint32(n)} }},
		{"empty-ends", func(n int) []uint32 { return []uint32{0, 0, 0, uint32(n / 2), uint32(n), uint32(n)} }},
	}
	for _, n := range []int{0, 1, 33, 1000, 5000, 70001, 300000} {
		for _, lay := range layouts {
			for _, pat := range []string{"random", "few", "equal", "reverse"} {
				for _, opt := range []SortOptions{{}, {BeginBit: 1, EndBit: keyBits[K]()}} {
					name := fmt.Sprintf("n=%d/%s/%s/%v", n, lay.name, pat, opt)
					keys := genKeys[K](rng, n, pat)
					vals := genVals[V](n)
					offs := lay.offs(n)
					wantK, wantV := slices.Clone(keys), slices.Clone(vals)
					SegmentedSortPairsHost(wantK, wantV, offs, opt)
					dk, doff := upload(t, e, keys), upload(t, e, offs)
					if pairs {
						dv := upload(t, e, vals)
						must(t, SegmentedSortPairs(e, nil, dk, dv, doff, opt))
						mustEqual(t, name+" keys", download(t, dk), wantK)
						mustEqual(t, name+" values", download(t, dv), wantV)
					} else {
						must(t, SegmentedSortKeys(e, nil, dk, doff, opt))
						mustEqual(t, name+" keys", download(t, dk), wantK)
					}
				}
			}
		}
	}
}

// TestGPUSegmentedSortBadOffsets: offsets that break the rules give some
// order but no fault (the context stays usable) and no write outside keys.
func TestGPUSegmentedSortBadOffsets(t *testing.T) {
	e := gpuEngine(t)
	rng := rand.New(rand.NewPCG(14, 1))
	keys := genKeys[uint32](rng, 5000, "random")
	buf := upload(t, e, slices.Concat(keys, []uint32{7, 7, 7}))
	offs := upload(t, e, []uint32{0, 4000, 100, 9000, 1 << 31, 3})
	must(t, SegmentedSortKeys(e, nil, buf.Sub(0, 5000), offs))
	got := download(t, buf)
	mustEqual(t, "guard after the keys", got[5000:], []uint32{7, 7, 7})
	// The device still works.
	d := upload(t, e, []uint32{3, 1, 2})
	must(t, SortKeys(e, nil, d, SortOptions{}))
	mustEqual(t, "sort after bad offsets", download(t, d), []uint32{1, 2, 3})
}

func TestGPUMerge(t *testing.T) {
	e := gpuEngine(t)
	t.Run("k32_v0", func(t *testing.T) { testGPUMerge[uint32, uint32](t, e, false, 0) })
	t.Run("k64_v0", func(t *testing.T) { testGPUMerge[uint64, uint32](t, e, false, ^uint64(1)) })
	t.Run("k32_v32", func(t *testing.T) { testGPUMerge[uint32, uint32](t, e, true, 0xfffffffe) })
	t.Run("k32_v64", func(t *testing.T) { testGPUMerge[uint32, uint64](t, e, true, 0) })
	t.Run("k64_v32", func(t *testing.T) { testGPUMerge[uint64, uint32](t, e, true, 0) })
	t.Run("k64_v64", func(t *testing.T) { testGPUMerge[uint64, uint64](t, e, true, ^uint64(1)) })
}

func testGPUMerge[K, V warpkit.Word](t *testing.T, e *Engine, pairs bool, mask K) {
	rng := rand.New(rand.NewPCG(15, uint64(keyBits[K]()+sizeOf[V]())))
	opt := MergeOptions[K]{KeyMask: mask}
	sizes := []int{0, 1, 7, 1792, 2816, 2817, 10000, 300001}
	for _, na := range sizes {
		for _, nb := range sizes {
			for _, dup := range []bool{false, true} {
				name := fmt.Sprintf("%d+%d dup=%v", na, nb, dup)
				ak, bk := sortedRun(rng, na, dup, opt.mask()), sortedRun(rng, nb, dup, opt.mask())
				av, bv := genVals[V](na), genVals[V](nb)
				for i := range bv {
					bv[i] ^= 1 << 30
				}
				wk, wv := make([]K, na+nb), make([]V, na+nb)
				MergePairsHost(ak, av, bk, bv, wk, wv, opt)
				dak, dbk, dok := upload(t, e, ak), upload(t, e, bk), alloc[K](t, e, na+nb)
				if pairs {
					dav, dbv, dov := upload(t, e, av), upload(t, e, bv), alloc[V](t, e, na+nb)
					must(t, MergePairs(e, nil, dak, dav, dbk, dbv, dok, dov, opt))
					mustEqual(t, name+" values", download(t, dov), wv)
				} else {
					must(t, MergeKeys(e, nil, dak, dbk, dok, opt))
				}
				mustEqual(t, name+" keys", download(t, dok), wk)
			}
		}
	}
}

// TestGPUMergeUnsorted: unsorted runs give an unspecified result, but no fault
// and no write outside the output.
func TestGPUMergeUnsorted(t *testing.T) {
	e := gpuEngine(t)
	rng := rand.New(rand.NewPCG(16, 1))
	a, b := genKeys[uint32](rng, 50000, "random"), genKeys[uint32](rng, 70000, "random")
	out := alloc[uint32](t, e, len(a)+len(b)+3)
	must(t, cuda.Fill(out, 9, nil))
	must(t, MergeKeys(e, nil, upload(t, e, a), upload(t, e, b), out.Sub(0, len(a)+len(b)), MergeOptions[uint32]{}))
	got := download(t, out)
	mustEqual(t, "guard after the output", got[len(a)+len(b):], []uint32{9, 9, 9})
}

var gpuScanSizes = []int{0, 1, 2, 255, 256, 2047, 2048, 2049, 4095, 4096, 4097, 3*4096 + 5, 1 << 16, 1<<20 + 13, 5_000_011}

func TestGPUExclusiveScan(t *testing.T) {
	e := gpuEngine(t)
	t.Run("32", func(t *testing.T) { testGPUScan[uint32](t, e) })
	t.Run("64", func(t *testing.T) { testGPUScan[uint64](t, e) })
}

func testGPUScan[T warpkit.Word](t *testing.T, e *Engine) {
	rng := rand.New(rand.NewPCG(17, uint64(sizeOf[T]())))
	for _, n := range gpuScanSizes {
		in := genKeys[T](rng, n, "random")
		want := make([]T, n)
		total := ExclusiveScanHost(in, want)
		din, dout, dtot := upload(t, e, in), alloc[T](t, e, n), alloc[T](t, e, 1)
		must(t, ExclusiveScan(e, nil, din, dout, dtot))
		mustEqual(t, fmt.Sprintf("n=%d scan", n), download(t, dout), want)
		mustEqual(t, fmt.Sprintf("n=%d total", n), download(t, dtot), []T{total})
		// In place, without a total.
		must(t, ExclusiveScan(e, nil, din, din, cuda.Slice[T]{}))
		mustEqual(t, fmt.Sprintf("n=%d in-place scan", n), download(t, din), want)
	}
}

// TestGPUExclusiveScanRepeated reruns large scans to shake out look-back
// ordering races, which would show as rare wrong prefixes.
func TestGPUExclusiveScanRepeated(t *testing.T) {
	e := gpuEngine(t)
	rng := rand.New(rand.NewPCG(20, 1))
	const n = 1<<22 + 77
	in32, in64 := genKeys[uint32](rng, n, "random"), genKeys[uint64](rng, n, "random")
	want32, want64 := make([]uint32, n), make([]uint64, n)
	ExclusiveScanHost(in32, want32)
	ExclusiveScanHost(in64, want64)
	d32, d64 := upload(t, e, in32), upload(t, e, in64)
	o32, o64 := alloc[uint32](t, e, n), alloc[uint64](t, e, n)
	for rep := range 25 {
		must(t, ExclusiveScan(e, nil, d32, o32, cuda.Slice[uint32]{}))
		must(t, ExclusiveScan(e, nil, d64, o64, cuda.Slice[uint64]{}))
		mustEqual(t, fmt.Sprintf("rep %d u32", rep), download(t, o32), want32)
		mustEqual(t, fmt.Sprintf("rep %d u64", rep), download(t, o64), want64)
	}
}

var gpuSelectSizes = []int{0, 1, 2, 100, 3071, 3072, 3073, 50000, 1<<20 + 13, 3_000_017}

func TestGPUSelect(t *testing.T) {
	e := gpuEngine(t)
	t.Run("k32", func(t *testing.T) { testGPUSelect[uint32, uint32](t, e, false) })
	t.Run("k64", func(t *testing.T) { testGPUSelect[uint64, uint32](t, e, false) })
	t.Run("k32_v32", func(t *testing.T) { testGPUSelect[uint32, uint32](t, e, true) })
	t.Run("k32_v64", func(t *testing.T) { testGPUSelect[uint32, uint64](t, e, true) })
	t.Run("k64_v32", func(t *testing.T) { testGPUSelect[uint64, uint32](t, e, true) })
	t.Run("k64_v64", func(t *testing.T) { testGPUSelect[uint64, uint64](t, e, true) })
}

func testGPUSelect[K, V warpkit.Word](t *testing.T, e *Engine, pairs bool) {
	rng := rand.New(rand.NewPCG(18, uint64(keyBits[K]()+sizeOf[V]())))
	for _, n := range gpuSelectSizes {
		for _, density := range []float64{0, 0.01, 0.5, 1} {
			for _, skew := range []int{0, 1} { // 1: flags start one byte into a buffer (no word loads)
				name := fmt.Sprintf("n=%d density=%v skew=%d", n, density, skew)
				keys, vals, flags := genKeys[K](rng, n, "random"), genVals[V](n), genFlags(rng, n, density)
				dk, dv := upload(t, e, keys), upload(t, e, vals)
				df := upload(t, e, slices.Concat(make([]uint8, skew), flags)).Sub(skew, skew+n)
				count := alloc[uint32](t, e, 1)

				wk, wv := make([]K, n), make([]V, n)
				c := SelectFlaggedPairsHost(keys, vals, flags, wk, wv)
				ok, ov := alloc[K](t, e, n), alloc[V](t, e, n)
				if pairs {
					must(t, SelectFlaggedPairs(e, nil, dk, dv, df, ok, ov, count))
					mustEqual(t, name+" selected values", download(t, ov)[:c], wv[:c])
				} else {
					must(t, SelectFlagged(e, nil, dk, df, ok, count))
				}
				mustEqual(t, name+" selected keys", download(t, ok)[:c], wk[:c])
				mustEqual(t, name+" count", download(t, count), []uint32{uint32(c)})

				// A short output keeps what fits, counts everything and writes
				// nothing past its end.
				short := alloc[K](t, e, c/2+1)
				must(t, cuda.Fill(short, 9, nil))
				must(t, SelectFlagged(e, nil, dk, df, short.Sub(0, c/2), count))
				mustEqual(t, name+" short output", download(t, short), append(slices.Clone(wk[:c/2]), 9))
				mustEqual(t, name+" short count", download(t, count), []uint32{uint32(c)})

				if pairs {
					sk, sv := make([]K, n), make([]V, n)
					c0 := Multisplit2PairsHost(keys, vals, flags, sk, sv)
					gk, gv := alloc[K](t, e, n), alloc[V](t, e, n)
					must(t, Multisplit2Pairs(e, nil, dk, dv, df, gk, gv, count))
					mustEqual(t, name+" split keys", download(t, gk), sk)
					mustEqual(t, name+" split values", download(t, gv), sv)
					mustEqual(t, name+" bucket 0", download(t, count), []uint32{uint32(c0)})
				}
			}
		}
	}
}

// TestGPUStreams runs sorts and scans on several streams from several
// goroutines at once; every result must match.
func TestGPUStreams(t *testing.T) {
	e := gpuEngine(t)
	const workers = 4
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- streamWorker(e, w)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func streamWorker(e *Engine, w int) error {
	s, err := e.Device().NewStream()
	if err != nil {
		return err
	}
	defer s.Close()
	rng := rand.New(rand.NewPCG(19, uint64(w)))
	for round := range 5 {
		n := 20000 + rng.IntN(300000)
		keys, vals := genKeys[uint32](rng, n, "random"), genVals[uint32](n)
		dk, err := cuda.FromHost(e.Device(), keys)
		if err != nil {
			return err
		}
		dv, err := cuda.FromHost(e.Device(), vals)
		if err != nil {
			dk.Free()
			return err
		}
		err = SortPairs(e, s, dk, dv, SortOptions{})
		if err == nil {
			err = ExclusiveScan(e, s, dv, dv, cuda.Slice[uint32]{})
		}
		if err = errors.Join(err, s.Synchronize()); err != nil {
			dk.Free()
			dv.Free()
			return err
		}
		gk, err1 := dk.ToHost()
		gv, err2 := dv.ToHost()
		dk.Free()
		dv.Free()
		if err := errors.Join(err1, err2); err != nil {
			return fmt.Errorf("worker %d round %d: %w", w, round, err)
		}
		SortPairsHost(keys, vals, SortOptions{})
		ExclusiveScanHost(vals, vals)
		if i := firstDiff(gk, keys); i >= 0 {
			return fmt.Errorf("worker %d round %d: keys differ at %d", w, round, i)
		}
		if i := firstDiff(gv, vals); i >= 0 {
			return fmt.Errorf("worker %d round %d: scanned values differ at %d", w, round, i)
		}
	}
	return nil
}

// TestGPUReleaseScratchWhileSorting frees a private Engine's scratch over and
// over while other goroutines enqueue sorts that use it: each free must wait
// for the work on the arena's stream, so every sort still matches. (A free
// that did not wait would let a running kernel use freed memory: wrong
// results, or a fault that ends the test binary's context.)
func TestGPUReleaseScratchWhileSorting(t *testing.T) {
	e, err := NewEngine(gpuEngine(t).Device())
	must(t, err)
	defer e.Close()
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- streamWorker(e, 100+w)
		}()
	}
	go func() { wg.Wait(); close(done) }()
	for releases := 0; ; releases++ {
		select {
		case <-done:
			close(errs)
			for err := range errs {
				if err != nil {
					t.Error(err)
				}
			}
			t.Logf("%d releases", releases)
			return
		default:
		}
		must(t, e.ReleaseScratch())
	}
}

func TestGPUErrors(t *testing.T) {
	e := gpuEngine(t)
	k3, v2 := alloc[uint32](t, e, 3), alloc[uint32](t, e, 2)
	f2 := alloc[uint8](t, e, 2)
	off := upload(t, e, []uint32{0, 3})
	cases := map[string]error{
		"sort pairs lengths": SortPairs(e, nil, k3, v2, SortOptions{}),
		"sort bit range":     SortKeys(e, nil, k3, SortOptions{BeginBit: 0, EndBit: 40}),
		"segmented lengths":  SegmentedSortPairs(e, nil, k3, v2, off),
		"segmented offsets":  SegmentedSortKeys(e, nil, k3, cuda.Slice[uint32]{}),
		"segmented options":  SegmentedSortKeys(e, nil, k3, off, SortOptions{}, SortOptions{}),
		"merge output":       MergeKeys(e, nil, k3, v2, k3, MergeOptions[uint32]{}),
		"merge values":       MergePairs(e, nil, k3, v2, v2, v2, alloc[uint32](t, e, 5), alloc[uint32](t, e, 5), MergeOptions[uint32]{}),
		"scan lengths":       ExclusiveScan(e, nil, k3, v2, cuda.Slice[uint32]{}),
		"select flags":       SelectFlagged(e, nil, k3, f2, k3, cuda.Slice[uint32]{}),
		"split outputs":      Multisplit2Pairs(e, nil, k3, k3, alloc[uint8](t, e, 3), v2, v2, cuda.Slice[uint32]{}),
	}
	for name, err := range cases {
		if !errors.Is(err, warpkit.ErrInvalidArgument) {
			t.Errorf("%s: got %v, want ErrInvalidArgument", name, err)
		}
	}
	// A private engine, closed: every call says ErrClosed.
	e2, err := NewEngine(e.Device())
	must(t, err)
	must(t, SortKeys(e2, nil, k3, SortOptions{}))
	must(t, e2.ReleaseScratch())
	must(t, e2.Close())
	if err := e2.Close(); !errors.Is(err, warpkit.ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
	if err := SortKeys(e2, nil, k3, SortOptions{}); !errors.Is(err, warpkit.ErrClosed) {
		t.Errorf("sort after Close: %v", err)
	}
	if err := ExclusiveScan(e2, nil, k3, k3, cuda.Slice[uint32]{}); !errors.Is(err, warpkit.ErrClosed) {
		t.Errorf("scan after Close: %v", err)
	}
}
