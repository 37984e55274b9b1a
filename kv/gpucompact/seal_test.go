package gpucompact

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"unsafe"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/gputest"
	"github.com/warpkit/warpkit/kv/record"
	"github.com/warpkit/warpkit/kv/sstable"
)

// TestCUDASealBlocks: the device's sealing (seal_block, which the engine's
// encode_seal_blocks runs on each block it builds, driven here through
// seal_blocks over blocks of arbitrary contents) against sstable.SealBlock (s2's Snappy
// encoder on the host) block by block — stored bytes, type and checksum —
// for blocks of every size class of s2's encoders (the literal-only blocks
// under 32 bytes, the 8-, 10- and 12-bit tables) and contents that take
// every path: random bytes (literals, and stored as they are), runs (copies
// longer than 64), short and long periods (1- and 2-byte-offset copies),
// text-like records with repeats far back, and sstable blocks.
func TestCUDASealBlocks(t *testing.T) {
	d := testDevEngine(t)
	rng := rand.New(rand.NewPCG(7, 11))
	var blocks [][]byte
	sizes := []int{1, 4, 31, 32, 33, 100, 511, 512, 513, 1000, 2047, 2048, 4095, 4096, 4097, 8000, 16383}
	kinds := []func(n int) []byte{
		func(n int) []byte { b := make([]byte, n); fillRand(rng, b); return b },
		func(n int) []byte { return make([]byte, n) },
		func(n int) []byte { return periodic(rng, n, 1+rng.IntN(8)) },
		func(n int) []byte { return periodic(rng, n, 100+rng.IntN(3000)) },
		func(n int) []byte { return records(rng, n) },
		func(n int) []byte { return mutated(rng, periodic(rng, n, 7+rng.IntN(60)), n/50+1) },
		func(n int) []byte { return mutated(rng, records(rng, n), n/20+1) },
	}
	for _, n := range sizes {
		for _, k := range kinds {
			blocks = append(blocks, k(n))
		}
	}
	for range 200 { // random sizes and mixes
		n := 1 + rng.IntN(16<<10-1)
		blocks = append(blocks, mutated(rng, kinds[rng.IntN(len(kinds))](n), rng.IntN(n/10+1)))
	}
	got, err := sealOnDeviceForTest(d, blocks)
	if err != nil {
		t.Fatal(err)
	}
	compressed := 0
	for i, raw := range blocks {
		want := sstable.SealBlock(sstable.SnappyCompression, nil, raw)
		g := got[i]
		if g.Type != want.Type || !bytes.Equal(g.Stored, want.Stored) || g.CRC != want.CRC {
			t.Fatalf("block %d (%d bytes): device sealed %d bytes, type %d, crc %#x; the host %d bytes, type %d, crc %#x (first difference at %d)",
				i, len(raw), len(g.Stored), g.Type, g.CRC, len(want.Stored), want.Type, want.CRC, firstDiff(g.Stored, want.Stored))
		}
		if want.Type == sstable.SnappyCompression {
			compressed++
		}
	}
	if compressed < len(blocks)/2 {
		t.Fatalf("only %d of %d blocks compressed: the contents do not reach the encoder's paths", compressed, len(blocks))
	}
}

// sealOnDeviceForTest seals blocks with seal_blocks, as encode_seal_blocks
// seals the blocks it builds.
func sealOnDeviceForTest(d *devEngine, blocks [][]byte) ([]sstable.SealedBlock, error) {
	var raw []byte
	descs := make([]blockDesc, len(blocks))
	at := make([]uint64, len(blocks))
	sealedLen := 0
	for i, b := range blocks {
		descs[i] = blockDesc{rawAt: uint64(len(raw)), size: uint32(len(b))}
		raw = append(raw, b...)
		at[i] = uint64(sealedLen)
		sealedLen += sstable.SealBound(sstable.SnappyCompression, len(b))
	}
	dev := d.dev
	raw = append(raw, make([]byte, 8)...) // snappy.cuh's kReadPad
	dRaw, err := cuda.FromHost(dev, raw)
	if err != nil {
		return nil, err
	}
	defer dRaw.Free()
	dDescs, err := cuda.FromHost(dev, unsafe.Slice((*uint64)(unsafe.Pointer(&descs[0])), 3*len(descs)))
	if err != nil {
		return nil, err
	}
	defer dDescs.Free()
	dAt, err := cuda.FromHost(dev, at)
	if err != nil {
		return nil, err
	}
	defer dAt.Free()
	dSealed, err := cuda.Alloc[uint8](dev, sealedLen)
	if err != nil {
		return nil, err
	}
	defer dSealed.Free()
	dStats, err := cuda.Alloc[uint64](dev, statWords*len(blocks))
	if err != nil {
		return nil, err
	}
	defer dStats.Free()
	if err := dStats.Zero(nil); err != nil {
		return nil, err
	}
	crcTable, err := d.crcTable()
	if err != nil {
		return nil, err
	}
	if err := d.stream.Synchronize(); err != nil {
		return nil, err
	}
	// Fewer warps than blocks (3 blocks of 2 warps): the grid-stride loop
	// takes several each. (The CPU emulation's tables are static.)
	const warps = 2
	shared := warps * sealTableBytes
	if dev.Emulated() {
		shared = 0
	}
	if err := d.fn.seal.Launch(cuda.D1(3), cuda.D1(32*warps), shared, nil, dDescs, int32(len(descs)), dRaw, dAt, dSealed,
		uint32(sstable.SnappyCompression), dStats, crcTable); err != nil {
		return nil, err
	}
	sealed, err := dSealed.ToHost()
	if err != nil {
		return nil, err
	}
	words, err := dStats.ToHost()
	if err != nil {
		return nil, err
	}
	stats := unsafe.Slice((*blockStats)(unsafe.Pointer(&words[0])), len(blocks))
	out := make([]sstable.SealedBlock, len(blocks))
	for i, st := range stats {
		if st.status != 0 || st.stored == 0 {
			return nil, fmt.Errorf("block %d: status %d, stored %d", i, st.status, st.stored)
		}
		if bound := sstable.SealBound(sstable.SnappyCompression, len(blocks[i])); int(st.stored) > bound {
			return nil, fmt.Errorf("block %d: stored %d bytes, past its place's %d", i, st.stored, bound)
		}
		// Every block's stored bytes from its sealed place, those stored
		// as they are too: the engine writes them from there.
		out[i] = sstable.SealedBlock{Type: sstable.Compression(st.typ), CRC: record.MaskCRC(st.crc), Stored: sealed[at[i] : at[i]+uint64(st.stored)]}
	}
	return out, nil
}

