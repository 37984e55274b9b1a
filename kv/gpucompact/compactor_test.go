package gpucompact

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	kvstore "github.com/warpkit/warpkit/kv"
	"github.com/warpkit/warpkit/kv/compaction"
	ct "github.com/warpkit/warpkit/kv/compaction/compactiontest"
	"github.com/warpkit/warpkit/kv/internal/base"
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

// TestFallbackAtEveryStage: an engine failure at any stage reruns the job
// on Fallback, whose tables are then exactly what it writes on its own, and
// counts the failure by stage.
func TestFallbackAtEveryStage(t *testing.T) {
	for i, stage := range []string{"load", "merge", "gc", "plan", "write"} {
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
		wf, gf := outputsOf(t, e0, want), outputsOf(t, e, got)
		if len(wf) != len(gf) {
			t.Fatalf("%s: %d outputs after the fallback, %d from compaction.CPU", stage, len(gf), len(wf))
		}
		for j := range wf {
			if !bytes.Equal(wf[j], gf[j]) {
				t.Fatalf("%s: output %d differs from compaction.CPU's", stage, j)
			}
		}
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
	}
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

// TestCorruptInputNoFallback: damaged input gives compaction.CPU's
// corruption error, and is not rerun (Fallback would meet it too).
func TestCorruptInputNoFallback(t *testing.T) {
	e := ct.NewEnv()
	job, _, _ := ct.RandomJob(t, rand.New(rand.NewPCG(2, 48)), e)
	// Damage the middle of the first L1 table's data.
	f := job.Inputs[1].Files[0]
	name := fmt.Sprintf("/%s.sst", f.FileNum)
	file, _ := e.FS().Open(name)
	size, _ := file.Size()
	data := make([]byte, size)
	file.ReadAt(data, 0)
	file.Close()
	r, err := sstable.NewReader(fileOf(t, e.FS(), name, data), sstable.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	blocks, _ := r.DataBlocks()
	data[blocks[0].Offset+blocks[0].Length/2] ^= 0x20
	fileOf(t, e.FS(), name, data)

	_, cpuErr := compaction.CPU{Parts: 1}.Compact(context.Background(), job)
	c, _ := New(Options{MinInputBytes: -1})
	_, err = c.Compact(context.Background(), job)
	var ce, cpuCE *base.CorruptionError
	if !errors.As(err, &ce) || !errors.As(cpuErr, &cpuCE) || *ce != *cpuCE {
		t.Fatalf("engine: %v; compaction.CPU: %v", err, cpuErr)
	}
	if st := c.Stats(); len(st.Fallbacks) != 0 || st.FallbackJobs != 0 {
		t.Fatalf("stats %+v", st)
	}
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
// against a model.
func TestStoreOnGoEngine(t *testing.T) {
	c, err := New(Options{MinInputBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	db, err := kvstore.Open("/db", &kvstore.Options{
		FS: vfs.NewMem(), Compactor: c, MemTableSize: 64 << 10, TargetFileSize: 16 << 10,
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
	if st.EngineJobs == 0 || len(st.Fallbacks) != 0 {
		t.Fatalf("stats %+v", st)
	}
	if a := db.Metrics().Compaction.Accelerated; a.Count != int64(st.EngineJobs) || a.BytesRead != int64(st.EngineBytesRead) || a.Fallbacks != 0 || a.Time <= 0 {
		t.Fatalf("kv metrics %+v, compactor stats %+v", a, st)
	}
	if err := db.CheckIntegrity(); err != nil {
		t.Fatal(err)
	}
}
