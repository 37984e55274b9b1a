package gpucompact

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/emu"
	"github.com/warpkit/warpkit/internal/gputest"
	"github.com/warpkit/warpkit/kv/compaction"
	ct "github.com/warpkit/warpkit/kv/compaction/compactiontest"
	"github.com/warpkit/warpkit/kv/sstable"
)

// The CUDA engine's device errors (issue 16): a job whose device call fails
// falls back to compaction.CPU, counts the failure, frees what the engine
// held; a sticky error turns the engine off for the Compactor's life.

// devMem is what a device has outstanding: device memory in use (MemInfo)
// and allocations not freed (device and pinned host memory: Calls).
type devMem struct {
	used   uint64
	allocs int64
}

func deviceMem(t *testing.T, dev *cuda.Device) devMem {
	t.Helper()
	free, total, err := dev.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	c := dev.Calls()
	return devMem{used: total - free, allocs: c.Allocs - c.Frees}
}

// missingKernel loads on the emulated device dev a kernel with the
// parameters of gpucompact.cu's kernel name that no emulator library
// holds: its launch fails in the driver (cuLaunchKernel) with
// CUDA_ERROR_LAUNCH_FAILED, the error of a kernel that faulted on a GPU,
// which is sticky there.
func missingKernel(t *testing.T, dev *cuda.Device, name string) *cuda.Function {
	t.Helper()
	ptx := string(gpucompactPTX)
	decl := ".visible .entry " + name + "("
	i := strings.Index(ptx, decl)
	if i < 0 {
		t.Fatalf("no kernel %s in gpucompact.ptx", name)
	}
	j := strings.IndexByte(ptx[i:], ')')
	fake := "wk_missing_" + name
	src := ".version 7.8\n.target sm_70\n.address_size 64\n\n.visible .entry " + fake + "(" + ptx[i+len(decl):i+j+1] + "\n{\n\tret;\n}\n"
	mod, err := dev.LoadModule([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	f, err := mod.Function(fake)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// slotDev returns the device engine of c's (only, idle) engine slot.
func slotDev(c *Compactor) *devEngine {
	sl := <-c.engine
	c.engine <- sl
	return sl.dev
}

// illegalAddress is the error a stream synchronize returns after a kernel
// faulted (sticky: every later call on the context returns it).
var illegalAddress = &cuda.Error{Op: "cuStreamSynchronize", Code: 700, Name: "CUDA_ERROR_ILLEGAL_ADDRESS", Msg: "an illegal memory access was encountered"}

// failStage injects err into a job's stage (Compactor.failAt) until the
// returned function is called.
func failStage(stage string, err error) func(*testing.T, *Compactor, *cuda.Device) func() {
	return func(_ *testing.T, c *Compactor, _ *cuda.Device) func() {
		c.failAt = func(s string) error {
			if s == stage {
				return err
			}
			return nil
		}
		return func() { c.failAt = nil }
	}
}

// outOfResources is a launch error that leaves the context usable.
var outOfResources = &cuda.Error{Op: "cuLaunchKernel", Code: 701, Name: "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", Msg: "too many resources requested for launch"}

// TestEmulatedDeviceFault: on an emulated device (a fresh one per case, so
// that its counts are the Compactor's alone), after a job on the engine
// that leaves arrays held, a job whose device call fails — a launch the
// driver fails (CUDA_ERROR_LAUNCH_FAILED) in the device stages or in the
// pipeline's encode batches, CUDA_ERROR_ILLEGAL_ADDRESS at a stage's
// synchronize or from an upload, or a launch refused before the driver —
// returns compaction.CPU's outputs byte for byte, counts the failure by
// stage, leaves no reader or goroutine behind, and frees
// every device and pinned array the engine held. A sticky error
// (cuda.Error.Sticky) turns the engine off after that one failure
// (MaxEngineFailures is 3): the next job runs on the CPU without a device
// call, with compaction.CPU's outputs. A driver error that leaves the
// context usable (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES), a launch refused
// before the driver and a kernel's status word (encode_blocks finding a
// block's planned size wrong: a plan bug, which the emulated kernel
// reports as the device's does) leave it on, and the next job runs on the
// engine.
func TestEmulatedDeviceFault(t *testing.T) {
	for ci, tc := range []struct {
		name    string
		inject  func(t *testing.T, c *Compactor, dev *cuda.Device) (restore func())
		counted string
		sticky  bool
		logged  string // in the fallback's log line: the error the job met
		snappy  bool   // the failing job's outputs are Snappy-compressed (sealed on the device)
	}{
		{"gc launch fails", func(t *testing.T, c *Compactor, dev *cuda.Device) func() {
			d := slotDev(c)
			d.fn.gc = missingKernel(t, dev, "gc_flags")
			return nil
		}, "device", true, "cuLaunchKernel: CUDA_ERROR_LAUNCH_FAILED", false},
		{"encode launch fails", func(t *testing.T, c *Compactor, dev *cuda.Device) func() {
			d := slotDev(c)
			d.fn.encode = missingKernel(t, dev, "encode_blocks")
			return nil
		}, "device", true, "cuLaunchKernel: CUDA_ERROR_LAUNCH_FAILED", false},
		{"encode_seal_blocks launch fails", func(t *testing.T, c *Compactor, dev *cuda.Device) func() {
			d := slotDev(c)
			d.fn.encodeSeal = missingKernel(t, dev, "encode_seal_blocks")
			return nil
		}, "device", true, "cuLaunchKernel: CUDA_ERROR_LAUNCH_FAILED", true},
		{"illegal address at merge", failStage("merge", illegalAddress), "merge", true, "CUDA_ERROR_ILLEGAL_ADDRESS", false},
		{"illegal address in upload", failStage("upload", illegalAddress), "device", true, "CUDA_ERROR_ILLEGAL_ADDRESS", false},
		{"launch out of resources at merge", failStage("merge", outOfResources), "merge", false, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", false},
		{"encode status word", func(t *testing.T, c *Compactor, dev *cuda.Device) func() {
			// A block planned a byte longer than the entries encode_blocks
			// writes into it: the kernel's check sets the block's status.
			d := slotDev(c)
			d.editPlan = func(descs []blockDesc) { descs[len(descs)/2].size++ }
			return func() { d.editPlan = nil }
		}, "encode", false, "device encode and plan disagree", false},
		{"gc launch refused", func(t *testing.T, c *Compactor, dev *cuda.Device) func() {
			d := slotDev(c)
			gc := d.fn.gc
			d.fn.gc = d.fn.apply // other parameters: Launch refuses it (ErrInvalidArgument)
			return func() { d.fn.gc = gc }
		}, "device", false, "invalid argument", false},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			base := runtime.NumGoroutine()
			dev := emu.Device(t, emu.Options{TotalMemory: 1 << 30}, "gpucompact.cu")
			var log ct.LogBuffer
			c, err := New(Options{Backend: warpkit.CUDA, Device: dev, Fallback: compaction.CPU{Parts: 1}, MinInputBytes: -1,
				Logger: slog.New(slog.NewTextHandler(&log, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			idle := deviceMem(t, dev)
			seed := uint64(ci) * 3
			job := func(what string, seed uint64) *compaction.Result { return compactLikeOracle(t, c, what, seed, nil) }
			// A job on the engine first: the slot keeps its arrays.
			if got := job("first job", seed); got.Stats.Engine != "cuda" {
				t.Fatalf("first job: engine %q", got.Stats.Engine)
			}
			if st := c.Stats(); st.DeviceHeldBytes == 0 || st.PinnedBytes == 0 || deviceMem(t, dev) == idle {
				t.Fatalf("the first job holds nothing: %+v", st)
			}
			restore := tc.inject(t, c, dev)
			var snappy func(*compaction.Job)
			if tc.snappy {
				if !hostSealsAsDevice() {
					t.Skip("the device does not seal here: the host's s2 is not its amd64 assembly encoder")
				}
				snappy = func(j *compaction.Job) { j.Env.WriterOptions.Compression = sstable.SnappyCompression }
			}
			got := compactLikeOracle(t, c, "failing job", seed+1, snappy)
			st := c.Stats()
			if got.Stats.Fallback != tc.counted || st.Fallbacks[tc.counted] != 1 || len(st.Fallbacks) != 1 || st.FallbackJobs != 1 || st.EngineJobs != 1 {
				t.Fatalf("failing job: result fallback %q, stats %+v", got.Stats.Fallback, st)
			}
			if st.Disabled != tc.sticky {
				t.Fatalf("failing job: Disabled %v, want %v", st.Disabled, tc.sticky)
			}
			if l := log.String(); !strings.Contains(l, tc.logged) || strings.Contains(l, "engine off") != tc.sticky {
				t.Fatalf("failing job: logged %q, want the error %q", l, tc.logged)
			}
			// Every array freed: the Stats, the slot's own accounting and
			// the device's.
			if st.DeviceHeldBytes != 0 || st.PinnedBytes != 0 || st.HeldBytes != 0 {
				t.Fatalf("failing job: held %d device, %d pinned, %d host bytes", st.DeviceHeldBytes, st.PinnedBytes, st.HeldBytes)
			}
			if d := slotDev(c); d.heldBytes() != 0 || d.pinnedBytes() != 0 {
				t.Fatalf("failing job: the slot keeps %d device, %d pinned bytes", d.heldBytes(), d.pinnedBytes())
			}
			if m := deviceMem(t, dev); m != idle {
				t.Fatalf("failing job: the device has %d bytes, %d allocations outstanding; %d, %d before the first job", m.used, m.allocs, idle.used, idle.allocs)
			}
			if restore != nil {
				restore()
			}
			before := dev.Calls()
			got = job("next job", seed+2)
			calls := dev.Calls().Sub(before)
			st = c.Stats()
			if tc.sticky {
				// Off: the job runs on the CPU, the device untouched.
				if got.Stats.Engine != "" || st.Declined["disabled"] != 1 || st.EngineJobs != 1 || st.FallbackJobs != 2 || calls != (cuda.Calls{}) {
					t.Fatalf("next job: result engine %q, stats %+v, device calls %+v", got.Stats.Engine, st, calls)
				}
			} else if got.Stats.Engine != "cuda" || st.EngineJobs != 2 || st.Disabled || len(st.Declined) != 0 {
				t.Fatalf("next job: result engine %q, stats %+v", got.Stats.Engine, st)
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if n := goroutinesBackTo(base); n > base {
				t.Fatalf("%d goroutines after Close, %d before", n, base)
			}
		})
	}
}

// TestCUDACancelMidJob: TestCancelMidJob on the CUDA engine, after a job
// that leaves arrays held: the job returns the context's error and counts
// no failure, the device's stream is synchronized after the cancellation
// (the emulation runs every call synchronously, so the order of that wait
// and the frees cannot be seen there), every device and pinned array is
// freed, no goroutine or reader is left, and the engine stays
// on: the next job runs on it, with compaction.CPU's outputs.
func TestCUDACancelMidJob(t *testing.T) {
	dev := gputest.Device(t)
	base := runtime.NumGoroutine()
	c, err := New(Options{Backend: warpkit.CUDA, Device: dev, Fallback: compaction.CPU{Parts: 1}, MinInputBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c0 := dev.Calls()
	idle := c0.Allocs - c0.Frees
	_, job1 := benchJob(t, 1, 16)
	if _, err := c.Compact(context.Background(), job1); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.EngineJobs != 1 || st.DeviceHeldBytes == 0 {
		t.Fatalf("the first job: %+v", st)
	}
	e, job := benchJob(t, 1, 16)
	job.TargetFileSize = 16 << 10 // dozens of outputs
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var atCancel cuda.Calls
	creates := 0
	e.CreateHook = func() error {
		mu.Lock()
		defer mu.Unlock()
		if creates++; creates == 3 {
			atCancel = dev.Calls()
			cancel()
		}
		return nil
	}
	_, err = c.Compact(ctx, job)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Compact: %v, want context.Canceled", err)
	}
	after := dev.Calls()
	mu.Lock()
	since := after.Sub(atCancel)
	mu.Unlock()
	st := c.Stats()
	if len(st.Fallbacks) != 0 || st.FallbackJobs != 0 || st.EngineJobs != 1 || st.Disabled {
		t.Fatalf("stats %+v", st)
	}
	if since.Waits == 0 {
		t.Fatalf("no wait for the device after the cancellation (calls since: %+v)", since)
	}
	if st.DeviceHeldBytes != 0 || st.PinnedBytes != 0 || st.HeldBytes != 0 {
		t.Fatalf("after the cancelled job: held %d device, %d pinned, %d host bytes", st.DeviceHeldBytes, st.PinnedBytes, st.HeldBytes)
	}
	if d := slotDev(c); d.heldBytes() != 0 || d.pinnedBytes() != 0 {
		t.Fatalf("after the cancelled job: the slot keeps %d device, %d pinned bytes", d.heldBytes(), d.pinnedBytes())
	}
	if n := after.Allocs - after.Frees; n != idle {
		t.Fatalf("after the cancelled job: %d allocations outstanding, %d before the first job", n, idle)
	}
	if e.Held() != 0 {
		t.Fatalf("%d readers held after the cancelled job", e.Held())
	}
	if n := goroutinesBackTo(base); n > base {
		t.Fatalf("%d goroutines after the cancelled job, %d before", n, base)
	}
	// The engine is on: the next job runs on it.
	e2, job2 := benchJob(t, 1, 16)
	job2.TargetFileSize = 16 << 10
	e0, job0 := benchJob(t, 1, 16)
	job0.TargetFileSize = 16 << 10
	want, err := compaction.CPU{Parts: 1}.Compact(context.Background(), job0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Compact(context.Background(), job2)
	if err != nil {
		t.Fatal(err)
	}
	sameFiles(t, "the job after the cancelled one", outputsOf(t, e2, got), outputsOf(t, e0, want))
	if st := c.Stats(); st.EngineJobs != 2 || got.Stats.Engine != "cuda" {
		t.Fatalf("the job after the cancelled one: %+v", st)
	}
}

// TestCUDAEncodeStatusWord: a kernel's status word on the device itself
// (TestEmulatedDeviceFault's "encode status word" on a GPU): a block
// planned a byte longer than encode_blocks writes makes the job fall back
// to compaction.CPU with its outputs, counted under "encode", with every
// array the engine held freed and the engine still on.
func TestCUDAEncodeStatusWord(t *testing.T) {
	dev := gputest.Device(t)
	c, err := New(Options{Backend: warpkit.CUDA, Device: dev, Fallback: compaction.CPU{Parts: 1}, MinInputBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c0 := dev.Calls()
	idle := c0.Allocs - c0.Frees
	job := func(what string, seed uint64) *compaction.Result { return compactLikeOracle(t, c, what, seed, nil) }
	if got := job("first job", 11); got.Stats.Engine != "cuda" {
		t.Fatalf("first job: engine %q", got.Stats.Engine)
	}
	d := slotDev(c)
	edits := 0
	d.editPlan = func(descs []blockDesc) {
		edits++
		descs[len(descs)/2].size++
	}
	got := job("failing job", 12)
	d.editPlan = nil
	st := c.Stats()
	if edits == 0 || got.Stats.Fallback != "encode" || st.Fallbacks["encode"] != 1 || st.FallbackJobs != 1 || st.Disabled {
		t.Fatalf("failing job (%d batches edited): result fallback %q, stats %+v", edits, got.Stats.Fallback, st)
	}
	if st.DeviceHeldBytes != 0 || st.PinnedBytes != 0 {
		t.Fatalf("failing job: held %d device, %d pinned bytes", st.DeviceHeldBytes, st.PinnedBytes)
	}
	if c := dev.Calls(); c.Allocs-c.Frees != idle {
		t.Fatalf("failing job: %d allocations outstanding, %d before the first job", c.Allocs-c.Frees, idle)
	}
	if got := job("next job", 13); got.Stats.Engine != "cuda" || c.Stats().EngineJobs != 2 {
		t.Fatalf("next job: engine %q, stats %+v", got.Stats.Engine, c.Stats())
	}
}

// compactLikeOracle runs oracleJob's job of seed (48 entries a table) on
// c and checks that its outputs are compaction.CPU's and that it released
// every reader of its inputs.
func compactLikeOracle(t *testing.T, c *Compactor, what string, seed uint64, prep func(*compaction.Job)) *compaction.Result {
	t.Helper()
	e0, want, e, job := oracleJob(t, seed, 48, prep)
	got, err := c.Compact(context.Background(), job)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	sameFiles(t, what, outputsOf(t, e, got), outputsOf(t, e0, want))
	if e.Held() != 0 {
		t.Fatalf("%s: %d readers held after the job", what, e.Held())
	}
	return got
}

// oracleJob builds ct.RandomJob's job of the PCG seed and stream twice: in
// e0, compacted by compaction.CPU (want: the oracle), and in e, returned
// for the engine under test.
func oracleJob(t *testing.T, seed, stream uint64, prep func(*compaction.Job)) (e0 *ct.Env, want *compaction.Result, e *ct.Env, job *compaction.Job) {
	t.Helper()
	rng := func() *rand.Rand { return rand.New(rand.NewPCG(seed, stream)) }
	e0 = ct.NewEnv()
	job0, _, _ := ct.RandomJob(t, rng(), e0)
	if prep != nil {
		prep(job0)
	}
	want, err := compaction.CPU{Parts: 1}.Compact(context.Background(), job0)
	if err != nil {
		t.Fatal(err)
	}
	e = ct.NewEnv()
	job, _, _ = ct.RandomJob(t, rng(), e)
	if prep != nil {
		prep(job)
	}
	return e0, want, e, job
}
