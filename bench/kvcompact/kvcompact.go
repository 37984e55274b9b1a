// Package kvcompactbench is warp bench kvcompact: one L0→L1 compaction job
// (the gLSM paper's unit of work; shared/docs/specs/gpucompact.md §6) run on
// compaction.CPU with one goroutine (cpu), with its subcompactions
// (cpu-parts), on kv/gpucompact's Go engine (cpu-par) and, given
// --engines ...,gpu and a device, on its CUDA engine (gpu), the outputs of
// cpu-par and gpu compared with cpu's byte for byte on every run. cmd/warp
// dispatches to Run.
package kvcompactbench

import (
	"context"
	"fmt"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/warpkit/warpkit/internal/benchfmt"
	"github.com/warpkit/warpkit/internal/cli"
	"github.com/warpkit/warpkit/internal/procmem"
	"github.com/warpkit/warpkit/internal/stress"
	"github.com/warpkit/warpkit/kv/compaction"
	"github.com/warpkit/warpkit/kv/gpucompact"
	"github.com/warpkit/warpkit/kv/kvbench"
	"github.com/warpkit/warpkit/kv/sstable"
	"github.com/warpkit/warpkit/kv/vfs"
)

// Summary is the line warp bench -h prints for kvcompact.
const Summary = "kv compaction jobs: compaction.CPU against gpucompact's Go engine (cpu-par) and CUDA engine (gpu), MB/s and CPU-s/GB, outputs compared byte for byte"

// Targets of issue 15 for cpu-par against cpu at values of at most
// targetMaxValue bytes: on the 16-core device host, and on 2 cores.
const (
	targetMaxValue = 256
	target16       = 6.0
	target2        = 1.5
)

// Targets of issue 16 for gpu (the CUDA engine), no stress: at values of
// 32..targetMaxValue bytes ≥ 1.0 GB/s of input, ≥ 8× cpu, ≥ 1.5× cpu-par and
// ≤ 0.5 CPU-s/GB; at 1 KiB and more ≥ 2.5 GB/s.
const (
	gpuSmallMBs     = 1000
	gpuSmallVsCPU   = 8.0
	gpuSmallVsPar   = 1.5
	gpuSmallCPUSPGB = 0.5
	gpuLargeMBs     = 2500
	gpuMaxLaunches  = 20 // kernel launches a job (the "≤ ~20")
)

var engineNames = []string{"cpu", "cpu-parts", "cpu-par", "gpu"}

// testDevice, when a test sets it, is the device the gpu engine runs on
// instead of device 0 (the CPU emulation of the GPU, so that the gpu rows
// are tested where there is no GPU).
var testDevice *cuda.Device

// gpucompactEngine says an engine is a gpucompact.Compactor (cpu-par: its
// Go engine; gpu: its CUDA engine), whose outputs are compared with cpu's.
func gpucompactEngine(name string) bool { return name == "cpu-par" || name == "gpu" }

// engine is one compactor under test.
type engine struct {
	name string
	c    compaction.Compactor
	gc   *gpucompact.Compactor // cpu-par: its stage times
}

// cell is one job's measurements on one engine.
type cell struct {
	wall     time.Duration // median over the runs
	first    time.Duration // the first run's (cpu-par: arrays not yet kept from a job before)
	cpu      time.Duration // process CPU time, median
	sys      time.Duration // the system (kernel) part of it, median
	print    string        // the outputs' fingerprint (the first run's)
	stable   bool          // every run printed the same
	stages   gpucompact.Stats
	fallback uint64
	rssAdded uint64     // the most a run raised the process's resident set over its start (0: unknown)
	calls    cuda.Calls // gpu: the device's calls during the last run (one job)
	counted  bool       // calls holds counts (the device opened here)
}

