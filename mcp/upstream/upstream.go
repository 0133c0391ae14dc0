package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/model"
	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

// Protocol revisions this adapter speaks.
const (
	// ProtocolLegacy is the default: the 2025-11-25 revision, negotiated with initialize
	// only. It is what real third-party servers speak today, and pinning it avoids the
	// server/discover probe (go-sdk #1177: a stdio server that exits on the probe cannot
	// be connected; server-everything over HTTP answers it with a 400 and an orphan
	// instance).
	ProtocolLegacy = "2025-11-25"
	// ProtocolStateless is the 2026-07-28 revision (server/discover, multi round-trip
	// results, subscriptions/listen). Set Options.ProtocolVersion to it to let the SDK
	// probe for it; it falls back to ProtocolLegacy when the server does not offer it.
	ProtocolStateless = "2026-07-28"
)

// Defaults of Options.
const (
	DefaultMaxMessageBytes = 64 << 20
	DefaultOutputMaxBytes  = 65536
	DefaultRefreshDebounce = 100 * time.Millisecond
	DefaultConnectTimeout  = 60 * time.Second
	DefaultReconnectMin    = 500 * time.Millisecond
	DefaultReconnectMax    = 30 * time.Second
	refreshTimeout         = 30 * time.Second
	maxListPages           = 1000
	maxListedItems         = 10000
)

// Change kinds written to mcp_catalog_history (store.CatalogChange.Change) by this
// package. forced_epoch belongs to the operator's command, not to the adapter.
const (
	ChangeAdded            = "added"
	ChangeRemoved          = "removed"
	ChangeChanged          = "changed"
	ChangeDroppedCollision = "dropped_collision"
	// ChangeDroppedInvalid records a remote tool refused for its definition: an input
	// schema that is not an object or cannot be resolved, an oversized description, a
	// definition that cannot be hashed, or a registration the registry refused.
	ChangeDroppedInvalid = "dropped_invalid"
	// ChangeListChanged records a list_changed notification the adapter applied: one
	// row per refresh it triggered (Tool ""), whose detail lists the differences found
	// (each also recorded on its own row) and the resulting catalog hash. A refresh that
	// found no difference is recorded at most once per listChangedQuiet, so a server
	// that spams notifications cannot flood the history.
	ChangeListChanged = "list_changed"
)

// listChangedQuiet bounds how often a list_changed that changed nothing is recorded.
const listChangedQuiet = time.Minute

// Audit entry kinds written by this package.
const (
	// AuditRequestRefused records a server-to-client request (roots, sampling,
	// elicitation, ...) or an inputRequests result that was refused (MCP-6).
	AuditRequestRefused = "mcp_request_refused"
)

// Store is what an upstream connection asks of the store: the catalog history it
// records and reads (MCP-7), the audit log of its refusals, and the events of its
// reconnects.
type Store interface {
	store.Audit
	store.CatalogHistory
	store.Events
}

