// Package latencybench is warp bench latency: the fixed cost of one call
// (CUDA floors, 1- and 1,024-element calls of every structure, the slab hash's
// rate against the batch size). cmd/warp dispatches to Run.
package latencybench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/warpkit/warpkit"
	hashbench "github.com/warpkit/warpkit/bench/hash"
	"github.com/warpkit/warpkit/btree"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/benchfmt"
	"github.com/warpkit/warpkit/internal/benchfmt/benchplot"
	"github.com/warpkit/warpkit/internal/cli"
	"github.com/warpkit/warpkit/lsm"
	"github.com/warpkit/warpkit/slabhash"
	"github.com/warpkit/warpkit/sortedarray"
)

// Summary is the line warp bench -h prints for latency.
const Summary = "fixed cost of one call: CUDA floors, 1- and 1,024-element calls of every structure, slab hash rate vs batch size"

// latencyEmptyPTX is the empty kernel of the floors: no parameters, one
// instruction. PTX ISA 7.0 / sm_70 loads on every driver warpkit supports.
const latencyEmptyPTX = `.version 7.0
.target sm_70
.address_size 64

.visible .entry warp_latency_empty()
{
	ret;
}
`

// Limits of the flags: fresh keys are indices below 2^31 (hashbench.Keys), and the
// rate sweep inserts up to 6 batches of 2^max-log2 keys beside the table.
const (
	latMinTableLog2 = 4
	latMaxTableLog2 = 28
	latMaxRateLog2  = 26
	latMaxCalls     = 20000
	latCPUMaxLog2   = 20 // default --max-log2 on the CPU backend
	latRateMinCalls = 5  // timed calls per size of the rate sweep, at least
	latRateKeys     = 1 << 20
)

var latSections = []string{"floors", "structures", "rates", "host-rates"}

type latBench struct {
	ctx      context.Context
	dev      *cuda.Device // nil: CPU backend
	backend  warpkit.Backend
	rep      *benchfmt.Report
	calls    int
	warmup   int
	tableN   int
	maxLog2  int
	baseKeys []uint32 // the tableN keys every structure is built with
	baseVals []uint32 // baseVals[i] = i+1, the value of baseKeys[i]
}

// latStats summarizes the timed calls of one row.
type latStats struct {
	median, p99, min time.Duration
	n                int
}

