package gpucompact

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/internal/gputest"
	kvstore "github.com/warpkit/warpkit/kv"
	"github.com/warpkit/warpkit/kv/compaction"
	"github.com/warpkit/warpkit/kv/compaction/compactiontest"
	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/sstable"
	"github.com/warpkit/warpkit/kv/vfs"
)

// flushBlocks encodes n entries with values of up to maxValue bytes (half
// of each random, half zeros) as a flush's run does, without sealing.
func flushBlocks(t *testing.T, rng *rand.Rand, n, maxValue int) []sstable.EncodedBlock {
	t.Helper()
	es := make([]sstable.Entry, n)
	for i := range es {
		v := make([]byte, rng.IntN(maxValue+1))
		for j := range v[:len(v)/2] {
			v[j] = byte(rng.Uint32())
		}
		es[i] = sstable.Entry{Key: base.MakeInternalKey(fmt.Appendf(nil, "key%09d", i*7), base.SeqNum(i+1), base.KindSet), Value: v}
	}
	bs, err := sstable.NewBlockEncoder(sstable.WriterOptions{BlockSize: 4096, BloomBitsPerKey: 10, Compression: sstable.SnappyCompression}).EncodeRaw(es, nil)
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

// TestCUDAFlushSeal: a Compactor with SealFlushes seals a flush's raw
// blocks on the device exactly as sstable.SealBlock would (those of 16 KiB
// or more on the host), batch after batch in the same memory; it declines
// uncompressed tables, small batches, and everything without SealFlushes
// and after Close; and a store whose flushes it seals writes the tables a
// store sealing them on the host writes.
func TestCUDAFlushSeal(t *testing.T) {
	dev := gputest.Device(t)
	if !hostSealsAsDevice() {
		t.Skip("this build's s2 Snappy encoder does not write the device's bytes")
	}
	ctx := context.Background()
	c, err := New(Options{Backend: warpkit.CUDA, Device: dev, SealFlushes: true, Fallback: compaction.CPU{Parts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	if !c.SealsBlocks(sstable.SnappyCompression) || c.SealsBlocks(sstable.NoCompression) || c.SealsBlocks(sstable.S2Compression) {
		t.Fatal("SealsBlocks: want Snappy only")
	}
	wantDevice := 0
	for round, maxValue := range []int{300, 40 << 10, 1000} { // the second: blocks of 16 KiB or more among them
		bs := flushBlocks(t, rng, 2000, maxValue)
		release, err := c.SealBlocks(ctx, sstable.SnappyCompression, bs)
		if err != nil {
			t.Fatal(err)
		}
		large := 0
		for i, b := range bs {
			want := sstable.SealBlock(sstable.SnappyCompression, nil, b.Raw)
			if b.Sealed == nil || b.Sealed.Type != want.Type || b.Sealed.CRC != want.CRC || !bytes.Equal(b.Sealed.Stored, want.Stored) {
				t.Fatalf("round %d, block %d (%d bytes): sealed %v, want type %d, crc %#x, %d bytes", round, i, b.RawSize, b.Sealed, want.Type, want.CRC, len(want.Stored))
			}
			if b.RawSize >= sealMaxBlock {
				large++
			}
		}
		if round == 1 && large == 0 {
			t.Fatal("no block of 16 KiB or more: the host's share is not tested")
		}
		wantDevice += len(bs) - large
		release()
		release() // (a second call does nothing)
	}
	if st := c.Stats(); st.FlushSeals != 3 || st.FlushSealedBlocks != uint64(wantDevice) || len(st.Fallbacks) != 0 || st.PinnedBytes < 4<<20 || st.DeviceHeldBytes < 4<<20 {
		t.Fatalf("stats: %d seals of %d blocks (want 3 of %d), fallbacks %v, %d bytes pinned, %d on the device (the sealer's: 4 MiB or more each)",
			st.FlushSeals, st.FlushSealedBlocks, wantDevice, st.Fallbacks, st.PinnedBytes, st.DeviceHeldBytes)
	}
	// The batches ran on the device's most urgent stream.
	_, urgent, err := dev.StreamPriorities()
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	s := c.mu.sealer
	c.mu.Unlock()
	s.mu.Lock()
	prio, err := s.d.stream.Priority()
	s.mu.Unlock()
	if err != nil || prio != urgent {
		t.Errorf("the sealer's stream has priority %d (%v), want the device's most urgent, %d", prio, err, urgent)
	}
	small := flushBlocks(t, rng, 20, 100)
	if _, err := c.SealBlocks(ctx, sstable.SnappyCompression, small); !errors.Is(err, compaction.ErrNotSealed) || small[0].Sealed != nil {
		t.Fatalf("a small batch: %v", err)
	}
	if _, err := c.SealBlocks(ctx, sstable.NoCompression, flushBlocks(t, rng, 2000, 300)); !errors.Is(err, compaction.ErrNotSealed) {
		t.Fatalf("uncompressed: %v", err)
	}

	// A store's flushes through it: the tables of a store sealing on the
	// host, byte for byte.
	table := func(comp compaction.Compactor) []byte {
		fs := vfs.NewMem()
		db, err := kvstore.Open("db", &kvstore.Options{FS: fs, MemTableSize: 4 << 20, FlushWorkers: 2, Compactor: comp})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		r := rand.New(rand.NewPCG(5, 6))
		for i := range 3000 {
			v := make([]byte, r.IntN(400))
			for j := range v[:len(v)/2] {
				v[j] = byte(r.Uint32())
			}
			if err := db.Set(fmt.Appendf(nil, "key%08d", r.IntN(100000)), v, nil); err != nil {
				t.Fatal(err)
			}
			if i%101 == 0 {
				if err := db.Delete(fmt.Appendf(nil, "key%08d", r.IntN(100000)), nil); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		return compactiontest.ReadTable(t, fs, "db")
	}
	before := c.Stats().FlushSeals
	got, want := table(c), table(compaction.CPU{})
	if !bytes.Equal(got, want) {
		t.Fatalf("the store's table with device-sealed flushes: %d bytes, differs from the host's %d", len(got), len(want))
	}
	if c.Stats().FlushSeals != before+1 {
		t.Fatalf("the store's flush was not sealed on the device (%d seals before, %d after)", before, c.Stats().FlushSeals)
	}

	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.PinnedBytes != 0 || st.DeviceHeldBytes != 0 {
		t.Fatalf("after Close: %d bytes pinned, %d on the device", st.PinnedBytes, st.DeviceHeldBytes)
	}
	if c.SealsBlocks(sstable.SnappyCompression) {
		t.Fatal("SealsBlocks after Close")
	}
	if _, err := c.SealBlocks(ctx, sstable.SnappyCompression, flushBlocks(t, rng, 2000, 300)); !errors.Is(err, compaction.ErrNotSealed) || !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v, want ErrNotSealed and ErrClosed", err)
	}
	off, err := New(Options{Backend: warpkit.CUDA, Device: dev, Fallback: compaction.CPU{Parts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer off.Close()
	if off.SealsBlocks(sstable.SnappyCompression) {
		t.Fatal("SealsBlocks without SealFlushes")
	}
	if _, err := off.SealBlocks(ctx, sstable.SnappyCompression, flushBlocks(t, rng, 2000, 300)); !errors.Is(err, compaction.ErrNotSealed) {
		t.Fatalf("without SealFlushes: %v", err)
	}
}
