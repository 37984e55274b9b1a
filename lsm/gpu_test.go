package lsm

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/gputest"
	"github.com/warpkit/warpkit/internal/sorteddict/dicttest"
)

func newGPUTest[K, V warpkit.Word](t *testing.T, dev *cuda.Device, b int) *LSM[K, V] {
	t.Helper()
	l, err := New[K, V](Options{Backend: warpkit.CUDA, Device: dev, BatchSize: b})
	if err != nil {
		t.Fatal(err)
	}
	if l.Backend() != warpkit.CUDA {
		t.Fatalf("backend %v", l.Backend())
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// twin applies every update to the GPU LSM and to a CPU LSM and requires
// their levels and referenced log values to be equal entry for entry; the
// queries go to the GPU LSM.
type twin[K, V warpkit.Word] struct {
	*LSM[K, V]
	cpu *LSM[K, V]
}

func (w twin[K, V]) Update(ctx context.Context, keys []K, vals []V, dels []bool) error {
	if err := errors.Join(w.LSM.Update(ctx, keys, vals, dels), w.cpu.Update(ctx, keys, vals, dels)); err != nil {
		return err
	}
	return sameLevels(w.LSM, w.cpu)
}

func (w twin[K, V]) Delete(ctx context.Context, keys []K) error {
	if err := errors.Join(w.LSM.Delete(ctx, keys), w.cpu.Delete(ctx, keys)); err != nil {
		return err
	}
	return sameLevels(w.LSM, w.cpu)
}

func (w twin[K, V]) cleanup() error {
	ctx := context.Background()
	if err := errors.Join(w.LSM.Compact(ctx), w.cpu.Compact(ctx)); err != nil {
		return err
	}
	return sameLevels(w.LSM, w.cpu)
}

func sameLevels[K, V warpkit.Word](g, c *LSM[K, V]) error {
	gs, err1 := g.impl.snapshot()
	cs, err2 := c.impl.snapshot()
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	if gs.state != cs.state {
		return fmt.Errorf("gpu state %+v, cpu %+v", gs.state, cs.state)
	}
	if !slices.Equal(gs.stageK, cs.stageK) || !slices.Equal(gs.stageT, cs.stageT) {
		return fmt.Errorf("staging runs differ")
	}
	for i, t := range cs.stageT {
		if !isTomb(t) && gs.log[t&slotMask] != cs.log[t&slotMask] {
			return fmt.Errorf("staging entry %d: logged value differs", i)
		}
	}
	for _, lv := range cs.state.levels() {
		if !slices.Equal(gs.keys[lv], cs.keys[lv]) {
			return fmt.Errorf("level %d keys differ", lv)
		}
		if !slices.Equal(gs.tags[lv], cs.tags[lv]) {
			return fmt.Errorf("level %d tags differ", lv)
		}
		for i, t := range cs.tags[lv] {
			if !isTomb(t) && gs.log[t&slotMask] != cs.log[t&slotMask] {
				return fmt.Errorf("level %d entry %d: logged value differs", lv, i)
			}
		}
	}
	return nil
}

func TestGPUTwinDifferential(t *testing.T) {
	dev := gputest.Device(t)
	cases := []struct {
		b     int
		space uint64
		del   float64
	}{{1, 16, 0.3}, {3, 40, 0.25}, {8, 200, 0.4}, {64, 1 << 12, 0.1}, {100, 1 << 40, 0.2},
		{4500, 1 << 14, 0.3}} // batches of 4 chunks, sorted by prim's fused sort, merged down several levels
	for _, c := range cases {
		w := dicttest.Workload{Space: c.space, DeleteFrac: c.del}
		name := fmt.Sprintf("b=%d/space=%d", c.b, c.space)
		t.Run(name+"/k32v32", func(t *testing.T) { twinRun[uint32, uint32](t, dev, c.b, w) })
		t.Run(name+"/k32v64", func(t *testing.T) { twinRun[uint32, uint64](t, dev, c.b, w) })
		t.Run(name+"/k64v32", func(t *testing.T) { twinRun[uint64, uint32](t, dev, c.b, w) })
		t.Run(name+"/k64v64", func(t *testing.T) { twinRun[uint64, uint64](t, dev, c.b, w) })
	}
}

func twinRun[K, V warpkit.Word](t *testing.T, dev *cuda.Device, b int, w dicttest.Workload) {
	tw := twin[K, V]{LSM: newGPUTest[K, V](t, dev, b), cpu: newCPUTest[K, V](t, b)}
	between := func(step int) error {
		if step%4 != 3 {
			return nil
		}
		return tw.cleanup()
	}
	dicttest.Run[K, V](t, tw, uint64(b)*31+w.Space, w, 30, 3*b+5, 96, between)
}

// TestGPUQueryPaths runs count and range through each path: the five-stage
// pipeline only (walkCap 0), the walk only (no cap), and the default mix, with
// chunks split by query count and by the candidate budget.
func TestGPUQueryPaths(t *testing.T) {
	dev := gputest.Device(t)
	for _, c := range []struct {
		name          string
		walkCap       uint64
		chunk, budget int
	}{{"pipeline", 0, 7, 40}, {"walk", 1 << 40, 5, 1 << 20}, {"mixed", 8, 7, 40}, {"defaults", defaultWalkCap, defaultChunkQueries, defaultBudget}} {
		t.Run(c.name, func(t *testing.T) {
			l := newGPUTest[uint64, uint32](t, dev, 16)
			g := l.impl.(*gpuLSM[uint64, uint32])
			g.walkCap, g.chunkQueries, g.budget = c.walkCap, c.chunk, uint64(c.budget)
			w := dicttest.Workload{Space: 300, DeleteFrac: 0.3}
			dicttest.Run[uint64, uint32](t, l, 5, w, 20, 60, 200, func(step int) error {
				if step%5 == 4 {
					return l.Compact(context.Background())
				}
				return nil
			})
		})
	}
}

// TestGPULarger runs fewer, larger steps: many levels, long candidate lists.
func TestGPULarger(t *testing.T) {
	dev := gputest.Device(t)
	steps := 25
	if testing.Short() {
		steps = 8
	}
	l := newGPUTest[uint32, uint32](t, dev, 1<<10)
	w := dicttest.Workload{Space: 1 << 16, DeleteFrac: 0.2}
	dicttest.Run[uint32, uint32](t, l, 11, w, steps, 5000, 4000, func(step int) error {
		if step == steps/2 {
			return l.Compact(context.Background())
		}
		return nil
	})
}

// TestGPUDeviceAPI checks the device-resident methods against the oracle.
func TestGPUDeviceAPI(t *testing.T) {
	dev := gputest.Device(t)
	dicttest.DeviceRun[uint32, uint64](t, dev, newGPUTest[uint32, uint64](t, dev, 32), 1)
	dicttest.DeviceRun[uint64, uint32](t, dev, newGPUTest[uint64, uint32](t, dev, 7), 2)
}

// TestGPUConcurrent runs queries from several goroutines while another
// goroutine updates; every query answer must match one of the states the
// structure went through, and the final state must match the oracle.
func TestGPUConcurrent(t *testing.T) {
	dev := gputest.Device(t)
	ctx := context.Background()
	l := newGPUTest[uint64, uint64](t, dev, 64)
	// Keys k live with value k in every state: queries for them always agree.
	stable := make([]uint64, 1000)
	for i := range stable {
		stable[i] = uint64(i) * 1000003
	}
	if err := l.Insert(ctx, stable, stable); err != nil {
		t.Fatal(err)
	}
	o := dicttest.NewOracle[uint64, uint64]()
	o.Apply(stable, stable, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			vals, found := make([]uint64, len(stable)), make([]bool, len(stable))
			for range 30 {
				if err := l.Lookup(ctx, stable, vals, found); err != nil {
					errs <- err
					return
				}
				for i, k := range stable {
					if !found[i] || vals[i] != k {
						errs <- fmt.Errorf("goroutine %d: lookup(%d) = %d, %v", g, k, vals[i], found[i])
						return
					}
				}
			}
		}()
	}
	rng := rand.New(rand.NewPCG(3, 4))
	w := dicttest.Workload{Space: 1 << 20, DeleteFrac: 0.3}
	for range 30 {
		keys, vals, dels := dicttest.Batch[uint64, uint64](rng, w, 200)
		for i, k := range keys {
			if k%1000003 == 0 && k/1000003 < 1000 { // leave the stable keys alone
				keys[i]++
			}
		}
		if err := l.Update(ctx, keys, vals, dels); err != nil {
			t.Fatal(err)
		}
		o.Apply(keys, vals, dels)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	dicttest.Check[uint64, uint64](t, ctx, l, o, rng, w, 2000)
}

// TestGPUCapacityKept: the merge buffers Options.Capacity reserves survive
// Cleanup, so updates within the capacity still allocate nothing.
func TestGPUCapacityKept(t *testing.T) {
	dev := gputest.Device(t)
	ctx := context.Background()
	const b, batches = 64, 40
	l, err := New[uint32, uint32](Options{Backend: warpkit.CUDA, Device: dev, BatchSize: b, Capacity: b * batches})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	g := l.impl.(*gpuLSM[uint32, uint32])
	if g.pingUp != b<<4 { // 40 batches: levels up to 5, cascades through buffers of b<<4
		t.Fatalf("reserved merge buffers of %d entries, want %d", g.pingUp, b<<4)
	}
	o := dicttest.NewOracle[uint32, uint32]()
	rng := rand.New(rand.NewPCG(7, 8))
	w := dicttest.Workload{Space: 1 << 12, DeleteFrac: 0.2}
	reserved := func(when string) {
		t.Helper()
		for i := range 2 {
			if k, tg := g.upd.pingK[i].Cap(), g.upd.pingT[i].Cap(); k != g.pingUp || tg != g.pingUp {
				t.Fatalf("%s: merge buffers %d hold %d keys and %d tags, want %d", when, i, k, tg, g.pingUp)
			}
			if k, tg := g.stageK[i].Cap(), g.stageT[i].Cap(); k != b || tg != b {
				t.Fatalf("%s: staging buffers %d hold %d keys and %d tags, want %d", when, i, k, tg, b)
			}
		}
		if k, tg := g.upd.mergeK.Cap(), g.upd.mergeT.Cap(); k != 2*b || tg != 2*b {
			t.Fatalf("%s: batch merge buffers hold %d keys and %d tags, want %d", when, k, tg, 2*b)
		}
	}
	for round := range 2 {
		for range batches / 2 {
			keys, vals, dels := dicttest.Batch[uint32, uint32](rng, w, b)
			if err := l.Update(ctx, keys, vals, dels); err != nil {
				t.Fatal(err)
			}
			o.Apply(keys, vals, dels)
		}
		reserved(fmt.Sprintf("round %d, before cleanup", round))
		if err := l.Compact(ctx); err != nil {
			t.Fatal(err)
		}
		reserved(fmt.Sprintf("round %d, after cleanup", round))
	}
	dicttest.Check[uint32, uint32](t, ctx, l, o, rng, w, 500)
}

// TestGPUOutOfMemory: an update that cannot get device memory fails with
// ErrOutOfMemory, changes nothing, and works once memory is back.
func TestGPUOutOfMemory(t *testing.T) {
	dev := gputest.Device(t)
	l := newGPUTest[uint32, uint32](t, dev, 1<<12)
	dicttest.OutOfMemory[uint32, uint32](t, dev, l, func() string { return fmt.Sprintf("%+v", statsOf(t, l)) })
}

func TestGPUShortBatches(t *testing.T) {
	shortBatches(t, newGPUTest[uint32, uint32](t, gputest.Device(t), 0))
}
