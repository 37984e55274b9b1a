// Command peers runs warpkit's kv benchmarks (package kv/kvbench: db_bench
// workloads and YCSB A-F) on warpkit kv, Pebble, goleveldb and Badger in one
// process run, with the same memtable and table sizes, L0 thresholds, block
// size, bloom filter, block cache, compression and sync setting, and prints
// one table of rates with each store's ratio to a base store (named base/X:
// the base's ops/s over X's). The base is warpkit kv when it runs, else the
// first store listed.
//
// It is its own module so that the library never depends on its peers:
//
//	cd bench/peers && go run . --num 1000000
//
// A full run takes minutes (about 440 s at --num 1000000); on standard error
// each workload shows a progress bar with its rate and ETA on a terminal, or
// a line every 5 s elsewhere (--progress), then a line with its result.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/warpkit/warpkit/internal/benchfmt"
	"github.com/warpkit/warpkit/internal/progress"
	"github.com/warpkit/warpkit/internal/stress"
	"github.com/warpkit/warpkit/kv/kvbench"
)

// settings are what every store is configured with.
type settings struct {
	memTable    int64
	tableSize   int64
	l0Trigger   int
	l0Slowdown  int
	l0Stop      int
	lbase       int64
	blockSize   int
	bloomBits   int
	cacheSize   int64
	compression string
	sync        bool
	dir         string
	compactions int // warpkit's MaxConcurrentCompactions (0: its default)
	parts       int // warpkit's compaction.CPU Parts (0: its default)
	metrics     bool
	stress      int           // percent of every core the burners take (--cpu-stress)
	trace       *compactTrace // --trace-compactions (nil: off)
}

type opener struct {
	name string
	open func(dir string, s settings) (kvbench.Store, error)
}

var openers = []opener{
	{"warpkit", openWarpkit},
	{"warpkit-static", openWarpkitStatic},
	{"warpkit-gpu", openWarpkitGPU},
	{"pebble", openPebble},
	{"goleveldb", openGoleveldb},
	{"badger", openBadger},
}