func fillRand(rng *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
}

// periodic repeats a random pattern of period p.
func periodic(rng *rand.Rand, n, p int) []byte {
	pat := make([]byte, p)
	fillRand(rng, pat)
	b := make([]byte, n)
	for i := range b {
		b[i] = pat[i%p]
	}
	return b
}

// records is text-like: key and value fields with shared words, so that
// matches come at many distances.
func records(rng *rand.Rand, n int) []byte {
	words := []string{"user", "account", "balance", "0000", "2026-12-02", "value", "status=ok", "status=error", "region-eu", "region-us", "{\"id\":", "}"}
	var b []byte
	for len(b) < n {
		b = fmt.Appendf(b, "%s%08d:%s;", words[rng.IntN(len(words))], rng.IntN(1000), words[rng.IntN(len(words))])
	}
	return b[:n]
}

// mutated changes k random bytes of b.
func mutated(rng *rand.Rand, b []byte, k int) []byte {
	for range k {
		if len(b) > 0 {
			b[rng.IntN(len(b))] = byte(rng.Uint32())
		}
	}
	return b
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestSealCanary: on amd64 (without the noasm tag) the host's s2 encoder is
// the one snappy.cuh reproduces, so the canary's sum must match; elsewhere
// it must not (the Go encoder's bytes differ), or the device would seal
// where its output differs from the host's.
func TestSealCanary(t *testing.T) {
	want := runtime.GOARCH == "amd64" && !noasm
	if got := hostSealsAsDevice(); got != want {
		t.Fatalf("hostSealsAsDevice() = %v on %s (noasm %v)", got, runtime.GOARCH, noasm)
	}
}

// TestCUDADeviceCompressionRefused: where the host's s2 encoder is not the
// one the device reproduces, New refuses SealOnDevice (the outputs would
// differ from compaction.CPU's) and SealAuto seals on the host; where it
// is, New accepts SealOnDevice and SealAuto seals on the device.
func TestCUDADeviceCompressionRefused(t *testing.T) {
	dev := gputest.Device(t)
	onDevice := func(s Sealing) (bool, error) {
		c, err := New(Options{Backend: warpkit.CUDA, Device: dev, Sealing: s})
		if err != nil {
			return false, err
		}
		defer c.Close()
		return c.mu.slots[0].dev.deviceSeal, nil
	}
	for _, same := range []bool{true, false} {
		if same != hostSealsAsDevice() {
			defer func(f func() bool) { hostSealsAsDevice = f }(hostSealsAsDevice)
			hostSealsAsDevice = func() bool { return same }
		}
		for _, c := range []struct {
			s    Sealing
			want bool
		}{{SealAuto, same}, {SealOnHost, false}, {SealOnDevice, true}} {
			got, err := onDevice(c.s)
			switch {
			case c.s == SealOnDevice && !same:
				if !errors.Is(err, errors.ErrUnsupported) {
					t.Fatalf("SealOnDevice with another encoder: %v, want ErrUnsupported", err)
				}
			case err != nil:
				t.Fatalf("Sealing %d (same encoder %v): %v", c.s, same, err)
			case got != c.want:
				t.Fatalf("Sealing %d (same encoder %v): seals on the device %v, want %v", c.s, same, got, c.want)
			}
		}
	}
	if _, err := New(Options{Backend: warpkit.CUDA, Device: dev, Sealing: 7}); err == nil {
		t.Fatal("New with an unknown Sealing succeeded")
	}
}
