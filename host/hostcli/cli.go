package hostcli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/toolgen/toolgen/host"
	"github.com/toolgen/toolgen/internal/cli"
	"github.com/toolgen/toolgen/internal/textsafe"
	"github.com/toolgen/toolgen/runtime"
)

// The exit codes [Run] returns: the vocabulary toolgen's command line shares (package
// internal/cli), under the names this package has always exported.
const (
	// ExitOK: done (for call: the call succeeded).
	ExitOK = cli.ExitOK
	// ExitFailed: the call or the operation did not succeed (an outcome other than
	// succeeded, nothing to approve, a refused decision, a device the gateway refuses).
	ExitFailed = cli.ExitFailed
	// ExitTrouble: a usage or I/O error.
	ExitTrouble = cli.ExitTrouble
)

// Config is what a host program serves: its tools, and the builtins it opts into.
type Config struct {
	// Name is the program's name in usage and messages ("" is "toolrun").
	Name string
	// Tools and Builtins are host.Config's: the author's implementations, and the
	// builtins served besides them (host.AllBuiltins for every one).
	Tools    []runtime.Tool
	Builtins []string
	// Host, when set, adjusts each command's host configuration after the flags set it
	// and before the host is built (a logger, a tracer, test knobs).
	Host func(*host.Config)
}

// Main runs the program with os.Args and exits: SIGINT and SIGTERM end a serving
// command gracefully.
func Main(cfg Config) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, cfg, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `NAME hosts toolgen's pipeline: serve tools over MCP, run calls, recover, review.

Usage:
	NAME serve [--stdio | --http ADDR] [--protocol NAME] [--mode M] [--session S] [--hold D] [--no-servers]
	             (HTTP: /mcp, /metrics, /devices/connect, /events)
	             [--allowed-host H] [--max-conns N] [--max-conns-per-principal N]
	             [--read-header-timeout D] [--body-timeout D] [--write-timeout D] [--idle-timeout D]
	NAME call TOOL [JSON|-] [--session S] [--run R] [--step N] [--call-id C]
	             [--protocol NAME] [--mode M] [--hold D] [--lease D]
	NAME recover     (the calls of the acting principal's tenant)
	NAME uncertain
	NAME resolve ID --happened | --not-happened [--reason TEXT]
	NAME approvals
	NAME approve ID [--reason TEXT]
	NAME deny ID [--reason TEXT]
	NAME audit [--session S]
	NAME catalog [--force-epoch SERVER [--reason TEXT]]
	NAME device --gateway URL --id ID --token-file F -- CMD [ARGS...]
	NAME events --url http://ADDR [--session S] [--run R] [--tenant T] [--after ID] [--once] [--json]
	               [--token-file F]

Flags every command takes:
	--dir DIR        spec root: tools/, servers/, protocols/, policy.yaml (default ".")
	--db DSN         postgres://... or a SQLite file (default $TOOLRUN_DB, else DIR/.toolrun/toolrun.db)
	--workspace W    the directory the workspace and review tools are confined to (default
	                 $TOOLRUN_WORKSPACE, else none: they answer no_workspace); {tenant} and
	                 {run} segments give each
	                 tenant and run its own, as in /srv/ws/{tenant}. Never DIR nor the
	                 store's directory, and {tenant} is required when principals.yaml
	                 names several tenants
	--json           machine-readable output
	--principal ID   who acts (default: "agent" for serve and call, "operator" otherwise);
	                 with DIR/principals.yaml it must be declared there under local: (a
	                 token's principal acts only with --token-file), and its tenant is
	                 the one whose work the command sees and acts on
	--token-file F   a bearer token proving who acts, verified against principals.yaml
	--tenant T       the principal's tenant without principals.yaml (default "default")
	--scopes A,B     narrow the principal's scopes (default: all of them; without
	                 principals.yaml, every scope the served tools require)
	--log LEVEL      debug|info|warn|error, structured logs on stderr (default warn)
	--lease D        the lease of a call while it runs (default 30s)
	--sweep D        the mean interval of serve's recovery pass (default 12s)
	--retry-window D how long after an identical write settled a call that names no call
	                 id is still its retry, answered from the record (default 10m)

Exit status: 0 done, 1 the call or operation did not succeed, 2 usage or I/O error.
`

// env is one invocation's I/O.
type env struct {
	ctx            context.Context
	cfg            Config
	name           string
	stdin          io.Reader
	stdout, stderr io.Writer
}

func (e *env) usage() string { return strings.ReplaceAll(usage, "NAME", e.name) }

