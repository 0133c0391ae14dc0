package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/toolgen/toolgen/runtime/store"
)

// The events of invocations and of the catalog history are written by the triggers of
// migration 003, in the statement that writes the milestone; only the events no row
// reports come through EventAppend.

func (s *Store) EventAppend(ctx context.Context, e store.Event) (int64, error) {
	if err := e.Validate(); err != nil {
		return 0, err
	}
	var invocation, duration any // NULL unless set
	if e.InvocationID != 0 {
		invocation = e.InvocationID
	}
	if e.Duration != nil {
		duration = e.Duration.Microseconds()
	}
	var id int64
	err := toEnd(s.w.eventAppend.QueryContext(ctx, sql.Named("kind", e.Kind), sql.Named("tenant", e.Tenant),
		sql.Named("session_id", e.SessionID), sql.Named("run_id", e.RunID), sql.Named("invocation_id", invocation),
		sql.Named("step_number", e.Step), sql.Named("call_id", e.CallID), sql.Named("tool", e.Tool),
		sql.Named("status", e.Status), sql.Named("reason_code", e.ReasonCode), sql.Named("mode", e.Mode),
		sql.Named("decision", e.Decision), sql.Named("idempotency", e.Idempotency),
		sql.Named("origin_trust", e.OriginTrust), sql.Named("argument_trust", e.ArgumentTrust),
		sql.Named("attempt", e.Attempt), sql.Named("server_id", e.Server), sql.Named("change", e.Change),
		sql.Named("duration_us", duration))).Scan(&id)
	if err == nil {
		s.hub.NotifyTopics(store.EventsTopic(e.Tenant))
	}
	return id, mapErr(err)
}

func (s *Store) EventList(ctx context.Context, f store.EventFilter) ([]store.Event, error) {
	if f.After.TX != 0 {
		// A PostgreSQL cursor: on SQLite every event has tx 0, so it would select nothing, forever.
		return nil, fmt.Errorf("%w: event cursor %s is not a SQLite cursor (an event id)", store.ErrInvalid, f.After)
	}
	rows, err := s.r.eventList.QueryContext(ctx, sql.Named("after_id", f.After.ID), sql.Named("tenant", f.Tenant),
		sql.Named("session_id", f.SessionID), sql.Named("run_id", f.RunID), sql.Named("limit", sqlLimit(f.Limit)))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Event
	for rows.Next() {
		var e store.Event
		var invocation, duration sql.NullInt64
		var at int64
		if err := rows.Scan(&e.Cursor.TX, &e.Cursor.ID, &e.Kind, &e.Tenant, &e.SessionID, &e.RunID, &invocation,
			&e.Step, &e.CallID, &e.Tool, &e.Status, &e.ReasonCode, &e.Mode, &e.Decision, &e.Idempotency,
			&e.OriginTrust, &e.ArgumentTrust, &e.Attempt, &e.Server, &e.Change, &duration, &at); err != nil {
			return nil, err
		}
		e.InvocationID = invocation.Int64
		if duration.Valid {
			d := time.Duration(duration.Int64) * time.Microsecond
			e.Duration = &d
		}
		e.At = fromMicros(at)
		out = append(out, e)
	}
	return out, rows.Err()
}
