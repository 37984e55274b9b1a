package gpucompact

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/gputest"
	"github.com/warpkit/warpkit/kv/compaction"
	"github.com/warpkit/warpkit/kv/sstable"
)

// The CUDA engine's tests run the Go engine's identity suites with the
// device doing the merge, garbage collection and entry sizes; they skip
// where there is no device.

func testDevEngine(t *testing.T) *devEngine {
	t.Helper()
	d, err := newDevEngine(gputest.Device(t), false, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.close)
	return d
}

func cudaEngineIn(d *devEngine) func(*workspace) compactFunc {
	return func(ws *workspace) compactFunc {
		return func(ctx context.Context, job *compaction.Job) (*compaction.Result, error) {
			return runEngine(ctx, job, ws, d, &stageTimes{}, nil)
		}
	}
}

// TestCUDAEngineIdentical: TestGoEngineIdentical's random jobs (snapshots,
// point and range tombstones, levels below, grandparents, every writer
// option, tables cut into many load pieces) through the CUDA engine, with
// one device engine and one workspace for every round.
// Both ways of sealing Snappy blocks: the host's sealers, and the device's
// (Options.Sealing).
func TestCUDAEngineIdentical(t *testing.T) {
	forSealing(t, func(t *testing.T, d *devEngine) {
		rounds := 300
		if testing.Short() {
			rounds = 60
		}
		checkIdentical(t, rounds, "cuda", cudaEngineIn(d))
	})
}

// TestCUDAEngineStaged: the random jobs and the matrix with every array in
// plain memory (as when pinning fails), so that the device's copies, the
// sealed blocks' among them, go through the ring (of 64 KiB slots: most
// arrays take several); both sealings.
func TestCUDAEngineStaged(t *testing.T) {
	defer func(p bool) { pinOff = p }(pinOff)
	pinOff = true
	forSealing(t, func(t *testing.T, d *devEngine) {
		sealing := SealOnHost
		if d.deviceSeal {
			sealing = SealOnDevice
		}
		d.configure(Options{Sealing: sealing, ChunkBytes: 64 << 10})
		checkIdentical(t, 40, "cuda", cudaEngineIn(d))
		checkMatrix(t, 40, cudaEngineIn(d)(&workspace{}))
	})
}

// TestCUDAPinnedBytes: jobs of a few MiB (100- and 1024-byte values, Snappy
// and not) through Compactors whose PinnedBytes leaves room for some of a
// job's arrays (the rest travel through a ring of 64 KiB slots) or for none:
// outputs identical to compaction.CPU's, and Stats.PinnedBytes within the
// bound; without a bound the same jobs pin more than the larger one.
func TestCUDAPinnedBytes(t *testing.T) {
	dev := gputest.Device(t)
	const chunk = 64 << 10
	some := int64(2*chunk + stagingShare + 1<<20)
	var unbounded int64
	for _, limit := range []int64{-1, some, 2*chunk + stagingShare} {
		c, err := New(Options{Backend: warpkit.CUDA, Device: dev, Fallback: compaction.CPU{Parts: 1}, MinInputBytes: -1, PinnedBytes: limit, ChunkBytes: chunk})
		if err != nil {
			t.Fatal(err)
		}
		jobs := 0
		for _, valueLen := range []int{100, 1024} {
			for _, comp := range []sstable.Compression{sstable.NoCompression, sstable.SnappyCompression} {
				e, job := benchJob(t, 3, valueLen)
				job.TargetFileSize = 256 << 10
				job.Env.WriterOptions.Compression = comp
				want, err := compaction.CPU{Parts: 1}.Compact(context.Background(), job)
				if err != nil {
					t.Fatal(err)
				}
				got, err := c.Compact(context.Background(), job)
				if err != nil {
					t.Fatal(err)
				}
				jobs++
				sameFiles(t, fmt.Sprintf("PinnedBytes %d, %d-byte values, %v", limit, valueLen, comp), outputsOf(t, e, got), outputsOf(t, e, want))
			}
		}
		st := c.Stats()
		c.Close()
		if st.EngineJobs != uint64(jobs) || len(st.Fallbacks) != 0 {
			t.Fatalf("PinnedBytes %d: stats %+v", limit, st)
		}
		if limit < 0 {
			unbounded = st.PinnedBytes
		} else if st.PinnedBytes > limit || st.PinnedBytes == 0 {
			t.Fatalf("PinnedBytes %d: the engine pins %d bytes", limit, st.PinnedBytes)
		}
		t.Logf("PinnedBytes %d: %d bytes pinned", limit, st.PinnedBytes)
	}
	if unbounded <= some {
		t.Fatalf("without a bound the jobs pin %d bytes, no more than the bound %d: the test does not bound them", unbounded, some)
	}
}

