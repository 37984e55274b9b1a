package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
)

// roFixture builds, in a fresh directory of a MemFS or of the OS file system,
// a tree with a file holding unsynced data and (on the MemFS) a directory
// entry that is not durable, so that a sync leaking through NewReadOnly would
// show in the snapshot.
func roFixture(t *testing.T, kind string) (inner FS, dir string) {
	switch kind {
	case "mem", "spy":
		inner, dir = NewMem(), "/db"
	case "os":
		inner, dir = Default, t.TempDir()
	default:
		t.Fatal(kind)
	}
	p := func(elem ...string) string { return inner.PathJoin(append([]string{dir}, elem...)...) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(inner.MkdirAll(p("sub"), 0o755))
	must(inner.MkdirAll(p("empty"), 0o755))
	must(WriteFile(inner, p("a"), []byte("hello")))
	must(WriteFile(inner, p("sub", "c"), []byte("in sub")))
	must(WriteFile(inner, p("LOCK"), nil))
	f, err := inner.Create(p("b"))
	must(err)
	_, err = f.Write([]byte("durable"))
	must(err)
	must(f.Sync())
	_, err = f.Write([]byte("+tail"))
	must(err)
	must(f.Close())
	if kind == "mem" {
		must(SyncDir(inner, "/"))
	}
	must(SyncDir(inner, dir))
	must(WriteFile(inner, p("pending"), []byte("entry not synced")))
	if kind == "spy" {
		inner = &spyFS{FS: inner}
	}
	return inner, dir
}

// spyFS records every call that could change a file system, on it or on the
// files it opened: a read-only wrapper must make none, whether or not the
// wrapped file system would refuse them itself (a file opened for reading
// refuses writes anyway).
type spyFS struct {
	FS
	mu    sync.Mutex
	calls []string
}

func (s *spyFS) record(format string, args ...any) {
	s.mu.Lock()
	s.calls = append(s.calls, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

func (s *spyFS) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.calls
	s.calls = nil
	return c
}

func (s *spyFS) Create(name string) (File, error) {
	s.record("Create %s", name)
	return s.FS.Create(name)
}
func (s *spyFS) Remove(name string) error { s.record("Remove %s", name); return s.FS.Remove(name) }
func (s *spyFS) Rename(o, n string) error { s.record("Rename %s", o); return s.FS.Rename(o, n) }
func (s *spyFS) MkdirAll(dir string, perm os.FileMode) error {
	s.record("MkdirAll %s", dir)
	return s.FS.MkdirAll(dir, perm)
}
func (s *spyFS) Lock(name string) (io.Closer, error) {
	s.record("Lock %s", name)
	return s.FS.Lock(name)
}

func (s *spyFS) Open(name string) (File, error) {
	f, err := s.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return spyFile{File: f, fs: s, name: name}, nil
}

func (s *spyFS) OpenDir(name string) (File, error) {
	f, err := s.FS.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return spyFile{File: f, fs: s, name: name}, nil
}

type spyFile struct {
	File
	fs   *spyFS
	name string
}

func (f spyFile) Write(p []byte) (int, error) {
	f.fs.record("Write %s", f.name)
	return f.File.Write(p)
}
func (f spyFile) Sync() error { f.fs.record("Sync %s", f.name); return f.File.Sync() }

// roSnapshot describes everything under dir: names, kinds, sizes, mod times
// and contents, and for a MemFS also its durable state (synced lengths and
// durable directory entries).
func roSnapshot(t *testing.T, fs FS, dir string) string {
	t.Helper()
	var b strings.Builder
	var rec func(dir string)
	rec = func(dir string) {
		names, err := fs.List(dir)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(names)
		for _, n := range names {
			p := fs.PathJoin(dir, n)
			fi, err := fs.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if fi.IsDir() {
				fmt.Fprintf(&b, "%s/ %v\n", p, fi.Mode())
				rec(p)
				continue
			}
			data, err := ReadFile(fs, p)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%s %v %d %d %q\n", p, fi.Mode(), fi.Size(), fi.ModTime().UnixNano(), data)
		}
	}
	rec(dir)
	if m, ok := fs.(*MemFS); ok {
		b.WriteString(m.String())
	}
	return b.String()
}

// wantEROFS checks for errReadOnly, which is syscall.EROFS wherever syscall
// has one (TestReadOnlyErrorIsEROFS checks that).
func wantEROFS(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, errReadOnly) {
		t.Fatalf("%s: %v, want an error matching syscall.EROFS", what, err)
	}
	var pe *os.PathError
	if !errors.As(err, &pe) || pe.Err != errReadOnly {
		t.Fatalf("%s: %#v, want an *os.PathError whose Err is syscall.EROFS", what, err)
	}
}

// TestReadOnlyRefusesWrites: every operation that would change the file
// system, and every sync, fails with EROFS and leaves the wrapped file system
// exactly as it was, durable state included.
func TestReadOnlyRefusesWrites(t *testing.T) {
	type op struct {
		name string
		do   func(ro FS, p func(...string) string) error
	}
	// openThen opens a file (or directory) through the wrapper, which must
	// succeed, and applies f to it.
	openThen := func(dir bool, name string, f func(File) error) func(FS, func(...string) string) error {
		return func(ro FS, p func(...string) string) error {
			open := ro.Open
			if dir {
				open = ro.OpenDir
			}
			file, err := open(p(name))
			if err != nil {
				return fmt.Errorf("open through read-only: %v", err) // not EROFS: fails the test
			}
			defer file.Close()
			return f(file)
		}
	}
	write := func(f File) error { _, err := f.Write([]byte("x")); return err }
	sync := func(f File) error { return f.Sync() }
	nilFile := func(f File, err error) error {
		if f != nil {
			f.Close()
			return errors.New("failed Create returned a File")
		}
		return err
	}
	nilCloser := func(c io.Closer, err error) error {
		if c != nil {
			c.Close()
			return errors.New("failed Lock returned a Closer")
		}
		return err
	}
	ops := []op{
		{"Create existing", func(ro FS, p func(...string) string) error { return nilFile(ro.Create(p("a"))) }},
		{"Create new", func(ro FS, p func(...string) string) error { return nilFile(ro.Create(p("new"))) }},
		{"Create in missing dir", func(ro FS, p func(...string) string) error { return nilFile(ro.Create(p("nodir", "new"))) }},
		{"Remove file", func(ro FS, p func(...string) string) error { return ro.Remove(p("a")) }},
		{"Remove empty dir", func(ro FS, p func(...string) string) error { return ro.Remove(p("empty")) }},
		{"Remove missing", func(ro FS, p func(...string) string) error { return ro.Remove(p("missing")) }},
		{"Rename", func(ro FS, p func(...string) string) error { return ro.Rename(p("a"), p("a2")) }},
		{"Rename over existing", func(ro FS, p func(...string) string) error { return ro.Rename(p("a"), p("b")) }},
		{"MkdirAll new", func(ro FS, p func(...string) string) error { return ro.MkdirAll(p("x", "y"), 0o755) }},
		{"MkdirAll existing", func(ro FS, p func(...string) string) error { return ro.MkdirAll(p("sub"), 0o755) }},
		{"Lock existing", func(ro FS, p func(...string) string) error { return nilCloser(ro.Lock(p("LOCK"))) }},
		{"Lock new", func(ro FS, p func(...string) string) error { return nilCloser(ro.Lock(p("NEWLOCK"))) }},
		{"Write to opened file", openThen(false, "a", write)},
		{"Sync opened file with unsynced data", openThen(false, "b", sync)},
		{"Write to opened directory", openThen(true, ".", write)},
		{"Sync opened directory with a pending entry", openThen(true, ".", sync)},
		{"Sync root directory", func(ro FS, p func(...string) string) error { return SyncDir(ro, "/") }},
		{"WriteFile", func(ro FS, p func(...string) string) error { return WriteFile(ro, p("a"), []byte("new")) }},
	}
	for _, kind := range []string{"mem", "os", "spy"} {
		t.Run(kind, func(t *testing.T) {
			inner, dir := roFixture(t, kind)
			ro := NewReadOnly(inner)
			p := func(elem ...string) string { return ro.PathJoin(append([]string{dir}, elem...)...) }
			before := roSnapshot(t, inner, dir)
			if (kind == "mem" && !strings.Contains(before, "(entry not durable)")) || !strings.Contains(before, "+tail") {
				t.Fatalf("fixture lacks the state a leaked sync would change:\n%s", before)
			}
			for _, o := range ops {
				t.Run(o.name, func(t *testing.T) {
					wantEROFS(t, o.name, o.do(ro, p))
					if spy, ok := inner.(*spyFS); ok {
						if calls := spy.take(); len(calls) > 0 {
							t.Fatalf("%s reached the wrapped file system: %q", o.name, calls)
						}
					}
					if after := roSnapshot(t, inner, dir); after != before {
						t.Fatalf("%s changed the wrapped file system:\nbefore:\n%s\nafter:\n%s", o.name, before, after)
					}
				})
			}
			if m, ok := inner.(*MemFS); ok {
				if n := m.OpenFiles(); n != 0 {
					t.Fatalf("%d files left open", n)
				}
				// Nothing above synced: a crash keeps exactly the fixture's
				// durable state.
				c := m.CrashClone(CrashOptions{})
				if got, err := ReadFile(c, "/db/b"); err != nil || string(got) != "durable" {
					t.Fatalf("crash clone's /db/b: %q %v", got, err)
				}
				if _, err := c.Stat("/db/pending"); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("a directory sync leaked: pending entry survives a crash: %v", err)
				}
			}
		})
	}
}

