package record

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/warpkit/warpkit/kv/internal/base"
)

// randomRecords returns records whose sizes hit the interesting cases: empty,
// tiny, exactly filling a block, spanning several blocks.
func randomRecords(rng *rand.Rand, n int) [][]byte {
	sizes := []int{0, 1, 100, BlockSize - HeaderSize, BlockSize - 2*HeaderSize, BlockSize, 3*BlockSize + 5}
	recs := make([][]byte, n)
	for i := range recs {
		var sz int
		if rng.IntN(4) == 0 {
			sz = sizes[rng.IntN(len(sizes))]
		} else {
			sz = rng.IntN(2000)
		}
		r := make([]byte, sz)
		for j := range r {
			r[j] = byte(rng.Uint32())
		}
		recs[i] = r
	}
	return recs
}

func writeAll(t testing.TB, recs [][]byte) []byte {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for _, r := range recs {
		if _, err := w.WriteRecord(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if w.Size() != int64(buf.Len()) {
		t.Fatalf("Size %d, wrote %d", w.Size(), buf.Len())
	}
	return buf.Bytes()
}

func readAll(data []byte) ([][]byte, error) {
	r := NewReader(bytes.NewReader(data), "test.log")
	var out [][]byte
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, append([]byte(nil), rec...))
	}
}

func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	recs := randomRecords(rng, 300)
	data := writeAll(t, recs)
	got, err := readAll(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(recs) {
		t.Fatalf("read %d records, wrote %d", len(got), len(recs))
	}
	for i := range recs {
		if !bytes.Equal(got[i], recs[i]) {
			t.Fatalf("record %d differs", i)
		}
	}
}

type syncBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	syncs int
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}
func (s *syncBuffer) Sync() error { s.mu.Lock(); s.syncs++; s.mu.Unlock(); return nil }

func TestLogWriterMatchesWriter(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	recs := randomRecords(rng, 400)
	var sb syncBuffer
	lw := NewLogWriter(&sb)
	for i, r := range recs {
		off, err := lw.WriteRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		switch i % 7 {
		case 0:
			if err := lw.Sync(off); err != nil {
				t.Fatal(err)
			}
		case 3:
			if err := lw.Flush(off); err != nil {
				t.Fatal(err)
			}
			sb.mu.Lock()
			n := sb.buf.Len()
			sb.mu.Unlock()
			if int64(n) < off {
				t.Fatalf("Flush(%d) returned with %d bytes written", off, n)
			}
		}
	}
	if err := lw.Close(); err != nil {
		t.Fatal(err)
	}
	want := writeAll(t, recs)
	if !bytes.Equal(sb.buf.Bytes(), want) {
		t.Fatalf("LogWriter output (%d bytes) differs from Writer output (%d bytes)", sb.buf.Len(), len(want))
	}
	if sb.syncs == 0 {
		t.Fatal("no sync reached the file")
	}
}

func TestLogWriterGroupCommit(t *testing.T) {
	var sb syncBuffer
	lw := NewLogWriter(&sb)
	var mu sync.Mutex // WriteRecord is serialised by the caller
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				mu.Lock()
				off, err := lw.WriteRecord([]byte(fmt.Sprintf("g%d-%d", g, i)))
				mu.Unlock()
				if err != nil {
					t.Error(err)
					return
				}
				if err := lw.Sync(off); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := lw.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := readAll(sb.buf.Bytes())
	if err != nil || len(got) != 1600 {
		t.Fatalf("read %d records: %v", len(got), err)
	}
	_, syncs := lw.Stats()
	t.Logf("1600 synced records, %d syncs", syncs)
}

type failingWriter struct{ n int }

func (f *failingWriter) Write(p []byte) (int, error) {
	if f.n--; f.n < 0 {
		return 0, errors.New("disk on fire")
	}
	return len(p), nil
}
func (f *failingWriter) Sync() error { return nil }

