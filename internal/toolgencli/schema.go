package toolgencli

import (
	"errors"
	"fmt"
	"io"

	"github.com/toolgen/toolgen/internal/cli"
	"github.com/toolgen/toolgen/spec"
)

// runSchema is `toolgen schema KIND`: the JSON Schema of one kind of spec file. It
// takes no flags.
func runSchema(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		return usageError(errors.New("schema takes one file kind: tool, server, protocol or policy"), stderr)
	}
	b, ok := spec.FileSchema(args[0])
	if !ok {
		return usageError(fmt.Errorf("unknown file kind %q: use tool, server, protocol or policy", args[0]), stderr)
	}
	stdout.Write(b)
	return cli.ExitOK
}
