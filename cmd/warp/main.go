// Command warp is warpkit's command-line tool.
//
//	warp devices [--selftest] [--json]   list CUDA devices; run the device self-test
//	warp tour [--backend B]              show each structure working, and how fast
//	warp bench <structure> [flags]       reproduce a paper's experiments (warp bench -h)
//	warp kv <bench|get|set|...> [flags]  the kv store: db_bench and YCSB, and a small shell (warp kv -h)
//
// Each structure adds its own tour part (tour_*.go) by registering it in an
// init function. The benchmarks live in the packages under bench/ (bench/hash,
// bench/lsm, bench/btree, bench/prim, bench/latency), each with a Run entry
// point; warp bench only dispatches to them (bench.go). warp kv bench, also
// reachable as warp bench kv, is bench_kv.go.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/warpkit/warpkit/internal/cli"
	"github.com/warpkit/warpkit/internal/stress"
)

// command is a subcommand of warp.
type command struct {
	name    string
	summary string
	run     func(args []string) error
}

var commands = map[string]*command{}

func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("warp: command registered twice: " + c.name)
	}
	commands[c.name] = c
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: warp <command> [flags]\n\ncommands:")
	for _, n := range sortedKeys(commands) {
		fmt.Fprintf(os.Stderr, "  %-10s %s\n", n, commands[n].summary)
	}
}

func main() {
	stress.MaybeBurn() // --cpu-stress runs copies of warp as CPU burners
	os.Exit(run(os.Args[1:]))
}

// run runs warp with args (os.Args[1:]) and returns the exit status: 0, 1
// for a failure, 2 for a usage error, 130 for an interrupt. It prints each
// error once, as one "warp <command>: <message>" line on standard error
// (the flag package's own complaint and usage dump are silenced: see parse).
func run(args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage()
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "warp: unknown command %q\n", args[0])
		usage()
		return 2
	}
	err := c.run(args[1:])
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	}
	name := "warp " + c.name
	var ce *cli.CommandError
	if errors.As(err, &ce) {
		name = ce.Command
	}
	if errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "%s: interrupted\n", name)
		return 130
	}
	fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
	if errors.Is(err, cli.ErrUsage) {
		return 2
	}
	return 1
}

// joinNames lists map keys, sorted, for messages.
func joinNames[V any](m map[string]V) string { return strings.Join(sortedKeys(m), ", ") }
