package kv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"

	"github.com/warpkit/warpkit/kv/vfs"
)

// TestConcurrentReadersAndWriters runs writers on disjoint key sets with
// readers, iterators and snapshots alongside (meant for -race). Each writer
// checks its own keys; snapshot readers check that a snapshot never
// changes; iterators check order.
func TestConcurrentReadersAndWriters(t *testing.T) {
	opts := smallOptions()
	opts.FS = vfs.NewMem()
	opts.MaxConcurrentCompactions = 2
	runConcurrent(t, opts)
}

// runConcurrent is TestConcurrentReadersAndWriters with the given options.
func runConcurrent(t *testing.T, opts Options) {
	db, err := Open("/db", &opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const writers, perWriter = 4, 1500
	n := perWriter
	if testing.Short() {
		n = 400
	}
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				k := []byte(fmt.Sprintf("w%d/%05d", w, i%300))
				v := []byte(fmt.Sprintf("%d", i))
				var err error
				switch i % 10 {
				case 9:
					err = db.Delete(k, nil)
				case 8:
					b := db.NewBatch()
					b.Set(k, v)
					b.Set(append(k, 'x'), v)
					err = b.Commit(Sync)
				default:
					err = db.Set(k, v, nil)
				}
				if err != nil {
					errc <- err
					return
				}
				if i%10 != 9 {
					got, err := db.Get(k)
					if err != nil || !bytes.Equal(got, v) {
						errc <- fmt.Errorf("writer %d: read own write %s: %q %v", w, k, got, err)
						return
					}
				}
			}
		}()
	}
	stop := make(chan struct{})
	var rg sync.WaitGroup
	rg.Add(3)
	go func() { // iterators
		defer rg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			it, err := db.NewIter(nil)
			if err != nil {
				errc <- err
				return
			}
			var prev []byte
			for k := range it.All() {
				if prev != nil && bytes.Compare(prev, k) >= 0 {
					errc <- fmt.Errorf("iterator out of order: %q then %q", prev, k)
				}
				prev = append(prev[:0], k...)
			}
			if err := it.Error(); err != nil {
				errc <- err
			}
			it.Close()
		}
	}()
	go func() { // snapshots do not change
		defer rg.Done()
		eachSnapshot(db, stop, errc, func(s *Snapshot) error {
			before := map[string]string{}
			for i := range 50 {
				k := fmt.Sprintf("w%d/%05d", i%writers, i)
				v, err := s.Get([]byte(k))
				if err != nil && !errors.Is(err, ErrNotFound) {
					errc <- err
				}
				before[k] = string(v)
			}
			db.Flush()
			for k, v := range before {
				got, _ := s.Get([]byte(k))
				if string(got) != v {
					errc <- fmt.Errorf("snapshot changed: %s was %q, now %q", k, v, got)
				}
			}
			return nil
		})
	}()
	go func() { // metrics and manual compactions
		defer rg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = db.Metrics().String()
			if err := db.Compact(context.Background(), []byte("w1/"), []byte("w2/")); err != nil {
				errc <- err
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	rg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	// Final state: each writer's last value per key.
	for w := range writers {
		for k := range 300 {
			last := -1
			for i := range n {
				if i%300 == k {
					last = i
				}
			}
			if last < 0 {
				continue
			}
			key := []byte(fmt.Sprintf("w%d/%05d", w, k))
			v, err := db.Get(key)
			if last%10 == 9 {
				if !errors.Is(err, ErrNotFound) {
					t.Fatalf("%s should be deleted: %q %v", key, v, err)
				}
			} else if string(v) != fmt.Sprint(last) {
				t.Fatalf("%s = %q, %v; want %d", key, v, err, last)
			}
		}
	}
}

func TestAPIErrors(t *testing.T) {
	fs := vfs.NewMem()
	if _, err := Open("/top/db", &Options{FS: fs, ErrorIfNotExists: true}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("ErrorIfNotExists: %v", err)
	}
	if _, err := fs.Stat("/top"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed ErrorIfNotExists Open created directories: %v", err)
	}
	if _, err := Open("/db", &Options{FS: fs, MemTableSize: 10}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("tiny memtable: %v", err)
	}
	if _, err := Open("/db", &Options{FS: fs, L0SlowdownWritesThreshold: 20, L0StopWritesThreshold: 10}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("thresholds out of order: %v", err)
	}
	db, err := Open("/db", &Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open("/db", &Options{FS: fs}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v", err)
	}
	if _, err := db.NewIter(&IterOptions{LowerBound: []byte("b"), UpperBound: []byte("a")}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("inverted bounds: %v", err)
	}
	if err := db.Compact(context.Background(), []byte("b"), []byte("a")); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("inverted compaction range: %v", err)
	}
	b := db.NewBatch()
	b.Set([]byte("k"), []byte("v"))
	if err := b.Commit(nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("double commit: %v", err)
	}
	b.Reset()
	b.Set([]byte(""), []byte("empty key"))
	b.DeleteRange([]byte("z"), []byte("a")) // empty range: no effect
	if err := b.Commit(nil); err != nil {
		t.Fatal(err)
	}
	mustGet(t, db, "", "empty key")
	mustGet(t, db, "k", "v")
	s, _ := db.NewSnapshot()
	it, _ := db.NewIter(nil)
	if err := db.Close(); err == nil || !bytes.Contains([]byte(err.Error()), []byte("iterators")) {
		t.Fatalf("Close with an open iterator: %v", err)
	}
	it.Close()
	s.Close()
	if err := db.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	if err := db.Set([]byte("x"), nil, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Set after Close: %v", err)
	}
	if _, err := db.Get([]byte("k")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	if _, err := db.NewIter(nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("NewIter after Close: %v", err)
	}
	if _, err := Open("/db", &Options{FS: fs, ErrorIfExists: true}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("ErrorIfExists: %v", err)
	}
	if fs.OpenFiles() != 0 {
		t.Fatalf("%d files left open after Close", fs.OpenFiles())
	}
}

// TestLargeValues writes values larger than a memtable: each gets a
// memtable of its own and survives flushes, compactions and a reopen.
func TestLargeValues(t *testing.T) {
	opts := smallOptions() // 64 KiB memtables
	mem := vfs.NewMem()
	opts.FS = mem
	db, err := Open("/db", &opts)
	if err != nil {
		t.Fatal(err)
	}
	big := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i)}, 300<<10+i) }
	for i := range 5 {
		if err := db.Set([]byte(fmt.Sprintf("big%d", i)), big(i), nil); err != nil {
			t.Fatal(err)
		}
		db.Set([]byte(fmt.Sprintf("small%d", i)), []byte("s"), nil)
	}
	b := db.NewBatch()
	for i := range 3 {
		b.Set([]byte(fmt.Sprintf("batch%d", i)), big(i))
	}
	if err := b.Commit(Sync); err != nil {
		t.Fatal(err)
	}
	check := func() {
		for i := range 5 {
			v, err := db.Get([]byte(fmt.Sprintf("big%d", i)))
			if err != nil || !bytes.Equal(v, big(i)) {
				t.Fatalf("big%d: %d bytes, %v", i, len(v), err)
			}
		}
		for i := range 3 {
			v, err := db.Get([]byte(fmt.Sprintf("batch%d", i)))
			if err != nil || !bytes.Equal(v, big(i)) {
				t.Fatalf("batch%d: %d bytes, %v", i, len(v), err)
			}
		}
	}
	check()
	if err := db.Compact(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	check()
	db.Close()
	if db, err = Open("/db", &opts); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	check()
}

