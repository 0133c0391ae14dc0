package runtime

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/toolgen/toolgen/internal/wspath"
)

// WorkspacePathKeyword marks, in a builtin's input schema, a top-level string argument
// that names a path in the call's workspace (`workspace_path: true` in the spec). It is
// the same string as spec.WorkspacePathKeyword.
const WorkspacePathKeyword = "x-toolgen-workspace-path"

// workspacePathArgs reads the workspace-path arguments of an input schema, sorted.
func workspacePathArgs(schema json.RawMessage) ([]string, error) {
	if len(schema) == 0 {
		return nil, nil
	}
	var s struct {
		Properties map[string]map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		return nil, err
	}
	var out []string
	for name, prop := range s.Properties {
		raw, ok := prop[WorkspacePathKeyword]
		if !ok {
			continue
		}
		var on bool
		if err := json.Unmarshal(raw, &on); err != nil {
			return nil, fmt.Errorf("argument %s: %s %s is not a boolean", name, WorkspacePathKeyword, raw)
		}
		if on {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// resolveWorkspacePaths rewrites the workspace-path arguments of raw (a JSON object)
// to their resolved form in the workspace ws (SEC-1; issue 14, finding 2): every
// symlink inside the workspace followed, so that the key, idempotent_when,
// approval_when and the policy judge the file the tool will act on — "scratch/config"
// is ".git/config" to them when scratch links to .git — and the tool receives that
// path, which it refuses should it no longer resolve to itself when it runs.
//
// A path that cannot be resolved (outside the workspace, a dangling link, malformed)
// is left as written: the tool refuses it with its own failure code, and a call is
// never refused here for what the tool would explain better. Without a workspace
// there is nothing to resolve against, and the tool answers no_workspace.
func resolveWorkspacePaths(ws string, names []string, raw []byte) []byte {
	if ws == "" || len(names) == 0 {
		return raw
	}
	root, err := wspath.Root(ws)
	if err != nil {
		return raw
	}
	var args map[string]json.RawMessage
	if err := json.Unmarshal(raw, &args); err != nil {
		return raw // step 2 reports it
	}
	changed := false
	for _, name := range names {
		var p string
		if v, ok := args[name]; !ok || json.Unmarshal(v, &p) != nil {
			continue
		}
		clean, err := wspath.Clean(p)
		if err != nil {
			continue
		}
		r, err := wspath.Resolve(root, clean)
		if err != nil || r.Slash() == p {
			continue
		}
		b, err := json.Marshal(r.Slash())
		if err != nil {
			continue
		}
		args[name], changed = b, true
	}
	if !changed {
		return raw
	}
	out, err := json.Marshal(args)
	if err != nil {
		return raw
	}
	return out
}
