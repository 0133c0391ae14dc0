package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/runtime/store/sqlite/internal/walvfs"
	"github.com/toolgen/toolgen/runtime/store/storetest"
)

// newTestStore opens a store on a fresh file in t.TempDir().
func newTestStore(t testing.TB, opts ...Option) *Store {
	t.Helper()
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "toolgen.db"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t,
		func(t *testing.T, clock *store.Clock) store.Store { return newTestStore(t, WithClock(clock)) },
		// another handle on the same file: its own writer connection, as a second
		// process would have
		storetest.WithReopen(func(t *testing.T, s store.Store, clock *store.Clock) store.Store {
			other, err := Open(t.Context(), s.(*Store).path, WithClock(clock))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { other.Close() })
			return other
		}))
}

// olderFile creates, in t.TempDir(), a WAL database file with pages of size bytes, as
// the store created before it chose its own page size (SQLite's default, 4,096), and
// returns its path.
func olderFile(t testing.TB, size int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "older.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("PRAGMA page_size = " + strconv.Itoa(size) + "; PRAGMA journal_mode = WAL"); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestOpen_KeepsAnOlderFilesPageSize: a file created with other pages than pageSize
// (every store file before it) opens, migrates and records with the pages it has;
// connParams' page_size applies only to new files.
func TestOpen_KeepsAnOlderFilesPageSize(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, olderFile(t, 4096))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, inserted, err := s.InvocationInsert(ctx, recordOnce("k")); err != nil || !inserted {
		t.Fatalf("record: %v, %v", inserted, err)
	}
	for name, pool := range map[string]*sql.DB{"writer": s.write, "relaxed": s.relaxed, "reader": s.read} {
		var size int
		if err := pool.QueryRowContext(ctx, "PRAGMA page_size").Scan(&size); err != nil || size != 4096 {
			t.Errorf("%s: PRAGMA page_size = %d (%v), want the file's 4096", name, size, err)
		}
	}
	if got, err := s.InvocationGetByKey(ctx, "k"); err != nil || got.Status != store.StatusSucceeded {
		t.Fatalf("read back: %+v, %v", got, err)
	}
}

// TestOpen_AfterConvertingToSmallerPages: the README's conversion of a file of 4 KiB
// pages to pageSize (with no host running: leave WAL mode, set the page size, VACUUM,
// back to WAL) keeps its rows and the store opens it and records on it.
func TestOpen_AfterConvertingToSmallerPages(t *testing.T) {
	ctx := t.Context()
	path := olderFile(t, 4096)
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	record := func(s *Store, key string) {
		t.Helper()
		if _, inserted, err := s.InvocationInsert(ctx, recordOnce(key)); err != nil || !inserted {
			t.Fatalf("record %s: %v, %v", key, inserted, err)
		}
	}
	record(s, "before")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(ctx) // one connection: journal_mode and page_size are its settings
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{"PRAGMA journal_mode = DELETE", "PRAGMA page_size = " + strconv.Itoa(pageSize), "VACUUM", "PRAGMA journal_mode = WAL"} {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	conn.Close()
	db.Close()

	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var size int
	var ok string
	if err := s.write.QueryRowContext(ctx, "PRAGMA page_size").Scan(&size); err != nil || size != pageSize {
		t.Fatalf("PRAGMA page_size = %d (%v) after the conversion, want %d", size, err, pageSize)
	}
	if got, err := s.InvocationGetByKey(ctx, "before"); err != nil || got.Status != store.StatusSucceeded {
		t.Fatalf("the row from before the conversion: %+v, %v", got, err)
	}
	record(s, "after")
	if err := s.write.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("integrity_check: %q, %v", ok, err)
	}
}

