package batchrepr

import (
	"bytes"
	"testing"

	"github.com/warpkit/warpkit/kv/internal/base"
)

func TestRoundTrip(t *testing.T) {
	b := make([]byte, HeaderLen)
	type e struct {
		k    base.Kind
		a, b string
	}
	want := []e{{base.KindSet, "a", "1"}, {base.KindDelete, "b", ""}, {base.KindRangeDelete, "c", "f"}, {base.KindSet, "", string(make([]byte, 300))}}
	for _, x := range want {
		b = AppendEntry(b, x.k, []byte(x.a), []byte(x.b))
	}
	SetSeqNum(b, 100)
	SetCount(b, uint32(len(want)))
	r, err := NewReader(b)
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range want {
		k, key, val, seq, ok, err := r.Next()
		if !ok || err != nil || k != x.k || string(key) != x.a || !bytes.Equal(val, []byte(x.b)) && x.k != base.KindDelete || seq != base.SeqNum(100+i) {
			t.Fatalf("entry %d: %v %q %q %d %v %v", i, k, key, val, seq, ok, err)
		}
	}
	if _, _, _, _, ok, err := r.Next(); ok || err != nil {
		t.Fatalf("end: %v %v", ok, err)
	}
	// Count too high, count too low, truncated.
	for _, bad := range [][]byte{b[:len(b)-1], b[:5]} {
		if r, err := NewReader(bad); err == nil {
			var err error
			for ok := true; ok && err == nil; _, _, _, _, ok, err = r.Next() {
			}
			if err == nil {
				t.Fatalf("malformed batch of %d bytes accepted", len(bad))
			}
		}
	}
	SetCount(b, 2)
	r, _ = NewReader(b)
	r.Next()
	r.Next()
	if _, _, _, _, _, err := r.Next(); err == nil {
		t.Fatal("trailing entries beyond count accepted")
	}
}
