package sstable

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/warpkit/warpkit/kv/internal/rangedel"
)

// TestReadMetadata: reading a table back gives the metadata its writer
// returned, for tables of points, of range tombstones, and of both; a
// flipped byte is a corruption error.
func TestReadMetadata(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	entries := randomTable(rng, 2000)
	spans := rangedel.Fragment([]rangedel.Tombstone{
		{Start: []byte("a"), End: []byte("user00000200"), Seq: 5},
		{Start: []byte("user00000150"), End: []byte("zzz"), Seq: 2000000},
	})
	for _, tc := range []struct {
		name    string
		entries []kv
		spans   []rangedel.Span
	}{
		{"points", entries, nil},
		{"tombstones", nil, spans},
		{"both", entries, spans},
		{"one key", entries[:1], nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, want := build(t, tc.entries, tc.spans, WriterOptions{BloomBitsPerKey: 10, Compression: SnappyCompression, BlockSize: 512})
			got, err := ReadMetadata(open(t, data, nil))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("read back\n%+v\nwritten\n%+v", got, want)
			}
			bad := append([]byte(nil), data...)
			bad[len(bad)/3] ^= 0x10
			if r, err := NewReader(memFile{bytes.NewReader(bad)}, ReaderOptions{FileName: "t.sst"}); err == nil {
				if _, err := ReadMetadata(r); err == nil {
					t.Fatal("flipped byte not detected")
				}
			}
		})
	}
}
