package kvbench

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/warpkit/warpkit/kv/manifest"
	"github.com/warpkit/warpkit/kv/sstable"
	"github.com/warpkit/warpkit/kv/vfs"
)

// smallJob is a job of a few thousand entries.
var smallJob = CompactJob{L0Tables: 3, L0Bytes: 32 << 10, L1Bytes: 256 << 10, TableSize: 64 << 10,
	KeyLen: 16, ValueLen: 64, Compression: sstable.SnappyCompression, Seed: 1}

// jobKeys builds sh and returns each input table's user keys, L0's tables
// then L1's, and the tables' bytes (concatenated, in that order).
func jobKeys(t *testing.T, sh CompactJob) (l0, l1 [][][]byte, raw []byte) {
	t.Helper()
	e := NewCompactEnv(vfs.NewMem(), "/")
	t.Cleanup(func() { e.Remove() })
	job, err := e.Build(sh)
	if err != nil {
		t.Fatal(err)
	}
	env := job.Env
	read := func(files []*manifest.FileMetadata) [][][]byte {
		var tables [][][]byte
		for _, m := range files {
			r, release, err := env.OpenTable(m)
			if err != nil {
				t.Fatal(err)
			}
			var keys [][]byte
			it := r.NewIter()
			for ok := it.First(); ok; ok = it.Next() {
				keys = append(keys, bytes.Clone(it.Key().UserKey))
			}
			if err := it.Error(); err != nil {
				t.Fatal(err)
			}
			it.Close()
			release()
			if !bytes.Equal(m.Smallest.UserKey, keys[0]) || !bytes.Equal(m.Largest.UserKey, keys[len(keys)-1]) {
				t.Fatalf("table %v: bounds %q..%q, keys %q..%q", m.FileNum, m.Smallest.UserKey, m.Largest.UserKey, keys[0], keys[len(keys)-1])
			}
			tables = append(tables, keys)
			f, err := env.OpenTableFile(m)
			if err != nil {
				t.Fatal(err)
			}
			b := make([]byte, m.Size)
			if _, err := f.ReadAt(b, 0); err != nil {
				t.Fatal(err)
			}
			f.Close()
			raw = append(raw, b...)
		}
		return tables
	}
	if len(job.Inputs) != 2 || job.Inputs[0].Level != 0 || job.Inputs[1].Level != 1 {
		t.Fatalf("inputs %+v", job.Inputs)
	}
	return read(job.Inputs[0].Files), read(job.Inputs[1].Files), raw
}

// keyNumber is the number a key starts with (its first digits digits).
func keyNumber(t *testing.T, k []byte, digits int) int {
	t.Helper()
	n, err := strconv.Atoi(string(k[:digits]))
	if err != nil {
		t.Fatalf("key %q: %v", k, err)
	}
	return n
}

// TestCompactJobKeyRange: with KeyLenMax, every table's keys are strictly
// increasing, of lengths in [KeyLen, KeyLenMax] (both ends drawn), their
// numbers zero-padded to KeyLen digits, and a number has the same bytes in
// every table (L0's overwrite L1's).
func TestCompactJobKeyRange(t *testing.T) {
	sh := smallJob
	sh.KeyLen, sh.KeyLenMax = 8, 64
	l0, l1, _ := jobKeys(t, sh)
	byNumber := map[int][]byte{}
	lens := map[int]int{}
	overlaps, total := 0, 0
	check := func(level int, tables [][][]byte) {
		for ti, keys := range tables {
			for i, k := range keys {
				total++
				if len(k) < sh.KeyLen || len(k) > sh.KeyLenMax {
					t.Fatalf("L%d table %d: key %q of %d bytes, want %d..%d", level, ti, k, len(k), sh.KeyLen, sh.KeyLenMax)
				}
				lens[len(k)]++
				if i > 0 && bytes.Compare(keys[i-1], k) >= 0 {
					t.Fatalf("L%d table %d: key %q after %q", level, ti, k, keys[i-1])
				}
				if strings.Trim(string(k[sh.KeyLen:]), "abcdefghijklmnopqrstuvwxyz") != "" {
					t.Fatalf("key %q: filler not letters", k)
				}
				n := keyNumber(t, k, sh.KeyLen)
				if level == 1 && n%4 != 0 {
					t.Fatalf("L1 key %q: not a multiple of 4", k)
				}
				if prev, ok := byNumber[n]; ok {
					overlaps++
					if !bytes.Equal(prev, k) {
						t.Fatalf("number %d: keys %q and %q", n, prev, k)
					}
				}
				byNumber[n] = k
			}
		}
	}
	check(1, l1)
	// L1's tables are disjoint and in order.
	for i := 1; i < len(l1); i++ {
		prev := l1[i-1]
		if bytes.Compare(prev[len(prev)-1], l1[i][0]) >= 0 {
			t.Fatalf("L1 tables %d and %d overlap", i-1, i)
		}
	}
	check(0, l0)
	if overlaps == 0 {
		t.Fatal("no L0 key overwrites an L1 key or another L0 table's")
	}
	if lens[sh.KeyLen] == 0 || lens[sh.KeyLenMax] == 0 {
		t.Errorf("lengths %d and %d: %d and %d keys, want both drawn", sh.KeyLen, sh.KeyLenMax, lens[sh.KeyLen], lens[sh.KeyLenMax])
	}
	if len(lens) < (sh.KeyLenMax-sh.KeyLen+1)*3/4 {
		t.Errorf("%d distinct lengths among %d keys, want most of %d..%d", len(lens), total, sh.KeyLen, sh.KeyLenMax)
	}
	// The mean length sizes the tables: about as many entries as a fixed
	// job of that length.
	fixed := smallJob
	fixed.KeyLen = (sh.KeyLen + sh.KeyLenMax) / 2
	f0, f1, _ := jobKeys(t, fixed)
	if count(l1) != count(f1) || count(l0) != count(f0) {
		t.Errorf("range job: %d L1 / %d L0 keys, fixed job of the mean length: %d / %d", count(l1), count(l0), count(f1), count(f0))
	}
	// Deterministic: the same job again has the same bytes.
	_, _, a := jobKeys(t, sh)
	_, _, b := jobKeys(t, sh)
	if !bytes.Equal(a, b) {
		t.Error("two builds of one range job differ")
	}
}