// Options configures one upstream server connection.
type Options struct {
	// Server is the operator's (or tenant's) classification file (SPEC-7). Required.
	Server *model.Server
	// Registry receives the server's tools as mcp.{server_id}.{name}. Required.
	Registry *runtime.Registry
	// Store records catalog changes (mcp_catalog_history) and refusals (audit_log).
	// Required.
	Store Store
	// Egress is the guard of tenant-configured servers (MCP-4). Required when
	// Server.ConfiguredBy is tenant; unused for operator servers.
	Egress *Egress
	// Tenant is the tenant a tenant-configured server, or a device, belongs to: only its
	// principals see and call the tools (ID-2), and audit entries carry it. Required for
	// both; an operator's server serves every tenant.
	Tenant string
	// Logger receives the adapter's log lines; nil discards them.
	Logger *slog.Logger
	// HTTPClient is used for an operator's HTTP server (nil: a client like http.DefaultClient that keeps 64 idle connections per host). Put
	// authentication or request logging in its RoundTripper (never wrap the transport in
	// mcp.LoggingTransport: it silently disables the SSE stream that carries
	// list_changed). A tenant server always uses Egress.HTTPClient; setting HTTPClient for
	// one is an error.
	HTTPClient *http.Client
	// Stderr receives a stdio server's standard error; nil discards it.
	Stderr io.Writer
	// Transport, when set, is used instead of the file's transport: an in-process or
	// already wired connection (tests, a device channel). Operator servers only.
	Transport mcp.Transport
	// Domain is the registry domain of the tools: "" or Domain (mcp) for a server;
	// "device" for a device's tools, which reach the gateway over a connection the
	// device dialled (Transport) and go through this same adapter (DEV-1). In the device
	// domain a call the connection cannot carry fails with the device reasons
	// (runtime.UnavailableError): device_offline before the call, device_disconnected
	// during it (the pipeline makes the latter UNCERTAIN where an effect is in doubt).
	Domain string
	// CheckTools, when set, sees every tools/list answer before anything of it is
	// registered and returns the tools to use (it may drop some). An error refuses the
	// whole answer: on Connect the connection is refused and nothing is registered; on a
	// later refresh the catalog stays as it was. The device gateway uses it for
	// allow_tools and to refuse a device that names a tool outside its namespace.
	CheckTools func(ctx context.Context, tools []*mcp.Tool) ([]*mcp.Tool, error)
	// OnConnectionLost, when set, is called each time the connection ends on its own
	// (not by Close), with the reason.
	OnConnectionLost func(err error)
	// NoReconnect turns off the automatic reconnection of a server whose connection
	// ends on its own (see [Upstream.Err]). It is off anyway with Options.Transport: a
	// connection handed in cannot be made again here; its owner calls
	// [Upstream.Reconnect] (the device gateway does when the device dials again).
	NoReconnect bool
	// ReconnectMin and ReconnectMax bound the wait before each reconnection attempt:
	// it doubles from ReconnectMin up to ReconnectMax, and a random part of up to half
	// of it is taken off (defaults DefaultReconnectMin, DefaultReconnectMax).
	ReconnectMin, ReconnectMax time.Duration
	// LogLevel is the logging level asked of a server that offers logging, whose log
	// lines are relayed to the calling client (see relay.go): an MCP level ("debug",
	// "info", ... "emergency"), "off" to ask for none; "" is DefaultLogLevel.
	LogLevel string
	// ProtocolVersion is the revision asked for: "" means ProtocolLegacy; set
	// ProtocolStateless to negotiate 2026-07-28 when the server offers it.
	ProtocolVersion string
	// MaxMessageBytes bounds one inbound message on the stdio and HTTP transports this
	// package builds (default DefaultMaxMessageBytes): a stdio line, an SSE event, a
	// JSON response body. A larger message fails the call in flight with an error (on
	// stdio it ends the connection).
	MaxMessageBytes int
	// ToolTimeout is the ToolSpec.Timeout of every tool of the server: the pipeline
	// cancels a call after it (0: the runtime's default).
	ToolTimeout time.Duration
	// OutputMaxBytes is the ToolSpec.OutputMaxBytes of every tool of the server: larger
	// output is excerpted and artifactized by the pipeline (default
	// DefaultOutputMaxBytes).
	OutputMaxBytes int
	// RefreshDebounce is how long after the first list_changed of a burst the refresh
	// runs; notifications arriving meanwhile are folded into it, so a server sending a
	// stream of them gets at most one refresh per window (default
	// DefaultRefreshDebounce).
	RefreshDebounce time.Duration

	stdioTap     io.Writer                     // tests: copy of what is written to a stdio server
	stdioStarted func(pid int)                 // tests: told the pid of every stdio server started
	clock        clock                         // tests: the reconnection loop's clock (nil: the real one)
	dialer       func() (mcp.Transport, error) // tests: how the loop reconnects (nil: the file's transport)
}

