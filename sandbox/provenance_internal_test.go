package sandbox

import (
	"strings"
	"testing"

	"go.starlark.net/syntax"

	"github.com/toolgen/toolgen/runtime"
)

// TestProvenanceFallback: what the analysis does not follow makes it give up (the
// per-script rule), and what it follows does not.
func TestProvenanceFallback(t *testing.T) {
	for _, tc := range []struct{ script, reason string }{
		{"r = tools.t.read()\ntools.t.w(x = r)", ""},
		{"def f(x):\n    return tools.t.read(p = x)\ng = lambda y: f(y)\ntools.t.w(x = g(1))", ""},
		{"w = tools.t.write\nw(x = 1)", "a tool used as a value"},
		{"def c(f):\n    return f(x = 1)\nc(tools.t.write)", "a tool used as a value"},
		{"tools = 1\ntools.t.w()", "rebinds tools"},
		{"def f():\n    pass\nh = f\ntools.t.w()", "the function f used as a value"},
		{"def f():\n    pass\ndef f():\n    pass\ntools.t.w()", "bound more than once"},
		{"l = []\nm = l.append\nm(1)\ntools.t.w()", "a call of m"},
		{"l = []\ngetattr(l, 'append')(1)\ntools.t.w()", "a call of a"},
		{"l = []\nf = getattr(l, 'append')\ntools.t.w()", "getattr"},
		{"sorted([1], key = len)\ntools.t.w()", "key function"},
		{"sorted([1], key = lambda v: v)\ntools.t.w()", "key function"},
		{"x = [lambda v: v]\ntools.t.w()", "a lambda used as a value"},
		{"f = len\ntools.t.w()", "the builtin len used as a value"},
		{"[tools.t.w][0]()", "a call of a"},
		{"x = tools\nx.t.w()", "tools used as a value"},
		{"load('m', 'x')\ntools.t.w()", "loads a module"},
		{"def (:\n", "does not parse"},
	} {
		p := analyzeProvenance(tc.script)
		if tc.reason == "" && p.fallback != "" || !strings.Contains(p.fallback, tc.reason) {
			t.Errorf("%q: fallback %q, want %q", tc.script, p.fallback, tc.reason)
		}
	}
}

// FuzzProvenance: the analysis never panics on arbitrary script text (its recover
// turns a panic into an "internal error" fallback, which fails here), and when it
// does not give up, it numbers every tool-call site and each site's dependencies
// are sites.
func FuzzProvenance(f *testing.F) {
	for _, s := range []string{
		"r = tools.t.read()\ntools.t.w(x = r.result.upper())",
		"a = []\nb = a\nb.append(tools.t.r())\ntools.t.w(x = a)",
		"def f(x):\n    if x:\n        return\n    tools.t.w()\nf(tools.t.r().ok)",
		"g = lambda x: x + 1\ntools.t.w(v = g(tools.t.r()))",
		"for i in range(3):\n    if tools.t.r().ok:\n        break\n    tools.t.w()",
		"while tools.t.r().ok:\n    tools.t.w()",
		"x = [y for y in tools.t.r().result if y]\ntools.t.w(x = {k: 1 for k in x})",
		"d = {}\nd.setdefault('k', []).append(tools.t.r())\ntools.t.w(**d)",
		"x = 1 if tools.t.r().ok else 2\ntools.t.r().ok and tools.t.w(x = x)",
		"if not tools.t.r().ok:\n    fail('no')\ntools.t.w()",
		"w = tools.t.w\nw()",
		"def f(*a, **k):\n    return a, k\nf(1, x = tools.t.r())",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if len(src) > 4096 {
			return
		}
		p := analyzeProvenance(src)
		if strings.HasPrefix(p.fallback, "internal error") {
			t.Fatalf("the analysis panicked: %s", p.fallback)
		}
		if p.fallback != "" {
			return
		}
		if len(p.deps) != len(p.sites) {
			t.Fatalf("%d sites, %d dependency sets", len(p.sites), len(p.deps))
		}
		for i, d := range p.deps {
			for _, s := range d.members() {
				if s >= len(p.sites) {
					t.Fatalf("site %d depends on site %d of %d", i, s, len(p.sites))
				}
			}
		}
	})
}

// TestUnknownSite: a tool call from a site the analysis did not number makes the rest
// of the script fall back to the per-script rule.
func TestUnknownSite(t *testing.T) {
	r := &run{prov: analyzeProvenance("r = tools.t.r()\ntools.t.w(x = 1)"), untrusted: true}
	r.siteUntrusted = make([]bool, len(r.prov.deps))
	r.siteUntrusted[0] = true
	if tr, id := r.argumentTrust(syntax.MakePosition(nil, 2, 10)); tr != runtime.TrustSystem || id != 1 {
		t.Fatalf("the constant call: %s, site %d", tr, id)
	}
	if tr, id := r.argumentTrust(syntax.MakePosition(nil, 7, 7)); tr != runtime.TrustExternalUntrusted || id != -1 || r.prov.fallback == "" {
		t.Fatalf("an unknown site: %s, site %d, fallback %q", tr, id, r.prov.fallback)
	}
	if tr, _ := r.argumentTrust(syntax.MakePosition(nil, 2, 10)); tr != runtime.TrustExternalUntrusted {
		t.Fatalf("after the fallback: %s", tr)
	}
}
