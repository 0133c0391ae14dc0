package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/toolgen/toolgen/runtime/store"
)

var (
	eventAppendSQL = queries.Get("EventAppend")
	eventListSQL   = queries.Get("EventList")
	eventAppend    = compile(eventAppendSQL, "kind", "tenant", "session_id", "run_id", "invocation_id", "step_number",
		"call_id", "tool", "status", "reason_code", "mode", "decision", "idempotency", "origin_trust", "argument_trust",
		"attempt", "server_id", "change", "duration_us")
	eventList = compile(eventListSQL, "after_tx", "after_id", "tenant", "session_id", "run_id", "lim")
)

func (s *Store) EventAppend(ctx context.Context, e store.Event) (int64, error) {
	if err := e.Validate(); err != nil {
		return 0, err
	}
	var invocation, duration *int64 // NULL unless set
	if e.InvocationID != 0 {
		invocation = &e.InvocationID
	}
	if e.Duration != nil {
		us := e.Duration.Microseconds()
		duration = &us
	}
	var id int64
	err := s.queryRow(ctx, eventAppend, e.Kind, e.Tenant, e.SessionID, e.RunID, invocation, e.Step, e.CallID, e.Tool,
		e.Status, e.ReasonCode, e.Mode, e.Decision, e.Idempotency, e.OriginTrust, e.ArgumentTrust, e.Attempt,
		e.Server, e.Change, duration).Scan(&id)
	return id, err
}

func (s *Store) EventList(ctx context.Context, f store.EventFilter) ([]store.Event, error) {
	if f.After.TX < 0 || f.After.ID < 0 {
		return nil, fmt.Errorf("%w: event cursor %d-%d", store.ErrInvalid, f.After.TX, f.After.ID)
	}
	rows, err := s.pool.Query(ctx, eventList.sql, f.After.TX, f.After.ID, f.Tenant, f.SessionID, f.RunID, sqlLimit(f.Limit))
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	var out []store.Event
	for rows.Next() {
		var e store.Event
		var invocation, duration *int64
		if err := rows.Scan(&e.Cursor.TX, &e.Cursor.ID, &e.Kind, &e.Tenant, &e.SessionID, &e.RunID, &invocation,
			&e.Step, &e.CallID, &e.Tool, &e.Status, &e.ReasonCode, &e.Mode, &e.Decision, &e.Idempotency,
			&e.OriginTrust, &e.ArgumentTrust, &e.Attempt, &e.Server, &e.Change, &duration, &e.At); err != nil {
			return nil, err
		}
		if invocation != nil {
			e.InvocationID = *invocation
		}
		if duration != nil {
			d := time.Duration(*duration) * time.Microsecond
			e.Duration = &d
		}
		e.At = e.At.UTC()
		out = append(out, e)
	}
	return out, mapErr(rows.Err())
}
