package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/toolgen/toolgen/runtime/store"
)

// Store is the PostgreSQL implementation of [store.Store].
type Store struct {
	pool   *pool
	schema string // "" for the DSN's search_path

	// wake-ups (wake.go): the listener starts at the first Subscribe
	connConfig   *pgx.ConnConfig
	wakeFallback time.Duration
	noWakeups    bool
	wakeHooks    *wakeHooks // tests only
	wakeOnce     sync.Once
	wake         atomic.Pointer[listener]
	closed       atomic.Bool
}

var _ store.Store = (*Store)(nil)

// Option configures [Open].
type Option func(*options)

type options struct {
	schema       string
	maxConns     int
	wakeFallback time.Duration
	noWakeups    bool
	clock        *store.Clock
}

// WithSchema keeps every table in schema (created if missing): the connections'
// search_path is set to it. Tests use a fresh schema each.
func WithSchema(schema string) Option {
	return func(o *options) { o.schema = schema }
}

// WithClock runs the store's statements on clock (store.Clock): now() plus the
// clock's offset in every statement the store runs on its pool. For tests: a store
// without one runs the SQL of sql/*.sql unchanged, on the database clock.
func WithClock(clock *store.Clock) Option {
	return func(o *options) { o.clock = clock }
}

// WithMaxConns bounds the pool (default max(4, NumCPU)).
func WithMaxConns(n int) Option {
	return func(o *options) { o.maxConns = n }
}

// Open connects to the database at dsn (a pgx connection string) and applies the
// embedded migrations. synchronous_commit is left on (the server default) and
// refused if the DSN turns it off: a watermark must be durable before the effect. Only
// a relaxed insert (store.InsertParams.Relaxed) turns it off, for its own transaction
// (InvocationInsertRelaxed in sql/queries.sql), as the SQLite store commits it with
// synchronous=NORMAL.
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	o := options{maxConns: max(4, runtime.NumCPU()), wakeFallback: DefaultWakeFallback}
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
	if o.wakeFallback <= 0 {
		o.wakeFallback = DefaultWakeFallback
	}
	listenCfg := cfg.Copy() // before the pool owns cfg
	pl, err := newPool(ctx, cfg, o.maxConns, o.clock)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	s := &Store{pool: pl, schema: o.schema, connConfig: listenCfg, wakeFallback: o.wakeFallback, noWakeups: o.noWakeups}
	if err := s.migrateUp(ctx); err != nil {
		s.pool.Close()
		return nil, err
	}
	return s, nil
}

// Close stops the wake-up listener and closes the pool's connections.
func (s *Store) Close() error {
	s.stopListener()
	s.pool.Close()
	return nil
}

// The statements run on the pool directly (pgxpool acquires a connection per
// statement and releases it when the statement's rows are closed), with positional
// arguments: see query.

// queryRow runs one statement returning one row; its Scan maps errors (mapErr).
func (s *Store) queryRow(ctx context.Context, q query, args ...any) row {
	return row{s.pool.QueryRow(ctx, q.sql, args...)}
}

type row struct{ pgx.Row }

func (r row) Scan(dest ...any) error { return mapErr(r.Row.Scan(dest...)) }

// exec runs one statement and returns the number of rows it wrote.
func (s *Store) exec(ctx context.Context, q query, args ...any) (int64, error) {
	tag, err := s.pool.Exec(ctx, q.sql, args...)
	return tag.RowsAffected(), mapErr(err)
}

func (s *Store) exists(ctx context.Context, q query, args ...any) (bool, error) {
	var ok bool
	err := s.queryRow(ctx, q, args...).Scan(&ok)
	return ok, err
}

// invocation runs a statement returning at most one invocation: ErrNotFound if none.
func (s *Store) invocation(ctx context.Context, q query, args ...any) (*store.Invocation, error) {
	return first(s.invocations(ctx, q, args...))
}

// first is the first of invs: ErrNotFound if there is none.
func first(invs []*store.Invocation, err error) (*store.Invocation, error) {
	if err != nil {
		return nil, err
	}
	if len(invs) == 0 {
		return nil, store.ErrNotFound
	}
	return invs[0], nil
}

// invocations runs a statement returning invocations (invocationColumns), in id order.
func (s *Store) invocations(ctx context.Context, q query, args ...any) ([]*store.Invocation, error) {
	return s.decodedInvocations(ctx, q, decodeInvocation, args...)
}