// Run runs warp bench kvcompact with args (its flags) and writes the report
// to w.
func Run(ctx context.Context, args []string, w io.Writer) error {
	fs := cli.NewFlags("bench kvcompact", "[--values 32,128,...] [--compression none,snappy] [--key 16,8..64] [--fs mem|os] [--json] [flags]\n\n"+
		"Builds one L0→L1 job per key length, value size and compression (L0 tables over an overlapping L1 run, 16-byte\n"+
		"keys or those --key lists: lengths N or ranges MIN..MAX, each key's length drawn in them; no snapshots) and\n"+
		"runs it on each engine: cpu (compaction.CPU, one goroutine: the oracle), cpu-parts (its subcompactions;\n"+
		"outputs cut elsewhere, so not compared), cpu-par (kv/gpucompact's Go engine, every core) and, where there\n"+
		"is a device, gpu (its CUDA engine).\n"+
		"Only gpu needs a GPU: the other engines run on the CPU.\n"+
		"MB/s are of input table bytes per wall second (median of --runs); CPU-s/GB is process CPU time per input GB,\n"+
		"sys its kernel share (page faults on fresh memory, file writes). RSS+ MB is how far one more run of the job,\n"+
		"untimed, after the Go heap returned its free pages, raised the process's resident set (Linux VmHWM): the\n"+
		"memory a job takes besides what the engine keeps between jobs (the stage table's held), with --fs mem its\n"+
		"output tables among it; 0 where the system has no such count.\n"+
		"cpu-par's outputs must equal cpu's byte for byte (ident). cpu-par keeps its arrays from one job to the next, as\n"+
		"in a store; its 1st column is the first run of a job, on a new Compactor (the first job of a run is the one\n"+
		"whose memory is all fresh: later ones reuse pages the Go heap got back from earlier runs). The medians\n"+
		"include that first run; the stage table leaves it out. A job cpu-par falls back on (fallbacks) is timed\n"+
		"on compaction.CPU.")
	var values []int
	cli.IntListVarFlag(fs, &values, "values", []int{32, 64, 128, 256, 512, 1024, 4096}, 0, 1<<20, "value sizes in bytes")
	var comps []string
	cli.ChoiceListVarFlag(fs, &comps, "compression", []string{"none", "snappy"}, []string{"none", "snappy", "s2"}, "table compression, inputs and outputs")
	var engines []string
	defaults := engineNames[:3]
	if devs, err := cuda.Devices(); err == nil && len(devs) > 0 {
		defaults = engineNames // a device: gpu too
	}
	cli.ChoiceListVarFlag(fs, &engines, "engines", defaults, engineNames, "engines to run (cpu always runs: the baseline and oracle; gpu needs a CUDA device and runs by default where there is one)")
	l0Tables := cli.IntFlag(fs, "l0-tables", 4, 1, 256, "L0 tables in the job")
	l0KiB := cli.IntFlag(fs, "l0-kib", 4096, 16, 1<<20, "KiB of entries per L0 table")
	l1KiB := cli.IntFlag(fs, "l1-kib", 40960, 16, 16<<20, "KiB of entries in L1")
	tableKiB := cli.IntFlag(fs, "table-kib", 4096, 16, 1<<20, "KiB of entries per L1 table, and the job's target output size")
	keys := keyLens{{16, 16}}
	fs.Var(&keys, "key", fmt.Sprintf("key lengths in bytes: N, or MIN..MAX for keys of varying length, each key's drawn in [MIN, MAX] (the gLSM paper's are 6..64 B; the tables are sized by the mean); a comma-separated list runs every job at each, in a key B column (`LIST`: each %d..%d)", minKeyLen, maxKeyLen))
	runs := cli.IntFlag(fs, "runs", 3, 1, 100, "runs per engine and job (the median is printed)")
	fsKind := cli.ChoiceFlag(fs, "fs", "mem", []string{"mem", "os"}, "where the tables live: in memory, or in --dir on disk")
	dir := fs.String("dir", "", "directory for --fs os (default: a new temporary directory, removed afterwards)")
	var stressLevels []int
	cli.IntListVarFlag(fs, &stressLevels, "cpu-stress", []int{0}, 0, 100, "percent of every core taken by burner processes (one per logical CPU, busy that share of each 10 ms, as stress-ng); a list runs every job at each")
	sortMode := cli.ChoiceFlag(fs, "sort", "merge", []string{"merge", "radix"}, "how gpu orders a job's entries (gpucompact.Options.Sort): merging the sorted runs, or the paper's LSD radix sort of whole keys (an ablation: the paper's Fig. 16(c))")
	hostWorkers := cli.IntFlag(fs, "host-workers", 0, 0, 1024, "goroutines each host stage of cpu-par and gpu splits over (gpucompact.Options.HostWorkers); 0: GOMAXPROCS")
	pinnedMiB := cli.IntFlag(fs, "pinned-mib", 0, -1, 1<<20, "MiB of page-locked host memory gpu may keep for a job (gpucompact.Options.PinnedBytes): arrays past it travel through a ring of two 16 MiB slots; 0: the default, -1: no limit")
	budgetMiB := cli.IntFlag(fs, "memory-budget", 0, 0, 1<<30, "MiB of memory cpu-par and gpu may use for a job (gpucompact.Options.MemoryBudget): a job past it runs in key-range partitions (the stage table counts them); 0: no limit")
	sealing := cli.ChoiceFlag(fs, "sealing", "auto", []string{"auto", "host", "device"}, "where gpu compresses and checksums Snappy output blocks (gpucompact.Options.Sealing): auto (the device where its bytes are the host's s2's), host or device")
	moveValues := fs.Bool("move-values", false, "gpu copies every value into a new array after each merge round or radix pass (gpucompact.Options.MoveValues: the ablation of key-value separation, the paper's Table 2)")
	quick := fs.Bool("quick", false, "values 32,128,1024,4096, no compression, one run each; --cpu-stress 0,40,80 unless given")
	asJSON := fs.Bool("json", false, "print JSON")
	var prof profiles
	fs.StringVar(&prof.cpu, "cpuprofile", "", "write a CPU profile of the first gpucompact engine's (cpu-par, else gpu) second run (its first with arrays kept from a job before; the first with --runs 1) of the first job to this `file`")
	fs.StringVar(&prof.trace, "trace", "", "write an execution trace of the run --cpuprofile profiles to this `file` (go tool trace)")
	fs.BoolVar(&prof.all, "profile-all", false, "with --cpuprofile, profile every engine's runs after the first of the first job, each labelled engine=NAME (go tool pprof -tagfocus engine=gpu): enough samples of a short job")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if err := cli.NoArgs(fs); err != nil {
		return err
	}
	if *quick {
		values, comps, *runs = []int{32, 128, 1024, 4096}, []string{"none"}, 1
		if !cli.Given(fs, "cpu-stress") {
			stressLevels = []int{0, 40, 80}
		}
	}
	// cpu first, always: the baseline the other columns divide by.
	engines = append([]string{"cpu"}, slices.DeleteFunc(slices.Clone(engines), func(e string) bool { return e == "cpu" })...)
	var vfsys vfs.FS
	root := "/"
	if *fsKind == "mem" {
		vfsys = vfs.NewMem()
	} else {
		vfsys = vfs.Default
		root = *dir
		if root == "" {
			tmp, err := os.MkdirTemp("", "warp-kvcompact-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(tmp)
			root = tmp
		}
	}
	defer prof.stop()
	gpuOpts := gpucompact.Options{MoveValues: *moveValues, Sealing: map[string]gpucompact.Sealing{"auto": gpucompact.SealAuto, "host": gpucompact.SealOnHost, "device": gpucompact.SealOnDevice}[*sealing], MemoryBudget: -1}
	ablation := ""
	if *budgetMiB > 0 {
		gpuOpts.MemoryBudget = int64(*budgetMiB) << 20
		ablation += fmt.Sprintf(", cpu-par and gpu within %d MiB a job (partitions)", *budgetMiB)
	}
	switch {
	case *pinnedMiB < 0:
		gpuOpts.PinnedBytes = -1
		ablation += ", gpu pins without a limit"
	case *pinnedMiB > 0:
		gpuOpts.PinnedBytes = int64(*pinnedMiB) << 20
		ablation += fmt.Sprintf(", gpu pins at most %d MiB", *pinnedMiB)
	}
	if *hostWorkers > 0 {
		gpuOpts.HostWorkers = *hostWorkers
		ablation += fmt.Sprintf(", cpu-par and gpu on %d host workers a stage", *hostWorkers)
	}
	if *sortMode == "radix" {
		gpuOpts.Sort = gpucompact.SortRadix
		ablation += ", gpu sorts by radix"
	}
	if *moveValues {
		ablation += ", gpu moves values every round"
	}
	if *sealing != "auto" {
		ablation += ", gpu seals Snappy blocks on the " + *sealing
	}
	rep := benchfmt.NewReport(fmt.Sprintf("warp bench kvcompact: one L0→L1 job, %d L0 × %d KiB over a %d KiB L1, %s-byte keys, --fs %s%s",
		*l0Tables, *l0KiB, *l1KiB, keys.join("/"), *fsKind, ablation),
		fmt.Sprintf("host: %d logical CPUs, GOMAXPROCS %d", runtime.NumCPU(), runtime.GOMAXPROCS(0)))
	if !*asJSON {
		rep.Stream(w)
	}
	// Several --key items: a key B column before value B in every table
	// (one item: the title says it, as before).
	sweepKeys := len(keys) > 1
	keyCol := func(cols []string, i int) []string {
		if sweepKeys {
			return slices.Insert(cols, i, "key B")
		}
		return cols
	}
	keyCell := func(cells []any, i int, k keyLen) []any {
		if sweepKeys {
			return slices.Insert(cells, i, k.cell())
		}
		return cells
	}
	cols := keyCol([]string{"stress %", "compression", "value B", "entries", "input MB", "cpu MB/s"}, 2)
	for _, e := range engines[1:] {
		cols = append(cols, e+" MB/s", e+"/cpu")
		if gpucompactEngine(e) {
			cols = append(cols, e+" 1st MB/s")
		}
	}
	cols = append(cols, "CPU-s/GB "+strings.Join(engines, "/"), "sys "+strings.Join(engines, "/"), "RSS+ MB "+strings.Join(engines, "/"), "ident")
	rates := rep.Table("rates (median of the runs)", cols...)
	var stageRows [][]any
	type targetRow struct {
		comp  string
		key   keyLen
		value int
		ratio float64
	}
	var targetRows []targetRow
	// Issue 16's rows: gpu against its targets (cpu-par's rate when it ran).
	type gpuRow struct {
		comp             string
		key              keyLen
		value            int
		mbs, vsCPU, cpus float64
		vsPar            float64 // 0: cpu-par not run
		launches         int64   // the last run's job; -1: not counted
	}
	var gpuRows []gpuRow
	// The jobs: each key length, compression and value size.
	type keyComp struct {
		key  keyLen
		comp string
	}
	var keyComps []keyComp
	for _, k := range keys {
		for _, c := range comps {
			keyComps = append(keyComps, keyComp{k, c})
		}
	}
	// Each stress level runs every job, with burners on every core.
	err := forEachStress(stressLevels, func(pct int) error {
		for _, kc := range keyComps {
			key, compName := kc.key, kc.comp
			comp, err := sstable.ParseCompression(compName)
			if err != nil {
				return fmt.Errorf("%w: %v", cli.ErrUsage, err)
			}
			for _, value := range values {
				if err := ctx.Err(); err != nil {
					return err
				}
				shape := kvbench.CompactJob{
					L0Tables: *l0Tables, L0Bytes: *l0KiB << 10, L1Bytes: *l1KiB << 10, TableSize: *tableKiB << 10,
					ValueLen: value, Compression: comp, Seed: 1,
				}
				key.set(&shape)
				cells, job, err := runJob(ctx, vfsys, root, engines, gpuOpts, *runs, &prof, shape)
				if err != nil {
					return err
				}
				in := float64(job.bytes)
				mbs := func(c cell) float64 { return in / 1e6 / c.wall.Seconds() }
				cpuSPerGB := func(c cell) string { return fmt.Sprintf("%.2f", c.cpu.Seconds()/(in/1e9)) }
				row := keyCell([]any{pct, compName, value, job.entries, in / 1e6, mbs(cells[0])}, 2, key)
				sysShare := func(c cell) string { return fmt.Sprintf("%.0f%%", 100*c.sys.Seconds()/max(c.cpu.Seconds(), 1e-9)) }
				rssAdded := func(c cell) string { return fmt.Sprintf("%.0f", float64(c.rssAdded)/1e6) }
				cpuCells := []string{cpuSPerGB(cells[0])}
				sysCells := []string{sysShare(cells[0])}
				rssCells := []string{rssAdded(cells[0])}
				var idents []string
				for i, name := range engines[1:] {
					c := cells[i+1]
					row = append(row, mbs(c), benchfmt.Ratio(mbs(c), mbs(cells[0])))
					if gpucompactEngine(name) {
						row = append(row, in/1e6/c.first.Seconds())
					}
					cpuCells = append(cpuCells, cpuSPerGB(c))
					sysCells = append(sysCells, sysShare(c))
					rssCells = append(rssCells, rssAdded(c))
					if gpucompactEngine(name) {
						idents = append(idents, benchfmt.YesNo(c.print == cells[0].print && c.stable && cells[0].stable && c.fallback == 0))
						st := c.stages
						n := float64(st.EngineJobs)
						ms := func(d time.Duration) float64 { return benchfmt.Millis(d) / max(n, 1) }
						held := fmt.Sprintf("%.0f/%.0f/%.0f", float64(st.HeldBytes)/1e6, float64(st.PinnedBytes)/1e6, float64(st.DeviceHeldBytes)/1e6)
						calls := "-"
						if name == "gpu" && c.counted {
							k := c.calls
							calls = fmt.Sprintf("%d/%d/%d/%d/%d", k.Launches, k.Memsets, k.Copies, k.Waits+k.SyncCopies, k.Allocs)
						}
						batches, tail := "-", "-"
						if st.EncodeBatches > 0 {
							batches = fmt.Sprintf("%.1f in %.2f", float64(st.EncodeBatches)/max(n, 1), ms(st.Encode))
							tail = fmt.Sprintf("%.2f", ms(st.WriteTail))
						}
						stageRows = append(stageRows, keyCell([]any{name, pct, compName, value, ms(st.Load), ms(st.Merge), ms(st.GC), ms(st.Sizes), ms(st.Plan), ms(st.Write),
							batches, tail, benchfmt.Millis(c.wall), c.cpu.Seconds() / c.wall.Seconds(), held, float64(st.Partitions) / max(n, 1), c.fallback, calls}, 3, key))
						if name == "cpu-par" && value <= targetMaxValue && pct == 0 {
							targetRows = append(targetRows, targetRow{compName, key, value, mbs(c) / mbs(cells[0])})
						}
						if name == "gpu" && pct == 0 {
							r := gpuRow{comp: compName, key: key, value: value, mbs: mbs(c), vsCPU: mbs(c) / mbs(cells[0]), cpus: c.cpu.Seconds() / (in / 1e9), launches: -1}
							if c.counted {
								r.launches = c.calls.Launches
							}
							if p := slices.Index(engines, "cpu-par"); p > 0 {
								r.vsPar = mbs(c) / mbs(cells[p])
							}
							gpuRows = append(gpuRows, r)
						}
					}
				}
				ident := "-"
				if len(idents) > 0 {
					ident = strings.Join(idents, "/")
				}
				row = append(row, strings.Join(cpuCells, "/"), strings.Join(sysCells, "/"), strings.Join(rssCells, "/"), ident)
				rates.Add(row...)
				if strings.Contains(ident, "NO") {
					keys := ""
					if sweepKeys {
						keys = ", " + key.String() + "-byte keys"
					}
					rep.Note("%s%s, %d-byte values: a gpucompact engine's outputs differ from cpu's (or it fell back, or runs disagreed): ident %s", compName, keys, value, ident)
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(stageRows) > 0 {
		t := rep.Table("gpucompact stages (ms per job, the runs after the first: load = read + check + decompress + decode; sizes = each entry's encoded size; plan = the sequential walk cutting blocks and tables, with the encoders and writers behind it; write = the encoding and writing left after the walk; batches = the device batches a job (gpu): how many, in how many ms (the blocks' encoding, sealing and filters, the copies back, the waits: beside plan and write); tail = the write stage's time after the last batch; cores busy = CPU time / wall; held = the memory the engine keeps between jobs: host, the pinned part of it (gpu: its arrays, ring and staging) and device; gpu: load = read + decompress on the host, decode on the device; merge = merge rounds + GC flags; gc = the host's checks + selection; sizes = sizes + download; device calls = gpu's launches / memsets / copies / waits (synchronous copies among them) / allocations in the last run's job, cuda.Device.Calls)",
			keyCol([]string{"engine", "stress %", "compression", "value B", "load", "merge", "gc+select", "sizes", "plan", "write", "batches", "tail", "wall", "cores busy", "held MB host/pinned/device", "partitions", "fallbacks", "device calls"}, 3)...)
		for _, r := range stageRows {
			t.Add(r...)
		}
	}
	if len(targetRows) > 0 {
		want, where := 0.0, ""
		switch p := runtime.GOMAXPROCS(0); {
		case p >= 16:
			want, where = target16, "16 cores"
		case p <= 2:
			want, where = target2, "2 cores"
		}
		if want > 0 {
			t := rep.Table(fmt.Sprintf("target: cpu-par ≥ %.1f× cpu at values ≤ %d B on %s, no stress (issue 15)", want, targetMaxValue, where),
				keyCol([]string{"compression", "value B", "cpu-par/cpu", "target", "met"}, 1)...)
			for _, r := range targetRows {
				t.Add(keyCell([]any{r.comp, r.value, fmt.Sprintf("%.2fx", r.ratio), fmt.Sprintf("%.1fx", want), benchfmt.YesNo(r.ratio >= want)}, 1, r.key)...)
			}
		} else {
			rep.Note("targets: issue 15 sets them for 16 cores (%.1f×) and 2 cores (%.1f×); this run has GOMAXPROCS %d", target16, target2, runtime.GOMAXPROCS(0))
		}
	}
	if len(gpuRows) > 0 {
		t := rep.Table(fmt.Sprintf("targets of gpu, no stress (issue 16): at 32–%d B ≥ %.1f GB/s, ≥ %.0f× cpu, ≥ %.1f× cpu-par, ≤ %.1f CPU-s/GB; at ≥ 1 KiB ≥ %.1f GB/s; ≤ %d launches a job",
			targetMaxValue, gpuSmallMBs/1e3, gpuSmallVsCPU, gpuSmallVsPar, gpuSmallCPUSPGB, gpuLargeMBs/1e3, gpuMaxLaunches),
			keyCol([]string{"compression", "value B", "gpu MB/s", "gpu/cpu", "gpu/cpu-par", "CPU-s/GB", "met", "launches", "launches met"}, 1)...)
		for _, r := range gpuRows {
			vsPar, met := "-", ""
			switch {
			case r.value <= targetMaxValue:
				ok := r.mbs >= gpuSmallMBs && r.vsCPU >= gpuSmallVsCPU && r.cpus <= gpuSmallCPUSPGB && (r.vsPar == 0 || r.vsPar >= gpuSmallVsPar)
				met = benchfmt.YesNo(ok)
			case r.value >= 1024:
				met = benchfmt.YesNo(r.mbs >= gpuLargeMBs)
			}
			if r.vsPar > 0 {
				vsPar = fmt.Sprintf("%.2fx", r.vsPar)
			}
			launches, launchesMet := "-", "-"
			if r.launches >= 0 {
				launches, launchesMet = fmt.Sprint(r.launches), benchfmt.YesNo(r.launches <= gpuMaxLaunches)
			}
			t.Add(keyCell([]any{r.comp, r.value, r.mbs, fmt.Sprintf("%.2fx", r.vsCPU), vsPar, fmt.Sprintf("%.2f", r.cpus), met, launches, launchesMet}, 1, r.key)...)
		}
	}
	rep.Note("cpu: compaction.CPU{Parts: 1}; cpu-parts: compaction.CPU{} (min(GOMAXPROCS, 8) subcompactions); cpu-par: gpucompact.New with Backend CPU and MinInputBytes -1 (every job on the Go engine), fallback compaction.CPU{Parts: 1}; gpu: the same with Backend CUDA (the CUDA engine)")
	rep.Note("each run: runtime.GC() first, then one Compact; its outputs fingerprinted (file bytes, metadata, Stats) and deleted")
	if slices.ContainsFunc(stressLevels, func(p int) bool { return p > 0 }) {
		rep.Note("stress: %d burner processes (internal/stress), each busy that share of every 10 ms on one core; CPU-s/GB counts this process only", runtime.NumCPU())
	}
	return rep.Print(w, *asJSON)
}

// jobInfo describes a built job.
type jobInfo struct {
	bytes   uint64
	entries uint64
}

// runJob builds the job in a fresh directory of fsys and runs it on each
// engine, runs times, in alternation.
func runJob(ctx context.Context, fsys vfs.FS, root string, names []string, gpuOpts gpucompact.Options, runs int, prof *profiles, shape kvbench.CompactJob) ([]cell, jobInfo, error) {
	dir := fsys.PathJoin(root, fmt.Sprintf("job-%d-%s", shape.ValueLen, shape.Compression))
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return nil, jobInfo{}, err
	}
	env := kvbench.NewCompactEnv(fsys, dir)
	defer func() {
		env.Remove()
		fsys.Remove(dir) // empty by now
	}()
	job, err := env.Build(shape)
	if err != nil {
		return nil, jobInfo{}, fmt.Errorf("build the job: %w", err)
	}
	var engines []engine
	for _, name := range names {
		switch name {
		case "cpu":
			engines = append(engines, engine{name: name, c: compaction.CPU{Parts: 1}})
		case "cpu-parts":
			engines = append(engines, engine{name: name, c: compaction.CPU{}})
		case "cpu-par", "gpu":
			opts := gpucompact.Options{Backend: warpkit.CPU, MinInputBytes: -1, MemoryBudget: gpuOpts.MemoryBudget, HostWorkers: gpuOpts.HostWorkers, Fallback: compaction.CPU{Parts: 1}}
			if name == "gpu" {
				opts.Backend, opts.Sort, opts.MoveValues, opts.Sealing = warpkit.CUDA, gpuOpts.Sort, gpuOpts.MoveValues, gpuOpts.Sealing
				opts.PinnedBytes, opts.Device = gpuOpts.PinnedBytes, testDevice
			}
			gc, err := gpucompact.New(opts)
			if err != nil {
				return nil, jobInfo{}, fmt.Errorf("%s: %w", name, err)
			}
			defer gc.Close()
			engines = append(engines, engine{name: name, c: gc, gc: gc})
		}
	}
	// The CUDA engine opens device 0; a handle here reads its counts.
	dev := testDevice
	if slices.Contains(names, "gpu") && dev == nil {
		if d, err := cuda.Open(0); err == nil {
			dev = d
			defer dev.Close()
		}
	}
	walls := make([][]time.Duration, len(engines))
	cpus := make([][]time.Duration, len(engines))
	syss := make([][]time.Duration, len(engines))
	cells := make([]cell, len(engines))
	afterFirst := make([]gpucompact.Stats, len(engines))
	var info jobInfo
	info.bytes = job.InputBytes()
	for r := range runs {
		for i, e := range engines {
			if err := ctx.Err(); err != nil {
				return nil, info, err
			}
			runtime.GC()
			profiled := e.gc != nil && r == min(1, runs-1) || prof.all && r >= min(1, runs-1)
			if profiled {
				if err := prof.start(); err != nil {
					return nil, info, err
				}
			}
			user0, sys0 := processCPU()
			calls0 := dev.Calls()
			t0 := time.Now()
			var res *compaction.Result
			var err error
			pprof.Do(ctx, pprof.Labels("engine", e.name), func(ctx context.Context) { res, err = e.c.Compact(ctx, job) })
			wall := time.Since(t0)
			user1, sys1 := processCPU()

			if e.name == "gpu" && dev != nil {
				cells[i].calls, cells[i].counted = dev.Calls().Sub(calls0), true
			}
			if profiled && !prof.all {
				if err := prof.stop(); err != nil {
					return nil, info, err
				}
			}
			cpu := user1 - user0 + sys1 - sys0
			syss[i] = append(syss[i], sys1-sys0)
			if err != nil {
				return nil, info, fmt.Errorf("%s: %w", e.name, err)
			}
			walls[i] = append(walls[i], wall)
			cpus[i] = append(cpus[i], cpu)
			print, err := env.Fingerprint(res)
			if err != nil {
				return nil, info, err
			}
			if r == 0 {
				cells[i].print, cells[i].stable = print, true
			} else if print != cells[i].print {
				cells[i].stable = false
			}
			if e.name == "cpu" {
				info.entries = res.Stats.EntriesIn
			}
			if err := env.Drop(); err != nil {
				return nil, info, err
			}
			if e.gc != nil && r == 0 && runs > 1 {
				afterFirst[i] = e.gc.Stats() // stage times are shown for the runs after it
			}
		}
	}
	// One more run of each engine, untimed, for the resident memory a job
	// adds: the heap's free pages returned first (the timed runs keep them,
	// as a store's jobs would), so that the job's own show. None where
	// the system has no resettable peak.
	for i, e := range engines {
		added, err := residentAdded(func() error {
			if _, err := e.c.Compact(ctx, job); err != nil {
				return err
			}
			return env.Drop()
		})
		if err != nil {
			return nil, info, fmt.Errorf("%s: %w", e.name, err)
		}
		cells[i].rssAdded = added
	}
	for i, e := range engines {
		cells[i].wall = median(walls[i])
		cells[i].first = walls[i][0]
		cells[i].cpu = median(cpus[i])
		cells[i].sys = median(syss[i])
		if e.gc != nil {
			st := e.gc.Stats()
			cells[i].fallback = st.FallbackJobs // failures, and jobs past the engine's 4 GiB
			a := afterFirst[i]
			st.EngineJobs -= a.EngineJobs
			st.Partitions -= a.Partitions
			st.Load, st.Merge, st.GC, st.Sizes, st.Plan, st.Write = st.Load-a.Load, st.Merge-a.Merge, st.GC-a.GC, st.Sizes-a.Sizes, st.Plan-a.Plan, st.Write-a.Write
			st.Encode, st.WriteTail, st.EncodeBatches = st.Encode-a.Encode, st.WriteTail-a.WriteTail, st.EncodeBatches-a.EncodeBatches
			cells[i].stages = st
		}
	}
	return cells, info, nil
}

// residentAdded runs f in a window of procmem (the heap's free pages
// returned first) and returns how far f raised the resident set above the
// window's start; where the system cannot tell, it returns 0 without
// running f (whose run is only for the measure).
func residentAdded(f func() error) (uint64, error) {
	runtime.GC()
	if procmem.ResetPeak() != nil {
		return 0, nil
	}
	_, start, err := procmem.Peak()
	if err != nil {
		return 0, nil
	}
	if err := f(); err != nil {
		return 0, err
	}
	peak, _, err := procmem.Peak()
	if err != nil || peak < start {
		return 0, nil
	}
	return peak - start, nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// forEachStress calls f at each stress level, with that level's burners
// running (none at 0), and stops them after.
func forEachStress(levels []int, f func(pct int) error) error {
	for _, pct := range levels {
		b, err := stress.Start(pct, 0)
		if err != nil {
			return err
		}
		err = f(pct)
		if _, serr := b.Stop(); err == nil && serr != nil {
			err = fmt.Errorf("stop the burners: %w", serr)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
