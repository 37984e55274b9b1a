package sstable

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/internal/rangedel"
	"github.com/warpkit/warpkit/kv/record"
	"github.com/warpkit/warpkit/kv/vfs"
)

// encodedBlocksOf reads a table's data blocks back as EncodedBlocks, with
// the metadata a bulk encoder would compute for them.
func encodedBlocksOf(t testing.TB, data []byte) []EncodedBlock {
	t.Helper()
	r := open(t, data, nil)
	hs, err := r.DataBlocks()
	if err != nil {
		t.Fatal(err)
	}
	var out []EncodedBlock
	var prevUser []byte
	first := true
	for _, h := range hs {
		raw, err := r.DecodeBlock(h, data[h.Offset:h.Offset+h.Length+BlockTrailerLen], nil)
		if err != nil {
			t.Fatal(err)
		}
		b := EncodedBlock{Raw: bytes.Clone(raw), SmallestSeq: base.SeqNumMax}
		var it blockIter
		if !it.init(b.Raw, true, "t.sst", int64(h.Offset)) {
			t.Fatal(it.err)
		}
		for ok := it.first(); ok; ok = it.next() {
			k := it.ikey.Clone()
			if b.Entries == 0 {
				b.First = k
			}
			b.Last = k
			b.Entries++
			if k.Kind() == base.KindDelete {
				b.Deletions++
			}
			b.RawKeySize += uint64(k.Size())
			b.RawValueSize += uint64(len(it.val))
			b.SmallestSeq = min(b.SmallestSeq, k.SeqNum())
			b.LargestSeq = max(b.LargestSeq, k.SeqNum())
			if first || !bytes.Equal(prevUser, k.UserKey) {
				b.Hashes = append(b.Hashes, BloomHash(k.UserKey))
			}
			first = false
			prevUser = append(prevUser[:0], k.UserKey...)
		}
		if it.err != nil {
			t.Fatal(it.err)
		}
		out = append(out, b)
	}
	return out
}

// TestEncodedBlocksIdentical: a table written from encoded blocks (raw,
// sealed in advance, sealed without their contents (RawSize), with the
// filter set from outside) is byte-identical to
// the same table written entry by entry, for every compression, block size,
// restart interval and number of compression workers.
func TestEncodedBlocksIdentical(t *testing.T) {
	for round := range 36 {
		rng := rand.New(rand.NewPCG(uint64(round), 77))
		opts := WriterOptions{
			Compression:     []Compression{NoCompression, SnappyCompression, S2Compression}[round%3],
			BlockSize:       256 << rng.IntN(5),
			RestartInterval: []int{1, 4, 16, 32}[rng.IntN(4)],
			BloomBitsPerKey: 10 * (round % 2),
		}
		es := randomTable(rng, 1+rng.IntN(3000))
		var spans []rangedel.Span
		if rng.IntN(2) == 0 {
			spans = []rangedel.Span{{Start: []byte("user00000100"), End: []byte("user00000200"), Seqs: []SeqNum{5}}}
		}
		for _, workers := range []int{1, 4} {
			opts.CompressionWorkers = workers
			want, wantMeta := build(t, es, spans, opts)
			blocks := encodedBlocksOf(t, want)
			var hashes []uint32
			for _, b := range blocks {
				hashes = append(hashes, b.Hashes...)
			}
			for _, mode := range []string{"raw", "sealed", "sealed after raw", "sealed without raw", "filter",
				"batches", "batches sealed after raw", "batches sealed without raw"} {
				name, batched := mode, strings.HasPrefix(mode, "batches")
				mode := strings.TrimPrefix(strings.TrimPrefix(mode, "batches"), " ")
				buf := &vectorBuffer{}
				w := NewWriter(buf, opts)
				w.minVectorBytes = 0 // every batch through WriteVectors
				if mode == "filter" && opts.BloomBitsPerKey > 0 {
					if err := w.SetFilter(BuildFilter(hashes, opts.BloomBitsPerKey)); err != nil {
						t.Fatal(err)
					}
				}
				var batch []EncodedBlock
				for i, b := range blocks {
					if mode == "sealed" || mode == "sealed without raw" || (mode == "sealed after raw" && i%2 == 1) || batched && mode == "" {
						s := SealBlock(opts.Compression, nil, b.Raw)
						b.Sealed = &s
					}
					if mode == "sealed without raw" {
						b.Raw, b.RawSize = nil, len(b.Raw)
					}
					if batched {
						// Batches of 1 to 40 blocks, through WriteVectors.
						if batch = append(batch, b); len(batch) > rng.IntN(40) || i == len(blocks)-1 {
							if err := w.AddEncodedBlocks(batch); err != nil {
								t.Fatalf("round %d batches %s: blocks to %d: %v", round, mode, i, err)
							}
							batch = batch[:0]
						}
						continue
					}
					if err := w.AddEncodedBlock(b); err != nil {
						t.Fatalf("round %d %s: block %d: %v", round, mode, i, err)
					}
				}
				// (Sealed blocks behind raw ones still being compressed
				// take the buffered path.)
				behind := mode == "sealed after raw" && workers > 1 && opts.Compression != NoCompression
				if batched && !behind && buf.vectors == 0 {
					t.Fatalf("round %d batches %s: no WriteVectors", round, mode)
				}
				if !batched && buf.vectors != 0 {
					t.Fatalf("round %d %s: AddEncodedBlock wrote vectors", round, mode)
				}
				meta := finishWith(t, w, spans)
				if !bytes.Equal(buf.Bytes(), want) {
					t.Fatalf("round %d (%v, block %d, restart %d, bloom %d, workers %d) %s: %d bytes differ from the %d written entry by entry",
						round, opts.Compression, opts.BlockSize, opts.RestartInterval, opts.BloomBitsPerKey, workers, name, buf.Len(), len(want))
				}
				if fmt.Sprint(meta) != fmt.Sprint(wantMeta) {
					t.Fatalf("round %d %s: metadata\n%+v\nwant\n%+v", round, mode, meta, wantMeta)
				}
			}
		}
	}
}

