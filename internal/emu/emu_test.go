package emu

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/warpkit/warpkit/cuda"
)

func probe(t *testing.T) (*cuda.Device, *cuda.Module) {
	t.Helper()
	dev := Device(t, Options{TotalMemory: 64 << 20}, "testdata/probe.cu")
	ptx, err := os.ReadFile("testdata/probe.ptx")
	if err != nil {
		t.Fatal(err)
	}
	m, err := dev.LoadModule(ptx)
	if err != nil {
		t.Fatal(err)
	}
	return dev, m
}

func fn(t *testing.T, m *cuda.Module, name string) *cuda.Function {
	t.Helper()
	f, err := m.Function(name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestEmulatedKernels runs kernels on the emulated device: a grid-stride
// loop over many blocks, warp collectives, shared memory with
// __syncthreads, and warps of a block that wait for each other.
func TestEmulatedKernels(t *testing.T) {
	dev, m := probe(t)
	if !dev.Emulated() {
		t.Fatal("an emulated device says it is not")
	}

	const n = 10000
	out, err := cuda.Alloc[uint32](dev, n)
	if err != nil {
		t.Fatal(err)
	}
	if err := fn(t, m, "probe_iota").Launch(cuda.D1(7), cuda.D1(64), 0, nil, out, uint64(n), uint32(3)); err != nil {
		t.Fatal(err)
	}
	got, err := out.ToHost()
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if v != uint32(i)*3 {
			t.Fatalf("iota[%d] = %d, want %d", i, v, i*3)
		}
	}

	warp, _ := cuda.Alloc[uint32](dev, 3*64)
	if err := fn(t, m, "probe_warp").Launch(cuda.D1(1), cuda.D1(64), 0, nil, warp); err != nil {
		t.Fatal(err)
	}
	w, _ := warp.ToHost()
	for tid := range 64 {
		lane := uint32(tid % 32)
		tile := lane &^ 7
		wantSum := 8*tile + 28
		if w[3*tid] != 0xaaaaaaaa || w[3*tid+1] != (31-lane)*10 || w[3*tid+2] != wantSum {
			t.Fatalf("thread %d: ballot %#x shfl %d tile sum %d; want %#x %d %d", tid, w[3*tid], w[3*tid+1], w[3*tid+2], 0xaaaaaaaa, (31-lane)*10, wantSum)
		}
	}

	sums, _ := cuda.Alloc[uint64](dev, 5)
	if err := fn(t, m, "probe_block").Launch(cuda.D1(5), cuda.D1(256), 0, nil, sums); err != nil {
		t.Fatal(err)
	}
	s, _ := sums.ToHost()
	for b, v := range s {
		if v != 255*256/2 {
			t.Fatalf("block %d summed %d, want %d", b, v, 255*256/2)
		}
	}

	flags, _ := cuda.Alloc[uint32](dev, 3)
	flags.Zero(nil)
	spun, _ := cuda.Alloc[uint32](dev, 3*4)
	if err := fn(t, m, "probe_spin").Launch(cuda.D1(3), cuda.D1(128), 0, nil, flags, spun); err != nil {
		t.Fatal(err)
	}
	sp, _ := spun.ToHost()
	for i, v := range sp {
		if v != 1 {
			t.Fatalf("warp %d did not finish its wait", i)
		}
	}
}

// TestEmulatedFailures: kernel bugs and missing kernels are launch errors
// with a message, never a hang or a crash; memory is bounded.
func TestEmulatedFailures(t *testing.T) {
	dev, m := probe(t)
	out, _ := cuda.Alloc[uint32](dev, 64)
	err := fn(t, m, "probe_diverge").Launch(cuda.D1(2), cuda.D1(64), 0, nil, out)
	t.Logf("divergent ballot: %v", err)
	if err == nil || !strings.Contains(err.Error(), "returned") && !strings.Contains(err.Error(), "deadlock") {
		t.Fatalf("divergent ballot: %v, want a launch failure that says why", err)
	}
	err = fn(t, m, "probe_missing").Launch(cuda.D1(1), cuda.D1(32), 0, nil, out)
	if err == nil || !strings.Contains(err.Error(), "no emulator library") {
		t.Fatalf("missing kernel: %v", err)
	}
	// A failing block ends the launch: blocks waiting for it do not hang.
	flag, _ := cuda.Alloc[uint32](dev, 1)
	flag.Zero(nil)
	done := make(chan error, 1)
	go func() { done <- fn(t, m, "probe_trap_wait").Launch(cuda.D1(4), cuda.D1(32), 0, nil, flag) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "__trap") {
			t.Fatalf("a launch with a trapping block: %v, want the trap reported", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("a launch with a trapping block hangs: the blocks waiting for it never end")
	}
	fo, _ := cuda.Alloc[float32](dev, 32)
	err = fn(t, m, "probe_float").Launch(cuda.D1(1), cuda.D1(32), 0, nil, float32(1.5), fo)
	if err == nil || !strings.Contains(err.Error(), "floating-point") {
		t.Fatalf("a float parameter: %v, want a refusal", err)
	}
	// The device still works after failed launches.
	if err := fn(t, m, "probe_iota").Launch(cuda.D1(1), cuda.D1(32), 0, nil, out, uint64(64), uint32(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := dev.Alloc(128 << 20); !errors.Is(err, cuda.ErrOutOfMemory) {
		t.Fatalf("allocating past the emulated memory: %v, want ErrOutOfMemory", err)
	}
	free, total, err := dev.MemInfo()
	if err != nil || total != 64<<20 || free >= total {
		t.Fatalf("MemInfo = %d, %d, %v", free, total, err)
	}
}
