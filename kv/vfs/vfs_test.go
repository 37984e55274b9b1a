package vfs

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"testing"
)

// testFS exercises the FS contract on one implementation.
func testFS(t *testing.T, fs FS, dir string) {
	if err := fs.MkdirAll(fs.PathJoin(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	name := fs.PathJoin(dir, "a")
	f, err := fs.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("hello ")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("world")); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if n, err := f.Size(); err != nil || n != 11 {
		t.Fatalf("size %d %v", n, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(fs, name)
	if err != nil || string(got) != "hello world" {
		t.Fatalf("ReadFile %q %v", got, err)
	}
	r, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if n, err := r.ReadAt(buf, 6); n != 5 || string(buf) != "world" || (err != nil && err != io.EOF) {
		t.Fatalf("ReadAt %q %d %v", buf, n, err)
	}
	if n, err := r.ReadAt(buf, 8); n != 3 || err != io.EOF {
		t.Fatalf("short ReadAt: %d %v", n, err)
	}
	r.Close()
	if err := fs.Rename(name, fs.PathJoin(dir, "b")); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat(name); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stat after rename: %v", err)
	}
	if fi, err := fs.Stat(fs.PathJoin(dir, "b")); err != nil || fi.Size() != 11 {
		t.Fatalf("stat b: %v", err)
	}
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 2 {
		t.Fatalf("list: %v", names)
	}
	if err := SyncDir(fs, dir); err != nil {
		t.Fatal(err)
	}
	l, err := fs.Lock(fs.PathJoin(dir, "LOCK"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Lock(fs.PathJoin(dir, "LOCK")); !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock: %v", err)
	}
	l.Close()
	l2, err := fs.Lock(fs.PathJoin(dir, "LOCK"))
	if err != nil {
		t.Fatalf("relock: %v", err)
	}
	l2.Close()
	if err := fs.Remove(fs.PathJoin(dir, "b")); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Open(fs.PathJoin(dir, "b")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("open removed: %v", err)
	}
}

func TestOSFS(t *testing.T) { testFS(t, Default, t.TempDir()) }

func TestMemFS(t *testing.T) {
	fs := NewMem()
	testFS(t, fs, "/db")
	if n := fs.OpenFiles(); n != 0 {
		t.Fatalf("%d files left open", n)
	}
}

func TestMemFSCrashKeepsOnlyDurableState(t *testing.T) {
	fs := NewMem()
	fs.MkdirAll("/db", 0o755)
	SyncDir(fs, "/")
	f, _ := fs.Create("/db/synced")
	f.Write([]byte("durable"))
	f.Sync()
	f.Write([]byte("-lost"))
	SyncDir(fs, "/db")
	g, _ := fs.Create("/db/unlinked") // entry never synced
	g.Write([]byte("x"))
	g.Sync()

	c := fs.CrashClone(CrashOptions{})
	if got, err := ReadFile(c, "/db/synced"); err != nil || string(got) != "durable" {
		t.Fatalf("synced file after crash: %q %v", got, err)
	}
	if _, err := c.Stat("/db/unlinked"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("file whose entry was not synced survived: %v", err)
	}
	// The original keeps working.
	f.Write([]byte("!"))
	f.Close()
	g.Close()
	if got, _ := ReadFile(fs, "/db/synced"); string(got) != "durable-lost!" {
		t.Fatalf("original changed: %q", got)
	}

	// Rename is durable only after a directory sync.
	fs.Rename("/db/synced", "/db/renamed")
	c2 := fs.CrashClone(CrashOptions{})
	if _, err := c2.Stat("/db/synced"); err != nil {
		t.Fatalf("unsynced rename took effect: %v", err)
	}
	SyncDir(fs, "/db")
	c3 := fs.CrashClone(CrashOptions{})
	if _, err := c3.Stat("/db/renamed"); err != nil {
		t.Fatalf("synced rename lost: %v", err)
	}
}

func TestMemFSCrashKeepsRandomUnsyncedPrefix(t *testing.T) {
	fs := NewMem()
	f, _ := fs.Create("/f")
	f.Write([]byte("0123"))
	f.Sync()
	f.Write(bytes.Repeat([]byte("x"), 100))
	SyncDir(fs, "/")
	rng := rand.New(rand.NewPCG(1, 1))
	sizes := map[int]bool{}
	zeroed := false
	for range 200 {
		c := fs.CrashClone(CrashOptions{Rand: rng, ZeroTail: true})
		got, err := ReadFile(c, "/f")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) < 4 || string(got[:4]) != "0123" {
			t.Fatalf("synced prefix damaged: %q", got)
		}
		for _, b := range got[4:] {
			if b == 0 {
				zeroed = true
			} else if b != 'x' {
				t.Fatalf("unexpected byte %q", b)
			}
		}
		sizes[len(got)] = true
	}
	if len(sizes) < 20 || !zeroed {
		t.Fatalf("crash points not random enough: %d sizes, zeroed=%v", len(sizes), zeroed)
	}
}

func TestFaultFS(t *testing.T) {
	cd := NewCountdown(OpWrite, 2, false)
	fs := NewFault(NewMem(), cd)
	f, err := fs.Create("/f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("b")); !errors.Is(err, ErrInjected) {
		t.Fatalf("second write: %v", err)
	}
	if _, err := f.Write([]byte("c")); err != nil {
		t.Fatalf("non-sticky countdown failed again: %v", err)
	}
	f.Close()
	if got, _ := ReadFile(fs, "/f"); string(got) != "ac" {
		t.Fatalf("contents %q", got)
	}
	fs.SetInjector(NewRandom(OpSync|OpRead, 1, 1))
	if err := WriteFile(fs, "/g", []byte("x")); !errors.Is(err, ErrInjected) {
		t.Fatalf("sync fault: %v", err)
	}
	fs.SetInjector(nil)
	if err := WriteFile(fs, "/g", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if OpAll.String() == "" || (OpRead|OpSync).String() != "read|sync" {
		t.Fatal((OpRead | OpSync).String())
	}
}

// TestWriteVectors: a file's WriteVectors writes what one Write of the
// buffers' concatenation would (more buffers than one writev takes, empty
// ones among them) and leaves the caller's buffers as they were; through
// FaultFS it is one write, faults included.
func TestWriteVectors(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	bufs := make([][]byte, 2500)
	var want []byte
	for i := range bufs {
		b := make([]byte, rng.IntN(300)*(i%7/6^1)) // every 7th empty
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		bufs[i] = b
		want = append(want, b...)
	}
	lens := make([]int, len(bufs))
	for i, b := range bufs {
		lens[i] = len(b)
	}
	fault := NewFault(NewMem(), nil)
	for _, c := range []struct {
		name string
		fs   FS
		dir  string
	}{{"os", Default, t.TempDir()}, {"mem", NewMem(), "/"}, {"fault", fault, "/"}} {
		t.Run(c.name, func(t *testing.T) {
			name := c.fs.PathJoin(c.dir, "v")
			f, err := c.fs.Create(name)
			if err != nil {
				t.Fatal(err)
			}
			vw, ok := f.(VectorWriter)
			if !ok {
				if c.name == "os" && !vectorOS {
					t.Skip("no writev here")
				}
				t.Fatalf("%T writes no vectors", f)
			}
			if _, err := f.Write([]byte("head")); err != nil {
				t.Fatal(err)
			}
			n, err := vw.WriteVectors(bufs)
			if err != nil || n != int64(len(want)) {
				t.Fatalf("WriteVectors = %d, %v; want %d", n, err, len(want))
			}
			if n, err := vw.WriteVectors([][]byte{{}, {}}); n != 0 || err != nil {
				t.Fatalf("WriteVectors of empty buffers = %d, %v", n, err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			got, err := ReadFile(c.fs, name)
			if err != nil || !bytes.Equal(got, append([]byte("head"), want...)) {
				t.Fatalf("contents: %d bytes (%v), want %d", len(got), err, 4+len(want))
			}
			for i, b := range bufs {
				if len(b) != lens[i] {
					t.Fatalf("buffer %d changed length: %d, was %d", i, len(b), lens[i])
				}
			}
		})
	}
	fault.SetInjector(NewCountdown(OpWrite, 1, false))
	f, err := fault.Create("/w")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.(VectorWriter).WriteVectors(bufs[:3]); !errors.Is(err, ErrInjected) {
		t.Fatalf("faulted WriteVectors: %v", err)
	}
}
