package hostcli

import (
	"flag"
	"fmt"
	"net"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/toolgen/toolgen/host"
)

// serveFlags are serve's flags.
type serveFlags struct {
	common
	stdio, noServers           bool
	addr, proto, mode, session string
	cpuprofile                 string
	hold                       time.Duration
	http                       host.HTTPConfig
}

func (f *serveFlags) bind(fs *flag.FlagSet, cmd string) {
	f.common.bind(fs, cmd)
	fs.BoolVar(&f.stdio, "stdio", false, "serve one MCP connection on stdin/stdout")
	fs.StringVar(&f.addr, "http", "", "serve Streamable HTTP on ADDR: MCP at "+host.MCPPath+", Prometheus metrics at GET "+host.MetricsPath+
		", devices at "+host.DevicesPath+", events at GET "+host.EventsPath+", the reviewer's console at "+host.ConsolePath+"/")
	fs.StringVar(&f.proto, "protocol", "", "protocol name (protocols/NAME.yaml)")
	fs.StringVar(&f.mode, "mode", "", "serve only this mode of the protocol")
	fs.StringVar(&f.session, "session", "", "session id of the stdio connection (default: a random id)")
	fs.BoolVar(&f.noServers, "no-servers", false, "do not connect the upstream servers of servers/*.yaml")
	fs.StringVar(&f.cpuprofile, "cpuprofile", "", "write a CPU profile of this process to FILE until serve stops (go tool pprof FILE)")
	fs.DurationVar(&f.hold, "hold", 0, "how long a call held for approval waits before it answers approval_pending (default 5m)")
	hc := &f.http
	fs.Func("allowed-host", "a host name (host:port for one port, *.domain for its subdomains) clients reach --http by, besides loopback names and IP literals; repeatable, or comma-separated", func(v string) error {
		for _, a := range strings.Split(v, ",") {
			if a = strings.TrimSpace(a); a != "" {
				if err := host.CheckAllowedHost(a); err != nil {
					return err
				}
				hc.AllowedHosts = append(hc.AllowedHosts, a)
			}
		}
		return nil
	})
	fs.IntVar(&hc.MaxConnections, "max-conns", 0, fmt.Sprintf("connections --http holds at once; more are answered 503 (default %d; -1: no cap)", host.DefaultMaxConnections))
	fs.IntVar(&hc.MaxConnectionsPerPrincipal, "max-conns-per-principal", 0, fmt.Sprintf("requests one principal has in flight at once; more are answered 429 (default %d; -1: no cap)", host.DefaultMaxConnectionsPerPrincipal))
	fs.DurationVar(&hc.ReadHeaderTimeout, "read-header-timeout", 0, fmt.Sprintf("time to read a request's header (default %s)", host.DefaultReadHeaderTimeout))
	fs.DurationVar(&hc.BodyTimeout, "body-timeout", 0, fmt.Sprintf("time to read a request's body (default %s)", host.DefaultBodyTimeout))
	fs.DurationVar(&hc.WriteTimeout, "write-timeout", 0, fmt.Sprintf("time each write of a response may wait for the client (default %s)", host.DefaultWriteTimeout))
	fs.DurationVar(&hc.IdleTimeout, "idle-timeout", 0, fmt.Sprintf("time an idle keep-alive connection is kept (default %s)", host.DefaultIdleTimeout))
}

// runServe is serve: the registry over MCP, on one stdio connection (--stdio) or over
// Streamable HTTP (--http ADDR: MCP at host.MCPPath, metrics, devices and the event
// stream beside it; see host.Handler). Either way the host maintains itself while it
// serves: leases renewed, the periodic recovery pass, forced epochs applied.
func runServe(e *env, cmd string, args []string) int {
	var f serveFlags
	if pos, err := e.parse(cmd, &f, args); err != nil || len(pos) > 0 {
		return usageErr(e, cmd, "takes no arguments besides flags")
	}
	if f.stdio == (f.addr != "") {
		return usageErr(e, cmd, "want exactly one of --stdio, --http ADDR")
	}
	if f.cpuprofile != "" {
		stop, err := startCPUProfile(f.cpuprofile)
		if err != nil {
			return fail(e, cmd, err)
		}
		defer func() {
			if err := stop(); err != nil {
				fmt.Fprintf(e.stderr, "%s: --cpuprofile: %v\n", e.name, err)
			}
		}()
	}
	var servers []string
	if f.noServers {
		servers = []string{}
	}
	h, err := f.open(e, servers, func(hc *host.Config) {
		hc.Protocol, hc.Mode, hc.Session, hc.ApprovalHold = f.proto, f.mode, f.session, f.hold
		hc.HTTP = f.http
	})
	if err != nil {
		return fail(e, cmd, err)
	}
	defer h.Close()
	if _, err := f.actor(e, h); err != nil { // the caller of stdio, and of HTTP without principals.yaml
		return fail(e, cmd, err)
	}
	if f.stdio {
		if err := h.ServeStdio(e.ctx, e.stdin, e.stdout); err != nil {
			return fail(e, cmd, err)
		}
		return ExitOK
	}
	if !h.HasPrincipals() && !loopback(f.addr) {
		return fail(e, cmd, fmt.Errorf("--http %s: without principals.yaml anyone who reaches the port would act as %q; serve on a loopback address, or declare the principals (ID-1)", f.addr, f.principal))
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fail(e, cmd, err)
	}
	a := ln.Addr()
	fmt.Fprintf(e.stderr, "%s: "+servingMCPOn+"%s%s, metrics on http://%s%s, devices at http://%s%s, events at http://%s%s, the console at http://%s%s/\n",
		e.name, a, host.MCPPath, a, host.MetricsPath, a, host.DevicesPath, a, host.EventsPath, a, host.ConsolePath)
	if err := h.Serve(e.ctx, ln); err != nil {
		return fail(e, cmd, err)
	}
	return ExitOK
}

// startCPUProfile starts the CPU profile of serve's --cpuprofile: from the start to the
// end of serve, shutdown included, so a profile of a host under load needs no build of
// its own (issue 20: profile first). The file is written when serve returns (SIGINT
// and SIGTERM stop serve, so they write it; SIGKILL loses it) and is the operator's:
// created 0600, replaced if it exists.
func startCPUProfile(path string) (stop func() error, err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile %s: %w", path, err)
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

// loopback reports whether a listen address can only be reached from this machine.
func loopback(addr string) bool {
	hostname, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if hostname == "localhost" {
		return true
	}
	ip := net.ParseIP(hostname)
	return ip != nil && ip.IsLoopback()
}

// servingMCPOn starts what `serve --http` says once it listens, before the address.
const servingMCPOn = "serving MCP on http://"

// ServingAddr finds, in what `serve --http` wrote to standard error, the address it
// listens on (its line "NAME: serving MCP on http://ADDR/mcp, ..."): how a caller that
// gave it port 0 learns the port the kernel chose. ok is false until the line is there.
func ServingAddr(stderr string) (addr string, ok bool) {
	_, rest, ok := strings.Cut(stderr, servingMCPOn)
	if !ok {
		return "", false
	}
	addr, _, ok = strings.Cut(rest, host.MCPPath+",")
	return addr, ok
}
