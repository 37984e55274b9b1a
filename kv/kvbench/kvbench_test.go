package kvbench

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/warpkit/warpkit/kv"
	"github.com/warpkit/warpkit/kv/vfs"
)

func TestKeyFormat(t *testing.T) {
	if got := string(Key(nil, 42)); got != "0000000000000042" {
		t.Fatal(got)
	}
	if len(Key(nil, math.MaxUint32)) != KeyLen {
		t.Fatal("key length")
	}
}

func TestZipfianSkew(t *testing.T) {
	z := newZipfian(1000, 0.99)
	rng := rand.New(rand.NewPCG(1, 1))
	counts := make([]int, 1000)
	for range 100000 {
		counts[z.next(rng)]++
	}
	if counts[0] < 5*counts[100] || counts[0] < 10000 {
		t.Fatalf("not skewed: rank 0 %d, rank 100 %d", counts[0], counts[100])
	}
	for range 1000 {
		if s := z.scrambled(rng); s >= 1000 {
			t.Fatalf("scrambled out of range: %d", s)
		}
	}
	// The tail approximation agrees with the exact sum.
	if a, b := zeta(2_000_000, 0.99), zeta(1_999_999, 0.99); a <= b {
		t.Fatalf("zeta not increasing: %v %v", a, b)
	}
}

func TestHistogram(t *testing.T) {
	h := NewHistogram()
	for i := 1; i <= 1000; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	if p := h.Quantile(0.5); p < 480*time.Microsecond || p > 520*time.Microsecond {
		t.Fatalf("p50 %v", p)
	}
	if p := h.Quantile(0.99); p < 960*time.Microsecond || p > 1000*time.Microsecond {
		t.Fatalf("p99 %v", p)
	}
	if h.Max() != time.Millisecond || h.Count() != 1000 {
		t.Fatal("max/count")
	}
}

func TestParseValueSize(t *testing.T) {
	for _, tc := range []struct {
		in     string
		lo, hi int
		ok     bool
	}{{"100", 100, 100, true}, {"32..4096", 32, 4096, true}, {"0", 0, 0, false}, {"5..1", 0, 0, false}, {"x", 0, 0, false},
		{"2097152", 2 << 20, 2 << 20, true}, {"67108864", MaxValueSize, MaxValueSize, true},
		{"67108865", 0, 0, false}, {"1..67108865", 0, 0, false},
		{"100x", 0, 0, false}, {"32..4096b", 0, 0, false}, {"1 2", 0, 0, false}, {" 64 .. 128 ", 64, 128, true}, {"..8", 0, 0, false}, {"-1..8", 0, 0, false}} {
		lo, hi, err := ParseValueSize(tc.in)
		if (err == nil) != tc.ok || (tc.ok && (lo != tc.lo || hi != tc.hi)) {
			t.Errorf("%q: %d %d %v", tc.in, lo, hi, err)
		}
	}
}

// testStores make the stores the tests run workloads on: the kv store, in
// memory, and the baseline.
var testStores = []func(t *testing.T) Store{
	func(t *testing.T) Store {
		db, err := kv.Open("/db", &kv.Options{FS: vfs.NewMem(), MemTableSize: 256 << 10})
		if err != nil {
			t.Fatal(err)
		}
		return NewKVStore(db, false)
	},
	func(*testing.T) Store { return NewMemStore() },
}

// TestAllWorkloads runs every workload on the kv store and on the baseline,
// small, and checks the read workloads find what the fills wrote.
func TestAllWorkloads(t *testing.T) {
	for _, mk := range testStores {
		s := mk(t)
		r := NewRunner(s, Config{Num: 5000, ValueMin: 10, ValueMax: 200, Threads: 2})
		for _, w := range Workloads {
			res, err := r.Run(context.Background(), w)
			if err != nil {
				t.Fatalf("%s: %v", s.Name(), err)
			}
			if res.Ops == 0 || res.Latency.Count() == 0 && w != "readseq" {
				t.Fatalf("%s %s: no operations", s.Name(), w)
			}
			switch w {
			case "readrandom", "ycsb-c":
				if res.Found != res.Ops {
					t.Fatalf("%s %s: found %d of %d", s.Name(), w, res.Found, res.Ops)
				}
			case "readseq":
				if res.Found < 5000 {
					t.Fatalf("%s readseq: %d keys", s.Name(), res.Found)
				}
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestValuesAboveOneMiB: values larger than the 1 MiB value pool once sliced
// past its end and panicked (warp kv bench --value 2000000).
func TestValuesAboveOneMiB(t *testing.T) {
	for _, n := range []int{1<<20 - 1, 1 << 20, 1<<20 + 1, 3<<20 + 5} {
		v := newValues(1, n)
		for range 5 {
			if got := len(v.next(n)); got != n {
				t.Fatalf("value of %d bytes: got %d", n, got)
			}
		}
	}
	const lo, hi = 1<<20 + 1, 2<<20 + 3
	for _, mk := range testStores {
		s := mk(t)
		r := NewRunner(s, Config{Num: 6, ValueMin: lo, ValueMax: hi, Threads: 2})
		for _, w := range []string{"fillrandom", "fillseq", "readrandom"} {
			res, err := r.Run(context.Background(), w)
			if err != nil {
				t.Fatalf("%s %s: %v", s.Name(), w, err)
			}
			if w == "readrandom" && (res.Found != res.Ops || res.Bytes < res.Ops*(KeyLen+lo)) {
				t.Fatalf("%s readrandom: found %d of %d, %d bytes", s.Name(), res.Found, res.Ops, res.Bytes)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSettleAfter: after a fill, SettleAfter waits for the store's
// compactions and carries the counters on to that point.
func TestSettleAfter(t *testing.T) {
	db, err := kv.Open("/db", &kv.Options{FS: vfs.NewMem(), MemTableSize: 64 << 10, LBaseMaxBytes: 64 << 10, TargetFileSize: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	s := NewKVStore(db, false)
	defer s.Close()
	r := NewRunner(s, Config{Num: 20000, ValueMin: 100, ValueMax: 100, Threads: 4})
	res, err := r.Run(context.Background(), "fillrandom")
	if err != nil {
		t.Fatal(err)
	}
	if res.SettledDiff != nil {
		t.Fatal("SettledDiff set before SettleAfter")
	}
	if err := r.SettleAfter(res); err != nil {
		t.Fatal(err)
	}
	now := s.Stats()
	d := res.SettledDiff
	if d == nil || d.WriteAmp != now.WriteAmp || d.CompactionBytes < res.StatsDiff.CompactionBytes ||
		d.CompactionBytes-res.StatsDiff.CompactionBytes != now.CompactionBytes-res.Stats.CompactionBytes {
		t.Fatalf("settled %+v, at the end of the fill %+v, now %+v", d, res.StatsDiff, now)
	}
	m := db.Metrics()
	for l := range m.Levels[:len(m.Levels)-1] {
		if m.Levels[l].Score >= 1 {
			t.Fatalf("L%d still due after SettleAfter: %v", l, m.String())
		}
	}
}
