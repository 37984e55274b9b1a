package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/warpkit/warpkit/internal/cli"
	"github.com/warpkit/warpkit/kv"
)

func init() {
	register(&command{name: "kv", summary: "the persistent kv store: bench, get, set, delete, scan, stats, compact, check, repair", run: runKV})
}

const kvUsage = `usage: warp kv <subcommand> [flags]

subcommands:
  bench [flags]                      db_bench workloads and YCSB A-F (warp kv bench -h)
  get <dir> <key>                    print a key's value
  set <dir> <key> <value>            write a key (synced)
  delete <dir> <key>                 delete a key (synced)
  scan <dir> [--from K] [--to K] [--limit N]   print keys and values in order
  stats <dir>                        levels, compactions, caches, write amplification
  compact <dir>                      compact the whole store
  check <dir>                        verify every table's checksums and invariants; show what recovery found
  repair <dir> --yes                 rebuild a damaged store from its tables and logs (run check first)

get, scan, stats and check open the store read-only: they change nothing, work on
a read-only mount, and run beside other readers (not beside a writer).
`

func runKV(args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(os.Stderr, kvUsage)
		if len(args) == 0 {
			return fmt.Errorf("%w: name a subcommand", cli.ErrUsage)
		}
		return nil
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "bench":
		return cli.InCommand("warp kv bench", runKVBenchCommand(rest))
	case "get", "set", "delete", "scan", "stats", "compact", "check":
		return cli.InCommand("warp kv "+sub, runKVTool(sub, rest))
	case "repair":
		return cli.InCommand("warp kv repair", runKVRepair(rest))
	}
	return fmt.Errorf("%w: unknown kv subcommand %q (have bench, get, set, delete, scan, stats, compact, check, repair; warp kv -h describes them)", cli.ErrUsage, sub)
}

// kvToolArgs are the positional arguments of each maintenance subcommand.
var kvToolArgs = map[string]string{
	"get": "<dir> <key>", "set": "<dir> <key> <value>", "delete": "<dir> <key>",
	"scan": "<dir> [--from K] [--to K] [--limit N]", "stats": "<dir>", "compact": "<dir>", "check": "<dir>",
}

// runKVTool runs the small maintenance subcommands on an existing store.
func runKVTool(sub string, args []string) error {
	fs := cli.NewFlags("kv "+sub, kvToolArgs[sub])
	var from, to *string
	var limit *int
	if sub == "scan" {
		from = fs.String("from", "", "first key")
		to = fs.String("to", "", "stop before this key")
		limit = cli.IntFlag(fs, "limit", 100, 0, 1_000_000_000, "print at most this many entries (0: all)")
	}
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	pos := fs.Args()
	want := map[string]int{"get": 2, "set": 3, "delete": 2, "scan": 1, "stats": 1, "compact": 1, "check": 1}[sub]
	if len(pos) != want {
		for _, a := range pos {
			if len(a) > 1 && a[0] == '-' && len(pos) > want {
				return fmt.Errorf("%w: flag provided but not defined: %s (warp kv %s -h lists the flags; -- before an argument that starts with -)", cli.ErrUsage, a, sub)
			}
		}
		return fmt.Errorf("%w: warp kv %s takes %s, got %s", cli.ErrUsage, sub, strings.Join(strings.Fields(kvToolArgs[sub])[:want], " "), quoteArgs(pos))
	}
	dir := pos[0]
	// The reading subcommands open the store read-only: they write, create
	// and remove nothing (so they work on a read-only mount), and take a
	// shared lock (so they run beside other readers, though not beside a
	// writer). A missing store is an error for every subcommand but set.
	readOnly := kvReadOnly[sub]
	opts := &kv.Options{ErrorIfNotExists: sub != "set", ReadOnly: readOnly}
	db, err := kv.Open(dir, opts)
	if err != nil {
		return withRepairHint(err, dir)
	}
	defer db.Close()
	switch sub {
	case "get":
		v, err := db.Get([]byte(pos[1]))
		if errors.Is(err, kv.ErrNotFound) {
			return fmt.Errorf("%q not found", pos[1])
		}
		if err != nil {
			return err
		}
		fmt.Printf("%s\n", v)
	case "set":
		return db.Set([]byte(pos[1]), []byte(pos[2]), kv.Sync)
	case "delete":
		return db.Delete([]byte(pos[1]), kv.Sync)
	case "scan":
		io := &kv.IterOptions{}
		if *from != "" {
			io.LowerBound = []byte(*from)
		}
		if *to != "" {
			io.UpperBound = []byte(*to)
		}
		it, err := db.NewIter(io)
		if err != nil {
			return err
		}
		n := 0
		for k, v := range it.All() {
			fmt.Printf("%s\t%s\n", printable(k), printable(v))
			if n++; *limit > 0 && n >= *limit {
				break
			}
		}
		if err := it.Error(); err != nil {
			it.Close()
			return err
		}
		return it.Close()
	case "stats":
		fmt.Print(db.Metrics())
	case "compact":
		return db.Compact(context.Background(), nil, nil)
	case "check":
		m := db.Metrics()
		printRecovery(m, dir)
		if err := db.CheckIntegrity(); err != nil {
			return withRepairHint(err, dir)
		}
		tables := 0
		for _, l := range m.Levels {
			tables += l.Tables
		}
		fmt.Printf("ok: %d tables verified\n", tables)
	}
	return nil
}

