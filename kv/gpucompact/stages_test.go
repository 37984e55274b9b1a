package gpucompact

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/warpkit/warpkit/kv/record"
	"io"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/klauspost/compress/s2"
	ct "github.com/warpkit/warpkit/kv/compaction/compactiontest"
	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/sstable"
	"github.com/warpkit/warpkit/kv/vfs"
)

type kv struct {
	k base.InternalKey
	v []byte
}

// randomKeys makes n sorted entries: keys sharing a long prefix (so that K0
// ties are common), some empty or with 0x00/0xff bytes, several versions of
// some keys, some deletes, values of 0 B to a few KiB. seq hands out
// sequence numbers (unique across the tables of one job).
func randomKeys(rng *rand.Rand, n int, prefix string, seq *base.SeqNum) []kv {
	var out []kv
	for len(out) < n {
		var uk []byte
		switch rng.IntN(12) {
		case 0:
			uk = nil // the empty key
		case 1:
			uk = []byte{0xff, 0xff, byte(rng.IntN(4))}
		case 2:
			uk = append([]byte(prefix), 0, byte(rng.IntN(3)))
		default:
			// Past the common prefix and 8 more bytes, keys still collide
			// often: K0 ties decided by the bytes after it.
			uk = fmt.Appendf(nil, "%s%08d-tail-%d", prefix, rng.IntN(n), rng.IntN(3))
		}
		for v := rng.IntN(3); v >= 0; v-- {
			*seq++
			kind := base.KindSet
			var val []byte
			if rng.IntN(6) == 0 {
				kind = base.KindDelete
			} else {
				val = make([]byte, []int{0, 7, 100, 2000}[rng.IntN(4)])
				for j := range val {
					val[j] = byte(rng.Uint32())
				}
			}
			out = append(out, kv{base.MakeInternalKey(uk, *seq, kind), val})
		}
	}
	sort.Slice(out, func(i, j int) bool { return base.CompareInternal(out[i].k, out[j].k) < 0 })
	return out
}

