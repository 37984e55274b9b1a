package slaballoc

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"testing"
	"time"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/emu"
	"github.com/warpkit/warpkit/internal/gputest"
	"github.com/warpkit/warpkit/internal/kernelgen/ptxcheck"
)

func TestPTXUpToDate(t *testing.T) { ptxcheck.Check(t, "slaballoc.ptx") }

// forEachBackend runs f on the CPU twin, on the CUDA backend over the CPU
// emulation of the GPU (internal/emu: slaballoc.cu built for the host) and,
// where there is a device, on the GPU (the test name says which).
func forEachBackend(t *testing.T, f func(t *testing.T, opts Options)) {
	t.Run("CPU", func(t *testing.T) { f(t, Options{Backend: warpkit.CPU}) })
	t.Run("Emulated", func(t *testing.T) {
		dev := emu.Device(t, emu.Options{}, "slaballoc.cu")
		f(t, Options{Backend: warpkit.CUDA, Device: dev})
	})
	t.Run("EmulatedFlat", func(t *testing.T) {
		dev := emu.Device(t, emu.Options{}, "slaballoc.cu")
		f(t, Options{Backend: warpkit.CUDA, Device: dev, Flat: true})
	})
	t.Run("GPU", func(t *testing.T) {
		dev := gputest.Device(t)
		f(t, Options{Backend: warpkit.CUDA, Device: dev})
	})
	t.Run("GPUFlat", func(t *testing.T) {
		dev := gputest.Device(t)
		f(t, Options{Backend: warpkit.CUDA, Device: dev, Flat: true})
	})
}

func newPool(t *testing.T, opts Options) *Pool {
	t.Helper()
	p, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// checkCounts compares Stats, the bitmaps and the expected count.
func checkCounts(t *testing.T, p *Pool, want int64) {
	t.Helper()
	st, err := p.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	bitsSet, err := p.countBits()
	if err != nil {
		t.Fatal(err)
	}
	if st.Allocated != want || bitsSet != want || st.Free != st.Capacity-want {
		t.Fatalf("allocated: stats %d, bitmaps %d, want %d (stats %+v)", st.Allocated, bitsSet, want, st)
	}
}

func checkDistinct(t *testing.T, p *Pool, addrs []uint32) {
	t.Helper()
	s := slices.Clone(addrs)
	slices.Sort(s)
	for i, a := range s {
		if a == Null || !p.validAddress(a) {
			t.Fatalf("address %#x is not a unit", a)
		}
		if i > 0 && s[i-1] == a {
			t.Fatalf("address %#x handed out twice", a)
		}
	}
}

func TestOptionsValidation(t *testing.T) {
	bad := []Options{
		{UnitBytes: 100}, {UnitBytes: 8}, {UnitBytes: 8192},
		{BlocksPerSuperBlock: 1 << 15}, {MaxSuperBlocks: 65},
		{InitialSuperBlocks: 3, MaxSuperBlocks: 2}, {LowWater: -1},
	}
	if _, err := New(Options{Backend: warpkit.Backend(7)}); !errors.Is(err, warpkit.ErrInvalidArgument) {
		t.Errorf("unknown backend: got %v", err)
	}
	for _, o := range bad {
		o.Backend = warpkit.CPU
		if _, err := New(o); !errors.Is(err, warpkit.ErrInvalidArgument) {
			t.Errorf("%+v: got %v", o, err)
		}
	}
}

func TestAllocateFreeReuse(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		ctx := context.Background()
		opts.BlocksPerSuperBlock = 4 // 4096 units
		opts.MaxSuperBlocks = 1
		opts.LowWater = 1
		p := newPool(t, opts)
		a := make([]uint32, 3000)
		if err := p.Allocate(ctx, a); err != nil {
			t.Fatal(err)
		}
		checkDistinct(t, p, a)
		checkCounts(t, p, 3000)
		if err := p.Free(ctx, a); err != nil {
			t.Fatal(err)
		}
		checkCounts(t, p, 0)
		// Every unit, including the freed ones, can be allocated again.
		all := make([]uint32, 4096)
		if err := p.Allocate(ctx, all); err != nil {
			t.Fatalf("allocating the whole pool after frees: %v", err)
		}
		checkDistinct(t, p, all)
		checkCounts(t, p, 4096)
		// One more is exhaustion, all-or-nothing, and the pool stays usable.
		one := make([]uint32, 2)
		if err := p.Allocate(ctx, one); !errors.Is(err, warpkit.ErrPoolExhausted) {
			t.Fatalf("allocating from a full pool: %v", err)
		}
		if one[0] != Null || one[1] != Null {
			t.Fatalf("failed allocation left %#x", one)
		}
		checkCounts(t, p, 4096)
		if err := p.Free(ctx, all[:10]); err != nil {
			t.Fatal(err)
		}
		if err := p.Allocate(ctx, one); err != nil {
			t.Fatalf("allocating after freeing: %v", err)
		}
		checkCounts(t, p, 4096-10+2)
	})
}

