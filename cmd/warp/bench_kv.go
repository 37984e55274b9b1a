package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/benchfmt"
	"github.com/warpkit/warpkit/internal/cli"
	"github.com/warpkit/warpkit/internal/procmem"
	"github.com/warpkit/warpkit/internal/progress"
	"github.com/warpkit/warpkit/internal/stress"
	"github.com/warpkit/warpkit/kv"
	"github.com/warpkit/warpkit/kv/gpucompact"
	"github.com/warpkit/warpkit/kv/kvbench"
	"github.com/warpkit/warpkit/kv/sstable"
	"github.com/warpkit/warpkit/kv/vfs"
)

func init() {
	registerBench(&benchmark{
		name:    "kv",
		summary: "persistent kv store: db_bench workloads and YCSB A-F (same as warp kv bench)",
		run: func(ctx context.Context, args []string, _ io.Writer) error {
			return runKVBench(ctx, args) // prints on os.Stdout, as warp kv bench does
		},
	})
}

func runKVBenchCommand(args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	return runKVBench(ctx, args)
}

// kvBenchFlags are warp kv bench's settings.
type kvBenchFlags struct {
	num, reads        int
	threads           []int
	value             string
	workloads         string
	dir, fs           string
	sync, quick, json bool
	progress          string
	memtable, table   int
	compactions       int
	flushWorkers      int
	bytesPerSyncKiB   int
	gpuEngines        int
	gpuHostWorkers    int
	gpuSealFlushes    *string
	gpuWhenBusy       *string
	compactors        []string
	stress            []int
	cacheMB           int
	compression       string
	seed              uint64
	cpuprofile        string
}

// Limits of warp kv bench's numeric flags (the store's own: a memtable of
// at most 1 GiB).
const (
	kvMaxNum     = 1_000_000_000
	kvMaxThreads = 4096
	kvMaxMiB     = 1024
	kvMaxCache   = 1 << 20 // MiB: 1 TiB
)

// kvProgressInterval is how often a running workload prints a plain
// progress line (off a terminal); tests shorten it.
var kvProgressInterval = progress.DefaultInterval

