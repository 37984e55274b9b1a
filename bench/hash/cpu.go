package hashbench

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/internal/benchfmt"
	"github.com/warpkit/warpkit/slaballoc"
	"github.com/warpkit/warpkit/slabhash"
)

// The CPU backend (no device, or --backend cpu): the experiments that have a
// CPU-backend variant run with the same keys, batches and checks as on the
// GPU, from Go slices, at --quick sizes, one repetition. The slab hash's CPU
// backend keeps Go maps in locked shards, so what is about slabs (layouts,
// memory utilization: fig4) has no CPU variant; the static open-addressing
// baseline is a GPU table (internal/oahash), so the CPU tables have no
// baseline columns and judge no targets; alloc times slaballoc's Go pool
// (first fit over the same bitmaps) without the warp-cooperative variants
// and the bump-pointer baseline.

// runCPU runs the experiments of order on the CPU backend and prints the
// report (b.dev is nil).
func (b *hashBench) runCPU(w io.Writer, order []string, minLog, maxLog int, asJSON bool, jsonOut, plotDir string) error {
	b.rep = benchfmt.NewReport("warp bench hash: slab hash (32-bit keys and values), CPU backend: Go maps in locked shards, no GPU baseline",
		fmt.Sprintf("CPU backend, %d logical CPUs, GOMAXPROCS %d", runtime.NumCPU(), runtime.GOMAXPROCS(0)))
	if !asJSON {
		b.rep.Stream(w)
	}
	steps := map[string]func() error{
		"overhead": b.overheadCPU,
		"layouts": func() error {
			b.rep.Note("layouts: needs a GPU (slab layouts exist on the CUDA backend only).")
			return nil
		},
		"fig4": func() error {
			b.rep.Note("fig4: needs a GPU (the CPU backend has no slabs, so no memory utilization to sweep).")
			return nil
		},
		"fig5":  func() error { return b.fig5CPU(minLog, maxLog) },
		"fig6":  b.fig6CPU,
		"fig7":  func() error { return b.fig7CPU([]int{1 << 20}) },
		"alloc": b.allocCPU,
	}
	var failed []error
	for _, name := range order {
		if err := b.ctx.Err(); err != nil {
			return err
		}
		if err := steps[name](); err != nil {
			b.rep.Note("%s FAILED: %v", name, err)
			failed = append(failed, fmt.Errorf("%s: %w", name, err))
		}
	}
	b.rep.Note("Rates are operations per second of wall time for synchronous calls on Go slices (one run each, --quick sizes).")
	b.rep.Note("CPU backend: no baseline columns and no targets (the static open-addressing baseline is a GPU table); the")
	b.rep.Note("  slab layouts, Fig. 4 (memory utilization), the warp allocators and the bump-pointer baseline need a GPU.")
	return b.finish(w, asJSON, jsonOut, plotDir, failed)
}

// hostData is hashData in Go slices.
type hostData struct {
	n                  int
	keys, vals, absent []uint32
	out                []uint32
	res                []slabhash.Result
}

func newHostData(n int) *hostData {
	d := &hostData{n: n, keys: Keys(0, n), vals: make([]uint32, n), absent: Keys(n, n), out: make([]uint32, n), res: make([]slabhash.Result, n)}
	for i := range d.vals {
		d.vals[i] = uint32(i) + 1
	}
	return d
}

func countFoundHost(res []slabhash.Result) int {
	n := 0
	for _, r := range res {
		if r == slabhash.Found {
			n++
		}
	}
	return n
}

// newMapCPU opens a map of the CPU backend sized for n keys.
func (b *hashBench) newMapCPU(n int, util float64) (*slabhash.Map[uint32, uint32], error) {
	return slabhash.NewMap[uint32, uint32](slabhash.Options{Backend: warpkit.CPU, ExpectedSize: n, Utilization: util})
}

