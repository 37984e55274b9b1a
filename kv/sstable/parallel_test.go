package sstable

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/warpkit/warpkit/kv/internal/base"
)

// TestCompressionWorkersIdentical: a table written with its data blocks
// compressed on several goroutines is byte-identical to the sequential
// writer's, for every compression, block size and mix of entries (values
// that compress well, values that do not, deletions, range tombstones), and
// the sizes the writer reports along the way agree at the end.
func TestCompressionWorkersIdentical(t *testing.T) {
	for round := range 24 {
		rng := rand.New(rand.NewPCG(uint64(round), 41))
		c := []Compression{SnappyCompression, S2Compression, NoCompression}[round%3]
		opts := WriterOptions{Compression: c, BlockSize: 256 << rng.IntN(5), BloomBitsPerKey: 10 * (round % 2)}
		n := 1 + rng.IntN(5000)
		var es []kv
		for i := range n {
			kind := base.KindSet
			if rng.IntN(10) == 0 {
				kind = base.KindDelete
			}
			v := bytes.Repeat([]byte(fmt.Sprintf("v%d", i%13)), rng.IntN(40))
			if rng.IntN(3) == 0 { // incompressible
				v = make([]byte, rng.IntN(200))
				for j := range v {
					v[j] = byte(rng.Uint32())
				}
			}
			es = append(es, kv{k: base.MakeInternalKey([]byte(keyOf(i)), base.SeqNum(n-i), kind), v: v})
		}
		var spans []Span
		if rng.IntN(2) == 0 {
			spans = []Span{{Start: []byte(keyOf(n / 3)), End: []byte(keyOf(n/2 + 1)), Seqs: []SeqNum{SeqNum(n + 5)}}}
		}
		write := func(workers int) ([]byte, Metadata) {
			var buf bytes.Buffer
			o := opts
			o.CompressionWorkers = workers
			w := NewWriter(&buf, o)
			for _, e := range es {
				if err := w.Add(e.k, e.v); err != nil {
					t.Fatal(err)
				}
				if w.RawSize() < w.props.RawDataSize {
					t.Fatal("RawSize went backwards")
				}
			}
			return buf.Bytes(), finishWith(t, w, spans)
		}
		seq, sm := write(0)
		for _, workers := range []int{2, 3, 8} {
			par, pm := write(workers)
			if !bytes.Equal(seq, par) {
				t.Fatalf("round %d (%v, block %d, %d entries): %d workers wrote %d bytes that differ from the sequential %d",
					round, c, opts.BlockSize, n, workers, len(par), len(seq))
			}
			if pm.Size != sm.Size || pm.Properties != sm.Properties {
				t.Fatalf("round %d: metadata differs: %+v vs %+v", round, pm, sm)
			}
		}
	}
}

// BenchmarkFlushTable writes a flush's table: 4 MiB of 16-byte keys and
// 1 KiB values (half of each value compressible, as db_bench's), Snappy,
// a bloom filter, with the workers a 16-core store gives its flushes (4)
// and sequentially; MB/s of entries and the allocations a table.
func BenchmarkFlushTable(b *testing.B) {
	es := flushTableEntries()
	for _, workers := range []int{0, 4} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			b.SetBytes(int64(len(es)) * (16 + 8 + 1024))
			b.ReportAllocs()
			var buf bytes.Buffer
			for b.Loop() {
				buf.Reset()
				w := NewWriter(&buf, WriterOptions{Compression: SnappyCompression, BloomBitsPerKey: 10, CompressionWorkers: workers})
				for _, e := range es {
					if err := w.Add(e.k, e.v); err != nil {
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

// flushTableEntries are a flush's 4 MiB of entries: 16-byte keys, 1 KiB
// values, half of each value random.
func flushTableEntries() []kv {
	rng := rand.New(rand.NewPCG(7, 9))
	var es []kv
	for i := range 4 << 10 {
		v := make([]byte, 1024)
		for j := range 512 {
			v[j] = byte(rng.Uint32())
		}
		es = append(es, kv{k: base.MakeInternalKey([]byte(fmt.Sprintf("%016d", i)), base.SeqNum(i+1), base.KindSet), v: v})
	}
	return es
}
