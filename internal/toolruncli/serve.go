package toolruncli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/toolgen/toolgen/internal/events"
	"github.com/toolgen/toolgen/internal/host"
	"github.com/toolgen/toolgen/internal/identity"
	"github.com/toolgen/toolgen/mcp/device"
	mcpserver "github.com/toolgen/toolgen/mcp/server"
)

// MCPPath is where toolrun serve --http serves MCP (Streamable HTTP).
const MCPPath = "/mcp"

// epochPoll is how often a serving process looks for forced epochs in the store.
const epochPoll = time.Second

// runServe is toolrun serve: the registry over MCP, on one stdio connection (--stdio)
// or over Streamable HTTP (--http ADDR). The HTTP server serves MCP at MCPPath and the
// pipeline's OpenTelemetry metrics at GET MetricsPath, in the Prometheus exposition
// format (see promMetrics), and the event stream at GET events.Path (internal/events).
// Over stdio there is no HTTP server, hence no metrics endpoint: the pipeline records
// no metrics there.
func runServe(e *env, cmd string, args []string) int {
	fs, c := newFlags(cmd, e)
	stdio := fs.Bool("stdio", false, "serve one MCP connection on stdin/stdout (no metrics endpoint)")
	addr := fs.String("http", "", "serve Streamable HTTP on ADDR: MCP at "+MCPPath+", Prometheus metrics at GET "+MetricsPath+", devices at "+device.ConnectPath+", events at GET "+events.Path)
	proto := fs.String("protocol", "", "protocol name (protocols/NAME.yaml)")
	mode := fs.String("mode", "", "serve only this mode of the protocol")
	session := fs.String("session", "", "session id of the stdio connection (default: a random id)")
	noServers := fs.Bool("no-servers", false, "do not connect the upstream servers of servers/*.yaml")
	if pos, err := parse(fs, args); err != nil || len(pos) > 0 {
		return usageErr(e, cmd, "takes no arguments besides flags")
	}
	if *stdio == (*addr != "") {
		return usageErr(e, cmd, "want exactly one of --stdio, --http ADDR")
	}
	log, err := c.logger(e.stderr)
	if err != nil {
		return usageErr(e, cmd, err.Error())
	}
	hopts := host.Options{Protocol: *proto, Mode: *mode}
	var metrics *promMetrics
	if !*stdio {
		if metrics, err = newPromMetrics(); err != nil {
			return fail(e, cmd, err)
		}
		defer metrics.Close(context.Background())
		hopts.Metrics = metrics.Pipeline
	}
	h, err := c.openWith(e, hopts)
	if err != nil {
		return fail(e, cmd, err)
	}
	defer h.Close()
	if !*noServers {
		if err := h.ConnectServers(e.ctx, e.stderr); err != nil {
			// Serve the rest: one unreachable upstream must not take every tool down.
			log.Error("upstream servers not connected", "err", err)
		}
	}
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	go h.Pipeline.KeepLeases(ctx)
	if err := watchForcedEpochs(ctx, h); err != nil {
		return fail(e, cmd, err)
	}
	principal := c.principalFor(h)
	var authn *httpAuth
	if !*stdio {
		if authn, err = newHTTPAuth(e, c, h, *addr); err != nil {
			return fail(e, cmd, err)
		}
	}
	opts := mcpserver.Options{Pipeline: h.Pipeline, Registry: h.Registry, Principal: principal,
		PrincipalOf: identity.PrincipalFrom, Workspace: h.Workspace, SessionID: *session, Logger: log}
	if h.Modes != nil {
		opts.Modes = h.Modes
	}
	srv, err := mcpserver.New(opts)
	if err != nil {
		return fail(e, cmd, err)
	}
	if *stdio {
		if err := srv.ServeStdio(ctx, e.stdin, e.stdout); err != nil {
			return fail(e, cmd, err)
		}
		return ExitOK
	}
	mux := serveMux(authn.protect(srv.HTTPHandler()), metrics.Handler)
	if authn != nil {
		mux.Handle("GET "+MetadataPath, authn.metadata())
		mux.Handle("GET "+MetadataPath+MCPPath, authn.metadata())
	}
	// The event stream reads the store, so it carries the events of every process on it.
	eopts := events.Options{Store: h.Store, Logger: log.With("component", "events")}
	if authn != nil {
		eopts.TenantOf = func(r *http.Request) (string, bool) {
			p, ok := identity.PrincipalFrom(auth.TokenInfoFromContext(r.Context()))
			return p.Tenant, ok
		}
	}
	evs, err := events.NewHandler(eopts)
	if err != nil {
		return fail(e, cmd, err)
	}
	defer evs.Close()
	mux.Handle("GET "+events.Path, authn.protect(evs))
	gw, err := device.NewGateway(device.Options{Devices: h.Tree.Devices, Registry: h.Registry, Store: h.Store,
		Tenant: c.tenant, Logger: log.With("component", "devices")})
	if err != nil {
		return fail(e, cmd, err)
	}
	defer gw.Close()
	mux.Handle(device.ConnectPath, gw)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fail(e, cmd, err)
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	hs.RegisterOnShutdown(evs.Close) // a stream never ends by itself; its client resumes elsewhere
	go func() {
		<-ctx.Done()
		shutdown, done := context.WithTimeout(context.Background(), 5*time.Second)
		defer done()
		hs.Shutdown(shutdown)
	}()
	fmt.Fprintf(e.stderr, "toolrun: serving MCP on http://%s%s, metrics on http://%s%s, devices at http://%s%s, events at http://%s%s\n",
		ln.Addr(), MCPPath, ln.Addr(), MetricsPath, ln.Addr(), device.ConnectPath, ln.Addr(), events.Path)
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fail(e, cmd, err)
	}
	return ExitOK
}

// serveMux is the HTTP server's mux: the MCP handler at MCPPath, the metrics handler
// at GET MetricsPath (HEAD too; other methods get 405).
func serveMux(mcp, metrics http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle(MCPPath, mcp)
	mux.Handle("GET "+MetricsPath, metrics)
	return mux
}

// watchForcedEpochs applies the forced epochs `toolrun catalog --force-epoch` records
// (in this or another process) to this process's running sessions: the catalog
// history is the channel, so the operator's command needs no connection to the server.
// Epochs recorded before the call are past: it reads the history once before it
// returns, then polls it in a goroutine until ctx ends.
func watchForcedEpochs(ctx context.Context, h *host.Host) error {
	history, err := h.Store.CatalogHistoryList(ctx, "")
	if err != nil {
		return fmt.Errorf("reading the catalog history: %w", err)
	}
	var seen int64
	for _, ch := range history {
		seen = max(seen, ch.ID)
	}
	go func() {
		tick := time.NewTicker(epochPoll)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			history, err := h.Store.CatalogHistoryList(ctx, "")
			if err != nil {
				if ctx.Err() == nil {
					h.Logger.Error("reading the catalog history for forced epochs", "err", err)
				}
				continue
			}
			for _, ch := range history {
				if ch.ID <= seen {
					continue
				}
				seen = ch.ID
				if ch.Change != ChangeForcedEpoch {
					continue
				}
				n := h.Registry.ForceEpochServer("mcp." + ch.ServerID + ".")
				h.Logger.Warn("forced epoch applied: running sessions re-pinned to the server's current tools",
					"server", ch.ServerID, "sessions", n, "history_id", ch.ID)
			}
		}
	}()
	return nil
}