func summarize(ds []time.Duration) latStats {
	s := slices.Clone(ds)
	slices.Sort(s)
	// p99 is the nearest-rank percentile: the smallest time that at least
	// 99% of the calls did not exceed.
	rank := (99*len(s) + 99) / 100
	return latStats{median: s[len(s)/2], p99: s[max(rank, 1)-1], min: s[0], n: len(s)}
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// measure runs call(i) for i in [0, warmup+calls): the first warmup calls are
// discarded, each later one is timed alone by time.Now around it. after, if
// not nil, runs untimed after every call (a synchronization, say).
func (b *latBench) measure(call, after func(i int) error) (latStats, error) {
	return b.measureN(b.warmup, b.calls, call, after)
}

func (b *latBench) measureN(warmup, calls int, call, after func(i int) error) (latStats, error) {
	runtime.GC() // a collection left over from the setup stays out of the row
	times := make([]time.Duration, 0, calls)
	for i := range warmup + calls {
		if i%64 == 0 {
			if err := b.ctx.Err(); err != nil {
				return latStats{}, err
			}
		}
		start := time.Now()
		err := call(i)
		d := time.Since(start)
		if err != nil {
			return latStats{}, err
		}
		if after != nil {
			if err := after(i); err != nil {
				return latStats{}, err
			}
		}
		if i >= warmup {
			times = append(times, d)
		}
	}
	return summarize(times), nil
}

// Run runs warp bench latency with args (its flags) and writes the report to w.
func Run(ctx context.Context, args []string, w io.Writer) error {
	fs := cli.NewFlags("bench latency", "[--json] [--calls N] [--warmup N] [--table-log2 N] [--max-log2 N] [--only floors,structures,rates,host-rates] [--backend B] [--plot DIR]\n\n"+
		"Runs on a GPU, or on the CPU backend (--backend cpu, or auto without a device) with the rate sweep up to 2^20;\n"+
		"the CUDA floors, the device-slice rows and host-rates need a GPU and are left out there, with a note.")
	asJSON := fs.Bool("json", false, "print JSON")
	calls := fs.Int("calls", 300, "timed calls per row (median, p99 and min are over these)")
	warmup := fs.Int("warmup", 20, "calls before the timed ones, discarded")
	tableLog := fs.Int("table-log2", 20, "each structure is pre-built with 2^N keys")
	maxLog := fs.Int("max-log2", 26, "largest batch of the slab hash rate sweep is 2^N keys (capped by free device memory; CPU backend default 20)")
	only := fs.String("only", "", "comma-separated sections, in the order given (default all): floors, structures, rates, host-rates (CUDA only: the rates from Go slices)")
	backend := warpkit.Auto
	fs.TextVar(&backend, "backend", warpkit.Auto, "backend: auto, cpu or cuda (auto: CUDA when a device is present)")
	plotDir := fs.String("plot", "", "also write each table as a plot, `DIR`/<table>.png and .svg")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", cli.ErrUsage, fs.Arg(0))
	}
	if *calls < 1 || *calls > latMaxCalls {
		return fmt.Errorf("%w: --calls must be in 1..%d", cli.ErrUsage, latMaxCalls)
	}
	if *warmup < 0 || *warmup > latMaxCalls {
		return fmt.Errorf("%w: --warmup must be in 0..%d", cli.ErrUsage, latMaxCalls)
	}
	if *tableLog < latMinTableLog2 || *tableLog > latMaxTableLog2 {
		return fmt.Errorf("%w: --table-log2 must be in %d..%d", cli.ErrUsage, latMinTableLog2, latMaxTableLog2)
	}
	if *maxLog < 0 || *maxLog > latMaxRateLog2 {
		return fmt.Errorf("%w: --max-log2 must be in 0..%d", cli.ErrUsage, latMaxRateLog2)
	}
	order := latSections
	if *only != "" {
		order = nil
		for _, name := range strings.Split(*only, ",") {
			name = strings.TrimSpace(name)
			if !slices.Contains(latSections, name) {
				return fmt.Errorf("%w: --only: unknown section %q (have: %s)", cli.ErrUsage, name, strings.Join(latSections, ", "))
			}
			if !slices.Contains(order, name) {
				order = append(order, name)
			}
		}
	}
	maxLogSet := false
	fs.Visit(func(f *flag.Flag) { maxLogSet = maxLogSet || f.Name == "max-log2" })

	dev, err := warpkit.OpenDevice(backend, 0)
	if err != nil {
		return fmt.Errorf("--backend %s: %w", backend, err)
	}
	var noDevice error // why the CUDA floors are skipped
	if dev != nil {
		defer dev.Close()
	} else if backend == warpkit.CPU {
		noDevice = errors.New("--backend cpu")
	} else {
		_, noDevice = cuda.Devices() // wraps ErrNoDevice: say why
		if noDevice == nil {
			noDevice = cuda.ErrNoDevice
		}
	}
	b := &latBench{ctx: ctx, dev: dev, backend: warpkit.CPU, calls: *calls, warmup: *warmup, tableN: 1 << *tableLog, maxLog2: *maxLog}
	var device string
	if dev != nil {
		b.backend = warpkit.CUDA
		p := dev.Properties()
		device = fmt.Sprintf("%s (cc %s, %d SMs, %.0f GiB), driver CUDA %s", p.Name, p.ComputeCapability(), p.Multiprocessors,
			float64(p.TotalMemory)/(1<<30), p.DriverVersionString())
	} else {
		device = fmt.Sprintf("CPU backend, %d logical CPUs, GOMAXPROCS %d", runtime.NumCPU(), runtime.GOMAXPROCS(0))
		if !maxLogSet {
			b.maxLog2 = min(b.maxLog2, latCPUMaxLog2)
		}
	}
	b.rep = benchfmt.NewReport(fmt.Sprintf("warp bench latency: the fixed cost of one call through the public API (%d timed calls per row after %d discarded)",
		b.calls, b.warmup), device)
	if !*asJSON {
		b.rep.Stream(w) // rows appear as measured: a run cut short keeps them
	}
	b.baseKeys = hashbench.Keys(0, b.tableN)
	b.baseVals = make([]uint32, b.tableN)
	for i := range b.baseVals {
		b.baseVals[i] = uint32(i) + 1
	}
	var failed []error
	for _, name := range order {
		if err := ctx.Err(); err != nil {
			return err
		}
		var err error
		switch name {
		case "floors":
			if dev == nil {
				b.rep.Note("CUDA floors: skipped, no CUDA device (%v).", noDevice)
				continue
			}
			err = b.floors()
		case "structures":
			err = b.structures()
		case "rates":
			err = b.rates(b.dev == nil)
		case "host-rates":
			if dev == nil {
				b.rep.Note("host-rates: skipped, the CPU backend's rates are from Go slices already.")
				continue
			}
			err = b.rates(true)
		}
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			b.rep.Note("%s FAILED: %v", name, err)
			failed = append(failed, fmt.Errorf("%s: %w", name, err))
		}
	}
	return errors.Join(append([]error{benchplot.Finish(b.rep, w, *asJSON, *plotDir)}, failed...)...)
}

