// Package kvbench runs db_bench-style and YCSB workloads against any ordered
// key-value store behind the Store interface, so that warp kv bench and the
// bench/peers module (Pebble, goleveldb, Badger) measure exactly the same
// thing: same keys, same values, same order of operations, same timers.
//
// Workloads (db_bench names; keys are 16-byte zero-padded decimal numbers,
// values come from a pool that compresses to about half, as db_bench's):
//
//	fillseq       write Num keys in order
//	fillrandom    write Num keys in random order
//	overwrite     write Num random existing keys
//	readrandom    read Reads random keys (all present after a fill)
//	readseq       iterate over every key
//	seekrandom    seek to Reads random keys and read one entry
//	deleterandom  delete Num random keys
//	ycsb-a .. -f  YCSB core workloads A-F over the loaded keys, zipfian
//	              (D: latest), scans of 1..100 entries (E)
//
// Each run reports ops/s, MB/s of user data, latency percentiles, and the
// store's write amplification and compaction bandwidth where it reports them.
package kvbench

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/warpkit/warpkit/internal/progress"
)

// Store is a key-value store under test. Methods are called from one
// goroutine per worker; implementations must be safe for concurrent use
// when Config.Threads > 1.
type Store interface {
	Name() string
	Set(key, value []byte) error
	// Get reports whether key was found and the value's length; the value
	// need not be copied.
	Get(key []byte) (valueLen int, found bool, err error)
	Delete(key []byte) error
	// Scan reads up to n entries from the first key >= start and returns
	// how many it read and their bytes (keys and values); n < 0 reads to the
	// end.
	Scan(start []byte, n int) (entries int, bytes int64, err error)
	// Settle waits for background work (flushes, compactions) triggered so
	// far, so that the next workload starts from a quiet store. Stores that
	// cannot wait return nil.
	Settle() error
	// Stats reports cumulative counters (zero where unknown).
	Stats() StoreStats
	Close() error
}

// StoreStats are counters a store may expose.
type StoreStats struct {
	WriteAmp            float64 // bytes written to storage / bytes written by the user
	CompactionBytes     int64   // bytes read + written by compactions
	CompactionBandwidth float64 // compaction bytes per second of compaction time
	Stalls              int64   // write stalls and slowdowns
	// StallTime is the time writes were held up (stalled or slowed down);
	// zero where the store does not say.
	StallTime time.Duration
}

// Config is one benchmark run's parameters.
type Config struct {
	Num      int     // keys written by fills (db_bench --num); default 1,000,000
	Reads    int     // operations of read workloads; default Num
	ValueMin int     // value size range; default 100..100
	ValueMax int     //
	Threads  int     // concurrent workers; default 1
	Seed     uint64  // random seed; same seed, same operations
	ScanMax  int     // YCSB E scan length is uniform in 1..ScanMax; default 100
	Zipf     float64 // YCSB zipfian constant; default 0.99
	Progress func(done int64)
	Duration time.Duration // if set, read and YCSB workloads stop after it
}

func (c Config) withDefaults() Config {
	if c.Num <= 0 {
		c.Num = 1_000_000
	}
	if c.Reads <= 0 {
		c.Reads = c.Num
	}
	if c.ValueMin <= 0 {
		c.ValueMin = 100
	}
	if c.ValueMax < c.ValueMin {
		c.ValueMax = c.ValueMin
	}
	if c.Threads <= 0 {
		c.Threads = 1
	}
	if c.ScanMax <= 0 {
		c.ScanMax = 100
	}
	if c.Zipf <= 0 {
		c.Zipf = 0.99
	}
	return c
}

// KeyLen is the length of every benchmark key.
const KeyLen = 16

// Key formats key number n.
func Key(dst []byte, n uint64) []byte {
	dst = dst[:0]
	var buf [20]byte
	i := len(buf)
	for {
		i--
		buf[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			break
		}
	}
	for range KeyLen - (len(buf) - i) {
		dst = append(dst, '0')
	}
	return append(dst, buf[i:]...)
}

// MaxValueSize is the largest value size ParseValueSize accepts. Each
// worker keeps a pool of value bytes 1 MiB larger than the largest value.
const MaxValueSize = 64 << 20

// values is a pool of pseudo-random bytes that compresses to about half
// (each 32-byte half-run is repeated), like db_bench's RandomGenerator.
type values struct {
	pool []byte
	pos  int
}

