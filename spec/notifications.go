package spec

import (
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/toolgen/toolgen/model"
)

// NotificationsFile is the operator's file of notifications (issue 18, UI-1): the
// webhooks told when a call is held for approval or goes UNCERTAIN.
const NotificationsFile = model.NotificationsFile

// Webhook formats.
const (
	WebhookFormatJSON  = model.WebhookFormatJSON  // toolgen's own message (classification only), signed
	WebhookFormatSlack = model.WebhookFormatSlack // a Slack-compatible incoming-webhook body
)

// Webhook events: the milestones a webhook may be told of (store event kinds).
const (
	WebhookEventHeld      = model.WebhookEventHeld
	WebhookEventUncertain = model.WebhookEventUncertain
)

// Bounds of a webhook's delivery.
const (
	DefaultWebhookAttempts = 5
	MaxWebhookAttempts     = 10
	DefaultWebhookTimeout  = 10 * time.Second
	MaxWebhookTimeout      = time.Minute
)

var (
	notificationsKeys = []string{"console_url", "webhooks"}
	webhookKeys       = []string{"name", "description", "url", "url_env", "format", "secret_env", "events", "tenants", "max_attempts", "timeout"}
	// WebhookFormats and WebhookEvents are the values format and events accept.
	WebhookFormats = []string{WebhookFormatJSON, WebhookFormatSlack}
	WebhookEvents  = []string{WebhookEventHeld, WebhookEventUncertain}
	webhookName    = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)
)

// Notifications is notifications.yaml: where the reviewers of held and UNCERTAIN calls
// are told of them. A message carries the call's classification and a link to the
// console, never its arguments, results or remote text (EV-1).
type Notifications struct {
	File string
	// ConsoleURL is the base URL reviewers reach this server's console at
	// (https://toolgen.example.com): a message links to ConsoleURL + /console/....
	// Empty: messages carry the console path only.
	ConsoleURL string
	Webhooks   []*Webhook

	Positions // of the document's keys
}

// Webhook is one receiver of notifications.
type Webhook struct {
	// Name identifies the webhook in logs, in the dedupe of deliveries across the
	// processes on one store, and in `toolgen diff`.
	Name        string
	Description string
	// Exactly one of URL (in the file) and URLEnv (the environment variable holding it,
	// for a URL that is itself a secret, as a Slack incoming webhook's is) is set.
	URL    string
	URLEnv string
	// Format is WebhookFormatJSON (default) or WebhookFormatSlack.
	Format string
	// SecretEnv names the environment variable holding the HMAC-SHA256 key every
	// message is signed with (X-Toolgen-Signature). Required for the json format.
	SecretEnv string
	// Events the webhook is told of (default both WebhookEvents).
	Events []Ref
	// Tenants whose calls the webhook is told of; nil: every tenant's.
	Tenants []Ref
	// MaxAttempts bounds the deliveries of one message (the first and its retries);
	// Timeout bounds each.
	MaxAttempts int
	Timeout     time.Duration

	Pos       Pos
	Positions // of the entry's keys
}

// EventNames are the events the webhook is told of.
func (w *Webhook) EventNames() []string {
	if len(w.Events) == 0 {
		return slices.Clone(WebhookEvents)
	}
	out := make([]string, len(w.Events))
	for i, e := range w.Events {
		out[i] = e.Name
	}
	return out
}

// TenantNames are the tenants the webhook is told of; nil for every tenant.
func (w *Webhook) TenantNames() []string {
	if w.Tenants == nil {
		return nil
	}
	out := make([]string, len(w.Tenants))
	for i, t := range w.Tenants {
		out[i] = t.Name
	}
	return out
}

// Signed reports whether the webhook's messages carry a signature.
func (w *Webhook) Signed() bool { return w.SecretEnv != "" }

// LoadNotifications parses and checks notifications.yaml.
func LoadNotifications(rel, display string, data []byte) (*Notifications, Diagnostics) {
	var diags Diagnostics
	n := loadNotifications(reporter{path: display, diags: &diags}, rel, data)
	return n, diags
}

// webURL reports whether v is an absolute https URL (http only on loopback, for tests)
// without user information.
func webURL(v string) (*url.URL, bool) {
	u, err := url.Parse(v)
	if err != nil || u.Host == "" || u.User != nil || u.Scheme != "https" && !(u.Scheme == "http" && loopbackHost(u.Hostname())) {
		return nil, false
	}
	return u, true
}

func loadNotifications(r reporter, rel string, data []byte) *Notifications {
	root := parseDocument(r, data)
	if root == nil {
		return nil
	}
	m := r.asMapping(root, "notifications", notificationsKeys...)
	if m == nil {
		return nil
	}
	n := &Notifications{File: rel, Positions: Positions{m}}
	if v, ok := m.str("console_url"); ok {
		if u, ok := webURL(v); !ok || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			r.errorf(m.at("console_url"), "UI-1.console-url", "console_url %q must be the server's base URL, https://HOST[:PORT] without a path (http only on loopback, for tests): links add /console/...", v)
		} else {
			n.ConsoleURL = strings.TrimSuffix(v, "/")
		}
	}
	if !m.has("webhooks") {
		return n
	}
	list := m.get("webhooks")
	if list.Kind != yaml.SequenceNode {
		r.errorf(posOf(list), "schema.not-a-list", "webhooks must be a list, found %s", kindName(list))
		return n
	}
	names := map[string]Pos{}
	for _, e := range list.Content {
		w := loadWebhook(r, e)
		if w == nil {
			continue
		}
		if first, dup := names[w.Name]; dup && w.Name != "" {
			r.errorf(w.Positions.At("name"), "UI-1.webhook-duplicate", "webhook %s is declared twice (first at line %d)", w.Name, first.Line)
		} else {
			names[w.Name] = w.Positions.At("name")
		}
		n.Webhooks = append(n.Webhooks, w)
	}
	return n
}

