package cli

import "flag"

// The exit codes of both programs, the diff(1) convention. A command's usage text says
// what "did not succeed" means for it.
const (
	// ExitOK: done; the tree is clean, the output up to date, the call succeeded.
	ExitOK = 0
	// ExitFailed: the command ran but did not succeed: findings, stale generated
	// output, a diff of a failing severity, a call whose outcome is not succeeded, an
	// operation the operator service refused (nothing to approve, ...).
	ExitFailed = 1
	// ExitTrouble: the command could not run: a usage error, or an I/O error.
	ExitTrouble = 2
)

// Parse parses args with fs, with the flags before, between or after the positional
// arguments ("approve 7 --reason x", "generate . -check"), and returns the positional
// arguments in order. Each time the flag package stops at a positional argument, that
// argument is taken and parsing resumes after it. A "--" makes only the argument after
// it positional, even if it starts with "-"; flags after that are parsed again. A lone
// "-" is positional (standard input, by convention). The error is fs.Parse's: an
// unknown flag, a bad value, or flag.ErrHelp for -h; fs has then already printed it
// and its usage, as fs.Parse does.
func Parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
