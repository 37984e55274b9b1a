package sortedarray

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/kernelgen/ptxcheck"
	"github.com/warpkit/warpkit/internal/sorteddict/dicttest"
)

func TestPTXUpToDate(t *testing.T) { ptxcheck.Check(t, "sortedarray.ptx") }

var _ dicttest.Dict[uint64, uint32] = (*SortedArray[uint64, uint32])(nil)

func newCPUTest[K, V warpkit.Word](t *testing.T) *SortedArray[K, V] {
	t.Helper()
	a, err := New[K, V](Options{Backend: warpkit.CPU})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

var workloads = []dicttest.Workload{{Space: 16, DeleteFrac: 0.3}, {Space: 300, DeleteFrac: 0.4}, {Space: 1 << 14, DeleteFrac: 0.1}, {Space: 1 << 40, DeleteFrac: 0.2}}

func TestCPUDifferential(t *testing.T) {
	steps := 40
	if testing.Short() {
		steps = 15
	}
	for _, w := range workloads {
		name := fmt.Sprintf("space=%d", w.Space)
		t.Run(name+"/k32v32", func(t *testing.T) { cpuRun[uint32, uint32](t, w, steps) })
		t.Run(name+"/k32v64", func(t *testing.T) { cpuRun[uint32, uint64](t, w, steps) })
		t.Run(name+"/k64v32", func(t *testing.T) { cpuRun[uint64, uint32](t, w, steps) })
		t.Run(name+"/k64v64", func(t *testing.T) { cpuRun[uint64, uint64](t, w, steps) })
	}
}

func cpuRun[K, V warpkit.Word](t *testing.T, w dicttest.Workload, steps int) {
	a := newCPUTest[K, V](t)
	o := dicttest.Run[K, V](t, a, w.Space, w, steps, 100, 64, nil)
	if lenOf(t, a) != o.Len() {
		t.Fatalf("Len() = %d, want %d", lenOf(t, a), o.Len())
	}
}

func TestCPUErrors(t *testing.T) {
	ctx := context.Background()
	a := newCPUTest[uint32, uint32](t)
	if err := a.Update(ctx, []uint32{1, 2}, []uint32{1, 2}, []bool{true}); !errors.Is(err, warpkit.ErrInvalidArgument) {
		t.Errorf("mismatched lengths: %v", err)
	}
	if err := a.LookupDevice(ctx, cuda.Slice[uint32]{}, cuda.Slice[uint32]{}, cuda.Slice[uint8]{}); !errors.Is(err, warpkit.ErrInvalidArgument) {
		t.Errorf("device slices on the CPU: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Get(ctx, 1); !errors.Is(err, warpkit.ErrClosed) {
		t.Errorf("get after close: %v", err)
	}
}

// lenOf returns a's Len, failing the test on an error.
func lenOf[K, V warpkit.Word](t testing.TB, a *SortedArray[K, V]) int {
	t.Helper()
	n, err := a.Len(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}
