package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/warpkit/warpkit/kv"
)

func init() {
	register(&command{name: "kv", summary: "the persistent kv store: bench, get, set, delete, scan, stats, compact, check", run: runKV})
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
  check <dir>                        verify every table's checksums and invariants
`

func runKV(args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(os.Stderr, kvUsage)
		if len(args) == 0 {
			return fmt.Errorf("%w: name a subcommand", errUsage)
		}
		return nil
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "bench":
		return runKVBenchCommand(rest)
	case "get", "set", "delete", "scan", "stats", "compact", "check":
		return runKVTool(sub, rest)
	}
	return fmt.Errorf("%w: unknown kv subcommand %q", errUsage, sub)
}

// runKVTool runs the small maintenance subcommands on an existing store.
func runKVTool(sub string, args []string) error {
	fs := newFlags("kv "+sub, "<dir> ...")
	from := fs.String("from", "", "scan: first key")
	to := fs.String("to", "", "scan: stop before this key")
	limit := fs.Int("limit", 100, "scan: print at most this many entries (0: all)")
	if err := parse(fs, args); err != nil {
		return err
	}
	want := map[string]int{"get": 2, "set": 3, "delete": 2, "scan": 1, "stats": 1, "compact": 1, "check": 1}[sub]
	if fs.NArg() != want {
		return fmt.Errorf("%w: warp kv %s takes %d argument(s)", errUsage, sub, want)
	}
	dir := fs.Arg(0)
	opts := &kv.Options{ErrorIfNotExists: sub != "set"}
	db, err := kv.Open(dir, opts)
	if err != nil {
		return err
	}
	defer db.Close()
	switch sub {
	case "get":
		v, err := db.Get([]byte(fs.Arg(1)))
		if errors.Is(err, kv.ErrNotFound) {
			return fmt.Errorf("%q not found", fs.Arg(1))
		}
		if err != nil {
			return err
		}
		fmt.Printf("%s\n", v)
	case "set":
		return db.Set([]byte(fs.Arg(1)), []byte(fs.Arg(2)), kv.Sync)
	case "delete":
		return db.Delete([]byte(fs.Arg(1)), kv.Sync)
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
		return db.Compact(nil, nil)
	case "check":
		if err := db.CheckIntegrity(); err != nil {
			return err
		}
		m := db.Metrics()
		tables := 0
		for _, l := range m.Levels {
			tables += l.Tables
		}
		fmt.Printf("ok: %d tables verified\n", tables)
	}
	return nil
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