func loadWebhook(r reporter, n *yaml.Node) *Webhook {
	m := r.asMapping(n, "webhook", webhookKeys...)
	if m == nil {
		return nil
	}
	w := &Webhook{Pos: posOf(n), Positions: Positions{m}, Format: WebhookFormatJSON,
		MaxAttempts: DefaultWebhookAttempts, Timeout: DefaultWebhookTimeout}
	if v, ok := m.requiredStr("name", "webhook"); ok {
		if !webhookName.MatchString(v) {
			r.errorf(m.at("name"), "UI-1.webhook-name", "webhook name %q must match %s", v, webhookName)
		}
		w.Name = v
	}
	w.Description, _ = m.str("description")
	u, hasURL := m.str("url")
	env, hasEnv := m.str("url_env")
	switch {
	case hasURL == hasEnv:
		r.errorf(posOf(n), "UI-1.webhook-url-or-env", "a webhook needs exactly one of url and url_env")
	case hasURL:
		if x, ok := webURL(u); !ok || x.Fragment != "" {
			r.errorf(m.at("url"), "UI-1.webhook-url", "url %q must be an absolute https URL without user or fragment (http only on loopback, for tests)", u)
		}
		w.URL = u
	default:
		if !envName.MatchString(env) {
			r.errorf(m.at("url_env"), "UI-1.env-name", "url_env %q must name an environment variable (%s)", env, envName)
		}
		w.URLEnv = env
	}
	if v, ok := m.oneOf("format", "UI-1", WebhookFormats...); ok {
		w.Format = v
	}
	if v, ok := m.str("secret_env"); ok {
		if !envName.MatchString(v) {
			r.errorf(m.at("secret_env"), "UI-1.env-name", "secret_env %q must name an environment variable (%s): the secret itself is never in a spec file", v, envName)
		}
		w.SecretEnv = v
	} else if w.Format == WebhookFormatJSON {
		r.errorf(posOf(n), "UI-1.webhook-unsigned", "webhook %s: the json format is signed: name the environment variable holding its HMAC key in secret_env", w.Name)
	}
	if m.has("events") {
		if list, ok := m.strList("events"); ok {
			if len(list) == 0 {
				r.errorf(m.at("events"), "UI-1.events-empty", "events cannot be empty: a webhook told of nothing is no webhook")
			}
			seen := map[string]bool{}
			for _, e := range list {
				switch {
				case !slices.Contains(WebhookEvents, e.Name):
					r.errorf(e.Pos, "UI-1.event-unknown", "event %q must be one of %s", e.Name, strings.Join(WebhookEvents, ", "))
				case seen[e.Name]:
					r.errorf(e.Pos, "UI-1.event-duplicate", "event %s is listed twice", e.Name)
				}
				seen[e.Name] = true
			}
			w.Events = list
		}
	}
	if m.has("tenants") {
		if list, ok := m.strList("tenants"); ok {
			if len(list) == 0 {
				r.errorf(m.at("tenants"), "UI-1.tenants-empty", "tenants cannot be empty: leave it out for every tenant")
			}
			seen := map[string]bool{}
			for _, t := range list {
				switch {
				case !tenantName.MatchString(t.Name):
					r.errorf(t.Pos, "UI-1.tenant-name", "tenant %q must match %s", t.Name, tenantName)
				case seen[t.Name]:
					r.errorf(t.Pos, "UI-1.tenant-duplicate", "tenant %s is listed twice", t.Name)
				}
				seen[t.Name] = true
			}
			w.Tenants = list
		}
	}
	if v, ok := m.integer("max_attempts"); ok {
		if v < 1 || v > MaxWebhookAttempts {
			r.errorf(m.at("max_attempts"), "UI-1.max-attempts", "max_attempts must be between 1 and %d, found %d", MaxWebhookAttempts, v)
		} else {
			w.MaxAttempts = int(v)
		}
	}
	if s, ok := m.str("timeout"); ok {
		d, err := time.ParseDuration(s)
		switch {
		case err != nil:
			r.errorf(m.at("timeout"), "schema.duration", "timeout %q is not a duration such as 10s", s)
		case d <= 0 || d > MaxWebhookTimeout:
			r.errorf(m.at("timeout"), "UI-1.timeout-range", "timeout must be more than 0 and at most %s, found %s", MaxWebhookTimeout, s)
		default:
			w.Timeout = d
		}
	}
	return w
}

// checkNotificationTenants reports a webhook tenant no principal of principals.yaml
// belongs to (a typo would silently send that tenant's reviewers nothing).
func checkNotificationTenants(t *Tree, disp func(string) string, diags *Diagnostics) {
	if t.Notifications == nil || t.Principals == nil {
		return
	}
	known := map[string]bool{}
	for _, list := range [][]*StaticPrincipal{t.Principals.Tokens, t.Principals.Local} {
		for _, p := range list {
			known[p.Tenant] = true
		}
	}
	for _, is := range t.Principals.Issuers {
		for _, name := range is.TenantNames() {
			known[name] = true
		}
	}
	for _, w := range t.Notifications.Webhooks {
		for _, tn := range w.Tenants {
			if tenantName.MatchString(tn.Name) && !known[tn.Name] {
				*diags = append(*diags, NewDiagnostic(disp(t.Notifications.File), tn.Pos, "UI-1.tenant-unknown",
					"webhook "+w.Name+": no principal of "+PrincipalsFile+" is of tenant "+tn.Name))
			}
		}
	}
}
