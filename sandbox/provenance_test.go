package sandbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/sandbox"
)

// trustCaller answers t.read with external_untrusted text and every other tool with a
// tool-trusted result that echoes the argument v; it records each call's trust.
type trustCaller struct {
	calls []trustCall
}

type trustCall struct {
	tool  string
	args  string
	trust runtime.Trust
}

func (c *trustCaller) CallTrust(_ context.Context, tool string, args json.RawMessage, trust runtime.Trust) (runtime.Outcome, error) {
	c.calls = append(c.calls, trustCall{tool, string(args), trust})
	var a map[string]any
	json.Unmarshal(args, &a)
	out, _ := json.Marshal(map[string]any{"text": fmt.Sprintf("content of %v", a["path"]), "v": a["v"]})
	res := runtime.ToolResult{OK: true, Structured: out, Trust: runtime.TrustTool}
	if tool == "t.read" {
		res.Trust = runtime.TrustExternalUntrusted
	}
	return runtime.Succeeded("h:"+itoa(len(c.calls)), res), nil
}
func (c *trustCaller) ScriptHash() string { return "h" }

// writeTrust runs script and returns the trust of each t.write call it made, and why
// carried provenance fell back to the whole script ("" if it did not).
func writeTrust(t *testing.T, script string) ([]runtime.Trust, string) {
	t.Helper()
	c := &trustCaller{}
	res, err := sandbox.Run(context.Background(), c, script, sandbox.Limits{})
	if err != nil || res.Reason != "" {
		t.Fatalf("script: %v %s %s", err, res.Reason, res.Detail)
	}
	var out []runtime.Trust
	for _, call := range c.calls {
		if call.tool == "t.write" {
			out = append(out, call.trust)
		}
	}
	if len(out) == 0 {
		t.Fatal("the script made no write")
	}
	return out, res.ProvenanceFallback
}

// read is the untrusted read every case starts with.
const read = "r = tools.t.read(path = \"in.txt\")\nt = r.result[\"text\"]\n"

// TestProvenancePrecise: after an untrusted read, a write that depends on nothing it
// produced carries the script's own trust (the new precision of carried provenance).
func TestProvenancePrecise(t *testing.T) {
	for name, script := range map[string]string{
		"constants":     read + `tools.t.write(path = "c", text = "const")`,
		"before read":   `tools.t.write(path = "c", text = "const")` + "\n" + read,
		"shared path":   "p = \"in.txt\"\n" + "r = tools.t.read(path = p)\n" + `tools.t.write(path = p, text = "x")`,
		"trusted feed":  read + "n = tools.t.note(v = \"fixed\")\n" + `tools.t.write(path = "c", text = n.result["v"])`,
		"loop":          "for i in range(3):\n    r = tools.t.read(path = \"f%d\" % i)\n    tools.t.write(path = \"c%d\" % i, text = \"const\")\n",
		"other list":    read + "l = [t]\nm = []\nm.append(\"const\")\n" + `tools.t.write(path = "c", text = m)`,
		"def":           "def w(p):\n    return tools.t.write(path = p, text = \"const\")\n" + read + `w("c")`,
		"read in def":   "def get(p):\n    return tools.t.read(path = p).result[\"text\"]\n" + "x = get(\"in.txt\")\n" + `tools.t.write(path = "c", text = "const")`,
		"trusted if":    read + "if 1 < 2:\n    tools.t.write(path = \"c\", text = \"const\")\n",
		"lambda":        "w = lambda p: tools.t.write(path = p, text = \"const\")\n" + read + `w("c")`,
		"comprehension": read + `x = [tools.t.write(path = p, text = "const") for p in ["a", "b"]]`,
		"two reads":     read + "s = tools.t.note(v = \"x\")\nif s.ok:\n    tools.t.write(path = \"c\", text = s.result[\"v\"])\n",
	} {
		t.Run(name, func(t *testing.T) {
			trust, fallback := writeTrust(t, script)
			if fallback != "" {
				t.Fatalf("the analysis gave up: %s", fallback)
			}
			for i, tr := range trust {
				if tr != runtime.TrustSystem {
					t.Fatalf("write %d carried %s, want the script's own trust", i+1, tr)
				}
			}
		})
	}
}

