package gpucompact

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warpkit/warpkit"
	kvstore "github.com/warpkit/warpkit/kv"
	"github.com/warpkit/warpkit/kv/compaction"
	ct "github.com/warpkit/warpkit/kv/compaction/compactiontest"
	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/manifest"
	"github.com/warpkit/warpkit/kv/record"
	"github.com/warpkit/warpkit/kv/sstable"
	"github.com/warpkit/warpkit/kv/vfs"
)

// outputsOf reads a job's output files.
func outputsOf(t *testing.T, e *ct.Env, res *compaction.Result) [][]byte {
	t.Helper()
	var out [][]byte
	for _, o := range res.Outputs {
		out = append(out, readFile(t, e, o))
	}
	return out
}

// sameFiles fails the test unless got holds the tables of want, byte for
// byte, in order (what names the case).
func sameFiles(t *testing.T, what string, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d outputs, compaction.CPU %d", what, len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("%s: output %d differs from compaction.CPU's (%d bytes, compaction.CPU %d)", what, i, len(got[i]), len(want[i]))
		}
	}
}

// TestFallbackAtEveryStage: an engine failure at any stage reruns the job
// on Fallback, whose tables are then exactly what it writes on its own, and
// counts the failure by stage.
func TestFallbackAtEveryStage(t *testing.T) {
	base := runtime.NumGoroutine()
	for i, stage := range []string{"load", "merge", "gc", "sizes", "plan", "encode", "write"} {
		rng := func() *rand.Rand { return rand.New(rand.NewPCG(uint64(i), 46)) }
		e0 := ct.NewEnv()
		job0, _, _ := ct.RandomJob(t, rng(), e0)
		want, err := compaction.CPU{Parts: 1}.Compact(context.Background(), job0)
		if err != nil {
			t.Fatal(err)
		}
		c, err := New(Options{Fallback: compaction.CPU{Parts: 1}, MinInputBytes: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.failAt = func(s string) error {
			if s == stage {
				return errors.New("injected")
			}
			return nil
		}
		e := ct.NewEnv()
		job, _, _ := ct.RandomJob(t, rng(), e)
		got, err := c.Compact(context.Background(), job)
		if err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
		sameFiles(t, stage, outputsOf(t, e, got), outputsOf(t, e0, want))
		st := c.Stats()
		if st.Fallbacks[stage] != 1 || st.FallbackJobs != 1 || st.EngineJobs != 0 {
			t.Fatalf("%s: stats %+v", stage, st)
		}
		if got.Stats.Fallback != stage || got.Stats.Engine != "" {
			t.Fatalf("%s: result stats say engine %q, fallback %q", stage, got.Stats.Engine, got.Stats.Fallback)
		}
		if e.Held() != 0 {
			t.Fatalf("%s: %d readers held", stage, e.Held())
		}
		if n := goroutinesBackTo(base); n > base {
			t.Fatalf("%s: %d goroutines after the fallback, %d before", stage, n, base)
		}
	}
}

// goroutinesBackTo waits up to a second for the goroutine count to come
// back to base (a finished goroutine leaves the count a moment after it
// signals), and returns the count.
func goroutinesBackTo(base int) int {
	n := runtime.NumGoroutine()
	for deadline := time.Now().Add(time.Second); n > base && time.Now().Before(deadline); n = runtime.NumGoroutine() {
		time.Sleep(time.Millisecond)
	}
	return n
}

// TestDecisionAndClose: jobs below the threshold go to Fallback without
// counting as failures; a closed Compactor refuses jobs.
func TestDecisionAndClose(t *testing.T) {
	e := ct.NewEnv()
	job, _, _ := ct.RandomJob(t, rand.New(rand.NewPCG(1, 47)), e)
	c, err := New(Options{}) // 8 MiB threshold: this job is a few KiB
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compact(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.FallbackJobs != 1 || st.EngineJobs != 0 || len(st.Fallbacks) != 0 {
		t.Fatalf("small job: stats %+v", st)
	}
	c2, _ := New(Options{MinInputTables: 100, MinInputBytes: -1})
	if _, err := c2.Compact(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	if st := c2.Stats(); st.FallbackJobs != 1 {
		t.Fatalf("few tables: stats %+v", st)
	}
	if _, err := New(Options{MinInputTables: -1}); err == nil {
		t.Fatal("New took MinInputTables -1")
	}
	for _, chunk := range []int64{-1, 1, 64<<10 - 1, 1<<30 + 1} {
		if _, err := New(Options{ChunkBytes: chunk}); !errors.Is(err, warpkit.ErrInvalidArgument) {
			t.Fatalf("New with ChunkBytes %d: %v", chunk, err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compact(context.Background(), job); !errors.Is(err, ErrClosed) {
		t.Fatalf("Compact after Close: %v", err)
	}
	if err := c.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
}

// TestDecisionModule: a job over the memory budget, a job arriving while
// the engine is busy, and every job after MaxEngineFailures consecutive
// failures go to Fallback, counted by reason, with Fallback's own output;
// WaitWhenBusy waits for the engine instead, or for the job's context.
func TestDecisionModule(t *testing.T) {
	newJob := func() (*ct.Env, *compaction.Job) {
		e := ct.NewEnv()
		job, _, _ := ct.RandomJob(t, rand.New(rand.NewPCG(2, 47)), e)
		return e, job
	}
	e0, job0 := newJob()
	want, err := compaction.CPU{Parts: 1}.Compact(context.Background(), job0)
	if err != nil {
		t.Fatal(err)
	}
	wantFiles := outputsOf(t, e0, want)
	check := func(name string, c *Compactor, reason string, n uint64) {
		t.Helper()
		e, job := newJob()
		got, err := c.Compact(context.Background(), job)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sameFiles(t, name, outputsOf(t, e, got), wantFiles)
		if st := c.Stats(); st.Declined[reason] != n {
			t.Fatalf("%s: stats %+v, want %d declined for %q", name, st, n, reason)
		}
	}
	fallback := compaction.CPU{Parts: 1}

	// The budget: this job's estimate is some KiB.
	c, _ := New(Options{Fallback: fallback, MinInputBytes: -1, MemoryBudget: 1 << 10})
	check("over budget", c, "budget", 1)
	if st := c.Stats(); st.EngineJobs != 0 || st.FallbackJobs != 1 {
		t.Fatalf("over budget: stats %+v", st)
	}
	c, _ = New(Options{Fallback: fallback, MinInputBytes: -1, MemoryBudget: -1})
	check("no budget", c, "budget", 0)
	if st := c.Stats(); st.EngineJobs != 1 {
		t.Fatalf("no budget: stats %+v", st)
	}

	// Busy: the engine's slot taken.
	c, _ = New(Options{Backend: warpkit.CPU, Fallback: fallback, MinInputBytes: -1})
	sl := <-c.engine
	check("busy", c, "busy", 1)
	c.engine <- sl
	check("free", c, "busy", 1)
	if st := c.Stats(); st.EngineJobs != 1 {
		t.Fatalf("free: stats %+v", st)
	}
	c, _ = New(Options{Backend: warpkit.CPU, Fallback: fallback, MinInputBytes: -1, WhenBusy: WaitWhenBusy})
	sl = <-c.engine
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	_, job := newJob()
	if _, err := c.Compact(ctx, job); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting for a busy engine past the deadline: %v", err)
	}
	cancel()
	go func() {
		time.Sleep(10 * time.Millisecond)
		c.engine <- sl
	}()
	check("waited", c, "busy", 0)
	if st := c.Stats(); st.EngineJobs != 1 {
		t.Fatalf("waited: stats %+v", st)
	}
	if _, err := New(Options{WhenBusy: 7}); err == nil {
		t.Fatal("New took WhenBusy 7")
	}
	if _, err := New(Options{Sort: 2}); err == nil {
		t.Fatal("New took Sort 2")
	}

	// Two consecutive failures turn the engine off; a success between
	// failures resets the count.
	c, _ = New(Options{Fallback: fallback, MinInputBytes: -1, MaxEngineFailures: 2})
	fail := true
	var calls atomic.Int64 // failAt is called from the encoders too
	c.failAt = func(stage string) error {
		calls.Add(1)
		if fail && stage == "merge" {
			return errors.New("injected")
		}
		return nil
	}
	check("failure 1", c, "disabled", 0)
	fail = false
	check("success", c, "disabled", 0)
	fail = true
	check("failure 2", c, "disabled", 0)
	if c.Stats().Disabled {
		t.Fatal("engine off after failures that a success separated")
	}
	check("failure 3", c, "disabled", 0)
	if !c.Stats().Disabled {
		t.Fatal("engine still on after two consecutive failures")
	}
	before := calls.Load()
	check("off", c, "disabled", 1)
	if calls.Load() != before {
		t.Fatal("the engine ran after it was turned off")
	}
	if st := c.Stats(); st.Fallbacks["merge"] != 3 || st.EngineJobs != 1 {
		t.Fatalf("off: stats %+v", st)
	}
}

// TestMemoryEstimate: the decision module's estimate bounds what the
// engine allocates for a job (all of it, so its peak too), but for the
// in-memory file system's copies of the outputs.
func TestMemoryEstimate(t *testing.T) {
	for _, valueLen := range []int{0, 16, 100, 1024, 8192} {
		_, job := benchJob(t, 2, valueLen)
		for _, target := range []uint64{64 << 10, 4 << 20} {
			job.TargetFileSize = target
			size, err := memoryEstimate(job)
			if err != nil {
				t.Fatal(err)
			}
			est, contents := size.est, size.contents
			// The least of three runs: TotalAlloc counts every goroutine's
			// allocations, and others (an earlier test's, still winding
			// down on a loaded machine) can only add to one run's.
			alloc := uint64(math.MaxUint64)
			for range 3 {
				var m0, m1 runtime.MemStats
				runtime.ReadMemStats(&m0)
				res, err := runGo(context.Background(), job, &workspace{}, &stageTimes{}, nil)
				if err != nil {
					t.Fatal(err)
				}
				runtime.ReadMemStats(&m1)
				// The in-memory files' chunks: at most twice what they hold.
				alloc = min(alloc, m1.TotalAlloc-m0.TotalAlloc-min(m1.TotalAlloc-m0.TotalAlloc, 2*res.Stats.BytesWritten))
			}
			if alloc > est || contents == 0 {
				t.Fatalf("%d-byte values, %d KiB outputs: the engine allocated %d bytes, the estimate is %d (contents %d)", valueLen, target>>10, alloc, est, contents)
			}
			t.Logf("%d-byte values, %d KiB outputs: allocated %d bytes, estimate %d (%.2fx), contents %d", valueLen, target>>10, alloc, est, float64(est)/float64(alloc), contents)
		}
	}
}

// TestCorruptInputNoFallback: damaged input gives compaction.CPU's
// corruption error, and is not rerun (Fallback would meet it too).
func TestCorruptInputNoFallback(t *testing.T) {
	e := ct.NewEnv()
	job, _, _ := ct.RandomJob(t, rand.New(rand.NewPCG(2, 48)), e)
	// Damage the middle of the first L1 table's data.
	name, data, blocks := tableData(t, e, job.Inputs[1].Files[0])
	data[blocks[0].Offset+blocks[0].Length/2] ^= 0x20
	fileOf(t, e.FS(), name, data)

	_, cpuErr := compaction.CPU{Parts: 1}.Compact(context.Background(), job)
	c, _ := New(Options{MinInputBytes: -1})
	_, err := c.Compact(context.Background(), job)
	var ce, cpuCE *base.CorruptionError
	if !errors.As(err, &ce) || !errors.As(cpuErr, &cpuCE) || *ce != *cpuCE {
		t.Fatalf("engine: %v; compaction.CPU: %v", err, cpuErr)
	}
	if st := c.Stats(); len(st.Fallbacks) != 0 || st.FallbackJobs != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// tableData returns a table's file name, bytes and data blocks, for a test
// to damage them and write them back (fileOf).
func tableData(t *testing.T, e *ct.Env, f *manifest.FileMetadata) (string, []byte, []sstable.BlockHandle) {
	t.Helper()
	name := fmt.Sprintf("/%s.sst", f.FileNum)
	file, err := e.FS().Open(name)
	if err != nil {
		t.Fatal(err)
	}
	size, _ := file.Size()
	data := make([]byte, size)
	file.ReadAt(data, 0)
	file.Close()
	r, err := sstable.NewReader(fileOf(t, e.FS(), name, data), sstable.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := r.DataBlocks()
	if err != nil {
		t.Fatal(err)
	}
	return name, data, blocks
}

// fileOf (re)writes name with data and opens it.
func fileOf(t *testing.T, fs *vfs.MemFS, name string, data []byte) vfs.File {
	t.Helper()
	w, err := fs.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(data)
	w.Close()
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestStoreOnGoEngine runs a kv store whose every compaction goes through
// the Go engine — writes, overwrites, deletes, range deletions, snapshots
// held across compactions — and checks every snapshot and the final state
// against a model; then again with 8 KiB outputs and a MemoryBudget so
// small that half the jobs run in key-range partitions.
func TestStoreOnGoEngine(t *testing.T) {
	t.Run("whole", func(t *testing.T) { checkStoreOnGoEngine(t, 0, 16<<10) })
	t.Run("partitions", func(t *testing.T) { checkStoreOnGoEngine(t, 4<<20, 8<<10) })
}

func checkStoreOnGoEngine(t *testing.T, budget, target int64) {
	c, err := New(Options{MinInputBytes: -1, MemoryBudget: budget})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	db, err := kvstore.Open("/db", &kvstore.Options{
		FS: vfs.NewMem(), Compactor: c, MemTableSize: 64 << 10, TargetFileSize: target,
		LBaseMaxBytes: 64 << 10, L0CompactionThreshold: 2, BlockSize: 512,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rng := rand.New(rand.NewPCG(7, 49))
	model := map[string]string{}
	type snap struct {
		s     *kvstore.Snapshot
		model map[string]string
	}
	var snaps []snap
	ops := 20000
	if testing.Short() {
		ops = 6000
	}
	for i := range ops {
		k := fmt.Sprintf("key%05d", rng.IntN(3000))
		switch r := rng.IntN(100); {
		case r < 70:
			v := fmt.Sprintf("v%d-%s", i, bytes.Repeat([]byte{'x'}, rng.IntN(60)))
			if err := db.Set([]byte(k), []byte(v), nil); err != nil {
				t.Fatal(err)
			}
			model[k] = v
		case r < 95:
			if err := db.Delete([]byte(k), nil); err != nil {
				t.Fatal(err)
			}
			delete(model, k)
		case r < 97:
			end := fmt.Sprintf("key%05d", rng.IntN(3000))
			if end < k {
				k, end = end, k
			}
			if err := db.DeleteRange([]byte(k), []byte(end), nil); err != nil {
				t.Fatal(err)
			}
			for mk := range model {
				if mk >= k && mk < end {
					delete(model, mk)
				}
			}
		default:
			s, err := db.NewSnapshot()
			if err != nil {
				t.Fatal(err)
			}
			cp := make(map[string]string, len(model))
			for k, v := range model {
				cp[k] = v
			}
			snaps = append(snaps, snap{s, cp})
		}
	}
	if err := db.Compact(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	check := func(get func([]byte) ([]byte, error), m map[string]string, what string) {
		for i := range 3000 {
			k := fmt.Sprintf("key%05d", i)
			v, err := get([]byte(k))
			want, ok := m[k]
			switch {
			case ok && (err != nil || string(v) != want):
				t.Fatalf("%s: %s = %q, %v; want %q", what, k, v, err, want)
			case !ok && !errors.Is(err, kvstore.ErrNotFound):
				t.Fatalf("%s: %s = %q, %v; want not found", what, k, v, err)
			}
		}
	}
	check(db.Get, model, "latest")
	for i, s := range snaps {
		check(s.s.Get, s.model, fmt.Sprintf("snapshot %d", i))
		s.s.Close()
	}
	st := c.Stats()
	if st.EngineJobs == 0 || len(st.Fallbacks) != 0 || budget > 0 && st.PartitionedJobs == 0 {
		t.Fatalf("stats %+v", st)
	}
	t.Logf("stats: %d engine jobs, %d of them in %d partitions, declined %v", st.EngineJobs, st.PartitionedJobs, st.Partitions, st.Declined)
	if a := db.Metrics().Compaction.Accelerated; a.Count != int64(st.EngineJobs) || a.BytesRead != int64(st.EngineBytesRead) || a.Fallbacks != 0 || a.Time <= 0 {
		t.Fatalf("kv metrics %+v, compactor stats %+v", a, st)
	}
	if err := db.CheckIntegrity(); err != nil {
		t.Fatal(err)
	}
}

// TestCancelMidJob: a job whose context ends while the plan walk creates
// its outputs returns the context's error (kv takes that as a cancelled
// job, not a failure of the store), leaves no goroutine behind, and counts
// no failure.
func TestCancelMidJob(t *testing.T) {
	base := runtime.NumGoroutine()
	e, job := benchJob(t, 2, 16)
	job.TargetFileSize = 16 << 10 // dozens of outputs
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	creates := 0
	e.CreateHook = func() error {
		if creates++; creates == 3 {
			cancel()
		}
		return nil
	}
	c, _ := New(Options{MinInputBytes: -1})
	_, err := c.Compact(ctx, job)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Compact: %v, want context.Canceled", err)
	}
	if st := c.Stats(); len(st.Fallbacks) != 0 || st.FallbackJobs != 0 || st.EngineJobs != 0 {
		t.Fatalf("stats %+v", st)
	}
	if n := goroutinesBackTo(base); n > base {
		t.Fatalf("%d goroutines after the cancelled job, %d before", n, base)
	}
}

// TestOpenOutputsBounded: however many outputs a job has, the engine keeps
// at most maxOpenTables of them open at once.
func TestOpenOutputsBounded(t *testing.T) {
	e, job := benchJob(t, 2, 16)
	job.TargetFileSize = uint64(2<<20) / uint64(12*maxOpenTables(0)) // about 6 outputs per slot (Snappy halves the contents)
	outputs := countOpen(job)
	res, err := runGo(context.Background(), job, &workspace{}, &stageTimes{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Outputs) < 4*maxOpenTables(0) {
		t.Fatalf("%d outputs: too few for this test", len(res.Outputs))
	}
	if open, peak := outputs.now(); peak > maxOpenTables(0) || open != 0 {
		t.Fatalf("%d outputs: %d open at once (at most %d), %d left open", len(res.Outputs), peak, maxOpenTables(0), open)
	}
	_ = e
}

// openCount counts a job's output tables open now and at most at once
// (countOpen).
type openCount struct {
	mu         sync.Mutex
	open, peak int
}

// countOpen wraps job's CreateTable to count the outputs it opens until
// they are closed.
func countOpen(job *compaction.Job) *openCount {
	c := &openCount{}
	create := job.Env.CreateTable
	job.Env.CreateTable = func() (base.FileNum, vfs.File, error) {
		n, f, err := create()
		if err == nil {
			c.mu.Lock()
			c.open++
			c.peak = max(c.peak, c.open)
			c.mu.Unlock()
			f = &closeCounter{File: f, closed: func() { c.mu.Lock(); c.open--; c.mu.Unlock() }}
		}
		return n, f, err
	}
	return c
}

// now returns the outputs open now and at most at once since the last
// reset.
func (c *openCount) now() (open, peak int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open, c.peak
}

// reset starts the peak again from the outputs open now.
func (c *openCount) reset() {
	c.mu.Lock()
	c.peak = c.open
	c.mu.Unlock()
}

// closeCounter calls closed once when the file is closed.
type closeCounter struct {
	vfs.File
	once   sync.Once
	closed func()
}

func (c *closeCounter) Close() error {
	c.once.Do(c.closed)
	return c.File.Close()
}

// TestWaitingJobAfterClose: a job waiting for the busy engine when the
// Compactor closes gets ErrClosed, not a run on a dropped workspace.
func TestWaitingJobAfterClose(t *testing.T) {
	_, job := benchJob(t, 1, 16)
	c, _ := New(Options{MinInputBytes: -1, WhenBusy: WaitWhenBusy})
	sl := <-c.engine // busy
	done := make(chan error, 1)
	go func() {
		_, err := c.Compact(context.Background(), job)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond) // let it wait
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// The running job (here: the slot held) retires its slot when it ends:
	// none comes back, and the waiting job must not wait for one.
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("the waiting job: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting job still waits after Close")
	}
	c.mu.Lock()
	c.retireLocked(sl)
	c.mu.Unlock()
	if st := c.Stats(); st.EngineJobs != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestLyingBlockLength: a compressed block whose header claims more
// contents than the table has (its checksum made to match) is corruption,
// found before the arena is sized from it.
func TestLyingBlockLength(t *testing.T) {
	e := ct.NewEnv()
	var es []ct.Entry
	for i := range 3000 {
		es = append(es, ct.Entry{K: base.MakeInternalKey([]byte(fmt.Sprintf("k%05d", i)), base.SeqNum(i+1), base.KindSet), V: fmt.Sprintf("value %d of a table of 3000", i)})
	}
	f := e.TableWith(t, es, nil, sstable.WriterOptions{BlockSize: 64 << 10, Compression: sstable.SnappyCompression})
	name, data, blocks := tableData(t, e, f)
	h := blocks[1]
	body := data[h.Offset : h.Offset+h.Length]
	if data[h.Offset+h.Length] != byte(sstable.SnappyCompression) {
		t.Fatal("block 1 is not compressed")
	}
	// The Snappy header: the contents' length as a uvarint. Claim the most
	// its bytes can say (2 MiB for the 3 bytes of a 64 KiB block's).
	_, n := binary.Uvarint(body)
	if n != 3 {
		t.Fatalf("a header of %d bytes; the test wants 3", n)
	}
	hdr := binary.AppendUvarint(nil, 1<<21-1)
	copy(body, hdr)
	fixChecksum(data, h)
	fileOf(t, e.FS(), name, data)

	env := e.Env()
	env.WriterOptions.Compression = sstable.SnappyCompression
	job := &compaction.Job{Inputs: []compaction.Input{{Level: 1, Files: []*manifest.FileMetadata{f}}}, OutputLevel: 2, TargetFileSize: 1 << 20, Env: env}
	ws := &workspace{}
	_, err := loadJob(context.Background(), job, ws, nil)
	var ce *base.CorruptionError
	if !errors.As(err, &ce) {
		t.Fatalf("loadJob: %v, want a corruption error", err)
	}
	if cap(ws.arena) > 512<<10 {
		t.Fatalf("the arena grew to %d bytes from the lying header", cap(ws.arena))
	}
}

// TestDamagedInput: checkDamaged on the Go engine.
func TestDamagedInput(t *testing.T) {
	rounds := 300
	if testing.Short() {
		rounds = 60
	}
	checkDamaged(t, rounds, Options{Backend: warpkit.CPU})
	checkDamagedSnappy(t, rounds/10, Options{Backend: warpkit.CPU})
}

// checkDamaged: a job with an input block damaged where its checksum cannot
// see it (the checksum recomputed after the damage: a byte patched into
// a header, a key or a restart array) gives, on a Compactor with opts, what
// it gives on compaction.CPU{Parts: 1}: the same corruption error, the same
// tables, or, where compaction.CPU fails otherwise (keys out of order,
// met before the corrupt entry by its streaming merge), the same error or
// a corruption error. The engine meets the damage (corruption)
// or declines the job ("irregular": entries out of order, or a block the
// CUDA engine cannot decode by restart interval) or takes it.
func checkDamaged(t *testing.T, rounds int, opts Options) {
	checkDamagedJobs(t, rounds, opts, func(round int) (*ct.Env, *compaction.Job) {
		e := ct.NewEnv()
		job, _, _ := ct.RandomJob(t, rand.New(rand.NewPCG(uint64(round), 54)), e)
		return e, job
	})
}

// checkDamagedSnappy is checkDamaged over jobs of tables stored with Snappy
// (whose blocks the CUDA engine checks and decompresses on the device).
func checkDamagedSnappy(t *testing.T, rounds int, opts Options) {
	checkDamagedJobs(t, rounds, opts, func(round int) (*ct.Env, *compaction.Job) {
		return benchJobWith(t, 1, []int{0, 16, 100, 700}[round%4], sstable.SnappyCompression)
	})
}

// checkDamagedJobs damages one block of the job newJob(round) builds in
// each round and compares the Compactor with compaction.CPU.
func checkDamagedJobs(t *testing.T, rounds int, opts Options, newJob func(round int) (*ct.Env, *compaction.Job)) {
	opts.Fallback, opts.MinInputBytes = compaction.CPU{Parts: 1}, -1
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var corrupt, other int
	for round := range rounds {
		rng := rand.New(rand.NewPCG(uint64(round), 53))
		table, block, at := rng.IntN(1<<20), rng.IntN(1<<20), rng.IntN(1<<20)
		patch := make([]byte, 1+rng.IntN(4))
		for i := range patch {
			patch[i] = []byte{0, 1, 7, 8, 0x7f, 0x80, 0xff, byte(rng.Uint32())}[rng.IntN(8)]
		}
		build := func() (*ct.Env, *compaction.Job) {
			e, job := newJob(round)
			// Every third round leaves the checksum as it was: the damage
			// is the checksum's to find (on the device, for blocks stored
			// uncompressed), with the Reader's error.
			damageBlock(t, e, job, table, block, at, patch, round%3 != 2)
			return e, job
		}
		e1, job1 := build()
		want, wantErr := compaction.CPU{Parts: 1}.Compact(context.Background(), job1)
		e2, job2 := build()
		got, gotErr := c.Compact(context.Background(), job2)
		switch {
		case wantErr != nil || gotErr != nil:
			var we, ge *base.CorruptionError
			wc, gc := errors.As(wantErr, &we), errors.As(gotErr, &ge)
			// Where compaction.CPU meets the damage as a corruption, the
			// engine reports the same; where it first writes keys out of
			// order (or fails otherwise), the engine may instead report
			// the corruption its load finds in the same input.
			if wantErr == nil || gotErr == nil || wc && (!gc || *we != *ge) || !wc && !gc && wantErr.Error() != gotErr.Error() {
				t.Fatalf("round %d: compaction.CPU says %v, the Compactor %v", round, wantErr, gotErr)
			}
			if wc {
				corrupt++
			} else {
				other++
			}
		default:
			if !slices.EqualFunc(outputsOf(t, e1, want), outputsOf(t, e2, got), bytes.Equal) {
				t.Fatalf("round %d: outputs differ from compaction.CPU's", round)
			}
		}
	}
	st := c.Stats()
	t.Logf("%d rounds: %d corruption errors, %d other errors; engine jobs %d, declined %v, fallbacks %v", rounds, corrupt, other, st.EngineJobs, st.Declined, st.Fallbacks)
	if len(st.Fallbacks) > 0 || st.Disabled {
		t.Fatalf("engine failures on damaged input: %v (disabled %v)", st.Fallbacks, st.Disabled)
	}
}

// fixChecksum recomputes the checksum in the trailer of block h of a
// table's bytes.
func fixChecksum(data []byte, h sstable.BlockHandle) {
	body := data[h.Offset : h.Offset+h.Length]
	trailer := data[h.Offset+h.Length : h.Offset+h.Length+sstable.BlockTrailerLen]
	binary.LittleEndian.PutUint32(trailer[1:], record.MaskCRC(record.ExtendCRC(record.CRC(body), trailer[:1])))
}

// damageBlock patches a data block of one of job's input tables (picked by
// the numbers given) and, with fixCRC, recomputes its checksum.
func damageBlock(t *testing.T, e *ct.Env, job *compaction.Job, table, block, at int, patch []byte, fixCRC bool) {
	t.Helper()
	var files []*manifest.FileMetadata
	for _, in := range job.Inputs {
		files = append(files, in.Files...)
	}
	f := files[table%len(files)]
	// A reader of its own: job.Env's would keep the file open as it was.
	name := fmt.Sprintf("/%s.sst", f.FileNum)
	file, err := e.FS().Open(name)
	if err != nil {
		t.Fatal(err)
	}
	r, err := sstable.NewReader(file, sstable.ReaderOptions{FileName: f.FileNum.String()})
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := r.DataBlocks()
	file.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) == 0 {
		return
	}
	data := readFile(t, e, f)
	h := blocks[block%len(blocks)]
	body := data[h.Offset : h.Offset+h.Length]
	if len(patch) > len(body) {
		patch = patch[:len(body)]
	}
	copy(body[at%(len(body)-len(patch)+1):], patch)
	if fixCRC {
		fixChecksum(data, h)
	}
	if err := vfs.WriteFile(e.FS(), name, data); err != nil {
		t.Fatal(err)
	}
}

// TestUnsortedRunDeclined: an input table whose entries are out of order
// (a block built without the Writer's order check, which the checksums
// cannot catch) — a key outside the prefix the run's first and last keys
// share, or one merely out of place — is declined ("irregular") and gives
// compaction.CPU's result, on the Go engine (and, in gpu_test.go, the CUDA
// engine).
func TestUnsortedRunDeclined(t *testing.T) {
	checkUnsortedRun(t, Options{Backend: warpkit.CPU})
}

func checkUnsortedRun(t *testing.T, opts Options) {
	opts.Fallback, opts.MinInputBytes = compaction.CPU{Parts: 1}, -1
	for _, keys := range [][]string{{"b1", "a2", "b3"}, {"b1", "a1", "b2"}, {"k10", "k30", "k20", "k40"}} {
		build := func() (*ct.Env, *compaction.Job) {
			e := ct.NewEnv()
			var es []ct.Entry
			for i, k := range keys {
				es = append(es, ct.Entry{K: base.MakeInternalKey([]byte(k), base.SeqNum(100-i), base.KindSet), V: "v"})
			}
			bad := unsortedTable(t, e, es)
			// Another run, inside the prefix the bad run's first and last
			// keys share (so that the job's prefix is theirs).
			good := e.Table(t, []ct.Entry{{K: base.MakeInternalKey([]byte(keys[0][:1]+"99"), 1, base.KindSet), V: "w"}}, nil)
			return e, &compaction.Job{
				Inputs:         []compaction.Input{{Level: 0, Files: []*manifest.FileMetadata{bad}}, {Level: 1, Files: []*manifest.FileMetadata{good}}},
				OutputLevel:    1,
				TargetFileSize: 1 << 20,
				Env:            e.Env(),
			}
		}
		_, job0 := build()
		_, wantErr := compaction.CPU{Parts: 1}.Compact(context.Background(), job0)
		c, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		_, job := build()
		_, gotErr := c.Compact(context.Background(), job)
		st := c.Stats()
		c.Close()
		if wantErr == nil || gotErr == nil || wantErr.Error() != gotErr.Error() {
			t.Fatalf("%v: compaction.CPU says %v, the Compactor %v", keys, wantErr, gotErr)
		}
		if st.Declined["irregular"] != 1 || st.EngineJobs != 0 || len(st.Fallbacks) != 0 {
			t.Fatalf("%v: stats %+v", keys, st)
		}
	}
}

// TestKeysOutsideBounds: an input table whose keys lie outside the bounds
// its FileMetadata gives (metadata the store got wrong, which no checksum
// sees) compacts to compaction.CPU's tables, which do not read the bounds.
// The CUDA engine takes the job's common key prefix from the tables' bounds
// (jobPrefix) and must decline such a job ("irregular"): a key outside the
// prefix would otherwise be ordered by the bytes after it — here "j1" at
// sequence 5 after "k1" at 10, their merge keys and lengths equal. The Go
// engine takes its prefix from the decoded runs and runs the job.
func TestKeysOutsideBounds(t *testing.T) {
	checkKeysOutsideBounds(t, Options{Backend: warpkit.CPU}, false)
}

func checkKeysOutsideBounds(t *testing.T, opts Options, declines bool) {
	// Each case: the stray key, the bounds its table claims, the other
	// table's key (the second case's stray key is shorter than the prefix).
	for _, c := range [][4]string{{"j1", "ka", "kz", "k1"}, {"k", "kaa", "kaz", "kab"}} {
		checkKeysOutsideBoundsCase(t, opts, declines, c)
	}
}

func checkKeysOutsideBoundsCase(t *testing.T, opts Options, declines bool, keys [4]string) {
	opts.Fallback, opts.MinInputBytes = compaction.CPU{Parts: 1}, -1
	build := func() (*ct.Env, *compaction.Job) {
		e := ct.NewEnv()
		stray := e.Table(t, []ct.Entry{{K: base.MakeInternalKey([]byte(keys[0]), 5, base.KindSet), V: "j"}}, nil)
		wrong := &manifest.FileMetadata{FileNum: stray.FileNum, Size: stray.Size, SmallestSeq: stray.SmallestSeq, LargestSeq: stray.LargestSeq,
			// bounds that do not hold its key
			Smallest: base.MakeInternalKey([]byte(keys[1]), 5, base.KindSet), Largest: base.MakeInternalKey([]byte(keys[2]), 5, base.KindSet)}
		good := e.Table(t, []ct.Entry{{K: base.MakeInternalKey([]byte(keys[3]), 10, base.KindSet), V: "k"}}, nil)
		return e, &compaction.Job{
			Inputs:         []compaction.Input{{Level: 0, Files: []*manifest.FileMetadata{good}}, {Level: 0, Files: []*manifest.FileMetadata{wrong}}},
			OutputLevel:    1,
			TargetFileSize: 1 << 20,
			Env:            e.Env(),
		}
	}
	e0, job0 := build()
	want, err := compaction.CPU{Parts: 1}.Compact(context.Background(), job0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	e, job := build()
	got, err := c.Compact(context.Background(), job)
	st := c.Stats()
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	sameFiles(t, keys[0]+" outside its table's bounds", outputsOf(t, e, got), outputsOf(t, e0, want))
	if declines && (st.Declined["irregular"] != 1 || st.EngineJobs != 0) || !declines && st.EngineJobs != 1 || len(st.Fallbacks) != 0 {
		t.Fatalf("%s outside its table's bounds: stats %+v", keys[0], st)
	}
}

// unsortedTable writes entries as they come, in one data block built with
// sstable.BlockBuilder (which does not check their order).
func unsortedTable(t *testing.T, e *ct.Env, es []ct.Entry) *manifest.FileMetadata {
	t.Helper()
	opts := sstable.WriterOptions{BlockSize: 1 << 20}
	bb := sstable.NewBlockBuilder(opts.RestartInterval)
	b := sstable.EncodedBlock{First: es[0].K, Last: es[len(es)-1].K, SmallestSeq: base.SeqNumMax}
	for _, x := range es {
		bb.Add(x.K, []byte(x.V))
		b.Entries++
		b.RawKeySize += uint64(x.K.Size())
		b.RawValueSize += uint64(len(x.V))
		b.SmallestSeq = min(b.SmallestSeq, x.K.SeqNum())
		b.LargestSeq = max(b.LargestSeq, x.K.SeqNum())
	}
	b.Raw = bb.Finish()
	num, f, err := e.Env().CreateTable()
	if err != nil {
		t.Fatal(err)
	}
	w := sstable.NewWriter(f, opts)
	if err := w.AddEncodedBlock(b); err != nil {
		t.Fatal(err)
	}
	m, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	return &manifest.FileMetadata{FileNum: num, Size: m.Size, Smallest: m.Smallest, Largest: m.Largest, SmallestSeq: m.SmallestSeq, LargestSeq: m.LargestSeq}
}

// TestEngines: with Options.Engines 2 a job runs on the engine while
// another holds a slot (a second slot, arrays of its own, held memory
// summed), where one slot would have declined it as busy; Close drops
// every slot.
func TestEngines(t *testing.T) {
	checkEngines(t, Options{Backend: warpkit.CPU})
	if _, err := New(Options{Engines: -1}); err == nil {
		t.Fatal("New took Engines -1")
	}
}

func checkEngines(t *testing.T, opts Options) {
	opts.Engines, opts.MinInputBytes, opts.Fallback = 2, -1, compaction.CPU{Parts: 1}
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	_, job := benchJob(t, 2, 100)
	// Hold one slot, run a job (on the other), give the slot back; then
	// hold the slot that ran and run again: each slot has run one job.
	run := func() {
		held := <-c.engine
		if _, err := c.Compact(context.Background(), job); err != nil {
			t.Fatal(err)
		}
		c.engine <- held
	}
	run()
	one := c.Stats().HeldBytes
	run()
	st := c.Stats()
	if st.EngineJobs != 2 || st.Declined["busy"] != 0 {
		t.Fatalf("two slots: stats %+v", st)
	}
	if st.HeldBytes < one*3/2 || one == 0 {
		t.Fatalf("held %d bytes after both slots ran a job, %d after one", st.HeldBytes, one)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.HeldBytes != 0 || st.DeviceHeldBytes != 0 {
		t.Fatalf("after Close: %+v", st)
	}
}

// slowFallback is compaction.CPU{Parts: 1} after a delay.
type slowFallback struct{ delay time.Duration }

func (f slowFallback) Compact(ctx context.Context, job *compaction.Job) (*compaction.Result, error) {
	time.Sleep(f.delay)
	return compaction.CPU{Parts: 1}.Compact(ctx, job)
}

// TestWaitWhenFaster: with WaitWhenFaster a job that finds the engine busy
// goes to Fallback until the engine has a rate, then waits for it when
// Fallback has been slower and goes to Fallback when the engine has been.
func TestWaitWhenFaster(t *testing.T) {
	newJob := func() *compaction.Job {
		_, job := benchJob(t, 1, 100)
		return job
	}
	// busy takes the engine's slot and gives it back after release; the
	// channel closes then.
	busy := func(c *Compactor, release time.Duration) chan struct{} {
		sl := <-c.engine
		back := make(chan struct{})
		go func() {
			time.Sleep(release)
			c.engine <- sl
			close(back)
		}()
		return back
	}
	// Fallback slow, the engine fast: wait once the engine has a rate.
	c, err := New(Options{Backend: warpkit.CPU, MinInputBytes: -1, WhenBusy: WaitWhenFaster, Fallback: slowFallback{300 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	job := newJob()
	back := busy(c, 50*time.Millisecond)
	if _, err := c.Compact(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Declined["busy"] != 1 || st.FallbackJobs != 1 {
		t.Fatalf("busy before the engine has a rate: stats %+v", st)
	}
	<-back
	for range 2 { // the engine's rate
		if _, err := c.Compact(context.Background(), newJob()); err != nil {
			t.Fatal(err)
		}
	}
	job = newJob()
	busy(c, 50*time.Millisecond)
	if _, err := c.Compact(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Declined["busy"] != 1 || st.EngineJobs != 3 || st.EngineTime <= 0 || st.FallbackTime < 300*time.Millisecond {
		t.Fatalf("busy, Fallback slower: stats %+v", st)
	}
	// The engine slow (a stage that sleeps), Fallback fast: go to Fallback.
	c2, err := New(Options{Backend: warpkit.CPU, MinInputBytes: -1, WhenBusy: WaitWhenFaster, Fallback: compaction.CPU{Parts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	c2.failAt = func(stage string) error {
		if stage == "load" {
			time.Sleep(300 * time.Millisecond)
		}
		return nil
	}
	for i := range 3 { // Fallback's rate (busy, the engine without one), the engine's, then busy
		job := newJob()
		if i == 1 {
			if _, err := c2.Compact(context.Background(), job); err != nil {
				t.Fatal(err)
			}
			continue
		}
		back := busy(c2, 50*time.Millisecond)
		if _, err := c2.Compact(context.Background(), job); err != nil {
			t.Fatal(err)
		}
		<-back
	}
	if st := c2.Stats(); st.Declined["busy"] != 2 || st.EngineJobs != 1 {
		t.Fatalf("busy, the engine slower: stats %+v", st)
	}
}

// TestHostWorkers: Options.HostWorkers bounds the goroutines that read a
// job's inputs and the output tables open at once, and the outputs stay
// compaction.CPU's.
func TestHostWorkers(t *testing.T) {
	checkHostWorkers(t, Options{Backend: warpkit.CPU})
}

// checkHostWorkers runs one job of 2 MiB (Snappy, many outputs) under
// HostWorkers 1 and 3 with GOMAXPROCS 4: the input files' reads (each
// slowed so that concurrent ones overlap) never run more than HostWorkers
// at once and reach it with 3, at most 2×HostWorkers outputs are open at
// once, and the output files are byte for byte compaction.CPU's. A
// negative HostWorkers is refused.
func checkHostWorkers(t *testing.T, opts Options) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	if _, err := New(Options{Backend: opts.Backend, Device: opts.Device, HostWorkers: -1}); !errors.Is(err, warpkit.ErrInvalidArgument) {
		t.Fatalf("HostWorkers -1: %v, want ErrInvalidArgument", err)
	}
	defer func(p uint64) { loadPieceBytes = p }(loadPieceBytes)
	loadPieceBytes = 64 << 10 // many pieces to read
	e, job := benchJob(t, 2, 16)
	job.TargetFileSize = 64 << 10
	outputs := func(res *compaction.Result) [][]byte {
		var files [][]byte
		for _, o := range res.Outputs {
			files = append(files, readFile(t, e, o))
		}
		return files
	}
	res, err := compaction.CPU{Parts: 1}.Compact(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	want := outputs(res)
	var mu sync.Mutex
	reading, readPeak := 0, 0
	openFile := job.Env.OpenTableFile
	job.Env.OpenTableFile = func(m *manifest.FileMetadata) (vfs.File, error) {
		f, err := openFile(m)
		if err != nil {
			return nil, err
		}
		return &slowReader{File: f, read: func() func() {
			mu.Lock()
			reading++
			readPeak = max(readPeak, reading)
			mu.Unlock()
			time.Sleep(200 * time.Microsecond)
			return func() { mu.Lock(); reading--; mu.Unlock() }
		}}, nil
	}
	opened := countOpen(job)
	for _, w := range []int{1, 3} {
		o := opts
		o.HostWorkers, o.MinInputBytes, o.Fallback, o.MaxEngineFailures = w, -1, compaction.CPU{Parts: 1}, -1
		c, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		readPeak = 0
		opened.reset()
		res, err := c.Compact(context.Background(), job)
		st := c.Stats()
		c.Close()
		if err != nil || st.EngineJobs != 1 {
			t.Fatalf("HostWorkers %d: %v, stats %+v", w, err, st)
		}
		got := outputs(res)
		if len(got) != len(want) || len(want) < 8 {
			t.Fatalf("HostWorkers %d: %d outputs, compaction.CPU %d (want at least 8)", w, len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("HostWorkers %d: output %d differs from compaction.CPU's", w, i)
			}
		}
		if readPeak > w || w > 1 && readPeak < 2 {
			t.Errorf("HostWorkers %d: %d input reads at once", w, readPeak)
		}
		if _, openPeak := opened.now(); openPeak > 2*w {
			t.Errorf("HostWorkers %d: %d outputs open at once, want at most %d", w, openPeak, 2*w)
		}
		_, openPeak := opened.now()
		t.Logf("HostWorkers %d: %d reads at once, %d outputs open at once, %d outputs", w, readPeak, openPeak, len(got))
	}
}

// slowReader calls read around each ReadAt (read returns what to call
// after it).
type slowReader struct {
	vfs.File
	read func() func()
}

func (r *slowReader) ReadAt(p []byte, off int64) (int, error) {
	defer r.read()()
	return r.File.ReadAt(p, off)
}