// Upstream is one connected upstream MCP server whose tools are registered in the
// registry. It is safe for concurrent use.
type Upstream struct {
	opts     Options
	id       string
	domain   string
	log      *slog.Logger
	client   *mcp.Client
	cs       *mcp.ClientSession
	protocol string

	ctx    context.Context // canceled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	changed chan struct{} // a list_changed arrived (buffer 1)

	refreshMu sync.Mutex // serializes catalog application
	mu        sync.Mutex // guards the fields below
	tools     map[string]*entry
	hist      map[string]histState
	skills    []Skill
	closed    bool
	lost      error           // set when the connection ended on its own
	triggers  map[string]bool // list_changed methods received since the last refresh
	quietAt   time.Time       // when a no-difference list_changed was last recorded
	gen       uint64
	genCh     chan struct{} // closed and replaced when gen increases

	// Reconnection (reconnect.go).
	dial        func() (mcp.Transport, error) // a new transport to the file's server; nil: no automatic reconnection
	clock       clock
	reconnectMu sync.Mutex // serializes reconnections (the loop's and Reconnect's)
	loop        uint64     // the id of the running reconnection loop; 0: none (guarded by mu)
	loops       uint64     // loop ids handed out (guarded by mu)
	level       int        // backoff level of the next loop's first attempt (guarded by mu)
	connectedAt time.Time  // when the current session was installed (guarded by mu)
	lostAt      time.Time  // when the connection was lost (guarded by mu)

	// Calls whose clients hear the upstream's notifications (relay.go).
	relayMu  sync.Mutex
	calls    map[string]*inflight // by the progress token sent upstream
	relaySeq uint64

	closeOnce sync.Once
	closeErr  error
}

// ErrTenantStdio refuses a tenant-configured stdio server (MCP-4).
var ErrTenantStdio = errors.New("a tenant-configured server cannot use stdio: a stdio server runs in the worker's trust zone (MCP-4)")

// ErrClosed is returned by calls on a closed Upstream.
var ErrClosed = errors.New("upstream: closed")

// ErrConnectionLost is returned by calls made after the connection ended on its own (the
// server exited or hung up): they fail before any watermark, so nothing is in doubt.
var ErrConnectionLost = errors.New("upstream: the connection to the server was lost")

// Connect connects to the server of opts.Server, lists its tools (every page), prompts
// and resources, and registers its tools in the registry through
// runtime.Registry.RegisterAdapter (MCP-1..8). Later tools/list_changed notifications
// are applied by [Upstream.Refresh], debounced, off the notification goroutine.
//
// ctx bounds the connection handshake and the first listing only; without a deadline
// they are bounded by DefaultConnectTimeout.
func Connect(ctx context.Context, opts Options) (*Upstream, error) {
	if err := checkOptions(&opts); err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultConnectTimeout)
		defer cancel()
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := opts.Server
	log = log.With("server_id", s.ServerID)
	transport, err := buildTransport(&opts)
	if err != nil {
		return nil, err
	}
	uctx, cancel := context.WithCancel(context.Background())
	u := &Upstream{
		opts: opts, id: s.ServerID, domain: opts.Domain, log: log, ctx: uctx, cancel: cancel,
		changed: make(chan struct{}, 1),
		tools:   map[string]*entry{}, genCh: make(chan struct{}), triggers: map[string]bool{},
		clock: opts.clock, calls: map[string]*inflight{},
	}
	if u.clock == nil {
		u.clock = realClock{}
	}
	switch {
	case opts.NoReconnect:
	case opts.dialer != nil:
		u.dial = opts.dialer
	case opts.Transport == nil:
		u.dial = func() (mcp.Transport, error) { return buildTransport(&u.opts) }
	}
	u.client = mcp.NewClient(&mcp.Implementation{Name: "toolgen", Version: "v0.1.0"}, &mcp.ClientOptions{
		Logger: log,
		// Advertise nothing (MCP-6): the SDK's default advertises roots.
		Capabilities: &mcp.ClientCapabilities{},
		// No sampling or elicitation handler (either would advertise the capability),
		// and no automatic multi round-trip: the SDK would answer roots/list itself,
		// bypassing the receiving middleware. inputRequests results are declined by Execute.
		MultiRoundTrip:           &mcp.MultiRoundTripOptions{Disabled: true},
		ToolListChangedHandler:   func(context.Context, *mcp.ToolListChangedRequest) { u.signal("notifications/tools/list_changed") },
		PromptListChangedHandler: func(context.Context, *mcp.PromptListChangedRequest) { u.signal("notifications/prompts/list_changed") },
		// Relayed to the calling client (relay.go).
		ProgressNotificationHandler: u.onProgress,
		//lint:ignore SA1019 upstream log lines are relayed to 2025-revision clients (relay.go)
		LoggingMessageHandler: u.onLog,
	})
	u.client.AddReceivingMiddleware(u.refuseServerRequests)

	version := opts.ProtocolVersion
	if version == "" {
		version = ProtocolLegacy
	}
	cs, err := safeConnect(ctx, u.client, transport, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("upstream %s: connect: %w", s.ServerID, err)
	}
	u.cs = cs
	u.protocol = negotiated(cs)
	u.connectedAt = u.clock.Now()
	log.Info("upstream connected", "protocol", u.protocol, "transport", transportKind(&opts))

	if err := u.loadHistory(ctx); err != nil {
		_ = u.Close()
		return nil, err
	}
	if err := u.refresh(ctx, nil); err != nil {
		_ = u.Close()
		return nil, err
	}
	u.askLogs(ctx, cs)
	u.wg.Add(2)
	go u.refresher()
	go u.watch(cs)
	return u, nil
}

