package sstable

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/warpkit/warpkit/kv/cache"
	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/internal/rangedel"
)

// memFile is a ReadableFile over bytes.
type memFile struct{ *bytes.Reader }

func (memFile) Close() error           { return nil }
func (m memFile) Size() (int64, error) { return m.Reader.Size(), nil }

type kv struct {
	k base.InternalKey
	v []byte
}

// randomTable builds sorted entries: several versions per user key, some
// deletes, values of varied sizes (some large, some incompressible).
func randomTable(rng *rand.Rand, n int) []kv {
	var out []kv
	seq := base.SeqNum(1000000)
	for i := 0; len(out) < n; i++ {
		uk := []byte(fmt.Sprintf("user%08d", i*3+rng.IntN(3)))
		if rng.IntN(10) == 0 {
			uk = append(uk, bytes.Repeat([]byte{'x'}, rng.IntN(200))...)
		}
		for v := rng.IntN(3); v >= 0; v-- {
			kind := base.KindSet
			if rng.IntN(8) == 0 {
				kind = base.KindDelete
			}
			var val []byte
			if kind == base.KindSet {
				val = make([]byte, []int{0, 10, 100, 300, 5000}[rng.IntN(5)])
				if rng.IntN(2) == 0 {
					for j := range val {
						val[j] = byte(rng.Uint32())
					}
				}
			}
			seq -= base.SeqNum(1 + rng.IntN(5))
			out = append(out, kv{base.MakeInternalKey(uk, seq, kind), val})
		}
	}
	sort.Slice(out, func(i, j int) bool { return base.CompareInternal(out[i].k, out[j].k) < 0 })
	return out
}

// finishWith adds the range tombstones to w and finishes it.
func finishWith(t testing.TB, w *Writer, spans []rangedel.Span) Metadata {
	t.Helper()
	for _, sp := range spans {
		if err := w.AddRangeDel(sp); err != nil {
			t.Fatal(err)
		}
	}
	meta, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return meta
}

func build(t testing.TB, entries []kv, spans []rangedel.Span, opts WriterOptions) ([]byte, Metadata) {
	var buf bytes.Buffer
	w := NewWriter(&buf, opts)
	for _, e := range entries {
		if err := w.Add(e.k, e.v); err != nil {
			t.Fatal(err)
		}
	}
	meta := finishWith(t, w, spans)
	if meta.Size != uint64(buf.Len()) {
		t.Fatalf("metadata size %d, file %d", meta.Size, buf.Len())
	}
	return buf.Bytes(), meta
}

func open(t testing.TB, data []byte, c *cache.Cache) *Reader {
	r, err := NewReader(memFile{bytes.NewReader(data)}, ReaderOptions{Cache: c, FileName: "t.sst"})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRoundTrip(t *testing.T) {
	for _, c := range []Compression{NoCompression, SnappyCompression, S2Compression} {
		t.Run(c.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			entries := randomTable(rng, 3000)
			spans := rangedel.Fragment([]rangedel.Tombstone{
				{Start: []byte("user00000100"), End: []byte("user00000200"), Seq: 5},
				{Start: []byte("user00000150"), End: []byte("user00000300"), Seq: 9},
			})
			data, meta := build(t, entries, spans, WriterOptions{BloomBitsPerKey: 10, Compression: c, BlockSize: 1024})
			r := open(t, data, cache.New(1<<20))
			p := r.Properties()
			if p.NumEntries != uint64(len(entries)) || p.NumRangeDeletions != 4 || p.Compression != c.String() || p.NumDataBlocks < 10 {
				t.Fatalf("properties %+v", p)
			}
			if base.CompareInternal(meta.Smallest, entries[0].k) != 0 {
				t.Fatalf("smallest %v", meta.Smallest)
			}
			if !meta.HasRangeDels || r.RangeDels().MaxCovering([]byte("user00000160"), 100) != 9 {
				t.Fatal("range tombstones lost")
			}
			checkIter(t, r.NewIter(), entries, rng)
			checkIter(t, r.NewCompactionIter(), entries, rng)
			checkGet(t, r, entries, rng)
		})
	}
}

