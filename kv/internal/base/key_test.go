package base

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"sort"
	"testing"
)

func TestInternalKeyOrder(t *testing.T) {
	keys := []InternalKey{
		MakeInternalKey([]byte("a"), 5, KindSet),
		MakeInternalKey([]byte("a"), 3, KindSet),
		MakeInternalKey([]byte("a"), 3, KindDelete),
		MakeInternalKey([]byte("b"), 9, KindSet),
		MakeSentinel([]byte("c")),
		MakeInternalKey([]byte("c"), SeqNumMax-1, KindSet),
		MakeInternalKey([]byte("c"), 1, KindSet),
	}
	for i := 1; i < len(keys); i++ {
		if CompareInternal(keys[i-1], keys[i]) >= 0 {
			t.Errorf("%v should sort before %v", keys[i-1], keys[i])
		}
	}
	seek := InternalKey{UserKey: []byte("c"), Trailer: TrailerSeek}
	if CompareInternal(seek, keys[4]) > 0 {
		t.Error("seek key must not sort after the sentinel of the same user key")
	}
	if !keys[4].IsExclusiveSentinel() || keys[5].IsExclusiveSentinel() {
		t.Error("IsExclusiveSentinel")
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	k := MakeInternalKey([]byte("hello"), 123456, KindRangeDelete)
	buf := make([]byte, k.Size())
	k.Encode(buf)
	d, ok := DecodeInternalKey(buf)
	if !ok || !bytes.Equal(d.UserKey, k.UserKey) || d.Trailer != k.Trailer {
		t.Fatalf("round trip: %v -> %v", k, d)
	}
	if d.SeqNum() != 123456 || d.Kind() != KindRangeDelete {
		t.Fatalf("fields: %d %v", d.SeqNum(), d.Kind())
	}
	if _, ok := DecodeInternalKey([]byte("short")); ok {
		t.Fatal("short key decoded")
	}
}

func TestSeparatorAndSuccessor(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	randKey := func() []byte {
		b := make([]byte, rng.IntN(6))
		for i := range b {
			b[i] = []byte{0, 1, 'a', 'b', 0xfe, 0xff}[rng.IntN(6)]
		}
		return b
	}
	for range 20000 {
		a, b := randKey(), randKey()
		switch c := bytes.Compare(a, b); {
		case c == 0:
			continue
		case c > 0:
			a, b = b, a
		}
		s := Separator(nil, a, b)
		if bytes.Compare(a, s) > 0 || bytes.Compare(s, b) >= 0 {
			t.Fatalf("Separator(%q,%q)=%q", a, b, s)
		}
		if u := Successor(nil, a); bytes.Compare(u, a) < 0 {
			t.Fatalf("Successor(%q)=%q", a, u)
		}
	}
	if got := Separator(nil, []byte("abc1xyz"), []byte("abc5")); string(got) != "abc2" {
		t.Errorf("Separator shortening: %q", got)
	}
}

func TestFilenames(t *testing.T) {
	for _, tc := range []struct {
		t FileType
		n FileNum
	}{{FileTypeLog, 7}, {FileTypeTable, 1234567}, {FileTypeManifest, 2}, {FileTypeCurrent, 0}, {FileTypeLock, 0}, {FileTypeTemp, 9}} {
		name := MakeFilename(tc.t, tc.n)
		ft, fn, ok := ParseFilename(name)
		if !ok || ft != tc.t || fn != tc.n {
			t.Errorf("%q parsed as %v %v %v", name, ft, fn, ok)
		}
	}
	for _, bad := range []string{"", "x.sst", "12.txt", "MANIFEST-x", ".log",
		"5.sst", "2024.log", "0000001.sst", "MANIFEST-1", "+00001.log", "000001.sst.bak", "1234567.dbtmp0"} {
		if _, _, ok := ParseFilename(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
	for _, trace := range []string{"CURRENT", "LOCK", "MANIFEST-x", "OPTIONS-000003", "2024.log", "5.sst", "000005.ldb", "a.dbtmp"} {
		if !IsStoreTrace(trace) {
			t.Errorf("%q is not a store trace", trace)
		}
	}
	for _, other := range []string{"notes.txt", "lost", "log", "sst.txt"} {
		if IsStoreTrace(other) {
			t.Errorf("%q is a store trace", other)
		}
	}
	names := []string{MakeFilename(FileTypeTable, 10), MakeFilename(FileTypeTable, 9)}
	sort.Strings(names)
	if names[0] != "000009.sst" {
		t.Errorf("zero padding: %v", names)
	}
}

func TestCorruptionError(t *testing.T) {
	err := Corruptf("000003.log", 4096, "checksum mismatch")
	if !errors.Is(err, ErrCorruption) {
		t.Fatal("errors.Is")
	}
	if got := err.Error(); got != "kv: corruption in 000003.log at offset 4096: checksum mismatch" {
		t.Fatal(got)
	}
	err2 := WithFile(Corruptf("", 10, "x"), "a.sst")
	var ce *CorruptionError
	if !errors.As(err2, &ce) || ce.File != "a.sst" || ce.Offset != 10 {
		t.Fatal(err2)
	}
}