// floors measures the cuda package's own calls: what every structure's call
// costs at least.
func (b *latBench) floors() error {
	mod, err := b.dev.LoadModule([]byte(latencyEmptyPTX))
	if err != nil {
		return err
	}
	fn, err := mod.Function("warp_latency_empty")
	if err != nil {
		return err
	}
	stream, err := b.dev.NewStream()
	if err != nil {
		return err
	}
	defer stream.Close()
	word, err := cuda.Alloc[uint32](b.dev, 1)
	if err != nil {
		return err
	}
	defer word.Free()
	pinned, err := cuda.AllocPinned[uint32](b.dev, 1)
	if err != nil {
		return err
	}
	defer pinned.Free()
	start, err := b.dev.NewEvent()
	if err != nil {
		return err
	}
	defer start.Close()
	end, err := b.dev.NewEvent()
	if err != nil {
		return err
	}
	defer end.Close()
	host := []uint32{7}
	grid, block := cuda.D1(1), cuda.D1(32)
	launch := func(int) error { return fn.Launch(grid, block, 0, stream) }
	sync := func(int) error { return stream.Synchronize() }

	// The label is the last column: streamed rows keep their numbers aligned.
	tab := b.rep.Table("CUDA floors: one call of package cuda, µs of wall time per call",
		"median (µs)", "p99 (µs)", "min (µs)", "call")
	rows := []struct {
		name        string
		call, after func(int) error
	}{
		{"empty kernel launch, async (no sync; stream synced untimed after)", launch, sync},
		{"empty kernel launch + Stream.Synchronize", func(i int) error {
			if err := launch(i); err != nil {
				return err
			}
			return stream.Synchronize()
		}, nil},
		{"empty kernel launch on the nil stream (returns when done)", func(int) error { return fn.Launch(grid, block, 0, nil) }, nil},
		{"Stream.Synchronize, idle stream", sync, nil},
		{"Slice.CopyFromHost, 4 bytes (H2D, pageable)", func(int) error { return word.CopyFromHost(host) }, nil},
		{"Slice.CopyToHost, 4 bytes (D2H, pageable)", func(int) error { return word.CopyToHost(host) }, nil},
		{"4 B H2D + empty kernel + 4 B D2H + Stream.Synchronize (pinned, async)", func(i int) error {
			if err := cuda.CopyToDeviceAsync(word, pinned, 0, stream); err != nil {
				return err
			}
			if err := launch(i); err != nil {
				return err
			}
			if err := cuda.CopyToHostAsync(pinned, 0, word, stream); err != nil {
				return err
			}
			return stream.Synchronize()
		}, nil},
	}
	for _, r := range rows {
		st, err := b.measure(r.call, r.after)
		if err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
		tab.Add(us(st.median), us(st.p99), us(st.min), r.name)
	}
	// Device time between two events recorded around the kernel (not wall
	// time). It includes the gaps while the host issues the three calls, so it
	// is the GPU-side span of one launch as this package drives it.
	var devTimes []time.Duration
	_, err = b.measure(func(i int) error {
		if err := start.Record(stream); err != nil {
			return err
		}
		if err := launch(i); err != nil {
			return err
		}
		if err := end.Record(stream); err != nil {
			return err
		}
		if err := end.Synchronize(); err != nil {
			return err
		}
		d, err := cuda.Elapsed(start, end)
		if i >= b.warmup {
			devTimes = append(devTimes, d)
		}
		return err
	}, nil)
	if err != nil {
		return fmt.Errorf("event-timed kernel: %w", err)
	}
	st := summarize(devTimes)
	tab.Add(us(st.median), us(st.p99), us(st.min), "Event.Record + empty kernel + Event.Record: device time between the events (Elapsed)")
	b.rep.Note("Legend: wall time of each call alone (time.Now around it), %d calls after %d discarded; p99 is nearest-rank.", b.calls, b.warmup)
	b.rep.Note("  The kernel has no parameters and one instruction (ret), launched as 1 block of 32 threads on a stream of")
	b.rep.Note("  Device.NewStream (non-blocking). 'async' returns once the launch is queued; its stream is synchronized untimed")
	b.rep.Note("  after each call, so every launch finds it idle. The pinned row is the least a one-key lookup from host memory")
	b.rep.Note("  needs: copy the key in, run, copy the answer out, wait. The last row is device time, not wall time: the GPU's")
	b.rep.Note("  clock from the first event to the second, which includes the host's time to issue the launch and the second Record.")
	return nil
}