func runKVBench(ctx context.Context, args []string) error {
	fs := cli.NewFlags("kv bench", "[flags]")
	var f kvBenchFlags
	cli.IntVarFlag(fs, &f.num, "num", 1_000_000, 1, kvMaxNum, "keys written by each fill (db_bench --num)")
	cli.IntVarFlag(fs, &f.reads, "reads", 0, 0, kvMaxNum, "operations per read and YCSB workload (0: as many as --num)")
	cli.IntListVarFlag(fs, &f.threads, "threads", []int{1}, 1, kvMaxThreads, "concurrent clients; a list (1,2,4,8) runs every workload at each")
	fs.StringVar(&f.value, "value", "100", "value size in bytes, or a range MIN..MAX drawn uniformly (YCSB: e.g. 32..4096)")
	fs.StringVar(&f.workloads, "workloads", strings.Join(kvbench.Workloads, ","), "comma-separated workloads: "+strings.Join(kvbench.Workloads, ", "))
	fs.StringVar(&f.dir, "dir", "", "directory for the store (default: a temporary directory, removed afterwards)")
	cli.ChoiceVarFlag(fs, &f.fs, "fs", "os", []string{"os", "mem"}, "file system: os, or mem (in memory, measuring CPU, not the disk)")
	fs.BoolVar(&f.sync, "sync", false, "fsync every write")
	fs.BoolVar(&f.quick, "quick", false, "small run: --num 100000 unless --num is given")
	fs.BoolVar(&f.json, "json", false, "print JSON")
	cli.ChoiceVarFlag(fs, &f.progress, "progress", "auto", progress.Modes,
		"progress on stderr: auto is bars with rate and ETA on a terminal, else plain (a line every 5 s)")
	cli.IntVarFlag(fs, &f.memtable, "memtable", 4, 1, kvMaxMiB, "memtable size in MiB")
	cli.IntVarFlag(fs, &f.table, "table-size", 4, 1, kvMaxMiB, "target table size in MiB")
	cli.IntVarFlag(fs, &f.cacheMB, "cache", 32, 1, kvMaxCache, "block cache in MiB")
	cli.ChoiceVarFlag(fs, &f.compression, "compression", "snappy", []string{"none", "snappy", "s2"}, "block compression")
	cli.IntVarFlag(fs, &f.compactions, "compactions", 0, 0, 64, "concurrent background compactions (0: the store's default, sized from GOMAXPROCS)")
	cli.IntVarFlag(fs, &f.flushWorkers, "flush-workers", 0, 0, 64, "goroutines a flush encodes its table on (kv.Options.FlushWorkers; 0: the store's default, sized from GOMAXPROCS)")
	cli.IntVarFlag(fs, &f.bytesPerSyncKiB, "bytes-per-sync", 512, 0, 1<<20, "KiB of a table written between the starts of its writeback (kv.Options.BytesPerSync: sync_file_range on Linux with --fs os); 0: none")
	cli.IntVarFlag(fs, &f.gpuEngines, "gpu-engines", 1, 1, 8, "jobs the gpu compactor's engine runs at once (gpucompact.Options.Engines)")
	cli.IntVarFlag(fs, &f.gpuHostWorkers, "gpu-host-workers", 0, 0, 1024, "goroutines each host stage of a gpu compactor's job splits over (gpucompact.Options.HostWorkers); 0: GOMAXPROCS")
	f.gpuSealFlushes = cli.ChoiceFlag(fs, "gpu-seal-flushes", "off", []string{"on", "off"}, "whether the gpu compactor also seals the store's memtable flushes' Snappy blocks on its device (gpucompact.Options.SealFlushes)")
	f.gpuWhenBusy = cli.ChoiceFlag(fs, "gpu-when-busy", "faster", []string{"faster", "fallback", "wait"}, "what a job does when the gpu compactor's engine is busy (gpucompact.Options.WhenBusy): wait when that is expected to end sooner (the default), run on compaction.CPU, or wait")
	cli.ChoiceListVarFlag(fs, &f.compactors, "compactor", []string{"cpu"}, []string{"cpu", "gpu"},
		"compactors; a list runs every workload with each: cpu is compaction.CPU, gpu is kv/gpucompact (jobs of 1 MiB and more on its CUDA engine where there is a device, else of 8 MiB and more on its Go engine)")
	cli.IntListVarFlag(fs, &f.stress, "cpu-stress", []int{0}, 0, 100,
		"percent of every core taken by burner processes (one per logical CPU, busy that share of each 10 ms, as stress-ng); a list runs every workload at each")
	fs.Uint64Var(&f.seed, "seed", 1, "random seed")
	fs.StringVar(&f.cpuprofile, "cpuprofile", "", "write a CPU profile of the first workload listed to this file")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if err := cli.NoArgs(fs); err != nil {
		return err
	}
	if f.quick && !cli.Given(fs, "num") {
		f.num = 100_000
	}
	vmin, vmax, err := kvbench.ParseValueSize(f.value)
	if err != nil {
		return fmt.Errorf("%w: --value: %v", cli.ErrUsage, err)
	}
	if f.bytesPerSyncKiB > 0 && f.bytesPerSyncKiB < 4 {
		return fmt.Errorf("%w: --bytes-per-sync %d: want 0 (none) or 4 KiB and more (kv.Options.BytesPerSync's least)", cli.ErrUsage, f.bytesPerSyncKiB)
	}
	comp, err := sstable.ParseCompression(f.compression)
	if err != nil {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	workloads := strings.Split(f.workloads, ",")
	for _, w := range workloads {
		if kvbench.Describe(w) == "" {
			return fmt.Errorf("%w: --workloads: unknown workload %q (have %s)", cli.ErrUsage, w, strings.Join(kvbench.Workloads, ", "))
		}
	}
	mode, err := progress.ParseMode(f.progress)
	if err != nil {
		return fmt.Errorf("%w: --progress: %v", cli.ErrUsage, err)
	}
	var prof *os.File
	if f.cpuprofile != "" {
		if prof, err = os.Create(f.cpuprofile); err != nil {
			return err
		}
		defer prof.Close()
	}
	var vfsys vfs.FS
	switch f.fs {
	case "os":
		vfsys = vfs.Default
	case "mem":
		vfsys = vfs.NewMem()
	}
	dir := f.dir
	if dir == "" {
		if f.fs == "mem" {
			dir = "/kvbench"
		} else {
			if dir, err = os.MkdirTemp("", "warp-kv-bench"); err != nil {
				return err
			}
			defer os.RemoveAll(dir)
		}
	}
	cfg := kvbench.Config{Num: f.num, Reads: f.reads, ValueMin: vmin, ValueMax: vmax, Threads: f.threads[0], Seed: f.seed}
	opts := &kv.Options{
		FS:             vfsys,
		MemTableSize:   f.memtable << 20,
		TargetFileSize: int64(f.table) << 20,
		BlockCacheSize: int64(f.cacheMB) << 20,
		Compression:    comp,
		// 0 keeps kv's default.
		MaxConcurrentCompactions: f.compactions,
		FlushWorkers:             f.flushWorkers,
		BytesPerSync:             int64(f.bytesPerSyncKiB) << 10,
	}
	if f.bytesPerSyncKiB == 0 {
		opts.BytesPerSync = -1
	}
	if comp == sstable.NoCompression {
		opts.DisableCompression = true
	}

	prog := progress.New(os.Stderr, mode)
	prog.DoneLines = true
	prog.Interval = kvProgressInterval
	gen := 0
	var store *kvbench.KVStore
	var runner, baseline *kvbench.Runner
	var gc *gpucompact.Compactor // the store's compactor, when gpu
	// The device, opened once for every store's gpucompact (its kernels are
	// loaded once per device); nil where there is none.
	var dev *cuda.Device
	if slices.Contains(f.compactors, "gpu") {
		var err error
		if dev, err = warpkit.OpenDevice(warpkit.Auto, 0); err != nil {
			return err
		}
		if dev != nil {
			defer dev.Close()
		}
	}
	closeStore := func() error {
		err := store.Close()
		store = nil
		if gc != nil {
			if cerr := gc.Close(); err == nil {
				err = cerr
			}
			gc = nil
		}
		return err
	}
	compactor := "cpu"
	openFresh := func() error {
		if store != nil {
			if err := closeStore(); err != nil {
				return err
			}
		}
		gen++
		d := vfsys.PathJoin(dir, fmt.Sprint(gen))
		o := *opts
		if compactor == "gpu" {
			var err error
			whenBusy := map[string]gpucompact.BusyPolicy{"fallback": gpucompact.FallbackWhenBusy, "wait": gpucompact.WaitWhenBusy, "faster": gpucompact.WaitWhenFaster}[*f.gpuWhenBusy]
			if gc, err = gpucompact.New(gpucompact.Options{Device: dev, Engines: f.gpuEngines, HostWorkers: f.gpuHostWorkers, WhenBusy: whenBusy, SealFlushes: *f.gpuSealFlushes == "on"}); err != nil {
				return err
			}
			o.Compactor = gc
		}
		db, err := kv.Open(d, &o)
		if err != nil {
			if gc != nil {
				gc.Close()
				gc = nil
			}
			return err
		}
		store = kvbench.NewKVStore(db, f.sync)
		runner = kvbench.NewRunner(store, cfg)
		baseline = kvbench.NewRunner(kvbench.NewMemStore(), cfg)
		return nil
	}
	defer func() {
		if store != nil {
			closeStore()
		}
	}()
	var runs []kvRun
	nsteps := len(f.stress) * len(f.compactors) * len(f.threads) * len(workloads)
	stepNo := 0
	for _, pct := range f.stress {
		burners, err := stress.Start(pct, 0)
		if err != nil {
			return err
		}
		err = func() error {
			for _, comp := range f.compactors {
				compactor = comp
				for _, threads := range f.threads {
					cfg.Threads = threads
					if store != nil { // every run starts from a fresh store
						if err := closeStore(); err != nil {
							return err
						}
					}
					results := map[string]*kvbench.Result{}
					base := map[string]*kvbench.Result{}
					metricsAfter := map[string]*kv.Metrics{}
					gpuAfter := map[string]gpucompact.Stats{}
					peakRSS := map[string]uint64{}
					for _, w := range workloads {
						stepNo++
						step := fmt.Sprintf("[%d/%d] %s", stepNo, nsteps, w)
						if len(f.threads) > 1 {
							step += fmt.Sprintf(" (%d clients)", threads)
						}
						if len(f.compactors) > 1 {
							step += fmt.Sprintf(" (compactor %s)", comp)
						}
						if pct > 0 {
							step += fmt.Sprintf(" (stress %d%%)", pct)
						}
						if store == nil || w == "fillseq" || w == "fillrandom" {
							if err := openFresh(); err != nil {
								return err
							}
							if w != "fillseq" && w != "fillrandom" {
								// A workload that reads needs data: load both stores.
								if _, err := runner.RunShown(ctx, prog, step+": load kv", "fillrandom"); err != nil {
									return err
								}
								if _, err := baseline.RunShown(ctx, prog, step+": load B-tree", "fillrandom"); err != nil {
									return err
								}
							}
						}
						t := prog.Start(step+": settle", 0)
						err := store.Settle()
						t.Done()
						if err != nil {
							return err
						}
						runtime.GC()
						rssOK := procmem.ResetPeak() == nil // the kv run's peak resident set (Table 9's memory)
						if prof != nil {
							if err := pprof.StartCPUProfile(prof); err != nil {
								return err
							}
						}
						res, err := runner.RunShown(ctx, prog, step+": kv", w)
						if prof != nil {
							pprof.StopCPUProfile()
							prof = nil // one profile: the first measured workload
						}
						if err != nil {
							return err
						}
						results[w] = res
						if peak, _, err := procmem.Peak(); rssOK && err == nil {
							peakRSS[w] = peak
						}
						metricsAfter[w] = store.DB.Metrics()
						if gc != nil {
							gpuAfter[w] = gc.Stats()
						}
						// The baseline runs the same workload on its own copy of the data.
						b, err := baseline.RunShown(ctx, prog, step+": B-tree", w)
						if err != nil {
							return err
						}
						base[w] = b
					}
					runs = append(runs, kvRun{cfg: runner.Config(), compactor: comp, stress: pct, res: results, base: base, met: metricsAfter, gpu: gpuAfter, rss: peakRSS})
				}
			}
			return nil
		}()
		if _, serr := burners.Stop(); err == nil && serr != nil {
			err = fmt.Errorf("stop the burners: %w", serr)
		}
		if err != nil {
			return err
		}
	}
	rep := kvReport(f, workloads, runs)
	return rep.Print(os.Stdout, f.json)
}

// kvRun is the results of every workload at one client count.
type kvRun struct {
	cfg       kvbench.Config
	compactor string
	stress    int // percent of every core the burners took
	res, base map[string]*kvbench.Result
	met       map[string]*kv.Metrics
	gpu       map[string]gpucompact.Stats // the gpu compactor's, after each workload
	rss       map[string]uint64           // the process's peak resident set during each kv run (procmem), where known
}

// rssMB is a peak resident set in MB, "-" where it was not measured.
func rssMB(b uint64) any {
	if b == 0 {
		return "-"
	}
	return float64(b) / 1e6
}

func kvReport(f kvBenchFlags, workloads []string, runs []kvRun) *benchfmt.Report {
	device := fmt.Sprintf("%s, GOMAXPROCS %d, file system %s", cpuModel(), runtime.GOMAXPROCS(0), f.fs)
	rep := benchfmt.NewReport("warp kv bench: db_bench workloads and YCSB A-F on warpkit kv", device)
	cfg := runs[0].cfg
	sweep := len(f.threads) > 1 // a clients column, rows per client count
	byCompactor := len(f.compactors) > 1
	byStress := len(f.stress) > 1 || f.stress[0] > 0
	clients := fmt.Sprintf("%d client(s)", max(cfg.Threads, 1))
	if sweep {
		clients = "clients as listed"
	}
	cols := []string{"workload", "ops", "ops/s", "MB/s", "p50 µs", "p99 µs", "p99.9 µs", "max µs", "in-memory B-tree ops/s", "kv/B-tree"}
	lsmCols := []string{"workload", "write amp", "compaction MB/s", "compactions", "stalls", "waits mem/L0", "stall ms", "flush ms", "peak RSS MB", "L0..L6 tables"}
	accel := slices.Contains(f.compactors, "gpu")
	if accel {
		lsmCols = append(lsmCols, "accelerated jobs", "fallbacks", "declined busy/budget/small", "partitioned jobs", "device-sealed flushes")
	}
	if sweep {
		cols = append([]string{"clients"}, cols...)
		lsmCols = append([]string{"clients"}, lsmCols...)
	}
	if byCompactor {
		cols = append([]string{"compactor"}, cols...)
		lsmCols = append([]string{"compactor"}, lsmCols...)
	}
	if byStress {
		cols = append([]string{"stress %"}, cols...)
		lsmCols = append([]string{"stress %"}, lsmCols...)
	}
	t := rep.Table(fmt.Sprintf("throughput and latency (num %d, 16 B keys, values %d..%d B, %s, sync %v)", cfg.Num, cfg.ValueMin, cfg.ValueMax, clients, f.sync), cols...)
	lsm := rep.Table("LSM after each write workload (counters cumulative since the store was opened)", lsmCols...)
	for _, run := range runs {
		lead := func(row ...any) []any {
			if sweep {
				row = append([]any{max(run.cfg.Threads, 1)}, row...)
			}
			if byCompactor {
				row = append([]any{run.compactor}, row...)
			}
			if byStress {
				row = append([]any{run.stress}, row...)
			}
			return row
		}
		for _, w := range workloads {
			r := run.res[w]
			b := run.base[w]
			us := func(d time.Duration) float64 { return float64(d) / 1e3 }
			t.Add(lead(w, r.Ops, r.OpsPerSec(), r.MBPerSec(), us(r.Latency.Quantile(0.5)), us(r.Latency.Quantile(0.99)), us(r.Latency.Quantile(0.999)), us(r.Latency.Max()), b.OpsPerSec(), r.OpsPerSec()/b.OpsPerSec())...)
		}
		for _, w := range workloads {
			if w != "fillseq" && w != "fillrandom" && w != "overwrite" && w != "deleterandom" && w != "ycsb-a" {
				continue
			}
			m := run.met[w]
			var tables []string
			for _, l := range m.Levels {
				tables = append(tables, fmt.Sprint(l.Tables))
			}
			row := lead(w, m.WriteAmp(), m.CompactionBandwidth()/1e6, m.Compaction.Count, m.Stalls.Slowdowns+m.Stalls.MemTableStops+m.Stalls.L0Stops,
				fmt.Sprintf("%d/%d", m.Stalls.MemTableStops, m.Stalls.L0Stops), float64(m.Stalls.Time)/1e6,
				float64(m.MemTable.FlushTime)/1e6/float64(max(m.MemTable.Flushes, 1)), rssMB(run.rss[w]), strings.Join(tables, " "))
			if accel {
				row = append(row, m.Compaction.Accelerated.Count, m.Compaction.Accelerated.Fallbacks)
				if st, ok := run.gpu[w]; ok {
					row = append(row, fmt.Sprintf("%d/%d/%d", st.Declined["busy"], st.Declined["budget"], st.Declined["small"]), st.PartitionedJobs, st.FlushSeals)
				} else {
					row = append(row, "-", "-", "-")
				}
			}
			lsm.Add(row...)
		}
	}
	rep.Note("stalls: periods in which writes stopped or slowed; waits mem/L0: the waits in them for a memtable flush / for L0 to drop below its stop (kv.Metrics.Stalls.MemTableStops / L0Stops); flush ms: a flush's mean time, memtable to L0 table installed (its writing, syncs and manifest edit); peak RSS MB: the process's largest resident set during the store's run of the workload (Linux VmHWM, reset before it; the store's memtables, block cache and heap, the gpu compactor's pinned arrays; with --fs mem its files too)")
	flushWorkers := f.flushWorkers
	if flushWorkers == 0 {
		flushWorkers = kv.DefaultFlushWorkers()
	}
	rep.Note("settings: memtable %d MiB, target table %d MiB, L0 compaction/stop 4/12 (no slowdown), L1 16 MiB, levels x10, block 4 KiB, bloom 10 bits/key, block cache %d MiB, compression %s, flushes on %d goroutine(s) (--flush-workers), %s",
		f.memtable, f.table, f.cacheMB, f.compression, flushWorkers, bytesPerSyncNote(f.bytesPerSyncKiB))
	if accel {
		rep.Note("gpu: kv/gpucompact with %d engine slot(s) (--gpu-engines), a busy engine's jobs: %s (--gpu-when-busy), host workers a stage: %s (--gpu-host-workers), flushes' blocks sealed on the device: %s (--gpu-seal-flushes)", f.gpuEngines, *f.gpuWhenBusy, workersNote(f.gpuHostWorkers), *f.gpuSealFlushes)
	}
	rep.Note("baseline: the same workload on an in-memory B-tree (tidwall/btree, no log, no files) in this run; kv/B-tree is the price of persistence")
	if byStress {
		rep.Note("stress: %d burner processes (internal/stress), each busy that share of every 10 ms on one core, during the store's and the B-tree's runs alike", runtime.NumCPU())
	}
	rep.Note("fills start from an empty store; every workload starts after background flushes and compactions settle; compare with Pebble, goleveldb and Badger: cd bench/peers && go run .")
	return rep
}

// cpuModel names the CPU (Linux), for report headers.
func cpuModel() string {
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "model name") {
				if i := strings.IndexByte(line, ':'); i > 0 {
					return fmt.Sprintf("%s x%d", strings.TrimSpace(line[i+1:]), runtime.NumCPU())
				}
			}
		}
	}
	return fmt.Sprintf("%s/%s x%d", runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
}

// workersNote names a HostWorkers value for a report.
func workersNote(w int) string {
	if w == 0 {
		return "GOMAXPROCS"
	}
	return strconv.Itoa(w)
}

// bytesPerSyncNote says how often a table's writeback starts, for the
// settings note.
func bytesPerSyncNote(kib int) string {
	if kib == 0 {
		return "tables written back at their sync (--bytes-per-sync 0)"
	}
	return fmt.Sprintf("tables' writeback started every %d KiB (--bytes-per-sync)", kib)
}