// Run runs the program with args (without the program name) and returns the exit code:
// [ExitOK], [ExitFailed] or [ExitTrouble].
func Run(ctx context.Context, cfg Config, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{ctx: ctx, cfg: cfg, name: cfg.Name, stdin: stdin, stdout: stdout, stderr: stderr}
	if e.name == "" {
		e.name = "toolrun"
	}
	if len(args) == 0 {
		fmt.Fprint(stderr, e.usage())
		return ExitTrouble
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, e.usage())
		return ExitOK
	}
	run, ok := commands[cmd]
	if !ok {
		fmt.Fprintf(stderr, "%s: unknown command %q\n\n%s", e.name, cmd, e.usage())
		return ExitTrouble
	}
	return run(e, cmd, rest)
}

var commands map[string]func(*env, string, []string) int

func init() {
	commands = map[string]func(*env, string, []string) int{
		"serve":     runServe,
		"call":      runCall,
		"recover":   runRecover,
		"uncertain": runUncertain,
		"resolve":   runResolve,
		"approvals": runApprovals,
		"approve":   runDecide,
		"deny":      runDecide,
		"audit":     runAudit,
		"catalog":   runCatalog,
		"device":    runDevice,
		"events":    runEvents,
	}
}

// flags is a command's flags struct: bind declares its flags on the command's flag set.
// A command's struct is declared next to the command; one that takes the flags every
// command takes embeds common.
type flags interface {
	bind(fs *flag.FlagSet, cmd string)
}

// flagSet is a new flag set of cmd: errors and the usage go to stderr.
func (e *env) flagSet(cmd string) *flag.FlagSet {
	fs := flag.NewFlagSet(e.name+" "+cmd, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() { fmt.Fprint(e.stderr, e.usage()) }
	return fs
}

// parse binds f to a new flag set of cmd and parses args into it, flags interleaved
// with positional arguments ("approve 7 --reason x"; cli.Parse); it returns the
// positional arguments.
func (e *env) parse(cmd string, f flags, args []string) ([]string, error) {
	fs := e.flagSet(cmd)
	f.bind(fs, cmd)
	return cli.Parse(fs, args)
}

// common are the flags of every command but device and events (which talk to a
// server, not to a store): recover, uncertain and approvals take them alone.
type common struct {
	dir, db, workspace, principal, tenant, scopes, logLevel, tokenFile string
	json                                                               bool
	lease, sweep, retryWindow                                          time.Duration
}

func (c *common) bind(fs *flag.FlagSet, cmd string) {
	fs.StringVar(&c.dir, "dir", ".", "spec root")
	fs.StringVar(&c.db, "db", os.Getenv("TOOLRUN_DB"), "store: postgres:// URL or SQLite file")
	fs.StringVar(&c.workspace, "workspace", os.Getenv("TOOLRUN_WORKSPACE"), "directory the workspace.* tools are confined to (default: the spec root)")
	fs.BoolVar(&c.json, "json", false, "machine-readable output")
	defPrincipal := "operator"
	if cmd == "serve" || cmd == "call" {
		defPrincipal = host.DefaultPrincipal
	}
	fs.StringVar(&c.principal, "principal", defPrincipal, "who acts")
	fs.StringVar(&c.tenant, "tenant", host.DefaultTenant, "the principal's tenant")
	fs.StringVar(&c.scopes, "scopes", "", "comma-separated scopes (narrows the principal's)")
	fs.StringVar(&c.logLevel, "log", "warn", "log level: debug|info|warn|error")
	fs.StringVar(&c.tokenFile, "token-file", "", "a bearer token proving who acts, verified against principals.yaml (instead of --principal)")
	fs.DurationVar(&c.lease, "lease", 0, "lease of a call while it runs (default 30s)")
	fs.DurationVar(&c.sweep, "sweep", 0, "mean interval of the recovery pass of serve (default 12s)")
	fs.DurationVar(&c.retryWindow, "retry-window", 0, "how long an identical write without a call id is its retry (default 10m)")
}

func (c *common) logger(stderr io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.logLevel)); err != nil {
		return nil, fmt.Errorf("--log: %w", err)
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl})), nil
}

// config is the host configuration the flags say, for a command that connects the
// upstream servers named in servers (nil: every one).
func (c *common) config(e *env, servers []string) (host.Config, error) {
	log, err := c.logger(e.stderr)
	if err != nil {
		return host.Config{}, err
	}
	hc := host.Config{
		Dir: c.dir, Store: c.db, Workspace: c.workspace, Principal: c.principal, Tenant: c.tenant,
		Tools: e.cfg.Tools, Builtins: e.cfg.Builtins, Servers: servers, Logger: log,
		Lease: c.lease, SweepInterval: c.sweep, RetryWindow: c.retryWindow, Scopes: c.scopeList(),
	}
	hc.Test.AfterStep = killAt()
	return hc, nil
}

