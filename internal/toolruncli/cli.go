package toolruncli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/toolgen/toolgen/internal/host"
	"github.com/toolgen/toolgen/internal/identity"
	mcpserver "github.com/toolgen/toolgen/mcp/server"
	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/spec"
)

// Exit codes: 0 done (for call: the call succeeded), 1 the call or the operation did not
// succeed (an outcome other than succeeded, nothing to approve, ...), 2 usage or I/O.
const (
	ExitOK      = 0
	ExitFailed  = 1
	ExitTrouble = 2
)

const usage = `toolrun hosts toolgen's pipeline: serve tools over MCP, run calls, recover, review.

Usage:
	toolrun serve [--stdio | --http ADDR] [--protocol NAME] [--mode M]   (HTTP: /mcp, /metrics, /devices/connect, /events)
	toolrun call TOOL [JSON|-] [--session S] [--run R] [--step N] [--call-id C]
	             [--protocol NAME] [--mode M] [--hold D] [--lease D]
	toolrun recover
	toolrun uncertain
	toolrun resolve ID --happened | --not-happened
	toolrun approvals
	toolrun approve ID [--reason TEXT]
	toolrun deny ID [--reason TEXT]
	toolrun audit [--session S]
	toolrun catalog [--force-epoch SERVER]
	toolrun device --gateway URL --id ID --token-file F -- CMD [ARGS...]
	toolrun events --url http://ADDR [--session S] [--run R] [--tenant T] [--after ID] [--once] [--json]
	               [--token-file F]

Flags every command takes:
	--dir DIR        spec root: tools/, servers/, protocols/, policy.yaml (default ".")
	--db DSN         postgres://... or a SQLite file (default $TOOLRUN_DB, else DIR/.toolrun/toolrun.db)
	--workspace W    the directory workspace.* tools are confined to (default DIR)
	--json           machine-readable output
	--principal ID   who acts (default: "agent" for serve and call, "operator" otherwise);
	                 with DIR/principals.yaml it must be declared there, and its tenant is
	                 the one whose work the command sees and acts on
	--token-file F   a bearer token proving who acts, verified against principals.yaml
	--tenant T       the principal's tenant without principals.yaml (default "default")
	--scopes A,B     the principal's scopes (default: every scope the loaded tools require)
	--log LEVEL      debug|info|warn|error, structured logs on stderr (default warn)

Exit status: 0 done, 1 the call or operation did not succeed, 2 usage or I/O error.
`

// env is one invocation's I/O.
type env struct {
	ctx            context.Context
	stdin          io.Reader
	stdout, stderr io.Writer
}

// Run runs toolrun with args (without the program name) and returns the exit code.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return ExitTrouble
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return ExitOK
	}
	run, ok := commands[cmd]
	if !ok {
		fmt.Fprintf(stderr, "toolrun: unknown command %q\n\n%s", cmd, usage)
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
	dir, db, workspace, principal, tenant, scopes, logLevel string
	json                                                    bool
	// tokenFile names a bearer token proving who acts (instead of --principal);
	// verified is the principal it proved.
	tokenFile string
	verified  *runtime.Principal
}

