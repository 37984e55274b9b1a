package kv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/warpkit/warpkit/kv/compaction"
	"github.com/warpkit/warpkit/kv/compaction/compactiontest"
	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/sstable"
	"github.com/warpkit/warpkit/kv/vfs"
)

// TestFlushInRuns: a memtable flushed in runs (FlushWorkers 4: its entries
// encoded on four goroutines) holds what the same memtable flushed entry by
// entry holds — every key, value, deletion and range deletion, read back
// through the store and through the table — with the same properties but
// the data blocks that the runs' first blocks add.
func TestFlushInRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	type op struct {
		kind     int // 0 set, 1 delete, 2 delete range
		key, end []byte
		value    []byte
	}
	var ops []op
	for range 6000 {
		k := fmt.Appendf(nil, "key%08d", rng.IntN(20000))
		switch r := rng.IntN(40); {
		case r == 0:
			ops = append(ops, op{kind: 2, key: k, end: append(bytes.Clone(k), "5"...)})
		case r < 4:
			ops = append(ops, op{kind: 1, key: k})
		default:
			v := make([]byte, 50+rng.IntN(400))
			for i := range v[:len(v)/2] {
				v[i] = byte(rng.Uint32())
			}
			ops = append(ops, op{kind: 0, key: k, value: v})
		}
	}
	type flushed struct {
		db    *DB
		fs    *vfs.MemFS
		props sstable.Properties
	}
	run := func(workers int) flushed {
		fs := vfs.NewMem()
		db, err := Open("db", &Options{FS: fs, MemTableSize: 4 << 20, FlushWorkers: workers})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		for _, o := range ops {
			switch o.kind {
			case 0:
				err = db.Set(o.key, o.value, nil)
			case 1:
				err = db.Delete(o.key, nil)
			case 2:
				err = db.DeleteRange(o.key, o.end, nil)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		if m := db.Metrics(); m.Levels[0].Tables != 1 || m.MemTable.Flushes != 1 {
			t.Fatalf("%d workers: %d L0 tables after %d flushes", workers, m.Levels[0].Tables, m.MemTable.Flushes)
		}
		if err := db.CheckIntegrity(); err != nil {
			t.Fatal(err)
		}
		names, err := fs.List("db")
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if !strings.HasSuffix(n, ".sst") {
				continue
			}
			f, err := fs.Open(fs.PathJoin("db", n))
			if err != nil {
				t.Fatal(err)
			}
			r, err := sstable.NewReader(f, sstable.ReaderOptions{FileName: n})
			if err != nil {
				t.Fatal(err)
			}
			p := *r.Properties()
			r.Close()
			return flushed{db, fs, p}
		}
		t.Fatalf("%d workers: no table in %v", workers, names)
		return flushed{}
	}
	seq, par := run(1), run(4)
	if par.props.NumDataBlocks <= seq.props.NumDataBlocks {
		t.Fatalf("in runs: %d data blocks, entry by entry %d: the runs did not begin blocks of their own", par.props.NumDataBlocks, seq.props.NumDataBlocks)
	}
	want, got := seq.props, par.props
	got.NumDataBlocks, got.DataSize, got.IndexSize, got.RawDataSize = want.NumDataBlocks, want.DataSize, want.IndexSize, want.RawDataSize
	if got != want {
		t.Fatalf("properties in runs\n%+v\nentry by entry\n%+v", got, want)
	}
	scan := func(db *DB) []string {
		it, err := db.NewIter(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		var out []string
		for ok := it.First(); ok; ok = it.Next() {
			out = append(out, fmt.Sprintf("%s=%x", it.Key(), it.Value()))
		}
		return out
	}
	a, b := scan(seq.db), scan(par.db)
	if len(a) == 0 || strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Fatalf("the stores differ: %d keys entry by entry, %d in runs", len(a), len(b))
	}
	for i := 0; i < 20000; i += 7 {
		k := fmt.Appendf(nil, "key%08d", i)
		v1, err1 := seq.db.Get(k)
		v2, err2 := par.db.Get(k)
		if !bytes.Equal(v1, v2) || (err1 == nil) != (err2 == nil) {
			t.Fatalf("Get(%s): %x, %v in runs; %x, %v entry by entry", k, v2, err2, v1, err1)
		}
	}
}

