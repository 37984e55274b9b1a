package ebr

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/emu"
	"github.com/warpkit/warpkit/internal/gputest"
	"github.com/warpkit/warpkit/internal/kernelgen/ptxcheck"
	"github.com/warpkit/warpkit/slaballoc"
)

func TestPTXUpToDate(t *testing.T) { ptxcheck.Check(t, "ebr.ptx") }

func init() { gputest.Emulate("ebr.cu", "../../slaballoc/slaballoc.cu") }

// TestChurnEmulated and TestGPUChurn run the in-kernel reclamation
// (ebr.cuh) under a churn of publish-and-retire with readers beside it, in
// a pool much smaller than the units the launch allocates: units must be
// reused within the launch, and none may be freed while a reader can reach
// it (freed units are poisoned).
func TestChurnEmulated(t *testing.T) {
	testChurn(t, emu.Device(t, emu.Options{}, "ebr.cu", "../../slaballoc/slaballoc.cu"), 6, 60)
}

// TestChurnEmulatedManyBlocks runs more blocks at once than thread 0
// scans announcements in a round (kScanPerRound), so that an epoch's scan
// spans rounds: a scan carried over from the previous epoch let the epoch
// pass a block still reading (units freed while reachable).
func TestChurnEmulatedManyBlocks(t *testing.T) {
	blocks, rounds := 96, 200
	testChurn(t, emu.Device(t, emu.Options{Parallel: blocks}, "ebr.cu", "../../slaballoc/slaballoc.cu"), blocks, rounds)
}

func TestGPUChurn(t *testing.T) { testChurn(t, gputest.Device(t), 132, 2000) }

const magic = 0x5eed5eed

func testChurn(t *testing.T, dev *cuda.Device, blocks, rounds int) {
	ctx := context.Background()
	const nslots, unit = 512, 32
	pool, err := slaballoc.New(slaballoc.Options{Backend: warpkit.CUDA, Device: dev, UnitBytes: unit, BlocksPerSuperBlock: 1, MaxSuperBlocks: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	capacity := int(pool.Capacity())
	if allocs := blocks * 8 * rounds; allocs < 2*capacity {
		t.Fatalf("the churn allocates %d units, not much past the pool's %d", allocs, capacity)
	}
	slots := make([]uint32, nslots)
	for i := range slots {
		slots[i] = slaballoc.Null
	}
	if err := pool.Allocate(ctx, slots); err != nil {
		t.Fatal(err)
	}
	for s, a := range slots {
		b := make([]byte, 12)
		binary.LittleEndian.PutUint32(b, magic)
		binary.LittleEndian.PutUint32(b[4:], uint32(s))
		if err := pool.WriteUnit(ctx, a, b); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := cuda.FromHost(dev, slots)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Free()
	st, err := NewDeviceState(dev, blocks, 256, blocks*3*64+blocks*256, unit)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Free()
	mod, err := dev.LoadModule(ebrPTX)
	if err != nil {
		t.Fatal(err)
	}
	f, err := mod.Function("ebr_churn")
	if err != nil {
		t.Fatal(err)
	}
	status, _ := cuda.Alloc[uint32](dev, 1)
	defer status.Free()
	status.Zero(nil)
	out, _ := cuda.Alloc[uint64](dev, 2)
	defer out.Free()
	out.Zero(nil)
	release, err := pool.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	err = f.Launch(cuda.D1(blocks), cuda.D1(256), 0, nil, pool.Descriptor(), ds, uint32(nslots), st.Ptr(), uint32(rounds), status, out)
	release()
	if err != nil {
		t.Fatal(err)
	}
	var o [2]uint64
	if err := out.CopyToHost(o[:]); err != nil {
		t.Fatal(err)
	}
	freed, leaked, advances, err := st.Counters()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d blocks x %d rounds: %d units freed in the launch, %d leaked, %d epoch advances, %d allocations found the pool empty", blocks, rounds, freed, leaked, advances, o[1])
	if o[0] != 0 {
		t.Fatalf("%d reads found a unit freed or reused while reachable", o[0])
	}
	// More units taken than the pool had free at the start: the launch
	// reused what it freed.
	if taken := uint64(blocks*8*rounds) - o[1]; advances == 0 || freed == 0 || taken <= uint64(capacity-nslots) {
		t.Fatalf("the launch took %d units and freed %d in %d epoch advances: no reuse within the launch (%d were free)", taken, freed, advances, capacity-nslots)
	}
	// Accounting: every allocated unit is a slot's, in the launch log, or
	// leaked (counted).
	log, err := st.Log()
	if err != nil {
		t.Fatal(err)
	}
	ps, err := pool.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(nslots+log.Len()) + int64(leaked); ps.Allocated != want {
		t.Fatalf("the pool holds %d units; %d slots + %d in the launch log + %d leaked = %d", ps.Allocated, nslots, log.Len(), leaked, want)
	}
	if err := pool.FreeDevice(ctx, log); err != nil {
		t.Fatalf("freeing the launch log (a unit freed twice?): %v", err)
	}
	if ps, _ = pool.Stats(ctx); ps.Allocated != int64(nslots)+int64(leaked) {
		t.Fatalf("after the log: %d units, want %d", ps.Allocated, nslots+int(leaked))
	}
}