// decodedInvocations runs a statement returning invocations that decode reads, in id
// order.
func (s *Store) decodedInvocations(ctx context.Context, q query, decode func(pgx.Rows) (*store.Invocation, error), args ...any) ([]*store.Invocation, error) {
	rows, err := s.pool.Query(ctx, q.sql, args...)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	var out []*store.Invocation
	for rows.Next() {
		inv, err := decode(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, inv)
	}
	rows.Close() // a write's errors (a unique violation) come with its completion
	if err := rows.Err(); err != nil {
		return nil, mapErr(err)
	}
	slices.SortFunc(out, func(a, b *store.Invocation) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// Writing methods below are one statement each (autocommit: one commit). A
// statement that matched nothing may be followed by a read that explains why.

func (s *Store) InvocationInsert(ctx context.Context, p store.InsertParams) (*store.Invocation, bool, error) {
	if err := p.Validate(); err != nil {
		return nil, false, err
	}
	inv, err := s.inserted(ctx, p)
	if !errors.Is(err, store.ErrNotFound) {
		return inv, err == nil, err
	}
	// The key exists (ON CONFLICT DO NOTHING waited for a concurrent inserter to
	// commit): return that row, written by nobody here.
	inv, err = s.InvocationGetByKey(ctx, p.Key)
	return inv, false, err
}

// inserted runs InvocationInsert's statement (InvocationInsertRelaxed's for a relaxed
// insert: its commit does not wait for the WAL's flush) and returns the row it wrote:
// what the statement returns (the id and the times the database chose) and the rest as
// p inserted it (p.Row), not the 40 columns read back; ErrNotFound when the key was
// taken.
func (s *Store) inserted(ctx context.Context, p store.InsertParams) (*store.Invocation, error) {
	insert, args := insertOf(p)
	return first(s.decodedInvocations(ctx, insert, func(rows pgx.Rows) (*store.Invocation, error) {
		r := rowReader{m: rows.Conn().TypeMap(), fds: rows.FieldDescriptions(), vals: rows.RawValues()}
		inv := p.Row()
		inv.ID, inv.LeaseExpiresAt, inv.CreatedAt, inv.UpdatedAt = r.integer(), r.nullTimestamp(), r.timestamp(), r.timestamp()
		return inv, r.done()
	}, args...))
}

// insertOf is the statement that inserts p and its arguments (insertedParams).
func insertOf(p store.InsertParams) (query, []any) {
	var owner, leaseUS any // NULL unless RUNNING
	if o, lease := p.Lease(); p.Status() == store.StatusRunning {
		owner, leaseUS = o, lease.Microseconds()
	}
	settled := p.Settlement()
	insert := invocationInsert
	if p.Relaxed() {
		insert = invocationInsertRelaxed
	}
	return insert, []any{p.Key, p.Tenant, p.Principal, p.SessionID, p.RunID,
		p.Step, p.CallID, p.Tool, p.ToolVersion, p.ToolSHA256, p.Idempotency, p.IdempotentWhen, nullJSON(p.Args), p.ArgsHash,
		p.OriginTrust, p.ArgumentTrust, p.Mode, p.Decision, string(p.Status()), settled.ReasonCode, nullJSON(settled.Outcome),
		owner, leaseUS, p.Attempt(), p.Workspace}
}

func (s *Store) InvocationGet(ctx context.Context, id int64) (*store.Invocation, error) {
	return s.invocation(ctx, invocationGet, id)
}

func (s *Store) InvocationGetByKey(ctx context.Context, key string) (*store.Invocation, error) {
	return s.invocation(ctx, invocationGetByKey, key)
}

func (s *Store) InvocationGetByResumeToken(ctx context.Context, token string) (*store.Invocation, error) {
	if token == "" {
		return nil, store.ErrNotFound
	}
	return s.invocation(ctx, invocationGetByResumeToken, token)
}

func (s *Store) InvocationClaimIfPending(ctx context.Context, id int64, owner string, lease time.Duration) (*store.Invocation, error) {
	if err := store.ValidateLease(owner, lease); err != nil {
		return nil, err
	}
	inv, err := s.invocation(ctx, invocationClaimIfPending, id, owner, lease.Microseconds())
	if errors.Is(err, store.ErrNotFound) {
		return nil, s.conflictIfExists(ctx, id, nil)
	}
	return inv, err
}

func (s *Store) InvocationMarkEffectSentIfLeased(ctx context.Context, f store.Fence, token string) error {
	if token == "" {
		return fmt.Errorf("%w: watermark without a token", store.ErrInvalid)
	}
	n, err := s.exec(ctx, invocationMarkEffectSentIfLeased, f.ID, f.Owner, f.Attempt, token)
	if err != nil || n == 1 {
		return err
	}
	holds, err := s.exists(ctx, invocationFenceHolds, f.ID, f.Owner, f.Attempt)
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
	n, err := s.exec(ctx, invocationSettleIfLeased, f.ID, f.Owner, f.Attempt,
		string(st.Status), st.ReasonCode, nullJSON(st.Outcome), st.WatermarkMissing)
	if err != nil || n == 1 {
		return err
	}
	done, err := s.exists(ctx, invocationSettledByFence, f.ID, f.Owner, f.Attempt, string(st.Status))
	if err != nil || done {
		return err // lost ack: already settled by this fence
	}
	return leaseLost(f)
}

func (s *Store) InvocationReleaseIfLeased(ctx context.Context, f store.Fence) error {
	n, err := s.exec(ctx, invocationReleaseIfLeased, f.ID, f.Owner, f.Attempt)
	if err != nil || n == 1 {
		return err
	}
	done, err := s.exists(ctx, invocationReleasedAt, f.ID, f.Attempt)
	if err != nil || done {
		return err // lost ack: already released at this attempt
	}
	return leaseLost(f)
}

func (s *Store) InvocationSuspendIfLeased(ctx context.Context, f store.Fence, resumeToken string, outcome json.RawMessage) error {
	if err := store.ValidateSuspension(resumeToken, outcome); err != nil {
		return err
	}
	// a token held by another row is a unique violation: ErrConflict
	n, err := s.exec(ctx, invocationSuspendIfLeased, f.ID, f.Owner, f.Attempt, resumeToken, nullJSON(outcome))
	if err != nil || n == 1 {
		return err
	}
	done, err := s.exists(ctx, invocationSuspendedByFence, f.ID, f.Owner, f.Attempt, resumeToken)
	if err != nil || done {
		return err // lost ack: already suspended by this fence with this token
	}
	return leaseLost(f)
}

func (s *Store) InvocationResume(ctx context.Context, resumeToken string, st store.Settlement) (*store.Invocation, error) {
	if err := st.Validate(); err != nil {
		return nil, err
	}
	inv, err := s.invocation(ctx, invocationResume, resumeToken,
		string(st.Status), st.ReasonCode, nullJSON(st.Outcome), st.WatermarkMissing)
	if !errors.Is(err, store.ErrNotFound) {
		return inv, err
	}
	taken, err := s.exists(ctx, invocationResumeTokenTaken, resumeToken)
	if err != nil {
		return nil, err
	}
	if taken {
		return nil, fmt.Errorf("%w: invocation with this resume token is not suspended", store.ErrConflict)
	}
	return nil, fmt.Errorf("%w: resume token", store.ErrNotFound)
}

func (s *Store) InvocationRenewLeases(ctx context.Context, owner string, ids []int64, lease time.Duration) (int, error) {
	if err := store.ValidateLease(owner, lease); err != nil || len(ids) == 0 {
		return 0, err
	}
	n, err := s.exec(ctx, invocationRenewLeases, owner, lease.Microseconds(), ids)
	return int(n), err
}

func (s *Store) InvocationSweep(ctx context.Context, p store.SweepParams) ([]store.Swept, error) {
	if err := p.Claimable.Validate(); err != nil {
		return nil, err
	}
	p = p.WithDefaults()
	invs, err := s.invocations(ctx, invocationSweep, p.Limit, p.MaxAttempts, p.ToolsParam(), p.Tenant)
	if err != nil {
		return nil, err
	}
	return store.SweptFromRows(invs), nil
}

func (s *Store) InvocationListRetryable(ctx context.Context, p store.RetryableParams) ([]*store.Invocation, error) {
	if err := p.Claimable.Validate(); err != nil {
		return nil, err
	}
	return s.invocations(ctx, invocationListRetryable, sqlLimit(p.Limit), p.ToolsParam(), p.Tenant)
}

func (s *Store) InvocationUnsuspendDecided(ctx context.Context, p store.RetryableParams) ([]*store.Invocation, error) {
	if err := p.Claimable.Validate(); err != nil {
		return nil, err
	}
	invs, err := s.invocations(ctx, invocationUnsuspendDecided, sqlLimit(p.Limit), p.ToolsParam(), p.Tenant)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(invs, func(a, b *store.Invocation) int { return cmp.Compare(a.ID, b.ID) })
	return invs, nil
}

func (s *Store) InvocationCountUnclaimable(ctx context.Context, tools []store.ToolRef, tenant string) (store.Unclaimable, error) {
	var u store.Unclaimable
	if err := store.ValidateToolRefs(tools); err != nil {
		return u, err
	}
	err := s.queryRow(ctx, invocationCountUnclaimable, store.ToolRefsJSON(tools), tenant).Scan(&u.NotRegistered, &u.DefinitionChanged)
	return u, err
}

func (s *Store) InvocationListUncertain(ctx context.Context, tenant string) ([]*store.Invocation, error) {
	return s.invocations(ctx, invocationListUncertain, tenant)
}

func (s *Store) InvocationResolveUncertain(ctx context.Context, id int64, resolution, by string, outcome json.RawMessage, audit *store.AuditEntry) (*store.Invocation, error) {
	if err := store.ValidateResolution(resolution, by, outcome); err != nil {
		return nil, err
	}
	args := append([]any{id, resolution, by, nullJSON(outcome)}, auditArgs(audit)...)
	inv, err := s.invocation(ctx, invocationResolveUncertain, args...)
	if errors.Is(err, store.ErrNotFound) {
		// With an audit entry the review was confined to the entry's tenant: a row of
		// another tenant is not found.
		var tenant any
		if audit != nil {
			tenant = audit.Tenant
		}
		return nil, s.conflictIfExists(ctx, id, tenant)
	}
	return inv, err
}

func (s *Store) InvocationPriorCalls(ctx context.Context, p store.PriorCallsParams) (store.PriorCalls, error) {
	var pc store.PriorCalls
	if err := p.Validate(); err != nil {
		return pc, err
	}
	switch {
	case p.Key != "": // a named read: the counts and its key
		err := s.queryRow(ctx, invocationBreakerCountsAndKey, p.Tenant, p.RunID, p.ArgsHash, p.Key).
			Scan(&pc.Breaker.Total, &pc.Breaker.Denied, &pc.Breaker.Uncertain, &pc.KeyTaken)
		return pc, err
	case p.CallIDBase == "": // another named call: the counts alone
		err := s.queryRow(ctx, invocationBreakerCounts, p.Tenant, p.RunID, p.ArgsHash).
			Scan(&pc.Breaker.Total, &pc.Breaker.Denied, &pc.Breaker.Uncertain)
		return pc, err
	}
	var id pgtype.Int8
	var callID, status pgtype.Text
	var updated pgtype.Timestamptz
	g := &pc.Latest
	err := s.queryRow(ctx, invocationPriorCalls, p.Tenant, p.RunID, p.ArgsHash, p.Step, p.CallIDBase).
		Scan(&pc.Breaker.Total, &pc.Breaker.Denied, &pc.Breaker.Uncertain,
			&id, &callID, &status, &g.EffectSentAt, &g.EarlierEffectSentAt, &updated)
	if err != nil {
		return store.PriorCalls{}, err
	}
	if !id.Valid { // no generation yet
		return pc, nil
	}
	g.ID, g.CallID, g.Status, g.UpdatedAt = id.Int64, callID.String, store.Status(status.String), updated.Time.UTC()
	g.EffectSentAt, g.EarlierEffectSentAt = utc(g.EffectSentAt), utc(g.EarlierEffectSentAt)
	pc.HasLatest = true
	return pc, nil
}

func (s *Store) ApprovalDecide(ctx context.Context, a store.Approval, audit *store.AuditEntry) error {
	if a.Key == "" || a.DecidedBy == "" {
		return fmt.Errorf("%w: an approval needs a key and a decider", store.ErrInvalid)
	}
	if err := store.ValidateDecisionAudit(a, audit); err != nil {
		return err
	}
	args := append([]any{a.Key, a.Tenant, a.Approved, a.DecidedBy, a.Reason}, auditArgs(audit)...)
	var recorded bool
	if err := s.queryRow(ctx, approvalDecide, args...).Scan(&recorded); err != nil || recorded {
		return err
	}
	decided, err := s.exists(ctx, approvalExists, a.Key)
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
	err := s.queryRow(ctx, approvalGet, key).Scan(&a.Key, &a.Tenant, &a.Approved, &a.DecidedBy, &a.Reason, &a.DecidedAt)
	if err != nil {
		return nil, err
	}
	a.DecidedAt = a.DecidedAt.UTC()
	return &a, nil
}

func (s *Store) AuditAppend(ctx context.Context, e store.AuditEntry) (int64, error) {
	var id int64
	err := s.queryRow(ctx, auditAppend, e.Tenant, e.Kind, e.Principal, e.SessionID, e.Mode, e.Tool, e.Key,
		nullJSON(e.Detail)).Scan(&id)
	return id, err
}

func (s *Store) AuditList(ctx context.Context, tenant string, afterID int64, limit int) ([]store.AuditEntry, error) {
	rows, err := s.pool.Query(ctx, auditList.sql, afterID, tenant, sqlLimit(limit))
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	var out []store.AuditEntry
	for rows.Next() {
		var e store.AuditEntry
		var detail []byte
		if err := rows.Scan(&e.ID, &e.Tenant, &e.Kind, &e.Principal, &e.SessionID, &e.Mode, &e.Tool, &e.Key, &detail, &e.At); err != nil {
			return nil, err
		}
		e.Detail, e.At = rawJSON(detail), e.At.UTC()
		out = append(out, e)
	}
	return out, mapErr(rows.Err())
}

func (s *Store) CatalogHistoryAppend(ctx context.Context, c store.CatalogChange) (int64, error) {
	var id int64
	err := s.queryRow(ctx, catalogHistoryAppend, c.ServerID, c.Tool, c.Change, c.SHA256, nullJSON(c.Detail)).Scan(&id)
	return id, err
}

func (s *Store) CatalogHistoryList(ctx context.Context, serverID string) ([]store.CatalogChange, error) {
	rows, err := s.pool.Query(ctx, catalogHistoryList.sql, serverID)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	var out []store.CatalogChange
	for rows.Next() {
		var c store.CatalogChange
		var detail []byte
		if err := rows.Scan(&c.ID, &c.ServerID, &c.Tool, &c.Change, &c.SHA256, &detail, &c.At); err != nil {
			return nil, err
		}
		c.Detail, c.At = rawJSON(detail), c.At.UTC()
		out = append(out, c)
	}
	return out, mapErr(rows.Err())
}

// helpers

// conflictIfExists is the error of a guarded write that matched nothing: ErrConflict
// if the row exists (it is in the wrong state), ErrNotFound if not. A write confined
// to a tenant (not nil) does not find a row of another.
func (s *Store) conflictIfExists(ctx context.Context, id int64, tenant any) error {
	ok, err := s.exists(ctx, invocationExists, id, tenant)
	switch {
	case err != nil:
		return err
	case ok:
		return fmt.Errorf("%w: invocation %d is not in the required state", store.ErrConflict, id)
	default:
		return fmt.Errorf("%w: invocation %d", store.ErrNotFound, id)
	}
}

// auditArgs are the arguments with_audit and auditParams of a statement that writes
// audit, when not nil, with its decision.
func auditArgs(audit *store.AuditEntry) []any {
	if audit == nil {
		return []any{false, nil, nil, nil, nil, nil, nil, nil, nil}
	}
	return []any{true, audit.Tenant, audit.Kind, audit.Principal, audit.SessionID, audit.Mode, audit.Tool, audit.Key,
		nullJSON(audit.Detail)}
}

func leaseLost(f store.Fence) error {
	return fmt.Errorf("%w: invocation %d attempt %d of %s", store.ErrLeaseLost, f.ID, f.Attempt, f.Owner)
}

// mapErr maps no rows to ErrNotFound and a unique violation (a concurrent writer
// won) to ErrConflict.
func mapErr(err error) error {
	if err == nil {
		return nil // before pgErr, which escapes: no allocation on success
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return fmt.Errorf("%w: %v", store.ErrConflict, err)
	}
	return err
}

// utc is t in UTC, as every time the store returns (nil stays nil).
func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
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

// DeploymentSecretGetOrCreate is store.Store's: one statement.
func (s *Store) DeploymentSecretGetOrCreate(ctx context.Context, name string, candidate []byte) ([]byte, error) {
	if err := store.ValidateDeploymentSecret(name, candidate); err != nil {
		return nil, err
	}
	var secret []byte
	err := s.queryRow(ctx, deploymentSecretGetOrCreate, name, candidate).Scan(&secret)
	return secret, err
}
