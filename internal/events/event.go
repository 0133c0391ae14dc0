package events

import (
	"time"

	"github.com/toolgen/toolgen/runtime/store"
)

// Path is where `toolrun serve --http` serves the stream.
const Path = "/events"

// Event is the wire form of one event: the JSON of its data: line. Empty fields are
// left out. There is no payload field to fill (see the package comment).
type Event struct {
	ID            string    `json:"id"` // the SSE id: the store cursor ("ID" or "TX-ID")
	Kind          string    `json:"kind"`
	At            time.Time `json:"at"` // the database clock at the milestone
	Tenant        string    `json:"tenant,omitempty"`
	SessionID     string    `json:"session_id,omitempty"`
	RunID         string    `json:"run_id,omitempty"`
	InvocationID  int64     `json:"invocation_id,omitempty"`
	Step          int       `json:"step,omitempty"`
	CallID        string    `json:"call_id,omitempty"`
	Tool          string    `json:"tool,omitempty"`
	Status        string    `json:"status,omitempty"`
	ReasonCode    string    `json:"reason_code,omitempty"`
	Mode          string    `json:"mode,omitempty"`
	Decision      string    `json:"decision,omitempty"`
	Idempotency   string    `json:"idempotency,omitempty"`
	OriginTrust   string    `json:"origin_trust,omitempty"`
	ArgumentTrust string    `json:"argument_trust,omitempty"`
	Attempt       int       `json:"attempt,omitempty"`
	Server        string    `json:"server,omitempty"` // catalog_drift: the server; device_*: the device
	Change        string    `json:"change,omitempty"` // catalog_drift: added, removed, changed, ...
	// DurationUS is a settled or uncertain call's time from its record to its
	// settlement, in microseconds (absent when it was recorded already settled).
	DurationUS *int64 `json:"duration_us,omitempty"`
}

// FromStore is the wire form of e.
func FromStore(e store.Event) Event {
	out := Event{
		ID: e.Cursor.String(), Kind: e.Kind, At: e.At.UTC(), Tenant: e.Tenant, SessionID: e.SessionID, RunID: e.RunID,
		InvocationID: e.InvocationID, Step: e.Step, CallID: e.CallID, Tool: e.Tool, Status: e.Status,
		ReasonCode: e.ReasonCode, Mode: e.Mode, Decision: e.Decision, Idempotency: e.Idempotency,
		OriginTrust: e.OriginTrust, ArgumentTrust: e.ArgumentTrust, Attempt: e.Attempt, Server: e.Server,
		Change: e.Change,
	}
	if e.Duration != nil {
		us := e.Duration.Microseconds()
		out.DurationUS = &us
	}
	return out
}

// Filter selects the events of a stream; every empty field is "any".
type Filter struct {
	Tenant    string
	SessionID string
	RunID     string
}
