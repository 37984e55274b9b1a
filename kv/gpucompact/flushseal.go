package gpucompact

import (
	"context"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/gpurt"
	"github.com/warpkit/warpkit/kv/compaction"
	"github.com/warpkit/warpkit/kv/record"
	"github.com/warpkit/warpkit/kv/sstable"
)

// Flush sealing (Options.SealFlushes): the Compactor is a
// compaction.BlockSealer, and a store's memtable flushes hand it the data
// blocks they encoded; the device compresses and checksums them with the
// kernel that seals a job's blocks (seal_blocks, seal_block: s2's Snappy
// encoder byte for byte), on a stream and memory of the sealer's own, so
// that a flush does not wait for a compaction job. Under CPU stress the
// host's Snappy was a quarter of a gpu store's processor time
// (docs/benchmarks.md); the device takes it for a copy of the blocks into
// pinned memory.

// minSealFlushBytes is the least a batch of blocks goes to the device
// with: below it the host seals them as fast.
const minSealFlushBytes = 64 << 10

// flushSealer is the Compactor's device side for flushes. Its mutex is
// held from SealBlocks to the release it returns: the sealed bytes live in
// its pinned memory until then.
type flushSealer struct {
	mu      sync.Mutex
	d       *devEngine          // its own stream, staging and device arrays
	in, out *cuda.Pinned[uint8] // the raw blocks (and the read pad), the sealed
	descs   []blockDesc
	at      []uint64
	stats   []uint64
}