// newValues returns a pool for values of up to maxLen bytes: 1 MiB, or for
// values above 1 MiB (which once sliced past a fixed 1 MiB pool and
// panicked) 1 MiB more than maxLen, so that consecutive values still start
// at different offsets.
func newValues(seed uint64, maxLen int) *values {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	size := 1 << 20
	if maxLen > size {
		size += (maxLen + 63) &^ 63 // the loop below fills whole 64-byte runs
	}
	pool := make([]byte, size)
	for i := 0; i < len(pool); i += 64 {
		for j := range 32 {
			pool[i+j] = byte(' ' + rng.IntN(95))
		}
		copy(pool[i+32:i+64], pool[i:i+32])
	}
	return &values{pool: pool}
}

func (v *values) next(n int) []byte {
	if v.pos+n > len(v.pool) {
		v.pos = 0
	}
	b := v.pool[v.pos : v.pos+n]
	v.pos += n
	return b
}

// Result is one workload's outcome.
type Result struct {
	Workload  string
	Ops       int64
	Found     int64 // reads that found their key
	Bytes     int64 // user bytes written or read (keys + values)
	Elapsed   time.Duration
	Latency   *Histogram
	Stats     StoreStats // store counters after the workload
	StatsDiff StoreStats // counters accumulated during the workload
	// SettledDiff is StatsDiff carried on until the store's background
	// work settled after the workload (nil unless the caller waited: see
	// Runner.SettleAfter). A store that defers compaction debt looks better
	// in StatsDiff than one that pays it as it goes; here both have paid.
	SettledDiff *StoreStats
}

// SettleAfter waits for the store's background work to settle after res's
// workload and records res.SettledDiff.
func (r *Runner) SettleAfter(res *Result) error {
	if err := r.store.Settle(); err != nil {
		return err
	}
	now := r.store.Stats()
	d := res.StatsDiff
	d.WriteAmp = now.WriteAmp
	d.CompactionBytes += now.CompactionBytes - res.Stats.CompactionBytes
	d.Stalls += now.Stalls - res.Stats.Stalls
	d.StallTime += now.StallTime - res.Stats.StallTime
	res.SettledDiff = &d
	return nil
}

// OpsPerSec returns the throughput.
func (r *Result) OpsPerSec() float64 { return float64(r.Ops) / r.Elapsed.Seconds() }

// MBPerSec returns user megabytes (1e6) per second.
func (r *Result) MBPerSec() float64 { return float64(r.Bytes) / 1e6 / r.Elapsed.Seconds() }

// Workloads lists the workload names Run accepts, in the order a full run
// uses (deleterandom last, so the others read a full store).
var Workloads = []string{
	"fillseq", "fillrandom", "overwrite", "readrandom", "readseq", "seekrandom",
	"ycsb-a", "ycsb-b", "ycsb-c", "ycsb-d", "ycsb-e", "ycsb-f", "deleterandom",
}

// Describe says what a workload does, for help texts.
func Describe(name string) string {
	switch name {
	case "fillseq":
		return "write Num keys in order"
	case "fillrandom":
		return "write Num keys in random order"
	case "overwrite":
		return "write Num random existing keys"
	case "readrandom":
		return "read random keys"
	case "readseq":
		return "iterate over every key"
	case "seekrandom":
		return "seek to random keys, read one entry"
	case "deleterandom":
		return "delete Num random keys"
	case "ycsb-a":
		return "YCSB A: 50% read, 50% update, zipfian"
	case "ycsb-b":
		return "YCSB B: 95% read, 5% update, zipfian"
	case "ycsb-c":
		return "YCSB C: 100% read, zipfian"
	case "ycsb-d":
		return "YCSB D: 95% read latest, 5% insert"
	case "ycsb-e":
		return "YCSB E: 95% scan (1..100), 5% insert, zipfian"
	case "ycsb-f":
		return "YCSB F: 50% read, 50% read-modify-write, zipfian"
	}
	return ""
}

// Reporter is a Store that can print its own metrics (levels, compactions),
// for looking into a benchmark's figures.
type Reporter interface {
	Report() string
}

// Runner runs workloads on one store, keeping what later workloads need
// (how many keys exist).
type Runner struct {
	store  Store
	cfg    Config
	loaded uint64 // keys 0..loaded-1 exist (fills and YCSB D/E inserts add)
}

// NewRunner prepares workloads for store.
func NewRunner(store Store, cfg Config) *Runner {
	return &Runner{store: store, cfg: cfg.withDefaults()}
}

// Config returns the effective configuration.
func (r *Runner) Config() Config { return r.cfg }

