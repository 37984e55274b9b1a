package gpucompact

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/warpkit/warpkit/kv/compaction"
	ct "github.com/warpkit/warpkit/kv/compaction/compactiontest"
	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/internal/rangedel"
	"github.com/warpkit/warpkit/kv/manifest"
	"github.com/warpkit/warpkit/kv/sstable"
)

// TestGoEngineIdentical: the Go engine writes the same tables as
// compaction.CPU{Parts: 1} — the same file bytes, metadata and Stats —
// over random jobs (overlapping L0 tables over an L1 run, snapshots, point
// and range tombstones, many versions, with and without levels below, tiny
// output targets so that jobs cut many times, grandparents), for every
// compression, block size and restart interval.
func TestGoEngineIdentical(t *testing.T) {
	rounds := 300
	if testing.Short() {
		rounds = 60
	}
	checkIdentical(t, rounds, "go", goEngineIn)
}

// TestGoEngineWalkJumps: the walk stepping over whole blocks (the CUDA
// engine's walk, its blocks computed here on the host) cuts every table
// and block where the entry-by-entry walk does: the identity suite and the
// matrix with it.
func TestGoEngineWalkJumps(t *testing.T) {
	defer func() { goEngineJumps = nil }()
	goEngineJumps = hostBlockJumps
	rounds := 300
	if testing.Short() {
		rounds = 60
	}
	checkIdentical(t, rounds, "go", goEngineIn)
	checkMatrix(t, rounds/3, goEngine)
	checkLarge(t, 3, goEngine)
}

// compactFunc is compaction.Compactor.Compact's signature.
type compactFunc = func(context.Context, *compaction.Job) (*compaction.Result, error)

// checkIdentical is TestGoEngineIdentical's suite for the engine named
// engine, which engineIn runs in a workspace.
func checkIdentical(t *testing.T, rounds int, engine string, engineIn func(*workspace) compactFunc) {
	defer func(p uint64) { loadPieceBytes = p }(loadPieceBytes)
	// One workspace for every round, as a Compactor keeps one: a job
	// reuses the arrays the last left. The results are kept, and their
	// metadata checked again at the end: none may alias the arrays.
	shared := &workspace{}
	type keptResult struct {
		round int
		res   *compaction.Result
		meta  []string
	}
	var kept []keptResult
	defer func() {
		for _, k := range kept {
			if m := metaStrings(k.res); !slices.Equal(m, k.meta) {
				t.Errorf("round %d: output metadata changed after later jobs: %v, was %v", k.round, m, k.meta)
			}
		}
	}()
	for round := range rounds {
		rng := rand.New(rand.NewPCG(uint64(round), 45))
		loadPieceBytes = []uint64{1 << 20, 1, 300, 5000}[round%4] // tables cut into many load pieces
		opts := sstable.WriterOptions{
			BlockSize:       []int{64, 256, 512, 4096}[rng.IntN(4)],
			RestartInterval: []int{0, 1, 2, 16}[rng.IntN(4)],
			BloomBitsPerKey: []int{0, 10}[rng.IntN(2)],
			Compression:     []sstable.Compression{sstable.NoCompression, sstable.SnappyCompression, sstable.S2Compression}[rng.IntN(3)],
		}
		run := func(engine func(context.Context, *compaction.Job) (*compaction.Result, error)) (*compaction.Result, [][]byte) {
			// The same job twice, in two environments: file numbers and
			// bytes must come out the same.
			e := ct.NewEnv()
			job, _, _ := ct.RandomJob(t, rand.New(rand.NewPCG(uint64(round), 45)), e)
			job.Env.WriterOptions = opts
			if round%3 != 2 {
				// Grandparents: tables of the level below the output. Their
				// boundaries cut outputs past half the limit; in every other
				// round of these a limit small enough that the overlap rule
				// cuts too.
				for k := 0; k < 60; k += 6 {
					job.Grandparents = append(job.Grandparents, &manifest.FileMetadata{
						Smallest: base.MakeInternalKey([]byte(fmt.Sprintf("k%03d", k)), 0, base.KindSet),
						Largest:  base.MakeInternalKey([]byte(fmt.Sprintf("k%03d", k+4)), 0, base.KindSet),
						Size:     100,
					})
				}
				if round%3 == 0 {
					job.MaxGrandparentOverlap = 150
				}
			}
			res, err := engine(context.Background(), job)
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			var files [][]byte
			for _, o := range res.Outputs {
				files = append(files, readFile(t, e, o))
			}
			if e.Held() != 0 {
				t.Fatalf("round %d: %d readers not released", round, e.Held())
			}
			return res, files
		}
		want, wantFiles := run(compaction.CPU{Parts: 1}.Compact)
		got, gotFiles := run(engineIn(shared))
		kept = append(kept, keptResult{round, got, metaStrings(got)})
		if len(gotFiles) != len(wantFiles) {
			t.Fatalf("round %d (%+v): %d outputs, compaction.CPU %d", round, opts, len(gotFiles), len(wantFiles))
		}
		for i := range wantFiles {
			if !bytes.Equal(gotFiles[i], wantFiles[i]) {
				t.Fatalf("round %d (%+v): output %d: %d bytes differ from compaction.CPU's %d", round, opts, i, len(gotFiles[i]), len(wantFiles[i]))
			}
			if g, w := metaString(got.Outputs[i]), metaString(want.Outputs[i]); g != w {
				t.Fatalf("round %d: output %d metadata %s, compaction.CPU %s", round, i, g, w)
			}
		}
		gs, ws := got.Stats, want.Stats
		if gs.Engine != engine {
			t.Fatalf("round %d: engine %q", round, gs.Engine)
		}
		gs.Duration, ws.Duration, gs.Engine = 0, 0, ""
		if gs != ws {
			t.Fatalf("round %d: stats %+v, compaction.CPU %+v", round, gs, ws)
		}
	}
}