func newFlags(cmd string, e *env) (*flag.FlagSet, *common) {
	fs := flag.NewFlagSet("toolrun "+cmd, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	c := &common{}
	fs.StringVar(&c.dir, "dir", ".", "spec root")
	fs.StringVar(&c.db, "db", os.Getenv("TOOLRUN_DB"), "store: postgres:// URL or SQLite file")
	fs.StringVar(&c.workspace, "workspace", "", "directory the workspace.* tools are confined to (default: the spec root)")
	fs.BoolVar(&c.json, "json", false, "machine-readable output")
	defPrincipal := "operator"
	if cmd == "serve" || cmd == "call" {
		defPrincipal = "agent"
	}
	fs.StringVar(&c.principal, "principal", defPrincipal, "who acts")
	fs.StringVar(&c.tenant, "tenant", "default", "the principal's tenant")
	fs.StringVar(&c.scopes, "scopes", "", "comma-separated scopes (default: every scope the loaded tools require)")
	fs.StringVar(&c.logLevel, "log", "warn", "log level: debug|info|warn|error")
	fs.StringVar(&c.tokenFile, "token-file", "", "a bearer token proving who acts, verified against principals.yaml (instead of --principal)")
	fs.Usage = func() { fmt.Fprint(e.stderr, usage) }
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

func (c *common) open(e *env, configure func(*runtime.Config)) (*host.Host, error) {
	return c.openWith(e, host.Options{Configure: configure})
}

// openWith opens the host with o completed by the common flags.
func (c *common) openWith(e *env, o host.Options) (*host.Host, error) {
	log, err := c.logger(e.stderr)
	if err != nil {
		return nil, err
	}
	if err := c.tenantFromPrincipals(); err != nil {
		return nil, err
	}
	o.Dir, o.DB, o.Workspace, o.Logger = c.dir, c.db, c.workspace, log
	o.Tenant, o.Principal = c.tenant, c.principal
	return host.Open(e.ctx, o)
}

// principalFor is the acting principal, --principal. With principals.yaml it must be
// declared there (tokens or local): its tenant and scopes are the file's (--tenant is
// then ignored; --scopes can only narrow them). Without the file (a local toolrun) it
// acts in --tenant with every scope its tools require, unless --scopes narrows it.
func (c *common) principalFor(h *host.Host) runtime.Principal {
	var narrow []string
	if c.scopes != "" {
		for _, s := range strings.Split(c.scopes, ",") {
			if s = strings.TrimSpace(s); s != "" {
				narrow = append(narrow, s)
			}
		}
	}
	if c.verified != nil { // principals.yaml: the declared or token-proved principal (openWith)
		p := *c.verified
		if narrow != nil {
			p.Scopes = slices.DeleteFunc(slices.Clone(p.Scopes), func(s string) bool { return !slices.Contains(narrow, s) })
		}
		return p
	}
	p := runtime.Principal{ID: c.principal, Tenant: c.tenant, Scopes: []string{}}
	if narrow != nil {
		p.Scopes = narrow
		return p
	}
	for _, t := range h.Registry.Current() {
		p.Scopes = append(p.Scopes, t.RequiredScopes...)
	}
	for _, d := range h.Tree.Devices { // their tools register when they dial in
		for _, s := range d.Server.RequiredScopes {
			p.Scopes = append(p.Scopes, s.Name)
		}
	}
	// No principal is ever granted the scope of unclassified servers and devices.
	p.Scopes = slices.DeleteFunc(p.Scopes, func(s string) bool { return s == spec.UnclassifiedScope })
	slices.Sort(p.Scopes)
	p.Scopes = slices.Compact(p.Scopes)
	return p
}

// openStore opens the store alone, for the commands that review rather than run calls.
// With principals.yaml the acting principal must be declared there, and its tenant is
// the one whose work the command sees and acts on (ID-2).
func (c *common) openStore(e *env) (store.Store, error) {
	if err := c.tenantFromPrincipals(); err != nil {
		return nil, err
	}
	return host.OpenStore(e.ctx, c.dir, c.db)
}

// tenantFromPrincipals sets c.tenant to --principal's tenant in DIR/principals.yaml, or
// with --token-file to the tenant of the principal the token proves; without the file it
// keeps --tenant (and a token cannot be verified).
func (c *common) tenantFromPrincipals() error {
	data, err := os.ReadFile(filepath.Join(c.dir, spec.PrincipalsFile))
	if errors.Is(err, fs.ErrNotExist) {
		if c.tokenFile != "" {
			return fmt.Errorf("--token-file: there is no %s to verify it against", spec.PrincipalsFile)
		}
		return nil
	}
	if err != nil {
		return err
	}
	file, diags := spec.LoadPrincipals(spec.PrincipalsFile, filepath.Join(c.dir, spec.PrincipalsFile), data)
	if len(diags) > 0 {
		return errors.New(diags.Sorted()[0].String())
	}
	if c.tokenFile != "" {
		raw, err := os.ReadFile(c.tokenFile)
		if err != nil {
			return err
		}
		v, err := identity.New(context.Background(), file, os.DirFS(c.dir))
		if err != nil {
			return err
		}
		p, _, err := v.Verify(context.Background(), strings.TrimSpace(string(raw)))
		if err != nil {
			return fmt.Errorf("--token-file: %w", err)
		}
		c.principal, c.tenant, c.verified = p.ID, p.Tenant, &p
		return nil
	}
	sp := file.Principal(c.principal)
	if sp == nil {
		return fmt.Errorf("--principal %s %w", c.principal, errNoPrincipal)
	}
	c.tenant = sp.Tenant
	p := runtime.Principal{ID: sp.ID, Tenant: sp.Tenant, Scopes: []string{}}
	for _, s := range sp.Scopes {
		p.Scopes = append(p.Scopes, s.Name)
	}
	c.verified = &p
	return nil
}

// ApproveScope is the scope a principal of principals.yaml needs to approve or deny a
// held call (POL-3: another principal, with the approving scope). Without the file the
// operator acting on its own machine decides.
const ApproveScope = "approvals.decide"

// visibleInvocation reads invocation id as the principal's tenant sees it: another
// tenant's row is not visible (store.ErrNotFound).
func (c *common) visibleInvocation(e *env, st store.Store, id int64) (*store.Invocation, error) {
	inv, err := st.InvocationGet(e.ctx, id)
	if err == nil && inv.Tenant != c.tenant {
		return nil, store.ErrNotFound
	}
	return inv, err
}

// decisionAudit is the audit entry of a person's decision on an invocation (kind
// resolve or approval), in the mode the call ran in. The store writes it in the
// decision's own transaction (HOST-2): no decision without its entry, no entry
// without its decision.
func (c *common) decisionAudit(inv *store.Invocation, kind string, detail any) (*store.AuditEntry, error) {
	raw, err := json.Marshal(detail)
	if err != nil {
		return nil, err
	}
	return &store.AuditEntry{Tenant: inv.Tenant, Kind: kind, Principal: c.principal,
		SessionID: inv.SessionID, Mode: inv.Mode, Tool: inv.Tool, Key: inv.Key, Detail: raw}, nil
}

func fail(e *env, cmd string, err error) int {
	fmt.Fprintf(e.stderr, "toolrun %s: %v\n", cmd, err)
	return ExitTrouble
}

func usageErr(e *env, cmd, msg string) int {
	fmt.Fprintf(e.stderr, "toolrun %s: %s\n\n%s", cmd, msg, usage)
	return ExitTrouble
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func table(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

func runCall(e *env, cmd string, args []string) int {
	fs, c := newFlags(cmd, e)
	session := fs.String("session", "cli", "session id")
	run := fs.String("run", "", "run id (default: the session id)")
	step := fs.Int("step", 0, "step number")
	callID := fs.String("call-id", "", "call id (default: derived from the tool and its arguments)")
	hold := fs.Duration("hold", 0, "how long a call held for approval waits (default 5m)")
	lease := fs.Duration("lease", 0, "lease of the call while it runs (default 30s)")
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
	if *run == "" {
		*run = *session
	}
	if *callID == "" {
		// The MCP server's rule, so that a call retried through either finds itself.
		*callID = mcpserver.DerivedCallID(tool, json.RawMessage(raw))
	}
	h, err := c.openWith(e, host.Options{Protocol: *proto, Mode: *mode, Configure: func(cfg *runtime.Config) {
		cfg.ApprovalHold, cfg.Lease = *hold, *lease
		killAt(cfg)
	}})
	if err != nil {
		return fail(e, cmd, err)
	}
	defer h.Close()
	if server, ok := upstreamOf(tool); ok {
		if err := h.ConnectServers(e.ctx, e.stderr, server); err != nil {
			return fail(e, cmd, err)
		}
	}
	p := c.principalFor(h)
	o, err := h.Pipeline.Execute(e.ctx, runtime.Call{
		Tenant: p.Tenant, Principal: p, SessionID: *session, RunID: *run, Step: *step, CallID: *callID,
		Tool: tool, Args: json.RawMessage(raw), ArgumentTrust: runtime.TrustUser, Workspace: h.Workspace,
	})
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

// KillAtEnv names the crash drill: with TOOLRUN_KILL_AT=STEP, toolrun call SIGKILLs
// its own process right after the named pipeline step ("watermark", "execute",
// "settle", ... as runtime.Config.AfterStep names them), leaving what a real crash
// leaves for toolrun recover. It exists for drills and the testscripts; never set it
// in production.
const KillAtEnv = "TOOLRUN_KILL_AT"

func killAt(cfg *runtime.Config) {
	step := os.Getenv(KillAtEnv)
	if step == "" {
		return
	}
	cfg.AfterStep = func(s string) {
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

func printOutcome(w io.Writer, o runtime.Outcome) {
	replay := ""
	if o.Replayed {
		replay = " (recorded outcome, not executed again)"
	}
	if o.Status != runtime.OutcomeSucceeded {
		fmt.Fprintf(w, "%s %s: %s%s\n", o.Status, o.ReasonCode, o.Message, replay)
		if o.Retryable {
			fmt.Fprintln(w, "retryable: yes")
		}
		if o.ExternalDetail != nil {
			fmt.Fprintf(w, "external_detail (%s):\n%s\n", o.ExternalDetail.Trust, o.ExternalDetail.Text)
		}
		fmt.Fprintf(w, "call_id: %s\n", o.CallID)
		return
	}
	fmt.Fprintf(w, "succeeded%s\n", replay)
	if o.Suspended != nil {
		fmt.Fprintf(w, "suspended: resume token %s\n", o.Suspended.ResumeToken)
	}
	if o.Result != nil {
		for _, it := range o.Result.Content {
			fmt.Fprintf(w, "[%s] %s\n", it.Trust, it.Text)
		}
		if len(o.Result.Structured) > 0 && len(o.Result.Content) == 0 {
			fmt.Fprintf(w, "%s\n", o.Result.Structured)
		}
	}
	fmt.Fprintf(w, "call_id: %s\n", o.CallID)
}

func runRecover(e *env, cmd string, args []string) int {
	fs, c := newFlags(cmd, e)
	if pos, err := parse(fs, args); err != nil || len(pos) > 0 {
		return usageErr(e, cmd, "takes no arguments")
	}
	h, err := c.open(e, nil)
	if err != nil {
		return fail(e, cmd, err)
	}
	defer h.Close()
	rep, err := h.Pipeline.Recover(e.ctx)
	if err != nil {
		return fail(e, cmd, err)
	}
	if c.json {
		writeJSON(e.stdout, map[string]int{"reclaimed": rep.Reclaimed, "retried": rep.Retried, "uncertain": rep.Uncertain, "failed": rep.Failed,
			"skipped_not_registered": rep.SkippedNotRegistered, "skipped_changed": rep.SkippedChanged})
		return ExitOK
	}
	// The skipped calls are left for a worker that has their tool (LIFE-1): never settled here.
	fmt.Fprintf(e.stdout, "reclaimed %d expired lease(s): %d retried, %d UNCERTAIN (run toolrun uncertain), %d failed crash_loop; "+
		"skipped %d: tool not registered here, %d: definition changed\n",
		rep.Reclaimed, rep.Retried, rep.Uncertain, rep.Failed, rep.SkippedNotRegistered, rep.SkippedChanged)
	return ExitOK
}

// invocationJSON is how the review commands print a row: classification and ids,
// never the arguments or the outcome's text.
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

func printRows(e *env, c *common, rows []*store.Invocation, empty string) {
	if c.json {
		out := make([]invocationJSON, 0, len(rows))
		for _, r := range rows {
			out = append(out, rowJSON(r))
		}
		writeJSON(e.stdout, out)
		return
	}
	if len(rows) == 0 {
		fmt.Fprintln(e.stdout, empty)
		return
	}
	var tab [][]string
	for _, r := range rows {
		tab = append(tab, []string{strconv.FormatInt(r.ID, 10), r.Tool, string(r.Status), r.Principal, r.SessionID, r.CallID,
			orDash(r.Mode), stamp(r.EffectSentAt), r.CreatedAt.UTC().Format(time.RFC3339)})
	}
	table(e.stdout, []string{"ID", "TOOL", "STATUS", "PRINCIPAL", "SESSION", "CALL", "MODE", "WATERMARK", "CREATED"}, tab)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func runUncertain(e *env, cmd string, args []string) int {
	fs, c := newFlags(cmd, e)
	if pos, err := parse(fs, args); err != nil || len(pos) > 0 {
		return usageErr(e, cmd, "takes no arguments")
	}
	st, err := c.openStore(e)
	if err != nil {
		return fail(e, cmd, err)
	}
	defer st.Close()
	rows, err := st.InvocationListUncertain(e.ctx, c.tenant)
	if err != nil {
		return fail(e, cmd, err)
	}
	printRows(e, c, rows, "no UNCERTAIN call waits for review")
	return ExitOK
}

func parseID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("%q is not an invocation id (a positive number)", s)
	}
	return id, nil
}

func runResolve(e *env, cmd string, args []string) int {
	fs, c := newFlags(cmd, e)
	happened := fs.Bool("happened", false, "the effect happened")
	notHappened := fs.Bool("not-happened", false, "the effect did not happen")
	pos, err := parse(fs, args)
	if err != nil {
		return ExitTrouble
	}
	if len(pos) != 1 || *happened == *notHappened {
		return usageErr(e, cmd, "want one ID and exactly one of --happened, --not-happened")
	}
	id, err := parseID(pos[0])
	if err != nil {
		return usageErr(e, cmd, err.Error())
	}
	st, err := c.openStore(e)
	if err != nil {
		return fail(e, cmd, err)
	}
	defer st.Close()
	visible, err := c.visibleInvocation(e, st, id)
	if errors.Is(err, store.ErrNotFound) {
		fmt.Fprintf(e.stderr, "toolrun resolve: no invocation %d in tenant %s\n", id, c.tenant)
		return ExitFailed
	} else if err != nil {
		return fail(e, cmd, err)
	}
	resolution := "did_not_happen"
	if *happened {
		resolution = "happened"
	}
	// The review changes none of the fields the entry takes from the row.
	audit, err := c.decisionAudit(visible, "resolve", map[string]string{"resolution": resolution})
	if err != nil {
		return fail(e, cmd, err)
	}
	inv, err := st.InvocationResolveUncertain(e.ctx, id, resolution, c.principal, audit)
	if errors.Is(err, store.ErrConflict) {
		fmt.Fprintf(e.stderr, "toolrun resolve: invocation %d is not an unresolved UNCERTAIN call\n", id)
		return ExitFailed
	}
	if err != nil {
		return fail(e, cmd, err)
	}
	if c.json {
		writeJSON(e.stdout, rowJSON(inv))
	} else {
		fmt.Fprintf(e.stdout, "invocation %d (%s) resolved: %s, by %s\n", id, inv.Tool, resolution, c.principal)
	}
	return ExitOK
}

func runDecide(e *env, cmd string, args []string) int {
	fs, c := newFlags(cmd, e)
	reason := fs.String("reason", "", "why")
	pos, err := parse(fs, args)
	if err != nil {
		return ExitTrouble
	}
	if len(pos) != 1 {
		return usageErr(e, cmd, "want one invocation ID (see toolrun approvals)")
	}
	id, err := parseID(pos[0])
	if err != nil {
		return usageErr(e, cmd, err.Error())
	}
	st, err := c.openStore(e)
	if err != nil {
		return fail(e, cmd, err)
	}
	defer st.Close()
	inv, err := c.visibleInvocation(e, st, id)
	if errors.Is(err, store.ErrNotFound) {
		fmt.Fprintf(e.stderr, "toolrun %s: no invocation %d waits for a decision\n", cmd, id)
		return ExitFailed
	}
	if err != nil {
		return fail(e, cmd, err)
	}
	approved := cmd == "approve"
	if c.verified != nil && !slices.Contains(c.verified.Scopes, ApproveScope) {
		fmt.Fprintf(e.stderr, "toolrun %s: %s does not hold the approving scope %s\n", cmd, c.principal, ApproveScope)
		return ExitFailed
	}
	approver := runtime.Principal{ID: c.principal, Tenant: c.tenant}
	audit, err := c.decisionAudit(inv, "approval", map[string]any{"approved": approved, "reason": *reason, "invocation": id})
	if err != nil {
		return fail(e, cmd, err)
	}
	switch err := runtime.DecideApproval(e.ctx, st, inv.Key, approver, approved, *reason, audit); {
	case errors.Is(err, runtime.ErrSelfApproval):
		fmt.Fprintf(e.stderr, "toolrun %s: %s made call %d; another principal must decide it (use --principal)\n", cmd, inv.Principal, id)
		return ExitFailed
	case errors.Is(err, runtime.ErrNotHeld), errors.Is(err, store.ErrConflict):
		fmt.Fprintf(e.stderr, "toolrun %s: invocation %d does not wait for a decision (status %s)\n", cmd, id, inv.Status)
		return ExitFailed
	case err != nil:
		return fail(e, cmd, err)
	}
	verb := "denied"
	if approved {
		verb = "approved"
	}
	if c.json {
		writeJSON(e.stdout, map[string]any{"id": id, "tool": inv.Tool, "decision": verb, "by": c.principal})
	} else {
		fmt.Fprintf(e.stdout, "invocation %d (%s) %s by %s; the caller's retry of the same call finds the decision\n", id, inv.Tool, verb, c.principal)
	}
	return ExitOK
}