// TestObserved: the estimate of the units in use follows the host's
// allocations and frees between readings of the counter (mvbtree cuts its
// insert rounds by it), and a reading makes it exact.
func TestObserved(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		ctx := context.Background()
		opts.BlocksPerSuperBlock = 4 // 4096 units
		p := newPool(t, opts)
		want := func(what string, n int64) {
			t.Helper()
			if got := p.Observed(); got != n {
				t.Fatalf("%s: Observed %d, want %d", what, got, n)
			}
		}
		a := make([]uint32, 3000)
		if err := p.Allocate(ctx, a); err != nil {
			t.Fatal(err)
		}
		want("after allocating 3000", 3000)
		if err := p.Free(ctx, a[:1000]); err != nil {
			t.Fatal(err)
		}
		want("after freeing 1000", 2000)
		checkCounts(t, p, 2000) // Stats reads the counter
		want("after a reading", 2000)
		if opts.Backend == warpkit.CUDA {
			d, err := cuda.Alloc[uint32](opts.Device, 500)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Free()
			if err := d.CopyFromHost(a[1000:1500]); err != nil {
				t.Fatal(err)
			}
			if err := p.FreeDevice(ctx, d); err != nil {
				t.Fatal(err)
			}
			want("after freeing 500 device addresses", 1500)
		} else if err := p.Free(ctx, a[1000:1500]); err != nil {
			t.Fatal(err)
		}
		checkCounts(t, p, 1500)
		// A failed free counts nothing.
		if err := p.Free(ctx, a[:1]); err == nil {
			t.Fatal("a unit freed twice: no error")
		}
		want("after a failed free", 1500)
	})
}

func TestGrowthAndMaximum(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		ctx := context.Background()
		opts.BlocksPerSuperBlock = 1 // 1024 units per super block
		opts.MaxSuperBlocks = 3
		opts.LowWater = 100
		p := newPool(t, opts)
		a := make([]uint32, 2500)
		if err := p.Allocate(ctx, a); err != nil {
			t.Fatal(err)
		}
		if p.SuperBlocks() != 3 {
			t.Fatalf("%d super blocks after 2500 units, want 3", p.SuperBlocks())
		}
		checkDistinct(t, p, a)
		checkCounts(t, p, 2500)
		b := make([]uint32, 600)
		if err := p.Allocate(ctx, b); !errors.Is(err, warpkit.ErrPoolExhausted) {
			t.Fatalf("allocating past the maximum: %v", err)
		}
		checkCounts(t, p, 2500)
		if err := p.GrowPast(ctx, p.SuperBlocks()); !errors.Is(err, warpkit.ErrPoolExhausted) {
			t.Fatalf("GrowPast at the maximum: %v", err)
		}
	})
}

func TestReserveKeepsLowWater(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		ctx := context.Background()
		opts.BlocksPerSuperBlock = 1
		opts.MaxSuperBlocks = 8
		opts.LowWater = 1000
		p := newPool(t, opts)
		if err := p.Reserve(ctx, 500); err != nil {
			t.Fatal(err)
		}
		if p.Capacity() < 1500 {
			t.Fatalf("capacity %d after reserving 500 with low water 1000", p.Capacity())
		}
		if err := p.Reserve(ctx, 100000); err != nil {
			t.Fatalf("reserving past the maximum is left to the kernels: %v", err)
		}
		if p.SuperBlocks() != 8 {
			t.Fatalf("%d super blocks, want the maximum 8", p.SuperBlocks())
		}
	})
}