// forSealing runs test on a device engine that seals Snappy blocks on the
// host, then on one that seals them on the device.
func forSealing(t *testing.T, test func(*testing.T, *devEngine)) {
	for _, onDevice := range []bool{false, true} {
		name := "host-sealing"
		if onDevice {
			name = "device-sealing"
		}
		t.Run(name, func(t *testing.T) {
			d := testDevEngine(t)
			d.deviceSeal = onDevice
			test(t, d)
		})
	}
}

// TestCUDAEngineRadixAndMovedValues: the random jobs and the spec's matrix
// through the CUDA engine sorting by radix passes (Options.Sort =
// SortRadix) and moving values every round (Options.MoveValues): the same
// bytes as compaction.CPU's; and a store-shaped job of several merge
// rounds with each setting.
func TestCUDAEngineRadixAndMovedValues(t *testing.T) {
	for _, mode := range []struct {
		name        string
		radix, move bool
	}{{"radix", true, false}, {"moved-values", false, true}, {"radix-moved-values", true, true}} {
		t.Run(mode.name, func(t *testing.T) {
			d := testDevEngine(t)
			d.radix, d.moveValues = mode.radix, mode.move
			rounds := 100
			if testing.Short() {
				rounds = 30
			}
			checkIdentical(t, rounds, "cuda", cudaEngineIn(d))
			checkMatrix(t, 40, cudaEngineIn(d)(&workspace{}))
			ws := &workspace{}
			defer ws.free()
			checkLarge(t, 12, cudaEngineIn(d)(ws))
		})
	}
}

// TestCUDAEngineMatrix: the spec's test matrix through the CUDA engine.
func TestCUDAEngineMatrix(t *testing.T) {
	forSealing(t, func(t *testing.T, d *devEngine) { checkMatrix(t, 120, cudaEngineIn(d)(&workspace{})) })
}

// TestCUDAEngineIdenticalLarge: store-shaped jobs of 12 MiB and (without
// -short) 192 MiB and 1 GiB — several merge tiles per pair, several merge
// rounds, many encode batches — are byte-identical too.
func TestCUDAEngineIdenticalLarge(t *testing.T) {
	forSealing(t, func(t *testing.T, d *devEngine) {
		ws := &workspace{}
		defer ws.free()
		checkLarge(t, 12, cudaEngineIn(d)(ws))
		if !testing.Short() {
			checkLarge(t, 192, cudaEngineIn(d)(ws))
			checkLarge(t, 1024, cudaEngineIn(d)(ws), 1024)
		}
	})
}

// TestCUDAEnginePartitioned: TestGoEnginePartitioned's suites through the
// CUDA engine (random jobs, the matrix, a 12 MiB job, each in partitions
// cut at random keys, one or two at a time), and, without -short, a 1 GiB
// job in the partitions that a Compactor with a quarter of its estimate as
// MemoryBudget plans, two at a time, byte-identical to compaction.CPU.
func TestCUDAEnginePartitioned(t *testing.T) {
	d, d2 := testDevEngine(t), testDevEngine(t)
	rounds := 300
	if testing.Short() {
		rounds = 60
	}
	parts := 0
	checkIdentical(t, rounds, "cuda", partitionedIn(d, d2, 1, &parts))
	checkMatrix(t, rounds/3, partitionedIn(d, d2, 2, &parts)(&workspace{}))
	ws, ws2 := &workspace{}, &workspace{}
	defer ws.free()
	defer ws2.free()
	checkLarge(t, 12, partitionedIn(d, d2, 3, &parts)(ws))
	t.Logf("%d partitions", parts)
	if testing.Short() {
		return
	}
	checkLarge(t, 1024, func(ctx context.Context, job *compaction.Job) (*compaction.Result, error) {
		size, err := memoryEstimate(job)
		if err != nil {
			return nil, err
		}
		c := &Compactor{opts: Options{MemoryBudget: int64(size.est / 4)}, cuda: true}
		ratio, err := compaction.CutRatio(job)
		if err != nil {
			return nil, err
		}
		plan, err := splitJob(job, compaction.CutLimit(job.TargetFileSize, ratio), 0, func(s jobSize) bool { return c.fits(job, s.scale(2)) })
		if err != nil || len(plan.splits) == 0 {
			return nil, fmt.Errorf("no partitions for a quarter of the estimate (%v)", err)
		}
		res, n, err := runPartitioned(ctx, job, plan, []*lane{{ws: ws, dev: d}, {ws: ws2, dev: d2}}, &stageTimes{}, nil)
		t.Logf("1 GiB job: %d splits, %d partitions", len(plan.splits), n)
		return res, err
	}, 1024)
}

