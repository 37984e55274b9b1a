package progress

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{"auto": Auto, "bars": Bars, "on": Bars, "plain": Plain, "off": Off} {
		if m, err := ParseMode(in); err != nil || m != want {
			t.Errorf("ParseMode(%q) = %q, %v (want %q)", in, m, err, want)
		}
	}
	for _, bad := range []string{"", "maybe", "ON", "yes"} {
		if _, err := ParseMode(bad); err == nil {
			t.Errorf("ParseMode(%q) succeeded", bad)
		}
	}
}

// TestAutoIsPlainOffTerminal: Auto resolves to plain lines on a writer that
// is no terminal (a buffer, a pipe, a file).
func TestAutoIsPlainOffTerminal(t *testing.T) {
	if m := New(&bytes.Buffer{}, Auto).Mode(); m != Plain {
		t.Errorf("Auto on a buffer: %q (want plain)", m)
	}
	var r *Reporter
	if r.Mode() != Off || r.Start("x", 1) != nil {
		t.Error("a nil Reporter shows something")
	}
	r.Start("x", 1).Set(1) // a nil Task does nothing
	r.Start("x", 1).Done()
}

// TestPlainLines: a task prints a line every interval with its count,
// share, a rate that is not zero and an ETA, and a closing line when asked.
func TestPlainLines(t *testing.T) {
	var buf bytes.Buffer
	r := New(&buf, Auto)
	r.Interval = 40 * time.Millisecond
	r.DoneLines = true
	task := r.Start("fill", 1000)
	for i := range 10 {
		task.Set(int64(i+1) * 50)
		time.Sleep(20 * time.Millisecond)
	}
	task.Done()
	task.Done() // a second Done does nothing
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) < 3 {
		t.Fatalf("printed %q, want at least two progress lines and a done line", buf.String())
	}
	prog := regexp.MustCompile(`^fill: (\d+)/1000 ops \(\d+%\), ([\d.]+) ops/s, ETA [\d.ms]+$`)
	for _, l := range lines[:len(lines)-1] {
		m := prog.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("progress line %q does not match %v", l, prog)
			continue
		}
		if m[1] != "0" && m[2] == "0.0" {
			t.Errorf("progress line %q: no rate", l)
		}
	}
	if done := regexp.MustCompile(`^fill: done, 500 ops in [\d.ms]+ \(\d+ ops/s\)$`); !done.MatchString(lines[len(lines)-1]) {
		t.Errorf("last line %q does not match %v", lines[len(lines)-1], done)
	}
}

// TestPlainQuietShortTask: a task shorter than the interval prints nothing
// unless DoneLines is set; one of unknown size prints its elapsed time.
func TestPlainQuietShortTask(t *testing.T) {
	var buf bytes.Buffer
	r := New(&buf, Plain)
	task := r.Start("short", 10)
	task.Set(10)
	task.Done()
	if buf.Len() != 0 {
		t.Errorf("a short task printed %q", buf.String())
	}
	r.Interval = 30 * time.Millisecond
	task = r.Start("settle", 0)
	time.Sleep(80 * time.Millisecond)
	task.Done()
	if !regexp.MustCompile(`^settle: [\d.ms]+ elapsed\n`).MatchString(buf.String()) {
		t.Errorf("unknown-size task printed %q", buf.String())
	}
}

// TestBarsDoneShort: a bar whose count falls short of its total (an
// interrupted task) still completes at Done, rather than hanging.
func TestBarsDoneShort(t *testing.T) {
	var buf bytes.Buffer
	r := New(&buf, Bars)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		task := r.Start("fill", 1000)
		task.Set(400)
		time.Sleep(450 * time.Millisecond)
		task.Done()
		spin := r.Start("settle", 0)
		spin.Done()
	}()
	select {
	case <-finished:
	case <-time.After(10 * time.Second):
		t.Fatal("Done hung on a bar short of its total")
	}
	if out := buf.String(); !strings.Contains(out, "fill") || !regexp.MustCompile(`[1-9]\d* ops/s`).MatchString(out) {
		t.Errorf("bar printed %q (want the name and a rate that is not zero)", out)
	}
}
