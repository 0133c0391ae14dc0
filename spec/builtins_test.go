package spec

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// TestBuiltins_EmbeddedSpecsAreTheRepositoryTools pins the embedded set: every
// tools/*.yaml of the repository, checked clean, each the same definition as the file
// on disk (same SchemaSHA256 as the repository tree's own load), flagged Builtin.
func TestBuiltins_EmbeddedSpecsAreTheRepositoryTools(t *testing.T) {
	if d := loadBuiltins().diags; len(d) > 0 {
		t.Fatalf("the embedded builtin specs have findings:\n%v", d)
	}
	files, err := filepath.Glob(filepath.Join("..", ToolsDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range files {
		want = append(want, strings.TrimSuffix(filepath.Base(f), ".yaml"))
	}
	builtins := Builtins()
	var got []string
	for _, b := range builtins {
		got = append(got, b.Name)
		if !b.Builtin {
			t.Errorf("%s: Builtin is not set", b.Name)
		}
		if Builtin(b.Name) != b {
			t.Errorf("Builtin(%q) is not the spec Builtins returns", b.Name)
		}
	}
	if !slices.Equal(got, want) || len(got) == 0 {
		t.Fatalf("Builtins() = %v, want the repository's tools %v", got, want)
	}
	repo, diags, err := LoadDir("..")
	if err != nil || len(diags) > 0 {
		t.Fatalf("the repository tree does not load cleanly: %v\n%v", err, diags)
	}
	for _, b := range builtins {
		own := repo.Tool(b.Name)
		if own == nil || own.Builtin {
			t.Fatalf("the repository tree's %s is not its own spec", b.Name)
		}
		if own.SchemaSHA256() != b.SchemaSHA256() {
			t.Errorf("%s: the embedded spec differs from tools/%s.yaml (rebuild)", b.Name, b.Name)
		}
	}
	// The repository's tree is the builtins: it shadows every one of them.
	if len(repo.ReferencedBuiltins) != 0 {
		t.Errorf("the repository tree references builtins %v; its own specs should shadow them", toolNamesOf(repo.ReferencedBuiltins))
	}
	// The slice is the caller's own.
	builtins[0] = nil
	if Builtins()[0] == nil {
		t.Error("Builtins returns a shared slice")
	}
}

// TestBuiltins_BrokenEmbeddedSpecIsLeftOut: a builtin spec with a finding never
// becomes a half-checked tool; its findings are kept.
func TestBuiltins_BrokenEmbeddedSpecIsLeftOut(t *testing.T) {
	b := builtinsFrom(fstest.MapFS{
		"tools/demo.good.yaml": {Data: []byte("name: demo.good\nversion: 1\ndescription: Good.\nside_effect: none\nrisk: low\n")},
		"tools/demo.bad.yaml":  {Data: []byte("name: demo.bad\nversion: 1\ndescription: Bad.\nside_effect: write\nrisk: low\n")},
	})
	if len(b.tools) != 1 || b.tools[0].Name != "demo.good" || b.byName["demo.bad"] != nil {
		t.Errorf("tools %v, want only demo.good", toolNamesOf(b.tools))
	}
	if len(b.diags) == 0 || b.diags[0].Path != "tools/demo.bad.yaml" {
		t.Errorf("diags %v, want the finding of tools/demo.bad.yaml", b.diags)
	}
}

func toolNamesOf(ts []*Tool) []string {
	out := []string{}
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}

// builtinRefTree is an author's tree that names builtins without copying their specs.
func builtinRefTree(files map[string]string) fstest.MapFS {
	fsys := fstest.MapFS{
		"tools/notes.search.yaml": {Data: []byte(`name: notes.search
version: 1
description: Search the notes.
side_effect: read
idempotency: idempotent
risk: low
args:
  query: {type: string, max_length: 200}
`)},
		"protocols/notes.yaml": {Data: []byte(`name: notes
initial_mode: work
modes:
  work:
    tools: [notes.search, protocol.dispatch, workspace.write_text]
  review:
    tools: [notes.search, protocol.dispatch, review.approve]
exclusive_tools: [protocol.dispatch]
`)},
		"policy.yaml": {Data: []byte(`rules:
  - name: scratch
    tools: [workspace.write_text]
    allow_when: "args.path.startsWith('scratch/') && args.mode == 'overwrite'"
`)},
	}
	for name, data := range files {
		if data == "" {
			delete(fsys, name)
			continue
		}
		fsys[name] = &fstest.MapFile{Data: []byte(data)}
	}
	return fsys
}

func loadStrings(t *testing.T, fsys fstest.MapFS) (*Tree, []string) {
	t.Helper()
	tree, diags, err := LoadFS(fsys, "")
	if err != nil {
		t.Fatal(err)
	}
	return tree, celStrings(diags)
}

// The exclusive_tools of builtinRefTree declares protocol.dispatch, which both modes
// hold: drop that declaration for the trees that must load clean.
func withoutDispatchExclusive(fsys fstest.MapFS) fstest.MapFS {
	p := string(fsys["protocols/notes.yaml"].Data)
	fsys["protocols/notes.yaml"] = &fstest.MapFile{Data: []byte(strings.Replace(p, "exclusive_tools: [protocol.dispatch]\n", "", 1))}
	return fsys
}

// TestLoad_ReferencesResolveToBuiltins: a tree's protocol modes and policy name
// builtins it has no spec of; they resolve, the policy's args are typed by the
// builtin's spec, and the builtins named are listed, while Tools stays the tree's own.
func TestLoad_ReferencesResolveToBuiltins(t *testing.T) {
	tree, diags := loadStrings(t, withoutDispatchExclusive(builtinRefTree(nil)))
	if len(diags) > 0 {
		t.Fatalf("diagnostics:\n%s", strings.Join(diags, "\n"))
	}
	if got := toolNamesOf(tree.Tools); !slices.Equal(got, []string{"notes.search"}) {
		t.Errorf("Tools = %v, want the tree's own notes.search only", got)
	}
	want := []string{"protocol.dispatch", "review.approve", "workspace.write_text"}
	if got := toolNamesOf(tree.ReferencedBuiltins); !slices.Equal(got, want) {
		t.Errorf("ReferencedBuiltins = %v, want %v", got, want)
	}
	for _, b := range tree.ReferencedBuiltins {
		if b != Builtin(b.Name) {
			t.Errorf("ReferencedBuiltins holds a copy of %s, not the embedded spec", b.Name)
		}
	}
	if x := tree.ToolOrBuiltin("review.approve"); x == nil || !x.Builtin {
		t.Errorf("ToolOrBuiltin(review.approve) = %v, want the builtin", x)
	}
	if x := tree.ToolOrBuiltin("notes.search"); x == nil || x.Builtin {
		t.Errorf("ToolOrBuiltin(notes.search) = %v, want the tree's own", x)
	}
	if tree.Tool("review.approve") != nil {
		t.Error("Tool(review.approve) found a builtin; Tool is the tree's own tools only")
	}
	known := toolNamesOf(tree.KnownTools())
	if !slices.Contains(known, "notes.search") || !slices.Contains(known, "review.merge") || !slices.IsSorted(known) {
		t.Errorf("KnownTools = %v, want the tree's own and every builtin, sorted", known)
	}
}

// TestLoad_BuiltinReferenceErrors: what a reference to a builtin is still held to.
func TestLoad_BuiltinReferenceErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{
			name:  "a builtin declared exclusive is held by one mode only (WF-1)",
			files: nil,
			want: []string{"protocols/notes.yaml:7:27: exclusive tool protocol.dispatch is held by 2 modes (review, work): " +
				"an exclusive tool belongs to exactly one mode (declared in exclusive_tools) [WF-1]"},
		},
		{
			name: "a builtin that confers approval is exclusive by default (WF-2)",
			files: map[string]string{"protocols/notes.yaml": `name: notes
initial_mode: work
modes:
  work:
    tools: [notes.search, review.approve]
  review:
    tools: [review.approve]
`},
			want: []string{"protocols/notes.yaml:7:13: exclusive tool review.approve is held by 2 modes (review, work): " +
				"an exclusive tool belongs to exactly one mode (exclusive by default; confers_approval in the builtin spec tools/review.approve.yaml) [WF-2]"},
		},
		{
			name: "a misspelt builtin gets a did-you-mean from the builtins",
			files: map[string]string{"protocols/notes.yaml": `name: notes
initial_mode: work
modes:
  work:
    tools: [notes.search, protocol.dispach]
`},
			want: []string{`protocols/notes.yaml:5:27: mode work names unknown tool "protocol.dispach": ` +
				`there is no tools/protocol.dispach.yaml and no builtin tool of that name; did you mean "protocol.dispatch"? [SPEC-8.unknown-tool]`},
		},
		{
			name: "a misspelt argument of a builtin in a one-tool policy rule",
			files: map[string]string{"protocols/notes.yaml": "", "policy.yaml": `rules:
  - name: scratch
    tools: [workspace.write_text]
    allow_when: "args.pth.startsWith('scratch/')"
`},
			want: []string{`policy.yaml:4:23: rule scratch: allow_when: undefined field 'pth'; did you mean "path"? [POL-2.cel-error]`},
		},
		{
			name:  "a tree's broken spec of a builtin's name shadows the builtin",
			files: map[string]string{"tools/protocol.dispatch.yaml": "name: protocol.dispatch\nversion: [\n"},
			want: []string{
				`protocols/notes.yaml:5:27: mode work names unknown tool "protocol.dispatch": tools/protocol.dispatch.yaml shadows the builtin of that name but does not declare it; fix its findings [SPEC-8.unknown-tool]`,
				`protocols/notes.yaml:7:27: mode review names unknown tool "protocol.dispatch": tools/protocol.dispatch.yaml shadows the builtin of that name but does not declare it; fix its findings [SPEC-8.unknown-tool]`,
				"protocols/notes.yaml:7:27: exclusive tool protocol.dispatch is held by 2 modes (review, work): " +
					"an exclusive tool belongs to exactly one mode (declared in exclusive_tools) [WF-1]",
				`protocols/notes.yaml:8:19: exclusive_tools names unknown tool "protocol.dispatch": tools/protocol.dispatch.yaml shadows the builtin of that name but does not declare it; fix its findings [SPEC-8.unknown-tool]`,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, got := loadStrings(t, builtinRefTree(tc.files))
			// A broken file's own findings are not what this test is about.
			got = slices.DeleteFunc(got, func(s string) bool { return strings.HasPrefix(s, "tools/") })
			if !slices.Equal(got, tc.want) {
				t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestLoad_OwnSpecShadowsBuiltin: a tree's own tools/review.approve.yaml is the tree's
// tool (codegen covers it): references resolve to it, and the builtin of that name is
// neither referenced nor in scope, whatever its spec says.
func TestLoad_OwnSpecShadowsBuiltin(t *testing.T) {
	own := `name: review.approve
version: 7
description: The tree's own approval.
side_effect: write
idempotency: idempotent
risk: high
`
	tree, diags := loadStrings(t, withoutDispatchExclusive(builtinRefTree(map[string]string{"tools/review.approve.yaml": own})))
	if len(diags) > 0 {
		t.Fatalf("diagnostics:\n%s", strings.Join(diags, "\n"))
	}
	if got := toolNamesOf(tree.Tools); !slices.Equal(got, []string{"notes.search", "review.approve"}) {
		t.Errorf("Tools = %v", got)
	}
	if got := toolNamesOf(tree.ReferencedBuiltins); slices.Contains(got, "review.approve") {
		t.Errorf("ReferencedBuiltins = %v, must not hold the shadowed review.approve", got)
	}
	x := tree.ToolOrBuiltin("review.approve")
	if x == nil || x.Builtin || x.Version != 7 {
		t.Errorf("ToolOrBuiltin(review.approve) = %+v, want the tree's own (version 7)", x)
	}
	for _, k := range tree.KnownTools() {
		if k.Name == "review.approve" && k.Builtin {
			t.Error("KnownTools holds the shadowed builtin review.approve")
		}
	}
}

// TestLoad_BuiltinsOfAnEmptyTree: a tree that names no builtin references none.
func TestLoad_BuiltinsOfAnEmptyTree(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, ToolsDir), 0o755); err != nil {
		t.Fatal(err)
	}
	tree, diags, err := LoadDir(dir)
	if err != nil || len(diags) > 0 {
		t.Fatalf("%v %v", err, diags)
	}
	if len(tree.ReferencedBuiltins) != 0 || len(tree.Tools) != 0 {
		t.Errorf("an empty tree has tools %v and referenced builtins %v", toolNamesOf(tree.Tools), toolNamesOf(tree.ReferencedBuiltins))
	}
}
