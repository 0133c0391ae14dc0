package console

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgen/toolgen/internal/events"
	"github.com/toolgen/toolgen/model"
	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/runtime/store/sqlite"
	"github.com/toolgen/toolgen/spec"
)

func notifications(t *testing.T, doc string) *model.Notifications {
	t.Helper()
	n, diags := spec.LoadNotifications(spec.NotificationsFile, spec.NotificationsFile, []byte(doc))
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	return n.Model()
}

// TestClaimIsExclusive: of the notifiers on one store, exactly one wins the claim of
// each webhook's message of each event, however many ask and in whatever order.
func TestClaimIsExclusive(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "claims.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	env := map[string]string{"K": "a signing key of 16+ bytes"}
	n := notifications(t, "webhooks:\n  - {name: a, url: \"https://a.example.com/\", secret_env: K}\n  - {name: b, url: \"https://b.example.com/\", secret_env: K}\n")
	var ns []*Notifier
	for range 3 {
		x, err := NewNotifier(NotifierOptions{Notifications: n, Store: st, Getenv: func(k string) string { return env[k] }})
		if err != nil {
			t.Fatal(err)
		}
		ns = append(ns, x)
	}
	for id := int64(1); id <= 20; id++ {
		ev := store.Event{Cursor: store.EventCursor{ID: id}, Kind: "held"}
		for _, h := range ns[0].hooks {
			wins := 0
			for i := range ns {
				// Each notifier's own hook of the same webhook.
				won, err := ns[(i+int(id))%len(ns)].claim(context.Background(), ns[(i+int(id))%len(ns)].hooks[indexOf(ns[0].hooks, h)], ev)
				if err != nil {
					t.Fatal(err)
				}
				if won {
					wins++
				}
			}
			if wins != 1 {
				t.Errorf("event %d, webhook %s: %d notifiers won the claim", id, h.w.Name, wins)
			}
		}
	}
}

func indexOf(hs []*hook, h *hook) int {
	for i := range hs {
		if hs[i] == h {
			return i
		}
	}
	return -1
}

func TestNewNotifierNeedsItsVariables(t *testing.T) {
	n := notifications(t, "webhooks:\n  - {name: a, url_env: HOOK_URL, secret_env: HOOK_KEY}\n")
	for name, env := range map[string]map[string]string{
		"no URL":    {"HOOK_KEY": "a signing key of 16+ bytes"},
		"no key":    {"HOOK_URL": "https://a.example.com/"},
		"short key": {"HOOK_URL": "https://a.example.com/", "HOOK_KEY": "short"},
	} {
		_, err := NewNotifier(NotifierOptions{Notifications: n, Store: nilStore{}, Getenv: func(k string) string { return env[k] }})
		if err == nil || !strings.Contains(err.Error(), "HOOK_") {
			t.Errorf("%s: %v, want an error naming the variable", name, err)
		}
		if err != nil && strings.Contains(err.Error(), "a signing key") {
			t.Errorf("%s: the error repeats the secret", name)
		}
	}
}

type nilStore struct{ store.Store }

func TestBackoffIsBoundedAndJittered(t *testing.T) {
	for n := 1; n <= 12; n++ {
		d := min(time.Second<<(n-1), time.Minute)
		seen := map[time.Duration]bool{}
		for range 50 {
			w := backoff(time.Second, time.Minute, n)
			if w < d/2 || w > d {
				t.Fatalf("retry %d waits %s, want within [%s, %s]", n, w, d/2, d)
			}
			seen[w] = true
		}
		if len(seen) < 2 {
			t.Errorf("retry %d always waits the same", n)
		}
	}
}

func TestSignature(t *testing.T) {
	key, body := []byte("a signing key of 16+ bytes"), []byte(`{"type":"toolgen.call.held"}`)
	now := time.Now()
	h := Sign(key, now, body)
	if err := VerifySignature(key, h, body, now, time.Minute); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		key, body []byte
		header    string
		at        time.Time
	}{
		"another key":  {[]byte("another key of 16 bytes"), body, h, now},
		"another body": {key, []byte(`{"type":"toolgen.call.uncertain"}`), h, now},
		"replayed":     {key, body, h, now.Add(time.Hour)},
		"malformed":    {key, body, "v1=00", now},
		"another time": {key, body, strings.Replace(h, "t=", "t=1", 1), now},
	} {
		if err := VerifySignature(c.key, c.header, c.body, c.at, time.Minute); err == nil {
			t.Errorf("%s: verified", name)
		}
	}
}

// TestSlackBodyEscapes: ids are printable ASCII, and Slack reads <...> as links and
// mentions: they are escaped, so an id cannot ping a channel or forge a link.
func TestSlackBodyEscapes(t *testing.T) {
	m := Message{Event: events.Event{Kind: "held", Tool: "demo.deploy", InvocationID: 7, Tenant: "acme",
		SessionID: "<!channel>", RunID: "<https://evil.example|click>"}, ConsolePath: "/console/invocations/7",
		ConsoleURL: "https://toolgen.example.com/console/invocations/7"}
	b, _ := marshal(slackBody(m))
	if strings.Contains(string(b), "<!channel>") || strings.Contains(string(b), "<https://evil") ||
		!strings.Contains(string(b), "&lt;!channel&gt;") || !strings.Contains(string(b), "<https://toolgen.example.com/console/invocations/7|Review it in the console>") {
		t.Errorf("slack body: %s", b)
	}
}