// writeTable writes entries as a table file in fs and opens it.
func writeTable(t *testing.T, fs *vfs.MemFS, name string, es []kv, opts sstable.WriterOptions) (*sstable.Reader, vfs.File) {
	t.Helper()
	f, err := fs.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	w := sstable.NewWriter(f, opts)
	for _, e := range es {
		if err := w.Add(e.k, e.v); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	rf, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	r, err := sstable.NewReader(rf, sstable.ReaderOptions{FileName: name})
	if err != nil {
		t.Fatal(err)
	}
	return r, rf
}

var writerOptions = []sstable.WriterOptions{
	{BlockSize: 256, RestartInterval: 1, Compression: sstable.NoCompression},
	{BlockSize: 4096, RestartInterval: 16, Compression: sstable.SnappyCompression, BloomBitsPerKey: 10},
	{BlockSize: 1024, RestartInterval: 5, Compression: sstable.S2Compression, CompressionWorkers: 3},
}

// TestLoadMatchesReader: the input stage decodes exactly the entries the
// table's own iterator yields, values included.
func TestLoadMatchesReader(t *testing.T) {
	for round, opts := range writerOptions {
		rng := rand.New(rand.NewPCG(uint64(round), 9))
		fs := vfs.NewMem()
		var seq base.SeqNum
		var s inputSet
		var want []kv
		for tbl := range 3 {
			es := randomKeys(rng, 1+rng.IntN(2000), "user/", &seq)
			r, f := writeTable(t, fs, fmt.Sprintf("/%d.sst", tbl), es, opts)
			if err := s.addTable(r, f, fmt.Sprintf("%d.sst", tbl)); err != nil {
				t.Fatal(err)
			}
			s.newRun()
			it := r.NewIter()
			for ok := it.First(); ok; ok = it.Next() {
				want = append(want, kv{it.Key().Clone(), bytes.Clone(it.Value())})
			}
			if err := it.Error(); err != nil {
				t.Fatal(err)
			}
			it.Close()
		}
		if len(s.ents) != len(want) || len(s.runs) != 3 {
			t.Fatalf("round %d: %d entries in %d runs, the readers yield %d", round, len(s.ents), len(s.runs), len(want))
		}
		for i := range want {
			id := uint32(i)
			if base.CompareInternal(s.internalKey(id), want[i].k) != 0 || !bytes.Equal(s.value(id), want[i].v) {
				t.Fatalf("round %d: entry %d is %v (%d-byte value), the reader's %v (%d)", round, i, s.internalKey(id), len(s.value(id)), want[i].k, len(want[i].v))
			}
		}
	}
}

// TestMergeOrder: merging the runs yields every entry once, in
// base.CompareInternal order, whatever the number of runs and however the
// merge paths cut the pairs into pieces.
func TestMergeOrder(t *testing.T) {
	defer func(p int) { mergePiece = p }(mergePiece)
	for round := range 24 {
		mergePiece = []int{1 << 16, 1, 7, 100}[round%4]
		rng := rand.New(rand.NewPCG(uint64(round), 10))
		fs := vfs.NewMem()
		var seq base.SeqNum
		var s inputSet
		runs := 1 + round%7
		prefix := []string{"", "user/", "a-much-longer-common-prefix/"}[round%3]
		for r := range runs {
			// The last run is a deeper level: several disjoint tables.
			tables := 1
			if r == runs-1 && runs > 1 {
				tables = 3
			}
			es := randomKeys(rng, 1+rng.IntN(3000), prefix, &seq)
			per := (len(es) + tables - 1) / tables
			for tbl := 0; tbl*per < len(es); tbl++ {
				part := es[tbl*per : min((tbl+1)*per, len(es))]
				// Tables of one level must not share a user key.
				for len(part) > 0 && tbl > 0 && bytes.Equal(part[0].k.UserKey, es[tbl*per-1].k.UserKey) {
					part = part[1:]
				}
				if len(part) == 0 {
					continue
				}
				name := fmt.Sprintf("/%d-%d.sst", r, tbl)
				rd, f := writeTable(t, fs, name, part, writerOptions[round%len(writerOptions)])
				if err := s.addTable(rd, f, name); err != nil {
					t.Fatal(err)
				}
			}
			s.newRun()
		}
		if _, err := s.setK0(); err != nil {
			t.Fatal(err)
		}
		got := s.merge(&workspace{})
		if len(got) != len(s.ents) {
			t.Fatalf("round %d: %d ids for %d entries", round, len(got), len(s.ents))
		}
		seen := make([]bool, len(s.ents))
		for i, id := range got {
			if seen[id] {
				t.Fatalf("round %d: entry %d twice", round, id)
			}
			seen[id] = true
			if i > 0 && base.CompareInternal(s.internalKey(got[i-1]), s.internalKey(id)) >= 0 {
				t.Fatalf("round %d (%d runs): %v then %v", round, len(s.runs), s.internalKey(got[i-1]), s.internalKey(id))
			}
		}
	}
}

// TestLoadDamage: a damaged data block gives the corruption error reading
// the table gives, naming the file and the block.
func TestLoadDamage(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var seq base.SeqNum
	es := randomKeys(rng, 3000, "k/", &seq)
	fs := vfs.NewMem()
	r, f := writeTable(t, fs, "/ok.sst", es, writerOptions[1])
	blocks, err := r.DataBlocks()
	if err != nil || len(blocks) < 3 {
		t.Fatal(len(blocks), err)
	}
	size, _ := f.Size()
	data := make([]byte, size)
	if _, err := f.ReadAt(data, 0); err != nil {
		t.Fatal(err)
	}
	h := blocks[len(blocks)/2]
	data[h.Offset+h.Length/2] ^= 0x10
	bad, _ := fs.Create("/bad.sst")
	bad.Write(data)
	bad.Close()
	bf, _ := fs.Open("/bad.sst")
	br, err := sstable.NewReader(bf, sstable.ReaderOptions{FileName: "bad.sst"})
	if err != nil {
		t.Fatal(err) // the index and footer are intact
	}
	var s inputSet
	err = s.addTable(br, bf, "bad.sst")
	var ce *base.CorruptionError
	if !errors.As(err, &ce) || ce.File != "bad.sst" || ce.Offset != int64(h.Offset) {
		t.Fatalf("damaged block %d: %v", h.Offset, err)
	}
	it := br.NewIter()
	for ok := it.First(); ok; ok = it.Next() {
	}
	var ice *base.CorruptionError
	if !errors.As(it.Error(), &ice) || *ice != *ce {
		t.Fatalf("the input stage says %v, the reader %v", err, it.Error())
	}
}

// addTable appends a whole table's entries through readBlocks and
// decodeBlocks, its blocks
// cut into up to three pieces (as loadJob cuts them), so that the pieces
// join where one call would.
func (s *inputSet) addTable(r *sstable.Reader, f io.ReaderAt, name string) error {
	blocks, err := r.DataBlocks()
	if err != nil {
		return err
	}
	cuts := []int{0, len(blocks) / 3, 2 * len(blocks) / 3, len(blocks)}
	for i := 1; i < len(cuts); i++ {
		piece := blocks[cuts[i-1]:cuts[i]]
		n, err := regionLen(name, piece)
		if err != nil {
			return err
		}
		region := make([]byte, n)
		if _, err := readBlocks(r, f, name, piece, region); err != nil {
			return err
		}
		if err := s.decodeBlocks(r, name, piece, region, len(blocks)); err != nil {
			return err
		}
	}
	return nil
}

// FuzzLoadDamagedBlock: any bytes patched into a data block (stored
// uncompressed, Snappy or S2) whose checksum is then made to match — damage the checksum cannot catch — reach the input
// stage's decoder, which must give the entries the table's own iterator
// yields, or the same corruption error, and never read out of bounds.
func FuzzLoadDamagedBlock(f *testing.F) {
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f}, uint16(0), uint8(0))
	f.Add([]byte{0, 0, 0, 0}, uint16(0xffff), uint8(1))
	f.Add([]byte{0x80}, uint16(7), uint8(2))
	f.Add([]byte{1, 200, 3, 0x11}, uint16(40), uint8(0))
	f.Add([]byte{0x7f}, uint16(0), uint8(16))
	f.Add([]byte{0xfe, 0x01}, uint16(3), uint8(33))
	f.Fuzz(func(t *testing.T, patch []byte, at uint16, which uint8) {
		rng := rand.New(rand.NewPCG(7, 8))
		var seq base.SeqNum
		es := randomKeys(rng, 60, "k/", &seq)
		fs := vfs.NewMem()
		comp := sstable.Compression(which / 16 % 3) // stored compressed or not
		r, file := writeTable(t, fs, "/ok.sst", es, sstable.WriterOptions{BlockSize: 256, RestartInterval: 4, Compression: comp})
		blocks, err := r.DataBlocks()
		if err != nil || len(blocks) < 2 {
			t.Fatal(len(blocks), err)
		}
		size, _ := file.Size()
		data := make([]byte, size)
		if _, err := file.ReadAt(data, 0); err != nil {
			t.Fatal(err)
		}
		// Patch the block's contents (its length stays: the index still
		// points at it), then fix its trailer's checksum.
		h := blocks[int(which)%len(blocks)]
		body := data[h.Offset : h.Offset+h.Length]
		if len(patch) > len(body) {
			patch = patch[:len(body)]
		}
		copy(body[int(at)%(len(body)-len(patch)+1):], patch)
		trailer := data[h.Offset+h.Length : h.Offset+h.Length+sstable.BlockTrailerLen]
		binary.LittleEndian.PutUint32(trailer[1:], record.MaskCRC(record.ExtendCRC(record.CRC(body), trailer[:1])))
		vfs.WriteFile(fs, "/bad.sst", data)
		bf, err := fs.Open("/bad.sst")
		if err != nil {
			t.Fatal(err)
		}
		br, err := sstable.NewReader(bf, sstable.ReaderOptions{FileName: "bad.sst"})
		if err != nil {
			t.Fatal(err) // the index and footer are intact
		}
		var s inputSet
		loadErr := s.addTable(br, bf, "bad.sst")
		var want []kv
		it := br.NewIter()
		for ok := it.First(); ok; ok = it.Next() {
			want = append(want, kv{it.Key().Clone(), bytes.Clone(it.Value())})
		}
		iterErr := it.Error()
		it.Close()
		if loadErr != nil || iterErr != nil {
			var lce, ice *base.CorruptionError
			if !errors.As(loadErr, &lce) || !errors.As(iterErr, &ice) || *lce != *ice {
				t.Fatalf("the input stage says %v, the iterator %v", loadErr, iterErr)
			}
			return
		}
		if len(s.ents) != len(want) {
			t.Fatalf("the input stage decoded %d entries, the iterator %d", len(s.ents), len(want))
		}
		for i := range want {
			if base.CompareInternal(s.internalKey(uint32(i)), want[i].k) != 0 || !bytes.Equal(s.value(uint32(i)), want[i].v) {
				t.Fatalf("entry %d: %v=%q, the iterator %v=%q", i, s.internalKey(uint32(i)), s.value(uint32(i)), want[i].k, want[i].v)
			}
		}
	})
}

