package cli

import (
	"bytes"
	"errors"
	"flag"
	"slices"
	"strings"
	"testing"
)

type parsed struct {
	pos    []string
	reason string
	force  bool
}

func parseArgs(t *testing.T, args ...string) (parsed, string, error) {
	t.Helper()
	var p parsed
	var out bytes.Buffer
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(&out)
	fs.StringVar(&p.reason, "reason", "", "why")
	fs.BoolVar(&p.force, "force", false, "force")
	pos, err := Parse(fs, args)
	p.pos = pos
	return p, out.String(), err
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		pos    []string
		reason string
		force  bool
	}{
		{name: "nothing", args: nil, pos: nil},
		{name: "flags only", args: []string{"--reason", "x", "-force"}, reason: "x", force: true},
		{name: "positionals only", args: []string{"a", "b"}, pos: []string{"a", "b"}},
		{name: "flag before positional", args: []string{"--reason=x", "7"}, pos: []string{"7"}, reason: "x"},
		{name: "flag after positional", args: []string{"7", "--reason", "x"}, pos: []string{"7"}, reason: "x"},
		{name: "flags between positionals", args: []string{"a", "-force", "b", "-reason", "y", "c"},
			pos: []string{"a", "b", "c"}, reason: "y", force: true},
		{name: "the last of a repeated flag wins", args: []string{"-reason", "x", "a", "-reason", "y"}, pos: []string{"a"}, reason: "y"},
		{name: "a lone dash is positional", args: []string{"tool", "-", "-force"}, pos: []string{"tool", "-"}, force: true},
		{name: "-- makes the next argument positional", args: []string{"--", "-force"}, pos: []string{"-force"}},
		{name: "flags after the argument after -- are parsed", args: []string{"a", "--", "-b", "-force"},
			pos: []string{"a", "-b"}, force: true},
		{name: "a trailing -- is dropped", args: []string{"a", "--"}, pos: []string{"a"}},
		{name: "a value that looks like a flag", args: []string{"-reason", "-force", "a"}, pos: []string{"a"}, reason: "-force"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, out, err := parseArgs(t, tc.args...)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.args, err)
			}
			if !slices.Equal(p.pos, tc.pos) || p.reason != tc.reason || p.force != tc.force {
				t.Errorf("Parse(%q) = %q, reason %q, force %v; want %q, %q, %v", tc.args, p.pos, p.reason, p.force, tc.pos, tc.reason, tc.force)
			}
			if out != "" {
				t.Errorf("Parse(%q) printed %q", tc.args, out)
			}
		})
	}
}

func TestParse_Errors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{name: "unknown flag", args: []string{"-nope"}, want: "flag provided but not defined: -nope"},
		{name: "unknown flag after a positional", args: []string{"a", "--nope"}, want: "flag provided but not defined: -nope"},
		{name: "unknown flag after the argument after --", args: []string{"--", "-a", "-nope"}, want: "flag provided but not defined: -nope"},
		{name: "missing value", args: []string{"a", "-reason"}, want: "flag needs an argument: -reason"},
		{name: "bad value", args: []string{"-force=maybe"}, want: `invalid boolean value "maybe" for -force`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, out, err := parseArgs(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse(%q) = %v; want an error with %q", tc.args, err, tc.want)
			}
			if p.pos != nil {
				t.Errorf("Parse(%q) returned positionals %q with its error", tc.args, p.pos)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("Parse(%q) printed %q; want the error, as fs.Parse prints it", tc.args, out)
			}
		})
	}
	if _, _, err := parseArgs(t, "a", "-h"); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("Parse(a -h) = %v; want flag.ErrHelp", err)
	}
}

// The vocabulary is the diff(1) convention both programs document in their usage.
func TestExitCodes(t *testing.T) {
	if ExitOK != 0 || ExitFailed != 1 || ExitTrouble != 2 {
		t.Fatalf("exit codes %d %d %d; the usage texts say 0, 1, 2", ExitOK, ExitFailed, ExitTrouble)
	}
}
