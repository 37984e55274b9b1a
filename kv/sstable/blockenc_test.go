package sstable

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/internal/rangedel"
)

// Ways encodeRuns has its blocks sealed.
const (
	sealEncode = iota // Encode seals them
	sealCaller        // EncodeRaw, then SealBlock (as a compaction.BlockSealer would)
	sealWriter        // EncodeRaw, and the Writer seals them
)

// encodeRuns writes es as a table whose blocks a BlockEncoder built, the
// entries cut into runs at cuts (each run encoded by an encoder of its
// own, as a flush's goroutines do), sealed as seal says.
func encodeRuns(t *testing.T, es []kv, cuts []int, spans []rangedel.Span, opts WriterOptions, seal ...int) ([]byte, Metadata) {
	t.Helper()
	entries := make([]Entry, len(es))
	for i, e := range es {
		entries[i] = Entry{Key: e.k, Value: e.v}
	}
	var buf vectorBuffer
	w := NewWriter(&buf, opts)
	bounds := append(append([]int{0}, cuts...), len(es))
	for r := 0; r+1 < len(bounds); r++ {
		lo, hi := bounds[r], bounds[r+1]
		var prev *InternalKey
		if lo > 0 {
			prev = &entries[lo-1].Key
		}
		mode := sealEncode
		if len(seal) > 0 {
			mode = seal[0]
		}
		enc := NewBlockEncoder(opts)
		encode := enc.Encode
		if mode != sealEncode {
			encode = enc.EncodeRaw
		}
		bs, err := encode(entries[lo:hi], prev)
		if err != nil {
			t.Fatal(err)
		}
		for i, b := range bs {
			if mode == sealEncode && (b.Raw != nil || b.Sealed == nil || b.RawSize < 5) ||
				mode != sealEncode && (b.Raw == nil || b.Sealed != nil || len(b.Raw) != b.RawSize || b.RawSize < 5) {
				t.Fatalf("run %d, seal mode %d: block with Raw %v, Sealed %v, RawSize %d", r, mode, b.Raw != nil, b.Sealed != nil, b.RawSize)
			}
			if mode == sealCaller {
				sb := SealBlock(opts.Compression, nil, b.Raw)
				bs[i].Sealed = &sb
			}
		}
		if err := w.AddEncodedBlocks(bs); err != nil {
			t.Fatal(err)
		}
	}
	meta := finishWith(t, w, spans)
	return buf.Bytes(), meta
}

// TestBlockEncoderIdentical: a table whose entries one BlockEncoder
// encoded is byte-identical to the table written entry by entry (same
// cuts, bytes, trailers, statistics, filter), for every compression, block
// size and restart interval; cut into several runs, each encoded apart,
// it holds the same entries, range tombstones, properties (but its data
// blocks' count and sizes) and bloom filter, and a Reader finds every key.
func TestBlockEncoderIdentical(t *testing.T) {
	for round := range 30 {
		rng := rand.New(rand.NewPCG(uint64(round), 91))
		opts := WriterOptions{
			Compression:     []Compression{NoCompression, SnappyCompression, S2Compression}[round%3],
			BlockSize:       256 << rng.IntN(5),
			RestartInterval: []int{1, 4, 16}[rng.IntN(3)],
			BloomBitsPerKey: 10 * (round % 2),
		}
		es := randomTable(rng, 1+rng.IntN(3000))
		if round%5 == 0 { // incompressible values: blocks stored as they are
			for i := range es {
				v := make([]byte, rng.IntN(300))
				for j := range v {
					v[j] = byte(rng.Uint32())
				}
				es[i].v = v
			}
		}
		var spans []rangedel.Span
		if rng.IntN(2) == 0 {
			spans = []rangedel.Span{{Start: []byte("user00000100"), End: []byte("user00000200"), Seqs: []SeqNum{5}}}
		}
		want, wantMeta := build(t, es, spans, opts)
		for _, mode := range []int{sealEncode, sealCaller, sealWriter} {
			got, meta := encodeRuns(t, es, nil, spans, opts, mode)
			if !bytes.Equal(got, want) || fmt.Sprint(meta) != fmt.Sprint(wantMeta) {
				t.Fatalf("round %d (%v, block %d, restart %d, bloom %d), seal mode %d: one run: %d bytes, want the %d written entry by entry (metadata %+v, want %+v)",
					round, opts.Compression, opts.BlockSize, opts.RestartInterval, opts.BloomBitsPerKey, mode, len(got), len(want), meta, wantMeta)
			}
		}
		// Runs cut anywhere: between the versions of one user key too.
		var cuts []int
		for c := 1 + rng.IntN(max(1, len(es)/3)); c < len(es); c += 1 + rng.IntN(max(1, len(es)/3)) {
			cuts = append(cuts, c)
		}
		got, meta := encodeRuns(t, es, cuts, spans, opts)
		if raw, _ := encodeRuns(t, es, cuts, spans, opts, sealCaller); !bytes.Equal(raw, got) {
			t.Fatalf("round %d: runs encoded raw and sealed by SealBlock: %d bytes, sealed by Encode %d", round, len(raw), len(got))
		}
		r := open(t, got, nil)
		checkIter(t, r.NewIter(), es, rng)
		checkGet(t, r, es, rng)
		wr := open(t, want, nil)
		p, wp := *r.Properties(), *wr.Properties()
		if p.NumDataBlocks < wp.NumDataBlocks {
			t.Fatalf("round %d: %d runs in %d blocks, %d entry by entry", round, len(cuts)+1, p.NumDataBlocks, wp.NumDataBlocks)
		}
		p.NumDataBlocks, p.DataSize, p.IndexSize, p.RawDataSize = wp.NumDataBlocks, wp.DataSize, wp.IndexSize, wp.RawDataSize
		if p != wp {
			t.Fatalf("round %d: properties\n%+v\nwant\n%+v", round, p, wp)
		}
		if meta.Smallest.String() != wantMeta.Smallest.String() || meta.Largest.String() != wantMeta.Largest.String() ||
			meta.SmallestSeq != wantMeta.SmallestSeq || meta.LargestSeq != wantMeta.LargestSeq || meta.HasRangeDels != wantMeta.HasRangeDels {
			t.Fatalf("round %d: metadata %+v, want %+v", round, meta, wantMeta)
		}
		if opts.BloomBitsPerKey > 0 && !bytes.Equal(filterOf(t, got), filterOf(t, want)) {
			t.Fatalf("round %d: the runs' bloom filter differs from the table's", round)
		}
	}
}