// runKVRepair runs warp kv repair: explicit, and only with --yes.
func runKVRepair(args []string) error {
	fs := cli.NewFlags("kv repair", "<dir> --yes")
	yes := fs.Bool("yes", false, "repair: really rebuild the store")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	pos := fs.Args()
	if len(pos) != 1 {
		return fmt.Errorf("%w: warp kv repair takes 1 argument (the store's directory), got %s", cli.ErrUsage, quoteArgs(pos))
	}
	dir := pos[0]
	if !*yes {
		lost := filepath.Join(dir, "lost") + string(filepath.Separator)
		return fmt.Errorf("%w: warp kv repair changes the store only with --yes. It\n"+
			"  rebuilds the store's manifest from the tables and logs present in %s (ignoring CURRENT and the manifests),\n"+
			"  moves the files it cannot read to %s,\n"+
			"  and may drop damaged log records (writes only they held are lost, and a value they deleted may reappear).\n"+
			"Run `warp kv check %s` first to see what is wrong",
			cli.ErrUsage, dir, lost, shellQuote(dir))
	}
	rep, err := kv.Repair(dir, nil)
	if err != nil {
		return err
	}
	printRepairReport(rep, dir)
	return nil
}

// printRepairReport prints what kv.Repair did: counts, and the files.
func printRepairReport(rep *kv.RepairReport, dir string) {
	fmt.Printf("repaired %s\n", dir)
	fmt.Printf("  tables read:     %d%s\n", len(rep.Tables), nameList(rep.Tables))
	fmt.Printf("  logs replayed:   %d%s\n", len(rep.Logs), nameList(rep.Logs))
	fmt.Printf("  log damage:      %d (damaged regions skipped, torn ends ignored)\n", len(rep.Damage))
	for i := range rep.Damage {
		fmt.Printf("    %v\n", &rep.Damage[i])
	}
	fmt.Printf("  moved to lost/:  %d files\n", len(rep.Lost))
	for _, l := range rep.Lost {
		fmt.Printf("    %s: %s\n", l.Name, l.Reason)
	}
	fmt.Printf("  rebuilt tables:  %d%s\n", len(rep.Outputs), nameList(rep.Outputs))
	fmt.Printf("  entries:         %d read, %d kept (overwritten and deleted ones dropped); last sequence number %d\n",
		rep.EntriesIn, rep.EntriesOut, rep.LastSeq)
	fmt.Printf("the next read-write open deletes the tables and logs the rebuilt store no longer lists; `warp kv check %s` verifies it\n", shellQuote(dir))
}

// nameList formats file names after a count: " (a, b, c)", at most 20 of
// them.
func nameList(names []string) string {
	const most = 20
	switch {
	case len(names) == 0:
		return ""
	case len(names) > most:
		return fmt.Sprintf(" (%s, and %d more)", strings.Join(names[:most], ", "), len(names)-most)
	}
	return " (" + strings.Join(names, ", ") + ")"
}

// quoteArgs lists arguments for a message: none, or 2: "a" "b".
func quoteArgs(args []string) string {
	if len(args) == 0 {
		return "none"
	}
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = strconv.Quote(a)
	}
	return fmt.Sprintf("%d: %s", len(args), strings.Join(q, " "))
}

// kvReadOnly names the subcommands that open the store read-only.
var kvReadOnly = map[string]bool{"get": true, "scan": true, "stats": true, "check": true}

// withRepairHint adds to a corruption error how to rebuild the store; the
// original error stays in the chain (errors.Is(err, kv.ErrCorruption) holds).
func withRepairHint(err error, dir string) error {
	if !errors.Is(err, kv.ErrCorruption) {
		return err
	}
	return fmt.Errorf("%w\nthe store is damaged; `warp kv repair --yes %s` rebuilds it from its tables and logs", err, shellQuote(dir))
}

// printRecovery prints what Open found and worked around: torn log tails
// it ignored, damaged log regions it skipped, files it could not explain,
// and files an earlier open or repair left in lost/.
func printRecovery(m *kv.Metrics, dir string) {
	r := m.Recovery
	if r.TornTails > 0 || r.SalvagedRecords > 0 || len(r.Damage) > 0 || len(r.Unexplained) > 0 {
		fmt.Printf("recovery: %d torn log tails ignored, %d damaged log regions skipped, %d unexplained files\n",
			r.TornTails, r.SalvagedRecords, len(r.Unexplained))
		for i := range r.Damage {
			fmt.Printf("  %v\n", &r.Damage[i])
		}
		for _, n := range r.Unexplained {
			fmt.Printf("  unexplained: %s (neither used nor provably obsolete; a read-write open keeps it in lost/)\n", n)
		}
	}
	if lost, err := os.ReadDir(filepath.Join(dir, "lost")); err == nil && len(lost) > 0 {
		names := make([]string, len(lost))
		for i, e := range lost {
			names[i] = e.Name()
		}
		fmt.Printf("lost/ holds %d files set aside by an earlier open or repair: %s\n", len(names), strings.Join(names, ", "))
	}
}

// shellQuote quotes a path for the shell when it needs it.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+,:@%=", r))
	}) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// printable quotes a byte string unless it is plain text.
func printable(b []byte) string {
	for _, c := range b {
		if c < 0x20 || c >= 0x7f {
			return fmt.Sprintf("%q", b)
		}
	}
	if strings.ContainsAny(string(b), "\t") {
		return fmt.Sprintf("%q", b)
	}
	return string(b)
}