func TestOpen_Pragmas(t *testing.T) {
	s := newTestStore(t)
	for pragma, want := range map[string]string{
		"journal_mode": "wal",
		"synchronous":  "2", // FULL: the watermark commit survives power loss
		"foreign_keys": "1",
		"busy_timeout": "10000",
		"page_size":    strconv.Itoa(pageSize), // a new file
		// the backstop: the store checkpoints in the background (checkpoint.go)
		"wal_autocheckpoint": strconv.Itoa(autocheckpointPages),
	} {
		var got string
		if err := s.write.QueryRowContext(t.Context(), "PRAGMA "+pragma).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("PRAGMA %s = %s, want %s", pragma, got, want)
		}
	}
	// The writers gather a commit's WAL frames into one write (internal/walvfs), which
	// holds only with spilling off.
	if !strings.Contains(connParams, "&vfs="+walvfs.Name) {
		t.Errorf("connParams do not name the VFS %s: %s", walvfs.Name, connParams)
	}
	for name, pool := range map[string]*sql.DB{"writer": s.write, "relaxed": s.relaxed} {
		var spill string
		if err := pool.QueryRowContext(t.Context(), "PRAGMA cache_spill").Scan(&spill); err != nil || spill != "0" {
			t.Errorf("%s: PRAGMA cache_spill = %q (%v), want 0: the WAL's write buffer needs it", name, spill, err)
		}
	}
	var readOnly string
	if err := s.read.QueryRowContext(t.Context(), "PRAGMA query_only").Scan(&readOnly); err != nil || readOnly != "1" {
		t.Errorf("read pool query_only = %q, %v", readOnly, err)
	}
	if n := s.write.Stats().MaxOpenConnections; n != 1 {
		t.Errorf("writer pool allows %d connections, want 1", n)
	}
}

func TestOpen_RefusesMemory(t *testing.T) {
	for _, path := range []string{"", ":memory:", "file:x?mode=memory"} {
		if _, err := Open(t.Context(), path); err == nil {
			t.Errorf("Open(%q) succeeded", path)
		}
	}
}

func TestOpen_ReopenKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "odd ?#% name.db")
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	inv, _, err := s.InvocationInsert(t.Context(), store.InsertPending(store.Call{Key: "k"}))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(t.Context(), path) // migrations already applied: a no-op
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := s.InvocationGet(t.Context(), inv.ID); err != nil || got.Key != "k" {
		t.Fatalf("after reopen: %+v, %v", got, err)
	}
}