func main() {
	stress.MaybeBurn() // --cpu-stress runs copies of peers as CPU burners
	var (
		num       = flag.Int("num", 1_000_000, "keys per fill (db_bench --num), 1..1000000000")
		reads     = flag.Int("reads", 0, "operations per read/YCSB workload, 0..1000000000 (0: as many as --num)")
		valueSize = flag.String("value", "100", "value size in bytes, or a range MIN..MAX (uniform)")
		workloads = flag.String("workloads", "fillseq,fillrandom,overwrite,readrandom,readseq,seekrandom,ycsb-a,ycsb-b,ycsb-c,ycsb-d,ycsb-e,ycsb-f,deleterandom", "comma-separated workloads")
		stores    = flag.String("stores", "warpkit,pebble,goleveldb,badger", "comma-separated stores")
		dir       = flag.String("dir", "", "directory for the stores (default: a temporary directory, removed afterwards)")
		sync      = flag.Bool("sync", false, "fsync every write")
		comp      = flag.String("compression", "snappy", "block compression: snappy or none")
		cacheMB   = flag.Int("cache", 32, "block cache MiB, 1..1048576")
		asJSON    = flag.Bool("json", false, "print JSON")
		seed      = flag.Uint64("seed", 1, "random seed")
		threadsF  = flag.String("threads", "1", "concurrent clients, each 1..4096; a list (1,2,4,8) runs the whole benchmark at each count, one report per count")
		repeat    = flag.Int("repeat", 1, "run every store this many times, alternating, and report each workload's median run; 1..100")
		cpuprof   = flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
		metrics   = flag.Bool("metrics", false, "print warpkit's and Pebble's own metrics report (levels, compactions) on stderr after fillrandom settles")
		waitprof  = flag.String("waitprofile", "", "write profiles of where goroutines wait (blocking: FILE.block, mutex contention: FILE.mutex) over the whole run")
		traceF    = flag.String("trace-compactions", "", "write one line per finished compaction and flush, and per write stall begun and ended, of warpkit and Pebble (store, seconds since its open; a compaction's input levels with their tables and MB, its output level and MB; a flush's memtable MB and duration; a stall's reason) to this file")
		compacts  = flag.Int("compactions", 0, "warpkit's concurrent background compactions, 0..64 (0: its default, sized from GOMAXPROCS)")
		compactor = flag.String("compactor", "cpu", "warpkit's compactors, a list: cpu (compaction.CPU) and gpu (kv/gpucompact: jobs of 1 MiB and more on its CUDA engine where there is a device, else of 8 MiB and more on its Go engine); gpu runs the store warpkit-gpu beside warpkit")
		parts     = flag.Int("subcompactions", 0, "warpkit's key-range parts per compaction job, 0..64 (0: its default, sized from GOMAXPROCS; 1: none)")
		stressF   = flag.String("cpu-stress", "0", "percent of every core taken by burner processes (one per logical CPU, busy that share of each 10 ms, as stress-ng), each 0..100; a list (0,40,80) runs the whole benchmark at each, one report per level")
		progMode  = flag.String("progress", "auto", "progress on stderr: auto (bars with rate and ETA on a terminal, else a line every 5 s), bars, plain, off")
	)
	flag.Parse()
	if flag.NArg() > 0 {
		usageError(fmt.Errorf("unexpected argument %q (peers takes flags only)", flag.Arg(0)))
	}
	for _, c := range []struct {
		name     string
		v        int
		min, max int
	}{{"num", *num, 1, 1_000_000_000}, {"reads", *reads, 0, 1_000_000_000}, {"cache", *cacheMB, 1, 1 << 20}, {"repeat", *repeat, 1, 100}, {"compactions", *compacts, 0, 64}, {"subcompactions", *parts, 0, 64}} {
		if err := checkRange(c.name, c.v, c.min, c.max); err != nil {
			usageError(err)
		}
	}
	if *comp != "snappy" && *comp != "none" {
		usageError(fmt.Errorf("--compression %q: want snappy or none", *comp))
	}
	mode, err := progress.ParseMode(*progMode)
	if err != nil {
		usageError(fmt.Errorf("--progress: %v", err))
	}
	vmin, vmax, err := kvbench.ParseValueSize(*valueSize)
	if err != nil {
		usageError(fmt.Errorf("--value: %v", err))
	}
	wl := strings.Split(*workloads, ",")
	for _, w := range wl {
		if kvbench.Describe(w) == "" {
			usageError(fmt.Errorf("--workloads: unknown workload %q (have %s)", w, strings.Join(kvbench.Workloads, ", ")))
		}
	}
	names := strings.Split(*stores, ",")
	var useCPU, useGPU bool
	for _, c := range strings.Split(*compactor, ",") {
		switch c {
		case "cpu":
			useCPU = true
		case "gpu":
			useGPU = true
		default:
			usageError(fmt.Errorf("--compactor: unknown compactor %q (have cpu, gpu)", c))
		}
	}
	if i := slices.Index(names, "warpkit"); i >= 0 {
		var with []string
		if useCPU {
			with = append(with, "warpkit")
		}
		if useGPU && !slices.Contains(names, "warpkit-gpu") {
			with = append(with, "warpkit-gpu")
		}
		names = slices.Concat(names[:i], with, names[i+1:])
	}
	var chosen []opener
	for _, name := range names {
		found := false
		for _, o := range openers {
			if o.name == name {
				chosen, found = append(chosen, o), true
			}
		}
		if !found {
			usageError(fmt.Errorf("--stores: unknown store %q (have warpkit, warpkit-static, warpkit-gpu, pebble, goleveldb, badger)", name))
		}
	}
	if *waitprof != "" {
		runtime.SetBlockProfileRate(10_000) // one sample per 10 µs blocked
		runtime.SetMutexProfileFraction(10)
		defer writeWaitProfiles(*waitprof)
	}
	if *cpuprof != "" {
		f, err := os.Create(*cpuprof)
		if err != nil {
			fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	s := settings{
		memTable: 4 << 20, tableSize: 4 << 20, l0Trigger: 4, l0Slowdown: 8, l0Stop: 12, lbase: 16 << 20,
		blockSize: 4096, bloomBits: 10, cacheSize: int64(*cacheMB) << 20, compression: *comp, sync: *sync,
		compactions: *compacts, parts: *parts, metrics: *metrics,
	}
	if *traceF != "" {
		f, err := os.Create(*traceF)
		if err != nil {
			fatal(err)
		}
		defer func() {
			if err := f.Close(); err != nil {
				fatal(err)
			}
		}()
		s.trace = &compactTrace{w: f}
	}
	base := *dir
	if base == "" {
		base, err = os.MkdirTemp("", "kvpeers")
		if err != nil {
			fatal(err)
		}
		defer os.RemoveAll(base)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var threadCounts []int
	for _, f := range strings.Split(*threadsF, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 4096 {
			usageError(fmt.Errorf("--threads %q: want whole numbers in 1..4096, separated by commas", *threadsF))
		}
		threadCounts = append(threadCounts, n)
	}
	stressLevels, err := parseStress(*stressF)
	if err != nil {
		usageError(err)
	}
	for _, pct := range stressLevels {
		burners, err := stress.Start(pct, 0)
		if err != nil {
			fatal(err)
		}
		s.stress = pct
		for _, threads := range threadCounts {
			cfg := kvbench.Config{Num: *num, Reads: *reads, ValueMin: vmin, ValueMax: vmax, Seed: *seed, Threads: threads}
			// Progress: a bar per workload on a terminal, else a line every 5 s
			// while one runs; each workload's result line follows it either way.
			prog := progress.New(os.Stderr, mode)
			prog.ClearBars = true
			if err := runAll(ctx, prog, chosen, wl, base, s, cfg, *repeat, *asJSON); err != nil {
				burners.Stop()
				fatal(err)
			}
		}
		if _, err := burners.Stop(); err != nil {
			fatal(err)
		}
	}
}

// parseStress parses --cpu-stress: percents in 0..100, separated by commas.
func parseStress(list string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 || n > 100 {
			return nil, fmt.Errorf("--cpu-stress %q: want percents in 0..100, separated by commas", list)
		}
		out = append(out, n)
	}
	return out, nil
}

// runAll runs every chosen store's workloads at one client count and prints
// their report.
func runAll(ctx context.Context, prog *progress.Reporter, chosen []opener, wl []string, base string, s settings, cfg kvbench.Config, repeat int, asJSON bool) error {
	pl := &plan{prog: prog, total: repeat * len(chosen) * len(wl)}
	runs := map[string][]map[string]*kvbench.Result{}
	for rep := range max(repeat, 1) {
		for _, o := range chosen {
			res, err := runStore(ctx, pl, o, filepath.Join(base, fmt.Sprintf("%s-t%d-%d", o.name, cfg.Threads, rep)), s, cfg, wl)
			if err != nil {
				return err
			}
			runs[o.name] = append(runs[o.name], res)
			runtime.GC()
			debug.FreeOSMemory()
		}
	}
	results := map[string]map[string]*kvbench.Result{}
	for name, rs := range runs {
		results[name] = map[string]*kvbench.Result{}
		for _, w := range wl {
			var all []*kvbench.Result
			for _, r := range rs {
				all = append(all, r[w])
			}
			sort.Slice(all, func(i, j int) bool { return all[i].OpsPerSec() < all[j].OpsPerSec() })
			results[name][w] = all[len(all)/2]
		}
	}
	rp := report(chosen, wl, results, cfg, s)
	if s.stress > 0 {
		rp.Note("stress %d%%: %d burner processes (internal/stress) kept every core busy %d%% of each 10 ms during every store's runs", s.stress, runtime.NumCPU(), s.stress)
	}
	if repeat > 1 {
		rp.Note("each figure is the median of %d runs per store; stores ran in alternation", repeat)
	}
	return rp.Print(os.Stdout, asJSON)
}

// plan numbers the workload runs of the whole benchmark for the progress
// display ("[7/52] pebble readrandom").
type plan struct {
	prog        *progress.Reporter
	step, total int
}

// checkRange says which flag is out of its range.
func checkRange(name string, v, min, max int) error {
	if v < min || v > max {
		return fmt.Errorf("--%s %d: want a whole number in %d..%d", name, v, min, max)
	}
	return nil
}

// usageError reports a bad command line in one line and exits with status 2.
func usageError(err error) {
	fmt.Fprintf(os.Stderr, "peers: %v (-h lists the flags)\n", err)
	os.Exit(2)
}

// runStore runs the workloads on one store; fillseq and fillrandom start from
// an empty store, as in db_bench.
func runStore(ctx context.Context, pl *plan, o opener, dir string, s settings, cfg kvbench.Config, wl []string) (map[string]*kvbench.Result, error) {
	out := map[string]*kvbench.Result{}
	var st kvbench.Store
	var r *kvbench.Runner
	gen := 0
	reopen := func(fresh bool) error {
		if st != nil {
			if err := st.Close(); err != nil {
				return err
			}
			st = nil
		}
		d := fmt.Sprintf("%s-%d", dir, gen)
		if fresh {
			gen++
			d = fmt.Sprintf("%s-%d", dir, gen)
			os.RemoveAll(d)
		}
		var err error
		if st, err = o.open(d, s); err != nil {
			return fmt.Errorf("open %s: %w", o.name, err)
		}
		r = kvbench.NewRunner(st, cfg)
		return nil
	}
	defer func() {
		if st != nil {
			st.Close()
		}
	}()
	for _, w := range wl {
		pl.step++
		step := fmt.Sprintf("[%d/%d] %s %s", pl.step, pl.total, o.name, w)
		if st == nil || w == "fillseq" || w == "fillrandom" {
			if err := reopen(true); err != nil {
				return nil, err
			}
			if w != "fillseq" && w != "fillrandom" {
				// A read workload needs data.
				if _, err := r.RunShown(ctx, pl.prog, step+": load", "fillrandom"); err != nil {
					return nil, err
				}
			}
		}
		t := pl.prog.Start(step+": settle", 0)
		err := st.Settle()
		t.Done()
		if err != nil {
			return nil, err
		}
		runtime.GC()
		res, err := r.RunShown(ctx, pl.prog, step, w)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(os.Stderr, "%-10s %-13s %10.0f ops/s  p99 %v\n", o.name, w, res.OpsPerSec(), res.Latency.Quantile(0.99))
		if w == "fillrandom" {
			// Write amplification once both stores have paid their
			// compaction debt (the next workload would wait anyway).
			t := pl.prog.Start(step+": settle", 0)
			err := r.SettleAfter(res)
			t.Done()
			if err != nil {
				return nil, err
			}
			if rp, ok := st.(kvbench.Reporter); ok && s.metrics {
				fmt.Fprintf(os.Stderr, "=== %s after fillrandom settled\n%s\n", o.name, rp.Report())
			}
		}
		out[w] = res
	}
	return out, nil
}

// ratioBase returns the store the throughput ratios divide: warpkit when it
// ran, else the first store.
func ratioBase(stores []opener) opener {
	for _, o := range stores {
		if o.name == "warpkit" {
			return o
		}
	}
	return stores[0]
}

func report(stores []opener, wl []string, res map[string]map[string]*kvbench.Result, cfg kvbench.Config, s settings) *benchfmt.Report {
	var names []string
	for _, o := range stores {
		names = append(names, o.name)
	}
	rep := benchfmt.NewReport("kv peers: "+strings.Join(names, " vs ")+" (same process, same workloads)", cpuName())
	// Each ratio column is named numerator/denominator, and computed so:
	// the base store's ops/s over the other store's.
	ref := ratioBase(stores)
	var others []opener
	for _, o := range stores {
		if o.name != ref.name {
			others = append(others, o)
		}
	}
	cols := []string{"workload"}
	for _, o := range stores {
		cols = append(cols, o.name+" ops/s")
	}
	for _, o := range others {
		cols = append(cols, ref.name+"/"+o.name+" ops/s")
	}
	t := rep.Table(fmt.Sprintf("throughput (num %d, value %d..%d B, 16 B keys, %d client(s), sync %v)", cfg.Num, cfg.ValueMin, cfg.ValueMax, max(cfg.Threads, 1), s.sync), cols...)
	for _, w := range wl {
		row := []any{w}
		for _, o := range stores {
			row = append(row, res[o.name][w].OpsPerSec())
		}
		for _, o := range others {
			row = append(row, res[ref.name][w].OpsPerSec()/res[o.name][w].OpsPerSec())
		}
		t.Add(row...)
	}
	if len(others) > 0 {
		rep.Note("%s/X ops/s: %s's throughput divided by X's (above 1: %s is faster)", ref.name, ref.name, ref.name)
	}
	cols = []string{"workload"}
	for _, o := range stores {
		cols = append(cols, o.name+" p50", o.name+" p99")
	}
	lt := rep.Table("latency (µs)", cols...)
	for _, w := range wl {
		row := []any{w}
		for _, o := range stores {
			h := res[o.name][w].Latency
			row = append(row, float64(h.Quantile(0.5))/1e3, float64(h.Quantile(0.99))/1e3)
		}
		lt.Add(row...)
	}
	at := rep.Table("write amplification after fillrandom", "store", "write amp", "compaction MB", "stalls", "stall ms", "write amp settled", "compaction MB settled")
	for _, o := range stores {
		if r, ok := res[o.name]["fillrandom"]; ok {
			if r.Stats == (kvbench.StoreStats{}) {
				at.Add(o.name, "n/a", "n/a", "n/a", "n/a", "n/a", "n/a") // the store reports none (Badger)
				continue
			}
			var settledAmp, settledMB any = "n/a", "n/a"
			if s := r.SettledDiff; s != nil {
				settledAmp, settledMB = s.WriteAmp, float64(s.CompactionBytes)/1e6
			}
			var stallMs any = "n/a" // warpkit and Pebble report the time
			if r.StatsDiff.StallTime > 0 || o.name != "goleveldb" {
				stallMs = float64(r.StatsDiff.StallTime) / 1e6
			}
			at.Add(o.name, r.Stats.WriteAmp, float64(r.StatsDiff.CompactionBytes)/1e6, r.StatsDiff.Stalls, stallMs, settledAmp, settledMB)
		}
	}
	rep.Note("settings for every store: memtable %d MiB, target table %d MiB, L0 compaction/stop %d/%d tables (goleveldb also slows writes from %d; warpkit and Pebble do not), L1 %d MiB, levels x10, block %d B, bloom %d bits/key, block cache %d MiB, compression %s, sync %v",
		s.memTable>>20, s.tableSize>>20, s.l0Trigger, s.l0Stop, s.l0Slowdown, s.lbase>>20, s.blockSize, s.bloomBits, s.cacheSize>>20, s.compression, s.sync)
	rep.Note("each store runs alone, in order; fills start from an empty store; every workload starts after the store's background work settles (Badger: not waited for)")
	rep.Note("GOMAXPROCS %d; warpkit compactions %d, subcompactions %d (0: its defaults)", runtime.GOMAXPROCS(0), s.compactions, s.parts)
	return rep
}

func cpuName() string {
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "model name") {
				if i := strings.IndexByte(line, ':'); i > 0 {
					return fmt.Sprintf("%s, %d CPUs", strings.TrimSpace(line[i+1:]), runtime.NumCPU())
				}
			}
		}
	}
	return fmt.Sprintf("%s/%s, %d CPUs", runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "peers:", err)
	os.Exit(1)
}

func waitUntil(cond func() bool) {
	deadline := time.Now().Add(10 * time.Minute)
	for !cond() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
}

// writeWaitProfiles writes the block and mutex profiles to base.block and
// base.mutex.
func writeWaitProfiles(base string) {
	for _, name := range []string{"block", "mutex"} {
		f, err := os.Create(base + "." + name)
		if err != nil {
			fatal(err)
		}
		if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
			fatal(err)
		}
		if err := f.Close(); err != nil {
			fatal(err)
		}
	}
}
