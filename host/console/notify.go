package console

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolgen/toolgen/internal/events"
	"github.com/toolgen/toolgen/model"
	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

// Headers of a webhook message.
const (
	// SignatureHeader carries "t=UNIX,v1=HEX": HEX is the HMAC-SHA256, keyed with the
	// webhook's secret, of UNIX, ".", and the body. VerifySignature checks it.
	SignatureHeader = "X-Toolgen-Signature"
	// DeliveryHeader names the message: WEBHOOK:EVENT_ID, the same on every retry, so a
	// receiver can drop a retry of a message it already took.
	DeliveryHeader = "X-Toolgen-Delivery"
	// EventHeader is the event kind: held or uncertain.
	EventHeader = "X-Toolgen-Event"
)

// Message is the body of a json-format webhook message: the event's classification
// (the same fields as the event stream, EV-1) and where to review it. It has no field
// for arguments, results or remote text.
type Message struct {
	Type     string       `json:"type"` // toolgen.call.held or toolgen.call.uncertain
	Delivery string       `json:"delivery"`
	Event    events.Event `json:"event"`
	// HeldBecause says which check held the call (held only, when recorded): the
	// cause (a runtime.Hold* constant) and the operator rule's name.
	HeldBecause *HeldBecause `json:"held_because,omitempty"`
	// ConsoleURL links to the call in the console (with notifications.yaml's
	// console_url); ConsolePath is the link's path, always.
	ConsoleURL  string `json:"console_url,omitempty"`
	ConsolePath string `json:"console_path"`
}

// HeldBecause is the classification of why a call was held.
type HeldBecause struct {
	Cause string `json:"cause"`
	Rule  string `json:"rule,omitempty"`
}

// NotifierStore is what a Notifier asks of the store: the event stream it follows,
// the calls its messages describe, and the claims (deployment secrets) that make each
// message go out once.
type NotifierStore interface {
	store.Events
	store.Invocations
	store.DeploymentSecrets
}

// NotifierOptions configure NewNotifier.
type NotifierOptions struct {
	Notifications *model.Notifications
	// Store is followed (EventList) and holds the claims that make each message go
	// out once, whichever process on the store sends it.
	Store NotifierStore
	// Operator, when set, says why a held call was held (HoldReason).
	Operator Operator
	// Getenv reads the webhooks' url_env and secret_env (default os.Getenv).
	Getenv func(string) string
	// HTTPClient sends the messages (default: a client that follows no redirect).
	HTTPClient *http.Client
	// Poll is how often the stream is read when caught up (default DefaultNotifyPoll).
	Poll time.Duration
	// RetryBase and RetryMax shape the backoff between attempts: the n-th retry waits
	// a random time in [d/2, d], d = min(RetryBase × 2^(n-1), RetryMax) (defaults 1 s
	// and 1 min).
	RetryBase, RetryMax time.Duration
	Logger              *slog.Logger
}

// Defaults of NotifierOptions.
const (
	DefaultNotifyPoll = 500 * time.Millisecond
	DefaultRetryBase  = time.Second
	DefaultRetryMax   = time.Minute
	// deliveryWorkers send messages concurrently; the follower waits when they are
	// all busy and deliveryQueue is full, so memory stays bounded (SEC-2).
	deliveryWorkers = 4
	deliveryQueue   = 64
)

// Notifier follows the store's event stream and tells the webhooks of held and
// UNCERTAIN calls. Every process on a store runs one; each message is claimed on the
// store before it is sent (a row per webhook and event, first writer wins), so the
// processes send it once between them.
type Notifier struct {
	o     NotifierOptions
	hooks []*hook
	token []byte // this notifier's claim value
	queue chan delivery
	wg    sync.WaitGroup
}

type hook struct {
	w      *model.Webhook
	url    string
	secret []byte
	events []string
}

type delivery struct {
	h  *hook
	ev store.Event
}