func metaStrings(res *compaction.Result) []string {
	var out []string
	for _, m := range res.Outputs {
		out = append(out, metaString(m))
	}
	return out
}

func metaString(m *manifest.FileMetadata) string {
	return fmt.Sprintf("table %s size %d [%v, %v] seqs %d..%d rangedels %v", m.FileNum, m.Size, m.Smallest, m.Largest, m.SmallestSeq, m.LargestSeq, m.HasRangeDels)
}

// TestGoEngineIdenticalLarge: a job of several MiB in the shape of a
// store's L0->L1 compaction (many outputs, many blocks per output, merge
// rounds cut into pieces) is byte-identical too.
func TestGoEngineIdenticalLarge(t *testing.T) {
	mib := 12
	if testing.Short() {
		mib = 3
	}
	checkLarge(t, mib, goEngine)
}

// checkLarge is TestGoEngineIdenticalLarge's check for an engine, with jobs
// of mib MiB (values of the lengths given; default 100 and 1024 bytes).
func checkLarge(t *testing.T, mib int, engine compactFunc, valueLens ...int) {
	if len(valueLens) == 0 {
		valueLens = []int{100, 1024}
	}
	for i, valueLen := range valueLens {
		e, job := benchJob(t, mib, valueLen)
		job.TargetFileSize = 256 << 10
		if i%2 == 1 {
			// A level below the output of tables about half the target
			// apart in the job's keys: outputs end at their boundaries.
			job.Grandparents = benchGrandparents(mib, valueLen, 4*mib)
		}
		want, err := compaction.CPU{Parts: 1}.Compact(context.Background(), job)
		if err != nil {
			t.Fatal(err)
		}
		got, err := engine(context.Background(), job)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Outputs) != len(want.Outputs) || len(want.Outputs) < 3 {
			t.Fatalf("%d-byte values: %d outputs, compaction.CPU %d", valueLen, len(got.Outputs), len(want.Outputs))
		}
		for i := range want.Outputs {
			w, g := readFile(t, e, want.Outputs[i]), readFile(t, e, got.Outputs[i])
			if !bytes.Equal(w, g) {
				t.Fatalf("%d-byte values: output %d differs (%d bytes, compaction.CPU %d)", valueLen, i, len(g), len(w))
			}
		}
	}
}

// TestGoEngineValuePastCompressionLimit: a value larger than the largest
// block a Writer compresses (64 MiB) is stored raw in a compressed table,
// read back, and written raw again, byte-identical to compaction.CPU.
// Skipped in -short (it moves a few hundred MiB).
func TestGoEngineValuePastCompressionLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("moves a few hundred MiB")
	}
	e := ct.NewEnv()
	opts := sstable.WriterOptions{BlockSize: 4096, BloomBitsPerKey: 10, Compression: sstable.SnappyCompression}
	huge := strings.Repeat("v", 64<<20+100)
	var small []ct.Entry
	for i := range 2000 {
		small = append(small, ct.Entry{K: base.MakeInternalKey([]byte(fmt.Sprintf("k%05d", i)), base.SeqNum(10+i), base.KindSet), V: "small value"})
	}
	l0 := e.TableWith(t, append(small[:1000:1000], ct.Entry{K: base.MakeInternalKey([]byte("k00500x"), 5000, base.KindSet), V: huge}), nil, opts)
	l1 := e.TableWith(t, small[1000:], nil, opts)
	env := e.Env()
	env.WriterOptions = opts
	job := &compaction.Job{
		Inputs:         []compaction.Input{{Level: 0, Files: []*manifest.FileMetadata{l0}}, {Level: 1, Files: []*manifest.FileMetadata{l1}}},
		OutputLevel:    1,
		TargetFileSize: 1 << 20,
		Env:            env,
	}
	want, err := compaction.CPU{Parts: 1}.Compact(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	got, err := goEngine(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Outputs) != len(want.Outputs) {
		t.Fatalf("%d outputs, compaction.CPU %d", len(got.Outputs), len(want.Outputs))
	}
	for i := range want.Outputs {
		if !bytes.Equal(readFile(t, e, got.Outputs[i]), readFile(t, e, want.Outputs[i])) {
			t.Fatalf("output %d differs from compaction.CPU's", i)
		}
	}
	if got.Stats.BytesWritten < 64<<20 {
		t.Fatalf("%d bytes written: the value was not stored raw", got.Stats.BytesWritten)
	}
}