// newRun closes the run of the entries added since the last one (loadJob
// makes runs itself).
func (s *inputSet) newRun() {
	if start := s.runEnd(); start < len(s.ents) {
		s.runs = append(s.runs, run{start, len(s.ents)})
	}
}

// TestMergePlan: the device merge's rounds pair adjacent runs as merge
// does, carry an odd run over, and number each pair's tiles from where the
// previous pair's end.
func TestMergePlan(t *testing.T) {
	runs := []run{{0, 10}, {10, 10 + mergeTileItems}, {10 + mergeTileItems, 20 + mergeTileItems}}
	words, rounds := mergePlan(runs)
	want := []mergeRound{{first: 0, pairs: 2, tiles: 2 + 1}, {first: 2, pairs: 1, tiles: 2}}
	if !slices.Equal(rounds, want) {
		t.Fatalf("rounds %+v, want %+v", rounds, want)
	}
	pair := func(i int) (start, na, nb, tile0 uint64) {
		return words[3*i], words[3*i+1] & 0xffffffff, words[3*i+1] >> 32, words[3*i+2]
	}
	for i, w := range [][4]uint64{{0, 10, mergeTileItems, 0}, {10 + mergeTileItems, 10, 0, 2}, {0, 10 + mergeTileItems, 10, 0}} {
		if s, a, b, t0 := pair(i); [4]uint64{s, a, b, t0} != w {
			t.Fatalf("pair %d: %v, want %v", i, [4]uint64{s, a, b, t0}, w)
		}
	}
	if words, rounds := mergePlan(runs[:1]); len(words) != 0 || len(rounds) != 0 {
		t.Fatalf("one run: %v %v", words, rounds)
	}
}

