package main

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/warpkit/warpkit/internal/cli"
	"github.com/warpkit/warpkit/kv"
)

func TestKVBenchQuick(t *testing.T) {
	if err := runKVBenchCommand([]string{"--num", "3000", "--fs", "mem", "--progress", "off", "--value", "32..512"}); err != nil {
		t.Fatal(err)
	}
	if err := runKVBenchCommand([]string{"--num", "2000", "--workloads", "fillrandom,readrandom", "--json", "--progress", "off", "--dir", t.TempDir()}); err != nil {
		t.Fatal(err)
	}
}

func TestKVTools(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	for _, args := range [][]string{
		{"set", dir, "a", "1"},
		{"set", dir, "b", "2"},
		{"get", dir, "a"},
		{"delete", dir, "b"},
		{"scan", dir},
		{"compact", dir},
		{"check", dir},
		{"stats", dir},
	} {
		if err := runKV(args); err != nil {
			t.Fatalf("warp kv %v: %v", args, err)
		}
	}
	if err := runKV([]string{"get", dir, "b"}); err == nil {
		t.Fatal("deleted key found")
	}
	if err := runKV([]string{"get", filepath.Join(t.TempDir(), "none"), "a"}); err == nil {
		t.Fatal("get on a missing store succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, "CURRENT")); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]string{nil, {"frobnicate"}, {"get", dir}, {"bench", "--workloads", "nope"}, {"bench", "--value", "0"}} {
		if err := runKV(bad); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("warp kv %v: %v (want a usage error)", bad, err)
		}
	}
}

// makeKVStore creates a store in a new directory holding a table (a, b) and
// a log with an unflushed write (c), all closed again.
func makeKVStore(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	for _, args := range [][]string{{"set", dir, "a", "1"}, {"set", dir, "b", "2"}, {"compact", dir}, {"set", dir, "c", "3"}} {
		if err := runKV(args); err != nil {
			t.Fatalf("warp kv %v: %v", args, err)
		}
	}
	return dir
}