// Run executes one workload.
func (r *Runner) Run(ctx context.Context, name string) (*Result, error) {
	before := r.store.Stats()
	var res *Result
	var err error
	switch name {
	case "fillseq", "fillrandom", "overwrite", "deleterandom":
		res, err = r.write(ctx, name)
	case "readrandom", "seekrandom":
		res, err = r.read(ctx, name)
	case "readseq":
		res, err = r.readseq()
	default:
		if strings.HasPrefix(name, "ycsb-") && len(name) == 6 && name[5] >= 'a' && name[5] <= 'f' {
			res, err = r.ycsb(ctx, name[5])
		} else {
			return nil, fmt.Errorf("kvbench: unknown workload %q (have %s)", name, strings.Join(Workloads, ", "))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s on %s: %w", name, r.store.Name(), err)
	}
	res.Workload = name
	res.Stats = r.store.Stats()
	res.StatsDiff = StoreStats{
		WriteAmp:            res.Stats.WriteAmp,
		CompactionBytes:     res.Stats.CompactionBytes - before.CompactionBytes,
		CompactionBandwidth: res.Stats.CompactionBandwidth,
		Stalls:              res.Stats.Stalls - before.Stalls,
		StallTime:           res.Stats.StallTime - before.StallTime,
	}
	return res, nil
}

// worker runs n operations of op on one goroutine per thread, splitting n
// evenly, and gathers the results.
func (r *Runner) parallel(ctx context.Context, n int, op func(w *workerState, i int) error) (*Result, error) {
	threads := r.cfg.Threads
	res := &Result{Latency: NewHistogram()}
	type out struct {
		st  *workerState
		err error
	}
	outs := make(chan out, threads)
	var deadline time.Time
	if r.cfg.Duration > 0 {
		deadline = time.Now().Add(r.cfg.Duration)
	}
	start := time.Now()
	for t := range threads {
		go func() {
			w := &workerState{
				rng:    rand.New(rand.NewPCG(r.cfg.Seed+uint64(t)*7919, uint64(t)+1)),
				values: newValues(r.cfg.Seed+uint64(t), r.cfg.ValueMax),
				hist:   NewHistogram(),
				cfg:    r.cfg,
			}
			lo, hi := n*t/threads, n*(t+1)/threads
			for i := lo; i < hi; i++ {
				if (i-lo)&1023 == 0 {
					if ctx.Err() != nil {
						outs <- out{w, ctx.Err()}
						return
					}
					if !deadline.IsZero() && time.Now().After(deadline) {
						break
					}
					if r.cfg.Progress != nil && t == 0 && i > lo {
						r.cfg.Progress(int64((i - lo) * threads))
					}
				}
				t0 := time.Now()
				if err := op(w, i); err != nil {
					outs <- out{w, err}
					return
				}
				w.hist.Record(time.Since(t0))
				w.ops++
			}
			outs <- out{w, nil}
		}()
	}
	var firstErr error
	for range threads {
		o := <-outs
		if o.err != nil && firstErr == nil {
			firstErr = o.err
		}
		res.Ops += o.st.ops
		res.Found += o.st.found
		res.Bytes += o.st.bytes
		res.Latency.Merge(o.st.hist)
	}
	res.Elapsed = time.Since(start)
	if r.cfg.Progress != nil {
		r.cfg.Progress(res.Ops)
	}
	return res, firstErr
}

type workerState struct {
	rng    *rand.Rand
	values *values
	hist   *Histogram
	cfg    Config
	key    []byte
	ops    int64
	found  int64
	bytes  int64
	zipf   *zipfian
}

func (w *workerState) value() []byte {
	n := w.cfg.ValueMin
	if w.cfg.ValueMax > n {
		n += w.rng.IntN(w.cfg.ValueMax - n + 1)
	}
	return w.values.next(n)
}

func (r *Runner) write(ctx context.Context, name string) (*Result, error) {
	num := r.cfg.Num
	space := uint64(num)
	if name == "overwrite" || name == "deleterandom" {
		space = max(r.loaded, 1)
	}
	res, err := r.parallel(ctx, num, func(w *workerState, i int) error {
		var k uint64
		if name == "fillseq" {
			k = uint64(i)
		} else {
			k = w.rng.Uint64N(space)
		}
		w.key = Key(w.key, k)
		if name == "deleterandom" {
			w.bytes += KeyLen
			return r.store.Delete(w.key)
		}
		v := w.value()
		w.bytes += int64(KeyLen + len(v))
		return r.store.Set(w.key, v)
	})
	if err == nil && (name == "fillseq" || name == "fillrandom") {
		r.loaded = max(r.loaded, uint64(num))
	}
	return res, err
}

func (r *Runner) read(ctx context.Context, name string) (*Result, error) {
	space := max(r.loaded, uint64(r.cfg.Num))
	return r.parallel(ctx, r.cfg.Reads, func(w *workerState, i int) error {
		w.key = Key(w.key, w.rng.Uint64N(space))
		if name == "seekrandom" {
			n, b, err := r.store.Scan(w.key, 1)
			w.found += int64(n)
			w.bytes += b
			return err
		}
		vlen, found, err := r.store.Get(w.key)
		if found {
			w.found++
			w.bytes += int64(KeyLen + vlen)
		}
		return err
	})
}

func (r *Runner) readseq() (*Result, error) {
	res := &Result{Latency: NewHistogram()}
	start := time.Now()
	n, b, err := r.store.Scan(nil, -1)
	res.Elapsed = time.Since(start)
	res.Ops, res.Found, res.Bytes = int64(n), int64(n), b
	res.Latency.Record(res.Elapsed / time.Duration(max(n, 1)))
	return res, err
}

func (r *Runner) ycsb(ctx context.Context, which byte) (*Result, error) {
	if r.loaded == 0 {
		return nil, fmt.Errorf("YCSB needs loaded keys: run fillrandom or fillseq first")
	}
	base := r.loaded
	res, err := r.parallel(ctx, r.cfg.Reads, func(w *workerState, i int) error {
		if w.zipf == nil {
			w.zipf = newZipfian(base, r.cfg.Zipf)
		}
		p := w.rng.IntN(100)
		readKey := func() {
			w.key = Key(w.key, w.zipf.scrambled(w.rng))
		}
		get := func() error {
			vlen, found, err := r.store.Get(w.key)
			if found {
				w.found++
				w.bytes += int64(KeyLen + vlen)
			}
			return err
		}
		update := func() error {
			v := w.value()
			w.bytes += int64(KeyLen + len(v))
			return r.store.Set(w.key, v)
		}
		insert := func() error {
			w.key = Key(w.key, base+uint64(i)) // operation indexes are unique across workers
			return update()
		}
		switch which {
		case 'a':
			readKey()
			if p < 50 {
				return get()
			}
			return update()
		case 'b':
			readKey()
			if p < 95 {
				return get()
			}
			return update()
		case 'c':
			readKey()
			return get()
		case 'd':
			if p < 95 {
				// Latest: recently inserted keys are the most popular.
				off := w.zipf.next(w.rng)
				newest := base + uint64(i)
				if off > newest {
					off = newest
				}
				w.key = Key(w.key, newest-off)
				return get()
			}
			return insert()
		case 'e':
			if p < 95 {
				readKey()
				n, b, err := r.store.Scan(w.key, 1+w.rng.IntN(r.cfg.ScanMax))
				w.found += int64(n)
				w.bytes += b
				return err
			}
			return insert()
		case 'f':
			readKey()
			if p < 50 {
				return get()
			}
			if err := get(); err != nil {
				return err
			}
			return update()
		}
		return nil
	})
	if which == 'd' || which == 'e' {
		r.loaded = base + uint64(r.cfg.Reads) // an upper bound: some numbers went unused
	}
	return res, err
}

// zipfian draws from [0, n) with P(i) ∝ 1/(i+1)^theta (YCSB's
// ZipfianGenerator, Gray et al.'s method).
type zipfian struct {
	n                  uint64
	theta, alpha, zeta float64
	eta                float64
}

func zeta(n uint64, theta float64) float64 {
	// Sum exactly for small n, and by the Euler-Maclaurin approximation of
	// the tail beyond a million terms (the error is far below 1e-6).
	const exact = 1_000_000
	var s float64
	m := min(n, exact)
	for i := uint64(1); i <= m; i++ {
		s += 1 / math.Pow(float64(i), theta)
	}
	if n > exact {
		a, b := float64(exact), float64(n)
		s += (math.Pow(b, 1-theta)-math.Pow(a, 1-theta))/(1-theta) + (1/math.Pow(b, theta)-1/math.Pow(a, theta))/2
	}
	return s
}

func newZipfian(n uint64, theta float64) *zipfian {
	z := &zipfian{n: n, theta: theta}
	z.zeta = zeta(n, theta)
	zeta2 := zeta(2, theta)
	z.alpha = 1 / (1 - theta)
	z.eta = (1 - math.Pow(2/float64(n), 1-theta)) / (1 - zeta2/z.zeta)
	return z
}

func (z *zipfian) next(rng *rand.Rand) uint64 {
	u := rng.Float64()
	uz := u * z.zeta
	if uz < 1 {
		return 0
	}
	if uz < 1+math.Pow(0.5, z.theta) {
		return 1
	}
	v := uint64(float64(z.n) * math.Pow(z.eta*u-z.eta+1, z.alpha))
	return min(v, z.n-1)
}

// scrambled spreads the popular items over the key space (YCSB's
// ScrambledZipfianGenerator: FNV-1a of the rank).
func (z *zipfian) scrambled(rng *rand.Rand) uint64 {
	x := z.next(rng)
	h := uint64(14695981039346656037)
	for range 8 {
		h ^= x & 0xff
		h *= 1099511628211
		x >>= 8
	}
	return h % z.n
}

// Histogram records latencies in log-linear buckets (about 3% precision).
type Histogram struct {
	counts [64 * 32]int64
	n      int64
	max    time.Duration
}

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram { return &Histogram{} }

func bucket(ns int64) int {
	if ns < 32 {
		return int(max(ns, 0))
	}
	e := 63 - bits.LeadingZeros64(uint64(ns)) // ns in [2^e, 2^(e+1))
	sub := (ns >> (e - 5)) & 31
	return (e-4)*32 + int(sub)
}

func bucketLow(b int) int64 {
	if b < 32 {
		return int64(b)
	}
	e := b/32 + 4
	sub := int64(b % 32)
	return (1 << e) + sub<<(e-5)
}

// Record adds one latency.
func (h *Histogram) Record(d time.Duration) {
	h.counts[bucket(int64(d))]++
	h.n++
	h.max = max(h.max, d)
}

// Merge adds another histogram's counts.
func (h *Histogram) Merge(o *Histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// Count returns the number of recorded latencies.
func (h *Histogram) Count() int64 { return h.n }

// Max returns the largest recorded latency.
func (h *Histogram) Max() time.Duration { return h.max }

// Quantile returns the latency below which a fraction q of records fall.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	target := int64(math.Ceil(q * float64(h.n)))
	var seen int64
	for b, c := range h.counts {
		seen += c
		if seen >= target {
			return time.Duration(bucketLow(b))
		}
	}
	return h.max
}

// ParseRange parses "N" (lo = hi = N) or "MIN..MAX" (MIN ≤ MAX), decimal
// integers ≥ 0 with spaces around them allowed and nothing else: the size
// flags of the benches (value sizes, key lengths) share it.
func ParseRange(s string) (lo, hi int, ok bool) {
	num := func(s string) (int, bool) {
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, strconv.IntSize)
		return int(n), err == nil && n >= 0
	}
	a, b, isRange := strings.Cut(s, "..")
	if lo, ok = num(a); !ok {
		return 0, 0, false
	}
	if !isRange {
		return lo, lo, true
	}
	if hi, ok = num(b); !ok || hi < lo {
		return 0, 0, false
	}
	return lo, hi, true
}

