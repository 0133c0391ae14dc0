package console_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolgen/toolgen/host/console"
	"github.com/toolgen/toolgen/runtime/store/postgres/pgtest"
)

// pgSchema creates a schema of its own in TOOLGEN_PG_DSN's database, dropped when the
// test ends, and returns a DSN using it: the store the test's hosts share.
func pgSchema(t *testing.T) string {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	schema := "console_test_" + strings.ToLower(rand.Text())
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if conn, err := pgx.Connect(ctx, dsn); err == nil {
			conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			conn.Close(ctx)
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// receiver is a webhook receiver on loopback: it records every request, and answers
// the first attempt of every message 500 (the retry is then answered 200).
type receiver struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []received
}

type received struct {
	delivery, event, signature string
	body                       []byte
	status                     int
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		status := http.StatusOK
		seen := false
		for _, q := range rc.reqs {
			seen = seen || q.delivery == r.Header.Get(console.DeliveryHeader)
		}
		if !seen {
			status = http.StatusInternalServerError
		}
		rc.reqs = append(rc.reqs, received{delivery: r.Header.Get(console.DeliveryHeader), event: r.Header.Get(console.EventHeader),
			signature: r.Header.Get(console.SignatureHeader), body: body, status: status})
		w.WriteHeader(status)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// accepted are the messages answered 200, by delivery id.
func (rc *receiver) accepted() map[string][]received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := map[string][]received{}
	for _, q := range rc.reqs {
		if q.status == http.StatusOK {
			out[q.delivery] = append(out[q.delivery], q)
		}
	}
	return out
}

func (rc *receiver) all() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.reqs...)
}

// acceptedFor returns the accepted json messages about invocation id.
func (rc *receiver) acceptedFor(t *testing.T, id int64) []console.Message {
	var out []console.Message
	for _, list := range rc.accepted() {
		for _, q := range list {
			var m console.Message
			if err := json.Unmarshal(q.body, &m); err != nil {
				t.Fatalf("a message is not JSON: %v", err)
			}
			if m.Event.InvocationID == id {
				out = append(out, m)
			}
		}
	}
	return out
}

// marker is in every argument the test's calls send; no message may carry it (EV-1).
const marker = "ARG-MARKER-7f3e"

// TestWebhooks (issue 18): two hosts serve one store; a webhook receiver on loopback
// gets exactly one message per held call and per UNCERTAIN call of its tenant — signed,
// with the classification and a console link, never the arguments — the first attempt
// answered 500 and retried; a Slack-format receiver gets the same once each. On
// PostgreSQL too when TOOLGEN_PG_DSN is set.
func TestWebhooks(t *testing.T) {
	stores := map[string]func(t *testing.T) string{
		"sqlite": func(t *testing.T) string { return filepath.Join(t.TempDir(), "shared.db") },
	}
	if os.Getenv("TOOLGEN_PG_DSN") != "" {
		stores["postgres"] = pgSchema
	}
	for name, db := range stores {
		t.Run(name, func(t *testing.T) { testWebhooks(t, db(t)) })
	}
}