// TestProvenanceLaundering: every way for a write to depend on the untrusted read,
// through data or control, keeps it external_untrusted; a tool passed around as a
// value falls back to the per-script rule, which does too.
func TestProvenanceLaundering(t *testing.T) {
	const w = `tools.t.write(path = "c", text = `
	// The cases the analysis gives up on; it follows all the others.
	fallbacks := map[string]bool{"tool value": true, "tool arg": true, "tool in list": true, "bound method": true,
		"getattr": true, "key function": true, "def as value": true, "lambda escapes": true, "rebound tools": true}
	for name, script := range map[string]string{
		"direct":         read + w + "t)",
		"upper":          read + w + "t.upper())",
		"join":           read + w + "\",\".join([\"a\", t]))",
		"percent":        read + w + "\"%s!\" % t)",
		"format":         read + w + "\"{}\".format(t))",
		"slice":          read + w + "t[1:3])",
		"augmented":      read + "s = \"a\"\ns += t\n" + w + "s)",
		"tuple":          read + "x, y = t, 1\n" + w + "str(y))",
		"append":         read + "l = []\nl.append(t)\n" + w + "l)",
		"extend":         read + "l = []\nl.extend([t])\n" + w + "l)",
		"insert":         read + "l = [\"a\"]\nl.insert(0, t)\n" + w + "l)",
		"alias":          read + "a = []\nb = a\nb.append(t)\n" + w + "a)",
		"nested alias":   read + "a = []\nc = [a]\nc[0].append(t)\n" + w + "a)",
		"for alias":      read + "a = []\nfor x in [a]:\n    x.append(t)\n" + w + "a)",
		"index set":      read + "d = {}\nd[\"k\"] = t\n" + w + "d)",
		"key set":        read + "d = {}\nd[t] = 1\n" + w + "str(len(d)))",
		"update":         read + "d = {}\nd.update({\"k\": t})\n" + w + "d)",
		"setdefault":     read + "d = {}\nd.setdefault(\"k\", []).append(t)\n" + w + "d)",
		"get":            read + "d = {\"a\": \"x\"}\n" + w + "d.get(t[0], \"y\"))",
		"def":            read + "def f(x):\n    return x.upper()\n" + w + "f(t))",
		"def default":    read + "def f(x = t):\n    return x\n" + w + "f())",
		"def closure":    read + "acc = []\ndef add(v):\n    acc.append(v)\nadd(t)\n" + w + "acc)",
		"def global":     read + "def f():\n    return t\n" + w + "f())",
		"lambda":         read + "g = lambda x: x + \"!\"\n" + w + "g(t))",
		"comprehension":  read + w + "[c for c in t.elems()])",
		"comp filter":    read + w + "[x for x in [\"a\", \"b\"] if x in t])",
		"dict comp":      read + w + "{k: 1 for k in [t]})",
		"if":             read + "if \"content\" in t:\n    " + w + "\"const\")\n",
		"else":           read + "if \"zzz\" in t:\n    pass\nelse:\n    " + w + "\"const\")\n",
		"if assign":      read + "v = \"a\"\nif \"content\" in t:\n    v = \"b\"\n" + w + "v)",
		"break":          read + "n = 0\nfor i in range(5):\n    if t[i] == \"t\":\n        break\n    n += 1\n" + w + "str(n))",
		"continue":       read + "n = []\nfor i in range(5):\n    if t[i] == \"o\":\n        continue\n    n.append(i)\n" + w + "n)",
		"while":          read + "i = 0\nwhile i < len(t):\n    i += 1\n" + w + "str(i))",
		"for over":       read + "for c in [t]:\n    " + w + "\"const\")\n",
		"return":         read + "out = []\ndef f():\n    if \"c\" in t:\n        return\n    out.append(1)\nf()\n" + w + "out)",
		"call in if":     read + "def g():\n    " + w + "\"const\")\nif \"content\" in t:\n    g()\n",
		"cond expr":      read + w + "\"a\" if \"c\" in t else \"b\")",
		"and":            read + "\"content\" in t and " + w + "\"const\")\n",
		"or":             read + "\"zzz\" in t or " + w + "\"const\")\n",
		"fail":           read + "if \"c\" not in t:\n    fail(\"no\")\n" + w + "\"const\")",
		"echo":           read + "n = tools.t.note(v = t)\n" + w + "n.result[\"v\"])",
		"echo ok":        read + "n = tools.t.note(v = t)\n" + w + "str(n.ok))",
		"json":           read + w + "json.decode(json.encode({\"k\": t})))",
		"sorted":         read + w + "sorted([t, \"a\"]))",
		"tool value":     "wr = tools.t.write\n" + read + "wr(path = \"c\", text = \"const\")",
		"tool arg":       "def call(f, p):\n    return f(path = p, text = \"const\")\n" + read + "call(tools.t.write, \"c\")",
		"tool in list":   "fs = [tools.t.write]\n" + read + "fs[0](path = \"c\", text = \"const\")",
		"bound method":   read + "l = []\nm = l.append\nm(t)\n" + w + "l)",
		"getattr":        read + "l = []\ngetattr(l, \"append\")(t)\n" + w + "l)",
		"key function":   read + "l = []\nsorted([t], key = l.append)\n" + w + "l)",
		"def as value":   read + "l = []\ndef f(v):\n    l.append(v)\nh = f\nh(t)\n" + w + "l)",
		"lambda escapes": read + "l = []\nsorted([t], key = lambda v: l.append(v))\n" + w + "l)",
		"rebound tools":  read + "tools2 = 1\ntools = tools\n" + w + "\"const\")",
	} {
		t.Run(name, func(t *testing.T) {
			trust, fallback := writeTrust(t, script)
			if gaveUp := fallbacks[name]; (fallback != "") != gaveUp {
				t.Fatalf("fallback %q, want one: %v", fallback, gaveUp)
			}
			for i, tr := range trust {
				if tr != runtime.TrustExternalUntrusted {
					t.Fatalf("write %d carried %s, want external_untrusted", i+1, tr)
				}
			}
		})
	}
}