// NewNotifier resolves the webhooks' URLs and secrets from the environment; a
// variable that is unset is an error naming it.
func NewNotifier(o NotifierOptions) (*Notifier, error) {
	if o.Store == nil || o.Notifications == nil {
		return nil, errors.New("console: a notifier needs a store and notifications")
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if o.Poll <= 0 {
		o.Poll = DefaultNotifyPoll
	}
	if o.RetryBase <= 0 {
		o.RetryBase = DefaultRetryBase
	}
	if o.RetryMax <= 0 {
		o.RetryMax = DefaultRetryMax
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	n := &Notifier{o: o, token: make([]byte, 32), queue: make(chan delivery, deliveryQueue)}
	rand.Read(n.token)
	for _, w := range o.Notifications.Webhooks {
		h := &hook{w: w, url: w.URL, events: w.EventNames()}
		if w.URLEnv != "" {
			if h.url = o.Getenv(w.URLEnv); h.url == "" {
				return nil, fmt.Errorf("%s: webhook %s: the environment variable %s (url_env) is not set", model.NotificationsFile, w.Name, w.URLEnv)
			}
		}
		if w.SecretEnv != "" {
			s := o.Getenv(w.SecretEnv)
			if len(s) < 16 {
				return nil, fmt.Errorf("%s: webhook %s: the environment variable %s (secret_env) must hold a key of at least 16 bytes", model.NotificationsFile, w.Name, w.SecretEnv)
			}
			h.secret = []byte(s)
		}
		n.hooks = append(n.hooks, h)
	}
	return n, nil
}

// Start finds the end of the event stream, then follows it until ctx ends: what
// happened before Start is not notified (another process told of it, or nobody ran).
func (n *Notifier) Start(ctx context.Context) error {
	cur, err := LastEventCursor(ctx, n.o.Store)
	if err != nil {
		return fmt.Errorf("console: the event stream's end: %w", err)
	}
	for range deliveryWorkers {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			for d := range n.queue {
				n.deliver(ctx, d)
			}
		}()
	}
	go func() {
		defer close(n.queue)
		n.follow(ctx, cur)
	}()
	return nil
}

// Wait returns when the notifier's deliveries have ended (after its context did).
func (n *Notifier) Wait() { n.wg.Wait() }

func (n *Notifier) follow(ctx context.Context, cur store.EventCursor) {
	const page = 200
	for {
		evs, err := n.o.Store.EventList(ctx, store.EventFilter{After: cur, Limit: page})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			n.o.Logger.Warn("notifications: reading the event stream", "err", err)
		}
		for _, ev := range evs {
			cur = ev.Cursor
			if ev.Kind != model.WebhookEventHeld && ev.Kind != model.WebhookEventUncertain {
				continue
			}
			for _, h := range n.hooks {
				if !slices.Contains(h.events, ev.Kind) || (h.w.Tenants != nil && !slices.Contains(h.w.TenantNames(), ev.Tenant)) {
					continue
				}
				won, err := n.claim(ctx, h, ev)
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					n.o.Logger.Error("notifications: claiming a message; it is not sent", "webhook", h.w.Name, "event", ev.Cursor.String(), "err", err)
					continue
				}
				if !won {
					continue // another process on the store sends it
				}
				select {
				case n.queue <- delivery{h: h, ev: ev}:
				case <-ctx.Done():
					return
				}
			}
		}
		if len(evs) == page {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(n.o.Poll):
		}
	}
}

// claim records, once on the store, that this notifier sends h's message of ev: the
// first process to write the claim row wins and every other reads the winner's value.
// The row is a deployment secret's (the store's one first-writer-wins table), under a
// name of its own; it holds this notifier's random token.
func (n *Notifier) claim(ctx context.Context, h *hook, ev store.Event) (bool, error) {
	got, err := n.o.Store.DeploymentSecretGetOrCreate(ctx, "webhook-delivery:"+deliveryID(h, ev), n.token)
	if err != nil {
		return false, err
	}
	return hmac.Equal(got, n.token), nil
}

func deliveryID(h *hook, ev store.Event) string { return h.w.Name + ":" + ev.Cursor.String() }

