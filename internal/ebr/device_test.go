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
	_, ds := churnSlots(t, dev, pool, nslots)
	defer ds.Free()
	st, err := NewDeviceState(dev, blocks, 256, blocks*3*64+blocks*256, unit)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Free()
	o := launchChurn(t, dev, pool, ds, nslots, st, blocks, rounds)
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
	checkPoolAccounting(t, pool, log, nslots, leaked)
}

// TestOverflowLeaksEmulated and TestGPUOverflowLeaks drive the in-kernel
// reclamation past its bounded DRAM overflow bags (ebr.cuh's retire): a
// block that never leaves the epoch it announced (a stalled block: one more
// announcement than the grid has blocks, not quiescent) keeps the epoch from
// passing, so nothing may be freed, the shared-memory bags fill, then the
// overflow bags (8 units a block), and every unit retired past them is
// leaked and counted, never written past the bag nor freed early.
func TestOverflowLeaksEmulated(t *testing.T) {
	testOverflowLeaks(t, emu.Device(t, emu.Options{Parallel: 4}, "ebr.cu", "../../slaballoc/slaballoc.cu"), 4, 60)
}

// (More rounds on a GPU: allocations that race may miss free units, and
// the pool must still fill.)
func TestGPUOverflowLeaks(t *testing.T) { testOverflowLeaks(t, gputest.Device(t), 4, 200) }

func testOverflowLeaks(t *testing.T, dev *cuda.Device, blocks, rounds int) {
	const nslots, unit, overflowCap, bag = 64, 32, 8, 64 // bag: ebr_churn's BlockEbr<64>
	pool, err := slaballoc.New(slaballoc.Options{Backend: warpkit.CUDA, Device: dev, UnitBytes: unit, BlocksPerSuperBlock: 1, MaxSuperBlocks: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	capacity := int(pool.Capacity())
	// Nothing is freed in the launch: the units it can take are the pool's
	// free ones, and they must be well past what the bags hold.
	if free := capacity - nslots; free < blocks*(3*bag+overflowCap)+blocks*16 || blocks*8*rounds < free {
		t.Fatalf("pool of %d units, %d blocks x %d rounds: the launch cannot overflow every block's bags", capacity, blocks, rounds)
	}
	_, ds := churnSlots(t, dev, pool, nslots)
	defer ds.Free()
	// The log holds whatever the blocks can hand over at the end (three
	// bags and the overflow bag each): every leak counted is an overflow's.
	logCap := blocks * (3*bag + overflowCap)
	st, err := NewDeviceState(dev, blocks+1, overflowCap, logCap, unit)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Free()
	// The stalled block announces epoch 0, not quiescent: the epoch can
	// move to 1 (every block at 0) and no further.
	if err := st.announce.Sub(blocks, blocks+1).CopyFromHost([]uint32{0 << 1}); err != nil {
		t.Fatal(err)
	}
	o := launchChurn(t, dev, pool, ds, nslots, st, blocks, rounds)
	freed, leaked, advances, err := st.Counters()
	if err != nil {
		t.Fatal(err)
	}
	// Every unit taken replaced a slot's unit, which was retired.
	retired := uint64(blocks*8*rounds) - o[1]
	t.Logf("%d blocks x %d rounds beside a stalled block: %d units retired, %d freed, %d leaked, %d epoch advances", blocks, rounds, retired, freed, leaked, advances)
	if o[0] != 0 {
		t.Fatalf("%d reads found a unit freed or reused while reachable", o[0])
	}
	if freed != 0 || advances > 1 {
		t.Fatalf("%d units freed in %d epoch advances while a block stalled at epoch 0", freed, advances)
	}
	// At epochs 0 and 1 only, a block holds at most two shared-memory bags
	// and its overflow bag; the rest must have leaked.
	held := uint64(blocks * (2*bag + overflowCap))
	if retired <= held {
		t.Fatalf("%d units retired, no more than the bags hold (%d): the pool did not fill", retired, held)
	}
	if leaked < retired-held {
		t.Fatalf("%d retired, the bags hold at most %d: %d leaked, want at least %d", retired, held, leaked, retired-held)
	}
	// The overflow bags: counted past their capacity, each entry a distinct
	// unit tagged with an epoch the launch had (0 or 1).
	on, err := st.overflowN.ToHost()
	if err != nil {
		t.Fatal(err)
	}
	ov, err := st.overflow.ToHost()
	if err != nil {
		t.Fatal(err)
	}
	tags, err := st.tags.ToHost()
	if err != nil {
		t.Fatal(err)
	}
	overflowed := 0
	for b := range blocks {
		if on[b] > overflowCap {
			overflowed++
		}
		for i := range overflowCap {
			tag, want := tags[b*overflowCap+i], "epoch 0 or 1"
			if i >= int(on[b]) {
				want = "unused"
			}
			if (i < int(on[b]) && tag > 1) || (i >= int(on[b]) && tag != ^uint32(0)) {
				t.Fatalf("block %d's overflow entry %d (of %d retired into the bag) tagged %#x, want %s", b, i, on[b], tag, want)
			}
		}
	}
	if overflowed == 0 {
		t.Fatalf("no block retired past its overflow bag of %d (%v)", overflowCap, on)
	}
	if on[blocks] != 0 {
		t.Fatalf("the stalled block's overflow bag holds %d units", on[blocks])
	}
	// Accounting, exactly: every retired unit is in the launch log or
	// leaked — one written past its bag would be lost, one counted twice or
	// freed would break the sum or the pool's count.
	log, err := st.Log()
	if err != nil {
		t.Fatal(err)
	}
	if got := uint64(log.Len()) + leaked; got != retired {
		t.Fatalf("%d units retired; %d in the launch log + %d leaked = %d", retired, log.Len(), leaked, got)
	}
	logged, err := log.ToHost()
	if err != nil {
		t.Fatal(err)
	}
	live, err := ds.ToHost()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint32]bool{}
	for _, a := range live {
		seen[a] = true
	}
	for _, a := range logged {
		if seen[a] {
			t.Fatalf("unit %#x retired twice, or retired and still in a slot", a)
		}
		seen[a] = true
	}
	for i, a := range ov {
		if tags[i] <= 1 && !seen[a] {
			t.Fatalf("overflow entry %d (unit %#x) is not in the launch log", i, a)
		}
	}
	checkPoolAccounting(t, pool, log, nslots, leaked)
}

// churnSlots allocates nslots units of pool, each tagged with magic and its
// slot, and returns them, also on the device.
func churnSlots(t *testing.T, dev *cuda.Device, pool *slaballoc.Pool, nslots int) ([]uint32, cuda.Slice[uint32]) {
	t.Helper()
	ctx := context.Background()
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
	return slots, ds
}

// launchChurn runs ebr_churn over the slots ds in blocks blocks of 256
// threads for rounds rounds with st's reclamation, and returns its output
// words (o[1]: the allocations that found the pool empty).
func launchChurn(t *testing.T, dev *cuda.Device, pool *slaballoc.Pool, ds cuda.Slice[uint32], nslots int, st *DeviceState, blocks, rounds int) [2]uint64 {
	t.Helper()
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
	return o
}

// checkPoolAccounting: every allocated unit of pool is one of the nslots
// slots', in the launch log, or leaked (counted); freeing the log frees
// each of its units once.
func checkPoolAccounting(t *testing.T, pool *slaballoc.Pool, log cuda.Slice[uint32], nslots int, leaked uint64) {
	t.Helper()
	ctx := context.Background()
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