// ParseValueSize parses "100" or "32..4096" (bytes, at most MaxValueSize).
func ParseValueSize(s string) (lo, hi int, err error) {
	lo, hi, ok := ParseRange(s)
	if !ok || lo <= 0 {
		return 0, 0, fmt.Errorf("kvbench: bad value size %q: want N or MIN..MAX bytes, MIN ≤ MAX", s)
	}
	if hi > MaxValueSize {
		return 0, 0, fmt.Errorf("kvbench: value size %q above the largest supported, %d bytes (64 MiB)", s, MaxValueSize)
	}
	return lo, hi, nil
}

// SetProgress sets the callback that receives the operation count of the
// running workload (approximate, from time to time).
func (r *Runner) SetProgress(f func(done int64)) { r.cfg.Progress = f }

// Ops returns how many operations workload w runs, for a progress display
// (0 when unknown: readseq reads the whole store in one call).
func (r *Runner) Ops(w string) int64 {
	switch {
	case w == "readseq":
		return 0
	case strings.HasPrefix(w, "fill"), w == "overwrite", w == "deleterandom":
		return int64(r.cfg.Num)
	}
	return int64(r.cfg.Reads)
}

// RunShown is Run with its progress shown as the task name of prog (a nil
// prog shows nothing).
func (r *Runner) RunShown(ctx context.Context, prog *progress.Reporter, name, w string) (*Result, error) {
	t := prog.Start(name, r.Ops(w))
	if t != nil {
		r.SetProgress(t.Set)
		defer r.SetProgress(nil)
	}
	res, err := r.Run(ctx, w)
	t.Done()
	return res, err
}