// TestGoEngineTombstoneOnlyOutput: a range tombstone over every point of
// the job, above a level that may hold its keys, leaves an output of range
// tombstones only (no data block to encode), as compaction.CPU writes it.
func TestGoEngineTombstoneOnlyOutput(t *testing.T) {
	run := func(engine func(context.Context, *compaction.Job) (*compaction.Result, error)) (*compaction.Result, [][]byte) {
		e := ct.NewEnv()
		var points []ct.Entry
		for i := range 50 {
			points = append(points, ct.Entry{K: base.MakeInternalKey([]byte(fmt.Sprintf("k%03d", i)), base.SeqNum(1+i), base.KindSet), V: "v"})
		}
		l0 := e.Table(t, nil, []rangedel.Span{{Start: []byte("k"), End: []byte("l"), Seqs: []base.SeqNum{100}}})
		l1 := e.Table(t, points, nil)
		job := &compaction.Job{
			Inputs:         []compaction.Input{{Level: 0, Files: []*manifest.FileMetadata{l0}}, {Level: 1, Files: []*manifest.FileMetadata{l1}}},
			OutputLevel:    1,
			Lower:          [][]*manifest.FileMetadata{{{Smallest: base.MakeInternalKey([]byte("k000"), 0, base.KindSet), Largest: base.MakeInternalKey([]byte("k999"), 0, base.KindSet)}}},
			TargetFileSize: 1 << 20,
			Env:            e.Env(),
		}
		res, err := engine(context.Background(), job)
		if err != nil {
			t.Fatal(err)
		}
		var files [][]byte
		for _, o := range res.Outputs {
			files = append(files, readFile(t, e, o))
		}
		return res, files
	}
	want, wantFiles := run(compaction.CPU{Parts: 1}.Compact)
	got, gotFiles := run(goEngine)
	if len(want.Outputs) != 1 || want.Stats.EntriesOut != 0 || !want.Outputs[0].HasRangeDels {
		t.Fatalf("compaction.CPU wrote %d outputs, %d entries: not the tombstone-only table this test needs", len(want.Outputs), want.Stats.EntriesOut)
	}
	if len(gotFiles) != 1 || !bytes.Equal(gotFiles[0], wantFiles[0]) || metaString(got.Outputs[0]) != metaString(want.Outputs[0]) {
		t.Fatalf("the engine wrote %d outputs (%v), compaction.CPU %v", len(gotFiles), metaStrings(got), metaStrings(want))
	}
}

// FuzzGoEngine: any seed's random job (compactiontest.RandomJob) with any
// writer options gives compaction.CPU's tables.
func FuzzGoEngine(f *testing.F) {
	f.Add(uint64(1), uint16(512), uint8(16), uint8(1))
	f.Add(uint64(2), uint16(64), uint8(1), uint8(0))
	f.Fuzz(func(t *testing.T, seed uint64, blockSize uint16, restart, comp uint8) {
		opts := sstable.WriterOptions{
			BlockSize:       int(blockSize%8192) + 1,
			RestartInterval: int(restart%32) + 1,
			BloomBitsPerKey: 10 * int(seed%2),
			Compression:     sstable.Compression(comp % 3),
		}
		var outs [2][][]byte
		for i, engine := range []func(context.Context, *compaction.Job) (*compaction.Result, error){
			compaction.CPU{Parts: 1}.Compact, goEngine,
		} {
			e := ct.NewEnv()
			job, _, _ := ct.RandomJob(t, rand.New(rand.NewPCG(seed, 50)), e)
			job.Env.WriterOptions = opts
			res, err := engine(context.Background(), job)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range res.Outputs {
				outs[i] = append(outs[i], readFile(t, e, o))
			}
		}
		if len(outs[0]) != len(outs[1]) {
			t.Fatalf("%d outputs, compaction.CPU %d", len(outs[1]), len(outs[0]))
		}
		for i := range outs[0] {
			if !bytes.Equal(outs[0][i], outs[1][i]) {
				t.Fatalf("output %d differs", i)
			}
		}
	})
}

