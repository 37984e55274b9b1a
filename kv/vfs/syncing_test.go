package vfs

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// startRecorder is a MemFS file that records its StartWriteback calls (or
// fails them).
type startRecorder struct {
	*memFile
	calls []int64
	fail  error
}

func (r *startRecorder) StartWriteback(upTo int64) error {
	r.calls = append(r.calls, upTo)
	return r.fail
}

func newRecorder(t *testing.T) *startRecorder {
	t.Helper()
	f, err := NewMem().Create("t")
	if err != nil {
		t.Fatal(err)
	}
	return &startRecorder{memFile: f.(*memFile)}
}

func TestSyncingFile(t *testing.T) {
	r := newRecorder(t)
	f := NewSyncingFile(r, 100)
	var want []byte
	write := func(b []byte) {
		t.Helper()
		if n, err := f.Write(b); n != len(b) || err != nil {
			t.Fatalf("Write: %d, %v", n, err)
		}
		want = append(want, b...)
	}
	for i := range 10 {
		write(bytes.Repeat([]byte{byte('a' + i)}, 30))
	}
	// 120 bytes: the first 100 start; 210: 200; 300: 300.
	if want := []int64{100, 200, 300}; !slices.Equal(r.calls, want) {
		t.Fatalf("writebacks after 10 writes of 30 bytes: %v, want %v", r.calls, want)
	}
	vw, ok := f.(VectorWriter)
	if !ok {
		t.Fatal("the syncing file of a VectorWriter is no VectorWriter")
	}
	bufs := [][]byte{bytes.Repeat([]byte("x"), 150), nil, bytes.Repeat([]byte("y"), 100)}
	if n, err := vw.WriteVectors(bufs); n != 250 || err != nil {
		t.Fatalf("WriteVectors: %d, %v", n, err)
	}
	want = append(append(want, bufs[0]...), bufs[2]...)
	if want := []int64{100, 200, 300, 500}; !slices.Equal(r.calls, want) {
		t.Fatalf("writebacks after a vector of 250 bytes: %v, want %v", r.calls, want)
	}
	write([]byte("z")) // 551: none
	if len(r.calls) != 4 {
		t.Fatalf("a writeback after 51 bytes: %v", r.calls)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read back: %v, equal %v", err, bytes.Equal(got, want))
	}
}

// TestSyncingFileFails: a failed writeback stops the writebacks, not the
// writes.
func TestSyncingFileFails(t *testing.T) {
	r := newRecorder(t)
	r.fail = errors.New("sync_file_range: not supported")
	f := NewSyncingFile(r, 10)
	for range 10 {
		if _, err := f.Write(make([]byte, 25)); err != nil {
			t.Fatalf("a write after a failed writeback: %v", err)
		}
	}
	if len(r.calls) != 1 {
		t.Fatalf("writebacks after the first failed: %v", r.calls)
	}
	if size, err := f.Size(); size != 250 || err != nil {
		t.Fatalf("Size: %d, %v", size, err)
	}
}

// TestSyncingFileNone: files that cannot start a writeback, and a
// bytesPerSync of zero or less, come back as they were.
func TestSyncingFileNone(t *testing.T) {
	mf, err := NewMem().Create("m")
	if err != nil {
		t.Fatal(err)
	}
	if g := NewSyncingFile(mf, 1<<20); g != mf {
		t.Fatalf("MemFS file wrapped: %T", g)
	}
	r := newRecorder(t)
	for _, every := range []int64{0, -1} {
		if g := NewSyncingFile(r, every); g != File(r) {
			t.Fatalf("bytesPerSync %d: wrapped in %T", every, g)
		}
	}
}

// TestSyncingFileOS writes a file of the OS through a syncing file in
// uneven pieces, with writebacks every 64 KiB, and reads it back.
func TestSyncingFileOS(t *testing.T) {
	f, err := Default.Create(Default.PathJoin(t.TempDir(), "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if runtime.GOOS == "linux" {
		if _, ok := f.(WritebackStarter); !ok {
			t.Fatal("a Linux OS file is no WritebackStarter")
		}
		if err := f.(WritebackStarter).StartWriteback(0); err != nil {
			t.Skipf("sync_file_range on this file system: %v", err)
		}
	}
	s := NewSyncingFile(f, 64<<10)
	rng := rand.New(rand.NewPCG(1, 2))
	var want []byte
	for len(want) < 1<<20 {
		b := make([]byte, rng.IntN(40<<10))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		if vw, ok := s.(VectorWriter); ok && len(b) > 2 {
			if _, err := vw.WriteVectors([][]byte{b[:len(b)/2], b[len(b)/2:]}); err != nil {
				t.Fatal(err)
			}
		} else if _, err := s.Write(b); err != nil {
			t.Fatal(err)
		}
		want = append(want, b...)
	}
	if sf, ok := s.(syncingVectorFile); ok && sf.failed {
		t.Fatal("a writeback failed")
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	if _, err := s.ReadAt(got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read back: %v, equal %v", err, bytes.Equal(got, want))
	}
}
