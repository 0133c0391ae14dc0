package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/toolgen/toolgen/runtime/store"
)

// Store is the PostgreSQL implementation of [store.Store].
type Store struct {
	pool   *pool
	schema string // "" for the DSN's search_path
}

var _ store.Store = (*Store)(nil)

// Option configures [Open].
type Option func(*options)

type options struct {
	schema   string
	maxConns int
}

// WithSchema keeps every table in schema (created if missing): the connections'
// search_path is set to it. Tests use a fresh schema each.
func WithSchema(schema string) Option {
	return func(o *options) { o.schema = schema }
}

// WithMaxConns bounds the pool (default max(4, NumCPU)).
func WithMaxConns(n int) Option {
	return func(o *options) { o.maxConns = n }
}

// Open connects to the database at dsn (a pgx connection string) and applies the
// embedded migrations. synchronous_commit is left on (the server default) and
// refused if the DSN turns it off: a watermark must be durable before the effect.
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	o := options{maxConns: max(4, runtime.NumCPU())}
	for _, opt := range opts {
		opt(&o)
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if v, ok := cfg.RuntimeParams["synchronous_commit"]; ok && v != "on" && v != "remote_apply" && v != "remote_write" {
		return nil, fmt.Errorf("postgres: synchronous_commit=%s: the store needs durable commits", v)
	}
	if o.schema != "" {
		cfg.RuntimeParams["search_path"] = pgx.Identifier{o.schema}.Sanitize()
	}
	pl, err := newPool(ctx, cfg, o.maxConns)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	s := &Store{pool: pl, schema: o.schema}
	if err := s.migrateUp(ctx); err != nil {
		s.pool.close()
		return nil, err
	}
	return s, nil
}

// Close closes the pool's connections.
func (s *Store) Close() error {
	s.pool.close()
	return nil
}

// queryRow runs one statement and scans its single row.
func (s *Store) queryRow(ctx context.Context, query string, args pgx.NamedArgs, dest ...any) error {
	return s.pool.do(ctx, func(conn *pgx.Conn) error {
		return mapErr(conn.QueryRow(ctx, query, args).Scan(dest...))
	})
}

// exec runs one statement and returns the number of rows it wrote.
func (s *Store) exec(ctx context.Context, query string, args pgx.NamedArgs) (int64, error) {
	var n int64
	err := s.pool.do(ctx, func(conn *pgx.Conn) error {
		tag, err := conn.Exec(ctx, query, args)
		n = tag.RowsAffected()
		return mapErr(err)
	})
	return n, err
}

func (s *Store) exists(ctx context.Context, query string, args pgx.NamedArgs) (bool, error) {
	var ok bool
	err := s.queryRow(ctx, query, args, &ok)
	return ok, err
}

func (s *Store) invocation(ctx context.Context, query string, args pgx.NamedArgs) (*store.Invocation, error) {
	var inv *store.Invocation
	err := s.pool.do(ctx, func(conn *pgx.Conn) error {
		var err error
		inv, err = scanInvocation(conn.QueryRow(ctx, query, args))
		return err
	})
	return inv, err
}

