package gpucompact

import (
	"unsafe"

	"github.com/warpkit/warpkit/cuda"
)

// workspace holds the Go engine's large arrays between jobs, so that a job
// after the first reuses memory the process already has: fresh memory
// costs a page fault and the kernel's zeroing per 4 KiB page, which on
// many cores cost more than the stages' own work (docs/benchmarks.md, the
// kernel's share of the engine's CPU time). It is the Go engine's
// counterpart of the CUDA engine's staging ring, allocated once.
//
// Arrays handed out keep whatever the last job left in them: every stage
// writes each element it later reads. A Compactor keeps one workspace (its
// engine runs one job at a time) until Close.
type workspace struct {
	// workers bounds the goroutines of each host stage (Options.
	// HostWorkers, set by the Compactor before each job; 0: GOMAXPROCS).
	workers int

	regions         []byte  // input blocks as stored, each piece's in turn
	arena           []byte  // input blocks' contents
	pieceKeys, keys []byte  // user keys: per load piece, then gathered
	pieceEnts, ents []entry // entries: per load piece, then gathered
	src, dst        []uint32
	flags           []bool // gc: keep, newKey and elided, n each
	kept            []uint32
	keptNew         []bool
	plan            []planEntry
	raw, sealed     []byte        // output blocks: contents, compressed
	hashes          []uint32      // output blocks' bloom hashes
	chunks          []*blockChunk // planned blocks (pipeline)

	// For the CUDA engine (pinDev set), the arrays the device reads and
	// writes whole live in pinned memory, which it copies to and from
	// directly (no staging copy on the host): the arena, keys, entries and
	// the output blocks' contents, and the kept entries with their plan
	// entries and block ends.
	pinDev                                                *cuda.Device
	pinLimit                                              int64 // the most the arrays below may pin (devEngine.pinLimit); negative: no limit
	arenaPin, keysPin, entsPin, rawPin, regionsPin        pinned
	sealedPin                                             pinned
	keptPin, keptNewPin, planPin, jumpEndPin, jumpSizePin pinned
	jumpEnd, jumpSize                                     []uint32 // the blocks that would start at each kept entry (blockJumps)
	keptFreshPin                                          pinned
	keptFresh                                             []bool // per kept entry: its user key differs from the previous kept entry's
}

// pinned is page-locked host memory holding one of the workspace's arrays.
type pinned struct{ mem *cuda.Pinned[uint8] }

func (p *pinned) free() {
	if p.mem != nil {
		p.mem.Free()
		p.mem = nil
	}
}

// holds says the memory starts at b (b is a slice of it from its start).
func (p *pinned) holds(b []byte) bool {
	return p.mem != nil && len(b) > 0 && unsafe.SliceData(b) == unsafe.SliceData(p.mem.Data())
}

// pinOff, set by tests, keeps every array in plain memory, as when pinning
// fails: the device's copies then go through the ring.
var pinOff bool

// takePinned is take, in pinned memory of ws.pinDev when it is set (plain
// memory without it, when pinning it would take the workspace's pinned
// arrays past ws.pinLimit, or when pinning fails: the device engine's
// copies of it then go through its ring). Pinned memory grows as take's
// does, and where the grown capacity would pass the limit or cannot be
// pinned, to the job's n + n/8 alone.
func takePinned[T any](ws *workspace, pin *pinned, buf *[]T, n int) []T {
	if ws.pinDev == nil || pinOff {
		if pin.mem != nil { // the last job pinned it
			pin.free()
			*buf = nil
		}
		return take(buf, n)
	}
	if cap(*buf) >= n && pin.mem != nil {
		return (*buf)[:n]
	}
	old := 0
	if pin.mem != nil { // too short: its memory goes
		old = cap(*buf)
		pin.free()
		*buf = nil
	}
	size := int64(unsafe.Sizeof(*new(T)))
	bytes := func(c int) int { return int(max(int64(c)*size, 1)) }
	fits := func(c int) bool { return ws.pinLimit < 0 || ws.pinnedBytes()+int64(bytes(c)) <= ws.pinLimit }
	least := n + n/8
	c := grownCap(n, old)
	if !fits(c) {
		c = least
		if !fits(c) {
			return take(buf, n) // (plain memory kept from an earlier job, if long enough)
		}
	}
	m, err := cuda.AllocPinned[uint8](ws.pinDev, bytes(c))
	if err != nil && c > least {
		c = least
		m, err = cuda.AllocPinned[uint8](ws.pinDev, bytes(c))
	}
	if err != nil {
		return take(buf, n)
	}
	pin.mem = m
	*buf = unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(m.Data()))), c)
	return (*buf)[:n]
}

// asBytes views an array's memory as bytes.
func asBytes[T any](a []T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(a))), len(a)*int(unsafe.Sizeof(*new(T))))
}

// pins lists the workspace's pinned arrays.
func (w *workspace) pins() []*pinned {
	return []*pinned{&w.arenaPin, &w.keysPin, &w.entsPin, &w.rawPin, &w.regionsPin, &w.sealedPin, &w.keptPin, &w.keptNewPin, &w.planPin, &w.jumpEndPin, &w.jumpSizePin, &w.keptFreshPin}
}

// pinnedBytes is the pinned memory the workspace's arrays hold.
func (w *workspace) pinnedBytes() int64 {
	var n int64
	for _, p := range w.pins() {
		if p.mem != nil {
			n += int64(p.mem.Len())
		}
	}
	return n
}

// free releases the pinned memory (the arrays in it go with it): before
// the workspace is dropped, and before its device is closed.
func (w *workspace) free() {
	for _, p := range w.pins() {
		p.free()
	}
	w.arena, w.keys, w.ents, w.raw, w.regions, w.sealed = nil, nil, nil, nil, nil, nil
	w.kept, w.keptNew, w.plan, w.jumpEnd, w.jumpSize, w.keptFresh = nil, nil, nil, nil, nil, nil
}

// take returns (*buf)[:n], replacing the array by a larger one (its
// contents not kept) when it is too short.
func take[T any](buf *[]T, n int) []T {
	if cap(*buf) < n {
		*buf = make([]T, n, grownCap(n, cap(*buf)))
	}
	return (*buf)[:n]
}

// grownCap is the capacity an array of capacity old grows to when a job
// needs n > old elements: room for a slightly larger next job (n + n/8),
// and at least half as much again as before, so that a store whose jobs
// grow a little at a time allocates (and, pinned, page-locks) each array
// O(log) times rather than at every job past the last (as the device's
// scratch grows: gpurt.Buf).
func grownCap(n, old int) int { return max(n+n/8, old+old/2) }

// bytes is the memory the workspace holds.
func (w *workspace) bytes() int {
	const entrySize, planSize = 32, 8
	return cap(w.regions) + cap(w.arena) + cap(w.pieceKeys) + cap(w.keys) +
		entrySize*(cap(w.pieceEnts)+cap(w.ents)) + 4*(cap(w.src)+cap(w.dst)+cap(w.kept)+cap(w.hashes)+cap(w.jumpEnd)+cap(w.jumpSize)) +
		cap(w.flags) + cap(w.keptNew) + cap(w.keptFresh) + planSize*cap(w.plan) + cap(w.raw) + cap(w.sealed) +
		len(w.chunks)*int(unsafe.Sizeof(blockChunk{}))
}
