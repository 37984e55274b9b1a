// Command warp is warpkit's command-line tool.
//
//	warp devices [--selftest] [--json]   list CUDA devices; run the device self-test
//	warp tour [--backend B]              show each structure working, and how fast
//	warp bench <structure> [flags]       reproduce a paper's experiments (warp bench -h)
//	warp kv <bench|get|set|...> [flags]  the kv store: db_bench and YCSB, and a small shell (warp kv -h)
//
// Each structure adds its own tour part (tour_*.go) and benchmark (bench_*.go)
// by registering them in an init function.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
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

// errUsage marks an error whose message is a usage complaint (exit status 2).
var errUsage = errors.New("usage")

func usage() {
	fmt.Fprintln(os.Stderr, "usage: warp <command> [flags]\n\ncommands:")
	for _, n := range sortedKeys(commands) {
		fmt.Fprintf(os.Stderr, "  %-10s %s\n", n, commands[n].summary)
	}
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage()
		if len(os.Args) < 2 {
			os.Exit(2)
		}
		return
	}
	c, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "warp: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if err := c.run(os.Args[2:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintf(os.Stderr, "warp %s: %v\n", c.name, err)
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// newFlags returns a FlagSet for a subcommand that reports errors to the caller.
func newFlags(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet("warp "+name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: warp %s %s\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses flags, turning flag errors into usage errors.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return nil
}

// joinNames lists map keys, sorted, for messages.
func joinNames[V any](m map[string]V) string { return strings.Join(sortedKeys(m), ", ") }
