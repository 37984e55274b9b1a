package slabhash

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// TestKernelsOnCPUEmulation compiles the device code (slabhash.cuh and the
// allocator header) with the host C++ compiler against the CPU emulation of
// warps (internal/emu/emu.h) and runs the engine tests there: exact results of
// mixed batches, per-key linearizability with repeated keys, snapshots and
// flushes, the control block, pool exhaustion and reruns, for the round
// engine and the paper's warp engine. It checks the kernels' logic (and that
// every *_sync call is made by all lanes of its mask) without a GPU; the GPU
// tests check them on the device.
func TestKernelsOnCPUEmulation(t *testing.T) {
	if runtime.GOARCH != "amd64" || runtime.GOOS != "linux" {
		t.Skip("the emulation's fibers switch stacks with x86-64 Linux assembly")
	}
	cxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("no g++")
	}
	bin := filepath.Join(t.TempDir(), "engine_test")
	build := exec.Command(cxx, "-std=c++20", "-O1", "-I", filepath.Join("..", "internal", "devcode"), "-I", filepath.Join("..", "internal", "emu"),
		"-o", bin, filepath.Join("testdata", "emu", "engine_test.cc"), "-lpthread")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("compiling the emulated kernels: %v\n%s", err, out)
	}
	args := []string{}
	if testing.Short() {
		args = append(args, "quick")
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("emulated kernel tests: %v\n%s", err, out)
	}
}