func checkIter(t *testing.T, it *Iter, entries []kv, rng *rand.Rand) {
	t.Helper()
	i := 0
	for ok := it.First(); ok; ok = it.Next() {
		if base.CompareInternal(it.Key(), entries[i].k) != 0 || !bytes.Equal(it.Value(), entries[i].v) {
			t.Fatalf("forward %d: got %v want %v", i, it.Key(), entries[i].k)
		}
		i++
	}
	if it.Error() != nil || i != len(entries) {
		t.Fatalf("forward: %d entries, err %v", i, it.Error())
	}
	i = len(entries) - 1
	for ok := it.Last(); ok; ok = it.Prev() {
		if base.CompareInternal(it.Key(), entries[i].k) != 0 {
			t.Fatalf("backward %d: got %v want %v", i, it.Key(), entries[i].k)
		}
		i--
	}
	if it.Error() != nil || i != -1 {
		t.Fatalf("backward stopped at %d: %v", i, it.Error())
	}
	for range 2000 {
		var probe []byte
		if rng.IntN(2) == 0 {
			probe = entries[rng.IntN(len(entries))].k.UserKey
		} else {
			probe = []byte(fmt.Sprintf("user%08d", rng.IntN(len(entries)*2)))
		}
		j := sort.Search(len(entries), func(j int) bool { return bytes.Compare(entries[j].k.UserKey, probe) >= 0 })
		ok := it.SeekGE(probe)
		if ok != (j < len(entries)) || (ok && base.CompareInternal(it.Key(), entries[j].k) != 0) {
			t.Fatalf("SeekGE(%q): %v %v, want index %d", probe, ok, it.Key(), j)
		}
		// Step a few entries in random directions.
		pos := j
		for range 5 {
			if !ok {
				break
			}
			if rng.IntN(2) == 0 {
				ok = it.Next()
				pos++
			} else {
				ok = it.Prev()
				pos--
			}
			if ok != (pos >= 0 && pos < len(entries)) || (ok && base.CompareInternal(it.Key(), entries[pos].k) != 0) {
				t.Fatalf("step after SeekGE(%q) to %d: %v %v", probe, pos, ok, it.Key())
			}
		}
		ok = it.SeekLT(probe)
		if ok != (j > 0) || (ok && base.CompareInternal(it.Key(), entries[j-1].k) != 0) {
			t.Fatalf("SeekLT(%q): %v %v, want index %d", probe, ok, it.Key(), j-1)
		}
	}
}

func checkGet(t *testing.T, r *Reader, entries []kv, rng *rand.Rand) {
	t.Helper()
	for range 3000 {
		e := entries[rng.IntN(len(entries))]
		snap := e.k.SeqNum() + base.SeqNum(rng.IntN(3))
		// Model: newest version of the user key with seq <= snap.
		var want *kv
		for i := range entries {
			if bytes.Equal(entries[i].k.UserKey, e.k.UserKey) && entries[i].k.SeqNum() <= snap {
				want = &entries[i]
				break
			}
		}
		v, kind, seq, found, err := r.Get(e.k.UserKey, snap)
		if err != nil || !found || want == nil || seq != want.k.SeqNum() || kind != want.k.Kind() || !bytes.Equal(v, want.v) {
			t.Fatalf("Get(%q@%d) = %v %d %v %v, want %v", e.k.UserKey, snap, kind, seq, found, err, want.k)
		}
	}
	// Absent keys: mostly filtered by the bloom filter.
	for i := range 2000 {
		if _, _, _, found, err := r.Get([]byte(fmt.Sprintf("absent%d", i)), base.SeqNumMax); found || err != nil {
			t.Fatalf("absent key found: %v", err)
		}
	}
	st := r.Stats()
	if fpr := float64(st.BloomFalsePositives) / 2000; fpr > 0.03 {
		t.Fatalf("bloom false-positive rate %.3f", fpr)
	}
}

func TestWriterRejectsDisorder(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, WriterOptions{})
	w.Add(base.MakeInternalKey([]byte("b"), 1, base.KindSet), nil)
	if err := w.Add(base.MakeInternalKey([]byte("a"), 1, base.KindSet), nil); err == nil {
		t.Fatal("out-of-order key accepted")
	}
	w = NewWriter(&buf, WriterOptions{})
	if _, err := w.Finish(); err == nil {
		t.Fatal("empty table accepted")
	}
	w = NewWriter(&buf, WriterOptions{})
	w.AddRangeDel(rangedel.Span{Start: []byte("c"), End: []byte("f"), Seqs: []base.SeqNum{3}})
	if err := w.AddRangeDel(rangedel.Span{Start: []byte("d"), End: []byte("g"), Seqs: []base.SeqNum{3}}); err == nil {
		t.Fatal("overlapping fragments accepted")
	}
}

func TestTombstoneOnlyTableBounds(t *testing.T) {
	data, meta := build(t, nil, rangedel.Fragment([]rangedel.Tombstone{{Start: []byte("a"), End: []byte("m"), Seq: 4}}), WriterOptions{})
	if meta.HasPoints || !meta.Largest.IsExclusiveSentinel() || string(meta.Largest.UserKey) != "m" || string(meta.Smallest.UserKey) != "a" {
		t.Fatalf("bounds %v %v", meta.Smallest, meta.Largest)
	}
	r := open(t, data, nil)
	if r.NewIter().First() {
		t.Fatal("tombstone-only table has points")
	}
}