// latStruct adapts one structure's batch calls to the rows of the structure
// table. Keys and values are uint32; found buffers are the adapter's own (host)
// or the bench's (device, 0/1 or slabhash.Result bytes).
type latStruct struct {
	name         string // the structure's package
	find, update string // method names of the Go-slice calls
	findHost     func(keys, vals []uint32) error
	countHost    func(n int) int // keys found by the last findHost of n keys
	updateHost   func(keys, vals []uint32) error
	findDev      func(keys, vals cuda.Slice[uint32], found cuda.Slice[uint8]) error
	updateDev    func(keys, vals cuda.Slice[uint32]) error
	close        func() error
}

const latMaxBatch = 1024

const gops = 1e9

var latBatches = []int{1, latMaxBatch}

// freshKeys returns the keys for calls that insert: count keys never in any
// table, taken after *next (an index counter past the base keys).
func freshKeys(next *int, count int) []uint32 {
	k := hashbench.Keys(*next, count)
	*next += count
	return k
}

func (b *latBench) structures() error {
	total := b.warmup + b.calls
	// Each structure inserts total*n fresh keys per batch size and data kind.
	inserted := 0
	for _, n := range latBatches {
		inserted += 2 * total * n
	}
	tab := b.rep.Table(fmt.Sprintf("Structures: one call, %d-key structures, 32-bit keys and values, µs of wall time per call", b.tableN),
		"structure (package)", "method called", "keys", "data", "median (µs)", "p99 (µs)", "min (µs)")
	makers := []func(expected int) (*latStruct, error){b.newLatSlab, b.newLatLSM, b.newLatBTree, b.newLatSorted}
	var errs []error
	for _, mk := range makers {
		if err := b.ctx.Err(); err != nil {
			return err
		}
		s, err := mk(b.tableN + inserted)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		err = b.structureRows(tab, s)
		if cerr := s.close(); err == nil {
			err = cerr
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
		}
	}
	b.rep.Note("Legend: each structure is built once with the %d keys (untimed, default Options but its size), then each", b.tableN)
	b.rep.Note("  call is timed alone, %d calls after %d discarded. Lookups ask for present keys drawn at random from the table;", b.calls, b.warmup)
	b.rep.Note("  inserts and updates add keys never inserted before (lookup rows run first, on the built table). 'device'")
	b.rep.Note("  calls take cuda.Slices already on the GPU, 'Go' calls take Go slices (staged by the library). Every call")
	b.rep.Note("  listed is synchronous by its documentation: its results are complete when it returns, so no synchronization")
	b.rep.Note("  is added. The found count of the last lookup of each row, and a lookup of the last inserted keys, are")
	b.rep.Note("  checked. lsm keeps a batch shorter than Options.BatchSize (default %d) in its staging run.", lsm.DefaultBatchSize)
	if b.dev == nil {
		b.rep.Note("  CPU backend: the device-slice rows need a GPU and are not run.")
	}
	return errors.Join(errs...)
}