func TestLogWriterErrorIsSticky(t *testing.T) {
	lw := NewLogWriter(&failingWriter{n: 1})
	off, _ := lw.WriteRecord([]byte("a"))
	if err := lw.Sync(off); err != nil {
		t.Fatal(err)
	}
	off, _ = lw.WriteRecord([]byte("b"))
	if err := lw.Sync(off); err == nil {
		t.Fatal("write error not reported")
	}
	if _, err := lw.WriteRecord([]byte("c")); err == nil {
		t.Fatal("error not sticky")
	}
	if err := lw.Close(); err == nil {
		t.Fatal("Close hid the error")
	}
}

// classify reads a damaged log the way WAL recovery does.
func classify(data []byte) (recs [][]byte, midErr error) {
	r := NewReader(bytes.NewReader(data), "x.log")
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return recs, nil
		}
		if err != nil {
			if !errors.Is(err, base.ErrCorruption) {
				return recs, err
			}
			after, serr := r.SkipCorruption()
			if serr != nil {
				return recs, serr
			}
			if after {
				return recs, err
			}
			return recs, nil // torn tail
		}
		recs = append(recs, append([]byte(nil), rec...))
	}
}

func TestTruncationIsATornTail(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	recs := randomRecords(rng, 60)
	data := writeAll(t, recs)
	for range 300 {
		cut := rng.IntN(len(data) + 1)
		trunc := data[:cut]
		if rng.IntN(3) == 0 && cut > 0 {
			// Zero a random tail of what is left, as a torn write can.
			z := rng.IntN(cut)
			trunc = append([]byte(nil), trunc...)
			clear(trunc[z:])
		}
		got, err := classify(trunc)
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		for i := range got {
			if !bytes.Equal(got[i], recs[i]) {
				t.Fatalf("cut at %d: record %d differs", cut, i)
			}
		}
	}
}

func TestMidLogCorruptionIsReported(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	recs := randomRecords(rng, 80)
	data := writeAll(t, recs)
	detected := 0
	for range 300 {
		pos := rng.IntN(len(data) * 3 / 4)
		bad := append([]byte(nil), data...)
		bad[pos] ^= 1 << rng.IntN(8)
		got, err := classify(bad)
		// Every record returned must be intact (no silent damage).
		for i := range got {
			if !bytes.Equal(got[i], recs[i]) {
				t.Fatalf("flip at %d: record %d returned damaged", pos, i)
			}
		}
		if err == nil {
			// Only acceptable when the flip hit trailer padding.
			if len(got) != len(recs) {
				t.Fatalf("flip at %d: lost %d records without an error", pos, len(recs)-len(got))
			}
			continue
		}
		var ce *base.CorruptionError
		if !errors.As(err, &ce) || ce.File != "x.log" || ce.Offset < 0 || ce.Offset > int64(pos) {
			t.Fatalf("flip at %d: error %v does not name the damage", pos, err)
		}
		detected++
	}
	if detected < 250 {
		t.Fatalf("only %d of 300 corruptions detected", detected)
	}
}

func TestSalvageSkipsDamage(t *testing.T) {
	recs := make([][]byte, 300)
	for i := range recs {
		recs[i] = []byte(fmt.Sprintf("record-%04d-%s", i, bytes.Repeat([]byte{'v'}, 200)))
	}
	data := writeAll(t, recs)
	bad := append([]byte(nil), data...)
	bad[BlockSize+100] ^= 0xff // damage the second block
	r := NewReader(bytes.NewReader(bad), "x.log")
	var got []string
	errs := 0
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			errs++
			if _, err := r.SkipCorruption(); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got = append(got, string(rec[:11]))
	}
	if errs != 1 {
		t.Fatalf("%d errors", errs)
	}
	if len(got) != len(recs)-1 {
		t.Fatalf("salvaged %d of %d records", len(got), len(recs))
	}
	if got[len(got)-1] != "record-0299" {
		t.Fatalf("last salvaged record %q", got[len(got)-1])
	}
}

func TestMaskCRC(t *testing.T) {
	for _, c := range []uint32{0, 1, 0xffffffff, 0xdeadbeef} {
		if UnmaskCRC(MaskCRC(c)) != c {
			t.Fatalf("mask round trip %x", c)
		}
	}
}

