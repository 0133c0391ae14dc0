package hostcli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/toolgen/toolgen/host"
	"github.com/toolgen/toolgen/internal/textsafe"
)

// catalogFlags are catalog's flags.
type catalogFlags struct {
	common
	force, reason string
}

func (f *catalogFlags) bind(fs *flag.FlagSet, cmd string) {
	f.common.bind(fs, cmd)
	fs.StringVar(&f.force, "force-epoch", "", "re-pin every running session's catalog of SERVER to its current tools")
	fs.StringVar(&f.reason, "reason", "", "why (recorded with a forced epoch)")
}

// runCatalog is catalog: the tools this host serves and the upstream catalog history;
// with --force-epoch SERVER, a forced epoch that re-pins SERVER's tools in every running
// session.
func runCatalog(e *env, cmd string, args []string) int {
	var f catalogFlags
	if pos, err := e.parse(cmd, &f, args); err != nil || len(pos) > 0 {
		return usageErr(e, cmd, "takes no arguments besides flags")
	}
	h, err := f.open(e, []string{}, nil)
	if err != nil {
		return fail(e, cmd, err)
	}
	defer h.Close()
	actor, err := f.actor(e, h)
	if err != nil {
		return fail(e, cmd, err)
	}
	if f.force != "" {
		id, err := h.Operator().ForceEpoch(e.ctx, actor, f.force, f.reason)
		switch {
		case errors.Is(err, host.ErrUnknownServer):
			fmt.Fprintf(e.stderr, "%s catalog: %s\n", e.name, textsafe.Text(err.Error()))
			return ExitTrouble
		case errors.Is(err, host.ErrRateLimited):
			return refused(e, cmd, err)
		case err != nil:
			return fail(e, cmd, err)
		}
		if f.json {
			writeJSON(e.stdout, map[string]any{"server": f.force, "forced_epoch": id})
		} else {
			fmt.Fprintf(e.stdout, "forced epoch %d recorded for %s: serving processes re-pin its tools in every running session\n", id, textsafe.Field(f.force))
		}
		return ExitOK
	}
	history, err := h.Operator().CatalogHistory(e.ctx, actor)
	if err != nil {
		return fail(e, cmd, err)
	}
	served := h.Registry().Current()
	if f.json {
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
		for _, s := range served {
			out.Tools = append(out.Tools, tool{s.Name, s.Version, s.SchemaSHA256})
		}
		for _, ch := range history {
			out.History = append(out.History, change{ch.ID, ch.At, ch.ServerID, ch.Change, ch.Tool, ch.SHA256, ch.Detail})
		}
		writeJSON(e.stdout, out)
		return ExitOK
	}
	var tab [][]string
	for _, s := range served {
		tab = append(tab, []string{s.Name, strconv.Itoa(s.Version), short(s.SchemaSHA256)})
	}
	fmt.Fprintln(e.stdout, "tools served by this host (this process):")
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