// TestReservationsInFlight: a reservation counts until Unreserve ends it,
// also across readings of the counter by other callers (Observe, Stats), so
// a second caller reserving while the first one's kernel may still allocate
// gets room for both.
func TestReservationsInFlight(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		ctx := context.Background()
		opts.BlocksPerSuperBlock = 1 // 1024 units per super block
		opts.InitialSuperBlocks = 2
		opts.MaxSuperBlocks = 16
		opts.LowWater = 1
		p := newPool(t, opts)
		if err := p.Reserve(ctx, 1500); err != nil { // fits in 2048
			t.Fatal(err)
		}
		p.Observe(0) // another caller's kernel finished and read the counter
		if _, err := p.Stats(ctx); err != nil {
			t.Fatal(err)
		}
		if err := p.Reserve(ctx, 1500); err != nil { // 3000 + 1 do not fit in 2048
			t.Fatal(err)
		}
		if c := p.Capacity(); c < 3001 {
			t.Fatalf("capacity %d with two reservations of 1500 in flight", c)
		}
		p.Unreserve(1500)
		p.Unreserve(1500)
		before := p.SuperBlocks()
		if err := p.Reserve(ctx, 3000); err != nil { // fits once both ended
			t.Fatal(err)
		}
		p.Unreserve(3000)
		if p.SuperBlocks() != before {
			t.Fatalf("grew from %d to %d super blocks for room it had", before, p.SuperBlocks())
		}
	})
}

// TestGrowthSteps: a growth step adds at least half the super blocks the
// pool has (so a growing pool takes few steps), all it needs when it needs
// more, never more than the maximum; Stats counts the steps.
func TestGrowthSteps(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		ctx := context.Background()
		opts.BlocksPerSuperBlock = 1 // 1024 units per super block
		opts.InitialSuperBlocks = 4
		opts.MaxSuperBlocks = 11
		opts.LowWater = 1
		p := newPool(t, opts)
		steps := []struct {
			reserve      int
			supers, done int64
		}{
			{4000, 4, 0},   // fits
			{4200, 6, 1},   // one missing: half of 4 added
			{9000, 9, 2},   // three missing, half of 6 is 3
			{10000, 11, 3}, // 1 missing, half of 9 would pass the maximum
		}
		for _, s := range steps {
			if err := p.Reserve(ctx, s.reserve); err != nil {
				t.Fatal(err)
			}
			p.Unreserve(s.reserve)
			st, err := p.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if int64(st.SuperBlocks) != s.supers || st.Growths != s.done {
				t.Fatalf("after reserving %d: %d super blocks in %d steps, want %d in %d", s.reserve, st.SuperBlocks, st.Growths, s.supers, s.done)
			}
		}
		if err := p.GrowPast(ctx, p.SuperBlocks()); !errors.Is(err, warpkit.ErrPoolExhausted) {
			t.Fatalf("GrowPast at the maximum: %v", err)
		}
	})
}

func TestBadFrees(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		ctx := context.Background()
		opts.BlocksPerSuperBlock = 1
		p := newPool(t, opts)
		a := make([]uint32, 10)
		if err := p.Allocate(ctx, a); err != nil {
			t.Fatal(err)
		}
		if err := p.Free(ctx, a[:5]); err != nil {
			t.Fatal(err)
		}
		if err := p.Free(ctx, a[:1]); !errors.Is(err, warpkit.ErrInvalidArgument) {
			t.Fatalf("double free: %v", err)
		}
		if err := p.Free(ctx, []uint32{5 << 24}); !errors.Is(err, warpkit.ErrInvalidArgument) {
			t.Fatalf("free outside the pool: %v", err)
		}
		checkCounts(t, p, 5)
	})
}

