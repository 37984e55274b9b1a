package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/warpkit/warpkit/internal/progress"
	"github.com/warpkit/warpkit/kv/kvbench"
)

// TestRatioLabels: every ratio column is named base/other and holds the
// base store's ops/s over the other's, whatever order the stores ran in
// (with --stores pebble,warpkit the column said warpkit/warpkit and held
// pebble's ops/s over warpkit's).
func TestRatioLabels(t *testing.T) {
	ops := map[string]int64{"warpkit": 300, "pebble": 200, "goleveldb": 100}
	res := map[string]map[string]*kvbench.Result{}
	for name, n := range ops {
		res[name] = map[string]*kvbench.Result{"fillrandom": {Ops: n, Elapsed: time.Second, Latency: kvbench.NewHistogram()}}
	}
	for _, tc := range []struct {
		stores []string
		want   map[string]float64 // ratio column -> value
	}{
		{[]string{"warpkit", "pebble", "goleveldb"}, map[string]float64{"warpkit/pebble ops/s": 1.5, "warpkit/goleveldb ops/s": 3}},
		{[]string{"pebble", "warpkit"}, map[string]float64{"warpkit/pebble ops/s": 1.5}},
		{[]string{"goleveldb", "pebble"}, map[string]float64{"goleveldb/pebble ops/s": 0.5}},
		{[]string{"pebble"}, map[string]float64{}},
	} {
		var stores []opener
		for _, n := range tc.stores {
			stores = append(stores, opener{name: n})
		}
		rep := report(stores, []string{"fillrandom"}, res, kvbench.Config{}, settings{})
		tab := rep.Tables[0]
		got := map[string]float64{}
		for i, c := range tab.Columns {
			if i > len(stores) { // workload, then one ops/s column per store
				got[c] = tab.Rows[0][i].(float64)
			}
		}
		if len(got) != len(tc.want) {
			t.Fatalf("%v: ratio columns %v, want %v", tc.stores, got, tc.want)
		}
		for c, v := range tc.want {
			if g, ok := got[c]; !ok || math.Abs(g-v) > 1e-9 {
				t.Fatalf("%v: ratio columns %v, want %v", tc.stores, got, tc.want)
			}
		}
	}
}

// TestRunStoreProgress: off a terminal each workload prints plain progress
// lines (count, share, rate, ETA) while it runs, numbered across the whole
// run, and nothing is left silent for long.
func TestRunStoreProgress(t *testing.T) {
	var buf bytes.Buffer
	prog := progress.New(&buf, progress.Auto)
	prog.Interval = 5 * time.Millisecond
	pl := &plan{prog: prog, total: 2}
	mem := opener{name: "mem", open: func(string, settings) (kvbench.Store, error) { return kvbench.NewMemStore(), nil }}
	res, err := runStore(context.Background(), pl, mem, t.TempDir(), settings{}, kvbench.Config{Num: 200_000}, []string{"fillrandom", "readrandom"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res["readrandom"].Ops != 200_000 {
		t.Fatalf("results %v", res)
	}
	out := buf.String()
	for _, re := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^\[1/2\] mem fillrandom: \d+/200000 ops \(\d+%\), [\d.]+ ops/s, ETA \S+$`),
		regexp.MustCompile(`(?m)^\[2/2\] mem readrandom: \d+/200000 ops \(\d+%\), [\d.]+ ops/s, ETA \S+$`),
	} {
		if !re.MatchString(out) {
			t.Errorf("progress output\n%s\nhas no line matching %v", out, re)
		}
	}
	if strings.Contains(out, "\x1b[") {
		t.Errorf("escape sequences off a terminal: %q", out)
	}
}

func TestCheckRange(t *testing.T) {
	if err := checkRange("num", 0, 1, 10); err == nil || !strings.Contains(err.Error(), "--num 0: want a whole number in 1..10") {
		t.Errorf("checkRange(num, 0, 1, 10) = %v", err)
	}
	for _, v := range []int{1, 10} {
		if err := checkRange("num", v, 1, 10); err != nil {
			t.Errorf("checkRange(num, %d, 1, 10) = %v", v, err)
		}
	}
}

func TestParseStress(t *testing.T) {
	if got, err := parseStress("0, 40,80"); err != nil || !slices.Equal(got, []int{0, 40, 80}) {
		t.Fatalf("parseStress: %v, %v", got, err)
	}
	for _, bad := range []string{"", "-1", "101", "40,x"} {
		if _, err := parseStress(bad); err == nil {
			t.Errorf("parseStress(%q) took it", bad)
		}
	}
}

// TestTraceCompactions: with --trace-compactions each store writes a line
// per finished compaction, naming the store, the input levels and the
// output level.
func TestTraceCompactions(t *testing.T) {
	var buf bytes.Buffer
	s := settings{
		memTable: 64 << 10, tableSize: 64 << 10, l0Trigger: 2, l0Slowdown: 8, l0Stop: 12, lbase: 256 << 10,
		blockSize: 4096, bloomBits: 10, cacheSize: 1 << 20, compression: "snappy", trace: &compactTrace{w: &buf},
	}
	for _, open := range []struct {
		name string
		fn   func(string, settings) (kvbench.Store, error)
	}{{"warpkit", openWarpkit}, {"pebble", openPebble}} {
		st, err := open.fn(t.TempDir(), s)
		if err != nil {
			t.Fatal(err)
		}
		val := bytes.Repeat([]byte("v"), 200)
		for i := range 20000 {
			if err := st.Set([]byte(fmt.Sprintf("k%07d", i*7919%20000)), val); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.Settle(); err != nil {
			t.Fatal(err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
	compaction := regexp.MustCompile(`^(warpkit|pebble) +[0-9.]+s( L[0-6]:[0-9]+/[0-9.]+MB)+ -> L[1-6] [0-9.]+MB`)
	flush := regexp.MustCompile(`^(warpkit|pebble) +[0-9.]+s flush [0-9.]+MB in [0-9.]+ms$`)
	stall := regexp.MustCompile(`^(warpkit|pebble) +[0-9.]+s stall (begin .+|end)$`)
	compactions, flushes := map[string]int{}, map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if m := compaction.FindStringSubmatch(l); m != nil {
			compactions[m[1]]++
		} else if m := flush.FindStringSubmatch(l); m != nil {
			flushes[m[1]]++
		} else if !stall.MatchString(l) {
			t.Fatalf("trace line %q", l)
		}
	}
	// 20,000 entries of 200 B fill a 64 KiB memtable about 60 times.
	for _, st := range []string{"warpkit", "pebble"} {
		if compactions[st] == 0 || flushes[st] < 20 {
			t.Fatalf("%s: %d compactions and %d flushes traced\n%s", st, compactions[st], flushes[st], buf.String())
		}
	}
}
