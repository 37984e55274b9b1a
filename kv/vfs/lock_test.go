package vfs

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// lockFS is one implementation the lock contract runs against, in a fresh
// directory.
type lockFS struct {
	name string
	new  func(t *testing.T) (FS, string)
}

func lockFSes() []lockFS {
	mem := func(t *testing.T) (FS, string) {
		fs := NewMem()
		if err := fs.MkdirAll("/db", 0o755); err != nil {
			t.Fatal(err)
		}
		return fs, "/db"
	}
	return []lockFS{
		{"mem", mem},
		{"os", func(t *testing.T) (FS, string) { return Default, t.TempDir() }},
		{"fault(mem)", func(t *testing.T) (FS, string) {
			fs, dir := mem(t)
			return NewFault(fs, nil), dir
		}},
		{"fault(os)", func(t *testing.T) (FS, string) { return NewFault(Default, nil), t.TempDir() }},
	}
}

type lockOp int

const (
	takeExcl   lockOp = iota // Lock into holder id
	takeShared               // LockShared into holder id
	release                  // Close holder id
)

type lockStep struct {
	op         lockOp
	id         int
	wantLocked bool // the take fails with ErrLocked
}

func (s lockStep) String() string {
	switch s.op {
	case takeExcl:
		return fmt.Sprintf("Lock#%d", s.id)
	case takeShared:
		return fmt.Sprintf("LockShared#%d", s.id)
	}
	return fmt.Sprintf("Close#%d", s.id)
}

func takeX(id int) lockStep    { return lockStep{op: takeExcl, id: id} }
func takeS(id int) lockStep    { return lockStep{op: takeShared, id: id} }
func blockedX(id int) lockStep { return lockStep{op: takeExcl, id: id, wantLocked: true} }
func blockedS(id int) lockStep { return lockStep{op: takeShared, id: id, wantLocked: true} }
func releaseH(id int) lockStep { return lockStep{op: release, id: id} }

var lockCases = []struct {
	name   string
	noFile bool // the lock file does not exist beforehand
	steps  []lockStep
}{
	{"shared holders coexist", false, []lockStep{takeS(1), takeS(2), takeS(3)}},
	{"exclusive blocks shared", false, []lockStep{takeX(1), blockedS(2), blockedS(3)}},
	{"exclusive blocks exclusive", false, []lockStep{takeX(1), blockedX(2)}},
	{"shared blocks exclusive", false, []lockStep{takeS(1), blockedX(2)}},
	{"exclusive release lets shared in", false, []lockStep{takeX(1), blockedS(2), releaseH(1), takeS(2), takeS(3), blockedX(4)}},
	{"last shared release lets exclusive in", false, []lockStep{takeS(1), takeS(2), releaseH(1), blockedX(3), releaseH(2), takeX(3), blockedS(4)}},
	{"exclusive release lets exclusive in", false, []lockStep{takeX(1), releaseH(1), takeX(2), blockedX(3)}},
	{"double close of shared releases once", false, []lockStep{takeS(1), takeS(2), releaseH(1), releaseH(1), blockedX(3), releaseH(2), takeX(3)}},
	{"double close of exclusive releases once", false, []lockStep{takeX(1), releaseH(1), releaseH(1), takeS(2), blockedX(3), releaseH(2), releaseH(2), takeX(3)}},
	{"failed exclusive takes nothing", false, []lockStep{takeS(1), blockedX(2), blockedX(3), releaseH(1), takeX(4)}},
	{"failed shared takes nothing", false, []lockStep{takeX(1), blockedS(2), blockedS(3), releaseH(1), takeX(4)}},
	{"Lock creates the file LockShared needs", true, []lockStep{takeX(1), blockedS(2), releaseH(1), takeS(2)}},
}

// TestLockContract runs the shared/exclusive lock contract against every
// implementation. On the operating system's file system each take is a
// separate open in this one process, so it also checks that flock's per-open
// semantics give the same exclusion within a process as between processes.
func TestLockContract(t *testing.T) {
	for _, impl := range lockFSes() {
		t.Run(impl.name, func(t *testing.T) {
			for _, tc := range lockCases {
				t.Run(tc.name, func(t *testing.T) {
					fs, dir := impl.new(t)
					name := fs.PathJoin(dir, "LOCK")
					if !tc.noFile {
						if err := WriteFile(fs, name, nil); err != nil {
							t.Fatal(err)
						}
					}
					held := map[int]io.Closer{}
					defer func() {
						for _, c := range held {
							c.Close()
						}
					}()
					for i, st := range tc.steps {
						var c io.Closer
						var err error
						switch st.op {
						case takeExcl:
							c, err = fs.Lock(name)
						case takeShared:
							c, err = fs.LockShared(name)
						case release:
							// A second Close may report os.ErrClosed (the OS
							// file); what matters is the lock state after it.
							held[st.id].Close()
							continue
						}
						switch {
						case st.wantLocked && !errors.Is(err, ErrLocked):
							t.Fatalf("step %d %v: got %v, want ErrLocked", i, st, err)
						case st.wantLocked && c != nil:
							t.Fatalf("step %d %v: failed take returned a Closer", i, st)
						case !st.wantLocked && err != nil:
							t.Fatalf("step %d %v: %v", i, st, err)
						}
						if c != nil {
							held[st.id] = c
						}
					}
				})
			}
		})
	}
}

