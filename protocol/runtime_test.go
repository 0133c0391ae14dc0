package protocol_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/toolgen/toolgen/protocol"
)

func newRuntime(t *testing.T, cfg protocol.Config) *protocol.Runtime {
	t.Helper()
	if cfg.Protocol == nil {
		cfg.Protocol = loadShipped(t)
	}
	if cfg.Audit == nil {
		cfg.Audit = &auditRecorder{}
	}
	r, err := protocol.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// every tool a server could offer: the builtins, two tools of the everything server
// (which plan holds as mcp.everything.*) and one of a server no mode names.
var catalog = []string{
	"conversation.ask_user", "mcp.everything.echo", "mcp.everything.get_sum", "mcp.tickets.create",
	"protocol.dispatch", "review.approve", "review.merge", "workspace.list", "workspace.read_text",
	"workspace.write_text",
}

func TestToolsFor_ExposesOnlyTheActiveModesTools(t *testing.T) {
	sessions := &protocol.MemorySessionModes{}
	r := newRuntime(t, protocol.Config{Sessions: sessions})
	want := map[string][]string{
		"plan": {"conversation.ask_user", "mcp.everything.echo", "mcp.everything.get_sum",
			"protocol.dispatch", "workspace.list", "workspace.read_text", "workspace.write_text"},
		"implement": {"conversation.ask_user", "protocol.dispatch", "workspace.list", "workspace.read_text",
			"workspace.write_text"},
		"review": {"conversation.ask_user", "protocol.dispatch", "review.approve", "review.merge",
			"workspace.list", "workspace.read_text"},
	}
	for mode, tools := range want {
		if err := sessions.SessionModeSet(t.Context(), "acme", "s-"+mode, mode); err != nil {
			t.Fatal(err)
		}
		got, err := r.ToolsFor(t.Context(), "acme", "s-"+mode, catalog)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tools) {
			t.Errorf("mode %s exposes %v, want %v", mode, got, tools)
		}
		for _, tool := range catalog {
			in, err := r.Exposed(t.Context(), "acme", "s-"+mode, tool)
			if err != nil {
				t.Fatal(err)
			}
			if in != slices.Contains(tools, tool) {
				t.Errorf("Exposed(%s, %s) = %v", mode, tool, in)
			}
		}
	}
}

func TestToolsFor_ToolInNoMode_ExposedInNone(t *testing.T) {
	sessions := &protocol.MemorySessionModes{}
	r := newRuntime(t, protocol.Config{Sessions: sessions})
	for _, mode := range r.Protocol().Modes() {
		if err := sessions.SessionModeSet(t.Context(), "acme", "s1", mode); err != nil {
			t.Fatal(err)
		}
		if in, err := r.Exposed(t.Context(), "acme", "s1", "mcp.tickets.create"); err != nil || in {
			t.Errorf("mode %s: mcp.tickets.create exposed = %v, %v; a tool no mode names is exposed in none", mode, in, err)
		}
	}
}

func TestActiveMode_PinnedThenPersistedThenInitial(t *testing.T) {
	sessions := &protocol.MemorySessionModes{}
	if err := sessions.SessionModeSet(t.Context(), "acme", "moved", "implement"); err != nil {
		t.Fatal(err)
	}
	pinned := newRuntime(t, protocol.Config{PinnedMode: "review", Sessions: sessions})
	served := newRuntime(t, protocol.Config{Sessions: sessions})
	cases := []struct {
		name    string
		r       *protocol.Runtime
		session string
		want    string
	}{
		{"pinned wins over the persisted mode", pinned, "moved", "review"},
		{"pinned, new session", pinned, "new", "review"},
		{"persisted current_mode", served, "moved", "implement"},
		{"no persisted mode: initial_mode", served, "new", "plan"},
		{"no session id: initial_mode", served, "", "plan"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.r.Mode(t.Context(), "acme", c.session)
			if err != nil || got != c.want {
				t.Errorf("Mode(%q) = %q, %v; want %q", c.session, got, err, c.want)
			}
			mode, in, err := c.r.ActiveMode(t.Context(), "acme", c.session, "review.approve")
			if err != nil || mode != c.want || in != (c.want == "review") {
				t.Errorf("ActiveMode(%q, review.approve) = %q, %v, %v", c.session, mode, in, err)
			}
		})
	}
}

func TestActiveMode_PersistedModeNoLongerDeclared_FallsBackToInitial(t *testing.T) {
	sessions := &protocol.MemorySessionModes{}
	if err := sessions.SessionModeSet(t.Context(), "acme", "s1", "deploy"); err != nil {
		t.Fatal(err)
	}
	r := newRuntime(t, protocol.Config{Sessions: sessions})
	if got, err := r.Mode(t.Context(), "acme", "s1"); err != nil || got != "plan" {
		t.Errorf("Mode = %q, %v; want the initial mode plan", got, err)
	}
}

type failingSessions struct{ err error }

func (f failingSessions) SessionModeGet(context.Context, string, string) (string, error) {
	return "", f.err
}
func (f failingSessions) SessionModeSet(context.Context, string, string, string) error {
	return f.err
}

func TestActiveMode_StoreFailure_IsAnError(t *testing.T) {
	boom := errors.New("database is locked")
	r := newRuntime(t, protocol.Config{Sessions: failingSessions{boom}})
	if _, _, err := r.ActiveMode(t.Context(), "acme", "s1", "workspace.list"); !errors.Is(err, boom) {
		t.Errorf("err %v, want the store's", err)
	}
	if _, err := r.ToolsFor(t.Context(), "acme", "s1", catalog); !errors.Is(err, boom) {
		t.Errorf("ToolsFor err %v, want the store's", err)
	}
}

func TestNew_RefusesIncompleteConfig(t *testing.T) {
	p := loadShipped(t)
	audit := &auditRecorder{}
	for name, cfg := range map[string]protocol.Config{
		"no protocol":           {Audit: audit, Sessions: &protocol.MemorySessionModes{}},
		"no audit":              {Protocol: p, Sessions: &protocol.MemorySessionModes{}},
		"unpinned, no sessions": {Protocol: p, Audit: audit},
		"unknown pinned mode":   {Protocol: p, Audit: audit, PinnedMode: "deploy"},
	} {
		if _, err := protocol.New(cfg); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
	if _, err := protocol.New(protocol.Config{Protocol: p, Audit: audit, PinnedMode: "plan"}); err != nil {
		t.Errorf("a pinned runtime needs no session modes: %v", err)
	}
}