// structureRows times s's lookup rows, then its update rows.
func (b *latBench) structureRows(tab *benchfmt.Table, s *latStruct) error {
	total := b.warmup + b.calls
	rng := rand.New(rand.NewPCG(uint64(b.tableN), 11))
	next := b.tableN
	var devFound cuda.Slice[uint8]
	if b.dev != nil {
		var err error
		if devFound, err = cuda.Alloc[uint8](b.dev, latMaxBatch); err != nil {
			return err
		}
		defer devFound.Free()
	}
	add := func(call string, n int, data string, st latStats) {
		tab.Add(s.name, call, n, data, us(st.median), us(st.p99), us(st.min))
	}
	// Lookups of present keys.
	for _, n := range latBatches {
		idx := make([]int, total*n)
		q := make([]uint32, total*n)
		for i := range q {
			idx[i] = rng.IntN(b.tableN)
			q[i] = b.baseKeys[idx[i]]
		}
		last := idx[(total-1)*n:]
		if b.dev != nil {
			if err := b.findDeviceRow(s, n, q, last, devFound, add); err != nil {
				return err
			}
		}
		out := make([]uint32, n)
		st, err := b.measure(func(i int) error { return s.findHost(q[i*n:(i+1)*n], out) }, nil)
		if err != nil {
			return fmt.Errorf("%s of %d: %w", s.find, n, err)
		}
		if err := b.checkFound(s.find, n, s.countHost(n), out, last); err != nil {
			return err
		}
		add(s.find, n, "Go", st)
	}
	if s.updateHost == nil {
		return nil
	}
	// Inserts of new keys.
	for _, n := range latBatches {
		vals := make([]uint32, n)
		for i := range vals {
			vals[i] = uint32(i) + 7
		}
		if b.dev != nil {
			keys := freshKeys(&next, total*n)
			dk, err := cuda.FromHost(b.dev, keys)
			if err != nil {
				return err
			}
			dv, err := cuda.FromHost(b.dev, vals)
			if err != nil {
				dk.Free()
				return err
			}
			st, err := b.measure(func(i int) error { return s.updateDev(dk.Sub(i*n, (i+1)*n), dv) }, nil)
			dk.Free()
			dv.Free()
			if err != nil {
				return fmt.Errorf("%sDevice of %d: %w", s.update, n, err)
			}
			if err := b.checkInserted(s, keys[(total-1)*n:], vals); err != nil {
				return fmt.Errorf("%sDevice of %d: %w", s.update, n, err)
			}
			add(s.update+"Device", n, "device", st)
		}
		keys := freshKeys(&next, total*n)
		st, err := b.measure(func(i int) error { return s.updateHost(keys[i*n:(i+1)*n], vals) }, nil)
		if err != nil {
			return fmt.Errorf("%s of %d: %w", s.update, n, err)
		}
		if err := b.checkInserted(s, keys[(total-1)*n:], vals); err != nil {
			return fmt.Errorf("%s of %d: %w", s.update, n, err)
		}
		add(s.update, n, "Go", st)
	}
	return nil
}

func (b *latBench) findDeviceRow(s *latStruct, n int, q []uint32, last []int, found cuda.Slice[uint8], add func(string, int, string, latStats)) error {
	dq, err := cuda.FromHost(b.dev, q)
	if err != nil {
		return err
	}
	defer dq.Free()
	dout, err := cuda.Alloc[uint32](b.dev, n)
	if err != nil {
		return err
	}
	defer dout.Free()
	f := found.Sub(0, n)
	st, err := b.measure(func(i int) error { return s.findDev(dq.Sub(i*n, (i+1)*n), dout, f) }, nil)
	if err != nil {
		return fmt.Errorf("%sDevice of %d: %w", s.find, n, err)
	}
	out, err := dout.ToHost()
	if err != nil {
		return err
	}
	res, err := f.ToHost()
	if err != nil {
		return err
	}
	hits := 0
	for _, r := range res {
		if r == 1 { // slabhash.Found, and the sorted structures' 1
			hits++
		}
	}
	if err := b.checkFound(s.find+"Device", n, hits, out, last); err != nil {
		return err
	}
	add(s.find+"Device", n, "device", st)
	return nil
}

// checkFound checks the last lookup of a row: every key found, with its value.
func (b *latBench) checkFound(call string, n, hits int, out []uint32, idx []int) error {
	if hits != n {
		return fmt.Errorf("%s of %d present keys found %d", call, n, hits)
	}
	for i, j := range idx {
		if out[i] != b.baseVals[j] {
			return fmt.Errorf("%s: key %#x has value %d, want %d", call, b.baseKeys[j], out[i], b.baseVals[j])
		}
	}
	return nil
}

// checkInserted looks up the keys of the last timed update (untimed).
func (b *latBench) checkInserted(s *latStruct, keys, vals []uint32) error {
	out := make([]uint32, len(keys))
	if err := s.findHost(keys, out); err != nil {
		return err
	}
	if got := s.countHost(len(keys)); got != len(keys) {
		return fmt.Errorf("a lookup of the %d keys of the last call found %d", len(keys), got)
	}
	if !slices.Equal(out, vals) {
		return errors.New("a lookup of the keys of the last call found other values")
	}
	return nil
}