// snapshotDir maps every file under dir (by relative path; directories end
// in "/") to its contents.
func snapshotDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	snap := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if d.IsDir() {
			snap[rel+"/"] = ""
			return nil
		}
		b, err := os.ReadFile(path)
		snap[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func sameSnapshot(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	if !maps.Equal(before, after) {
		t.Errorf("%s changed the store: before %v, after %v", what, slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
	}
}

// captureStdout runs fn with os.Stdout sent to a file and returns what it
// printed.
func captureStdout(t *testing.T, fn func() error) (string, error) {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	saved := os.Stdout
	os.Stdout = f
	err = fn()
	os.Stdout = saved
	b, rerr := os.ReadFile(f.Name())
	if rerr != nil {
		t.Fatal(rerr)
	}
	return string(b), err
}

// TestKVReadCommandsReadOnly runs the reading subcommands on a store whose
// directory is read-only (as root, which ignores permissions, it checks
// instead that they leave every file as it was).
func TestKVReadCommandsReadOnly(t *testing.T) {
	dir := makeKVStore(t)
	before := snapshotDir(t, dir)
	if os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
	}
	for _, args := range [][]string{{"get", dir, "a"}, {"get", dir, "c"}, {"scan", dir}, {"check", dir}, {"stats", dir}} {
		out, err := captureStdout(t, func() error { return runKV(args) })
		if err != nil {
			t.Fatalf("warp kv %v on a read-only store: %v", args, err)
		}
		if args[0] == "get" && out != map[string]string{"a": "1\n", "c": "3\n"}[args[2]] {
			t.Errorf("warp kv %v printed %q", args, out)
		}
		if args[0] == "scan" && out != "a\t1\nb\t2\nc\t3\n" {
			t.Errorf("warp kv scan printed %q", out)
		}
		if args[0] == "check" && !strings.Contains(out, "ok: 1 tables verified") {
			t.Errorf("warp kv check printed %q", out)
		}
	}
	sameSnapshot(t, "the read commands", before, snapshotDir(t, dir))
	if err := runKV([]string{"set", dir, "d", "4"}); os.Geteuid() != 0 && err == nil {
		t.Error("set on a read-only directory succeeded")
	}
}

// TestKVBesideReader: the reading subcommands run beside another read-only
// DB on the store; a writing one fails on the lock.
func TestKVBesideReader(t *testing.T) {
	dir := makeKVStore(t)
	db, err := kv.Open(dir, &kv.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, args := range [][]string{{"get", dir, "a"}, {"scan", dir}, {"check", dir}, {"stats", dir}} {
		if _, err := captureStdout(t, func() error { return runKV(args) }); err != nil {
			t.Errorf("warp kv %v beside a reader: %v", args, err)
		}
	}
	for _, args := range [][]string{{"set", dir, "d", "4"}, {"delete", dir, "a"}, {"compact", dir}} {
		if err := runKV(args); !errors.Is(err, kv.ErrLocked) {
			t.Errorf("warp kv %v beside a reader: %v (want kv.ErrLocked)", args, err)
		}
	}
	if v, err := db.Get([]byte("a")); err != nil || string(v) != "1" {
		t.Errorf("reader's Get(a) = %q, %v", v, err)
	}
}

// TestKVCorruptionHint: a read command on a store without CURRENT fails
// with the corruption error and a hint naming warp kv repair, and changes
// nothing.
func TestKVCorruptionHint(t *testing.T) {
	dir := makeKVStore(t)
	if err := os.Remove(filepath.Join(dir, "CURRENT")); err != nil {
		t.Fatal(err)
	}
	before := snapshotDir(t, dir)
	for _, args := range [][]string{{"get", dir, "a"}, {"scan", dir}, {"check", dir}, {"stats", dir}} {
		err := runKV(args)
		if !errors.Is(err, kv.ErrCorruption) {
			t.Fatalf("warp kv %v without CURRENT: %v (want kv.ErrCorruption)", args, err)
		}
		var ce *kv.CorruptionError
		if !errors.As(err, &ce) || ce.File != "CURRENT" {
			t.Errorf("warp kv %v: the CorruptionError is lost from %v", args, err)
		}
		if want := "the store is damaged; `warp kv repair --yes " + dir + "` rebuilds it from its tables and logs"; !strings.Contains(err.Error(), want) {
			t.Errorf("warp kv %v: %v\n(want the hint %q)", args, err, want)
		}
	}
	sameSnapshot(t, "the read commands", before, snapshotDir(t, dir))
}

// TestKVRepair: repair refuses without --yes, changing nothing; with --yes
// it rebuilds a store whose CURRENT was removed, and the keys are back.
func TestKVRepair(t *testing.T) {
	dir := makeKVStore(t)
	if err := os.Remove(filepath.Join(dir, "CURRENT")); err != nil {
		t.Fatal(err)
	}
	before := snapshotDir(t, dir)
	for _, args := range [][]string{{"repair", dir}, {"repair"}, {"repair", dir, "extra", "--yes"}} {
		err := runKV(args)
		if !errors.Is(err, cli.ErrUsage) {
			t.Fatalf("warp kv %v: %v (want a usage error)", args, err)
		}
		if len(args) == 2 {
			for _, want := range []string{"rebuilds", "lost", "damaged log records", "warp kv check " + dir, "--yes"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("warp kv repair without --yes: %v\n(want it to mention %q)", err, want)
				}
			}
		}
	}
	sameSnapshot(t, "warp kv repair without --yes", before, snapshotDir(t, dir))

	// --yes after dir, as the usage text writes it. Two logs: the live one and
	// the empty spare the store records ahead of its next memtable switch.
	out, err := captureStdout(t, func() error { return runKV([]string{"repair", dir, "--yes"}) })
	if err != nil {
		t.Fatalf("warp kv repair --yes: %v", err)
	}
	for _, want := range []string{"repaired " + dir, "tables read:     1 (", "logs replayed:   2 (", "moved to lost/:  0 files", "rebuilt tables:  1 (", "3 read, 3 kept"} {
		if !strings.Contains(out, want) {
			t.Errorf("warp kv repair printed\n%s\n(want %q in it)", out, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "CURRENT")); err != nil {
		t.Fatalf("no CURRENT after repair: %v", err)
	}
	for k, v := range map[string]string{"a": "1", "b": "2", "c": "3"} {
		out, err := captureStdout(t, func() error { return runKV([]string{"get", dir, k}) })
		if err != nil || out != v+"\n" {
			t.Errorf("warp kv get %s after repair: %q, %v (want %q)", k, out, err, v)
		}
	}
	if out, err := captureStdout(t, func() error { return runKV([]string{"check", dir}) }); err != nil || !strings.Contains(out, "ok: 1 tables verified") {
		t.Errorf("warp kv check after repair: %q, %v", out, err)
	}

	// Repair takes the store's lock: it fails beside a reader, changing
	// nothing; --yes before dir works as well.
	db, err := kv.Open(dir, &kv.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	before = snapshotDir(t, dir)
	if err := runKV([]string{"repair", "--yes", dir}); !errors.Is(err, kv.ErrLocked) {
		t.Errorf("warp kv repair beside a reader: %v (want kv.ErrLocked)", err)
	}
	sameSnapshot(t, "warp kv repair beside a reader", before, snapshotDir(t, dir))
	db.Close()
	if _, err := captureStdout(t, func() error { return runKV([]string{"repair", "--yes", dir}) }); err != nil {
		t.Errorf("warp kv repair --yes on a sound store: %v", err)
	}
	if err := runKV([]string{"repair", "--yes", filepath.Join(t.TempDir(), "none")}); err == nil {
		t.Error("repair of a missing directory succeeded")
	}
}

// TestKVFlagsAnywhere: flags go before or after the positional arguments,
// as the usage text writes them; other dash words after those are
// arguments, and "--" ends the flags.
func TestKVFlagsAnywhere(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	for _, args := range [][]string{{"set", dir, "a", "1"}, {"set", dir, "b", "-5"}, {"set", "--", dir, "-c", "3"}} {
		if err := runKV(args); err != nil {
			t.Fatalf("warp kv %v: %v", args, err)
		}
	}
	for args, want := range map[*[]string]string{
		{"scan", dir, "--from", "a", "--to", "b"}: "a\t1\n",
		{"scan", "--from=a", dir, "-limit", "1"}:  "a\t1\n",
		{"scan", dir}:                             "-c\t3\na\t1\nb\t-5\n",
		{"get", dir, "b"}:                         "-5\n",
		{"get", dir, "--", "-c"}:                  "3\n",
		{"scan", dir, "--limit", "0", "--from=b"}: "b\t-5\n",
	} {
		out, err := captureStdout(t, func() error { return runKV(*args) })
		if err != nil || out != want {
			t.Errorf("warp kv %q: %q, %v (want %q)", *args, out, err, want)
		}
	}
	if err := runKV([]string{"scan", dir, "--limit", "x"}); !errors.Is(err, cli.ErrUsage) {
		t.Errorf("bad --limit after dir: %v (want a usage error)", err)
	}
}

// TestKVRepairLost: repair moves a file with a table's name that is no
// table to lost/ and says so; check then reports what lost/ holds.
func TestKVRepairLost(t *testing.T) {
	dir := makeKVStore(t)
	if err := os.WriteFile(filepath.Join(dir, "000099.sst"), []byte("not a table, not at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := captureStdout(t, func() error { return runKV([]string{"repair", "--yes", dir}) })
	if err != nil {
		t.Fatalf("warp kv repair --yes: %v", err)
	}
	if !strings.Contains(out, "moved to lost/:  1 files\n    000099.sst: ") {
		t.Errorf("warp kv repair printed\n%s\n(want 000099.sst moved to lost/)", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "lost", "000099.sst")); err != nil {
		t.Errorf("000099.sst not in lost/: %v", err)
	}
	out, err = captureStdout(t, func() error { return runKV([]string{"check", dir}) })
	if err != nil || !strings.Contains(out, "lost/ holds 1 files set aside by an earlier open or repair: 000099.sst") || !strings.Contains(out, "ok: ") {
		t.Errorf("warp kv check after repair: %q, %v", out, err)
	}
	if out, err := captureStdout(t, func() error { return runKV([]string{"get", dir, "c"}) }); err != nil || out != "3\n" {
		t.Errorf("warp kv get c after repair: %q, %v", out, err)
	}
}

// TestKVCheckShowsRecovery: check prints the torn log tail that Open
// ignored (zeros at the end of the log a crash interrupted), and still
// verifies the tables. The crash image is a copy of the store's files taken
// while a writer has it open.
func TestKVCheckShowsRecovery(t *testing.T) {
	src := makeKVStore(t)
	db, err := kv.Open(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set([]byte("d"), []byte("4"), kv.Sync); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "crashed")
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no log in the store: %v, %v", logs, err)
	}
	slices.Sort(logs)
	last := logs[len(logs)-1]
	f, err := os.OpenFile(last, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	before := snapshotDir(t, dir)
	out, err := captureStdout(t, func() error { return runKV([]string{"check", dir}) })
	if err != nil {
		t.Fatalf("warp kv check with a torn log tail: %v", err)
	}
	for _, want := range []string{"recovery: 1 torn log tails ignored", "  kv: corruption in " + filepath.Base(last), "tables verified"} {
		if !strings.Contains(out, want) {
			t.Errorf("warp kv check printed\n%s\n(want %q in it)", out, want)
		}
	}
	sameSnapshot(t, "warp kv check", before, snapshotDir(t, dir))
	if out, err := captureStdout(t, func() error { return runKV([]string{"get", dir, "d"}) }); err != nil || out != "4\n" {
		t.Errorf("warp kv get d from the crash image: %q, %v", out, err)
	}
}

// TestKVBenchThreadSweep: --threads 1,3 runs every workload at each client
// count on a fresh store and reports them in rows with a clients column.
func TestKVBenchThreadSweep(t *testing.T) {
	out, err := captureStdout(t, func() error {
		return runKVBenchCommand([]string{"--num", "2000", "--fs", "mem", "--progress", "off", "--threads", "1,3", "--workloads", "fillrandom,readrandom"})
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "clients") {
		t.Fatalf("no clients column:\n%s", out)
	}
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && (f[0] == "1" || f[0] == "3") && (f[1] == "fillrandom" || f[1] == "readrandom") {
			rows++
		}
	}
	if rows != 4+2 { // throughput rows for both counts, and the LSM rows of the fills
		t.Fatalf("%d rows, want 6:\n%s", rows, out)
	}
}

// TestKVBenchCompactors: --compactor cpu,gpu runs every workload on a fresh
// store with each compactor and reports them in rows with a compactor
// column; the gpu store counts its accelerated jobs.
func TestKVBenchCompactors(t *testing.T) {
	out, err := captureStdout(t, func() error {
		return runKVBenchCommand([]string{"--num", "30000", "--fs", "mem", "--progress", "off", "--memtable", "1", "--compactor", "cpu,gpu", "--workloads", "fillrandom,readrandom"})
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "compactor") || !strings.Contains(out, "accelerated jobs") {
		t.Fatalf("no compactor or accelerated-jobs column:\n%s", out)
	}
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && (f[0] == "cpu" || f[0] == "gpu") && (f[1] == "fillrandom" || f[1] == "readrandom") {
			rows++
		}
	}
	if rows != 4+2 {
		t.Fatalf("%d rows, want 6:\n%s", rows, out)
	}
}

// TestKVBenchStress: --cpu-stress runs every workload at each level with
// burners on every core (copies of this test binary: TestMain) and reports
// the level in a column.
func TestKVBenchStress(t *testing.T) {
	out, err := captureStdout(t, func() error {
		return runKVBenchCommand([]string{"--num", "20000", "--fs", "mem", "--progress", "off", "--cpu-stress", "0,30", "--workloads", "fillrandom"})
	})
	if err != nil {
		t.Fatal(err)
	}
	var levels []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[1] == "fillrandom" {
			levels = append(levels, f[0])
		}
	}
	if strings.Join(levels, ",") != "0,30,0,30" || !strings.Contains(out, "stress %") || !strings.Contains(out, "burner") {
		t.Fatalf("levels %v (want 0,30 in both tables), or no stress column or note:\n%s", levels, out)
	}
}