func checkOptions(o *Options) error {
	if o.Server == nil || o.Registry == nil || o.Store == nil {
		return errors.New("upstream: Options.Server, Registry and Store are required")
	}
	s := o.Server
	switch o.Domain {
	case "":
		o.Domain = Domain
	case Domain:
	case DeviceDomain:
		if o.Transport == nil || s.ConfiguredBy != "operator" {
			return fmt.Errorf("upstream: device %s: a device's tools come over the connection it dialled (Options.Transport), configured by the operator", s.ServerID)
		}
		if o.Tenant == "" {
			return fmt.Errorf("upstream: device %s: a device belongs to one tenant (Options.Tenant): only that tenant may see its tools", s.ServerID)
		}
	default:
		return fmt.Errorf("upstream: Options.Domain %q: want %q or %q", o.Domain, Domain, DeviceDomain)
	}
	if _, err := DomainToolName(o.Domain, s.ServerID, "x"); err != nil {
		return err
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if o.OutputMaxBytes <= 0 {
		o.OutputMaxBytes = DefaultOutputMaxBytes
	}
	if o.RefreshDebounce <= 0 {
		o.RefreshDebounce = DefaultRefreshDebounce
	}
	switch {
	case o.LogLevel == "":
		o.LogLevel = DefaultLogLevel
	case o.LogLevel != "off" && !knownLevel(o.LogLevel):
		return fmt.Errorf("upstream: Options.LogLevel %q: want an MCP logging level or \"off\"", o.LogLevel)
	}
	if o.ReconnectMin <= 0 {
		o.ReconnectMin = DefaultReconnectMin
	}
	if o.ReconnectMax <= 0 {
		o.ReconnectMax = DefaultReconnectMax
	}
	o.ReconnectMax = max(o.ReconnectMax, o.ReconnectMin)
	switch s.ConfiguredBy {
	case "operator":
		if o.Transport == nil && s.HTTP == nil && s.Stdio == nil {
			return fmt.Errorf("upstream %s: the file names no transport", s.ServerID)
		}
		return nil
	case "tenant":
	default:
		return fmt.Errorf("upstream %s: configured_by is %q; it must be operator or tenant", s.ServerID, s.ConfiguredBy)
	}
	// A tenant server (MCP-4).
	switch {
	case s.Stdio != nil:
		return fmt.Errorf("upstream %s: %w", s.ServerID, ErrTenantStdio)
	case o.Transport != nil:
		return fmt.Errorf("upstream %s: a tenant-configured server cannot use Options.Transport: it would bypass the egress guard", s.ServerID)
	case o.HTTPClient != nil:
		return fmt.Errorf("upstream %s: a tenant-configured server cannot use Options.HTTPClient: its connections go through the egress guard", s.ServerID)
	case s.HTTP == nil:
		return fmt.Errorf("upstream %s: a tenant-configured server must name an http transport", s.ServerID)
	case o.Egress == nil:
		return fmt.Errorf("upstream %s: %w: a tenant-configured server needs an egress guard (Options.Egress)", s.ServerID, ErrEgressRefused)
	}
	if err := o.Egress.CheckURL(s.HTTP.URL); err != nil {
		return fmt.Errorf("upstream %s: %w", s.ServerID, err)
	}
	if u, _ := url.Parse(s.HTTP.URL); u.Scheme != "https" {
		return fmt.Errorf("upstream %s: %w: a tenant-configured server must use https, found %q", s.ServerID, ErrEgressRefused, s.HTTP.URL)
	}
	if o.Tenant == "" {
		return fmt.Errorf("upstream %s: a tenant-configured server needs its tenant (Options.Tenant): only that tenant may see its tools", s.ServerID)
	}
	return nil
}

func transportKind(o *Options) string {
	switch {
	case o.Transport != nil:
		return "custom"
	case o.Server.Stdio != nil:
		return "stdio"
	default:
		return "http"
	}
}

// operatorHTTPClient is the HTTP client of operator servers when Options.HTTPClient is
// nil: http.DefaultTransport's settings, but it keeps as many idle connections per host
// as concurrent calls are likely, where the default keeps 2 and every further concurrent
// call opened (and then dropped) a connection of its own (mcp/bench measured 55-230 new
// connections per 2,000 calls at 4 callers).
var operatorHTTPClient = func() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	return &http.Client{Transport: tr}
}()