// deliver sends one message, retrying a failure up to the webhook's max_attempts with
// jittered exponential backoff. A 4xx answer other than 408 and 429 is not retried:
// the receiver refused the message itself.
func (n *Notifier) deliver(ctx context.Context, d delivery) {
	body, err := n.body(ctx, d)
	if err != nil {
		n.o.Logger.Error("notifications: building a message", "webhook", d.h.w.Name, "err", err)
		return
	}
	for attempt := 1; ; attempt++ {
		retry, wait, err := n.send(ctx, d, body)
		if err == nil {
			return
		}
		if !retry || attempt >= d.h.w.MaxAttempts || ctx.Err() != nil {
			n.o.Logger.Warn("notifications: a message was not delivered", "webhook", d.h.w.Name,
				"delivery", deliveryID(d.h, d.ev), "attempts", attempt, "err", err)
			return
		}
		if wait <= 0 {
			wait = backoff(n.o.RetryBase, n.o.RetryMax, attempt)
		}
		n.o.Logger.Info("notifications: retrying a message", "webhook", d.h.w.Name, "attempt", attempt, "wait", wait, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// backoff is the wait before retry n: a random time in [d/2, d], d = min(base × 2^(n-1), max).
func backoff(base, max time.Duration, n int) time.Duration {
	d := base
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	d = min(d, max)
	j, err := rand.Int(rand.Reader, big.NewInt(int64(d/2)+1))
	if err != nil {
		return d
	}
	return d/2 + time.Duration(j.Int64())
}

func (n *Notifier) send(ctx context.Context, d delivery, body []byte) (retry bool, wait time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, d.h.w.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.h.url, bytes.NewReader(body))
	if err != nil {
		return false, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "toolgen-webhook/1")
	req.Header.Set(DeliveryHeader, deliveryID(d.h, d.ev))
	req.Header.Set(EventHeader, d.ev.Kind)
	if d.h.secret != nil {
		req.Header.Set(SignatureHeader, Sign(d.h.secret, time.Now(), body))
	}
	resp, err := n.o.HTTPClient.Do(req)
	if err != nil {
		return true, 0, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return false, 0, nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode >= 500:
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			wait = min(time.Duration(s)*time.Second, n.o.RetryMax)
		}
		return true, wait, fmt.Errorf("the receiver answered %s", resp.Status)
	}
	return false, 0, fmt.Errorf("the receiver answered %s (not retried)", resp.Status)
}

// body is d's message in its webhook's format.
func (n *Notifier) body(ctx context.Context, d delivery) ([]byte, error) {
	path := fmt.Sprintf("%s/invocations/%d", Path, d.ev.InvocationID)
	m := Message{Type: "toolgen.call." + d.ev.Kind, Delivery: deliveryID(d.h, d.ev), Event: events.FromStore(d.ev), ConsolePath: path}
	if base := n.o.Notifications.ConsoleURL; base != "" {
		m.ConsoleURL = base + path
	}
	if d.ev.Kind == model.WebhookEventHeld && n.o.Operator != nil {
		m.HeldBecause = n.heldBecause(ctx, d.ev)
	}
	if d.h.w.Format == model.WebhookFormatSlack {
		return marshal(slackBody(m))
	}
	return marshal(m)
}

// marshal is JSON without HTML escaping (a receiver reads "<", not "\u003c").
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// heldBecause reads the hold's recorded cause (written just after the held row, in a
// commit of its own: a short wait covers the gap).
func (n *Notifier) heldBecause(ctx context.Context, ev store.Event) *HeldBecause {
	actor := runtime.Principal{ID: "toolgen-notifier", Tenant: ev.Tenant}
	for try := 0; try < 5; try++ {
		inv, err := n.o.Store.InvocationGet(ctx, ev.InvocationID)
		if err != nil {
			return nil
		}
		if hr, ok, err := n.o.Operator.HoldReason(ctx, actor, inv); err == nil && ok {
			return &HeldBecause{Cause: hr.Cause, Rule: hr.Rule}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

// slackBody is m as a Slack incoming-webhook body (text, with blocks).
func slackBody(m Message) map[string]any {
	esc := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace
	e := m.Event
	what := "A call is held for approval"
	if e.Kind == model.WebhookEventUncertain {
		what = "A call is UNCERTAIN: its effect may have happened"
	}
	text := fmt.Sprintf("%s: `%s` #%d in tenant %s (session %s, run %s", what, esc(e.Tool), e.InvocationID, esc(e.Tenant), esc(e.SessionID), esc(e.RunID))
	if e.Mode != "" {
		text += ", mode " + esc(e.Mode)
	}
	text += ")."
	if m.HeldBecause != nil {
		text += " Held by " + esc(causeText(m.HeldBecause.Cause, m.HeldBecause.Rule)) + "."
	}
	link := m.ConsolePath
	if m.ConsoleURL != "" {
		link = "<" + m.ConsoleURL + "|Review it in the console>"
	}
	return map[string]any{
		"text": text + " " + link,
		"blocks": []any{
			map[string]any{"type": "section", "text": map[string]any{"type": "mrkdwn", "text": text}},
			map[string]any{"type": "context", "elements": []any{map[string]any{"type": "mrkdwn", "text": link}}},
		},
	}
}

// Sign is the SignatureHeader value of body signed with secret at t.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

// VerifySignature checks a SignatureHeader value against body and secret, and that
// its time is within tolerance of now (a replayed old message fails).
func VerifySignature(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sig == "" {
		return errors.New("malformed signature header")
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return errors.New("signature too old or from the future")
	}
	want, err := hex.DecodeString(sig)
	if err != nil {
		return errors.New("malformed signature")
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	if !hmac.Equal(mac.Sum(nil), want) {
		return errors.New("signature does not match")
	}
	return nil
}
