package model

import (
	"slices"
	"time"
)

// NotificationsFile is the operator's file of notifications (issue 18, UI-1), named in
// the run time's messages about it.
const NotificationsFile = "notifications.yaml"

// Webhook formats.
const (
	WebhookFormatJSON  = "json"  // toolgen's own message (classification only), signed
	WebhookFormatSlack = "slack" // a Slack-compatible incoming-webhook body
)

// Webhook events: the milestones a webhook may be told of (store event kinds).
const (
	WebhookEventHeld      = "held"
	WebhookEventUncertain = "uncertain"
)

// WebhookEvents are every event a webhook may be told of: what it is told of when its
// file names none.
var WebhookEvents = []string{WebhookEventHeld, WebhookEventUncertain}

// Notifications is notifications.yaml: where the reviewers of held and UNCERTAIN calls
// are told of them. A message carries the call's classification and a link to the
// console, never its arguments, results or remote text (EV-1).
type Notifications struct {
	File string
	// ConsoleURL is the base URL reviewers reach this server's console at: a message
	// links to ConsoleURL + /console/.... Empty: messages carry the console path only.
	ConsoleURL string
	Webhooks   []*Webhook
}

// Webhook is one receiver of notifications.
type Webhook struct {
	// Name identifies the webhook in logs and in the dedupe of deliveries across the
	// processes on one store.
	Name        string
	Description string
	// Exactly one of URL and URLEnv (the environment variable holding it) is set.
	URL    string
	URLEnv string
	// Format is WebhookFormatJSON or WebhookFormatSlack.
	Format string
	// SecretEnv names the environment variable holding the HMAC-SHA256 key every
	// message is signed with (X-Toolgen-Signature); "" for an unsigned webhook.
	SecretEnv string
	// Events the webhook is told of; empty: every one of WebhookEvents.
	Events []string
	// Tenants whose calls the webhook is told of; nil: every tenant's.
	Tenants []string
	// MaxAttempts bounds the deliveries of one message (the first and its retries);
	// Timeout bounds each.
	MaxAttempts int
	Timeout     time.Duration
}

// EventNames are the events the webhook is told of.
func (w *Webhook) EventNames() []string {
	if len(w.Events) == 0 {
		return slices.Clone(WebhookEvents)
	}
	return slices.Clone(w.Events)
}

// TenantNames are the tenants the webhook is told of; nil for every tenant.
func (w *Webhook) TenantNames() []string {
	if w.Tenants == nil {
		return nil
	}
	out := make([]string, len(w.Tenants))
	copy(out, w.Tenants)
	return out
}

// Signed reports whether the webhook's messages carry a signature.
func (w *Webhook) Signed() bool { return w.SecretEnv != "" }
