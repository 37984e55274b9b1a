package sstable

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/internal/rangedel"
)

// FuzzBlockDecoder decodes arbitrary bytes as a block: no panic, no endless
// loop, errors are corruption errors. (Restart points that disagree with the
// entry chain are not detected without walking the whole block, which the
// read path does not do: checksums guard against damage; this guards against
// crashes on whatever passes them.) Blocks made by blockWriter iterate the
// same both ways.
func FuzzBlockDecoder(f *testing.F) {
	var w blockWriter
	w.restartInterval = 4
	for i := range 20 {
		w.add(base.MakeInternalKey([]byte{'k', byte(i / 3), byte(i)}, base.SeqNum(100-i), base.KindSet).Append(nil), []byte{byte(i)})
	}
	f.Add(append([]byte(nil), w.finish()...), true)
	w.reset()
	w.add([]byte("name"), []byte("value"))
	f.Add(append([]byte(nil), w.finish()...), false)
	f.Add([]byte{0, 0, 0, 0}, true)
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0}, false)
	f.Fuzz(func(t *testing.T, data []byte, internal bool) {
		var it blockIter
		if !it.init(data, internal, "fuzz", 0) {
			if !errors.Is(it.err, base.ErrCorruption) {
				t.Fatalf("init error %v", it.err)
			}
			return
		}
		var fwd [][]byte
		for ok := it.first(); ok; ok = it.next() {
			fwd = append(fwd, append([]byte(nil), it.key...))
			if len(fwd) > len(data) {
				t.Fatal("more entries than bytes")
			}
		}
		if it.err != nil {
			if !errors.Is(it.err, base.ErrCorruption) {
				t.Fatalf("error %v", it.err)
			}
			return
		}
		var bwd [][]byte
		for ok := it.last(); ok; ok = it.prev() {
			bwd = append(bwd, append([]byte(nil), it.key...))
			if len(bwd) > len(data) {
				t.Fatal("backward iteration does not end")
			}
		}
		if it.err != nil {
			// Restart points that do not match the entry chain are only
			// visible walking backwards.
			if !errors.Is(it.err, base.ErrCorruption) {
				t.Fatalf("error %v", it.err)
			}
			return
		}
		if wellFormed(data, internal) {
			if len(bwd) != len(fwd) {
				t.Fatalf("forward %d entries, backward %d", len(fwd), len(bwd))
			}
			for i := range fwd {
				if !bytes.Equal(fwd[i], bwd[len(bwd)-1-i]) {
					t.Fatalf("entry %d differs between directions", i)
				}
			}
		}
		for _, k := range fwd {
			if len(k) >= 8 || !internal {
				uk := k
				if internal {
					uk = k[:len(k)-8]
				}
				it.seekGE(uk, base.TrailerSeek)
				it.seekLT(uk, base.TrailerSeek)
			}
		}
	})
}

func fuzzSeedTable(f *testing.F, n int, c Compression, spans []rangedel.Span) []byte {
	rng := rand.New(rand.NewPCG(uint64(n), 1))
	entries := randomTable(rng, n)
	for i := range entries {
		if len(entries[i].v) > 64 {
			entries[i].v = entries[i].v[:64]
		}
	}
	data, _ := build(f, entries, spans, WriterOptions{BloomBitsPerKey: 10, Compression: c, BlockSize: 256})
	return data
}

// FuzzReader opens arbitrary bytes as a table and reads everything: no
// panic, no hang, every error a corruption error.
func FuzzReader(f *testing.F) {
	f.Add(fuzzSeedTable(f, 5, NoCompression, nil))
	f.Add(fuzzSeedTable(f, 40, SnappyCompression, nil))
	f.Add(fuzzSeedTable(f, 20, S2Compression, rangedel.Fragment([]rangedel.Tombstone{{Start: []byte("a"), End: []byte("user5"), Seq: 7}})))
	f.Add(make([]byte, footerLen))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewReader(memFile{bytes.NewReader(data)}, ReaderOptions{FileName: "fuzz.sst"})
		if err != nil {
			if !errors.Is(err, base.ErrCorruption) {
				t.Fatalf("open error %v", err)
			}
			return
		}
		it := r.NewIter()
		n := 0
		for ok := it.First(); ok; ok = it.Next() {
			if n++; n > len(data) {
				t.Fatal("more entries than bytes")
			}
			r.Get(it.Key().UserKey, base.SeqNumMax)
		}
		for ok := it.Last(); ok; ok = it.Prev() {
			if n--; n < -len(data) {
				t.Fatal("backward iteration does not end")
			}
		}
		if err := it.Error(); err != nil && !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("iteration error %v", err)
		}
		if err := r.ValidateChecksums(); err != nil && !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("validate error %v", err)
		}
	})
}

// wellFormed re-encodes a block's entries with blockWriter, using the
// block's own restart spacing, and reports whether that reproduces it.
func wellFormed(data []byte, internal bool) bool {
	var it blockIter
	if !it.init(data, internal, "", 0) || it.numRestarts < 1 {
		return false
	}
	interval := 0
	for ok := it.first(); ok; ok = it.next() {
		if interval++; it.numRestarts > 1 && it.nextOffset == it.restart(1) {
			break
		}
	}
	var w blockWriter
	w.restartInterval = max(interval, 1)
	for ok := it.first(); ok; ok = it.next() {
		w.add(append([]byte(nil), it.key...), append([]byte(nil), it.val...))
	}
	return it.err == nil && bytes.Equal(w.finish(), data)
}