// TestFlushWorkersOption: FlushWorkers out of range is refused.
func TestFlushWorkersOption(t *testing.T) {
	for _, n := range []int{-1, maxFlushWorkers + 1} {
		if _, err := Open("db", &Options{FS: vfs.NewMem(), FlushWorkers: n}); err == nil || !strings.Contains(err.Error(), "FlushWorkers") {
			t.Fatalf("FlushWorkers %d: %v", n, err)
		}
	}
}

// writebackFS hands out MemFS files that are vfs.WritebackStarters, and
// counts each file's writebacks by name.
type writebackFS struct {
	vfs.FS
	mu    sync.Mutex
	calls map[string]int
}

type writebackFile struct {
	vfs.File
	fs   *writebackFS
	name string
}

func (f writebackFile) StartWriteback(upTo int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	f.fs.calls[f.fs.PathBase(f.name)]++
	return nil
}

func (f writebackFile) WriteVectors(bufs [][]byte) (int64, error) {
	return f.File.(vfs.VectorWriter).WriteVectors(bufs)
}

func (fs *writebackFS) Create(name string) (vfs.File, error) {
	f, err := fs.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return writebackFile{f, fs, name}, nil
}

// TestBytesPerSync: the tables of flushes and of compactions start their
// writeback every BytesPerSync bytes (and logs and the manifest do not);
// -1 starts none; and the store reads back what it wrote either way.
func TestBytesPerSync(t *testing.T) {
	for _, every := range []int64{64 << 10, -1} {
		fs := &writebackFS{FS: vfs.NewMem(), calls: map[string]int{}}
		var mu sync.Mutex
		var flushed, compacted []TableInfo
		events := &EventListener{
			FlushEnd: func(fi FlushInfo) {
				mu.Lock()
				defer mu.Unlock()
				if fi.Output != nil {
					flushed = append(flushed, *fi.Output)
				}
			},
			CompactionEnd: func(ci CompactionInfo) {
				mu.Lock()
				defer mu.Unlock()
				if !ci.Move {
					compacted = append(compacted, ci.Output...)
				}
			},
		}
		db, err := Open("db", &Options{FS: fs, MemTableSize: 256 << 10, BytesPerSync: every, DisableCompression: true, EventListener: events})
		if err != nil {
			t.Fatal(err)
		}
		value := bytes.Repeat([]byte("v"), 1000)
		for i := range 4000 {
			if err := db.Set(fmt.Appendf(nil, "key%06d", i*7919%4000), value, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Compact(context.Background(), nil, []byte("z")); err != nil {
			t.Fatal(err)
		}
		for i := range 4000 {
			if v, err := db.Get(fmt.Appendf(nil, "key%06d", i)); err != nil || !bytes.Equal(v, value) {
				t.Fatalf("BytesPerSync %d: key %d: %v", every, i, err)
			}
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		fs.mu.Lock()
		defer fs.mu.Unlock()
		for name, n := range fs.calls {
			if every < 0 || !strings.HasSuffix(name, ".sst") {
				t.Errorf("BytesPerSync %d: %d writebacks of %s", every, n, name)
			}
		}
		if every < 0 {
			continue
		}
		// A table written past 64 KiB (in writes of up to 256 KiB, the
		// Writer's buffer) has started at least one writeback.
		for _, tables := range []struct {
			what string
			list []TableInfo
		}{{"flush", flushed}, {"compaction", compacted}} {
			checked := 0
			for _, ti := range tables.list {
				if ti.Size < 64<<10 {
					continue
				}
				checked++
				if name := base.MakeFilename(base.FileTypeTable, ti.FileNum); fs.calls[name] == 0 {
					t.Errorf("the %s's table %s of %d bytes started no writeback", tables.what, name, ti.Size)
				}
			}
			if checked == 0 {
				t.Errorf("no %s wrote a table past 64 KiB: %v", tables.what, tables.list)
			}
		}
	}
}

// TestBytesPerSyncOption: BytesPerSync out of range is refused.
func TestBytesPerSyncOption(t *testing.T) {
	for _, n := range []int64{-2, 4<<10 - 1, 1<<30 + 1} {
		if _, err := Open("db", &Options{FS: vfs.NewMem(), BytesPerSync: n}); err == nil || !strings.Contains(err.Error(), "BytesPerSync") {
			t.Fatalf("BytesPerSync %d: %v", n, err)
		}
	}
}

// sealingCPU is compaction.CPU with a host BlockSealer: it seals into
// memory of its own, which it overwrites when released (a store that read
// sealed bytes after release would write the overwritten ones), and fails
// or declines on request.
type sealingCPU struct {
	compaction.CPU
	mu                      sync.Mutex
	calls, blocks, released int
	fail                    error
	refuse                  bool // SealsBlocks says no
}

func (s *sealingCPU) SealsBlocks(c sstable.Compression) bool { return !s.refuse }

func (s *sealingCPU) SealBlocks(ctx context.Context, c sstable.Compression, blocks []sstable.EncodedBlock) (func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.fail != nil {
		return nil, s.fail
	}
	var mem [][]byte
	for i := range blocks {
		b := &blocks[i]
		if b.Sealed != nil || len(b.Raw) != b.RawSize {
			return nil, fmt.Errorf("block %d: Sealed %v, %d raw bytes of %d", i, b.Sealed != nil, len(b.Raw), b.RawSize)
		}
		sb := sstable.SealBlock(c, make([]byte, sstable.SealBound(c, b.RawSize)), b.Raw)
		sb.Stored = bytes.Clone(sb.Stored) // (stored as it is, it aliases Raw)
		mem = append(mem, sb.Stored)
		b.Sealed = &sb
	}
	s.blocks += len(blocks)
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.released++
		for _, m := range mem {
			for j := range m {
				m[j] = 0xa5
			}
		}
	}, nil
}

// TestFlushSealer: with a Compactor that is a compaction.BlockSealer, a
// flush's blocks are encoded raw and sealed by it in one batch: the table
// is byte-identical to the one sealed on the flush's goroutines (in runs,
// FlushWorkers 4) or by the Writer (FlushWorkers 1: one run, as entry by
// entry), and so is the table of a sealer that declines or fails (the
// flush seals on the host then); the sealed bytes are not read after
// release; uncompressed tables do not ask the sealer, nor does a flush
// whose sealer says it would not seal.
func TestFlushSealer(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 2))
	type kvp struct{ k, v []byte }
	var pairs []kvp
	for range 5000 {
		v := make([]byte, 20+rng.IntN(600))
		for i := range v[:len(v)/3] {
			v[i] = byte(rng.Uint32())
		}
		pairs = append(pairs, kvp{fmt.Appendf(nil, "key%08d", rng.IntN(50000)), v})
	}
	table := func(workers int, comp sstable.Compression, c compaction.Compactor) []byte {
		t.Helper()
		fs := vfs.NewMem()
		opts := &Options{FS: fs, MemTableSize: 8 << 20, FlushWorkers: workers, Compression: comp, DisableCompression: comp == sstable.NoCompression}
		if c != nil {
			opts.Compactor = c
		}
		db, err := Open("db", opts)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for i, p := range pairs {
			if i%97 == 0 {
				err = db.Delete(p.k, nil)
			} else {
				err = db.Set(p.k, p.v, nil)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := db.CheckIntegrity(); err != nil {
			t.Fatal(err)
		}
		return compactiontest.ReadTable(t, fs, "db")
	}
	for _, workers := range []int{4, 1} {
		want := table(workers, sstable.SnappyCompression, nil)
		for _, fail := range []error{nil, compaction.ErrNotSealed, errors.New("device lost")} {
			s := &sealingCPU{fail: fail}
			got := table(workers, sstable.SnappyCompression, s)
			if !bytes.Equal(got, want) {
				t.Fatalf("FlushWorkers %d, sealer failing with %v: the table differs from the one sealed on the host (%d bytes, want %d)", workers, fail, len(got), len(want))
			}
			if s.calls != 1 || fail == nil && (s.blocks == 0 || s.released != 1) {
				t.Fatalf("FlushWorkers %d, sealer failing with %v: %d calls sealed %d blocks, %d released", workers, fail, s.calls, s.blocks, s.released)
			}
		}
	}
	s := &sealingCPU{}
	if got, want := table(4, sstable.NoCompression, s), table(4, sstable.NoCompression, nil); !bytes.Equal(got, want) || s.calls != 0 {
		t.Fatalf("uncompressed: %d sealer calls, tables equal %v", s.calls, bytes.Equal(got, want))
	}
	s = &sealingCPU{refuse: true}
	if got, want := table(4, sstable.SnappyCompression, s), table(4, sstable.SnappyCompression, nil); !bytes.Equal(got, want) || s.calls != 0 {
		t.Fatalf("a sealer that says it does not seal: %d calls, tables equal %v", s.calls, bytes.Equal(got, want))
	}
}
