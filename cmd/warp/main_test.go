package main

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/warpkit/warpkit/internal/cli"
	"github.com/warpkit/warpkit/internal/stress"
)

// TestTourCPU runs every registered tour part on the CPU backend, so the
// README's main command is exercised by CI.

func TestMain(m *testing.M) {
	stress.MaybeBurn() // --cpu-stress starts copies of this test binary as burners
	os.Exit(m.Run())
}

func TestTourCPU(t *testing.T) {
	if err := runTour([]string{"--backend", "cpu"}); err != nil {
		t.Fatal(err)
	}
}

func TestDevicesWithoutFlagsSucceeds(t *testing.T) {
	// With or without a GPU, listing devices is not an error.
	if err := runDevices(nil); err != nil {
		t.Fatal(err)
	}
}

// TestBenchList: warp bench -h lists every benchmark, and each one's -h
// says what needs a GPU.
func TestBenchList(t *testing.T) {
	code, stderr := runWarp(t, "bench", "-h")
	if code != 0 {
		t.Fatalf("warp bench -h: exit status %d\n%s", code, stderr)
	}
	for _, name := range []string{"btree", "hash", "kv", "kvcompact", "latency", "lsm", "prim"} {
		if !strings.Contains(stderr, "\n  "+name+" ") {
			t.Errorf("warp bench -h lacks %s:\n%s", name, stderr)
		}
	}
	for _, name := range []string{"btree", "hash", "latency", "lsm", "prim"} {
		code, stderr := runWarp(t, "bench", name, "-h")
		if code != 0 || !strings.Contains(stderr, "usage: warp bench "+name) || !strings.Contains(stderr, "GPU") ||
			!strings.Contains(stderr, "-backend") || !strings.Contains(stderr, "-plot DIR") {
			t.Errorf("warp bench %s -h: exit status %d, no word of the GPU, --backend or --plot DIR:\n%s", name, code, stderr)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	if err := runTour([]string{"--backend", "tpu"}); !errors.Is(err, cli.ErrUsage) {
		t.Errorf("bad backend: %v", err)
	}
	if err := runBench([]string{"no-such-structure"}); !errors.Is(err, cli.ErrUsage) {
		t.Errorf("unknown bench: %v", err)
	}
	if err := runBench(nil); !errors.Is(err, cli.ErrUsage) {
		t.Errorf("bench without a structure: %v", err)
	}
}

// captureStderr runs fn with os.Stderr sent to a file (no terminal) and
// returns what it printed there.
func captureStderr(t *testing.T, fn func()) string {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	saved := os.Stderr
	os.Stderr = f
	defer func() { os.Stderr = saved }()
	fn()
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// runWarp runs warp with args as main would and returns its exit status and
// what it printed on stderr (stdout is discarded).
func runWarp(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var code int
	stderr := captureStderr(t, func() {
		_, _ = captureStdout(t, func() error { code = run(args); return nil })
	})
	return code, stderr
}

// TestFlagRejection: every out-of-range or malformed value is a usage error
// (exit status 2) printed as one line that names the flag and what it
// allows; none runs with a silent default (--num -5 ran 1M operations).
func TestFlagRejection(t *testing.T) {
	dir := makeKVStore(t)
	for _, tc := range []struct {
		args []string
		want []string // in the one line printed
	}{
		{[]string{"kv", "bench", "--num", "-5"}, []string{"warp kv bench:", "-num", "1..1000000000"}},
		{[]string{"kv", "bench", "--num", "0"}, []string{"-num", "1..1000000000"}},
		{[]string{"kv", "bench", "--num=1e6"}, []string{"-num", "1..1000000000"}},
		{[]string{"kv", "bench", "--num", "ten"}, []string{"-num", "1..1000000000"}},
		{[]string{"kv", "bench", "--reads", "-1"}, []string{"-reads", "0..1000000000"}},
		{[]string{"kv", "bench", "--threads", "0"}, []string{"-threads", "1..4096"}},
		{[]string{"kv", "bench", "--memtable", "0"}, []string{"-memtable", "1..1024"}},
		{[]string{"kv", "bench", "--memtable", "2048"}, []string{"-memtable", "1..1024"}},
		{[]string{"kv", "bench", "--table-size", "0"}, []string{"-table-size", "1..1024"}},
		{[]string{"kv", "bench", "--cache", "-1"}, []string{"-cache", "1..1048576"}},
		{[]string{"kv", "bench", "--cache", "0"}, []string{"-cache", "1..1048576"}},
		{[]string{"kv", "bench", "--progress", "maybe"}, []string{"-progress", "auto, bars, plain, off"}},
		{[]string{"kv", "bench", "--fs", "disk"}, []string{"-fs", "os, mem"}},
		{[]string{"kv", "bench", "--compression", "zstd"}, []string{"-compression", "none, snappy, s2"}},
		{[]string{"kv", "bench", "--compactor", "tpu"}, []string{"-compactor", `"tpu" is not one of cpu, gpu`}},
		{[]string{"kv", "bench", "--compactor", "cpu,cpu"}, []string{"-compactor", `"cpu" twice`}},
		{[]string{"kv", "bench", "--value", "0"}, []string{"--value", "bad value size"}},
		{[]string{"kv", "bench", "--bytes-per-sync", "2"}, []string{"--bytes-per-sync 2", "4 KiB"}},
		{[]string{"kv", "bench", "--bytes-per-sync", "-1"}, []string{"-bytes-per-sync", "0..1048576"}},
		{[]string{"kv", "bench", "--flush-workers", "65"}, []string{"-flush-workers", "0..64"}},
		{[]string{"kv", "bench", "--workloads", "fillrandom,nope"}, []string{"--workloads", `"nope"`}},
		{[]string{"kv", "bench", "--sync=maybe"}, []string{"-sync"}},
		{[]string{"kv", "bench", "--bogus"}, []string{"flag provided but not defined: -bogus", "warp kv bench -h"}},
		{[]string{"kv", "bench", "extra"}, []string{`unexpected argument "extra"`}},
		{[]string{"bench", "kv", "--num", "0"}, []string{"warp kv bench:", "-num", "1..1000000000"}},
		{[]string{"bench", "hash", "--only", "fig9"}, []string{"warp bench hash:", `unknown experiment "fig9"`}},
		{[]string{"bench", "hash", "--backend", "tpu"}, []string{"warp bench hash:", "-backend"}},
		{[]string{"bench", "lsm", "--sections", "nope"}, []string{"warp bench lsm:", `unknown section "nope"`}},
		{[]string{"bench", "btree", "--sizes", "x"}, []string{"warp bench btree:", `bad size "x"`}},
		{[]string{"bench", "prim", "--log2n", "9"}, []string{"warp bench prim:", "--log2n"}},
		{[]string{"bench", "latency", "--calls", "0"}, []string{"warp bench latency:", "--calls"}},
		{[]string{"bench", "latency", "--plot"}, []string{"warp bench latency:", "flag needs an argument: -plot"}},
		{[]string{"bench", "nope"}, []string{"warp bench:", `unknown structure "nope"`}},
		{[]string{"kv", "scan", dir, "--limit", "-1"}, []string{"warp kv scan:", "-limit", "0..1000000000"}},
		{[]string{"kv", "scan", dir, "--limit", "x"}, []string{"-limit", "0..1000000000"}},
		{[]string{"kv", "scan", dir, "--frm", "a"}, []string{"warp kv scan:", "not defined: --frm"}},
		{[]string{"kv", "get", dir}, []string{"warp kv get:", "takes <dir> <key>", `got 1: "` + dir + `"`}},
		{[]string{"kv", "repair", dir, "--yes=no"}, []string{"warp kv repair:", "-yes"}},
		{[]string{"kv", "frob"}, []string{"warp kv:", `unknown kv subcommand "frob"`}},
		{[]string{"devices", "extra"}, []string{"warp devices:", `unexpected argument "extra"`}},
		{[]string{"devices", "--json=maybe"}, []string{"warp devices:", "-json"}},
		{[]string{"devices", "--selftest=2"}, []string{"warp devices:", "-selftest"}},
		{[]string{"nope"}, []string{`unknown command "nope"`}},
	} {
		code, stderr := runWarp(t, tc.args...)
		if code != 2 {
			t.Errorf("warp %q: exit status %d (want 2); stderr %q", tc.args, code, stderr)
			continue
		}
		first, _, _ := strings.Cut(stderr, "\n")
		if tc.args[0] != "nope" && strings.Count(stderr, "\n") != 1 {
			t.Errorf("warp %q printed %d lines (want one):\n%s", tc.args, strings.Count(stderr, "\n"), stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(first, w) {
				t.Errorf("warp %q: %q does not say %q", tc.args, first, w)
			}
		}
	}
}

// TestErrorPrintedOnce: a failing command prints its error once: package
// flag's own complaint and usage dump are silenced (an unknown flag was
// printed by flag, then again by main), and a runtime failure is one line
// with exit status 1.
func TestErrorPrintedOnce(t *testing.T) {
	dir := makeKVStore(t)
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"kv", "bench", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"kv", "scan", dir, "--limit"}, 2, "flag needs an argument: -limit"},
		{[]string{"kv", "get", dir, "zz"}, 1, `"zz" not found`},
		{[]string{"kv", "get", filepath.Join(t.TempDir(), "none"), "a"}, 1, "warp kv get: "},
		{[]string{"devices", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"tour", "--bogus"}, 2, "flag provided but not defined: -bogus"},
	} {
		code, stderr := runWarp(t, tc.args...)
		if code != tc.code || strings.Count(stderr, tc.msg) != 1 || strings.Count(stderr, "\n") != 1 || strings.Contains(stderr, "usage: warp") {
			t.Errorf("warp %q: exit status %d, stderr\n%s(want status %d and one line saying %q)", tc.args, code, stderr, tc.code, tc.msg)
		}
	}
	// -h prints the usage once, with each flag's range, and is no error.
	code, stderr := runWarp(t, "kv", "bench", "-h")
	if code != 0 || strings.Count(stderr, "usage: warp kv bench") != 1 || !strings.Contains(stderr, "-num N") || !strings.Contains(stderr, "(N: 1..1000000000)") {
		t.Errorf("warp kv bench -h: exit status %d, stderr\n%s", code, stderr)
	}
	if code, stderr := runWarp(t, "kv", "scan", dir, "-h"); code != 0 || !strings.Contains(stderr, "usage: warp kv scan <dir>") {
		t.Errorf("warp kv scan DIR -h: exit status %d, stderr\n%s", code, stderr)
	}
}

// TestKVBenchPlainProgress: off a terminal, warp kv bench prints plain
// progress lines (count, share, a rate, an ETA) while a workload runs and a
// line as each one ends; --progress off prints none.
func TestKVBenchPlainProgress(t *testing.T) {
	saved := kvProgressInterval
	kvProgressInterval = 10 * time.Millisecond
	defer func() { kvProgressInterval = saved }()
	code, stderr := runWarp(t, "kv", "bench", "--num", "100000", "--fs", "mem", "--workloads", "fillrandom,readrandom")
	if code != 0 {
		t.Fatalf("exit status %d: %s", code, stderr)
	}
	running := regexp.MustCompile(`(?m)^\[1/2\] fillrandom: kv: \d+/100000 ops \(\d+%\), [\d.]+ ops/s, ETA \S+$`)
	for _, re := range []*regexp.Regexp{
		running,
		regexp.MustCompile(`(?m)^\[1/2\] fillrandom: kv: done, 100000 ops in \S+ \(\d+ ops/s\)$`),
		regexp.MustCompile(`(?m)^\[1/2\] fillrandom: B-tree: done, 100000 ops in \S+ \(\d+ ops/s\)$`),
		regexp.MustCompile(`(?m)^\[2/2\] readrandom: kv: done, 100000 ops in `),
	} {
		if !re.MatchString(stderr) {
			t.Errorf("stderr\n%s\nhas no line matching %v", stderr, re)
		}
	}
	if strings.Contains(stderr, "\x1b[") {
		t.Errorf("escape sequences off a terminal: %q", stderr)
	}
	if code, stderr := runWarp(t, "kv", "bench", "--num", "3000", "--fs", "mem", "--workloads", "fillrandom", "--progress", "off"); code != 0 || stderr != "" {
		t.Errorf("--progress off: exit status %d, stderr %q", code, stderr)
	}
}
