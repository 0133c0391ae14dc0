package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/runtime/store/storetest"
)

// dsn returns TOOLGEN_PG_DSN or skips the test.
func dsn(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("TOOLGEN_PG_DSN")
	if dsn == "" {
		t.Skip("TOOLGEN_PG_DSN is not set: skipping the PostgreSQL store tests " +
			"(CI sets postgres://postgres@127.0.0.1:5432/test?sslmode=disable)")
	}
	return dsn
}

// newTestStore opens a store in a fresh schema toolgen_test_<random>, dropped at cleanup.
func newTestStore(t testing.TB, opts ...Option) *Store {
	t.Helper()
	dsn := dsn(t)
	b := make([]byte, 6)
	rand.Read(b)
	schema := "toolgen_test_" + hex.EncodeToString(b)
	s, err := Open(t.Context(), dsn, append([]Option{WithSchema(schema), WithMaxConns(8)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	dsn := dsn(t)
	storetest.Run(t,
		func(t *testing.T, clock *store.Clock) store.Store { return newTestStore(t, WithClock(clock)) },
		// another handle on the same schema: its own pool, as another worker has
		storetest.WithReopen(func(t *testing.T, s store.Store, clock *store.Clock) store.Store {
			other, err := Open(t.Context(), dsn, WithSchema(s.(*Store).schema), WithClock(clock))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { other.Close() })
			return other
		}),
		// a row lock held in an open transaction, as another worker mid-statement holds one
		storetest.WithRowLock(func(t *testing.T, s store.Store, id int64) func() {
			tx, err := s.(*Store).pool.Begin(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			var once sync.Once
			unlock := func() { once.Do(func() { tx.Rollback(context.Background()) }) }
			t.Cleanup(unlock)
			var locked int64
			if err := tx.QueryRow(t.Context(), `SELECT id FROM tool_invocations WHERE id = $1 FOR UPDATE`, id).Scan(&locked); err != nil {
				t.Fatalf("lock row %d: %v", id, err)
			}
			return unlock
		}))
}

func TestOpen_SynchronousCommitOn(t *testing.T) {
	s := newTestStore(t)
	var v string
	if err := s.pool.QueryRow(t.Context(), `SHOW synchronous_commit`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	if v != "on" {
		t.Fatalf("synchronous_commit = %s, want on", v)
	}
	off := dsn(t) + "&synchronous_commit=off"
	if !strings.Contains(dsn(t), "?") {
		off = dsn(t) + "?synchronous_commit=off"
	}
	if _, err := Open(t.Context(), off); err == nil {
		t.Fatal("Open accepted synchronous_commit=off")
	}
}

// TestInsertRelaxed_OnlyItsOwnCommit: a record-once row's statement turns
// synchronous_commit off for its own transaction (so its commit does not wait for the
// WAL's flush), and the pooled connection it ran on is back to on for every later
// statement: a watermark after it is durable before its effect.
func TestInsertRelaxed_OnlyItsOwnCommit(t *testing.T) {
	s := newTestStore(t, WithMaxConns(1)) // every statement on the same connection
	ctx := t.Context()
	show := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) string {
		t.Helper()
		var v string
		if err := q.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	call := func(key string) store.Call {
		return store.Call{Key: key, Tenant: "t", RunID: "r", CallID: key, Tool: "read", Args: []byte(`{}`)}
	}
	done := store.SettleSucceeded([]byte(`{"ok":true}`))

	insert, args := insertOf(store.InsertRecordOnce(call("in-a-transaction"), done))
	if insert != invocationInsertRelaxed {
		t.Fatal("a record-once row is not inserted by InvocationInsertRelaxed")
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, insert.sql, args...); err != nil {
		t.Fatal(err)
	}
	if v := show(tx); v != "off" {
		t.Fatalf("in the relaxed insert's transaction synchronous_commit = %s, want off", v)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if v := show(s.pool); v != "on" {
		t.Fatalf("after the relaxed insert's transaction synchronous_commit = %s, want on", v)
	}

	if _, inserted, err := s.InvocationInsert(ctx, store.InsertRecordOnce(call("autocommit"), done)); err != nil || !inserted {
		t.Fatalf("record once: inserted %v, %v", inserted, err)
	}
	if v := show(s.pool); v != "on" {
		t.Fatalf("after a record-once insert synchronous_commit = %s, want on", v)
	}
	if insert, _ := insertOf(store.InsertSettled(call("settled"), done)); insert != invocationInsert {
		t.Fatal("a settled row that is not record-once is inserted relaxed")
	}
}

func TestOpen_SchemaIsolated(t *testing.T) {
	s := newTestStore(t)
	var where string
	if err := s.pool.QueryRow(t.Context(), `SELECT table_schema FROM information_schema.tables WHERE table_name = 'tool_invocations' AND table_schema = current_schema()`).Scan(&where); err != nil {
		t.Fatal(err)
	}
	if where != s.schema {
		t.Fatalf("tool_invocations in %q, want %q", where, s.schema)
	}
	// a second Open of the same schema finds the migrations applied
	again, err := Open(t.Context(), dsn(t), WithSchema(s.schema))
	if err != nil {
		t.Fatal(err)
	}
	again.Close()
}

func TestMigrations_DownThenUp(t *testing.T) {
	s := newTestStore(t)
	ctx := t.Context()
	if err := s.migrateDown(ctx, 0); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE relnamespace = current_schema()::regnamespace
		AND relname <> 'schema_migrations' AND relname NOT LIKE 'schema_migrations%'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d relations left after down", n)
	}
	if err := s.migrateUp(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.InvocationInsert(ctx, store.InsertPending(store.Call{Key: "k"})); err != nil {
		t.Fatal(err)
	}
}

// TestMigrations006And007_UpKeepRows: a store of the schema before migration 006,
// with rows, upgrades in place: its rows are all still there (without a recorded
// workspace, 007), and the new table works.
func TestMigrations006And007_UpKeepRows(t *testing.T) {
	s := newTestStore(t)
	ctx := t.Context()
	if err := s.migrateDown(ctx, 5); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := s.pool.QueryRow(ctx, `INSERT INTO tool_invocations (key, tenant, tool, status, created_at, updated_at)
		VALUES ('kept', 'acme', 'a.b', 'PENDING', now(), now()) RETURNING id`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AuditAppend(ctx, store.AuditEntry{Tenant: "acme", Kind: "approval", Principal: "ana"}); err != nil {
		t.Fatal(err)
	}
	if err := s.migrateUp(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := s.InvocationGet(ctx, id); err != nil || got.Key != "kept" || got.Tenant != "acme" || got.Workspace != "" {
		t.Fatalf("the row after the upgrade: %+v, %v", got, err)
	}
	if audit, err := s.AuditList(ctx, "acme", 0, 0); err != nil || len(audit) != 1 {
		t.Fatalf("the audit log after the upgrade: %v, %v", audit, err)
	}
	secret := []byte("0123456789abcdef0123456789abcdef")
	if got, err := s.DeploymentSecretGetOrCreate(ctx, "call_id", secret); err != nil || string(got) != string(secret) {
		t.Fatalf("the new table: %q, %v", got, err)
	}
}

func TestAuditLog_AppendOnly(t *testing.T) {
	s := newTestStore(t)
	if _, err := s.AuditAppend(t.Context(), store.AuditEntry{Kind: "tool_call"}); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{`UPDATE audit_log SET kind = 'x'`, `DELETE FROM audit_log`, `TRUNCATE audit_log`} {
		_, err := s.pool.Exec(t.Context(), stmt)
		if err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s: err = %v, want append-only", stmt, err)
		}
	}
}

// TestDecodeInvocation_TextResults reads the same rows through pgx's default exec
// mode (int, bool and timestamptz in binary: decodeInvocation's fast paths) and
// through the simple protocol (everything in text: the type map's path), with every
// nullable column NULL in one row and set in the other.
func TestDecodeInvocation_TextResults(t *testing.T) {
	s := newTestStore(t)
	ctx := t.Context()
	simpleDSN := dsn(t) + "&default_query_exec_mode=simple_protocol"
	if !strings.Contains(dsn(t), "?") {
		simpleDSN = dsn(t) + "?default_query_exec_mode=simple_protocol"
	}
	simple, err := Open(ctx, simpleDSN, WithSchema(s.schema))
	if err != nil {
		t.Fatal(err)
	}
	defer simple.Close()
	yes := true
	if _, _, err := s.InvocationInsert(ctx, store.InsertPending(store.Call{Key: "nulls"})); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.InvocationInsert(ctx, store.InsertSettled(store.Call{Key: "set", Tenant: "acme", Principal: "alice",
		SessionID: "s1", RunID: "r1", Step: 3, CallID: "c1", Tool: "t.x", ToolVersion: 2,
		Idempotency: "conditionally_idempotent", IdempotentWhen: &yes, Args: []byte(`{"a": [1, 2]}`),
		ArgsHash: "h1", OriginTrust: "user", ArgumentTrust: "tool", Mode: "m", Decision: "allow"},
		store.SettleUncertain("r", []byte(`{"ok":true}`)))); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `UPDATE tool_invocations SET status = 'UNCERTAIN', attempt = 2, watermark_missing = true,
		effect_sent_at = now(), earlier_effect_sent_at = now() - interval '1.000001 s', lease_owner = 'w1',
		lease_expires_at = now() + interval '1 minute', suspended_at = '2001-02-03 04:05:06.789012+07',
		resume_token = 'rt', resolution = 'happened', resolved_by = 'bob', resolved_at = '1999-12-31 23:59:59.999999+00'
		WHERE key = 'set'`); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"nulls", "set"} {
		fast, err := s.InvocationGetByKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		slow, err := simple.InvocationGetByKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Errorf("%s:\nbinary %+v\ntext   %+v", key, *fast, *slow)
		}
		if key == "set" && (fast.IdempotentWhen == nil || !*fast.IdempotentWhen || fast.ResolvedAt == nil ||
			fast.ResolvedAt.Format(time.RFC3339Nano) != "1999-12-31T23:59:59.999999Z" || fast.Step != 3 || !fast.WatermarkMissing) {
			t.Errorf("set: %+v", *fast)
		}
	}
}

// TestMigration005_KeepsRowsAndOwners upgrades a store with rows of migration 004:
// every session mode is kept with the tenant it carries, and each session in use is
// owned by the tenant of its first call (else of its mode), so no other tenant can
// take it over after the upgrade (issue 14, finding 4).
func TestMigration005_KeepsRowsAndOwners(t *testing.T) {
	s := newTestStore(t)
	ctx := t.Context()
	if err := s.migrateDown(ctx, 4); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`INSERT INTO session_modes (session_id, tenant, mode) VALUES ('s-a', 'a', 'implement'), ('s-mode-only', 'b', 'review')`,
		`INSERT INTO tool_invocations (key, tenant, session_id, run_id, args_hash, status, created_at, updated_at)
		 VALUES ('k1', 'a', 's-a', 'r', 'h', 'DENIED', now(), now()), ('k2', 'b', 's-a', 'r', 'h', 'DENIED', now(), now()),
		        ('k3', 'b', 's-b', 'r', 'h', 'SUCCEEDED', now(), now())`,
	} {
		if _, err := s.pool.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.migrateUp(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ tenant, session, mode string }{{"a", "s-a", "implement"}, {"b", "s-mode-only", "review"}} {
		if got, err := s.SessionModeGet(ctx, tc.tenant, tc.session); err != nil || got != tc.mode {
			t.Errorf("mode of %s/%s after the upgrade: %q, %v; want %q", tc.tenant, tc.session, got, err, tc.mode)
		}
	}
	for _, tc := range []struct {
		tenant, session string
		owned           bool
	}{{"a", "s-a", true}, {"b", "s-a", false}, {"b", "s-b", true}, {"a", "s-b", false}, {"b", "s-mode-only", true}, {"a", "s-mode-only", false}} {
		if owned, err := s.SessionClaim(ctx, tc.tenant, tc.session); err != nil || owned != tc.owned {
			t.Errorf("claim of %s by %s after the upgrade: %v, %v; want %v", tc.session, tc.tenant, owned, err, tc.owned)
		}
	}
	if pc, err := s.InvocationPriorCalls(ctx, store.PriorCallsParams{Tenant: "a", RunID: "r", ArgsHash: "h"}); err != nil ||
		pc.Breaker.Total != 1 || pc.Breaker.Denied != 1 {
		t.Errorf("breaker of tenant a after the upgrade: %+v, %v; want its one denial", pc, err)
	}
}

// TestMigration008_RefusalsLeaveTheirKeys: a refusal recorded before 008 held its
// call's key; the upgrade moves it off (the call may be made, and decided, again),
// keeps a person's denial of a held call on its key, and lets a resolved row move on.
func TestMigration008_RefusalsLeaveTheirKeys(t *testing.T) {
	s := newTestStore(t)
	ctx := t.Context()
	if err := s.migrateDown(ctx, 7); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO tool_invocations (key, tenant, tool, status, reason_code, created_at, updated_at)
		VALUES ('k-refused', 'acme', 'a.b', 'DENIED', 'not_in_mode', now(), now()), ('k-person', 'acme', 'a.b', 'DENIED', 'approval_denied', now(), now()),
		       ('k-ok', 'acme', 'a.b', 'SUCCEEDED', '', now(), now())`); err != nil {
		t.Fatal(err)
	}
	if err := s.migrateUp(ctx); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]bool{"k-refused": false, "k-person": true, "k-ok": true} {
		_, err := s.InvocationGetByKey(ctx, key)
		if (err == nil) != want {
			t.Errorf("key %s after the upgrade: %v, want found=%v", key, err, want)
		}
	}
	var moved string
	if err := s.pool.QueryRow(ctx, `SELECT key FROM tool_invocations WHERE reason_code = 'not_in_mode'`).Scan(&moved); err != nil ||
		!strings.HasPrefix(moved, "k-refused"+store.RefusalKeySuffix) {
		t.Fatalf("the refusal's key: %q, %v", moved, err)
	}
	inv, _, err := s.InvocationInsert(ctx, store.InsertSettled(store.Call{Key: "k-u", Tenant: "acme"}, store.Settlement{Status: store.StatusUncertain}))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.InvocationResolveUncertain(ctx, inv.ID, store.ResolutionHappened, "carol", json.RawMessage(`{"status":"succeeded"}`), nil); err != nil ||
		got.Status != store.StatusSucceeded {
		t.Fatalf("resolve after the upgrade: %+v, %v", got, err)
	}
}

// BenchmarkPriorCalls: storetest.BenchPriorCalls on PostgreSQL (TOOLGEN_PG_DSN).
func BenchmarkPriorCalls(b *testing.B) { storetest.BenchPriorCalls(b, newTestStore(b)) }

// BenchmarkInsert: storetest.BenchInsert on PostgreSQL (TOOLGEN_PG_DSN).
func BenchmarkInsert(b *testing.B) { storetest.BenchInsert(b, newTestStore(b)) }