// vectorBuffer is a bytes.Buffer that writes vectors (vfs.VectorWriter),
// counting the buffers it took so.
type vectorBuffer struct {
	bytes.Buffer
	vectors int
}

func (b *vectorBuffer) WriteVectors(bufs [][]byte) (int64, error) {
	var n int64
	for _, p := range bufs {
		m, _ := b.Write(p)
		n += int64(m)
	}
	b.vectors += len(bufs)
	return n, nil
}

// TestEncodedBlockRefused: blocks the Writer cannot place give an error
// and stop the Writer.
func TestEncodedBlockRefused(t *testing.T) {
	es := randomTable(rand.New(rand.NewPCG(1, 2)), 2000)
	data, _ := build(t, es, nil, WriterOptions{BlockSize: 512, Compression: SnappyCompression})
	blocks := encodedBlocksOf(t, data)
	if len(blocks) < 3 {
		t.Fatalf("%d blocks", len(blocks))
	}
	newW := func() *Writer {
		return NewWriter(&bytes.Buffer{}, WriterOptions{BlockSize: 512, Compression: SnappyCompression})
	}
	for _, tc := range []struct {
		name string
		add  func(w *Writer) error
	}{
		{"out of order", func(w *Writer) error {
			if err := w.AddEncodedBlock(blocks[1]); err != nil {
				return fmt.Errorf("first block refused: %w", err)
			}
			return w.AddEncodedBlock(blocks[0])
		}},
		{"after Add in the open block", func(w *Writer) error {
			if err := w.Add(es[0].k, es[0].v); err != nil {
				return fmt.Errorf("Add refused: %w", err)
			}
			return w.AddEncodedBlock(blocks[1])
		}},
		{"empty", func(w *Writer) error { return w.AddEncodedBlock(EncodedBlock{}) }},
		{"no contents, not sealed", func(w *Writer) error {
			b := blocks[0]
			b.Raw, b.RawSize = nil, len(b.Raw)
			return w.AddEncodedBlock(b)
		}},
		{"sealed without contents or their size", func(w *Writer) error {
			b := blocks[0]
			s := SealBlock(SnappyCompression, nil, b.Raw)
			b.Sealed, b.Raw = &s, nil
			return w.AddEncodedBlock(b)
		}},
		{"sealed without contents, of another size", func(w *Writer) error {
			b := blocks[0]
			s := SealBlock(SnappyCompression, nil, b.Raw)
			b.Sealed, b.Raw, b.RawSize = &s, nil, len(b.Raw)+8
			return w.AddEncodedBlock(b)
		}},
		{"stored as it is without contents, of another size", func(w *Writer) error {
			b := blocks[0]
			s := SealedBlock{Stored: b.Raw, Type: NoCompression, CRC: blockCRC(b.Raw, NoCompression)}
			b.Sealed, b.Raw, b.RawSize = &s, nil, len(b.Raw)-1
			return w.AddEncodedBlock(b)
		}},
		{"first after last", func(w *Writer) error {
			b := blocks[0]
			b.First, b.Last = b.Last, b.First
			return w.AddEncodedBlock(b)
		}},
		{"bad restart count", func(w *Writer) error {
			b := blocks[0]
			b.Raw = append(bytes.Clone(b.Raw[:len(b.Raw)-4]), 0xff, 0xff, 0xff, 0x7f)
			return w.AddEncodedBlock(b)
		}},
		{"sealed for another compression", func(w *Writer) error {
			b := blocks[0]
			s := SealBlock(S2Compression, nil, b.Raw)
			if s.Type != S2Compression {
				return errors.New("S2 did not compress the block: test data too random")
			}
			b.Sealed = &s
			return w.AddEncodedBlock(b)
		}},
		{"filter without bloom", func(w *Writer) error { return w.SetFilter([]byte{1, 2, 3}) }},
	} {
		w := newW()
		err := tc.add(w)
		if err == nil || !errors.Is(err, w.err) {
			t.Errorf("%s: err %v (writer's %v)", tc.name, err, w.err)
			continue
		}
		if _, ferr := w.Finish(); ferr == nil {
			t.Errorf("%s: Finish succeeded after the error", tc.name)
		}
	}
}