func countTrue(found []bool) int {
	c := 0
	for _, f := range found {
		if f {
			c++
		}
	}
	return c
}

func (b *latBench) newLatSlab(expected int) (*latStruct, error) {
	m, err := slabhash.NewMap[uint32, uint32](slabhash.Options{Backend: b.backend, Device: b.dev, ExpectedSize: expected})
	if err != nil {
		return nil, err // the package names itself
	}
	if err := m.Insert(b.ctx, b.baseKeys, b.baseVals, nil); err != nil {
		m.Close()
		return nil, fmt.Errorf("slabhash: building: %w", err)
	}
	res := make([]slabhash.Result, latMaxBatch)
	return &latStruct{
		name: "slabhash", find: "Find", update: "Insert",
		findHost: func(k, v []uint32) error { return m.Lookup(b.ctx, k, v, res[:len(k)]) },
		countHost: func(n int) int {
			c := 0
			for _, r := range res[:n] {
				if r == slabhash.Found {
					c++
				}
			}
			return c
		},
		updateHost: func(k, v []uint32) error { return m.Insert(b.ctx, k, v, nil) },
		findDev: func(k, v cuda.Slice[uint32], f cuda.Slice[uint8]) error {
			return m.LookupDevice(b.ctx, k, v, f)
		},
		updateDev: func(k, v cuda.Slice[uint32]) error { return m.InsertDevice(b.ctx, k, v, cuda.Slice[uint8]{}) },
		close:     m.Close,
	}, nil
}

func (b *latBench) newLatLSM(int) (*latStruct, error) {
	l, err := lsm.New[uint32, uint32](lsm.Options{Backend: b.backend, Device: b.dev})
	if err != nil {
		return nil, err // the package names itself
	}
	if err := l.Insert(b.ctx, b.baseKeys, b.baseVals); err != nil {
		l.Close()
		return nil, fmt.Errorf("lsm: building: %w", err)
	}
	var dels cuda.Slice[uint8] // all insertions: UpdateDevice wants one flag per key
	if b.dev != nil {
		if dels, err = cuda.Alloc[uint8](b.dev, latMaxBatch); err == nil {
			err = dels.Zero(nil)
		}
		if err != nil {
			l.Close()
			return nil, err
		}
	}
	found := make([]bool, latMaxBatch)
	return &latStruct{
		name: "lsm", find: "Lookup", update: "Update",
		findHost:   func(k, v []uint32) error { return l.Lookup(b.ctx, k, v, found[:len(k)]) },
		countHost:  func(n int) int { return countTrue(found[:n]) },
		updateHost: func(k, v []uint32) error { return l.Update(b.ctx, k, v, nil) },
		findDev: func(k, v cuda.Slice[uint32], f cuda.Slice[uint8]) error {
			return l.LookupDevice(b.ctx, k, v, f)
		},
		updateDev: func(k, v cuda.Slice[uint32]) error { return l.UpdateDevice(b.ctx, k, v, dels.Sub(0, k.Len())) },
		close: func() error {
			if b.dev != nil {
				dels.Free()
			}
			return l.Close()
		},
	}, nil
}

func (b *latBench) newLatBTree(int) (*latStruct, error) {
	t, err := btree.New[uint32, uint32](btree.Options{Backend: b.backend, Device: b.dev})
	if err != nil {
		return nil, err // the package names itself
	}
	if err := t.Build(b.ctx, b.baseKeys, b.baseVals); err != nil {
		t.Close()
		return nil, fmt.Errorf("btree: building: %w", err)
	}
	found := make([]bool, latMaxBatch)
	return &latStruct{
		name: "btree", find: "Lookup", update: "Insert",
		findHost:   func(k, v []uint32) error { return t.Lookup(b.ctx, k, v, found[:len(k)]) },
		countHost:  func(n int) int { return countTrue(found[:n]) },
		updateHost: func(k, v []uint32) error { return t.Insert(b.ctx, k, v) },
		findDev: func(k, v cuda.Slice[uint32], f cuda.Slice[uint8]) error {
			return t.LookupDevice(b.ctx, k, v, f)
		},
		updateDev: func(k, v cuda.Slice[uint32]) error { return t.InsertDevice(b.ctx, k, v) },
		close:     t.Close,
	}, nil
}

