package gpucompact

import (
	"testing"
	"unsafe"

	"github.com/warpkit/warpkit/internal/emu"
)

// growingJobs is the element counts of a store's jobs that grow 5% at a
// time (41 jobs, 1,000 to 7,040 elements).
func growingJobs() []int {
	ns := []int{1000}
	for len(ns) < 41 {
		ns = append(ns, ns[len(ns)-1]*105/100)
	}
	return ns
}

// TestTakeGrowth: an array that jobs growing a little at a time take is
// replaced O(log) times (by half as much again at least), not at nearly
// every job as with a fixed eighth of headroom (14 times over these jobs);
// and a job no larger than the array keeps it.
func TestTakeGrowth(t *testing.T) {
	var buf []uint32
	var last *uint32
	grew := 0
	for _, n := range growingJobs() {
		a := take(&buf, n)
		if len(a) != n || cap(buf) < n {
			t.Fatalf("take(%d): len %d, cap %d", n, len(a), cap(buf))
		}
		if p := unsafe.SliceData(a); p != last {
			grew++
			last = p
		}
		if b := take(&buf, n/2); unsafe.SliceData(b) != last {
			t.Fatalf("take(%d) after take(%d) replaced the array", n/2, n)
		}
	}
	if grew > 6 {
		t.Fatalf("the array was allocated %d times over 41 jobs growing 5%% each (want at most 6)", grew)
	}
}

// TestTakePinnedGrowth: the same in pinned memory (an emulated device
// counts its allocations), unbounded; then under a limit the grown
// capacity would pass, where an array takes the job's n + n/8 alone and
// then plain memory, never more pinned memory than the limit.
func TestTakePinnedGrowth(t *testing.T) {
	dev := emu.Device(t, emu.Options{})
	ws := &workspace{pinDev: dev, pinLimit: -1}
	defer ws.free()
	before := dev.Calls()
	for _, n := range growingJobs() {
		if a := takePinned(ws, &ws.arenaPin, &ws.arena, n); len(a) != n || !ws.arenaPin.holds(a) {
			t.Fatalf("takePinned(%d): len %d, pinned %v", n, len(a), ws.arenaPin.holds(a))
		}
	}
	if d := dev.Calls().Allocs - before.Allocs; d > 6 {
		t.Fatalf("%d pinned allocations over 41 jobs growing 5%% each (want at most 6)", d)
	}
	ws.free()

	// 1,000 bytes fit with room to grow; 1,600 (n + n/8 = 1,800) fit, its
	// grown 1,875 does not; 2,000 (2,250) does not fit at all.
	const limit = 1900
	ws = &workspace{pinDev: dev, pinLimit: limit}
	for _, c := range []struct {
		n      int
		pinned bool
		cap    int
	}{{1000, true, 1125}, {1600, true, 1800}, {1700, true, 1800}, {2000, false, 2250}} {
		a := takePinned(ws, &ws.arenaPin, &ws.arena, c.n)
		if len(a) != c.n || ws.arenaPin.holds(a) != c.pinned || cap(ws.arena) != c.cap {
			t.Fatalf("takePinned(%d) under a %d-byte limit: len %d, pinned %v, cap %d; want pinned %v, cap %d",
				c.n, limit, len(a), ws.arenaPin.holds(a), cap(ws.arena), c.pinned, c.cap)
		}
		if p := ws.pinnedBytes(); p > limit {
			t.Fatalf("takePinned(%d): %d bytes pinned, past the %d-byte limit", c.n, p, limit)
		}
	}
	ws.free()
}
