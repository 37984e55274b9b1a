package vfs

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestMemDataMatchesSlice appends writes of every size (empty, within a
// chunk, across several, larger than the largest chunk) and reads back at
// random offsets and lengths, against one plain slice.
func TestMemDataMatchesSlice(t *testing.T) {
	src := rand.NewChaCha8([32]byte{1})
	rng := rand.New(src)
	buf := make([]byte, 2*memChunkMax)
	for round := range 20 {
		var d memData
		var want []byte
		for range rng.IntN(40) {
			var n int
			switch rng.IntN(4) {
			case 0:
				n = rng.IntN(16)
			case 1:
				n = rng.IntN(5000)
			case 2:
				n = rng.IntN(3 * memChunkMax)
			default:
				n = memChunkMax - len(want)%memChunkMax // to a chunk boundary, or near
			}
			p := make([]byte, n)
			src.Read(p)
			d.append(p, nil)
			want = append(want, p...)
			if d.len() != len(want) {
				t.Fatalf("round %d: len %d, want %d", round, d.len(), len(want))
			}
		}
		for range 50 {
			off := rng.IntN(len(want) + 10)
			p := buf[:rng.IntN(len(buf))]
			n := d.readAt(p, off)
			exp := 0
			if off < len(want) {
				exp = min(len(p), len(want)-off)
			}
			if n != exp || !bytes.Equal(p[:n], want[min(off, len(want)):min(off, len(want))+n]) {
				t.Fatalf("round %d: readAt(%d bytes, %d) = %d bytes, want %d, or the bytes differ", round, len(p), off, n, exp)
			}
		}
		if k := rng.IntN(len(want) + 1); !bytes.Equal(d.prefix(k), want[:k]) {
			t.Fatalf("round %d: prefix(%d) differs", round, k)
		}
	}
}

// TestMemFSReusesChunks: the full-size chunks of a file come back for new
// writes once nothing refers to the file — not while a handle is open, a
// directory entry (live or durable) holds it, or a rename or create
// replaced it only in the live entries — and the files that stay read
// back whole (reused chunks are poisoned first).
func TestMemFSReusesChunks(t *testing.T) {
	poisonReused = true
	defer func() { poisonReused = false }()
	fs := NewMem()
	if err := fs.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	if root, err := fs.OpenDir("/"); err != nil || root.Sync() != nil {
		t.Fatalf("syncing the root: %v", err)
	}
	content := func(seed byte, n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = seed + byte(i*7)
		}
		return b
	}
	write := func(name string, b []byte, keepOpen bool) File {
		t.Helper()
		f, err := fs.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off < len(b); off += 64 << 10 {
			if _, err := f.Write(b[off:min(len(b), off+64<<10)]); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		if keepOpen {
			return f
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		return nil
	}
	check := func(name string, want []byte) {
		t.Helper()
		f, err := fs.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		got := make([]byte, len(want)+1)
		n, _ := f.ReadAt(got, 0)
		if !bytes.Equal(got[:n], want) {
			t.Fatalf("%s: %d bytes read back, want %d, or they differ", name, n, len(want))
		}
	}
	syncDir := func() {
		t.Helper()
		d, err := fs.OpenDir("/d")
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Sync(); err != nil {
			t.Fatal(err)
		}
		d.Close()
	}
	pooled := func() int {
		fs.chunks.mu.Lock()
		defer fs.chunks.mu.Unlock()
		return len(fs.chunks.chunks)
	}
	const size = 3*memChunkMax + 100 // three full chunks and a small one
	a, b, c := content(1, size), content(2, size), content(3, size)

	// Removed with a handle open: kept until the handle closes.
	h := write("/d/a", a, true)
	if err := fs.Remove("/d/a"); err != nil {
		t.Fatal(err)
	}
	if pooled() != 0 {
		t.Fatal("chunks of a file with an open handle went to the pool")
	}
	got := make([]byte, size)
	if n, _ := h.ReadAt(got, 0); n != size || !bytes.Equal(got, a) {
		t.Fatal("a removed file's open handle reads other bytes")
	}
	h.Close()
	if p := pooled(); p != 3 {
		t.Fatalf("%d chunks pooled after the last handle closed, want 3", p)
	}
	// New writes take them; the old contents are gone from them.
	write("/d/b", b, false)
	if p := pooled(); p != 0 {
		t.Fatalf("%d chunks still pooled after a 3 MiB write, want 0", p)
	}
	check("/d/b", b)

	// A durable entry holds a file removed after its directory's sync, until
	// the next sync; a crash clone still has it.
	syncDir()
	if err := fs.Remove("/d/b"); err != nil {
		t.Fatal(err)
	}
	if pooled() != 0 {
		t.Fatal("chunks of a file still durable in its directory went to the pool")
	}
	write("/d/c", c, false) // fresh chunks: none pooled
	clone := fs.CrashClone(CrashOptions{})
	cf, err := clone.Open("/d/b")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := cf.ReadAt(got, 0); n != size || !bytes.Equal(got, b) {
		t.Fatal("the crash clone's copy of a durable file differs")
	}
	cf.Close()
	syncDir()
	if p := pooled(); p != 3 {
		t.Fatalf("%d chunks pooled after the directory sync dropped the file, want 3", p)
	}
	check("/d/c", c)

	// A rename over a durable file: kept until the sync; a create over a
	// file only in the live entries: at once.
	write("/d/x", a, false)
	syncDir()
	if err := fs.Rename("/d/c", "/d/x"); err != nil { // x's chunks (3, from the pool) stay durable
		t.Fatal(err)
	}
	if p := pooled(); p != 0 {
		t.Fatalf("%d chunks pooled after a rename over a durable file, want 0", p)
	}
	check("/d/x", c)
	syncDir() // the old x goes
	if p := pooled(); p != 3 {
		t.Fatalf("%d chunks pooled after the sync, want 3", p)
	}
	write("/d/y", b, false)
	f, err := fs.Create("/d/y") // the first y was never durable
	if err != nil {
		t.Fatal(err)
	}
	if p := pooled(); p != 3 {
		t.Fatalf("%d chunks pooled after a create over an undurable file, want 3", p)
	}
	f.Close()
	write("/d/y", a, false)
	check("/d/y", a)
	check("/d/x", c)
	if fs.OpenFiles() != 0 {
		t.Fatalf("%d handles left open", fs.OpenFiles())
	}
}