// TestReadOnlyPassesReadsThrough: reads, listings, stats, shared locks and
// path helpers behave as on the wrapped file system.
func TestReadOnlyPassesReadsThrough(t *testing.T) {
	for _, kind := range []string{"mem", "os"} {
		t.Run(kind, func(t *testing.T) {
			inner, dir := roFixture(t, kind)
			ro := NewReadOnly(inner)
			p := func(elem ...string) string { return ro.PathJoin(append([]string{dir}, elem...)...) }

			if got, err := ReadFile(ro, p("b")); err != nil || string(got) != "durable+tail" {
				t.Fatalf("ReadFile: %q %v", got, err)
			}
			f, err := ro.Open(p("sub", "c"))
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 3)
			if n, err := f.ReadAt(buf, 3); n != 3 || string(buf) != "sub" || (err != nil && err != io.EOF) {
				t.Fatalf("ReadAt: %q %d %v", buf, n, err)
			}
			if n, err := f.Read(buf); n != 3 || string(buf) != "in " || err != nil {
				t.Fatalf("Read: %q %d %v", buf, n, err)
			}
			if n, err := f.Size(); n != 6 || err != nil {
				t.Fatalf("Size: %d %v", n, err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := ro.Open(p("missing")); !errors.Is(err, os.ErrNotExist) || errors.Is(err, errReadOnly) {
				t.Fatalf("Open missing: %v, want os.ErrNotExist", err)
			}
			d, err := ro.OpenDir(p("sub"))
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}

			got, err := ro.List(dir)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := inner.List(dir)
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) || !slices.Contains(got, "pending") {
				t.Fatalf("List: %v, inner lists %v", got, want)
			}
			fi, err := ro.Stat(p("a"))
			if err != nil || fi.Size() != 5 || fi.IsDir() {
				t.Fatalf("Stat: %v %v", fi, err)
			}
			if _, err := ro.Stat(p("missing")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("Stat missing: %v", err)
			}
			if ro.PathJoin("x", "y") != inner.PathJoin("x", "y") || ro.PathBase(p("sub", "c")) != "c" {
				t.Fatal("path helpers differ from the wrapped file system's")
			}

			// Shared locks go to the wrapped file system's locks: they
			// coexist with each other and exclude its exclusive lock.
			lock := p("LOCK")
			x, err := inner.Lock(lock)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ro.LockShared(lock); !errors.Is(err, ErrLocked) {
				t.Fatalf("LockShared beside the inner exclusive lock: %v", err)
			}
			x.Close()
			s1, err := ro.LockShared(lock)
			if err != nil {
				t.Fatal(err)
			}
			s2, err := ro.LockShared(lock)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := inner.Lock(lock); !errors.Is(err, ErrLocked) {
				t.Fatalf("inner Lock beside read-only shared locks: %v", err)
			}
			s1.Close()
			s2.Close()
			x, err = inner.Lock(lock)
			if err != nil {
				t.Fatalf("inner Lock after the shared locks' release: %v", err)
			}
			x.Close()
			if _, err := ro.LockShared(p("missing")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("LockShared missing: %v", err)
			}

			if m, ok := inner.(*MemFS); ok {
				if n := m.OpenFiles(); n != 0 {
					t.Fatalf("%d files left open: Close did not pass through", n)
				}
			}
		})
	}
}