// goEngine runs a job on the Go engine, with the signature of
// compaction.Compactor.Compact.
func goEngine(ctx context.Context, job *compaction.Job) (*compaction.Result, error) {
	return runGo(ctx, job, &workspace{}, &stageTimes{}, nil)
}

// goEngineIn returns the Go engine running every job in one workspace, as
// a Compactor does: each job reuses the arrays the last one left.
func goEngineIn(ws *workspace) func(context.Context, *compaction.Job) (*compaction.Result, error) {
	return func(ctx context.Context, job *compaction.Job) (*compaction.Result, error) {
		return runGo(ctx, job, ws, &stageTimes{}, nil)
	}
}

func readFile(t testing.TB, e *ct.Env, m *manifest.FileMetadata) []byte {
	t.Helper()
	f, err := e.FS().Open(fmt.Sprintf("/%s.sst", m.FileNum))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size, _ := f.Size()
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGoEngineMatrix: byte identity with compaction.CPU{Parts: 1} over the
// spec's test matrix (compactiontest.MatrixJob: empty, 0x00/0xff and long
// shared-prefix keys, a key with thousands of versions, values of several
// blocks, nested and near-total range tombstones, up to 64 snapshots,
// levels below), output blocks of 256 B to 64 KiB, restart intervals 1 to
// 32, every compression.
func TestGoEngineMatrix(t *testing.T) {
	rounds := 120
	if testing.Short() {
		rounds = 30
	}
	checkMatrix(t, rounds, goEngine)
}

// checkMatrix is TestGoEngineMatrix's suite for an engine.
func checkMatrix(t *testing.T, rounds int, engine compactFunc) {
	for round := range rounds {
		rng := rand.New(rand.NewPCG(uint64(round), 51))
		in := sstable.WriterOptions{BlockSize: 256 << rng.IntN(4), Compression: sstable.Compression(rng.IntN(3)), BloomBitsPerKey: 10}
		out := sstable.WriterOptions{
			BlockSize:       256 << rng.IntN(9), // 256 B .. 64 KiB
			RestartInterval: 1 + rng.IntN(32),
			BloomBitsPerKey: 10 * rng.IntN(2),
			Compression:     sstable.Compression(rng.IntN(3)),
		}
		var files [2][][]byte
		var stats [2]compaction.Stats
		for i, engine := range []compactFunc{compaction.CPU{Parts: 1}.Compact, engine} {
			e := ct.NewEnv()
			job := ct.MatrixJob(t, rand.New(rand.NewPCG(uint64(round), 52)), e, in)
			job.Env.WriterOptions = out
			res, err := engine(context.Background(), job)
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			for _, o := range res.Outputs {
				files[i] = append(files[i], readFile(t, e, o))
			}
			stats[i] = res.Stats
			stats[i].Duration, stats[i].Engine = 0, ""
		}
		if len(files[0]) != len(files[1]) {
			t.Fatalf("round %d (%+v): %d outputs, compaction.CPU %d", round, out, len(files[1]), len(files[0]))
		}
		for j := range files[0] {
			if !bytes.Equal(files[0][j], files[1][j]) {
				t.Fatalf("round %d (%+v): output %d differs", round, out, j)
			}
		}
		if stats[0] != stats[1] {
			t.Fatalf("round %d: stats %+v, compaction.CPU %+v", round, stats[1], stats[0])
		}
	}
}

// hostBlockJumps is gpucompact.cu's block_ends on the host, one entry at a
// time (tests).
func hostBlockJumps(pe []planEntry, opts sstable.WriterOptions) *blockJumps {
	j := &blockJumps{end: make([]uint32, len(pe)), size: make([]uint32, len(pe))}
	for i := range pe {
		size, since, k := 8+uint64(pe[i].atRestart), 1, i+1
		for size < uint64(opts.BlockSize) && k < len(pe) {
			if since == opts.RestartInterval {
				size, since = size+4+uint64(pe[k].atRestart), 1
			} else {
				size, since = size+uint64(pe[k].offRestart), since+1
			}
			k++
		}
		j.end[i], j.size[i] = uint32(k), uint32(min(size, 1<<32-1))
	}
	return j
}