func buildTransport(o *Options) (mcp.Transport, error) {
	s := o.Server
	switch {
	case o.Transport != nil:
		return o.Transport, nil
	case s.Stdio != nil:
		if s.Stdio.Command == "" {
			return nil, fmt.Errorf("upstream %s: stdio transport without a command", s.ServerID)
		}
		return &stdioTransport{
			command: s.Stdio.Command, args: s.Stdio.Args, env: s.Stdio.Env,
			stderr: o.Stderr, maxLine: o.MaxMessageBytes, tap: o.stdioTap, started: o.stdioStarted,
		}, nil
	default:
		client := o.HTTPClient
		switch {
		case s.ConfiguredBy == "tenant":
			client = o.Egress.HTTPClient()
		case client == nil:
			client = operatorHTTPClient
		}
		return &mcp.StreamableClientTransport{
			Endpoint: s.HTTP.URL, HTTPClient: boundedClient(client, o.MaxMessageBytes), MaxEventSize: o.MaxMessageBytes,
		}, nil
	}
}

// safeConnect is Client.Connect with a recover: no input from a server may crash the worker.
func safeConnect(ctx context.Context, c *mcp.Client, t mcp.Transport, o *mcp.ClientSessionOptions) (cs *mcp.ClientSession, err error) {
	defer func() {
		if r := recover(); r != nil {
			cs, err = nil, fmt.Errorf("mcp client panicked: %v", r)
		}
	}()
	return c.Connect(ctx, t, o)
}

// ServerID is the server's id.
func (u *Upstream) ServerID() string { return u.id }

// ProtocolVersion is the negotiated protocol revision.
func (u *Upstream) ProtocolVersion() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.protocol
}

func negotiated(cs *mcp.ClientSession) string {
	if ir := cs.InitializeResult(); ir != nil {
		return ir.ProtocolVersion
	}
	return ""
}

// current is the client session, live or lost (nil before Connect set it).
func (u *Upstream) current() *mcp.ClientSession {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.cs
}