func TestLockSharedMissingAndDirectory(t *testing.T) {
	for _, impl := range lockFSes() {
		t.Run(impl.name, func(t *testing.T) {
			fs, dir := impl.new(t)
			missing := fs.PathJoin(dir, "missing")
			for _, name := range []string{missing, fs.PathJoin(dir, "nodir", "LOCK")} {
				c, err := fs.LockShared(name)
				if !errors.Is(err, os.ErrNotExist) || c != nil {
					t.Fatalf("LockShared(%s): %v, want os.ErrNotExist", name, err)
				}
				if errors.Is(err, ErrLocked) {
					t.Fatalf("LockShared(%s) of a missing file reports ErrLocked", name)
				}
			}
			if _, err := fs.Stat(missing); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("LockShared created the file: %v", err)
			}
			// A directory is not a lock file, for either kind.
			sub := fs.PathJoin(dir, "sub")
			if err := fs.MkdirAll(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			if c, err := fs.LockShared(sub); err == nil || errors.Is(err, ErrLocked) {
				if c != nil {
					c.Close()
				}
				t.Fatalf("LockShared(directory): %v", err)
			}
			if c, err := fs.Lock(sub); err == nil || errors.Is(err, ErrLocked) {
				if c != nil {
					c.Close()
				}
				t.Fatalf("Lock(directory): %v", err)
			}
		})
	}
}

// TestLockStress has goroutines take and release shared and exclusive locks
// on one file at random and checks that no exclusive holder ever overlaps
// another holder, and that both kinds were granted.
func TestLockStress(t *testing.T) {
	for _, impl := range lockFSes() {
		t.Run(impl.name, func(t *testing.T) {
			fs, dir := impl.new(t)
			name := fs.PathJoin(dir, "LOCK")
			if err := WriteFile(fs, name, nil); err != nil {
				t.Fatal(err)
			}
			const goroutines, iters, hold = 8, 200, 20 * time.Microsecond
			// Exclusive takers retry until this deadline: shared holders
			// come and go, and an exclusive taker needs a gap between them.
			// (A bug that never grants one ends the retries, not the test.)
			retryUntil := time.Now().Add(5 * time.Second)
			var nExcl, nShared, gotExcl, gotShared, maxShared atomic.Int64
			var wg sync.WaitGroup
			errc := make(chan error, goroutines) // one error per goroutine at most
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(g), 7))
					for range iters {
						if err := func() error {
							wantExcl := rng.IntN(4) == 0
							var c io.Closer
							var err error
							if wantExcl {
								for {
									c, err = fs.Lock(name)
									if !errors.Is(err, ErrLocked) || time.Now().After(retryUntil) {
										break
									}
									runtime.Gosched()
								}
							} else {
								c, err = fs.LockShared(name)
							}
							if errors.Is(err, ErrLocked) {
								return nil
							}
							if err != nil {
								return err
							}
							defer c.Close()
							if wantExcl {
								gotExcl.Add(1)
								defer nExcl.Add(-1)
								if n := nExcl.Add(1); n != 1 || nShared.Load() != 0 {
									return fmt.Errorf("exclusive holder beside %d exclusive, %d shared", n-1, nShared.Load())
								}
								time.Sleep(hold)
								if n := nShared.Load(); n != 0 {
									return fmt.Errorf("exclusive holder beside %d shared", n)
								}
								return nil
							}
							gotShared.Add(1)
							defer nShared.Add(-1)
							n := nShared.Add(1)
							for m := maxShared.Load(); n > m && !maxShared.CompareAndSwap(m, n); m = maxShared.Load() {
							}
							time.Sleep(hold)
							if nExcl.Load() != 0 {
								return errors.New("shared holder beside an exclusive one")
							}
							return nil
						}(); err != nil {
							errc <- err
							return
						}
						time.Sleep(hold)
					}
				}()
			}
			wg.Wait()
			close(errc)
			for err := range errc {
				t.Fatal(err)
			}
			if gotExcl.Load() == 0 || gotShared.Load() == 0 {
				t.Fatalf("granted %d exclusive, %d shared: both kinds should have been", gotExcl.Load(), gotShared.Load())
			}
			t.Logf("granted %d exclusive, %d shared (at most %d shared at once)", gotExcl.Load(), gotShared.Load(), maxShared.Load())
			// Everything was released: an exclusive lock is free.
			c, err := fs.Lock(name)
			if err != nil {
				t.Fatalf("lock after all releases: %v", err)
			}
			c.Close()
		})
	}
}