// filterOf returns a table's bloom filter block, as read back.
func filterOf(t *testing.T, data []byte) []byte {
	t.Helper()
	r := open(t, data, nil)
	return r.filter
}

// TestBlockEncoderRefuses: entries out of order (within a run, or a run's
// first before prev), a kind Add refuses, are errors; an encoder reused
// after them encodes correctly.
func TestBlockEncoderRefuses(t *testing.T) {
	k := func(u string, seq SeqNum, kind base.Kind) InternalKey {
		return base.MakeInternalKey([]byte(u), seq, kind)
	}
	e := NewBlockEncoder(WriterOptions{Compression: SnappyCompression})
	for _, c := range []struct {
		name    string
		entries []Entry
		prev    *InternalKey
		want    string
	}{
		{"out of order", []Entry{{Key: k("b", 1, base.KindSet)}, {Key: k("a", 2, base.KindSet)}}, nil, "out of order"},
		{"a duplicate", []Entry{{Key: k("a", 1, base.KindSet)}, {Key: k("a", 1, base.KindSet)}}, nil, "out of order"},
		{"before prev", []Entry{{Key: k("a", 1, base.KindSet)}}, &InternalKey{UserKey: []byte("b"), Trailer: base.MakeTrailer(1, base.KindSet)}, "out of order"},
		{"a range deletion", []Entry{{Key: k("a", 1, base.KindRangeDelete)}}, nil, "RANGEDEL"},
	} {
		if _, err := e.Encode(c.entries, c.prev); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
	rng := rand.New(rand.NewPCG(3, 3))
	es := randomTable(rng, 500)
	want, _ := build(t, es, nil, WriterOptions{Compression: SnappyCompression})
	got, _ := encodeRuns(t, es, nil, nil, WriterOptions{Compression: SnappyCompression})
	if !bytes.Equal(got, want) {
		t.Fatal("a table after the refusals differs")
	}
}

// BenchmarkFlushTableRuns: BenchmarkFlushTable's table with its entries
// encoded in 1 and 4 runs on as many goroutines (the flush's way), then
// written in order.
func BenchmarkFlushTableRuns(b *testing.B) {
	es := flushTableEntries()
	entries := make([]Entry, len(es))
	for i, e := range es {
		entries[i] = Entry{Key: e.k, Value: e.v}
	}
	opts := WriterOptions{Compression: SnappyCompression, BloomBitsPerKey: 10}
	for _, runs := range []int{1, 4} {
		b.Run(fmt.Sprintf("runs=%d", runs), func(b *testing.B) {
			b.SetBytes(int64(len(es)) * (16 + 8 + 1024))
			b.ReportAllocs()
			encs := make([]*BlockEncoder, runs)
			for i := range encs {
				encs[i] = NewBlockEncoder(opts)
			}
			out := make([][]EncodedBlock, runs)
			var buf bytes.Buffer
			for b.Loop() {
				buf.Reset()
				done := make(chan int, runs)
				for r := range runs {
					go func() {
						lo, hi := r*len(entries)/runs, (r+1)*len(entries)/runs
						var prev *InternalKey
						if lo > 0 {
							prev = &entries[lo-1].Key
						}
						out[r], _ = encs[r].Encode(entries[lo:hi], prev)
						done <- r
					}()
				}
				for range runs {
					<-done
				}
				w := NewWriter(&buf, opts)
				for r := range runs {
					if err := w.AddEncodedBlocks(out[r]); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := w.Finish(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