func (s *Store) invocations(ctx context.Context, query string, args pgx.NamedArgs) ([]*store.Invocation, error) {
	var out []*store.Invocation
	err := s.pool.do(ctx, func(conn *pgx.Conn) error {
		rows, err := conn.Query(ctx, query, args)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			inv, err := scanInvocation(rows)
			if err != nil {
				return err
			}
			out = append(out, inv)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Writing methods below are one statement each (autocommit: one commit). A
// statement that matched nothing may be followed by a read that explains why.

func (s *Store) InvocationInsert(ctx context.Context, p store.InsertParams) (*store.Invocation, bool, error) {
	if err := p.Validate(); err != nil {
		return nil, false, err
	}
	var owner, leaseUS any
	attempt := 0
	if p.Status == store.StatusRunning {
		owner, leaseUS, attempt = p.Owner, p.Lease.Microseconds(), 1
	}
	inv, err := s.invocation(ctx, invocationInsertSQL, pgx.NamedArgs{
		"key": p.Key, "tenant": p.Tenant, "principal": p.Principal, "session_id": p.SessionID, "run_id": p.RunID,
		"step_number": p.Step, "call_id": p.CallID, "tool": p.Tool, "tool_version": p.ToolVersion,
		"idempotency": p.Idempotency, "idempotent_when": p.IdempotentWhen, "args": nullJSON(p.Args),
		"args_hash": p.ArgsHash, "origin_trust": p.OriginTrust, "argument_trust": p.ArgumentTrust, "mode": p.Mode,
		"decision": p.Decision, "status": string(p.Status), "reason_code": p.ReasonCode, "outcome": nullJSON(p.Outcome),
		"lease_owner": owner, "lease_us": leaseUS, "attempt": attempt,
	})
	if !errors.Is(err, store.ErrNotFound) {
		return inv, err == nil, err
	}
	// The key exists (ON CONFLICT DO NOTHING waited for a concurrent inserter to
	// commit): return that row, written by nobody here.
	inv, err = s.InvocationGetByKey(ctx, p.Key)
	return inv, false, err
}

func (s *Store) InvocationGet(ctx context.Context, id int64) (*store.Invocation, error) {
	return s.invocation(ctx, invocationGetSQL, pgx.NamedArgs{"id": id})
}

func (s *Store) InvocationGetByKey(ctx context.Context, key string) (*store.Invocation, error) {
	return s.invocation(ctx, invocationGetByKeySQL, pgx.NamedArgs{"key": key})
}

func (s *Store) InvocationGetByResumeToken(ctx context.Context, token string) (*store.Invocation, error) {
	if token == "" {
		return nil, store.ErrNotFound
	}
	return s.invocation(ctx, invocationGetByResumeTokenSQL, pgx.NamedArgs{"token": token})
}

func (s *Store) InvocationClaimIfPending(ctx context.Context, id int64, owner string, lease time.Duration) (*store.Invocation, error) {
	if err := store.ValidateLease(owner, lease); err != nil {
		return nil, err
	}
	inv, err := s.invocation(ctx, invocationClaimIfPendingSQL, pgx.NamedArgs{"id": id, "owner": owner, "lease_us": lease.Microseconds()})
	if errors.Is(err, store.ErrNotFound) {
		return nil, s.conflictIfExists(ctx, id)
	}
	return inv, err
}

func (s *Store) InvocationMarkEffectSentIfLeased(ctx context.Context, f store.Fence, token string) error {
	if token == "" {
		return fmt.Errorf("%w: watermark without a token", store.ErrInvalid)
	}
	n, err := s.exec(ctx, invocationMarkEffectSentIfLeasedSQL, fenceArgs(f, pgx.NamedArgs{"token": token}))
	if err != nil || n == 1 {
		return err
	}
	holds, err := s.exists(ctx, invocationFenceHoldsSQL, fenceArgs(f, nil))
	if err != nil {
		return err
	}
	if holds {
		return fmt.Errorf("%w: invocation %d already carries another watermark token", store.ErrConflict, f.ID)
	}
	return leaseLost(f)
}

func (s *Store) InvocationSettleIfLeased(ctx context.Context, f store.Fence, st store.Settlement) error {
	if err := st.Validate(); err != nil {
		return err
	}
	n, err := s.exec(ctx, invocationSettleIfLeasedSQL, fenceArgs(f, settlementArgs(st)))
	if err != nil || n == 1 {
		return err
	}
	done, err := s.exists(ctx, invocationSettledByFenceSQL, fenceArgs(f, pgx.NamedArgs{"status": string(st.Status)}))
	if err != nil || done {
		return err // lost ack: already settled by this fence
	}
	return leaseLost(f)
}

func (s *Store) InvocationReleaseIfLeased(ctx context.Context, f store.Fence) error {
	n, err := s.exec(ctx, invocationReleaseIfLeasedSQL, fenceArgs(f, pgx.NamedArgs{}))
	if err != nil || n == 1 {
		return err
	}
	done, err := s.exists(ctx, invocationReleasedAtSQL, fenceArgs(f, pgx.NamedArgs{}))
	if err != nil || done {
		return err // lost ack: already released at this attempt
	}
	return leaseLost(f)
}

func (s *Store) InvocationSuspendIfLeased(ctx context.Context, f store.Fence, resumeToken string, outcome json.RawMessage) error {
	if resumeToken == "" {
		return fmt.Errorf("%w: suspension without a resume token", store.ErrInvalid)
	}
	// a token held by another row is a unique violation: ErrConflict
	n, err := s.exec(ctx, invocationSuspendIfLeasedSQL, fenceArgs(f, pgx.NamedArgs{"resume_token": resumeToken, "outcome": nullJSON(outcome)}))
	if err != nil || n == 1 {
		return err
	}
	done, err := s.exists(ctx, invocationSuspendedByFenceSQL, fenceArgs(f, pgx.NamedArgs{"resume_token": resumeToken}))
	if err != nil || done {
		return err // lost ack: already suspended by this fence with this token
	}
	return leaseLost(f)
}

func (s *Store) InvocationResume(ctx context.Context, resumeToken string, st store.Settlement) (*store.Invocation, error) {
	if err := st.Validate(); err != nil {
		return nil, err
	}
	args := settlementArgs(st)
	args["resume_token"] = resumeToken
	inv, err := s.invocation(ctx, invocationResumeSQL, args)
	if !errors.Is(err, store.ErrNotFound) {
		return inv, err
	}
	taken, err := s.exists(ctx, invocationResumeTokenTakenSQL, pgx.NamedArgs{"resume_token": resumeToken})
	if err != nil {
		return nil, err
	}
	if taken {
		return nil, fmt.Errorf("%w: invocation with this resume token is not suspended", store.ErrConflict)
	}
	return nil, fmt.Errorf("%w: resume token", store.ErrNotFound)
}

func (s *Store) InvocationRenewLeases(ctx context.Context, owner string, lease time.Duration) (int, error) {
	if err := store.ValidateLease(owner, lease); err != nil {
		return 0, err
	}
	n, err := s.exec(ctx, invocationRenewLeasesSQL, pgx.NamedArgs{"owner": owner, "lease_us": lease.Microseconds()})
	return int(n), err
}

func (s *Store) InvocationSweep(ctx context.Context, p store.SweepParams) ([]store.Swept, error) {
	p = p.WithDefaults()
	invs, err := s.invocations(ctx, invocationSweepSQL, pgx.NamedArgs{"limit": p.Limit, "max_attempts": p.MaxAttempts})
	if err != nil {
		return nil, err
	}
	return store.SweptFromRows(invs), nil
}

func (s *Store) InvocationListRetryable(ctx context.Context, limit int) ([]*store.Invocation, error) {
	return s.invocations(ctx, invocationListRetryableSQL, pgx.NamedArgs{"limit": sqlLimit(limit)})
}

func (s *Store) InvocationListUncertain(ctx context.Context, tenant string) ([]*store.Invocation, error) {
	return s.invocations(ctx, invocationListUncertainSQL, pgx.NamedArgs{"tenant": tenant})
}

func (s *Store) InvocationResolveUncertain(ctx context.Context, id int64, resolution, by string) (*store.Invocation, error) {
	if err := store.ValidateResolution(resolution, by); err != nil {
		return nil, err
	}
	inv, err := s.invocation(ctx, invocationResolveUncertainSQL, pgx.NamedArgs{"id": id, "resolution": resolution, "resolved_by": by})
	if errors.Is(err, store.ErrNotFound) {
		return nil, s.conflictIfExists(ctx, id)
	}
	return inv, err
}

func (s *Store) InvocationBreakerCounts(ctx context.Context, runID, argsHash string) (store.BreakerCounts, error) {
	var c store.BreakerCounts
	err := s.queryRow(ctx, invocationBreakerCountsSQL, pgx.NamedArgs{"run_id": runID, "args_hash": argsHash},
		&c.Total, &c.Denied, &c.Uncertain)
	return c, err
}

func (s *Store) ApprovalDecide(ctx context.Context, a store.Approval) error {
	if a.Key == "" || a.DecidedBy == "" {
		return fmt.Errorf("%w: an approval needs a key and a decider", store.ErrInvalid)
	}
	n, err := s.exec(ctx, approvalDecideSQL, pgx.NamedArgs{"key": a.Key, "tenant": a.Tenant, "approved": a.Approved,
		"decided_by": a.DecidedBy, "reason": a.Reason})
	if err != nil || n == 1 {
		return err
	}
	decided, err := s.exists(ctx, approvalExistsSQL, pgx.NamedArgs{"key": a.Key})
	if err != nil {
		return err
	}
	if decided {
		return fmt.Errorf("%w: invocation %s is already decided", store.ErrConflict, a.Key)
	}
	return fmt.Errorf("%w: no invocation %s in tenant %q", store.ErrNotFound, a.Key, a.Tenant)
}

func (s *Store) ApprovalGet(ctx context.Context, key string) (*store.Approval, error) {
	var a store.Approval
	err := s.queryRow(ctx, approvalGetSQL, pgx.NamedArgs{"key": key},
		&a.Key, &a.Tenant, &a.Approved, &a.DecidedBy, &a.Reason, &a.DecidedAt)
	if err != nil {
		return nil, err
	}
	a.DecidedAt = a.DecidedAt.UTC()
	return &a, nil
}

func (s *Store) AuditAppend(ctx context.Context, e store.AuditEntry) (int64, error) {
	var id int64
	err := s.queryRow(ctx, auditAppendSQL, pgx.NamedArgs{"tenant": e.Tenant, "kind": e.Kind, "principal": e.Principal,
		"session_id": e.SessionID, "mode": e.Mode, "tool": e.Tool, "key": e.Key, "detail": nullJSON(e.Detail)}, &id)
	return id, err
}

func (s *Store) AuditList(ctx context.Context, tenant string, afterID int64, limit int) ([]store.AuditEntry, error) {
	var out []store.AuditEntry
	err := s.pool.do(ctx, func(conn *pgx.Conn) error {
		rows, err := conn.Query(ctx, auditListSQL, pgx.NamedArgs{"tenant": tenant, "after_id": afterID, "limit": sqlLimit(limit)})
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var e store.AuditEntry
			var detail []byte
			if err := rows.Scan(&e.ID, &e.Tenant, &e.Kind, &e.Principal, &e.SessionID, &e.Mode, &e.Tool, &e.Key, &detail, &e.At); err != nil {
				return err
			}
			e.Detail, e.At = rawJSON(detail), e.At.UTC()
			out = append(out, e)
		}
		return rows.Err()
	})
	return out, err
}

func (s *Store) CatalogHistoryAppend(ctx context.Context, c store.CatalogChange) (int64, error) {
	var id int64
	err := s.queryRow(ctx, catalogHistoryAppendSQL, pgx.NamedArgs{"server_id": c.ServerID, "tool": c.Tool,
		"change": c.Change, "sha256": c.SHA256, "detail": nullJSON(c.Detail)}, &id)
	return id, err
}

func (s *Store) CatalogHistoryList(ctx context.Context, serverID string) ([]store.CatalogChange, error) {
	var out []store.CatalogChange
	err := s.pool.do(ctx, func(conn *pgx.Conn) error {
		rows, err := conn.Query(ctx, catalogHistoryListSQL, pgx.NamedArgs{"server_id": serverID})
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var c store.CatalogChange
			var detail []byte
			if err := rows.Scan(&c.ID, &c.ServerID, &c.Tool, &c.Change, &c.SHA256, &detail, &c.At); err != nil {
				return err
			}
			c.Detail, c.At = rawJSON(detail), c.At.UTC()
			out = append(out, c)
		}
		return rows.Err()
	})
	return out, err
}

// helpers

func scanInvocation(row pgx.Row) (*store.Invocation, error) {
	var (
		inv                       store.Invocation
		args, outcome             []byte
		owner, resumeToken        *string
		status                    string
		effectSent, earlierEffect *time.Time
		leaseExp, susp, resAt     *time.Time
	)
	err := row.Scan(&inv.ID, &inv.Key, &inv.Tenant, &inv.Principal, &inv.SessionID, &inv.RunID, &inv.Step, &inv.CallID,
		&inv.Tool, &inv.ToolVersion, &inv.Idempotency, &inv.IdempotentWhen, &args, &inv.ArgsHash, &inv.OriginTrust,
		&inv.ArgumentTrust, &inv.Mode, &inv.Decision, &status, &inv.ReasonCode, &outcome, &effectSent, &earlierEffect,
		&inv.WatermarkMissing, &owner, &leaseExp, &inv.Attempt, &susp, &resumeToken, &inv.Resolution, &inv.ResolvedBy,
		&resAt, &inv.CreatedAt, &inv.UpdatedAt)
	if err != nil {
		return nil, mapErr(err)
	}
	inv.Status = store.Status(status)
	inv.Args, inv.Outcome = rawJSON(args), rawJSON(outcome)
	if owner != nil {
		inv.LeaseOwner = *owner
	}
	if resumeToken != nil {
		inv.ResumeToken = *resumeToken
	}
	inv.EffectSentAt, inv.EarlierEffectSentAt = utc(effectSent), utc(earlierEffect)
	inv.LeaseExpiresAt, inv.SuspendedAt, inv.ResolvedAt = utc(leaseExp), utc(susp), utc(resAt)
	inv.CreatedAt, inv.UpdatedAt = inv.CreatedAt.UTC(), inv.UpdatedAt.UTC()
	return &inv, nil
}

// conflictIfExists is the error of a guarded write that matched nothing: ErrConflict
// if the row exists (it is in the wrong state), ErrNotFound if not.
func (s *Store) conflictIfExists(ctx context.Context, id int64) error {
	ok, err := s.exists(ctx, invocationExistsSQL, pgx.NamedArgs{"id": id})
	switch {
	case err != nil:
		return err
	case ok:
		return fmt.Errorf("%w: invocation %d is not in the required state", store.ErrConflict, id)
	default:
		return fmt.Errorf("%w: invocation %d", store.ErrNotFound, id)
	}
}

func leaseLost(f store.Fence) error {
	return fmt.Errorf("%w: invocation %d attempt %d of %s", store.ErrLeaseLost, f.ID, f.Attempt, f.Owner)
}

func fenceArgs(f store.Fence, more pgx.NamedArgs) pgx.NamedArgs {
	args := pgx.NamedArgs{"id": f.ID, "owner": f.Owner, "attempt": f.Attempt}
	for k, v := range more {
		args[k] = v
	}
	return args
}

func settlementArgs(st store.Settlement) pgx.NamedArgs {
	return pgx.NamedArgs{"status": string(st.Status), "reason_code": st.ReasonCode,
		"outcome": nullJSON(st.Outcome), "watermark_missing": st.WatermarkMissing}
}

// mapErr maps no rows to ErrNotFound and a unique violation (a concurrent writer
// won) to ErrConflict.
func mapErr(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return fmt.Errorf("%w: %v", store.ErrConflict, err)
	}
	return err
}

// nullJSON binds raw JSON as text, or NULL if empty.
func nullJSON(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	return string(raw)
}

func rawJSON(b []byte) json.RawMessage {
	if b == nil {
		return nil
	}
	return json.RawMessage(b)
}

// sqlLimit maps "no limit" (<= 0) to LIMIT NULL.
func sqlLimit(limit int) any {
	if limit <= 0 {
		return nil
	}
	return limit
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
