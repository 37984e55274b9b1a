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
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
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

func main() { os.Exit(run(os.Args[1:])) }

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
	var ce *commandError
	if errors.As(err, &ce) {
		name = ce.command
	}
	if errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "%s: interrupted\n", name)
		return 130
	}
	fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
	if errors.Is(err, errUsage) {
		return 2
	}
	return 1
}

// commandError names the (sub)command an error came from, such as "warp kv
// bench", for the line run prints; its message is err's.
type commandError struct {
	command string
	err     error
}

func (e *commandError) Error() string { return e.err.Error() }
func (e *commandError) Unwrap() error { return e.err }

// inCommand tags err with the command it came from unless it already names
// one (the innermost name wins).
func inCommand(command string, err error) error {
	var ce *commandError
	if err == nil || errors.As(err, &ce) {
		return err
	}
	return &commandError{command, err}
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

// parse parses a subcommand's flags, wherever they stand among its
// positional arguments (package flag alone stops at the first positional
// one, so "warp kv scan DIR --from K" would take --from as an argument), and
// leaves the positional ones in fs.Args(). After the first positional
// argument only fs's own flags (and -h) are flags, so that a key or value
// such as -5 stays an argument; everything after "--" is positional.
//
// A malformed flag is returned as a usage error naming the command (run
// prints it once; package flag's own message and usage dump are silenced),
// and -h prints fs.Usage and returns flag.ErrHelp.
func parse(fs *flag.FlagSet, args []string) error {
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	pos, err := parseInterleaved(fs, args)
	fs.SetOutput(out)
	fs.Usage = usage
	if err == nil {
		// Leave the positional arguments in fs.Args(), as fs.Parse would.
		err = fs.Parse(append([]string{"--"}, pos...))
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		fs.Usage()
		return err
	}
	return &commandError{fs.Name(), fmt.Errorf("%w: %v (warp %s -h lists the flags)", errUsage, err, strings.TrimPrefix(fs.Name(), "warp "))}
}

// parseInterleaved parses flags before, between and after the positional
// arguments and returns the positional ones (see parse).
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil // fs.Parse consumed "--"
		}
		args = rest
		for len(args) > 0 && !isOwnFlag(fs, args[0]) {
			if args[0] == "--" {
				return append(pos, args[1:]...), nil
			}
			pos, args = append(pos, args[0]), args[1:]
		}
		if len(args) == 0 {
			return pos, nil
		}
	}
}

// isOwnFlag reports whether arg is -name, --name or -name=value for a flag
// fs defines, or asks for help (-h, -help).
func isOwnFlag(fs *flag.FlagSet, arg string) bool {
	name, ok := strings.CutPrefix(arg, "-")
	if !ok {
		return false
	}
	name = strings.TrimPrefix(name, "-")
	name, _, _ = strings.Cut(name, "=")
	return name != "" && (fs.Lookup(name) != nil || name == "h" || name == "help")
}

// intFlag defines an int flag that accepts only whole numbers in
// [min, max]; its help text ends with the range. Anything else (-5 for a
// count, 0 for a size, "1e6", "ten") is a usage error naming the flag and
// the range, not a silent default.
func intFlag(fs *flag.FlagSet, name string, value, min, max int, usage string) *int {
	p := new(int)
	intVarFlag(fs, p, name, value, min, max, usage)
	return p
}

// intVarFlag is intFlag storing into p.
func intVarFlag(fs *flag.FlagSet, p *int, name string, value, min, max int, usage string) {
	if value < min || value > max {
		panic(fmt.Sprintf("warp: flag -%s: default %d outside %d..%d", name, value, min, max))
	}
	*p = value
	fs.Var(&rangedInt{p, min, max}, name, usage+rangeHelp(usage, "N", fmt.Sprintf("%d..%d", min, max)))
}

// choiceFlag defines a string flag that accepts only one of choices; its
// help text lists them.
func choiceFlag(fs *flag.FlagSet, name, value string, choices []string, usage string) *string {
	p := new(string)
	choiceVarFlag(fs, p, name, value, choices, usage)
	return p
}

// choiceVarFlag is choiceFlag storing into p.
func choiceVarFlag(fs *flag.FlagSet, p *string, name, value string, choices []string, usage string) {
	if !slices.Contains(choices, value) {
		panic(fmt.Sprintf("warp: flag -%s: default %q not among %v", name, value, choices))
	}
	*p = value
	fs.Var(&choice{p, choices}, name, usage+rangeHelp(usage, "WORD", strings.Join(choices, "|")))
}

// rangeHelp is what intVarFlag and choiceVarFlag append to a flag's help:
// " (`N`: 1..10)", where package flag shows the back-quoted word as the
// value's name ("-num N"); if the help already quotes a word, just the
// range.
func rangeHelp(usage, word, allowed string) string {
	if strings.Contains(usage, "`") {
		return " (" + allowed + ")"
	}
	return " (`" + word + "`: " + allowed + ")"
}

// rangedInt is the flag.Value of intFlag.
type rangedInt struct {
	p        *int
	min, max int
}

func (v *rangedInt) String() string {
	if v == nil || v.p == nil {
		return "0"
	}
	return strconv.Itoa(*v.p)
}

func (v *rangedInt) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, strconv.IntSize)
	if err != nil || int(n) < v.min || int(n) > v.max {
		return fmt.Errorf("want a whole number in %d..%d", v.min, v.max)
	}
	*v.p = int(n)
	return nil
}

// choice is the flag.Value of choiceFlag.
type choice struct {
	p       *string
	choices []string
}

func (v *choice) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return *v.p
}

func (v *choice) Set(s string) error {
	if !slices.Contains(v.choices, s) {
		return fmt.Errorf("want one of %s", strings.Join(v.choices, ", "))
	}
	*v.p = s
	return nil
}

// noArgs is a usage error if a command that takes no positional arguments
// got some (parse leaves them in fs.Args()).
func noArgs(fs *flag.FlagSet) error {
	if fs.NArg() == 0 {
		return nil
	}
	return &commandError{fs.Name(), fmt.Errorf("%w: unexpected argument %q (%s takes flags only; %s -h lists them)", errUsage, fs.Arg(0), fs.Name(), fs.Name())}
}

// joinNames lists map keys, sorted, for messages.
func joinNames[V any](m map[string]V) string { return strings.Join(sortedKeys(m), ", ") }