// TestCUDADeviceEstimate: the decision module's device estimate bounds the
// device memory the CUDA engine holds after a job (its arrays grow to the
// job and stay), for small and large values, compressed and not.
func TestCUDADeviceEstimate(t *testing.T) {
	dev := gputest.Device(t)
	for _, valueLen := range []int{0, 16, 100, 1024, 8192} {
		d, err := newDevEngine(dev, false, Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, job := benchJob(t, 4, valueLen)
		size, err := memoryEstimate(job)
		if err != nil {
			t.Fatal(err)
		}
		ws := &workspace{}
		if _, err := runEngine(context.Background(), job, ws, d, &stageTimes{}, nil); err != nil {
			t.Fatal(err)
		}
		held := uint64(d.heldBytes())
		ws.free()
		d.close()
		if held > size.device() {
			t.Fatalf("%d-byte values: the engine holds %d device bytes, the estimate is %d", valueLen, held, size.device())
		}
		t.Logf("%d-byte values: holds %d device bytes, estimate %d (%d without its 64 MiB)", valueLen, held, size.device(), size.device()-64<<20)
	}
}

// TestCUDAOutOfDeviceMemory: a job the device has no memory for goes to the
// fallback as a decline ("budget"), with compaction.CPU's output, and does
// not count toward turning the engine off; once memory is free the next
// job runs on the engine. A job over MaxDeviceBytes is declined before it
// starts.
func TestCUDAOutOfDeviceMemory(t *testing.T) {
	dev := gputest.Device(t)
	c, err := New(Options{Backend: warpkit.CUDA, Device: dev, MinInputBytes: -1, MaxDeviceBytes: -1, MaxEngineFailures: 1, Fallback: compaction.CPU{Parts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	e0, job0 := benchJob(t, 8, 100)
	want, err := compaction.CPU{Parts: 1}.Compact(context.Background(), job0)
	if err != nil {
		t.Fatal(err)
	}
	free, _, err := dev.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	hog, err := cuda.Alloc[uint8](dev, int(free)-(16<<20)) // all but 16 MiB
	if err != nil {
		t.Fatal(err)
	}
	e, job := benchJob(t, 8, 100)
	got, err := c.Compact(context.Background(), job)
	hog.Free()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(outputsOf(t, e0, want), outputsOf(t, e, got), bytes.Equal) {
		t.Fatal("outputs after running out of device memory differ from compaction.CPU's")
	}
	st := c.Stats()
	if st.Declined["budget"] != 1 || st.Disabled || len(st.Fallbacks) != 0 || st.EngineJobs != 0 {
		t.Fatalf("after running out of device memory: %+v", st)
	}
	_, job2 := benchJob(t, 8, 100)
	if _, err := c.Compact(context.Background(), job2); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.EngineJobs != 1 {
		t.Fatalf("the job after memory came back: %+v", st)
	}
	c2, err := New(Options{Backend: warpkit.CUDA, Device: dev, MinInputBytes: -1, MaxDeviceBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	_, job3 := benchJob(t, 8, 100)
	if _, err := c2.Compact(context.Background(), job3); err != nil {
		t.Fatal(err)
	}
	if st := c2.Stats(); st.Declined["budget"] != 1 || st.EngineJobs != 0 {
		t.Fatalf("a job over MaxDeviceBytes: %+v", st)
	}
}

// TestCUDACompactor: a Compactor on the CUDA engine names it, runs jobs on
// it, keeps device memory between jobs, falls back at each device stage
// with compaction.CPU's output, and frees its device memory on Close.
func TestCUDACompactor(t *testing.T) {
	dev := gputest.Device(t)
	// "upload": a copy of the inputs sent up during the load fails after
	// the load itself succeeded (counted as stage "device").
	for i, stage := range []string{"", "load", "merge", "gc", "sizes", "plan", "encode", "write", "upload"} {
		c, err := New(Options{Backend: warpkit.CUDA, Device: dev, Fallback: compaction.CPU{Parts: 1}, MinInputBytes: -1})
		if err != nil {
			t.Fatal(err)
		}
		if st := c.Stats(); st.Engine != "cuda" {
			t.Fatalf("engine %q", st.Engine)
		}
		c.failAt = func(s string) error {
			if s == stage {
				return errors.New("injected")
			}
			return nil
		}
		e0, want, e, job := oracleJob(t, uint64(i), 47, nil)
		got, err := c.Compact(context.Background(), job)
		if err != nil {
			t.Fatalf("%q: %v", stage, err)
		}
		wf, gf := outputsOf(t, e0, want), outputsOf(t, e, got)
		if !slices.EqualFunc(wf, gf, bytes.Equal) {
			t.Fatalf("%q: outputs differ from compaction.CPU's", stage)
		}
		st := c.Stats()
		counted := stage
		if stage == "upload" {
			counted = "device"
		}
		if stage == "" {
			if st.EngineJobs != 1 || got.Stats.Engine != "cuda" || st.DeviceHeldBytes == 0 {
				t.Fatalf("stats %+v, result engine %q", st, got.Stats.Engine)
			}
		} else if st.Fallbacks[counted] != 1 || got.Stats.Fallback != counted || st.DeviceHeldBytes != 0 {
			t.Fatalf("%q: stats %+v, result fallback %q", stage, st, got.Stats.Fallback)
		}
		if e.Held() != 0 {
			t.Fatalf("%q: %d readers held after the job", stage, e.Held())
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if st := c.Stats(); st.DeviceHeldBytes != 0 {
			t.Fatalf("%q: %d device bytes held after Close", stage, st.DeviceHeldBytes)
		}
		if _, err := c.Compact(context.Background(), job); !errors.Is(err, ErrClosed) {
			t.Fatalf("Compact after Close: %v", err)
		}
	}
	// The device the caller passed is still open.
	if _, err := cuda.Alloc[uint32](dev, 1); err != nil {
		t.Fatalf("the caller's device after Close: %v", err)
	}
}

// TestCUDADamagedInput: checkDamaged on the CUDA engine.
func TestCUDADamagedInput(t *testing.T) {
	dev := gputest.Device(t)
	rounds := 400
	if testing.Short() {
		rounds = 100
	}
	checkDamaged(t, rounds, Options{Backend: warpkit.CUDA, Device: dev})
	checkDamagedSnappy(t, rounds/4, Options{Backend: warpkit.CUDA, Device: dev})
}

// TestCUDAUnsortedRunDeclined: checkUnsortedRun on the CUDA engine.
func TestCUDAUnsortedRunDeclined(t *testing.T) {
	checkUnsortedRun(t, Options{Backend: warpkit.CUDA, Device: gputest.Device(t)})
}

// TestCUDAKeysOutsideBounds: checkKeysOutsideBounds on the CUDA engine,
// which declines the job.
func TestCUDAKeysOutsideBounds(t *testing.T) {
	checkKeysOutsideBounds(t, Options{Backend: warpkit.CUDA, Device: gputest.Device(t)}, true)
}

// TestCUDAEngines: checkEngines on the CUDA engine (a stream and device
// arrays per slot).
// TestCUDAHostWorkers: checkHostWorkers on the CUDA engine.
func TestCUDAHostWorkers(t *testing.T) {
	checkHostWorkers(t, Options{Backend: warpkit.CUDA, Device: gputest.Device(t)})
}

func TestCUDAEngines(t *testing.T) {
	checkEngines(t, Options{Backend: warpkit.CUDA, Device: gputest.Device(t)})
}