// measureSlabCPU is measureSlab on the CPU backend: build, then finds of the
// present and the absent keys, checked. The map is returned open.
func (b *hashBench) measureSlabCPU(d *hostData) (slabRates, *slabhash.Map[uint32, uint32], error) {
	var r slabRates
	m, err := b.newMapCPU(d.n, 0.6)
	if err != nil {
		return r, nil, err
	}
	fail := func(err error) (slabRates, *slabhash.Map[uint32, uint32], error) {
		m.Close()
		return r, nil, err
	}
	build, err := hashTime(func() error { return m.Insert(b.ctx, d.keys, d.vals, d.res) })
	if err != nil {
		return fail(err)
	}
	if n, err := m.Len(b.ctx); err != nil || n != d.n {
		return fail(fmt.Errorf("the slab hash holds %d keys after inserting %d (%v)", n, d.n, err))
	}
	r.build = float64(d.n) / build.Seconds()
	for _, q := range []struct {
		keys  []uint32
		rate  *float64
		found int
	}{{d.keys, &r.findAll, d.n}, {d.absent, &r.findNone, 0}} {
		t, err := hashTime(func() error { return m.Lookup(b.ctx, q.keys, d.out, d.res) })
		if err != nil {
			return fail(err)
		}
		if got := countFoundHost(d.res); got != q.found {
			return fail(fmt.Errorf("find reported %d keys found, want %d", got, q.found))
		}
		*q.rate = float64(d.n) / t.Seconds()
	}
	return r, m, nil
}

// overheadCPU is overhead on the CPU backend: one-element calls from Go
// slices, without the static table.
func (b *hashBench) overheadCPU() error {
	const calls = 300
	d := newHostData(1 << 16)
	_, m, err := b.measureSlabCPU(d)
	if err != nil {
		return err
	}
	defer m.Close()
	ops := []slabhash.Op{slabhash.OpFind}
	k, v, out, res := d.keys[:1], d.vals[:1], d.out[:1], d.res[:1]
	tab := b.rep.Table(fmt.Sprintf("Call overhead, CPU backend: µs per synchronous call of one element from Go slices (median of %d runs of %d calls)", b.reps, calls),
		"call", "slab hash")
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"find", func() error { return m.Lookup(b.ctx, k, out, res) }},
		{"insert", func() error { return m.Insert(b.ctx, k, v, res) }},
		{"mixed", func() error { return m.Apply(b.ctx, ops, k, out, res) }},
	} {
		t, err := b.median(func() (time.Duration, error) {
			return hashTime(func() error {
				for range calls {
					if err := c.call(); err != nil {
						return err
					}
				}
				return nil
			})
		})
		if err != nil {
			return err
		}
		tab.Add(c.name, float64(t.Nanoseconds())/1e3/calls)
	}
	return nil
}

// fig5CPU is fig5 on the CPU backend: build and finds against n.
func (b *hashBench) fig5CPU(lo, hi int) error {
	hi = min(hi, 22)
	tab := b.rep.Table("Fig. 5, CPU backend: build and search vs n from Go slices (G ops/s)",
		"n", "build", "find all", "find none")
	for l := lo; l <= hi; l++ {
		if l%2 == 1 {
			continue
		}
		s, m, err := b.measureSlabCPU(newHostData(1 << l))
		if err != nil {
			return fmt.Errorf("n=2^%d: %w", l, err)
		}
		m.Close()
		tab.Add(fmt.Sprintf("2^%d", l), s.build/gops, s.findAll/gops, s.findNone/gops)
	}
	return nil
}

// fig6CPU is fig6 on the CPU backend: the slab hash's cumulative time
// inserting the batches (the static rebuilds run on the GPU).
func (b *hashBench) fig6CPU() error {
	total := 1 << 19
	d := newHostData(total)
	tab := b.rep.Table(fmt.Sprintf("Fig. 6, CPU backend: incremental batches up to %d keys from Go slices: cumulative time (ms)", total),
		"batch", "batches", "slab hash")
	for _, batch := range []int{32 << 10, 64 << 10, 128 << 10} {
		m, err := b.newMapCPU(total, 0.65)
		if err != nil {
			return err
		}
		var slab time.Duration
		for lo := 0; lo < total; lo += batch {
			hi := min(total, lo+batch)
			t, err := hashTime(func() error { return m.Insert(b.ctx, d.keys[lo:hi], d.vals[lo:hi], d.res[lo:hi]) })
			if err != nil {
				m.Close()
				return err
			}
			slab += t
		}
		n, err := m.Len(b.ctx)
		m.Close()
		if err == nil && n != total {
			err = fmt.Errorf("the slab hash holds %d keys after inserting %d", n, total)
		}
		if err != nil {
			return err
		}
		tab.Add(fmt.Sprintf("%dk", batch>>10), (total+batch-1)/batch, float64(slab.Microseconds())/1e3)
	}
	return nil
}