func (b *latBench) newLatSorted(int) (*latStruct, error) {
	a, err := sortedarray.New[uint32, uint32](sortedarray.Options{Backend: b.backend, Device: b.dev})
	if err != nil {
		return nil, err // the package names itself
	}
	if err := a.Insert(b.ctx, b.baseKeys, b.baseVals); err != nil {
		a.Close()
		return nil, fmt.Errorf("sortedarray: building: %w", err)
	}
	found := make([]bool, latMaxBatch)
	return &latStruct{
		name: "sortedarray", find: "Lookup",
		findHost:  func(k, v []uint32) error { return a.Lookup(b.ctx, k, v, found[:len(k)]) },
		countHost: func(n int) int { return countTrue(found[:n]) },
		findDev: func(k, v cuda.Slice[uint32], f cuda.Slice[uint8]) error {
			return a.LookupDevice(b.ctx, k, v, f)
		},
		close: a.Close,
	}, nil
}

// rateCalls is the number of timed calls at batch size s: --calls for small
// batches, fewer as they grow (about 2^20 keys a row), at least 5.
func (b *latBench) rateCalls(s int) int {
	return max(latRateMinCalls, min(b.calls, latRateKeys/s))
}

// rateSizes are 2^0, 2^2, ... up to 2^maxLog2 (included when odd).
func rateSizes(maxLog2 int) []int {
	var out []int
	for l := 0; l <= maxLog2; l += 2 {
		out = append(out, l)
	}
	if maxLog2%2 == 1 {
		out = append(out, maxLog2)
	}
	return out
}

// rateBytes bounds the device memory of the rate row of 2^l keys: the fresh
// keys, values and outputs, and a table of the base and fresh keys at 60%
// utilization, doubled for the pool's slack.
func (b *latBench) rateBytes(l int) int64 {
	s := int64(1) << l
	k := int64(b.rateCalls(int(s)) + 1)
	keys := int64(b.tableN) + k*s
	return 4*k*s + 9*s + 8*int64(b.tableN) + 2*keys*8*10/6
}

