package faultstore_test

import (
	"context"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolgen/toolgen/runtime/internal/faultstore"
	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/runtime/store/sqlite"
)

func openSQLite(t *testing.T) store.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "f.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func running(key string) store.InsertParams {
	return store.InsertRunning(store.Call{
		Key: key, Tenant: "acme", Principal: "alice", RunID: "r1", Step: 1, CallID: key,
		Tool: "t.send", ToolVersion: 1, Idempotency: store.IdempotencyNonIdempotent,
		Args: []byte(`{}`), ArgsHash: "h-" + key, Decision: store.DecisionAllow,
	}, "w1", time.Minute)
}

func newFault(t *testing.T, s store.Store, rules ...faultstore.Rule) *faultstore.Store {
	t.Helper()
	f, err := faultstore.New(s, faultstore.Options{Seed: 1, Rules: rules, MaxHang: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestTimeout_FailsBeforeCommit(t *testing.T) {
	ctx := context.Background()
	raw := openSQLite(t)
	f := newFault(t, raw, faultstore.Rule{Point: faultstore.InsertRunning, Kind: faultstore.Timeout, Nth: 1})
	_, _, err := f.InvocationInsert(ctx, running("k1"))
	var fe *faultstore.Error
	if !errors.As(err, &fe) || fe.Applied || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want an unapplied injected timeout", err)
	}
	if _, err := raw.InvocationGetByKey(ctx, "k1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("row after Timeout: err = %v, want ErrNotFound", err)
	}
	// Only the first call faults.
	if _, ok, err := f.InvocationInsert(ctx, running("k1")); err != nil || !ok {
		t.Fatalf("second insert: ok=%v err=%v", ok, err)
	}
	if got := f.Injected()[faultstore.Fault{Point: faultstore.InsertRunning, Kind: faultstore.Timeout}]; got != 1 {
		t.Fatalf("injected = %d, want 1", got)
	}
}

func TestExecuteAndTimeout_CommitsThenFails(t *testing.T) {
	ctx := context.Background()
	raw := openSQLite(t)
	inv, _, err := raw.InvocationInsert(ctx, running("k1"))
	if err != nil {
		t.Fatal(err)
	}
	f := newFault(t, raw, faultstore.Rule{Point: faultstore.Watermark, Kind: faultstore.ExecuteAndTimeout, Nth: 1})
	err = f.InvocationMarkEffectSentIfLeased(ctx, inv.Fence(), "tok")
	var fe *faultstore.Error
	if !errors.As(err, &fe) || !fe.Applied || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want an applied injected timeout", err)
	}
	got, err := raw.InvocationGet(ctx, inv.ID)
	if err != nil || got.EffectSentAt == nil {
		t.Fatalf("watermark after ExecuteAndTimeout: %v, %v; want committed", got, err)
	}
	// The retry with the same token is recognised as the same write.
	if err := f.InvocationMarkEffectSentIfLeased(ctx, inv.Fence(), "tok"); err != nil {
		t.Fatalf("retry with the same token: %v", err)
	}
}

func TestHang_BlocksUntilDeadline(t *testing.T) {
	raw := openSQLite(t)
	for _, k := range []faultstore.Kind{faultstore.Hang, faultstore.HangAfterExecute} {
		t.Run(k.String(), func(t *testing.T) {
			key := "k-" + k.String()
			f := newFault(t, raw, faultstore.Rule{Point: faultstore.InsertRunning, Kind: k, Nth: 1})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
			defer cancel()
			_, _, err := f.InvocationInsert(ctx, running(key))
			if ctx.Err() == nil {
				t.Fatal("the hang returned before its context ended")
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want ctx.Err()", err)
			}
			_, err = raw.InvocationGetByKey(context.Background(), key)
			if applied := err == nil; applied != k.Applies() {
				t.Fatalf("applied = %v (err %v), want %v", applied, err, k.Applies())
			}
		})
	}
}

func TestHang_WithoutDeadline_BoundedByMaxHang(t *testing.T) {
	raw := openSQLite(t)
	f := newFault(t, raw, faultstore.Rule{Point: faultstore.Renew, Kind: faultstore.Hang, Nth: 1})
	_, err := f.InvocationRenewLeases(context.Background(), "w1", []int64{1}, time.Minute)
	var fe *faultstore.Error
	if !errors.As(err, &fe) || fe.Kind != faultstore.Hang || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want an injected hang ending as a deadline", err)
	}
}

func TestRate_DeterministicForASeed(t *testing.T) {
	raw := openSQLite(t)
	run := func(seed uint64) (string, int) {
		f, err := faultstore.New(raw, faultstore.Options{Seed: seed, Rules: []faultstore.Rule{
			{Point: faultstore.Renew, Kind: faultstore.Timeout, Rate: 0.05},
			{Point: faultstore.Renew, Kind: faultstore.ExecuteAndTimeout, Rate: 0.05},
		}})
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for i := 0; i < 2000; i++ {
			_, err := f.InvocationRenewLeases(context.Background(), "w1", []int64{1}, time.Minute)
			var fe *faultstore.Error
			if errors.As(err, &fe) {
				fmt.Fprintf(&b, "%d:%s ", i, fe.Kind)
			} else if err != nil {
				t.Fatal(err)
			}
		}
		return b.String(), f.InjectedTotal()
	}
	a, n := run(7)
	b, _ := run(7)
	if a != b {
		t.Fatal("the same seed injected different faults")
	}
	// 10 % of 2000 calls; the bounds are 6 standard deviations wide.
	if n < 120 || n > 280 {
		t.Fatalf("injected %d of 2000 at 10 %%", n)
	}
}

func TestRules_Validated(t *testing.T) {
	raw := openSQLite(t)
	for _, r := range []faultstore.Rule{
		{Point: faultstore.Sweep, Kind: faultstore.Timeout},
		{Point: faultstore.Sweep, Kind: faultstore.Timeout, Nth: 1, Rate: 0.5},
		{Point: faultstore.Sweep, Kind: 0, Nth: 1},
		{Point: faultstore.Sweep, Kind: faultstore.Hang, Rate: 2},
	} {
		if _, err := faultstore.New(raw, faultstore.Options{Rules: []faultstore.Rule{r}}); err == nil {
			t.Errorf("rule %+v accepted", r)
		}
	}
}

func TestReadsAreNeverFaulted(t *testing.T) {
	raw := openSQLite(t)
	var rules []faultstore.Rule
	for _, p := range faultstore.Points {
		rules = append(rules, faultstore.Rule{Point: p, Kind: faultstore.Timeout, Rate: 1})
	}
	f := newFault(t, raw, rules...)
	if _, err := f.InvocationGetByKey(context.Background(), "none"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("read: %v", err)
	}
	if _, err := f.InvocationListRetryable(context.Background(), store.RetryableParams{Limit: 10, Claimable: store.Claimable{AllTools: true}}); err != nil {
		t.Fatalf("read: %v", err)
	}
	if f.InjectedTotal() != 0 {
		t.Fatal("a read was faulted")
	}
}

// faultstore, and testtools beside it, are for tests only: no production file of the
// module may import them.
func TestNoProductionCodeImportsFaultstore(t *testing.T) {
	testOnly := map[string]bool{
		"github.com/toolgen/toolgen/runtime/internal/faultstore": true,
		"github.com/toolgen/toolgen/runtime/internal/testtools":  true,
	}
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); p != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".")) {
				return fs.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return nil // not ours to judge here; the build reports it
		}
		for _, imp := range f.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); testOnly[path] {
				rel, _ := filepath.Rel(root, p)
				t.Errorf("%s imports %s; only _test.go files may", rel, path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