func TestUnitContents(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		ctx := context.Background()
		opts.BlocksPerSuperBlock = 1
		opts.UnitBytes = 64
		opts.Fill = 0xff
		p := newPool(t, opts)
		a := make([]uint32, 3)
		if err := p.Allocate(ctx, a); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 64)
		if err := p.ReadUnit(ctx, a[1], got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, bytes.Repeat([]byte{0xff}, 64)) {
			t.Fatalf("new unit holds %x, want the fill byte", got)
		}
		msg := []byte("slab")
		if err := p.WriteUnit(ctx, a[1], msg); err != nil {
			t.Fatal(err)
		}
		if err := p.ReadUnit(ctx, a[1], got[:4]); err != nil || string(got[:4]) != "slab" {
			t.Fatalf("read back %q, %v", got[:4], err)
		}
		if err := p.ReadUnit(ctx, a[0], make([]byte, 65)); !errors.Is(err, warpkit.ErrInvalidArgument) {
			t.Fatalf("reading past the unit: %v", err)
		}
	})
}

// TestReset: Reset frees every unit, refills the units, gives back the
// super blocks past the initial ones, and leaves a pool that allocates,
// grows and counts as a new one; on a closed pool it is ErrClosed.
func TestReset(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		for _, initial := range []int{1, 2} {
			t.Run(fmt.Sprintf("initial=%d", initial), func(t *testing.T) { testReset(t, opts, initial) })
		}
	})
}

