package host

import (
	"context"
	"io"

	mcpserver "github.com/toolgen/toolgen/mcp/server"
)

// ServeStdio serves one MCP connection on in and out (a process's stdin and stdout, as
// an MCP client such as Claude Code starts it) until the client closes it or ctx is
// done, running the host's maintenance meanwhile. The caller is Config.Principal; the
// session is Config.Session unless the client names one in _meta.
func (h *Host) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	principal, err := h.Principal("")
	if err != nil {
		return err
	}
	// Options.Sessions is left to default to the pipeline's store, h.st: so a session the
	// server minted is written, owner and pins, in one write when it is first echoed
	// (mcp/server, Registry.Mint).
	opts := mcpserver.Options{Pipeline: h.pipe, Registry: h.reg, Principal: principal, CallIDSecret: h.callIDSecret,
		WorkspaceFor: h.workspaces.For, SessionID: h.cfg.Session, Logger: h.log,
		MaxCachedSessions: h.cfg.MaxCachedSessions}
	if h.modes != nil {
		opts.Modes = h.modes
	}
	srv, err := mcpserver.New(opts)
	if err != nil {
		return err
	}
	if err := h.Start(ctx); err != nil {
		return err
	}
	return srv.ServeStdio(ctx, in, out)
}