// ToolNames lists the registry names of the tools this server has registered, sorted.
func (u *Upstream) ToolNames() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make([]string, 0, len(u.tools))
	for n := range u.tools {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Close withdraws the server's tools from the registry (sessions that pinned them see
// unavailable/tool_withdrawn), stops refreshing and closes the connection (a stdio
// server is asked to exit, then terminated). It is idempotent.
func (u *Upstream) Close() error {
	u.closeOnce.Do(func() {
		u.cancel()
		u.mu.Lock()
		u.closed = true
		u.mu.Unlock()
		if cs := u.current(); cs != nil {
			u.closeErr = cs.Close() // also unblocks a listing in flight
		}
		u.refreshMu.Lock() // a refresh in flight finishes (and registers nothing more)
		u.mu.Lock()
		names := make([]string, 0, len(u.tools))
		for n := range u.tools {
			names = append(names, n)
		}
		u.tools = map[string]*entry{}
		u.mu.Unlock()
		u.refreshMu.Unlock()
		for _, n := range names {
			u.opts.Registry.Withdraw(n)
		}
		u.wg.Wait()
		u.log.Info("upstream closed", "tools_withdrawn", len(names))
	})
	return u.closeErr
}

// Err reports the state of the connection: nil while it is up, ErrClosed after Close,
// an error wrapping ErrConnectionLost once it ended on its own (the server exited or
// hung up) until it is reconnected. Calls of a lost server fail before any watermark
// (unavailable, retryable: upstream_offline, or device_offline for a device); the
// adapter reconnects by itself (see reconnect.go), a device when it dials again
// ([Upstream.Reconnect]).
func (u *Upstream) Err() error {
	_, err := u.session()
	return err
}

// session returns the live client session, or ErrClosed.
func (u *Upstream) session() (*mcp.ClientSession, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch {
	case u.closed || u.cs == nil:
		return nil, ErrClosed
	case u.lost != nil:
		return nil, u.lost
	}
	return u.cs, nil
}

// signal notes a list_changed (method names which); the refresher applies it. It runs on
// the SDK's notification goroutine, so it only records and wakes.
func (u *Upstream) signal(method string) {
	u.mu.Lock()
	u.triggers[method] = true
	u.mu.Unlock()
	select {
	case u.changed <- struct{}{}:
	default:
	}
}

// refresher applies list_changed notifications. The first one of a burst starts a
// RefreshDebounce window; the notifications arriving in it are folded in; then one
// refresh runs. A steady stream of notifications therefore yields at most one refresh
// per window, never none.
func (u *Upstream) refresher() {
	defer u.wg.Done()
	for {
		select {
		case <-u.ctx.Done():
			return
		case <-u.changed:
		}
		t := time.NewTimer(u.opts.RefreshDebounce)
		select {
		case <-u.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		select { // fold a signal that arrived during the window into this refresh
		case <-u.changed:
		default:
		}
		u.mu.Lock()
		triggers := sortedKeys(u.triggers)
		u.triggers = map[string]bool{}
		u.mu.Unlock()
		ctx, cancel := context.WithTimeout(u.ctx, refreshTimeout)
		if err := u.refresh(ctx, triggers); err != nil && u.ctx.Err() == nil {
			u.log.Warn("upstream refresh after list_changed failed; the catalog is unchanged", "error", err)
		}
		cancel()
	}
}

// Refresh lists the server's tools and prompts again and applies the difference (MCP-7):
// a new tool is registered (new sessions see it), a changed one is replaced (sessions
// that pinned it get unavailable/tool_changed), a removed one is withdrawn (pinned
// sessions get unavailable/tool_withdrawn); every difference from the last recorded
// catalog is appended to mcp_catalog_history. A running session's pinned catalog is
// never changed here: only an operator's forced epoch does that. The adapter calls it
// itself on list_changed; calling it by hand is an explicit re-list.
func (u *Upstream) Refresh(ctx context.Context) error {
	if _, err := u.session(); err != nil {
		return err
	}
	return u.refresh(ctx, nil)
}

// refresh re-lists and applies; triggers are the list_changed notifications that caused
// it (none for the first listing and for an explicit Refresh).
func (u *Upstream) refresh(ctx context.Context, triggers []string) error {
	u.refreshMu.Lock()
	defer u.refreshMu.Unlock()
	return u.refreshLocked(ctx, u.current(), triggers, nil, nil)
}

// refreshLocked lists the tools of cs and applies them, under refreshMu. install, when
// set, runs once the listing was accepted (CheckTools) and before anything of it is
// applied: a reconnection makes cs the current session there, and a refused listing
// leaves the old catalog, and the old state, as they were. detail is added to the
// list_changed row, which a reconnection always records.
func (u *Upstream) refreshLocked(ctx context.Context, cs *mcp.ClientSession, triggers []string, detail map[string]any, install func() error) error {
	tools, err := listAll(ctx, func(ctx context.Context, cursor string) ([]*mcp.Tool, string, error) {
		r, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, "", err
		}
		return r.Tools, r.NextCursor, nil
	})
	if err != nil {
		return fmt.Errorf("upstream %s: tools/list: %w", u.id, err)
	}
	if u.opts.CheckTools != nil {
		if tools, err = u.opts.CheckTools(ctx, tools); err != nil {
			return fmt.Errorf("upstream %s: tools/list refused: %w", u.id, err)
		}
	}
	if install != nil {
		if err := install(); err != nil {
			return err
		}
	}
	entries, drops := u.buildCatalog(tools)
	diff, catalogSHA, err := u.apply(ctx, entries, drops)
	if errors.Is(err, ErrClosed) {
		return err
	}
	if len(triggers) > 0 {
		u.recordListChanged(ctx, triggers, diff, catalogSHA, detail, install != nil)
	}
	if serr := u.refreshSkills(ctx); serr != nil {
		u.log.Warn("upstream prompts/list failed; skills unchanged", "error", serr)
	}
	u.mu.Lock()
	u.gen++
	close(u.genCh)
	u.genCh = make(chan struct{})
	u.mu.Unlock()
	return err
}

// recordListChanged appends the list_changed row of one notification-driven refresh, or
// of a reconnection (always, with extra in its detail).
func (u *Upstream) recordListChanged(ctx context.Context, triggers []string, diff map[string][]string, catalogSHA string, extra map[string]any, always bool) {
	if len(diff) == 0 && !always {
		u.mu.Lock()
		quiet := !u.quietAt.IsZero() && time.Since(u.quietAt) < listChangedQuiet
		if !quiet {
			u.quietAt = time.Now()
		}
		u.mu.Unlock()
		if quiet {
			u.log.Debug("upstream list_changed without a difference (not recorded again)", "triggers", triggers)
			return
		}
	}
	detail := map[string]any{"triggers": triggers, "differences": diff, "catalog_sha256": catalogSHA}
	for k, v := range extra {
		detail[k] = v
	}
	c := u.change("", ChangeListChanged, catalogSHA, detail)
	if _, err := u.opts.Store.CatalogHistoryAppend(context.WithoutCancel(ctx), *c); err != nil {
		u.log.Error("recording list_changed in the catalog history failed", "error", err)
	}
}

// listAll pages through a list method, bounded against a server that never stops.
func listAll[T any](ctx context.Context, page func(ctx context.Context, cursor string) ([]*T, string, error)) (out []*T, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("mcp client panicked: %v", r)
		}
	}()
	seen := map[string]bool{}
	cursor := ""
	for pages := 0; ; pages++ {
		if pages >= maxListPages {
			return nil, fmt.Errorf("more than %d pages", maxListPages)
		}
		items, next, err := page(ctx, cursor)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			if it != nil {
				out = append(out, it)
			}
		}
		if len(out) > maxListedItems {
			return nil, fmt.Errorf("more than %d items", maxListedItems)
		}
		if next == "" {
			return out, nil
		}
		if seen[next] {
			return nil, fmt.Errorf("the server repeated cursor %q", short(next))
		}
		seen[next] = true
		cursor = next
	}
}

// refused logs and audits a refused server request or input request (MCP-6).
func (u *Upstream) refused(ctx context.Context, method, how string) {
	u.log.Warn("refused a server request for a client capability (MCP-6)", "method", method, "via", how)
	detail, _ := jsonMarshal(map[string]string{"server_id": u.id, "method": method, "via": how})
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := u.opts.Store.AuditAppend(actx, store.AuditEntry{
		Tenant: u.opts.Tenant, Kind: AuditRequestRefused, Tool: u.domain + "." + u.id, Detail: detail,
	}); err != nil {
		u.log.Error("audit of a refused server request failed", "method", method, "error", err)
	}
}
