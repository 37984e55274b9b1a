// Package progress tells the user of a long-running command how far it has
// got. On a terminal each task is a bar (github.com/vbauerster/mpb/v8) with
// its rate and an ETA; elsewhere (a pipe, a file, a CI log) a task prints a
// plain line every few seconds while it runs, and, if asked, one when it
// ends. Bars would be unreadable there, and silence looks like a hang.
//
// Tasks run one after another: Start one, Set its count from any goroutine
// (Set is an atomic store, cheap enough for a benchmark's hot loop), and
// call Done before the next.
package progress

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/cwriter"
	"github.com/vbauerster/mpb/v8/decor"
)

// Mode chooses how progress is shown.
type Mode string

const (
	Auto  Mode = "auto"  // bars on a terminal, plain lines elsewhere
	Bars  Mode = "bars"  // bars, even where the output is no terminal
	Plain Mode = "plain" // plain lines, even on a terminal
	Off   Mode = "off"   // nothing
)

// Modes lists the names ParseMode accepts (besides "on", an older spelling
// of bars), for a --progress flag's help text.
var Modes = []string{string(Auto), string(Bars), string(Plain), string(Off)}

// ParseMode parses a --progress value.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Auto, Bars, Plain, Off:
		return m, nil
	case "on":
		return Bars, nil
	}
	return "", fmt.Errorf("%q is not one of %s", s, strings.Join(Modes, ", "))
}

// IsTerminal reports whether w is a terminal that bars can be drawn on
// (one that reports its width: mpb draws nothing on one that says 0).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || !cwriter.IsTerminal(int(f.Fd())) {
		return false
	}
	width, _, err := cwriter.GetSize(int(f.Fd()))
	return err == nil && width > 0
}

// DefaultInterval is how often a task prints a plain line.
const DefaultInterval = 5 * time.Second

// Reporter shows tasks' progress on one writer (normally os.Stderr).
type Reporter struct {
	w    io.Writer
	mode Mode // Bars, Plain or Off

	// Interval is the period of plain lines; DefaultInterval if zero.
	Interval time.Duration
	// Unit names what a task counts ("ops" if empty).
	Unit string
	// DoneLines makes a finished task print a closing line in Plain mode
	// ("name: done, N ops in 1.2s (R ops/s)"). Leave it off where the
	// caller prints its own line per task.
	DoneLines bool
	// ClearBars removes a finished task's bar in Bars mode (where the
	// caller prints its own line per task); otherwise it stays on screen.
	ClearBars bool
}

// New returns a Reporter writing to w; Auto picks Bars when w is a
// terminal, else Plain.
func New(w io.Writer, mode Mode) *Reporter {
	if mode == Auto || mode == "" {
		mode = Plain
		if IsTerminal(w) {
			mode = Bars
		}
	}
	return &Reporter{w: w, mode: mode}
}

// Mode returns the resolved mode: Bars, Plain or Off.
func (r *Reporter) Mode() Mode {
	if r == nil {
		return Off
	}
	return r.mode
}

func (r *Reporter) unit() string {
	if r.Unit == "" {
		return "ops"
	}
	return r.Unit
}

// Task is one running task. A nil *Task (from a nil Reporter) does nothing.
type Task struct {
	r     *Reporter
	name  string
	total int64 // <= 0: unknown
	start time.Time
	done  atomic.Int64

	stop    chan struct{}
	wg      sync.WaitGroup
	lines   int // plain lines printed (read after wg.Wait)
	p       *mpb.Progress
	bar     *mpb.Bar
	rate    atomic.Uint64 // bars: recent rate (float64 bits)
	elapsed time.Duration // set by Done, before the bar completes
	closed  bool
}

// Start begins a task counting up to total (total <= 0: unknown, shown as
// elapsed time and count only).
func (r *Reporter) Start(name string, total int64) *Task {
	if r == nil || r.mode == Off {
		return nil
	}
	t := &Task{r: r, name: name, total: total, start: time.Now(), stop: make(chan struct{})}
	switch r.mode {
	case Bars:
		t.startBar()
	default:
		interval := r.Interval
		if interval <= 0 {
			interval = DefaultInterval
		}
		t.wg.Add(1)
		go t.plainLoop(interval)
	}
	return t
}

// Set records that done units are finished. Any goroutine may call it.
func (t *Task) Set(done int64) {
	if t != nil {
		t.done.Store(done)
	}
}

// Done ends the task: its bar is completed (and left on screen), or in
// Plain mode with DoneLines a closing line is printed (for a task of
// unknown size only if it counted something or ran past one interval).
// Calling it again does nothing.
func (t *Task) Done() {
	if t == nil || t.closed {
		return
	}
	t.closed = true
	close(t.stop)
	t.wg.Wait()
	t.elapsed = time.Since(t.start)
	if t.bar != nil {
		t.bar.SetCurrent(t.done.Load())
		t.bar.SetTotal(-1, true) // complete at the current count
		t.p.Wait()
		return
	}
	el, n := t.elapsed, t.done.Load()
	if t.r.DoneLines && (t.total > 0 || n > 0 || t.lines > 0) {
		if n > 0 {
			fmt.Fprintf(t.r.w, "%s: done, %d %s in %s (%s %s/s)\n", t.name, n, t.r.unit(), roundDur(el), fmtRate(float64(n)/el.Seconds()), t.r.unit())
		} else {
			fmt.Fprintf(t.r.w, "%s: done in %s\n", t.name, roundDur(el))
		}
	}
}