// Every single-byte flip is detected: opening or reading the table fails
// with a corruption error, and nothing it returns is wrong.
func TestCorruptionDetected(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	entries := randomTable(rng, 300)
	data, _ := build(t, entries, nil, WriterOptions{BloomBitsPerKey: 10, Compression: SnappyCompression, BlockSize: 512})
	for trial := range 400 {
		bad := append([]byte(nil), data...)
		pos := rng.IntN(len(bad))
		bad[pos] ^= byte(1 << rng.IntN(8))
		r, err := NewReader(memFile{bytes.NewReader(bad)}, ReaderOptions{FileName: "t.sst"})
		if err != nil {
			if !errors.Is(err, base.ErrCorruption) {
				t.Fatalf("trial %d: open error %v is not a corruption", trial, err)
			}
			continue
		}
		it := r.NewIter()
		i := 0
		for ok := it.First(); ok; ok = it.Next() {
			if i >= len(entries) || base.CompareInternal(it.Key(), entries[i].k) != 0 || !bytes.Equal(it.Value(), entries[i].v) {
				t.Fatalf("trial %d (flip at %d): wrong entry %d returned", trial, pos, i)
			}
			i++
		}
		if i != len(entries) && !errors.Is(it.Error(), base.ErrCorruption) {
			t.Fatalf("trial %d (flip at %d): iteration stopped at %d without a corruption error (%v)", trial, pos, i, it.Error())
		}
		if i == len(entries) && it.Error() == nil {
			// The flip must have hit the filter (which can only cause extra
			// reads) — check by comparing with the original layout.
			if err := r.ValidateChecksums(); err != nil {
				t.Fatalf("trial %d: iteration succeeded but checksums fail: %v", trial, err)
			}
		}
	}
}

func TestTombstoneOnlyTableSeeks(t *testing.T) {
	data, _ := build(t, nil, rangedel.Fragment([]rangedel.Tombstone{{Start: []byte("a"), End: []byte("m"), Seq: 4}}), WriterOptions{BloomBitsPerKey: 10})
	r := open(t, data, nil)
	it := r.NewIter()
	if it.SeekGE([]byte("b")) || it.SeekLT([]byte("z")) || it.First() || it.Last() || it.Error() != nil {
		t.Fatalf("points in a tombstone-only table (err %v)", it.Error())
	}
	if _, _, _, found, err := r.Get([]byte("b"), 100); found || err != nil {
		t.Fatalf("Get: %v %v", found, err)
	}
}

// TestBlockLargerThanCompressionLimit: a value too large for a compressed
// block (the limit lowered here from 64 MiB) is stored in an uncompressed
// block and reads back through Get, iterators (cached and compaction ones)
// and checksum validation.
func TestBlockLargerThanCompressionLimit(t *testing.T) {
	defer func(old int) { maxCompressedBlockSize = old }(maxCompressedBlockSize)
	maxCompressedBlockSize = 64 << 10
	big := bytes.Repeat([]byte("compressible "), 20<<10) // 260 KiB
	noise := make([]byte, 100<<10)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	entries := []kv{
		{base.MakeInternalKey([]byte("a"), 3, base.KindSet), []byte("small")},
		{base.MakeInternalKey([]byte("b"), 2, base.KindSet), big},
		{base.MakeInternalKey([]byte("c"), 1, base.KindSet), noise},
		{base.MakeInternalKey([]byte("d"), 1, base.KindSet), []byte("small")},
	}
	for _, c := range []Compression{SnappyCompression, S2Compression} {
		data, _ := build(t, entries, nil, WriterOptions{Compression: c, BlockSize: 1024})
		if len(data) < len(big)+len(noise) {
			t.Fatalf("%v: table of %d bytes: the large block was compressed", c, len(data))
		}
		r := open(t, data, cache.New(1<<20))
		for _, e := range entries {
			v, _, _, found, err := r.Get(e.k.UserKey, base.SeqNumMax)
			if err != nil || !found || !bytes.Equal(v, e.v) {
				t.Fatalf("%v: Get(%s) = %d bytes, %v, %v", c, e.k.UserKey, len(v), found, err)
			}
		}
		for _, it := range []*Iter{r.NewIter(), r.NewCompactionIter()} {
			n := 0
			for ok := it.First(); ok; ok = it.Next() {
				if !bytes.Equal(it.Value(), entries[n].v) {
					t.Fatalf("%v: entry %d differs", c, n)
				}
				n++
			}
			if err := it.Close(); err != nil || n != len(entries) {
				t.Fatalf("%v: iterated %d entries, %v", c, n, err)
			}
		}
		if err := r.ValidateChecksums(); err != nil {
			t.Fatal(err)
		}
	}
}