// refBlock returns the input block ref names as its table's file stores it
// (with its trailer) and its contents as the table's Reader decodes them.
func refBlock(t *testing.T, e *ct.Env, ref blockRef) (stored, contents []byte) {
	t.Helper()
	h := ref.h
	stored = readFile(t, e, ref.p.t.f)[h.Offset : h.Offset+h.Length+sstable.BlockTrailerLen]
	contents, err := ref.p.t.r.DecodeBlock(h, stored, nil)
	if err != nil {
		t.Fatal(err)
	}
	return stored, contents
}

// TestLoadJobBlocks: the CUDA engine's host loading (no device needed) puts
// every input block's contents where the device will look for them — tables
// stored uncompressed read straight into the arena, the others decompressed
// into it — and lists for the device's checksum check exactly the blocks
// stored uncompressed, with the checksums their trailers record. A damaged
// uncompressed block is not noticed here (the device flags it); a
// compressed block in a table whose properties say "none" is refused.
func TestLoadJobBlocks(t *testing.T) {
	for _, c := range []sstable.Compression{sstable.NoCompression, sstable.SnappyCompression} {
		e, job := benchJobWith(t, 2, 100, c)
		ws := &workspace{}
		in, l, err := loadJobBlocks(context.Background(), job, ws, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		crcOf := map[uint32][3]uint32{}
		for i := 0; i < len(in.crcs); i += 4 {
			crcOf[in.crcs[i]] = [3]uint32{in.crcs[i+1], in.crcs[i+2], in.crcs[i+3]}
		}
		raws := 0
		for i, ref := range in.refs {
			h := ref.h
			stored, want := refBlock(t, e, ref)
			off, n := in.blocks[2*i], in.blocks[2*i+1]
			if !bytes.Equal(in.arena[off:off+n], want) {
				t.Fatalf("%v: block %d: the arena holds other bytes than its contents", c, i)
			}
			got, listed := crcOf[uint32(i)]
			isRaw := stored[h.Length] == byte(sstable.NoCompression)
			if listed != isRaw {
				t.Fatalf("%v: block %d (type %d): listed for the device's check: %v", c, i, stored[h.Length], listed)
			}
			if listed {
				raws++
				if wantCRC := record.ExtendCRC(record.CRC(want), []byte{0}); got != [3]uint32{off, n, wantCRC} {
					t.Fatalf("%v: block %d: check of %v, want %v", c, i, got, [3]uint32{off, n, wantCRC})
				}
			}
		}
		if c == sstable.NoCompression && raws != len(in.refs) {
			t.Fatalf("%d of %d blocks listed for the device's check", raws, len(in.refs))
		}
		if len(in.runEnds) != 5 || in.runEnds[4] != len(in.refs) { // four L0 runs and L1
			t.Fatalf("%v: runs end at %v of %d blocks", c, in.runEnds, len(in.refs))
		}
		l.close()
		ws.free()
	}

	// Damage in a table stored uncompressed: loaded as it is (its checksum
	// no longer matches); a compressed block there: refused.
	e, job := benchJobWith(t, 1, 100, sstable.NoCompression)
	f := job.Inputs[1].Files[0]
	name, data, blocks := tableData(t, e, f)
	h := blocks[1]
	data[h.Offset+3] ^= 0x10
	fileOf(t, e.FS(), name, data)
	ws := &workspace{}
	in, l, err := loadJobBlocks(context.Background(), job, ws, nil, nil, nil)
	if err != nil {
		t.Fatalf("damage the device is to find: %v", err)
	}
	bad := 0
	for i := 0; i < len(in.crcs); i += 4 {
		off, n, want := in.crcs[i+1], in.crcs[i+2], in.crcs[i+3]
		if record.ExtendCRC(record.CRC(in.arena[off:off+n]), []byte{0}) != want {
			bad++
		}
	}
	l.close()
	if bad != 1 {
		t.Fatalf("%d blocks fail their checksums, want 1", bad)
	}
	data[h.Offset+3] ^= 0x10
	data[h.Offset+h.Length] = byte(sstable.SnappyCompression)
	fixChecksum(data, h)
	fileOf(t, e.FS(), name, data)
	_, _, err = loadJobBlocks(context.Background(), job, ws, nil, nil, nil)
	var ce *base.CorruptionError
	if !errors.Is(err, errIrregularBlock) && !errors.As(err, &ce) {
		t.Fatalf("a compressed block in an uncompressed table: %v", err)
	}
	ws.free()
}

// TestLoadJobBlocksInflate: with Snappy tables the loader (no device
// needed: inflateFrom says yes) places every block by its header and lists
// it for inflate_blocks — its stored bytes in the regions, its type, its
// place and length in the arena, its trailer's checksum — such that
// decoding the listed bytes as the device does gives DecodeBlock's
// contents at the listed place; the arena's other places (none here) stay
// the host's.
func TestLoadJobBlocksInflate(t *testing.T) {
	defer func(f func(*workspace, []byte) bool) { inflateFrom = f }(inflateFrom)
	inflateFrom = func(*workspace, []byte) bool { return true }
	for _, valueLen := range []int{16, 700} {
		e, job := benchJobWith(t, 2, valueLen, sstable.SnappyCompression)
		ws := &workspace{}
		in, l, err := loadJobBlocks(context.Background(), job, ws, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(in.inflate) != 7*len(in.refs) || len(in.crcs) != 0 {
			t.Fatalf("%d inflate records and %d checks for %d blocks", len(in.inflate)/7, len(in.crcs)/4, len(in.refs))
		}
		compressed := 0
		for r := 0; r < len(in.inflate); r += 7 {
			b, src, n, typ, dst, dlen, want := in.inflate[r], in.inflate[r+1], in.inflate[r+2], in.inflate[r+3], in.inflate[r+4], in.inflate[r+5], in.inflate[r+6]
			h := in.refs[b].h
			stored, contents := refBlock(t, e, in.refs[b])
			if !bytes.Equal(in.regions[src:src+n], stored[:h.Length]) || typ != uint32(stored[h.Length]) {
				t.Fatalf("block %d: the listed stored bytes or type are not the block's", b)
			}
			if off, ln := in.blocks[2*b], in.blocks[2*b+1]; off != dst || ln != dlen || int(dlen) != len(contents) {
				t.Fatalf("block %d: listed at %d+%d, placed at %d+%d, contents %d bytes", b, dst, dlen, off, ln, len(contents))
			}
			if got := record.ExtendCRC(record.CRC(in.regions[src:src+n]), []byte{byte(typ)}); got != want {
				t.Fatalf("block %d: checksum %#x listed, %#x computed", b, want, got)
			}
			if typ == uint32(sstable.SnappyCompression) {
				compressed++
				got, err := s2.Decode(nil, in.regions[src:src+n]) // (S2's decoder reads Snappy)
				if err != nil || !bytes.Equal(got, contents) {
					t.Fatalf("block %d: the listed bytes do not decode to its contents (%v)", b, err)
				}
			}
		}
		if compressed == 0 {
			t.Fatal("no compressed block listed")
		}
		// The places tile the arena: in order, apart, inside it.
		var places [][2]uint32
		for r := 0; r < len(in.inflate); r += 7 {
			places = append(places, [2]uint32{in.inflate[r+4], in.inflate[r+5]})
		}
		slices.SortFunc(places, func(a, b [2]uint32) int { return int(a[0]) - int(b[0]) })
		end := uint32(0)
		for _, pl := range places {
			if pl[0] < end {
				t.Fatalf("place %d+%d overlaps the one before (ending at %d)", pl[0], pl[1], end)
			}
			end = pl[0] + pl[1]
		}
		if int(end) != len(in.arena) {
			t.Fatalf("places end at %d, the arena at %d", end, len(in.arena))
		}
		l.close()
		ws.free()
	}
}
