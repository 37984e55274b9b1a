package sstable

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/warpkit/warpkit/kv/cache"
	"github.com/warpkit/warpkit/kv/internal/base"
)

// compressibleTable is n entries whose values repeat a short pattern, so
// that Snappy shrinks the data blocks several times.
func compressibleTable(n int) []kv {
	var es []kv
	for i := range n {
		k := base.MakeInternalKey([]byte(keyOf(i)), base.SeqNum(i+1), base.KindSet)
		es = append(es, kv{k: k, v: bytes.Repeat([]byte("value-"+keyOf(i%7)), 8)})
	}
	return es
}

func keyOf(i int) string {
	const digits = "0123456789"
	b := []byte("key00000000")
	for j := len(b) - 1; i > 0; j-- {
		b[j] = digits[i%10]
		i /= 10
	}
	return string(b)
}

// TestRawDataSizeRoundTrip: the Writer records the data blocks' size before
// compression, the Reader reads it back, and RawSize tracks it while writing.
func TestRawDataSizeRoundTrip(t *testing.T) {
	for _, c := range []Compression{NoCompression, SnappyCompression, S2Compression} {
		t.Run(c.String(), func(t *testing.T) {
			entries := compressibleTable(2000)
			var buf bytes.Buffer
			w := NewWriter(&buf, WriterOptions{Compression: c, BlockSize: 1024})
			var lastRaw uint64
			for _, e := range entries {
				if err := w.Add(e.k, e.v); err != nil {
					t.Fatal(err)
				}
				raw := w.RawSize()
				if raw < lastRaw {
					t.Fatalf("RawSize went down: %d after %d", raw, lastRaw)
				}
				lastRaw = raw
				if c == NoCompression && raw != w.EstimatedSize() {
					t.Fatalf("uncompressed: RawSize %d != EstimatedSize %d", raw, w.EstimatedSize())
				}
				if c != NoCompression && raw < w.EstimatedSize() {
					t.Fatalf("RawSize %d < EstimatedSize %d", raw, w.EstimatedSize())
				}
			}
			meta, err := w.Finish()
			if err != nil {
				t.Fatal(err)
			}
			// Every data block is raw length + trailer; 1024-byte target
			// blocks exceed it by at most one entry.
			p := meta.Properties
			if p.RawDataSize < p.DataSize || p.RawDataSize < p.NumDataBlocks*1024 {
				t.Fatalf("raw %d, stored %d, %d blocks", p.RawDataSize, p.DataSize, p.NumDataBlocks)
			}
			// Finish adds the open block's trailer (if a block was open).
			if d := p.RawDataSize - lastRaw; d != 0 && d != blockTrailerLen {
				t.Fatalf("RawSize after the last Add %d, but the property says %d", lastRaw, p.RawDataSize)
			}
			r := open(t, buf.Bytes(), cache.New(1<<20))
			if got := r.Properties().RawDataSize; got != p.RawDataSize {
				t.Fatalf("read RawDataSize %d, wrote %d", got, p.RawDataSize)
			}
			ratio := r.Properties().CompressionRatio()
			switch {
			case c == NoCompression && (p.RawDataSize != p.DataSize || ratio != 1):
				t.Fatalf("uncompressed: raw %d, stored %d, ratio %v", p.RawDataSize, p.DataSize, ratio)
			case c != NoCompression && ratio < 2:
				t.Fatalf("%v: ratio %v on repetitive values", c, ratio)
			}
		})
	}
}

// TestRawDataSizeMissing: a table written before the property existed opens,
// and reads with RawDataSize = DataSize, ratio 1.
func TestRawDataSizeMissing(t *testing.T) {
	entries := compressibleTable(2000)
	var buf bytes.Buffer
	w := NewWriter(&buf, WriterOptions{Compression: SnappyCompression, BlockSize: 1024})
	w.omitRawDataSize = true
	for _, e := range entries {
		if err := w.Add(e.k, e.v); err != nil {
			t.Fatal(err)
		}
	}
	meta, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	r := open(t, buf.Bytes(), cache.New(1<<20))
	p := r.Properties()
	if p.DataSize != meta.Properties.DataSize || p.RawDataSize != p.DataSize || p.CompressionRatio() != 1 {
		t.Fatalf("old table: raw %d, stored %d, ratio %v", p.RawDataSize, p.DataSize, p.CompressionRatio())
	}
	checkIter(t, r.NewIter(), entries, rand.New(rand.NewPCG(1, 2)))
	if m, err := ReadMetadata(r); err != nil || m.Properties.RawDataSize != p.DataSize {
		t.Fatalf("ReadMetadata: %v, %+v", err, m.Properties)
	}
}
