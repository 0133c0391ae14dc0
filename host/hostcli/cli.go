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
	"unicode/utf8"

	"github.com/toolgen/toolgen/host"
	"github.com/toolgen/toolgen/internal/textsafe"
	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

// Exit codes: 0 done (for call: the call succeeded), 1 the call or the operation did not
// succeed (an outcome other than succeeded, nothing to approve, ...), 2 usage or I/O.
const (
	ExitOK      = 0
	ExitFailed  = 1
	ExitTrouble = 2
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

// Run runs the program with args (without the program name) and returns the exit code.
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

// common are the flags of every command.
type common struct {
	dir, db, workspace, principal, tenant, scopes, logLevel, tokenFile string
	json                                                               bool
	lease, sweep, retryWindow                                          time.Duration
}

func newFlags(cmd string, e *env) (*flag.FlagSet, *common) {
	fs := flag.NewFlagSet(e.name+" "+cmd, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	c := &common{}
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
	fs.Usage = func() { fmt.Fprint(e.stderr, e.usage()) }
	return fs, c
}

// parse parses flags interleaved with positional arguments ("approve 7 --reason x").
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
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

func runCall(e *env, cmd string, args []string) int {
	fs, c := newFlags(cmd, e)
	session := fs.String("session", "", `session id (default "cli", a session that pins no catalog: every call sees the current one)`)
	run := fs.String("run", "", "run id (default: the session id)")
	step := fs.Int("step", 0, "step number")
	callID := fs.String("call-id", "", "call id (default: derived from the tool and its arguments)")
	hold := fs.Duration("hold", 0, "how long a call held for approval waits (default 5m)")
	proto := fs.String("protocol", "", "protocol name: the call is gated by the session's mode (WF-3, WF-4)")
	mode := fs.String("mode", "", "pin the call to this mode of the protocol")
	pos, err := parse(fs, args)
	if err != nil {
		return ExitTrouble
	}
	if len(pos) < 1 || len(pos) > 2 {
		return usageErr(e, cmd, "want TOOL and optional JSON arguments")
	}
	tool, raw := pos[0], "{}"
	if len(pos) == 2 {
		raw = pos[1]
	}
	if raw == "-" {
		b, err := io.ReadAll(e.stdin)
		if err != nil {
			return fail(e, cmd, err)
		}
		raw = string(b)
	}
	servers := []string{}
	if server, ok := upstreamOf(tool); ok {
		servers = []string{server}
	}
	h, err := c.open(e, servers, func(hc *host.Config) {
		hc.Protocol, hc.Mode, hc.ApprovalHold = *proto, *mode, *hold
	})
	if err != nil {
		return fail(e, cmd, err)
	}
	defer h.Close()
	p, err := c.actor(e, h)
	if err != nil {
		return fail(e, cmd, err)
	}
	o, err := h.Call(e.ctx, host.CallRequest{Tool: tool, Args: json.RawMessage(raw), Principal: p,
		SessionID: *session, RunID: *run, Step: *step, CallID: *callID})
	if err != nil {
		return fail(e, cmd, err)
	}
	if c.json {
		if err := writeJSON(e.stdout, o); err != nil {
			return fail(e, cmd, err)
		}
	} else {
		printOutcome(e.stdout, o)
	}
	if o.Status != runtime.OutcomeSucceeded {
		return ExitFailed
	}
	return ExitOK
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

// upstreamOf is the server of an mcp.<server>.<tool> name.
func upstreamOf(tool string) (string, bool) {
	rest, ok := strings.CutPrefix(tool, "mcp.")
	if !ok {
		return "", false
	}
	server, _, ok := strings.Cut(rest, ".")
	return server, ok
}

// printOutcome prints an outcome for a person. A tool's content and a remote system's
// detail are text someone else wrote: they keep their lines but lose every control
// character a terminal would obey (textsafe.Text); ids are escaped as fields.
func printOutcome(w io.Writer, o runtime.Outcome) {
	f, t := textsafe.Field, textsafe.Text
	replay := ""
	if o.Replayed {
		replay = " (recorded outcome, not executed again)"
	}
	if o.Status != runtime.OutcomeSucceeded {
		fmt.Fprintf(w, "%s %s: %s%s\n", f(string(o.Status)), f(string(o.ReasonCode)), t(o.Message), replay)
		if o.Retryable {
			fmt.Fprintln(w, "retryable: yes")
		}
		if o.ExternalDetail != nil {
			fmt.Fprintf(w, "external_detail (%s):\n%s\n", f(string(o.ExternalDetail.Trust)), t(o.ExternalDetail.Text))
		}
		fmt.Fprintf(w, "call_id: %s\n", f(o.CallID))
		printReplayHint(w, o)
		return
	}
	fmt.Fprintf(w, "succeeded%s\n", replay)
	if o.Suspended != nil {
		fmt.Fprintf(w, "suspended: resume token %s\n", f(o.Suspended.ResumeToken))
	}
	if o.Result != nil {
		for _, it := range o.Result.Content {
			fmt.Fprintf(w, "[%s] %s\n", f(string(it.Trust)), t(it.Text))
		}
		if len(o.Result.Structured) > 0 && len(o.Result.Content) == 0 {
			fmt.Fprintf(w, "%s\n", t(string(o.Result.Structured)))
		}
	}
	fmt.Fprintf(w, "call_id: %s\n", f(o.CallID))
	printReplayHint(w, o)
}

// printReplayHint says, under a replayed outcome, how to make the call anew (SES-2).
func printReplayHint(w io.Writer, o runtime.Outcome) {
	if o.Replayed {
		fmt.Fprintln(w, "(the same call again is its retry: to make it anew, give it a new --call-id)")
	}
}

func runRecover(e *env, cmd string, args []string) int {
	fs, c := newFlags(cmd, e)
	if pos, err := parse(fs, args); err != nil || len(pos) > 0 {
		return usageErr(e, cmd, "takes no arguments")
	}
	h, err := c.open(e, []string{}, nil)
	if err != nil {
		return fail(e, cmd, err)
	}
	defer h.Close()
	actor, err := c.actor(e, h)
	if err != nil {
		return fail(e, cmd, err)
	}
	rep, err := h.Operator().Recover(e.ctx, actor)
	if err != nil {
		return fail(e, cmd, err)
	}
	if c.json {
		writeJSON(e.stdout, map[string]int{"reclaimed": rep.Reclaimed, "retried": rep.Retried, "uncertain": rep.Uncertain, "failed": rep.Failed,
			"skipped_not_registered": rep.SkippedNotRegistered, "skipped_changed": rep.SkippedChanged})
		return ExitOK
	}
	// The skipped calls are left for a worker that has their tool (LIFE-1): never settled here.
	fmt.Fprintf(e.stdout, "reclaimed %d expired lease(s): %d retried, %d UNCERTAIN (run %s uncertain), %d failed crash_loop; "+
		"skipped %d: tool not registered here, %d: definition changed\n",
		rep.Reclaimed, rep.Retried, rep.Uncertain, e.name, rep.Failed, rep.SkippedNotRegistered, rep.SkippedChanged)
	return ExitOK
}

// invocationJSON is how the review commands print a row: classification and ids,
// never the outcome's text; the arguments only for a call waiting for an approval,
// which the approver must see to decide (issue 15, point 10).
type invocationJSON struct {
	ID           int64      `json:"id"`
	Tool         string     `json:"tool"`
	Status       string     `json:"status"`
	ReasonCode   string     `json:"reason_code,omitempty"`
	Decision     string     `json:"decision,omitempty"`
	Principal    string     `json:"principal"`
	Tenant       string     `json:"tenant"`
	SessionID    string     `json:"session_id"`
	RunID        string     `json:"run_id"`
	Step         int        `json:"step"`
	CallID       string     `json:"call_id"`
	Mode         string     `json:"mode,omitempty"`
	Key          string     `json:"key"`
	EffectSentAt *time.Time `json:"effect_sent_at,omitempty"`
	Resolution   string     `json:"resolution,omitempty"`
	ResolvedBy   string     `json:"resolved_by,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
	// Args are the call's canonical arguments: approvals only.
	Args json.RawMessage `json:"args,omitempty"`
}

func rowJSON(inv *store.Invocation) invocationJSON {
	return invocationJSON{
		ID: inv.ID, Tool: inv.Tool, Status: string(inv.Status), ReasonCode: inv.ReasonCode, Decision: inv.Decision,
		Principal: inv.Principal, Tenant: inv.Tenant, SessionID: inv.SessionID, RunID: inv.RunID, Step: inv.Step,
		CallID: inv.CallID, Mode: inv.Mode, Key: inv.Key, EffectSentAt: inv.EffectSentAt,
		Resolution: inv.Resolution, ResolvedBy: inv.ResolvedBy, CreatedAt: inv.CreatedAt,
	}
}

func stamp(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// printRows prints rows as a table (or JSON); withArgs adds each call's arguments, cut
// to maxArgsShown bytes in the table (the JSON has them whole).
func printRows(e *env, c *common, rows []*store.Invocation, empty string, withArgs bool) {
	if c.json {
		out := make([]invocationJSON, 0, len(rows))
		for _, r := range rows {
			j := rowJSON(r)
			if withArgs {
				j.Args = r.Args
			}
			out = append(out, j)
		}
		writeJSON(e.stdout, out)
		return
	}
	if len(rows) == 0 {
		fmt.Fprintln(e.stdout, empty)
		return
	}
	header := []string{"ID", "TOOL", "STATUS", "PRINCIPAL", "SESSION", "CALL", "MODE", "WATERMARK", "CREATED"}
	if withArgs {
		header = append(header, "ARGS")
	}
	var tab [][]string
	for _, r := range rows {
		row := []string{strconv.FormatInt(r.ID, 10), r.Tool, string(r.Status), r.Principal, r.SessionID, r.CallID,
			orDash(r.Mode), stamp(r.EffectSentAt), r.CreatedAt.UTC().Format(time.RFC3339)}
		if withArgs {
			row = append(row, shortArgs(r.Args))
		}
		tab = append(tab, row)
	}
	table(e.stdout, header, tab)
}

// maxArgsShown bounds the arguments a table shows of one call.
const maxArgsShown = 160

// shortArgs is a call's canonical arguments for a table cell, cut on a character
// boundary (the cell is escaped by table).
func shortArgs(args json.RawMessage) string {
	s := string(args)
	if len(s) <= maxArgsShown {
		return orDash(s)
	}
	cut := maxArgsShown
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
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