func TestFaultFSLockShared(t *testing.T) {
	mem := NewMem()
	if err := WriteFile(mem, "/LOCK", nil); err != nil {
		t.Fatal(err)
	}
	cd := NewCountdown(OpLock, 1, false)
	fs := NewFault(mem, cd)
	if c, err := fs.LockShared("/LOCK"); !errors.Is(err, ErrInjected) || c != nil {
		t.Fatalf("first LockShared: %v, want an injected fault", err)
	}
	// The faulted take reached nothing: an exclusive lock is free.
	c, err := fs.Lock("/LOCK")
	if err != nil {
		t.Fatalf("Lock after faulted LockShared: %v", err)
	}
	if _, err := fs.LockShared("/LOCK"); !errors.Is(err, ErrLocked) {
		t.Fatalf("LockShared beside Lock through FaultFS: %v", err)
	}
	c.Close()
	if n := cd.Count(); n != 3 {
		t.Fatalf("OpLock counted %d operations, want 3 (LockShared counts as OpLock)", n)
	}
	fs.SetInjector(NewRandom(OpAll&^OpLock, 1, 1))
	c, err = fs.LockShared("/LOCK")
	if err != nil {
		t.Fatalf("LockShared faulted by a mask without OpLock: %v", err)
	}
	c.Close()
}

func TestMemFSCrashCloneDropsLocks(t *testing.T) {
	fs := NewMem()
	fs.MkdirAll("/db", 0o755)
	for _, f := range []string{"/db/LOCK", "/db/SHARED"} {
		if err := WriteFile(fs, f, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := SyncDir(fs, "/"); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(fs, "/db"); err != nil {
		t.Fatal(err)
	}
	x, err := fs.Lock("/db/LOCK")
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	sh, err := fs.LockShared("/db/SHARED")
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()

	c := fs.CrashClone(CrashOptions{})
	for _, f := range []string{"/db/LOCK", "/db/SHARED"} {
		l, err := c.Lock(f)
		if err != nil {
			t.Fatalf("clone inherited the lock on %s: %v", f, err)
		}
		l.Close()
	}
	// The original's locks are still held.
	if _, err := fs.LockShared("/db/LOCK"); !errors.Is(err, ErrLocked) {
		t.Fatalf("original exclusive lock lost: %v", err)
	}
	if _, err := fs.Lock("/db/SHARED"); !errors.Is(err, ErrLocked) {
		t.Fatalf("original shared lock lost: %v", err)
	}
}

// TestLockTable checks the in-process table that stands in for flock where
// there is none; its logic is the same on every platform.
func TestLockTable(t *testing.T) {
	var tb lockTable
	step := func(ok bool, want bool, what string) {
		t.Helper()
		if ok != want {
			t.Fatalf("%s: got %v, want %v (table %v)", what, ok, want, tb.m)
		}
	}
	step(tb.acquire("a", true), true, "shared a")
	step(tb.acquire("a", true), true, "second shared a")
	step(tb.acquire("a", false), false, "exclusive a beside shared")
	step(tb.acquire("b", false), true, "exclusive b (keys independent)")
	step(tb.acquire("b", true), false, "shared b beside exclusive")
	step(tb.acquire("b", false), false, "exclusive b beside exclusive")
	// A release of the wrong kind, or of a key not held, changes nothing.
	tb.release("b", true)
	tb.release("a", false)
	tb.release("c", true)
	step(tb.acquire("b", true), false, "shared b after a mismatched release")
	step(tb.acquire("a", false), false, "exclusive a after a mismatched release")
	tb.release("a", true)
	step(tb.acquire("a", false), false, "exclusive a with one shared left")
	tb.release("a", true)
	step(tb.acquire("a", false), true, "exclusive a after the last shared release")
	tb.release("b", false)
	step(tb.acquire("b", true), true, "shared b after the exclusive release")
	tb.release("a", false)
	tb.release("b", true)
	if len(tb.m) != 0 {
		t.Fatalf("table not empty after every release: %v", tb.m)
	}
}
