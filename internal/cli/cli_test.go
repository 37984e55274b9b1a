package cli

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestParseInterleaved: flags may follow, precede or sit between the
// positional arguments of any subcommand; after the first positional one a
// dash word that is no flag of the command stays an argument, and "--"
// ends the flags.
func TestParseInterleaved(t *testing.T) {
	for _, tc := range []struct {
		args []string
		n    int
		s    string
		b    bool
		pos  []string
	}{
		{[]string{"a", "--n", "3", "b"}, 3, "", false, []string{"a", "b"}},
		{[]string{"--n=3", "a", "-s", "x", "b", "-b"}, 3, "x", true, []string{"a", "b"}},
		{[]string{"a", "-5", "--n", "2"}, 2, "", false, []string{"a", "-5"}},
		{[]string{"a", "--", "--n", "2"}, 1, "", false, []string{"a", "--n", "2"}},
		{[]string{"--", "-a"}, 1, "", false, []string{"-a"}},
		{[]string{"-b=false", "a", "-s=y"}, 1, "y", false, []string{"a"}},
		{nil, 1, "", false, nil},
	} {
		fs := NewFlags("test", "")
		n := IntFlag(fs, "n", 1, 0, 10, "n")
		s := fs.String("s", "", "s")
		b := fs.Bool("b", false, "b")
		if err := Parse(fs, tc.args); err != nil {
			t.Errorf("parse(%q): %v", tc.args, err)
			continue
		}
		if *n != tc.n || *s != tc.s || *b != tc.b || !slices.Equal(fs.Args(), tc.pos) {
			t.Errorf("parse(%q): n=%d s=%q b=%v args %q (want %d %q %v %q)", tc.args, *n, *s, *b, fs.Args(), tc.n, tc.s, tc.b, tc.pos)
		}
	}
	fs := NewFlags("test", "")
	IntFlag(fs, "n", 1, 0, 10, "n")
	if err := Parse(fs, []string{"a", "--n", "11"}); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "0..10") {
		t.Errorf("--n 11 after a positional argument: %v (want a usage error naming 0..10)", err)
	}
}

// TestFlagHelpers: IntFlag and ChoiceFlag accept their range and choices,
// refuse the rest, and write them into the help text.
func TestFlagHelpers(t *testing.T) {
	fs := NewFlags("test", "")
	n := IntFlag(fs, "n", 5, -2, 7, "how many")
	c := ChoiceFlag(fs, "c", "b", []string{"a", "b"}, "which")
	for _, ok := range [][]string{{"--n", "-2"}, {"--n", "7"}, {"--n=0", "--c", "a"}} {
		if err := Parse(fs, ok); err != nil {
			t.Errorf("parse(%q): %v", ok, err)
		}
	}
	if *n != 0 || *c != "a" {
		t.Errorf("n=%d c=%q after --n=0 --c a", *n, *c)
	}
	for _, bad := range [][]string{{"--n", "-3"}, {"--n", "8"}, {"--n", "1.5"}, {"--n", "0x3"}, {"--n", ""}, {"--c", "c"}, {"--c", ""}} {
		if err := Parse(fs, bad); !errors.Is(err, ErrUsage) {
			t.Errorf("parse(%q): %v (want a usage error)", bad, err)
		}
	}
	var help strings.Builder
	fs.SetOutput(&help)
	fs.PrintDefaults()
	for _, want := range []string{"-n N", "how many (N: -2..7) (default 5)", "-c WORD", "which (WORD: a|b) (default b)"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("help text\n%s\nlacks %q", help.String(), want)
		}
	}
}

// TestCommandError: a usage error names the command it came from; InCommand
// keeps the innermost name; NoArgs refuses stray arguments.
func TestCommandError(t *testing.T) {
	fs := NewFlags("bench demo", "[--n N]")
	IntFlag(fs, "n", 1, 1, 3, "n")
	err := Parse(fs, []string{"--n", "4"})
	var ce *CommandError
	if !errors.As(err, &ce) || ce.Command != "warp bench demo" || !errors.Is(err, ErrUsage) {
		t.Fatalf("--n 4: %v, want a usage error of warp bench demo", err)
	}
	if got := InCommand("warp bench", err); !errors.As(got, &ce) || ce.Command != "warp bench demo" {
		t.Errorf("InCommand replaced the inner name: %v", got)
	}
	if got := InCommand("warp bench", errors.New("x")); !errors.As(got, &ce) || ce.Command != "warp bench" {
		t.Errorf("InCommand did not name the command: %v", got)
	}
	if InCommand("warp", nil) != nil {
		t.Error("InCommand(nil) is not nil")
	}
	fs = NewFlags("bench demo", "")
	if err := Parse(fs, []string{"extra"}); err != nil {
		t.Fatal(err)
	}
	if err := NoArgs(fs); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), `"extra"`) {
		t.Errorf("NoArgs: %v", err)
	}
}

func TestIntListFlag(t *testing.T) {
	fs := NewFlags("x", "")
	var got []int
	IntListVarFlag(fs, &got, "threads", []int{1}, 1, 8, "clients")
	if err := Parse(fs, []string{"--threads", "1,2, 4,8"}); err != nil || !slices.Equal(got, []int{1, 2, 4, 8}) {
		t.Fatalf("%v, %v", got, err)
	}
	for _, bad := range []string{"0", "1,9", "1,,2", "x", ""} {
		fs := NewFlags("x", "")
		IntListVarFlag(fs, &got, "threads", []int{1}, 1, 8, "clients")
		if err := Parse(fs, []string{"--threads", bad}); err == nil || !strings.Contains(err.Error(), "1..8") {
			t.Errorf("--threads %q: %v", bad, err)
		}
	}
}

func TestGiven(t *testing.T) {
	fs := NewFlags("x", "")
	fs.Int("a", 1, "")
	fs.Int("b", 2, "")
	if err := Parse(fs, []string{"--a", "1"}); err != nil {
		t.Fatal(err)
	}
	if !Given(fs, "a") || Given(fs, "b") || Given(fs, "c") {
		t.Fatal("Given: a set (even to its default), b and c not")
	}
}