// SealBlocks seals blocks (compaction.BlockSealer) on the device when the
// Compactor has one and Options.SealFlushes is set, the compression is
// Snappy, this build's s2 writes the device's bytes (Options.Sealing) and
// the blocks come to at least 64 KiB; it declines with
// compaction.ErrNotSealed otherwise and once the engine is off (after
// Close with an error that is both ErrNotSealed and ErrClosed). Blocks of
// 16 KiB or more are sealed on the host here. A device error fails the
// call (the store seals on the host) and counts as an engine failure of
// stage "flush seal"; one that leaves the device unusable turns the
// engine off.
func (c *Compactor) SealBlocks(ctx context.Context, comp sstable.Compression, blocks []sstable.EncodedBlock) (func(), error) {
	c.mu.Lock()
	closed := c.mu.closed
	c.mu.Unlock()
	if closed {
		return nil, errSealClosed
	}
	if !c.sealsFlushes(comp) {
		return nil, compaction.ErrNotSealed
	}
	raw := 0
	for i := range blocks {
		if blocks[i].Raw == nil || len(blocks[i].Raw) != blocks[i].RawSize || blocks[i].Sealed != nil {
			return nil, fmt.Errorf("gpucompact: SealBlocks: block %d is not a raw block (Raw %d bytes of %d, Sealed %v)",
				i, len(blocks[i].Raw), blocks[i].RawSize, blocks[i].Sealed != nil)
		}
		raw += blocks[i].RawSize
	}
	if raw < minSealFlushBytes {
		return nil, compaction.ErrNotSealed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	closed, off := c.mu.closed, c.mu.stats.Disabled
	if !closed && !off && c.mu.sealer == nil {
		c.mu.sealer = &flushSealer{}
	}
	s := c.mu.sealer
	c.mu.Unlock()
	switch {
	case closed:
		return nil, errSealClosed
	case off:
		return nil, compaction.ErrNotSealed
	}
	s.mu.Lock()
	c.mu.Lock()
	closed = c.mu.closed // (Close frees the sealer under s.mu)
	c.mu.Unlock()
	if closed {
		s.mu.Unlock()
		return nil, errSealClosed
	}
	n, err := s.sealLocked(c, blocks)
	if err != nil {
		s.mu.Unlock()
		for i := range blocks {
			blocks[i].Sealed = nil
		}
		c.flushSealFailed(err)
		return nil, err
	}
	pinned, devHeld := s.pinnedBytes(), s.d.heldBytes()
	c.mu.Lock()
	c.mu.failures = 0
	c.mu.stats.FlushSeals++
	c.mu.stats.FlushSealedBlocks += uint64(n)
	c.mu.sealerPinned, c.mu.sealerDevice = pinned, devHeld
	c.sumHeldLocked()
	c.mu.Unlock()
	var once sync.Once
	return func() { once.Do(s.mu.Unlock) }, nil
}

var _ compaction.BlockSealer = (*Compactor)(nil)

// errSealClosed is SealBlocks' error after Close: a decline
// (compaction.ErrNotSealed) that is also ErrClosed.
var errSealClosed = fmt.Errorf("%w: %w", compaction.ErrNotSealed, ErrClosed)

// SealsBlocks reports whether SealBlocks would seal blocks of compression
// comp now (compaction.BlockSealer): see SealBlocks.
func (c *Compactor) SealsBlocks(comp sstable.Compression) bool {
	if !c.sealsFlushes(comp) {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.mu.closed && !c.mu.stats.Disabled
}

func (c *Compactor) sealsFlushes(comp sstable.Compression) bool {
	return c.cuda && c.opts.SealFlushes && comp == sstable.SnappyCompression && hostSealsAsDevice()
}

// flushSealFailed counts a failed flush seal as an engine failure (and
// turns the engine off as a job's failure would).
func (c *Compactor) flushSealFailed(err error) {
	c.mu.Lock()
	c.mu.stats.Fallbacks["flush seal"]++
	c.mu.Unlock()
	c.engineFailed(err, "gpucompact: flush sealing failed; the store seals on the host")
}

// sealLocked seals blocks on the device (s.mu held) and returns how many
// it sealed there; the others (16 KiB or more) it seals on the host.
func (s *flushSealer) sealLocked(c *Compactor, blocks []sstable.EncodedBlock) (int, error) {
	if s.d == nil {
		// The most urgent stream: a flush's batch is short and the store's
		// writers may be waiting on it, where the compaction jobs' kernels
		// on the engine's streams are long.
		_, urgent, err := c.dev.StreamPriorities()
		if err != nil {
			return 0, fmt.Errorf("gpucompact: flush sealer: %w", err)
		}
		d, err := newDevEngineAt(c.dev, false, c.opts, urgent)
		if err != nil {
			return 0, err
		}
		s.d = d
	}
	d := s.d
	// Places: the raw blocks one after another in in, each device-sealed
	// block's room (sstable.SealBound) one after another in out.
	s.descs, s.at = s.descs[:0], s.at[:0]
	rawLen, sealedLen, n := 0, 0, 0
	for i := range blocks {
		size := blocks[i].RawSize
		s.descs = append(s.descs, blockDesc{rawAt: uint64(rawLen), size: uint32(size)})
		rawLen += size
		if size >= sealMaxBlock {
			s.at = append(s.at, ^uint64(0))
			continue
		}
		s.at = append(s.at, uint64(sealedLen))
		sealedLen += sstable.SealBound(sstable.SnappyCompression, size)
		n++
	}
	if err := growPinned(d.dev, &s.in, rawLen+8); err != nil { // +8: snappy.cuh's kReadPad
		return 0, err
	}
	if err := growPinned(d.dev, &s.out, max(sealedLen, 1)); err != nil {
		return 0, err
	}
	in := s.in.Data()
	for i := range blocks {
		copy(in[s.descs[i].rawAt:], blocks[i].Raw)
	}
	clear(in[rawLen : rawLen+8])
	err := func() (err error) {
		defer d.syncOnError(&err)
		b, str, dev := &d.bufs, d.stream, d.dev
		crc, err := d.crcTable()
		if err != nil {
			return err
		}
		words := 3 * len(blocks) // blockDesc: 24 bytes
		if s.stats = s.stats[:0]; cap(s.stats) < statWords*len(blocks) {
			s.stats = make([]uint64, statWords*len(blocks))
		}
		s.stats = s.stats[:statWords*len(blocks)]
		if err := d.reserve(gpurt.Bytes[uint64](words) + gpurt.Bytes[uint64](len(blocks)) + gpurt.Bytes[uint64](len(s.stats))); err != nil {
			return err
		}
		dIn, err := b.raw.Get(dev, str, rawLen+8)
		if err != nil {
			return err
		}
		dOut, err := b.sealed.Get(dev, str, max(sealedLen, 1))
		if err != nil {
			return err
		}
		dDescs, err := b.descs.Get(dev, str, words)
		if err != nil {
			return err
		}
		dAt, err := b.sealAt.Get(dev, str, len(blocks))
		if err != nil {
			return err
		}
		dStats, err := b.stats.Get(dev, str, len(s.stats))
		if err != nil {
			return err
		}
		if err := gpurt.Upload(&b.stage, str, dDescs, unsafe.Slice((*uint64)(unsafe.Pointer(&s.descs[0])), words)); err != nil {
			return err
		}
		if err := gpurt.Upload(&b.stage, str, dAt, s.at); err != nil {
			return err
		}
		if err := cuda.CopyToDeviceAsync(dIn, s.in, 0, str); err != nil {
			return err
		}
		if err := dStats.Zero(str); err != nil {
			return err
		}
		shared := sealWarps * sealTableBytes
		if dev.Emulated() {
			shared = 0 // (the CPU emulation's seal tables are static)
		}
		grid := (len(blocks) + sealWarps - 1) / sealWarps
		if err := d.fn.seal.Launch(cuda.D1(grid), cuda.D1(sealWarps*32), shared, str, dDescs, int32(len(blocks)), dIn, dAt, dOut,
			uint32(sstable.SnappyCompression), dStats, crc); err != nil {
			return err
		}
		if err := cuda.CopyToHostAsync(s.out, 0, dOut.Sub(0, max(sealedLen, 1)), str); err != nil {
			return err
		}
		p, err := gpurt.Download(&b.stage, str, s.stats, dStats)
		if err != nil {
			return err
		}
		if err := waitAsleep(str); err != nil {
			return err
		}
		p.Finish()
		return nil
	}()
	if err != nil {
		return 0, fmt.Errorf("gpucompact: flush sealing: %w", err)
	}
	out := s.out.Data()
	stats := unsafe.Slice((*blockStats)(unsafe.Pointer(&s.stats[0])), len(blocks))
	sealed := make([]sstable.SealedBlock, len(blocks))
	for i := range blocks {
		if s.at[i] == ^uint64(0) {
			sealed[i] = sstable.SealBlock(sstable.SnappyCompression, nil, blocks[i].Raw)
			continue
		}
		st := stats[i]
		bound := sstable.SealBound(sstable.SnappyCompression, blocks[i].RawSize)
		if st.status != 0 || st.stored == 0 || int(st.stored) > bound {
			return 0, fmt.Errorf("gpucompact: flush sealing: block %d of %d bytes: status %d, %d bytes stored in %d of room", i, blocks[i].RawSize, st.status, st.stored, bound)
		}
		sealed[i] = sstable.SealedBlock{Type: sstable.Compression(st.typ), CRC: record.MaskCRC(st.crc), Stored: out[s.at[i] : s.at[i]+uint64(st.stored)]}
	}
	for i := range blocks {
		blocks[i].Sealed = &sealed[i]
	}
	return n, nil
}

// flushPoll is how long waitAsleep sleeps between its looks at the stream.
const flushPoll = 50 * time.Microsecond

// waitAsleep waits for str's work with the goroutine asleep between looks
// at it (cuda.Stream.Done), where Synchronize's driver wait spins a
// processor: a flush's batch takes a millisecond or two on the device,
// and under CPU stress the store's writers want that processor (a profile
// of the gpu store's fill at 60% stress put a third of the flushes' CPU
// in the spinning wait).
func waitAsleep(str *cuda.Stream) error {
	for {
		done, err := str.Done()
		if err != nil || done {
			return err
		}
		time.Sleep(flushPoll)
	}
}

// free releases the sealer's device side (s.mu held, or no SealBlocks can
// run: Close).
func (s *flushSealer) free() {
	if s.d != nil {
		s.d.release()
		s.d.close()
		s.d = nil
	}
	for _, p := range []**cuda.Pinned[uint8]{&s.in, &s.out} {
		if *p != nil {
			(*p).Free()
			*p = nil
		}
	}
}

// pinnedBytes is the sealer's page-locked memory.
func (s *flushSealer) pinnedBytes() int64 {
	var n int64
	for _, p := range []*cuda.Pinned[uint8]{s.in, s.out} {
		if p != nil {
			n += int64(p.Len())
		}
	}
	if s.d != nil {
		n += s.d.pinnedBytes()
	}
	return n
}

// growPinned makes *p hold at least n bytes (its contents not kept), grown
// as the workspace's arrays grow (grownCap).
func growPinned(dev *cuda.Device, p **cuda.Pinned[uint8], n int) error {
	old := 0
	if *p != nil {
		if (*p).Len() >= n {
			return nil
		}
		old = (*p).Len()
		(*p).Free()
		*p = nil
	}
	m, err := cuda.AllocPinned[uint8](dev, grownCap(n, old))
	if err != nil {
		return err
	}
	*p = m
	return nil
}