// plainLoop prints a line every interval until the task ends. The rate is
// that of the last interval; the ETA divides what is left by the rate since
// the start.
func (t *Task) plainLoop(interval time.Duration) {
	defer t.wg.Done()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	last, lastT := int64(0), t.start
	for {
		select {
		case <-t.stop:
			return
		case now := <-tick.C:
			n := t.done.Load()
			fmt.Fprintln(t.r.w, t.plainLine(n, now.Sub(t.start), float64(n-last)/now.Sub(lastT).Seconds()))
			t.lines++
			last, lastT = n, now
		}
	}
}

// plainLine formats one progress line: count, share, recent rate and ETA
// (or, for a task of unknown size, the count, rate and time so far).
func (t *Task) plainLine(n int64, elapsed time.Duration, rate float64) string {
	u := t.r.unit()
	if t.total <= 0 {
		if n == 0 {
			return fmt.Sprintf("%s: %s elapsed", t.name, roundDur(elapsed))
		}
		return fmt.Sprintf("%s: %d %s, %s %s/s, %s elapsed", t.name, n, u, fmtRate(rate), u, roundDur(elapsed))
	}
	eta := "unknown"
	if avg := float64(n) / elapsed.Seconds(); n > 0 && avg > 0 {
		eta = roundDur(time.Duration(float64(max(t.total-n, 0)) / avg * float64(time.Second)))
	}
	return fmt.Sprintf("%s: %d/%d %s (%.0f%%), %s %s/s, ETA %s", t.name, n, t.total, u, 100*float64(n)/float64(t.total), fmtRate(rate), u, eta)
}

// startBar shows the task as a bar: name, share, then its recent rate, ETA
// and elapsed time, and when done its average rate and time; or, of
// unknown size, a spinner and the elapsed time, which vanish when done.
func (t *Task) startBar() {
	opts := []mpb.ContainerOption{mpb.WithOutput(t.r.w), mpb.WithWidth(30), mpb.WithRefreshRate(150 * time.Millisecond)}
	if !IsTerminal(t.r.w) {
		opts = append(opts, mpb.WithAutoRefresh()) // mpb draws nothing off a terminal otherwise
	}
	t.p = mpb.New(opts...)
	name := decor.Name(t.name, decor.WCSyncSpaceR)
	if t.total <= 0 {
		// A spinner (waiting for compactions, say) leaves no line behind.
		t.bar = t.p.New(0, mpb.SpinnerStyle(), mpb.BarRemoveOnComplete(), mpb.PrependDecorators(name),
			mpb.AppendDecorators(decor.Elapsed(decor.ET_STYLE_GO, decor.WCSyncSpace)))
	} else {
		// Created with total 0 and given its total after, the bar completes
		// only when Done says so: one created with its total would ignore
		// Done's SetTotal while its count fell short (an interrupted or
		// shortened task), and Wait would hang.
		bopts := []mpb.BarOption{mpb.PrependDecorators(name, decor.Percentage(decor.WCSyncSpace)),
			mpb.AppendDecorators(decor.Any(t.barStatus, decor.WCSyncSpace))}
		if t.r.ClearBars {
			bopts = append(bopts, mpb.BarRemoveOnComplete())
		}
		t.bar = t.p.AddBar(0, bopts...)
		t.bar.SetTotal(t.total, false)
	}
	t.wg.Add(1)
	go t.barLoop()
}

// barStatus is the text after the bar: "R ops/s, ETA 7s, 2.1s elapsed"
// while it runs (R the recent rate), "R ops/s, done in 9.3s" after (R the
// average).
func (t *Task) barStatus(s decor.Statistics) string {
	u := t.r.unit()
	el := time.Since(t.start)
	if s.Completed || s.Aborted {
		el = t.elapsed
		return fmt.Sprintf("%s %s/s, done in %s", fmtRate(float64(s.Current)/el.Seconds()), u, roundDur(el))
	}
	rate := math.Float64frombits(t.rate.Load())
	eta := "?"
	if rate > 0 {
		eta = roundDur(time.Duration(float64(max(s.Total-s.Current, 0)) / rate * float64(time.Second)))
	}
	return fmt.Sprintf("%s %s/s, ETA %s, %s elapsed", fmtRate(rate), u, eta, roundDur(el))
}

// barLoop hands the count to the bar every 200 ms and keeps the recent
// rate: a moving average over about 3 s of the rate of each 200 ms.
func (t *Task) barLoop() {
	defer t.wg.Done()
	const tickEvery, alpha = 200 * time.Millisecond, 2.0 / (15 + 1)
	tick := time.NewTicker(tickEvery)
	defer tick.Stop()
	last, lastT, rate := int64(0), t.start, -1.0
	for {
		select {
		case <-t.stop:
			return
		case now := <-tick.C:
			n := t.done.Load()
			r := float64(n-last) / now.Sub(lastT).Seconds()
			if rate < 0 {
				rate = r
			} else {
				rate += alpha * (r - rate)
			}
			t.rate.Store(math.Float64bits(rate))
			t.bar.SetCurrent(n)
			last, lastT = n, now
		}
	}
}

// roundDur rounds a duration for display: tenths of a second below a
// minute, seconds above.
func roundDur(d time.Duration) string {
	if d < time.Minute {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// fmtRate formats a rate: whole units, or tenths below 10.
func fmtRate(r float64) string {
	if r < 10 {
		return fmt.Sprintf("%.1f", r)
	}
	return fmt.Sprintf("%.0f", r)
}