func count(tables [][][]byte) (n int) {
	for _, keys := range tables {
		n += len(keys)
	}
	return n
}

// TestCompactJobFixedKeys: without KeyLenMax (or with it at KeyLen) the keys
// are db_bench's, the zero-padded numbers, every fourth one in L1, as before
// the field; the two spellings build the same bytes.
func TestCompactJobFixedKeys(t *testing.T) {
	for _, keyLen := range []int{8, 16, 64} {
		sh := smallJob
		sh.KeyLen = keyLen
		l0, l1, raw := jobKeys(t, sh)
		next := 0
		for _, keys := range l1 {
			for _, k := range keys {
				if want := fmt.Sprintf("%0*d", keyLen, next); string(k) != want {
					t.Fatalf("--key %d: L1 key %q, want %q", keyLen, k, want)
				}
				next += 4
			}
		}
		n1 := sh.L1Bytes / (keyLen + 8 + sh.ValueLen)
		if next != 4*n1 {
			t.Fatalf("--key %d: %d L1 keys, want %d", keyLen, next/4, n1)
		}
		for _, keys := range l0 {
			for i, k := range keys {
				n := keyNumber(t, k, len(k))
				if want := fmt.Sprintf("%0*d", keyLen, n); string(k) != want || n >= 4*n1 {
					t.Fatalf("--key %d: L0 key %q, want %q below %d", keyLen, k, want, 4*n1)
				}
				if i > 0 && bytes.Compare(keys[i-1], k) >= 0 {
					t.Fatalf("--key %d: L0 key %q after %q", keyLen, k, keys[i-1])
				}
			}
		}
		sh.KeyLenMax = keyLen
		if _, _, same := jobKeys(t, sh); !bytes.Equal(raw, same) {
			t.Errorf("--key %d: KeyLenMax %d builds other bytes than 0", keyLen, keyLen)
		}
	}
}

// TestCompactJobKeyErrors: a job whose keys KeyLen digits cannot number, or
// whose KeyLenMax is below KeyLen, fails to build.
func TestCompactJobKeyErrors(t *testing.T) {
	for _, sh := range []CompactJob{
		{L0Tables: 1, L0Bytes: 4 << 10, L1Bytes: 256 << 10, TableSize: 64 << 10, KeyLen: 3, ValueLen: 8},                // 4*n1 > 999
		{L0Tables: 1, L0Bytes: 4 << 10, L1Bytes: 256 << 10, TableSize: 64 << 10, KeyLen: 3, KeyLenMax: 40, ValueLen: 8}, // the same, shortest 3
		{L0Tables: 1, L0Bytes: 4 << 10, L1Bytes: 256 << 10, TableSize: 64 << 10, KeyLen: 16, KeyLenMax: 8, ValueLen: 8},
		{L0Tables: 1, L0Bytes: 4 << 10, L1Bytes: 256 << 10, TableSize: 64 << 10, KeyLen: 0, ValueLen: 8},
	} {
		e := NewCompactEnv(vfs.NewMem(), "/")
		if _, err := e.Build(sh); err == nil {
			t.Errorf("KeyLen %d, KeyLenMax %d: built", sh.KeyLen, sh.KeyLenMax)
		} else {
			t.Logf("KeyLen %d, KeyLenMax %d: %v", sh.KeyLen, sh.KeyLenMax, err)
		}
		e.Remove()
	}
}
