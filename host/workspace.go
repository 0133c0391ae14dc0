package host

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/toolgen/toolgen/spec"
)

// The placeholders of Config.Workspace.
const (
	// WorkspaceTenant is replaced by the call's tenant: each tenant gets a workspace of
	// its own. Required when principals.yaml can name more than one tenant.
	WorkspaceTenant = "{tenant}"
	// WorkspaceRun is replaced by the call's run id: each run gets a workspace of its
	// own (a run id that is not a plain file name is replaced by "~" and a hash of it).
	WorkspaceRun = "{run}"
)

// workspaceLayout is where the workspace builtins work, for each tenant and run
// (SEC-1; issue 14, finding 1). The layout is the operator's: a directory, or a
// template of one with {tenant} and {run} segments.
//
// The rules it holds, checked when the host is built:
//   - the workspace is never the spec root or the state directory (the embedded
//     store, the artifacts), nor inside or around one of them, and never holds the
//     SQLite store's file: a builtin confined to it can reach neither the store (every
//     tenant's arguments, outcomes and approvals) nor an operator file
//     (principals.yaml, policy.yaml, servers/*.yaml — a stdio server added there is
//     code execution);
//   - several tenants never share one: with principals.yaml naming more than one
//     tenant the template must hold {tenant};
//   - the directory before the first placeholder exists (a typo is an error at
//     startup, not an empty workspace created somewhere); the tenants' and runs'
//     directories below it are created on first use, private (0700).
//
// There is no default: without Config.Workspace the workspace builtins answer
// no_workspace. Defaulting to the spec root handed every agent the store and the
// operator's files.
type workspaceLayout struct {
	template string // absolute and clean; "" is no workspace
	fixed    string // the template's directories before its first placeholder
	log      *slog.Logger
}

// offLimits is a directory a workspace must stay out of: it may never hold it, and
// unless mayHold it may not lie inside it either.
type offLimits struct {
	dir string
	// mayHold: a workspace inside it is fine. The directory of a SQLite store file is
	// any directory (a home, /var/lib): a workspace below it cannot reach the file.
	// The spec root's and the state directory's subdirectories are the operator's
	// (servers/, the artifacts).
	mayHold bool
}

// placeholder matches anything that looks like one, to refuse the unknown.
var placeholder = regexp.MustCompile(`\{[^{}/]*\}`)

// newWorkspaceLayout checks tmpl (Config.Workspace) against the directories the
// workspace must stay out of, named by what they are, and principals, which says how
// many tenants there can be.
func newWorkspaceLayout(tmpl string, forbidden map[string]offLimits, principals *spec.Principals, log *slog.Logger) (*workspaceLayout, error) {
	if tmpl == "" {
		return &workspaceLayout{log: log}, nil
	}
	abs, err := filepath.Abs(tmpl)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", tmpl, err)
	}
	l := &workspaceLayout{template: abs, log: log}
	var fixed []string
	seen := map[string]bool{}
	for _, seg := range strings.Split(abs, string(filepath.Separator)) {
		ph := placeholder.FindString(seg)
		switch {
		case ph == "" && strings.ContainsAny(seg, "{}"):
			return nil, fmt.Errorf("workspace %s: a brace outside %s or %s", tmpl, WorkspaceTenant, WorkspaceRun)
		case ph == "":
			if len(seen) == 0 {
				fixed = append(fixed, seg)
			}
			continue
		case ph != WorkspaceTenant && ph != WorkspaceRun:
			return nil, fmt.Errorf("workspace %s: unknown placeholder %s (want %s or %s)", tmpl, ph, WorkspaceTenant, WorkspaceRun)
		case seg != ph:
			return nil, fmt.Errorf("workspace %s: %s must be a whole path segment, as in /srv/ws/%s", tmpl, ph, ph)
		case seen[ph]:
			return nil, fmt.Errorf("workspace %s: %s appears twice", tmpl, ph)
		}
		seen[ph] = true
	}
	l.fixed = string(filepath.Separator) + filepath.Join(fixed...)
	if st, err := os.Stat(l.fixed); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("workspace %s: %s is not a directory: create it first", tmpl, l.fixed)
	}
	real, err := filepath.EvalSymlinks(l.fixed)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", tmpl, err)
	}
	names := make([]string, 0, len(forbidden))
	for name := range forbidden {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		other, err := realPath(forbidden[name].dir)
		if err != nil {
			return nil, fmt.Errorf("workspace: %s %s: %w", name, forbidden[name].dir, err)
		}
		if within(other, real) || !forbidden[name].mayHold && within(real, other) {
			return nil, fmt.Errorf("workspace %s overlaps the %s %s: an agent confined to it could read the store or rewrite the operator's files; choose a directory outside both",
				tmpl, name, forbidden[name].dir)
		}
	}
	if !seen[WorkspaceTenant] {
		if tenants := principalTenants(principals); len(tenants) > 1 {
			return nil, fmt.Errorf("workspace %s: %s names several tenants (%s), who would share this one workspace: put %s in it, e.g. %s",
				tmpl, spec.PrincipalsFile, strings.Join(tenants, ", "), WorkspaceTenant, filepath.Join(l.fixed, WorkspaceTenant))
		}
	}
	return l, nil
}

// For is the workspace of a tenant's run: "" when the host serves none, or when the
// directory cannot be created (logged; the workspace builtins then answer
// no_workspace).
func (l *workspaceLayout) For(tenant, run string) string {
	if l.template == "" {
		return ""
	}
	if l.template == l.fixed {
		return l.template
	}
	ws := strings.NewReplacer(WorkspaceTenant, segment(tenant), WorkspaceRun, segment(run)).Replace(l.template)
	if err := os.MkdirAll(ws, 0o700); err != nil {
		l.log.Error("cannot create the workspace of a call", "workspace", ws, "err", err)
		return ""
	}
	return ws
}

// plainSegment is a tenant or run id used as a directory name as it is.
var plainSegment = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// segment is id as one directory name: itself when plain, else "~" and a hash of it
// (a run id may hold "/" or be ".."; "~" never starts a plain one, so the two forms
// never meet).
func segment(id string) string {
	if plainSegment.MatchString(id) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "~" + hex.EncodeToString(sum[:16])
}

// principalTenants lists the tenants principals.yaml can name, sorted.
func principalTenants(p *spec.Principals) []string {
	if p == nil {
		return nil
	}
	var out []string
	add := func(t string) {
		if t != "" && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	for _, sp := range append(slices.Clone(p.Tokens), p.Local...) {
		add(sp.Tenant)
	}
	for _, is := range p.Issuers {
		add(is.Tenant)
		for _, t := range is.Tenants {
			add(t.Name)
		}
	}
	slices.Sort(out)
	return out
}

// realPath resolves p through symlinks; a path that does not exist yet (a state
// directory created on first use) is its nearest existing ancestor's real path joined
// with the rest.
func realPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	var rest []string
	for dir := abs; ; dir = filepath.Dir(dir) {
		real, err := filepath.EvalSymlinks(dir)
		if err == nil {
			slices.Reverse(rest)
			return filepath.Join(append([]string{real}, rest...)...), nil
		}
		if !errors.Is(err, fs.ErrNotExist) || filepath.Dir(dir) == dir {
			return "", err
		}
		rest = append(rest, filepath.Base(dir))
	}
}

// within reports whether path is dir or inside it (both real paths).
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && filepath.IsLocal(rel) || rel == "."
}
