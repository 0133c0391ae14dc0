package toolgencli

import (
	"flag"
	"io"

	"github.com/toolgen/toolgen/spec/diag"
)

// checkFlags are check's flags: how findings are printed.
type checkFlags struct {
	output
}

func (f *checkFlags) bind(fs *flag.FlagSet) { f.output.bind(fs) }

// runCheck is `toolgen check [-format F] [-snippets] [DIR]`: load DIR and report its
// findings.
func runCheck(args []string, stdout, stderr io.Writer) int {
	var f checkFlags
	fs := newFlagSet("check", stderr)
	f.bind(fs)
	dir, err := parseDir(fs, args)
	if err != nil {
		return usageError(err, stderr)
	}
	if _, err := diag.ParseFormat(f.format); err != nil {
		return usageError(err, stderr)
	}
	_, code, _ := load(dir, newPathPrinter(), f.output, stdout, stderr)
	return code
}