func (b *latBench) rates(fromGo bool) error {
	data := "device slices (FindDevice, InsertDevice)"
	switch {
	case b.dev == nil:
		data = "Go slices (Find, Insert; CPU backend)"
	case fromGo:
		data = "Go slices (Find, Insert)"
	}
	logs := rateSizes(b.maxLog2)
	var skipped []string
	if b.dev != nil {
		free, _, err := b.dev.MemInfo()
		if err != nil {
			return err
		}
		budget := int64(free) * 8 / 10
		fit := logs[:0]
		for _, l := range logs {
			if b.rateBytes(l) <= budget {
				fit = append(fit, l)
			} else {
				skipped = append(skipped, fmt.Sprintf("2^%d", l))
			}
		}
		logs = fit
	}
	// Fresh keys for every size's inserts (one warm-up batch and the timed
	// ones), shared by the sizes: the largest row needs the most.
	freshN := 0
	maxS := 1
	for _, l := range logs {
		s := 1 << l
		freshN = max(freshN, (b.rateCalls(s)+1)*s)
		maxS = max(maxS, s)
	}
	fresh := hashbench.Keys(b.tableN, freshN)
	vals := make([]uint32, maxS)
	for i := range vals {
		vals[i] = uint32(i) + 3
	}
	tab := b.rep.Table(fmt.Sprintf("Slab hash rate vs batch size: one call of s keys from %s, on a table built with %d keys", data, b.tableN),
		"s", "calls", "find median (µs)", "find G/s", "insert median (µs)", "insert G/s")
	var run func(l int) (find, ins latStats, err error)
	if !fromGo {
		dFresh, err := cuda.FromHost(b.dev, fresh)
		if err != nil {
			return err
		}
		defer dFresh.Free()
		dVals, err := cuda.FromHost(b.dev, vals)
		if err != nil {
			return err
		}
		defer dVals.Free()
		dOut, err := cuda.Alloc[uint32](b.dev, maxS)
		if err != nil {
			return err
		}
		defer dOut.Free()
		dRes, err := cuda.Alloc[uint8](b.dev, maxS)
		if err != nil {
			return err
		}
		defer dRes.Free()
		dBase, err := cuda.FromHost(b.dev, b.baseKeys)
		if err != nil {
			return err
		}
		defer dBase.Free()
		dBaseVals, err := cuda.FromHost(b.dev, b.baseVals)
		if err != nil {
			return err
		}
		defer dBaseVals.Free()
		run = func(l int) (find, ins latStats, err error) {
			s := 1 << l
			k := b.rateCalls(s)
			m, err := slabhash.NewMap[uint32, uint32](slabhash.Options{Backend: warpkit.CUDA, Device: b.dev, ExpectedSize: b.tableN + (k+1)*s})
			if err != nil {
				return find, ins, err
			}
			defer m.Close()
			if err := m.InsertDevice(b.ctx, dBase, dBaseVals, cuda.Slice[uint8]{}); err != nil {
				return find, ins, err
			}
			v, out, res := dVals.Sub(0, s), dOut.Sub(0, s), dRes.Sub(0, s)
			if ins, err = b.rateMeasure(k, func(i int) error {
				return m.InsertDevice(b.ctx, dFresh.Sub(i*s, (i+1)*s), v, cuda.Slice[uint8]{})
			}); err != nil {
				return find, ins, err
			}
			if find, err = b.rateMeasure(k, func(i int) error {
				j := i%k + 1 // a batch the timed inserts put in
				return m.LookupDevice(b.ctx, dFresh.Sub(j*s, (j+1)*s), out, res)
			}); err != nil {
				return find, ins, err
			}
			got, err := hashbench.CountFound(res)
			if err == nil && got != s {
				err = fmt.Errorf("the last find of %d inserted keys found %d", s, got)
			}
			return find, ins, err
		}
	} else {
		res := make([]slabhash.Result, maxS)
		out := make([]uint32, maxS)
		run = func(l int) (find, ins latStats, err error) {
			s := 1 << l
			k := b.rateCalls(s)
			m, err := slabhash.NewMap[uint32, uint32](slabhash.Options{Backend: b.backend, Device: b.dev, ExpectedSize: b.tableN + (k+1)*s})
			if err != nil {
				return find, ins, err
			}
			defer m.Close()
			if err := m.Insert(b.ctx, b.baseKeys, b.baseVals, nil); err != nil {
				return find, ins, err
			}
			if ins, err = b.rateMeasure(k, func(i int) error {
				return m.Insert(b.ctx, fresh[i*s:(i+1)*s], vals[:s], nil)
			}); err != nil {
				return find, ins, err
			}
			if find, err = b.rateMeasure(k, func(i int) error {
				j := i%k + 1
				return m.Lookup(b.ctx, fresh[j*s:(j+1)*s], out[:s], res[:s])
			}); err != nil {
				return find, ins, err
			}
			got := 0
			for _, r := range res[:s] {
				if r == slabhash.Found {
					got++
				}
			}
			if got != s {
				err = fmt.Errorf("the last find of %d inserted keys found %d", s, got)
			}
			return find, ins, err
		}
	}
	for _, l := range logs {
		if err := b.ctx.Err(); err != nil {
			return err
		}
		s := 1 << l
		find, ins, err := run(l)
		if err != nil {
			return fmt.Errorf("s = 2^%d: %w", l, err)
		}
		tab.Add(fmt.Sprintf("2^%d", l), find.n, us(find.median), benchfmt.Rate(int64(s), find.median, gops),
			us(ins.median), benchfmt.Rate(int64(s), ins.median, gops))
	}
	if fromGo && b.dev != nil {
		b.rep.Note("Go slices go through the Map's pinned staging in chunks of 2^20 keys; host copies of one chunk overlap the")
		b.rep.Note("  device work of the next.")
	}
	b.rep.Note("Legend: for each s a new Map (default Options, ExpectedSize = the table's keys plus every key the row inserts)")
	b.rep.Note("  is built with the %d keys (untimed). 'insert' times calls that each add s keys never inserted before, after", b.tableN)
	b.rep.Note("  one such call discarded; 'find' then times calls that each look up one batch of s keys those calls inserted,")
	b.rep.Note("  after one discarded. Medians of 'calls' calls (--calls for small s, fewer as s grows, at least %d); G/s =", latRateMinCalls)
	b.rep.Note("  s / median. Every call is synchronous; the last find's results are checked (all found).")
	if len(skipped) > 0 {
		b.rep.Note("  Not run for lack of free device memory: s = %s.", strings.Join(skipped, ", "))
	}
	return nil
}

// rateMeasure times calls 1..k of call(i) after call(0), discarded.
func (b *latBench) rateMeasure(k int, call func(i int) error) (latStats, error) {
	return b.measureN(1, k, call, nil)
}