// TestConcurrentApplyVisibility stresses the commit pipeline's concurrent
// memtable application: writers commit two-key batches while memtables
// rotate underneath; every snapshot must show each batch whole (both keys of
// a writer equal) and a writer's progress must never go backwards.
func TestConcurrentApplyVisibility(t *testing.T) { concurrentApplyVisibility(t) }

func concurrentApplyVisibility(t *testing.T) {
	opts := smallOptions()
	opts.FS = vfs.NewMem()
	opts.MemTableSize = 64 << 10 // rotations while batches are being applied
	db, err := Open("/db", &opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const writers = 8
	n := 2000
	if testing.Short() {
		n = 500
	}
	var wg, rg sync.WaitGroup
	stop := make(chan struct{})
	errc := make(chan error, 2*writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pad := bytes.Repeat([]byte{'p'}, 64)
			for c := 1; c <= n; c++ {
				v := append(fmt.Appendf(nil, "%08d", c), pad...)
				b := db.NewBatch()
				b.Set(fmt.Appendf(nil, "a/%d", w), v)
				b.Set(fmt.Appendf(nil, "b/%d", w), v)
				if err := b.Commit(nil); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	for range 2 {
		rg.Add(1)
		go func() {
			defer rg.Done()
			last := make([]string, writers)
			eachSnapshot(db, stop, errc, func(s *Snapshot) error {
				for w := range writers {
					a, errA := s.Get(fmt.Appendf(nil, "a/%d", w))
					b, errB := s.Get(fmt.Appendf(nil, "b/%d", w))
					if (errA == nil) != (errB == nil) || !bytes.Equal(a, b) {
						return fmt.Errorf("writer %d: a %.8q (%v) but b %.8q (%v) in one snapshot", w, a, errA, b, errB)
					}
					if errA == nil {
						cur := string(a[:8])
						if cur < last[w] {
							return fmt.Errorf("writer %d went back from %s to %s", w, last[w], cur)
						}
						last[w] = cur
					}
				}
				return nil
			})
		}()
	}
	wg.Wait()
	close(stop)
	rg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	for w := range writers {
		v, err := db.Get(fmt.Appendf(nil, "b/%d", w))
		if err != nil || string(v[:8]) != fmt.Sprintf("%08d", n) {
			t.Fatalf("writer %d: final value %.8q, %v", w, v, err)
		}
	}
	if err := db.CheckIntegrity(); err != nil {
		t.Fatal(err)
	}
}

// eachSnapshot calls f with a new snapshot of db, closing it after, until
// stop is closed or f (or NewSnapshot) fails; the error goes to errc.
func eachSnapshot(db *DB, stop <-chan struct{}, errc chan<- error, f func(*Snapshot) error) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		s, err := db.NewSnapshot()
		if err != nil {
			errc <- err
			return
		}
		err = f(s)
		s.Close()
		if err != nil {
			errc <- err
			return
		}
	}
}

// TestCommitModes runs the concurrency suites in each of the commit
// pipeline's modes, whatever this machine's processor count picks: writers
// watching for their events or parking at once, and each applying its own
// batch or the leader applying its group's.
func TestCommitModes(t *testing.T) {
	for _, m := range []struct {
		name          string
		spins         int
		leaderApplies bool
	}{
		{"park/own", 0, false},
		{"park/leader", 0, true},
		{"watch/own", commitSpins, false},
		{"watch/leader", commitSpins, true},
	} {
		t.Run(m.name, func(t *testing.T) {
			old := commitModeFor
			commitModeFor = func(procs int) (int, int32, bool) { return m.spins, int32(max(procs/2, 1)), m.leaderApplies }
			defer func() { commitModeFor = old }()
			t.Run("ReadersAndWriters", func(t *testing.T) {
				opts := smallOptions()
				opts.FS = vfs.NewMem()
				opts.MaxConcurrentCompactions = 2
				runConcurrent(t, opts)
			})
			t.Run("ApplyVisibility", concurrentApplyVisibility)
			t.Run("CloseWhileWriting", closeWhileWriting)
		})
	}
}

// closeWhileWriting closes the store while writers commit: every write
// returns nil or ErrClosed, Close returns (no writer is left waiting in the
// pipeline), and the reopened store has every write that returned nil.
func closeWhileWriting(t *testing.T) {
	opts := smallOptions()
	fs := vfs.NewMem()
	opts.FS = fs
	db, err := Open("/db", &opts)
	if err != nil {
		t.Fatal(err)
	}
	const writers = 8
	acked := make([][]int, writers)
	var wg sync.WaitGroup
	errc := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				err := db.Set(fmt.Appendf(nil, "w%d/%06d", w, i), []byte("v"), nil)
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					errc <- err
					return
				}
				acked[w] = append(acked[w], i)
			}
		}()
	}
	for db.Metrics().WAL.CommitGroups < 200 {
		runtime.Gosched()
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	db, err = Open("/db", &opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for w := range writers {
		for _, i := range acked[w] {
			if _, err := db.Get(fmt.Appendf(nil, "w%d/%06d", w, i)); err != nil {
				t.Fatalf("writer %d: acknowledged write %d after reopen: %v", w, i, err)
			}
		}
	}
}