// testReset: three rounds over one pool of initial super blocks. Round 0
// resets with units in use written (the refill of units in use); its units
// are then written and freed through the host API, which does not restore
// them, so round 1's Reset must fill every unit; round 2 resets with
// ResetOn on a stream of the caller's (CUDA), units in use written again.
func testReset(t *testing.T, opts Options, initial int) {
	ctx := context.Background()
	opts.BlocksPerSuperBlock = 1 // 1024 units a super block
	opts.UnitBytes = 32
	opts.MaxSuperBlocks = 3
	opts.InitialSuperBlocks = initial
	opts.LowWater = 1
	opts.Fill = 0xff
	p := newPool(t, opts)
	fill := bytes.Repeat([]byte{0xff}, 32)
	var inUse []uint32 // the last round's units, when it kept them
	for round := range 3 {
		// Past the initial super blocks: the pool grows to three (round
		// 1 allocates nothing: the units round 0 freed dirty stay free).
		a := make([]uint32, 3000-len(inUse))
		if round == 1 {
			a = nil
		}
		if len(a) > 0 {
			if err := p.Reserve(ctx, len(a)); err != nil {
				t.Fatal(err)
			}
			if err := p.Allocate(ctx, a); err != nil {
				t.Fatal(err)
			}
			p.Unreserve(len(a))
			if p.SuperBlocks() != 3 {
				t.Fatalf("round %d: %d super blocks after 3000 units, want 3", round, p.SuperBlocks())
			}
		}
		checkDistinct(t, p, append(a, inUse...))
		// Units in use hold what their users wrote, those of the super
		// blocks kept among them: Reset refills them.
		dirty := map[uint32]int{}
		for _, u := range append(a, inUse...) {
			if int(u>>24) < initial && dirty[u>>24] < 64 {
				if err := p.WriteUnit(ctx, u, []byte("dirty")); err != nil {
					t.Fatal(err)
				}
				dirty[u>>24]++
			}
		}
		if round != 1 && len(dirty) != initial {
			t.Fatalf("units in use in %d of the %d kept super blocks", len(dirty), initial)
		}
		if round < 2 || opts.Device == nil {
			if err := p.Reset(ctx); err != nil {
				t.Fatal(err)
			}
		} else {
			// Queued on a stream of the caller's, the work after it on
			// that stream ordered behind it, the pool's host calls too.
			s, err := opts.Device.NewStream()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := p.ResetOn(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		if p.SuperBlocks() != initial {
			t.Fatalf("round %d: %d super blocks after Reset, want the initial %d", round, p.SuperBlocks(), initial)
		}
		checkCounts(t, p, 0)
		// Every unit again, each holding the fill byte.
		b := make([]uint32, 1024*initial)
		if err := p.Allocate(ctx, b); err != nil {
			t.Fatalf("round %d: the whole pool after Reset: %v", round, err)
		}
		checkDistinct(t, p, b)
		checkCounts(t, p, int64(len(b)))
		got := make([]byte, 32)
		for _, u := range b {
			if err := p.ReadUnit(ctx, u, got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, fill) {
				t.Fatalf("round %d: unit %#x holds %x after Reset, want the fill byte", round, u, got)
			}
		}
		if round == 0 {
			// Written, then freed by the host, which restores nothing.
			for _, u := range b[:100] {
				if err := p.WriteUnit(ctx, u, []byte("freed dirty")); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.Free(ctx, b); err != nil {
				t.Fatal(err)
			}
		} else {
			inUse = b // kept: in use at the next Reset
		}
	}
	p.Close()
	if err := p.Reset(ctx); !errors.Is(err, warpkit.ErrClosed) {
		t.Fatalf("Reset after Close: %v", err)
	}
}

// TestDump: Dump copies every super block's units and bitmaps as they are.
func TestDump(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		ctx := context.Background()
		opts.BlocksPerSuperBlock = 1
		opts.UnitBytes = 32
		opts.MaxSuperBlocks = 2
		p := newPool(t, opts)
		a := make([]uint32, 1500) // more than one super block of 1024 units
		if err := p.Allocate(ctx, a); err != nil {
			t.Fatal(err)
		}
		if err := p.Free(ctx, a[:10]); err != nil {
			t.Fatal(err)
		}
		if err := p.WriteUnit(ctx, a[20], []byte("dumped")); err != nil {
			t.Fatal(err)
		}
		sbs, err := p.Dump(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(sbs) != p.SuperBlocks() {
			t.Fatalf("%d super blocks dumped, pool has %d", len(sbs), p.SuperBlocks())
		}
		set := 0
		for _, sb := range sbs {
			for _, w := range sb.Bitmap {
				set += bits.OnesCount32(w)
			}
		}
		if set != len(a)-10 {
			t.Fatalf("dumped bitmaps hold %d units, want %d", set, len(a)-10)
		}
		for i, addr := range a {
			sb, u := addr>>24, addr&0xffffff
			on := sbs[sb].Bitmap[u/32]>>(u%32)&1 == 1
			if on != (i >= 10) {
				t.Fatalf("unit %#x: bitmap says allocated=%v", addr, on)
			}
		}
		sb, u := a[20]>>24, int(a[20]&0xffffff)
		if got := string(sbs[sb].Units[u*32 : u*32+6]); got != "dumped" {
			t.Fatalf("unit %#x dumped as %q", a[20], got)
		}
	})
}

func TestClosedAndDeviceSlicesOnCPU(t *testing.T) {
	p, err := New(Options{Backend: warpkit.CPU})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AllocateDevice(context.Background(), cuda.Slice[uint32]{}); !errors.Is(err, warpkit.ErrNeedsCUDA) {
		t.Fatalf("device slice on the CPU backend: %v, want ErrNeedsCUDA", err)
	}
	if p.Backend() != warpkit.CPU || p.Descriptor() != 0 {
		t.Fatal("CPU pool reports a device")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Allocate(context.Background(), make([]uint32, 1)); !errors.Is(err, warpkit.ErrClosed) {
		t.Fatalf("allocate after Close: %v", err)
	}
	if _, err := p.Stats(context.Background()); !errors.Is(err, warpkit.ErrClosed) {
		t.Fatalf("stats after Close: %v", err)
	}
	if err := p.Close(); !errors.Is(err, warpkit.ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
}

// TestGPUManyTiles allocates a million units with warps and with 8-lane
// tiles at once from thousands of tiles, frees them from the device, and
// checks distinctness and the counters.
func TestGPUManyTiles(t *testing.T) {
	dev := gputest.Device(t)
	ctx := context.Background()
	p := newPool(t, Options{Backend: warpkit.CUDA, Device: dev, UnitBytes: 64, BlocksPerSuperBlock: 512})
	const n = 1 << 20
	for _, tile := range []int{32, 8, 0} {
		out, err := cuda.Alloc[uint32](dev, n)
		if err != nil {
			t.Fatal(err)
		}
		if tile == 0 {
			err = p.AllocateDeviceBulk(ctx, out)
		} else {
			err = p.AllocateDeviceTile(ctx, out, tile)
		}
		if err != nil {
			t.Fatal(err)
		}
		host, err := out.ToHost()
		if err != nil {
			t.Fatal(err)
		}
		checkDistinct(t, p, host)
		checkCounts(t, p, n)
		if err := p.FreeDevice(ctx, out); err != nil {
			t.Fatal(err)
		}
		checkCounts(t, p, 0)
		out.Free()
	}
	if err := p.AllocateDevice(ctx, cuda.Slice[uint32]{}); err != nil {
		t.Fatal(err)
	}
}

func TestGPUDeviceSliceOnClosedPool(t *testing.T) {
	dev := gputest.Device(t)
	p, err := New(Options{Backend: warpkit.CUDA, Device: dev, BlocksPerSuperBlock: 1})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	out, _ := cuda.Alloc[uint32](dev, 4)
	defer out.Free()
	if err := p.AllocateDevice(context.Background(), out); !errors.Is(err, warpkit.ErrClosed) {
		t.Fatalf("got %v", err)
	}
}

// BenchmarkGPUAllocate measures allocations per second, one unit per thread,
// against the bump-pointer baseline (see warp bench hash for the table).
func BenchmarkGPUAllocate(b *testing.B) {
	dev := gputest.Device(b)
	ctx := context.Background()
	const n = 1 << 22
	out, err := cuda.Alloc[uint32](dev, n)
	if err != nil {
		b.Fatal(err)
	}
	defer out.Free()
	for _, tile := range []int{32, 8, 0} {
		b.Run(map[int]string{32: "warp", 8: "tile8", 0: "bulk"}[tile], func(b *testing.B) {
			p, err := New(Options{Backend: warpkit.CUDA, Device: dev, BlocksPerSuperBlock: 8192})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			var total time.Duration
			for i := 0; i < b.N; i++ {
				start := time.Now()
				if tile == 0 {
					err = p.AllocateDeviceBulk(ctx, out)
				} else {
					err = p.AllocateDeviceTile(ctx, out, tile)
				}
				if err != nil {
					b.Fatal(err)
				}
				total += time.Since(start)
				if err := p.FreeDevice(ctx, out); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/total.Seconds()/1e9, "Galloc/s")
		})
	}
	b.Run("bump", func(b *testing.B) {
		bump, err := NewBump(dev)
		if err != nil {
			b.Fatal(err)
		}
		defer bump.Close()
		start := time.Now()
		for i := 0; i < b.N; i++ {
			if err := bump.Allocate(ctx, out); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n)*float64(b.N)/time.Since(start).Seconds()/1e9, "Galloc/s")
	})
}

// TestFlatAddresses checks a flat pool's promise: every unit, in every super
// block, is at the first super block's base + address × UnitBytes — what
// the device header's flat_ptr decodes (slaballoc_read_flat reads each
// unit's first word that way after the host wrote it through the table).
func TestFlatAddresses(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		if !opts.Flat {
			t.Skip("flat pools only")
		}
		ctx := context.Background()
		for _, unit := range []int{128, 64} {
			opts.UnitBytes, opts.BlocksPerSuperBlock, opts.MaxSuperBlocks = unit, 1, 5
			p := newPool(t, opts)
			if !p.Flat() {
				t.Fatal("Flat() is false")
			}
			addrs := make([]uint32, 4*UnitsPerBlock+100) // five super blocks
			for i := range addrs {
				addrs[i] = Null
			}
			if err := p.Allocate(ctx, addrs); err != nil {
				t.Fatal(err)
			}
			if p.SuperBlocks() != 5 {
				t.Fatalf("%d super blocks", p.SuperBlocks())
			}
			for _, a := range addrs {
				w := make([]byte, 4)
				binary.LittleEndian.PutUint32(w, a^0x5a5a5a5a)
				if err := p.WriteUnit(ctx, a, w); err != nil {
					t.Fatal(err)
				}
			}
			g := p.impl.(*gpuPool)
			f, err := g.mod.Function("slaballoc_read_flat")
			if err != nil {
				t.Fatal(err)
			}
			in, err := cuda.FromHost(g.dev, addrs)
			if err != nil {
				t.Fatal(err)
			}
			defer in.Free()
			out, err := cuda.Alloc[uint32](g.dev, len(addrs))
			if err != nil {
				t.Fatal(err)
			}
			defer out.Free()
			if err := f.Launch(cuda.D1(8), cuda.D1(256), 0, nil, p.Descriptor(), in, uint64(len(addrs)), out); err != nil {
				t.Fatal(err)
			}
			got, err := out.ToHost()
			if err != nil {
				t.Fatal(err)
			}
			for i, a := range addrs {
				if got[i] != a^0x5a5a5a5a {
					t.Fatalf("unit %#x (super block %d), %d-byte units: flat decode read %#x, want %#x", a, a>>24, unit, got[i], a^0x5a5a5a5a)
				}
			}
			checkCounts(t, p, int64(len(addrs)))
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestPrepare: Prepare makes ahead the super blocks a growth would add
// (none on the CPU backend), in no Capacity until the growth publishes
// them; their units hold the fill byte, take their addresses' places
// (flat pools map them at their index) and allocate; Prepare stops at the
// maximum, returns at once while a growth holds the pool, and Reset and
// Close free what it made.
func TestPrepare(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		ctx := context.Background()
		opts.BlocksPerSuperBlock = 1 // 1024 units per super block
		opts.MaxSuperBlocks = 4
		opts.LowWater = 1
		opts.UnitBytes = 64
		opts.Fill = 0xab
		p := newPool(t, opts)
		ahead := opts.Backend == warpkit.CUDA
		want := func(where string, supers, prepared int) {
			t.Helper()
			st, err := p.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !ahead {
				prepared = 0
			}
			if st.SuperBlocks != supers || st.Prepared != prepared || st.Capacity != int64(supers)*1024 {
				t.Fatalf("%s: %d super blocks (capacity %d), %d prepared; want %d, %d", where, st.SuperBlocks, st.Capacity, st.Prepared, supers, prepared)
			}
		}
		check := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		check(p.Prepare(ctx, 500))
		want("room for 500", 1, 0)
		check(p.Reserve(ctx, 1000))
		check(p.Prepare(ctx, 1000)) // a second batch of 1000 beside the first
		want("a batch in flight and a next one", 1, 1)
		check(p.Prepare(ctx, 1000))
		want("prepared again", 1, 1)
		p.Unreserve(1000)
		check(p.Reserve(ctx, 2000))
		p.Unreserve(2000)
		want("the growth", 2, 0)
		a := make([]uint32, 2000)
		check(p.Allocate(ctx, a))
		checkDistinct(t, p, a)
		checkCounts(t, p, 2000)
		got := make([]byte, 64)
		for _, x := range a {
			if x>>24 != 1 {
				continue
			}
			check(p.ReadUnit(ctx, x, got))
			if !bytes.Equal(got, bytes.Repeat([]byte{0xab}, 64)) {
				t.Fatalf("unit %#x of a prepared super block holds %x, want the fill byte", x, got)
			}
			check(p.WriteUnit(ctx, x, []byte("ahead")))
			check(p.ReadUnit(ctx, x, got[:5]))
			if string(got[:5]) != "ahead" {
				t.Fatalf("unit %#x read back %q", x, got[:5])
			}
		}
		// At most the maximum: two more.
		check(p.Prepare(ctx, 100000))
		want("prepared to the maximum", 2, 2)
		// A growth (or anything) holding the pool: Prepare does not wait.
		p.growMu.Lock()
		check(p.Prepare(ctx, 100000))
		p.growMu.Unlock()
		check(p.Reset(ctx))
		want("after Reset", 1, 0)
		check(p.Prepare(ctx, 3000))
		want("prepared after Reset", 1, 2) // two missing
		check(p.Close())
		if err := p.Prepare(ctx, 1); !errors.Is(err, warpkit.ErrClosed) {
			t.Fatalf("Prepare on a closed pool: %v", err)
		}
	})
}
