package hostcli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/toolgen/toolgen/internal/textsafe"
	"github.com/toolgen/toolgen/mcp/device"
)

// escapingWriter writes text with its control characters escaped (textsafe.Text), for
// logs that quote what other systems said.
type escapingWriter struct{ w io.Writer }

func (e escapingWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(e.w, textsafe.Text(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// deviceFlags are device's flags: it talks to a gateway, not to a store, and takes
// none of the common flags.
type deviceFlags struct {
	gateway, id, tokenFile string
}

func (f *deviceFlags) bind(fs *flag.FlagSet, _ string) {
	fs.StringVar(&f.gateway, "gateway", "", "the gateway's URL (toolrun serve --http), e.g. https://platform.example.com")
	fs.StringVar(&f.id, "id", "", "this device's id (devices/ID.yaml on the gateway)")
	fs.StringVar(&f.tokenFile, "token-file", "", "file holding this device's token (its SHA-256 is token_sha256 on the gateway)")
}

// runDevice is toolrun device: the device side of the device channel (mcp/device). It
// dials the gateway (`toolrun serve --http` accepts devices at device.ConnectPath),
// authenticates with the token read from --token-file, runs the local MCP server CMD on
// stdio for each connection and bridges it to the gateway, reconnecting with backoff
// until interrupted. It exits 1 when the gateway refuses the id or token (retrying
// cannot help), 0 when interrupted.
func runDevice(e *env, cmd string, args []string) int {
	var f deviceFlags
	fs := e.flagSet(cmd)
	f.bind(fs, cmd)
	// Not cli.Parse: every argument after the flags is the local server's command line,
	// its own flags included.
	if err := fs.Parse(args); err != nil {
		return ExitTrouble
	}
	command := fs.Args()
	switch {
	case f.gateway == "" || f.id == "" || f.tokenFile == "":
		return usageErr(e, cmd, "want --gateway URL, --id ID and --token-file F")
	case len(command) == 0:
		return usageErr(e, cmd, "want the local MCP server's command after --")
	}
	raw, err := os.ReadFile(f.tokenFile)
	if err != nil {
		return fail(e, cmd, err)
	}
	token := strings.TrimSpace(string(raw))
	if token == "" {
		return fail(e, cmd, fmt.Errorf("%s is empty", f.tokenFile))
	}
	// The device's log carries the gateway's and the local server's words.
	err = device.Run(e.ctx, device.RunOptions{Gateway: f.gateway, ID: f.id, Token: token, Command: command, Log: escapingWriter{e.stderr}})
	switch {
	case errors.Is(err, device.ErrRefused):
		fmt.Fprintf(e.stderr, "%s device: %s\n", e.name, textsafe.Text(err.Error()))
		return ExitFailed
	case err != nil && e.ctx.Err() == nil:
		return fail(e, cmd, err)
	}
	return ExitOK
}
