package host

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/sandbox"
	"github.com/toolgen/toolgen/spec"
	"github.com/toolgen/toolgen/tools"
)

// builtinTools is every builtin tool: tools.Builtins and the adapter builtins
// (sandbox.run_script), which register through RegisterAdapter.
func builtinTools() []runtime.Tool {
	return append(tools.Builtins(), sandbox.NewTool())
}

// register registers tools, each adapter builtin in its reserved domain.
func register(reg *runtime.Registry, ts []runtime.Tool) error {
	var plain []runtime.Tool
	for _, t := range ts {
		if t != nil && t.Spec() != nil && strings.HasPrefix(t.Spec().Name, sandbox.Domain+".") {
			if err := reg.RegisterAdapter(sandbox.Domain, t); err != nil {
				return err
			}
			continue
		}
		plain = append(plain, t)
	}
	return reg.Register(plain...)
}

// builtinNames lists every builtin tool, sorted.
func builtinNames() []string {
	var out []string
	for _, t := range builtinTools() {
		out = append(out, t.Spec().Name)
	}
	slices.Sort(out)
	return out
}

// tools returns the implementations this host registers — the builtins Config.Builtins
// names, then Config.Tools — after checking that they and the specs agree (HOST-3):
// every spec under tools/ has an implementation, every implementation has a spec (the
// tree's, or for a builtin its embedded one), and each implementation's generated
// definition hash is its spec's. Every disagreement is reported, each naming its file.
func (h *Host) tools() ([]runtime.Tool, error) {
	builtins := map[string]runtime.Tool{}
	for _, t := range builtinTools() {
		builtins[t.Spec().Name] = t
	}
	byName := map[string]runtime.Tool{}
	var out []runtime.Tool
	var errs []error
	for _, name := range h.cfg.Builtins {
		t, ok := builtins[name]
		if !ok {
			msg := fmt.Sprintf("Config.Builtins: %q is not a builtin tool", name)
			if c := spec.Closest(name, AllBuiltins); c != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", c)
			}
			errs = append(errs, errors.New(msg+"; the builtins are "+strings.Join(AllBuiltins, ", ")))
			continue
		}
		if byName[name] == nil {
			byName[name] = t
			out = append(out, t)
		}
	}
	for i, t := range h.cfg.Tools {
		if t == nil || t.Spec() == nil {
			errs = append(errs, fmt.Errorf("Config.Tools[%d]: a nil tool or a tool without a spec", i))
			continue
		}
		name := t.Spec().Name
		if byName[name] != nil {
			errs = append(errs, fmt.Errorf("Config.Tools[%d]: %s is registered twice (in Config.Tools, or also in Config.Builtins)", i, name))
			continue
		}
		byName[name] = t
		out = append(out, t)
	}
	specs := map[string]*spec.Tool{}
	for _, st := range h.tree.Tools {
		specs[st.Name] = st
		impl := byName[st.Name]
		switch {
		case impl == nil && builtins[st.Name] != nil:
			errs = append(errs, fmt.Errorf("%s: %s has no implementation registered with this host: it is a builtin, so name it in Config.Builtins (its spec is embedded: the copy under %s/ is not needed)",
				h.display(st.File), st.Name, spec.ToolsDir))
		case impl == nil:
			errs = append(errs, fmt.Errorf("%s: %s has no implementation registered with this host: add its generated wrapper (gen.New%s(impl)) to Config.Tools (toolrun serves only the builtins; a module serves its own tools with its own host, see toolgen host)",
				h.display(st.File), st.Name, spec.GoName(st.Name)))
		case impl.Spec().SchemaSHA256 != st.SchemaSHA256():
			errs = append(errs, staleError(h.display(st.File), st.Name, impl.Spec().SchemaSHA256, st.SchemaSHA256()))
		}
	}
	embedded := map[string]*spec.Tool{}
	for _, st := range spec.Builtins() {
		embedded[st.Name] = st
	}
	for _, t := range out {
		s := t.Spec()
		if specs[s.Name] != nil {
			continue
		}
		if e := embedded[s.Name]; e != nil && builtins[s.Name] == t {
			if s.SchemaSHA256 != e.SchemaSHA256() {
				// Only a toolgen build whose own gen/ is stale gets here.
				errs = append(errs, staleError("toolgen's builtin "+e.File, s.Name, s.SchemaSHA256, e.SchemaSHA256()))
			}
			continue
		}
		src := s.Source
		if src == "" {
			src = spec.ToolsDir + "/" + s.Name + ".yaml"
		}
		errs = append(errs, fmt.Errorf("%s: the implementation of %s (Config.Tools) has no spec: the file is not in the spec root (removed or renamed? run go generate)",
			h.display(src), s.Name))
	}
	return out, errors.Join(errs...)
}

func staleError(file, name, implHash, specHash string) error {
	return fmt.Errorf("%s: the generated code of %s is stale: its definition hash is %.12s, the spec's is %.12s: run go generate",
		file, name, implHash, specHash)
}
