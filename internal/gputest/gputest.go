// Package gputest is the shared helper for tests that need a CUDA device: they
// skip, not fail, where there is none, so `go test ./...` passes everywhere.
package gputest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/emu"
)

// emulated are the kernel sources a package's tests registered with Emulate.
var emulated []string

// Emulate registers the kernel sources of the package under test (paths
// relative to its directory), so that with WARPKIT_EMULATE=1 in the
// environment, Device gives tests an emulated device (internal/emu) over
// them where there is no GPU: the package's whole GPU suite then runs on the
// CPU (slowly: the suites are sized for a GPU). Call it from an init
// function of a test file.
func Emulate(srcs ...string) { emulated = append(emulated, srcs...) }

// Device opens device 0 for the test and closes it at cleanup, or skips the
// test with "no CUDA device" when there is none (see Emulate for the
// exception). Other errors fail the test.
func Device(t testing.TB) *cuda.Device {
	t.Helper()
	d, err := cuda.Open(0)
	if errors.Is(err, cuda.ErrNoDevice) {
		if os.Getenv("WARPKIT_EMULATE") == "1" && len(emulated) > 0 {
			return emu.Device(t, emu.Options{TotalMemory: 8 << 30}, emulated...)
		}
		t.Skip("no CUDA device")
	}
	if err != nil {
		t.Fatalf("opening CUDA device 0: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// Within runs f and returns its error; if f has not returned after
// deadline, it panics, and the test binary dies with every goroutine's
// stack: a call caught in a kernel loop without bound holds the structure
// (and the device) the test would clean up, so the test could not end
// otherwise. For the tests that force ErrRetryLimit.
func Within(what string, deadline time.Duration, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(deadline):
		panic(fmt.Sprintf("%s did not return within %v: a kernel loop without bound", what, deadline))
	}
}

// Tree32 is what ExpectLookup and ExpectCheckFails need of a tree with
// uint32 keys and values (btree's and mvbtree's latest version).
type Tree32 interface {
	Lookup(ctx context.Context, keys, vals []uint32, found []bool) error
	Check(ctx context.Context) error
}

// ExpectLookup looks keys up (bounded by deadline, as Within) and wants
// each found, or not, with value k+1.
func ExpectLookup(t testing.TB, tr Tree32, keys []uint32, want bool, deadline time.Duration) {
	t.Helper()
	vals, found := make([]uint32, len(keys)), make([]bool, len(keys))
	if err := Within("lookup", deadline, func() error { return tr.Lookup(context.Background(), keys, vals, found) }); err != nil {
		t.Fatalf("lookup of %v: %v", keys, err)
	}
	for i, k := range keys {
		if found[i] != want || (want && vals[i] != k+1) {
			t.Errorf("lookup %d: (%d, %v), want found %v with value %d", k, vals[i], found[i], want, k+1)
		}
	}
}

// ExpectCheckFails wants the tree's Check (bounded by deadline) to report
// the damage a test made.
func ExpectCheckFails(t testing.TB, tr Tree32, deadline time.Duration) {
	t.Helper()
	err := Within("check", deadline, func() error { return tr.Check(context.Background()) })
	t.Logf("check of the corrupted tree: %v", err)
	if err == nil {
		t.Error("check accepted the corrupted tree")
	}
}