func testWebhooks(t *testing.T, db string) {
	hook, chat := newReceiver(t), newReceiver(t)
	t.Setenv(hookSecretEnv, hookSecret)
	t.Setenv("TOOLGEN_TEST_SLACK_URL", chat.srv.URL+"/services/T000/B000/XXXX")
	notifications := fmt.Sprintf(`console_url: https://toolgen.example.com
webhooks:
  - name: reviewers
    url: %s/hook
    secret_env: %s
    tenants: [acme]
  - name: chat
    format: slack
    url_env: TOOLGEN_TEST_SLACK_URL
    events: [held]
`, hook.srv.URL, hookSecretEnv)
	d := newDeployment(t, principalsYAML(""), notifications)
	var check func()
	// Once more after both hosts stopped (cleanups run last-registered first): a
	// message a lagging process sent late would show there.
	t.Cleanup(func() {
		if check != nil {
			check()
		}
	})
	a, b := serve(t, d, db), serve(t, d, db)

	var held []int64
	for i, s := range []*server{a, b, a} {
		agent := s.agent(agentToken)
		if _, reason := call(t, agent, "demo.deploy", fmt.Sprintf("c-hook-%d", i), map[string]any{"service": marker, "note": marker}); reason != "approval_pending" {
			t.Fatalf("call %d: %s", i, reason)
		}
		held = append(held, a.lastOf("acme", "demo.deploy"))
	}
	// Another tenant's held call: not for a webhook of acme's.
	if _, reason := callIn(t, b.agent(gusToken), "s-globex", "demo.deploy", "c-globex", map[string]any{"service": marker}); reason != "approval_pending" {
		t.Fatalf("globex's call: %s", reason)
	}
	globex := a.lastOf("globex", "demo.deploy")
	uncertain := a.uncertainCall("acme", "c-hook-charge")

	want := append(append([]int64{}, held...), uncertain)
	waitFor(t, "every message accepted", func() bool {
		for _, id := range want {
			if len(hook.acceptedFor(t, id)) == 0 {
				return false
			}
		}
		for _, id := range append(held, globex) {
			if !chatHas(chat, id) {
				return false
			}
		}
		return true
	})
	// The sentinel: one more held call, its message seen, then the counts.
	if _, reason := call(t, b.agent(agentToken), "demo.deploy", "c-hook-last", map[string]any{"service": marker}); reason != "approval_pending" {
		t.Fatalf("the last call: %s", reason)
	}
	last := a.lastOf("acme", "demo.deploy")
	waitFor(t, "the last message", func() bool { return len(hook.acceptedFor(t, last)) > 0 && chatHas(chat, last) })

	check = func() {
		for _, id := range append(want, last) {
			msgs := hook.acceptedFor(t, id)
			if len(msgs) != 1 {
				t.Errorf("invocation %d: %d messages accepted, want exactly 1", id, len(msgs))
				continue
			}
			m := msgs[0]
			kind := "held"
			if id == uncertain {
				kind = "uncertain"
			}
			if m.Type != "toolgen.call."+kind || m.Event.Kind != kind || m.Event.Tenant != "acme" || m.Event.Tool == "" ||
				m.ConsoleURL != fmt.Sprintf("https://toolgen.example.com/console/invocations/%d", id) {
				t.Errorf("invocation %d: message %+v", id, m)
			}
			if kind == "held" && (m.HeldBecause == nil || m.HeldBecause.Cause != "policy_rule" || m.HeldBecause.Rule != "deploys-need-review") {
				t.Errorf("invocation %d: held because %+v", id, m.HeldBecause)
			}
		}
		if len(hook.acceptedFor(t, globex)) != 0 {
			t.Errorf("globex's held call was sent to acme's webhook")
		}
		perDelivery := map[string]int{}
		for _, q := range hook.all() {
			perDelivery[q.delivery]++
			if err := console.VerifySignature([]byte(hookSecret), q.signature, q.body, time.Now(), 10*time.Minute); err != nil {
				t.Errorf("delivery %s: the signature does not verify: %v", q.delivery, err)
			}
			if err := console.VerifySignature([]byte("another key of 16 bytes+"), q.signature, q.body, time.Now(), 10*time.Minute); err == nil {
				t.Errorf("delivery %s: verifies with another key", q.delivery)
			}
			if strings.Contains(string(q.body), marker) {
				t.Errorf("delivery %s carries the arguments: %s", q.delivery, q.body)
			}
		}
		for id, n := range perDelivery {
			if n != 2 {
				t.Errorf("delivery %s: %d attempts, want 2 (a 500, then its retry)", id, n)
			}
		}
		for _, q := range chat.all() {
			if strings.Contains(string(q.body), marker) || q.event != "held" {
				t.Errorf("chat delivery %s: %s %s", q.delivery, q.event, q.body)
			}
		}
		// The chat webhook names no tenants: every tenant's held calls, no UNCERTAIN one.
		if got := len(chat.accepted()); got != len(held)+2 {
			t.Errorf("the chat webhook accepted %d messages, want %d (acme's held calls, the last, globex's)", got, len(held)+2)
		}
	}
	check()
}

// chatHas reports whether the Slack receiver accepted a message about invocation id.
func chatHas(rc *receiver, id int64) bool {
	for _, list := range rc.accepted() {
		for _, q := range list {
			var body struct {
				Text string `json:"text"`
			}
			if json.Unmarshal(q.body, &body) == nil && strings.Contains(body.Text, fmt.Sprintf("#%d ", id)) &&
				strings.Contains(body.Text, fmt.Sprintf("<https://toolgen.example.com/console/invocations/%d|Review it in the console>", id)) {
				return true
			}
		}
	}
	return false
}