func TestMigrations_DownThenUp(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	if err := migrateDown(ctx, s.write, 0); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.write.QueryRowContext(ctx,
		`SELECT count(*) FROM sqlite_schema WHERE name NOT IN ('schema_migrations', 'sqlite_sequence')`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d schema objects left after down", n)
	}
	if err := migrateUp(ctx, s.write); err != nil {
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
	if err := migrateDown(ctx, s.write, 5); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := s.write.QueryRowContext(ctx, `INSERT INTO tool_invocations (key, tenant, tool, session_id, run_id, args_hash, status, created_at, updated_at)
		VALUES ('kept', 'acme', 'a.b', 's', 'r', 'h', 'PENDING', 1, 1) RETURNING id`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AuditAppend(ctx, store.AuditEntry{Tenant: "acme", Kind: "approval", Principal: "ana"}); err != nil {
		t.Fatal(err)
	}
	if err := migrateUp(ctx, s.write); err != nil {
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
	for _, stmt := range []string{`UPDATE audit_log SET kind = 'x'`, `DELETE FROM audit_log`} {
		_, err := s.write.ExecContext(t.Context(), stmt)
		if err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s: err = %v, want append-only", stmt, err)
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
	if err := migrateDown(ctx, s.write, 4); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`INSERT INTO session_modes (session_id, tenant, mode, updated_at) VALUES ('s-a', 'a', 'implement', 1), ('s-mode-only', 'b', 'review', 2)`,
		`INSERT INTO tool_invocations (key, tenant, session_id, run_id, args_hash, status, created_at, updated_at)
		 VALUES ('k1', 'a', 's-a', 'r', 'h', 'DENIED', 1, 1), ('k2', 'b', 's-a', 'r', 'h', 'DENIED', 2, 2),
		        ('k3', 'b', 's-b', 'r', 'h', 'SUCCEEDED', 3, 3)`,
	} {
		if _, err := s.write.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	if err := migrateUp(ctx, s.write); err != nil {
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
	if err := migrateDown(ctx, s.write, 7); err != nil {
		t.Fatal(err)
	}
	if _, err := s.write.ExecContext(ctx, `INSERT INTO tool_invocations (key, tenant, tool, status, reason_code, created_at, updated_at)
		VALUES ('k-refused', 'acme', 'a.b', 'DENIED', 'not_in_mode', 1, 1), ('k-person', 'acme', 'a.b', 'DENIED', 'approval_denied', 1, 1),
		       ('k-ok', 'acme', 'a.b', 'SUCCEEDED', '', 1, 1)`); err != nil {
		t.Fatal(err)
	}
	if err := migrateUp(ctx, s.write); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]bool{"k-refused": false, "k-person": true, "k-ok": true} {
		_, err := s.InvocationGetByKey(ctx, key)
		if (err == nil) != want {
			t.Errorf("key %s after the upgrade: %v, want found=%v", key, err, want)
		}
	}
	var moved string
	if err := s.write.QueryRowContext(ctx, `SELECT key FROM tool_invocations WHERE reason_code = 'not_in_mode'`).Scan(&moved); err != nil ||
		!strings.HasPrefix(moved, "k-refused"+store.RefusalKeySuffix) {
		t.Fatalf("the refusal's key: %q, %v", moved, err)
	}
	// The resolution CHECK is gone: a reviewed row moves on.
	inv, _, err := s.InvocationInsert(ctx, store.InsertSettled(store.Call{Key: "k-u", Tenant: "acme"}, store.Settlement{Status: store.StatusUncertain}))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.InvocationResolveUncertain(ctx, inv.ID, store.ResolutionHappened, "carol", json.RawMessage(`{"status":"succeeded"}`), nil); err != nil ||
		got.Status != store.StatusSucceeded {
		t.Fatalf("resolve after the upgrade: %+v, %v", got, err)
	}
}

// TestMigration010_JSONCheckedByTheStore: the upgrade takes the json_valid CHECKs off
// the arguments and the outcome (the store checks them before it writes, for every
// driver), keeps the rows, and down puts them back; no other column changes.
func TestMigration010_JSONCheckedByTheStore(t *testing.T) {
	s := newTestStore(t)
	ctx := t.Context()
	schema := func() string {
		t.Helper()
		var sql string
		if err := s.write.QueryRowContext(ctx, `SELECT sql FROM sqlite_schema WHERE name = 'tool_invocations'`).Scan(&sql); err != nil {
			t.Fatal(err)
		}
		return sql
	}
	after := schema()
	if strings.Contains(after, "json_valid") {
		t.Fatalf("tool_invocations still checks JSON:\n%s", after)
	}
	if err := migrateDown(ctx, s.write, 9); err != nil {
		t.Fatal(err)
	}
	before := schema()
	if strings.Count(before, "json_valid") != 2 {
		t.Fatalf("down did not put both CHECKs back:\n%s", before)
	}
	// Down enforces them again, in this connection too (the schema was reloaded).
	if _, err := s.write.ExecContext(ctx, `INSERT INTO tool_invocations (key, status, args, created_at, updated_at)
		VALUES ('k-bad', 'PENDING', 'not json', 1, 1)`); err == nil || !strings.Contains(err.Error(), "CHECK") {
		t.Fatalf("non-JSON arguments before 010: %v, want a CHECK failure", err)
	}
	if _, err := s.write.ExecContext(ctx, `INSERT INTO tool_invocations (key, status, args, outcome, created_at, updated_at)
		VALUES ('k-old', 'SUCCEEDED', '{"a":1}', '{"ok":true}', 1, 1)`); err != nil {
		t.Fatal(err)
	}
	if err := migrateUp(ctx, s.write); err != nil {
		t.Fatal(err)
	}
	if got := schema(); got != after {
		t.Fatalf("up again:\n%s\nwant\n%s", got, after)
	}
	if got, err := s.InvocationGetByKey(ctx, "k-old"); err != nil || string(got.Args) != `{"a":1}` || string(got.Outcome) != `{"ok":true}` {
		t.Fatalf("the row after the upgrade: %+v, %v", got, err)
	}
	var ok string
	if err := s.write.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("integrity_check: %q, %v", ok, err)
	}
}

// TestMigration011_IDsWithoutSQLiteSequence: after the upgrade a call's record and its
// events take max(id) + 1 without touching sqlite_sequence (the page every record wrote
// for AUTOINCREMENT), deleting either table's rows is refused (what makes max(id) + 1
// never an id a row or an event cursor had), and down puts AUTOINCREMENT back with no
// id reused.
func TestMigration011_IDsWithoutSQLiteSequence(t *testing.T) {
	s := newTestStore(t)
	ctx := t.Context()
	schema := func() string {
		t.Helper()
		var sql string
		if err := s.write.QueryRowContext(ctx, `SELECT group_concat(sql, ';') FROM (SELECT sql FROM sqlite_schema
			WHERE tbl_name IN ('tool_invocations', 'events') AND sql IS NOT NULL ORDER BY name)`).Scan(&sql); err != nil {
			t.Fatal(err)
		}
		return sql
	}
	sequence := func() string {
		t.Helper()
		var seq string
		if err := s.write.QueryRowContext(ctx, `SELECT coalesce(group_concat(name || '=' || seq, ' '), '') FROM
			(SELECT name, seq FROM sqlite_sequence WHERE name IN ('tool_invocations', 'events') ORDER BY name)`).Scan(&seq); err != nil {
			t.Fatal(err)
		}
		return seq
	}
	maxIDs := func() (calls, events int64) {
		t.Helper()
		if err := s.write.QueryRowContext(ctx, `SELECT (SELECT max(id) FROM tool_invocations), (SELECT max(id) FROM events)`).Scan(&calls, &events); err != nil {
			t.Fatal(err)
		}
		return calls, events
	}
	record := func(key string) *store.Invocation {
		t.Helper()
		inv, _, err := s.InvocationInsert(ctx, store.InsertRecordOnce(store.Call{Key: key, Tool: "t", Args: []byte(`{}`)},
			store.SettleSucceeded([]byte(`{"ok":true}`))))
		if err != nil {
			t.Fatal(err)
		}
		return inv
	}

	after := schema()
	if strings.Contains(after, "AUTOINCREMENT") || !strings.Contains(after, "tool_invocations_no_delete") || !strings.Contains(after, "events_no_delete") {
		t.Fatalf("schema after 011:\n%s", after)
	}
	seq := sequence()
	first := record("k-1")
	calls, events := maxIDs()
	second := record("k-2")
	if second.ID != calls+1 || first.ID >= second.ID {
		t.Fatalf("ids %d then %d, max before the second %d", first.ID, second.ID, calls)
	}
	if c, e := maxIDs(); c != second.ID || e != events+2 {
		t.Fatalf("after a record: max ids %d, %d; want %d, %d (the record and its two events)", c, e, second.ID, events+2)
	}
	if got := sequence(); got != seq {
		t.Fatalf("a record wrote sqlite_sequence: %q, was %q", got, seq)
	}
	for _, stmt := range []string{`DELETE FROM tool_invocations WHERE id = ?`, `DELETE FROM events WHERE invocation_id = ?`} {
		if _, err := s.write.ExecContext(ctx, stmt, second.ID); err == nil || !strings.Contains(err.Error(), "never deleted") {
			t.Fatalf("%s: %v, want the no-delete trigger's refusal", stmt, err)
		}
	}

	if err := migrateDown(ctx, s.write, 10); err != nil {
		t.Fatal(err)
	}
	if before := schema(); strings.Count(before, "AUTOINCREMENT") != 2 || strings.Contains(before, "no_delete") {
		t.Fatalf("down did not restore 010's schema:\n%s", before)
	}
	if third := record("k-3"); third.ID != second.ID+1 {
		t.Fatalf("with AUTOINCREMENT back, the next id is %d, want %d", third.ID, second.ID+1)
	}
	if err := migrateUp(ctx, s.write); err != nil {
		t.Fatal(err)
	}
	if got := schema(); got != after {
		t.Fatalf("up again:\n%s\nwant\n%s", got, after)
	}
	if fourth := record("k-4"); fourth.ID != second.ID+2 {
		t.Fatalf("up again, the next id is %d, want %d", fourth.ID, second.ID+2)
	}
	var ok string
	if err := s.write.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("integrity_check: %q, %v", ok, err)
	}
}

// TestWAL_CheckpointedByTheWrites: the store's own writes keep the WAL bounded when
// its background checkpoints do not run (checkpoint.go). SQLite checkpoints
// automatically every autocheckpointPages WAL pages, but only from a statement stepped
// to its end; the store's writes with RETURNING were read with one step and a reset,
// so nothing ever checkpointed and the WAL grew by every page written (about 23 KB
// per record). Each phase runs only the writes a call of its kind makes, and writes
// twice the backstop's pages or more.
func TestWAL_CheckpointedByTheWrites(t *testing.T) {
	s := newTestStore(t)
	ctx := t.Context()
	if err := s.checkpoints.close(); err != nil {
		t.Fatal(err)
	}
	// the backstop, and what the commit that crossed it wrote
	const bound = autocheckpointPages + 500
	call := func(key string) store.Call {
		return store.Call{Key: key, Tenant: "t", RunID: "r", CallID: key, Tool: "t", Args: []byte(`{"k":"` + key + `"}`), ArgsHash: key}
	}
	for i := range 3000 { // read calls: one record-once insert each
		key := "read-" + strconv.Itoa(i)
		if _, _, err := s.InvocationInsert(ctx, store.InsertRecordOnce(call(key), store.SettleSucceeded([]byte(`{"ok":true}`)))); err != nil {
			t.Fatal(err)
		}
	}
	if n := walPages(t, s); n > bound {
		t.Fatalf("after 3,000 records the WAL holds %d pages, want at most %d: no checkpoint ran", n, bound)
	}
	for i := range 2000 { // write calls: a claim insert and two fenced writes each
		key := "write-" + strconv.Itoa(i)
		inv, _, err := s.InvocationInsert(ctx, store.InsertRunning(call(key), "w", time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		f := store.Fence{ID: inv.ID, Owner: "w", Attempt: inv.Attempt}
		if err := s.InvocationMarkEffectSentIfLeased(ctx, f, "token-"+key); err != nil {
			t.Fatal(err)
		}
		if err := s.InvocationSettleIfLeased(ctx, f, store.SettleSucceeded([]byte(`{"ok":true}`))); err != nil {
			t.Fatal(err)
		}
	}
	if n := walPages(t, s); n > bound {
		t.Fatalf("after 2,000 write calls the WAL holds %d pages, want at most %d: no checkpoint ran", n, bound)
	}
}

// Hosts started together on a new store file all open it: the ones that lose the race
// to switch the file to WAL, which SQLite answers with SQLITE_BUSY without waiting,
// try again instead of failing (seen as "database is locked" when two toolrun serve
// started at once on one file). Each round is a new file opened three times at once.
func TestOpen_ConcurrentOnANewFile(t *testing.T) {
	for round := range 30 {
		path := filepath.Join(t.TempDir(), "shared.db")
		var wg sync.WaitGroup
		errs := make([]error, 3)
		for i := range errs {
			wg.Go(func() {
				s, err := Open(context.Background(), path)
				if err == nil {
					err = s.Close()
				}
				errs[i] = err
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d, open %d: %v", round, i, err)
			}
		}
	}
}
