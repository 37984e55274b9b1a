package sortedarray

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/gputest"
	"github.com/warpkit/warpkit/internal/sorteddict/dicttest"
)

func newGPUTest[K, V warpkit.Word](t *testing.T, dev *cuda.Device) *SortedArray[K, V] {
	t.Helper()
	a, err := New[K, V](Options{Backend: warpkit.CUDA, Device: dev})
	if err != nil {
		t.Fatal(err)
	}
	if a.Backend() != warpkit.CUDA {
		t.Fatalf("backend %v", a.Backend())
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func TestGPUDifferential(t *testing.T) {
	dev := gputest.Device(t)
	for _, w := range workloads {
		name := fmt.Sprintf("space=%d", w.Space)
		t.Run(name+"/k32v32", func(t *testing.T) { gpuRun[uint32, uint32](t, dev, w) })
		t.Run(name+"/k32v64", func(t *testing.T) { gpuRun[uint32, uint64](t, dev, w) })
		t.Run(name+"/k64v32", func(t *testing.T) { gpuRun[uint64, uint32](t, dev, w) })
		t.Run(name+"/k64v64", func(t *testing.T) { gpuRun[uint64, uint64](t, dev, w) })
	}
}

func gpuRun[K, V warpkit.Word](t *testing.T, dev *cuda.Device, w dicttest.Workload) {
	a := newGPUTest[K, V](t, dev)
	o := dicttest.Run[K, V](t, a, w.Space, w, 30, 100, 96, nil)
	if lenOf(t, a) != o.Len() {
		t.Fatalf("Len() = %d, want %d", lenOf(t, a), o.Len())
	}
}

func TestGPULarger(t *testing.T) {
	dev := gputest.Device(t)
	a := newGPUTest[uint64, uint32](t, dev)
	w := dicttest.Workload{Space: 1 << 16, DeleteFrac: 0.2}
	dicttest.Run[uint64, uint32](t, a, 9, w, 20, 20000, 4000, nil)
}

func TestGPUDeviceAPI(t *testing.T) {
	dev := gputest.Device(t)
	dicttest.DeviceRun[uint32, uint64](t, dev, newGPUTest[uint32, uint64](t, dev), 3)
	dicttest.DeviceRun[uint64, uint64](t, dev, newGPUTest[uint64, uint64](t, dev), 4)
}

// TestGPUConcurrent queries from several goroutines while updates go on;
// keys no update touches must always be found.
func TestGPUConcurrent(t *testing.T) {
	dev := gputest.Device(t)
	ctx := context.Background()
	a := newGPUTest[uint32, uint32](t, dev)
	stable := make([]uint32, 1000)
	for i := range stable {
		stable[i] = uint32(i) * 2 // updates below use odd keys only
	}
	if err := a.Insert(ctx, stable, stable); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			vals, found := make([]uint32, len(stable)), make([]bool, len(stable))
			for range 30 {
				if err := a.Lookup(ctx, stable, vals, found); err != nil {
					errs <- err
					return
				}
				for i, k := range stable {
					if !found[i] || vals[i] != k {
						errs <- fmt.Errorf("lookup(%d) = %d, %v", k, vals[i], found[i])
						return
					}
				}
			}
		}()
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 30 {
		keys, vals, dels := dicttest.Batch[uint32, uint32](rng, dicttest.Workload{Space: 1 << 20, DeleteFrac: 0.3}, 300)
		for i := range keys {
			keys[i] |= 1
		}
		if err := a.Update(ctx, keys, vals, dels); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestGPUOutOfMemory(t *testing.T) {
	dev := gputest.Device(t)
	a := newGPUTest[uint32, uint32](t, dev)
	dicttest.OutOfMemory[uint32, uint32](t, dev, a, func() string { return fmt.Sprint(lenOf(t, a)) })
}
