package toolruncli

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/toolgen/toolgen/internal/host"
	"github.com/toolgen/toolgen/runtime/store"
)

// ChangeForcedEpoch is the mcp_catalog_history change an operator's forced epoch
// records; the adapter's own changes are mcp/upstream's Change* constants.
const ChangeForcedEpoch = "forced_epoch"

// ForceEpochWindow is the rate limit of forced epochs: at most one per server per
// window. A forced epoch changes what running sessions may call, so it is rare by
// design; the window keeps a script in a loop from turning pinning off.
const ForceEpochWindow = time.Minute

func runCatalog(e *env, cmd string, args []string) int {
	fs, c := newFlags(cmd, e)
	force := fs.String("force-epoch", "", "re-pin every running session's catalog of SERVER to its current tools")
	reason := fs.String("reason", "", "why (recorded with a forced epoch)")
	if pos, err := parse(fs, args); err != nil || len(pos) > 0 {
		return usageErr(e, cmd, "takes no arguments besides flags")
	}
	h, err := c.open(e, nil)
	if err != nil {
		return fail(e, cmd, err)
	}
	defer h.Close()
	if *force != "" {
		return forceEpoch(e, c, h, *force, *reason)
	}
	history, err := h.Store.CatalogHistoryList(e.ctx, "")
	if err != nil {
		return fail(e, cmd, err)
	}
	builtins := h.Registry.Current()
	if c.json {
		type tool struct {
			Name    string `json:"name"`
			Version int    `json:"version"`
			SHA256  string `json:"schema_sha256"`
		}
		type change struct {
			ID       int64           `json:"id"`
			At       time.Time       `json:"at"`
			ServerID string          `json:"server_id"`
			Change   string          `json:"change"`
			Tool     string          `json:"tool,omitempty"`
			SHA256   string          `json:"sha256,omitempty"`
			Detail   json.RawMessage `json:"detail,omitempty"`
		}
		out := struct {
			Tools   []tool   `json:"tools"`
			History []change `json:"history"`
		}{Tools: []tool{}, History: []change{}}
		for _, s := range builtins {
			out.Tools = append(out.Tools, tool{s.Name, s.Version, s.SchemaSHA256})
		}
		for _, ch := range history {
			out.History = append(out.History, change{ch.ID, ch.At, ch.ServerID, ch.Change, ch.Tool, ch.SHA256, ch.Detail})
		}
		writeJSON(e.stdout, out)
		return ExitOK
	}
	var tab [][]string
	for _, s := range builtins {
		tab = append(tab, []string{s.Name, strconv.Itoa(s.Version), short(s.SchemaSHA256)})
	}
	fmt.Fprintln(e.stdout, "builtin tools (this process):")
	table(e.stdout, []string{"TOOL", "VERSION", "SCHEMA_SHA256"}, tab)
	fmt.Fprintln(e.stdout, "\nupstream catalog history (drift is recorded here; running sessions keep their pins):")
	if len(history) == 0 {
		fmt.Fprintln(e.stdout, "none recorded")
		return ExitOK
	}
	tab = nil
	for _, ch := range history {
		tab = append(tab, []string{ch.At.UTC().Format(time.RFC3339), ch.ServerID, ch.Change, orDash(ch.Tool), short(ch.SHA256)})
	}
	table(e.stdout, []string{"AT", "SERVER", "CHANGE", "TOOL", "SHA256"}, tab)
	return ExitOK
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return orDash(h)
}

// forceEpoch records an operator's forced epoch for a server (MCP-7): the serving
// processes see the forced_epoch entry in the catalog history and re-pin that
// server's tools in every running session. Logged, audited and rate-limited.
func forceEpoch(e *env, c *common, h *host.Host, server, reason string) int {
	if h.Tree.Server(server) == nil {
		fmt.Fprintf(e.stderr, "toolrun catalog: no server %q in %s/servers\n", server, c.dir)
		return ExitTrouble
	}
	history, err := h.Store.CatalogHistoryList(e.ctx, server)
	if err != nil {
		return fail(e, "catalog", err)
	}
	var last *store.CatalogChange
	for i := range history {
		if history[i].Change == ChangeForcedEpoch {
			last = &history[i]
		}
	}
	// Entries carry the store's clock; toolrun and its store share a host clock in
	// practice, and a skew only shifts the window.
	if last != nil {
		if wait := ForceEpochWindow - time.Since(last.At); wait > 0 {
			fmt.Fprintf(e.stderr, "toolrun catalog: a forced epoch of %s was recorded at %s; at most one per %s (try again in %s)\n",
				server, last.At.UTC().Format(time.RFC3339), ForceEpochWindow, wait.Round(time.Second))
			return ExitFailed
		}
	}
	detail, _ := json.Marshal(map[string]string{"by": c.principal, "reason": reason})
	id, err := h.Store.CatalogHistoryAppend(e.ctx, store.CatalogChange{ServerID: server, Change: ChangeForcedEpoch, Detail: detail})
	if err != nil {
		return fail(e, "catalog", err)
	}
	if _, err := h.Store.AuditAppend(e.ctx, store.AuditEntry{Tenant: c.tenant, Kind: "forced_epoch", Principal: c.principal,
		Detail: detail, Tool: "mcp." + server + ".*"}); err != nil {
		return fail(e, "catalog", err)
	}
	h.Logger.Warn("forced epoch recorded", "server", server, "by", c.principal, "history_id", id)
	if c.json {
		writeJSON(e.stdout, map[string]any{"server": server, "forced_epoch": id})
	} else {
		fmt.Fprintf(e.stdout, "forced epoch %d recorded for %s: serving processes re-pin its tools in every running session\n", id, server)
	}
	return ExitOK
}