// TestProvenanceHeld, end to end through the pipeline and its policy: after an
// untrusted read in one script, a medium-risk write of constants is not held, the same
// write fed by the read is held as it is made directly with untrusted arguments
// (TestUntrustedArgumentHeld), and so is the write after a laundering attempt.
func TestProvenanceHeld(t *testing.T) {
	h := newHarness(t, time.Millisecond)
	o, res := h.run("constants", `
r = tools.t.read(path = "in.txt")
p = tools.t.publish(text = "constant")
result = [r.ok, p.ok]
`, nil)
	if o.Status != runtime.OutcomeSucceeded || res.Result != "[true,true]" || !res.Untrusted || h.pub.runs.Load() != 1 {
		t.Fatalf("constant publish after an untrusted read: %s/%s %s untrusted=%v publishes=%d", o.Status, o.ReasonCode, res.Result, res.Untrusted, h.pub.runs.Load())
	}
	for name, script := range map[string]string{
		"fed": `
r = tools.t.read(path = "in.txt")
p = tools.t.publish(text = "constant")
q = tools.t.publish(text = r.result["text"])
`,
		"laundered": `
r = tools.t.read(path = "in.txt")
a = []
b = a
b.append(r.result["text"].upper())
p = tools.t.publish(text = "constant")
q = tools.t.publish(text = "\n".join(a))
`,
		"implicit": `
r = tools.t.read(path = "in.txt")
p = tools.t.publish(text = "constant")
if "content" in r.result["text"]:
    q = tools.t.publish(text = "another constant")
`,
	} {
		before := h.pub.runs.Load()
		o, res := h.run(name, script, nil)
		if o.ReasonCode != "script_suspended" || !strings.Contains(o.ExternalDetail.Text, "3 t.publish unavailable approval_pending") {
			t.Fatalf("%s: %s/%s %v %+v", name, o.Status, o.ReasonCode, o.ExternalDetail, res)
		}
		if got := h.pub.runs.Load() - before; got != 1 {
			t.Fatalf("%s: %d publishes ran, want 1 (the constant one)", name, got)
		}
	}
}