// FuzzReader feeds arbitrary bytes to the reader: it must never panic or
// loop, and every error is a corruption or EOF. A valid log reads back
// completely: a seed, which is one, reads back as exactly the records it
// was written from, and the input cut into records at each 0xff byte,
// written as a log, reads back as those records.
func FuzzReader(f *testing.F) {
	valid := map[string][][]byte{} // seed log -> its records
	for _, recs := range [][][]byte{
		{[]byte("one"), bytes.Repeat([]byte("b"), 300), []byte("three")},
		{bytes.Repeat([]byte("a"), BlockSize+100)},
		{{}, []byte("x")},
		{},
	} {
		data := writeAll(f, recs)
		valid[string(data)] = recs
		f.Add(data)
	}
	f.Add(make([]byte, 100))
	readsBack := func(t *testing.T, data []byte, want [][]byte) {
		t.Helper()
		got, err := readAll(data)
		if err != nil {
			t.Fatalf("valid log of %d records: %v after %d records", len(want), err, len(got))
		}
		if len(got) != len(want) {
			t.Fatalf("valid log of %d records read back as %d", len(want), len(got))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("record %d of %d differs: %d bytes read, %d written", i, len(want), len(got[i]), len(want[i]))
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data), "fuzz.log")
		for steps := 0; ; steps++ {
			if steps > len(data)+10 {
				t.Fatal("reader does not make progress")
			}
			_, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				if !errors.Is(err, base.ErrCorruption) {
					t.Fatalf("non-corruption error %v", err)
				}
				if _, err := r.SkipCorruption(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if want, ok := valid[string(data)]; ok {
			readsBack(t, data, want)
		}
		recs := bytes.Split(data, []byte{0xff})
		readsBack(t, writeAll(t, recs), recs)
	})
}

// TestLogWriterAfter: a LogWriter started after a prior step takes records
// at once but writes none of them, and returns from no Flush or Sync,
// until the step is done; then it writes them all, as a LogWriter would.
// A failed step fails the writer, with nothing written.
func TestLogWriterAfter(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	recs := randomRecords(rng, 200)
	var sb syncBuffer
	release := make(chan struct{})
	lw := NewLogWriterAfter(&sb, func() error { <-release; return nil })
	var off int64
	for _, r := range recs {
		var err error
		if off, err = lw.WriteRecord(r); err != nil {
			t.Fatal(err)
		}
	}
	synced := make(chan error, 1)
	go func() { synced <- lw.Sync(off) }()
	select {
	case err := <-synced:
		t.Fatalf("Sync returned before the prior step (%v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	sb.mu.Lock()
	n := sb.buf.Len()
	sb.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d bytes written before the prior step was done", n)
	}
	close(release)
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	if err := lw.Close(); err != nil {
		t.Fatal(err)
	}
	if want := writeAll(t, recs); !bytes.Equal(sb.buf.Bytes(), want) || sb.syncs == 0 {
		t.Fatalf("output %d bytes (%d syncs), want the %d a Writer writes", sb.buf.Len(), sb.syncs, len(want))
	}

	failed := errors.New("the old log's sync failed")
	var sb2 syncBuffer
	lw = NewLogWriterAfter(&sb2, func() error { return failed })
	if _, err := lw.WriteRecord(recs[0]); err != nil && !errors.Is(err, failed) {
		t.Fatalf("WriteRecord: %v", err)
	}
	if err := lw.Sync(lw.Size()); !errors.Is(err, failed) {
		t.Fatalf("Sync after the prior step failed: %v", err)
	}
	if _, err := lw.WriteRecord(recs[1]); !errors.Is(err, failed) {
		t.Fatalf("WriteRecord after the prior step failed: %v", err)
	}
	if err := lw.Close(); !errors.Is(err, failed) {
		t.Fatalf("Close: %v", err)
	}
	if sb2.buf.Len() != 0 || sb2.syncs != 0 {
		t.Fatalf("%d bytes, %d syncs after the prior step failed", sb2.buf.Len(), sb2.syncs)
	}
}
