package spec

import (
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/toolgen/toolgen"
)

// builtinSet is the embedded builtin specs, parsed and checked once.
type builtinSet struct {
	tools  []*Tool // sorted by name; only specs that checked clean
	byName map[string]*Tool
	diags  Diagnostics // findings in the embedded specs: none in a release (a test pins it)
}

var loadBuiltins = sync.OnceValue(func() *builtinSet {
	return builtinsFrom(toolgen.BuiltinSpecs)
})

// builtinsFrom loads the builtin specs held in fsys (tools/*.yaml). A spec with a finding
// is left out, so that a broken builtin is an unknown tool rather than a half-checked
// one; its findings are kept for the test that pins the embedded set clean.
func builtinsFrom(fsys fs.FS) *builtinSet {
	b := &builtinSet{byName: map[string]*Tool{}}
	tree, diags, err := loadFS(fsys, "", nil)
	if err != nil {
		b.diags = Diagnostics{NewDiagnostic(ToolsDir, Pos{1, 1}, "builtin.unreadable", "reading the embedded builtin specs: "+err.Error())}
		return b
	}
	b.diags = diags
	bad := map[string]bool{}
	for _, d := range diags {
		bad[d.Path] = true
	}
	for _, t := range tree.Tools {
		if bad[t.File] || t.Name == "" {
			continue
		}
		t.Builtin = true
		b.tools = append(b.tools, t)
		b.byName[t.Name] = t
	}
	return b
}

// Builtins returns the builtin tool specs embedded in this module (the tools/*.yaml of
// github.com/toolgen/toolgen, see [toolgen.BuiltinSpecs]), parsed and checked once,
// sorted by name, each with Builtin set. Every spec tree resolves references to them
// (see [Tree.ReferencedBuiltins]); a host compares each one's [Tool.SchemaSHA256] with
// the definition hash of the implementation it registers (HOST-3).
//
// The tools are shared by every caller and every loaded tree: treat them as read-only.
// The slice is the caller's own.
func Builtins() []*Tool { return slices.Clone(loadBuiltins().tools) }

// Builtin returns the embedded builtin spec named name, or nil (see [Builtins]).
func Builtin(name string) *Tool { return loadBuiltins().byName[name] }

// toolScope is what a tree's tool references resolve against (SPEC-8, WF-2, POL-2): the
// tree's own tools, then the builtins it does not shadow. A tree shadows a builtin
// with a spec of its own of that name, and also with a file tools/<name>.yaml that did
// not load (or declares another name), so that a broken spec of the tree never
// silently becomes the builtin.
type toolScope struct {
	own      map[string]*Tool
	builtins map[string]*Tool  // the unshadowed builtins
	broken   map[string]string // builtin name -> the tree's file of that name that did not load
	used     map[string]bool   // builtins a reference resolved to
}

func newToolScope(tree *Tree, own map[string]*Tool, files []string, builtins []*Tool) *toolScope {
	s := &toolScope{own: own, builtins: map[string]*Tool{}, broken: map[string]string{}, used: map[string]bool{}}
	shadowed := map[string]bool{}
	for _, t := range tree.Tools {
		shadowed[t.Name] = true
	}
	fileOf := map[string]string{}
	for _, f := range files {
		if name, ok := strings.CutSuffix(path.Base(f), ".yaml"); ok {
			shadowed[name] = true
			fileOf[name] = f
		}
	}
	for _, b := range builtins {
		switch {
		case !shadowed[b.Name]:
			s.builtins[b.Name] = b
		case own[b.Name] == nil && fileOf[b.Name] != "":
			s.broken[b.Name] = fileOf[b.Name]
		}
	}
	return s
}

// lookup returns the tool named name, the tree's own or an unshadowed builtin, or nil.
func (s *toolScope) lookup(name string) *Tool {
	if t, ok := s.own[name]; ok {
		return t
	}
	return s.builtins[name]
}

// resolve is lookup for a reference the tree makes: a builtin it resolves to is
// recorded as referenced. Only the load calls it; afterwards the scope is read-only.
func (s *toolScope) resolve(name string) *Tool {
	t := s.lookup(name)
	if t != nil && t.Builtin && s.builtins[name] == t {
		s.used[name] = true
	}
	return t
}

// all is every tool in scope, the tree's own and the unshadowed builtins, sorted by name.
func (s *toolScope) all(own []*Tool) []*Tool {
	out := slices.Clone(own)
	for _, b := range s.builtins {
		out = append(out, b)
	}
	slices.SortStableFunc(out, func(a, b *Tool) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// names is the name of every tool in scope, for a did-you-mean.
func (s *toolScope) names() []string {
	out := make([]string, 0, len(s.own)+len(s.builtins))
	for n := range s.own {
		out = append(out, n)
	}
	for n := range s.builtins {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// referenced is the builtins a reference resolved to, sorted by name.
func (s *toolScope) referenced() []*Tool {
	var out []*Tool
	for n := range s.used {
		out = append(out, s.builtins[n])
	}
	slices.SortFunc(out, func(a, b *Tool) int { return strings.Compare(a.Name, b.Name) })
	return out
}
