// Package cli holds the flag conventions of the warp command and its
// benchmarks (cmd/warp and the bench/... packages): flag sets that report
// errors to the caller instead of exiting, flags parsed wherever they stand
// among the positional arguments, whole-number and choice flags that refuse
// anything outside their range, and usage errors (ErrUsage, exit status 2)
// that name the (sub)command they came from (CommandError).
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// ErrUsage marks an error whose message is a usage complaint (warp exits
// with status 2).
var ErrUsage = errors.New("usage")

// CommandError names the (sub)command an error came from, such as "warp kv
// bench", for the line warp prints; its message is Err's.
type CommandError struct {
	Command string
	Err     error
}

func (e *CommandError) Error() string { return e.Err.Error() }
func (e *CommandError) Unwrap() error { return e.Err }

// InCommand tags err with the command it came from unless it already names
// one (the innermost name wins).
func InCommand(command string, err error) error {
	var ce *CommandError
	if err == nil || errors.As(err, &ce) {
		return err
	}
	return &CommandError{Command: command, Err: err}
}

// NewFlags returns a FlagSet for a subcommand that reports errors to the caller.
func NewFlags(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet("warp "+name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: warp %s %s\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// Parse parses a subcommand's flags, wherever they stand among its
// positional arguments (package flag alone stops at the first positional
// one, so "warp kv scan DIR --from K" would take --from as an argument), and
// leaves the positional ones in fs.Args(). After the first positional
// argument only fs's own flags (and -h) are flags, so that a key or value
// such as -5 stays an argument; everything after "--" is positional.
//
// A malformed flag is returned as a usage error naming the command (warp
// prints it once; package flag's own message and usage dump are silenced),
// and -h prints fs.Usage and returns flag.ErrHelp.
func Parse(fs *flag.FlagSet, args []string) error {
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
	return &CommandError{Command: fs.Name(), Err: fmt.Errorf("%w: %v (warp %s -h lists the flags)", ErrUsage, err, strings.TrimPrefix(fs.Name(), "warp "))}
}

// parseInterleaved parses flags before, between and after the positional
// arguments and returns the positional ones (see Parse).
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

// Given reports whether the command line set flag name (after Parse), for
// a default that depends on other flags.
func Given(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// IntFlag defines an int flag that accepts only whole numbers in
// [min, max]; its help text ends with the range. Anything else (-5 for a
// count, 0 for a size, "1e6", "ten") is a usage error naming the flag and
// the range, not a silent default.
func IntFlag(fs *flag.FlagSet, name string, value, min, max int, usage string) *int {
	p := new(int)
	IntVarFlag(fs, p, name, value, min, max, usage)
	return p
}

// IntVarFlag is IntFlag storing into p.
func IntVarFlag(fs *flag.FlagSet, p *int, name string, value, min, max int, usage string) {
	if value < min || value > max {
		panic(fmt.Sprintf("warp: flag -%s: default %d outside %d..%d", name, value, min, max))
	}
	*p = value
	fs.Var(&rangedInt{p, min, max}, name, usage+rangeHelp(usage, "N", fmt.Sprintf("%d..%d", min, max)))
}

// IntListVarFlag defines a flag of comma-separated whole numbers, each in
// [min, max] ("1,2,4,8": a sweep), storing them into p; value is the
// default list.
func IntListVarFlag(fs *flag.FlagSet, p *[]int, name string, value []int, min, max int, usage string) {
	for _, v := range value {
		if v < min || v > max {
			panic(fmt.Sprintf("warp: flag -%s: default %d outside %d..%d", name, v, min, max))
		}
	}
	*p = slices.Clone(value)
	fs.Var(&rangedInts{p, min, max}, name, usage+rangeHelp(usage, "N,...", fmt.Sprintf("each %d..%d", min, max)))
}

// rangedInts is the flag.Value of IntListVarFlag.
type rangedInts struct {
	p        *[]int
	min, max int
}

func (v *rangedInts) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	parts := make([]string, len(*v.p))
	for i, n := range *v.p {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}

func (v *rangedInts) Set(s string) error {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, strconv.IntSize)
		if err != nil || int(n) < v.min || int(n) > v.max {
			return fmt.Errorf("want whole numbers in %d..%d, separated by commas", v.min, v.max)
		}
		out = append(out, int(n))
	}
	*v.p = out
	return nil
}

// ChoiceFlag defines a string flag that accepts only one of choices; its
// help text lists them.
func ChoiceFlag(fs *flag.FlagSet, name, value string, choices []string, usage string) *string {
	p := new(string)
	ChoiceVarFlag(fs, p, name, value, choices, usage)
	return p
}

// ChoiceVarFlag is ChoiceFlag storing into p.
func ChoiceVarFlag(fs *flag.FlagSet, p *string, name, value string, choices []string, usage string) {
	if !slices.Contains(choices, value) {
		panic(fmt.Sprintf("warp: flag -%s: default %q not among %v", name, value, choices))
	}
	*p = value
	fs.Var(&choice{p, choices}, name, usage+rangeHelp(usage, "WORD", strings.Join(choices, "|")))
}

// ChoiceListVarFlag defines a flag taking a comma-separated list of
// distinct choices (at least one), storing it into p.
func ChoiceListVarFlag(fs *flag.FlagSet, p *[]string, name string, value []string, choices []string, usage string) {
	for _, v := range value {
		if !slices.Contains(choices, v) {
			panic(fmt.Sprintf("warp: flag -%s: default %q not among %v", name, v, choices))
		}
	}
	*p = value
	fs.Var(&choiceList{p, choices}, name, usage+rangeHelp(usage, "LIST", "a comma-separated list of "+strings.Join(choices, ", ")))
}

// choiceList is the flag.Value of ChoiceListVarFlag.
type choiceList struct {
	p       *[]string
	choices []string
}

func (v *choiceList) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return strings.Join(*v.p, ",")
}

func (v *choiceList) Set(s string) error {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if !slices.Contains(v.choices, x) {
			return fmt.Errorf("%q is not one of %s", x, strings.Join(v.choices, ", "))
		}
		if slices.Contains(out, x) {
			return fmt.Errorf("%q twice", x)
		}
		out = append(out, x)
	}
	*v.p = out
	return nil
}

// rangeHelp is what IntVarFlag and ChoiceVarFlag append to a flag's help:
// " (`N`: 1..10)", where package flag shows the back-quoted word as the
// value's name ("-num N"); if the help already quotes a word, just the
// range.
func rangeHelp(usage, word, allowed string) string {
	if strings.Contains(usage, "`") {
		return " (" + allowed + ")"
	}
	return " (`" + word + "`: " + allowed + ")"
}

// rangedInt is the flag.Value of IntFlag.
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

// choice is the flag.Value of ChoiceFlag.
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

// NoArgs is a usage error if a command that takes no positional arguments
// got some (Parse leaves them in fs.Args()).
func NoArgs(fs *flag.FlagSet) error {
	if fs.NArg() == 0 {
		return nil
	}
	return &CommandError{Command: fs.Name(), Err: fmt.Errorf("%w: unexpected argument %q (%s takes flags only; %s -h lists them)", ErrUsage, fs.Arg(0), fs.Name(), fs.Name())}
}