// TestDecodeBlockDamage: DecodeBlock reports a damaged or short block as
// corruption.
func TestDecodeBlockDamage(t *testing.T) {
	es := randomTable(rand.New(rand.NewPCG(3, 4)), 500)
	data, _ := build(t, es, nil, WriterOptions{BlockSize: 1024, Compression: SnappyCompression})
	r := open(t, data, nil)
	hs, err := r.DataBlocks()
	if err != nil || len(hs) < 2 {
		t.Fatal(hs, err)
	}
	h := hs[1]
	stored := bytes.Clone(data[h.Offset : h.Offset+h.Length+BlockTrailerLen])
	stored[len(stored)/2] ^= 0x40
	var ce *base.CorruptionError
	if _, err := r.DecodeBlock(h, stored, nil); !errors.As(err, &ce) {
		t.Fatalf("damaged block: %v", err)
	}
	if _, err := r.DecodeBlock(h, stored[:len(stored)-1], nil); !errors.As(err, &ce) {
		t.Fatalf("short block: %v", err)
	}
}

// TestRawUnchecked: an uncompressed table's blocks come back as DecodeBlock
// returns them, with the checksum record computes for them, and damaged
// bytes are not noticed (the caller checks); compressed blocks and lengths
// that disagree with the handle are refused.
func TestRawUnchecked(t *testing.T) {
	es := randomTable(rand.New(rand.NewPCG(5, 6)), 500)
	for _, c := range []Compression{NoCompression, SnappyCompression} {
		data, _ := build(t, es, nil, WriterOptions{BlockSize: 1024, Compression: c})
		r := open(t, data, nil)
		hs, err := r.DataBlocks()
		if err != nil || len(hs) < 2 {
			t.Fatal(hs, err)
		}
		for i, h := range hs {
			stored := data[h.Offset : h.Offset+h.Length+BlockTrailerLen]
			raw, crc, ok := RawUnchecked(h, stored)
			if want := Compression(stored[h.Length]) == NoCompression; ok != want {
				t.Fatalf("%v block %d: ok %v, stored with type %d", c, i, ok, stored[h.Length])
			}
			if !ok {
				continue
			}
			dec, err := r.DecodeBlock(h, stored, nil)
			if err != nil || !bytes.Equal(raw, dec) {
				t.Fatalf("%v block %d: contents differ from DecodeBlock's (%v)", c, i, err)
			}
			if want := record.ExtendCRC(record.CRC(raw), []byte{0}); crc != want {
				t.Fatalf("%v block %d: crc %#x, want %#x", c, i, crc, want)
			}
			if _, _, ok := RawUnchecked(h, stored[:len(stored)-1]); ok {
				t.Fatalf("%v block %d: a short block accepted", c, i)
			}
		}
		if c == NoCompression {
			// Damage is the caller's to find.
			h := hs[1]
			stored := bytes.Clone(data[h.Offset : h.Offset+h.Length+BlockTrailerLen])
			stored[3] ^= 0x40
			raw, crc, ok := RawUnchecked(h, stored)
			if !ok || record.ExtendCRC(record.CRC(raw), []byte{0}) == crc {
				t.Fatalf("damaged block: ok %v, and its checksum still matches", ok)
			}
			var ce *base.CorruptionError
			if _, err := r.DecodeBlock(h, stored, nil); !errors.As(err, &ce) {
				t.Fatalf("damaged block: DecodeBlock says %v", err)
			}
		}
	}
}

// BenchmarkSealedBlocks writes a table's sealed blocks (4 KiB, stored as
// they are: what a device seals) to a MemFS file, one AddEncodedBlock
// each (through the Writer's buffer: two copies of every byte) against
// AddEncodedBlocks in batches of 256 (WriteVectors: one copy). MB/s of
// blocks; the writing is one goroutine, so the time is its CPU time.
func BenchmarkSealedBlocks(b *testing.B) {
	es := randomTable(rand.New(rand.NewPCG(5, 6)), 40000)
	data, _ := build(b, es, nil, WriterOptions{BlockSize: 4096})
	blocks := encodedBlocksOf(b, data)
	size := 0
	for i := range blocks {
		s := SealBlock(NoCompression, nil, blocks[i].Raw)
		blocks[i].Sealed = &s
		blocks[i].Hashes = nil
		size += len(blocks[i].Raw)
	}
	for _, batch := range []int{1, 256} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			fs := vfs.NewMem()
			b.SetBytes(int64(size))
			for i := 0; i < b.N; i++ {
				f, err := fs.Create("/t")
				if err != nil {
					b.Fatal(err)
				}
				w := NewWriter(f, WriterOptions{BlockSize: 4096})
				for lo := 0; lo < len(blocks); lo += batch {
					hi := min(lo+batch, len(blocks))
					if batch == 1 {
						err = w.AddEncodedBlock(blocks[lo])
					} else {
						err = w.AddEncodedBlocks(blocks[lo:hi])
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				if _, err := w.Finish(); err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
		})
	}
}