// open builds the host for a command; adjust, when set, completes the configuration.
func (c *common) open(e *env, servers []string, adjust func(*host.Config)) (*host.Host, error) {
	hc, err := c.config(e, servers)
	if err != nil {
		return nil, err
	}
	if adjust != nil {
		adjust(&hc)
	}
	if e.cfg.Host != nil {
		e.cfg.Host(&hc)
	}
	return host.New(e.ctx, hc)
}

// resolver resolves actors: a host, or an operator service alone.
type resolver interface {
	Principal(id string) (runtime.Principal, error)
	VerifyToken(ctx context.Context, token string) (runtime.Principal, error)
	HasPrincipals() bool
}

// actor is who acts: the principal --token-file proves, or --principal (declared in
// principals.yaml when there is one), narrowed by --scopes.
func (c *common) actor(e *env, h resolver) (runtime.Principal, error) {
	var p runtime.Principal
	var err error
	if c.tokenFile != "" {
		raw, rerr := os.ReadFile(c.tokenFile)
		if rerr != nil {
			return p, rerr
		}
		if p, err = h.VerifyToken(e.ctx, strings.TrimSpace(string(raw))); err != nil {
			return p, fmt.Errorf("--token-file: %w", err)
		}
	} else if p, err = h.Principal(c.principal); err != nil {
		return p, fmt.Errorf("--principal %w", err)
	}
	if narrow := c.scopeList(); narrow != nil {
		p.Scopes = slices.DeleteFunc(slices.Clone(p.Scopes), func(s string) bool { return !slices.Contains(narrow, s) })
		if !h.HasPrincipals() {
			// Without principals.yaml the operator on its own machine names its scopes.
			p.Scopes = narrow
		}
	}
	if p.Scopes == nil {
		p.Scopes = []string{}
	}
	return p, nil
}

// scopeList is --scopes as a list; nil when the flag is not set.
func (c *common) scopeList() []string {
	if c.scopes == "" {
		return nil
	}
	narrow := []string{}
	for _, s := range strings.Split(c.scopes, ",") {
		if s = strings.TrimSpace(s); s != "" {
			narrow = append(narrow, s)
		}
	}
	return narrow
}

// openOperator opens the operator service alone and resolves the actor: the review
// commands, which work on a store even when the spec root's tools do not load.
func (c *common) openOperator(e *env) (*host.Operator, runtime.Principal, error) {
	hc, err := c.config(e, []string{})
	if err != nil {
		return nil, runtime.Principal{}, err
	}
	if e.cfg.Host != nil {
		e.cfg.Host(&hc)
	}
	op, err := host.OpenOperator(e.ctx, hc)
	if err != nil {
		return nil, runtime.Principal{}, err
	}
	p, err := c.actor(e, op)
	if err != nil {
		op.Close()
		return nil, p, err
	}
	return op, p, nil
}

func fail(e *env, cmd string, err error) int {
	fmt.Fprintf(e.stderr, "%s %s: %s\n", e.name, cmd, textsafe.Text(err.Error()))
	return ExitTrouble
}

func usageErr(e *env, cmd, msg string) int {
	fmt.Fprintf(e.stderr, "%s %s: %s\n\n%s", e.name, cmd, textsafe.Text(msg), e.usage())
	return ExitTrouble
}

// refused reports an operation the operator service refused (exit 1).
func refused(e *env, cmd string, err error) int {
	fmt.Fprintf(e.stderr, "%s %s: %s\n", e.name, cmd, textsafe.Text(err.Error()))
	return ExitFailed
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table prints rows under header, aligned. Every cell is escaped (textsafe.Field): a
// cell holds ids, names and details a caller or a remote system chose, and a newline,
// a carriage return or an escape sequence in one would forge or erase rows of the
// review queues and the audit view (issue 14, finding 9).
func table(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	line := func(cells []string) {
		out := make([]string, len(cells))
		for i, c := range cells {
			out[i] = textsafe.Field(c)
		}
		fmt.Fprintln(tw, strings.Join(out, "\t"))
	}
	line(header)
	for _, r := range rows {
		line(r)
	}
	return tw.Flush()
}

// KillAtEnv names the crash drill: with TOOLRUN_KILL_AT=STEP, a host program SIGKILLs
// its own process right after the named pipeline step ("watermark", "execute",
// "settle", ... as runtime.Config.AfterStep names them), leaving what a real crash
// leaves for recovery. It exists for drills and tests; never set it in production.
const KillAtEnv = "TOOLRUN_KILL_AT"

func killAt() func(string) {
	step := os.Getenv(KillAtEnv)
	if step == "" {
		return nil
	}
	return func(s string) {
		if s == step {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func parseID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("%q is not an invocation id (a positive number)", s)
	}
	return id, nil
}