// fig7CPU is fig7 on the CPU backend: the mixes Γ0-Γ2 (the same batches as
// on the GPU) on a map built with n keys, one row per size.
func (b *hashBench) fig7CPU(sizes []int) error {
	mixes := []struct {
		name string
		g    [4]float64
	}{{"Γ0", [4]float64{0.5, 0.5, 0, 0}}, {"Γ1", [4]float64{0.2, 0.2, 0.3, 0.3}}, {"Γ2", [4]float64{0.1, 0.1, 0.4, 0.4}}}
	tab := b.rep.Table("Fig. 7a, CPU backend: concurrent mixes, n keys built, 4 batches of n/4 mixed operations from Go slices (G ops/s)",
		"n", "Γ0", "Γ1", "Γ2")
	var errs []error
	for _, n := range sizes {
		d := newHostData(n)
		row := []any{fmt.Sprintf("2^%d", log2(n))}
		for _, mx := range mixes {
			r, err := b.mixedCPU(d, mx.g)
			if err != nil {
				errs = append(errs, fmt.Errorf("fig. 7a, n = %d, %s: %w", n, mx.name, err))
				row = append(row, "-")
				continue
			}
			row = append(row, r/gops)
		}
		tab.Add(row...)
	}
	return errors.Join(errs...)
}

// mixedCPU builds a map of d's keys and runs the batches of distribution g
// on it, checking the Found counts; it returns the rate in ops/s.
func (b *hashBench) mixedCPU(d *hostData, g [4]float64) (float64, error) {
	m, err := b.newMapCPU(d.n, 0.6)
	if err != nil {
		return 0, err
	}
	defer m.Close()
	if err := m.Insert(b.ctx, d.keys, d.vals, d.res); err != nil {
		return 0, err
	}
	batches, free, err := b.mixBatches(&hashData{n: d.n}, g)
	if err != nil {
		return 0, err
	}
	defer free()
	var total time.Duration
	ops := 0
	for _, mb := range batches {
		res := d.res[:len(mb.hostKeys)]
		out := d.out[:len(mb.hostKeys)]
		copy(out, mb.hostVals)
		t, err := hashTime(func() error { return m.Apply(b.ctx, mb.hostOps, mb.hostKeys, out, res) })
		if err != nil {
			return 0, err
		}
		total += t
		ops += len(mb.hostKeys)
		if got := countFoundHost(res); got != mb.present {
			return 0, fmt.Errorf("mixed batch found %d of %d present keys", got, mb.present)
		}
	}
	return float64(ops) / total.Seconds(), nil
}

// allocCPU is alloc on the CPU backend: slaballoc's Go pool, allocating,
// freeing and reallocating n units in one call each.
func (b *hashBench) allocCPU() error {
	n := 1 << 22
	out := make([]uint32, n)
	tab := b.rep.Table(fmt.Sprintf("SlabAlloc, CPU backend: %d allocations of 64-byte units from Go slices, one call each (G/s)", n),
		"allocator", "allocate", "free", "reallocate")
	p, err := slaballoc.New(slaballoc.Options{Backend: warpkit.CPU, UnitBytes: 64,
		BlocksPerSuperBlock: 16384, InitialSuperBlocks: max(1, 2*n/(16384*1024))})
	if err != nil {
		return err
	}
	defer p.Close()
	var alloc, free, again time.Duration
	step := func(acc *time.Duration, f func() error) error {
		t, err := hashTime(f)
		*acc += t
		return err
	}
	if err := errors.Join(
		step(&alloc, func() error { return p.Allocate(b.ctx, out) }),
		step(&free, func() error { return p.Free(b.ctx, out) }),
		step(&again, func() error { return p.Allocate(b.ctx, out) }),
	); err != nil {
		return err
	}
	if st, err := p.Stats(b.ctx); err != nil || st.Allocated != int64(n) {
		return fmt.Errorf("pool reports %d allocated units after reallocating %d (%v)", st.Allocated, n, err)
	}
	per := func(d time.Duration) float64 { return float64(n) / d.Seconds() / gops }
	tab.Add("Go pool (first fit over the bitmaps)", per(alloc), per(free), per(again))
	return nil
}
