package spec

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/rogpeppe/go-internal/txtar"
)

// FuzzLoad feeds arbitrary bytes to the loader as a spec file of one kind (one of
// FileKinds, chosen by kind modulo their number), on its own and inside a spec tree with valid
// companion files (which runs the cross-file checks and CEL). SPEC-6: no input makes
// the loader panic, and every finding is one an editor can jump to.
//
//	go test -run XXX -fuzz FuzzLoad -fuzztime 60s ./spec/
func FuzzLoad(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s.kind, s.data)
	}
	f.Fuzz(func(t *testing.T, kind byte, data []byte) {
		k := FileKinds[int(kind)%len(FileKinds)]
		rel := specRel(k, data)

		// The per-file loader.
		ok, diags := loadSpecFile(k, rel, data)
		checkFuzzDiags(t, "Load "+k, diags, map[string][]int{rel: editorLineLengths(data)})
		if !ok && len(diags) == 0 {
			t.Errorf("Load %s returned no %s and no diagnostic", k, k)
		}

		// The whole tree, with the fuzzed file among valid ones.
		fsys := fuzzCompanions()
		fsys[rel] = &fstest.MapFile{Data: data}
		files := map[string][]int{}
		for name, f := range fsys {
			files[name] = editorLineLengths(f.Data)
		}
		tree, treeDiags, err := LoadFS(fsys, "")
		if err != nil {
			t.Fatalf("LoadFS: %v", err)
		}
		if tree == nil {
			t.Fatalf("LoadFS returned no tree and no error")
		}
		checkFuzzDiags(t, "LoadFS", treeDiags, files)
		if _, again, _ := LoadFS(fsys, ""); !reflect.DeepEqual(treeDiags, again) {
			t.Errorf("LoadFS is not deterministic:\nfirst:\n%ssecond:\n%s", diagsText(treeDiags), diagsText(again))
		}

		// SPEC-9: a file the loader accepts (in a tree where every reference resolves)
		// is one the editor schema accepts too.
		for _, d := range treeDiags {
			if d.Path == rel {
				return
			}
		}
		if err := validateSpecYAML(t, k, data); err != nil {
			t.Errorf("the loader accepts this %s but its JSON Schema rejects it: %v", k, err)
		}
	})
}

// editorLineLengths is the byte length of each line an editor shows for data, without
// its end: lines end in \n, \r\n or \r (as in LSP). A file has at least one line.
func editorLineLengths(data []byte) []int {
	var lens []int
	start := 0
	for i, c := range data {
		if c == '\n' || c == '\r' && (i+1 == len(data) || data[i+1] != '\n') {
			end := i
			if c == '\n' && i > start && data[i-1] == '\r' {
				end--
			}
			lens = append(lens, end-start)
			start = i + 1
		}
	}
	return append(lens, len(data)-start)
}

// checkFuzzDiags checks that every diagnostic names one of the files (given as the byte
// length of each of its lines) at a position inside it, with a message and a rule. A
// column may point just past the end of its line (where an editor puts "expected
// more"), never further: columns count characters, and a line has at most as many
// characters as bytes, so the byte length bounds a column in any unit. The one
// position past the last line that is accepted is its start, line+1:1, where the YAML
// parser reports an unexpected end of a file that does not end in a line break ("a: [");
// editors show it on the last line.
func checkFuzzDiags(t *testing.T, what string, diags Diagnostics, files map[string][]int) {
	t.Helper()
	for _, d := range diags {
		lines, known := files[d.Path]
		switch {
		case d.Path == "" || !known:
			t.Errorf("%s: diagnostic names unknown file %q: %v", what, d.Path, d)
		case d.Pos.Line < 1 || d.Pos.Col < 1:
			t.Errorf("%s: diagnostic at %d:%d, want line and column >= 1: %v", what, d.Pos.Line, d.Pos.Col, d)
		case d.Pos.Line == len(lines)+1 && d.Pos.Col == 1:
			// The end of a file without a final line break (see above).
		case d.Pos.Line > len(lines):
			t.Errorf("%s: diagnostic at line %d of a %d-line file: %v", what, d.Pos.Line, len(lines), d)
		case d.Pos.Col > lines[d.Pos.Line-1]+1:
			t.Errorf("%s: diagnostic at column %d of line %d, which has %d bytes: %v", what, d.Pos.Col, d.Pos.Line, lines[d.Pos.Line-1], d)
		}
		if strings.TrimSpace(d.Message) == "" {
			t.Errorf("%s: diagnostic without a message: %v", what, d)
		}
		if d.Rule == "" {
			t.Errorf("%s: diagnostic without a rule: %v", what, d)
		}
	}
}

// fuzzCompanions is a valid spec tree the fuzzed file joins (replacing the file of the
// same name, if any). It exercises every cross-file rule: tool references from modes,
// exclusive_tools and policy rules, mcp.<server>.* patterns, tenant egress, and CEL
// over typed args.
func fuzzCompanions() fstest.MapFS {
	m := fstest.MapFS{}
	for name, data := range fuzzCompanionFiles {
		m[name] = &fstest.MapFile{Data: []byte(data)}
	}
	return m
}

var fuzzCompanionFiles = map[string]string{
	"principals.yaml": `tokens:
  - id: ci-bot
    tenant: acme
    scopes: [demo.write]
    token_sha256: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
local:
  - {id: ana, tenant: acme, scopes: [demo.write]}
issuers:
  - name: login
    issuer: https://login.example.com
    audience: toolgen
    jwks_url: https://login.example.com/jwks.json
    tenant: acme
    console: {client_id: toolgen-console, client_secret_env: CONSOLE_SECRET}
`,
	"notifications.yaml": `console_url: https://toolgen.example.com
webhooks:
  - {name: reviewers, url: "https://hooks.example.com/t", secret_env: HOOK_KEY, tenants: [acme]}
  - {name: chat, format: slack, url_env: SLACK_URL, events: [held]}
`,
	"tools/demo.echo.yaml": `name: demo.echo
version: 1
description: Echo text back.
side_effect: write
idempotency: conditionally_idempotent
idempotent_when: "args.mode == 'overwrite'"
risk: medium
required_scopes: [demo.write]
approval_when: |
  args.count > 3 &&
    args.text.startsWith('x')
args:
  text: {type: string, max_length: 100}
  count: {type: integer, min: 0, max: 10, default: 1}
  mode: {type: string, enum: [create, overwrite], default: create}
  tags: {type: array, items: {type: string}, required: false}
  opts:
    type: object
    required: false
    properties:
      flag: {type: boolean, default: false}
result:
  echoed: {type: string}
`,
	"tools/demo.peek.yaml": `name: demo.peek
version: 2
kind: control
suspends: false
description: Look at the run.
side_effect: none
risk: low
parallel_safe: true
timeout: 5s
args: {}
`,
	"servers/demo.yaml": `server_id: demo
configured_by: operator
transport:
  http: {url: "https://demo.example.com/mcp"}
classification: {side_effect: read, risk: low, idempotency: idempotent, required_scopes: [mcp.demo]}
`,
	"servers/tenant_one.yaml": `server_id: tenant_one
configured_by: tenant
tenant: acme
transport:
  http: {url: "https://x.example.org/mcp"}
`,
	"devices/lab.yaml": `device_id: lab
description: A lab machine serving its own tools.
tenant: acme
token_sha256: f4e1e1a5b0d1d4c2c3a0a5b5e4f1c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3
classification: {side_effect: read, risk: low, idempotency: idempotent, required_scopes: [device.lab]}
allow_tools: [search_notes]
`,
	"protocols/demo_flow.yaml": `name: demo_flow
initial_mode: work
modes:
  work: {tools: [demo.echo, mcp.demo.*, demo.peek]}
  check: {tools: [mcp.demo.search, demo.peek, mcp.tenant_one.*, device.lab.*]}
exclusive_tools: [demo.echo]
`,
	"policy.yaml": `egress:
  allow: [demo.example.com, "*.example.org"]
rules:
  - name: many-echoes
    tools: [demo.echo]
    approve_when: "args.count > 5 || args.mode == 'overwrite'"
  - name: no-untrusted-critical
    deny_when: "risk == 'critical' && trust == 'external_untrusted' && principal.tenant == 'prod'"
  - name: peek-freely
    tools: [demo.peek, mcp.demo.*]
    allow_when: "'reader' in principal.scopes"
`,
}

type fuzzSeed struct {
	kind byte
	data []byte
}

func kindByte(kind string) byte {
	for i, k := range FileKinds {
		if k == kind {
			return byte(i)
		}
	}
	panic("unknown kind " + kind)
}

// kindOfSpecPath says which kind of spec file a path (relative to a spec root, or with
// a prefix) holds, or "".
func kindOfSpecPath(p string) string {
	p = filepath.ToSlash(p)
	dir, base := path.Base(path.Dir(p)), path.Base(p)
	switch {
	case base == PolicyFile:
		return "policy"
	case base == PrincipalsFile:
		return "principals"
	case base == NotificationsFile:
		return "notifications"
	case !strings.HasSuffix(base, ".yaml"):
		return ""
	case dir == ToolsDir:
		return "tool"
	case dir == ServersDir:
		return "server"
	case dir == ProtocolsDir:
		return "protocol"
	case dir == DevicesDir:
		return "device"
	}
	return ""
}

// fuzzSeeds is the seed corpus: the spec files of every testscript, the repository's
// own specs, the companion files, and hand-written inputs aimed at the YAML layer.
// Files that do not exist yet are simply not seeds.
func fuzzSeeds(t testing.TB) []fuzzSeed {
	var seeds []fuzzSeed
	add := func(kind string, data []byte) {
		seeds = append(seeds, fuzzSeed{kindByte(kind), data})
	}
	_ = filepath.WalkDir(filepath.Join("..", "testscripts"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".txtar") {
			return nil
		}
		ar, err := txtar.ParseFile(p)
		if err != nil {
			t.Logf("seed %s: %v", p, err)
			return nil
		}
		for _, f := range ar.Files {
			if k := kindOfSpecPath(f.Name); k != "" {
				add(k, f.Data)
			}
		}
		return nil
	})
	for _, g := range []string{"tools/*.yaml", "servers/*.yaml", "protocols/*.yaml", PolicyFile} {
		files, _ := filepath.Glob(filepath.Join("..", g))
		for _, file := range files {
			if data, err := os.ReadFile(file); err == nil {
				add(kindOfSpecPath(file), data)
			}
		}
	}
	for name, data := range fuzzCompanionFiles {
		add(kindOfSpecPath(name), []byte(data))
	}
	for _, c := range schemaCases() {
		add(c.kind, []byte(c.doc))
	}
	for _, s := range trickySeeds {
		add(s.kind, []byte(s.data))
	}
	return seeds
}

// trickySeeds aim at the YAML layer and the position bookkeeping.
var trickySeeds = []struct{ kind, data string }{
	// Anchors, aliases and merge keys.
	{"tool", "name: &n demo.a\nversion: 1\ndescription: *n\nside_effect: none\nrisk: low\n"},
	{"tool", "name: demo.a\nversion: 1\ndescription: x\nside_effect: none\nrisk: low\nargs:\n  a: &f {type: string}\n  b: *f\n"},
	{"tool", "name: demo.a\nversion: 1\ndescription: x\nside_effect: none\nrisk: low\nargs:\n  a:\n    <<: {type: string}\n    description: merged\n"},
	{"tool", "base: &b {type: string}\nargs:\n  x:\n    <<: *b\n  y: {<<: [*b, *b]}\n"},
	{"policy", "a: &a [*a]\n"},
	{"protocol", "name: p\ninitial_mode: a\nmodes: &m {a: {tools: [demo.echo]}}\nexclusive_tools: *m\n"},
	{"server", "&x server_id: s\n? *x\n: y\n"},
	{"tool", "a: &a [&b [&c [*a, *b, *c]]]\n"},
	// Several documents, and document markers.
	{"tool", "name: demo.a\n---\nname: demo.b\n"},
	{"server", "---\n...\n---\n"},
	{"policy", "---\nrules: []\n...\n"},
	{"protocol", "%YAML 1.1\n---\nname: p\n"},
	{"protocol", "%TAG !e! tag:example.com,2000:\n---\nname: !e!foo p\n"},
	{"policy", "--- !!map\n? a\n"},
	// Tabs, carriage returns, BOM, NUL and other bytes.
	{"tool", "name:\tdemo.a\nversion:\t1\n\tdescription: x\n"},
	{"tool", "name: demo.a\r\nversion: 1\r\ndescription: x\r\nside_effect: none\r\nrisk: low\r\napproval_when: \"args.\r\n  x\"\r\n"},
	{"server", "server_id: s\rconfigured_by: operator\r"},
	{"policy", "\ufeffegress: {allow: [a.com]}\n"},
	{"tool", "name: demo.a\x00\nversion: 1\n"},
	{"tool", "\t"},
	{"policy", "\u2029\u00850"},
	{"tool", "name: demo.a\nversion: 1\ndescription: \"a\u2028b\"\nside_effect: none\nrisk: low\napproval_when: \"args.x\u0085 > 1\"\n"},
	{"server", "\xff\xfes\x00e\x00r\x00v\x00e\x00r\x00_\x00i\x00d\x00:\x00 \x00s\x00\n\x00"},
	{"server", "\xfe\xff\x00s\x00:\x00 \x00\u2028"},
	{"policy", ""},
	{"policy", "\n\n\n"},
	{"policy", "# only a comment\n"},
	{"policy", "~"},
	{"server", "null\n"},
	{"protocol", "[]"},
	{"protocol", "- a\n- b\n"},
	{"tool", "\"just a string\""},
	{"tool", "name: demo.a\nversion: 1\ndescription: \"\u2028\u2029\u0085\"\nside_effect: none\nrisk: low\n"},
	// Deeply nested and unbalanced flow collections.
	{"policy", strings.Repeat("[", 3000) + strings.Repeat("]", 3000)},
	{"policy", "rules: " + strings.Repeat("{a: ", 500) + "x" + strings.Repeat("}", 500) + "\n"},
	{"tool", "args: " + strings.Repeat("[", 20000)},
	{"tool", "{{{{{{{{{{{{{{{{{{{{{{{{"},
	{"tool", "name: demo.deep\nversion: 1\ndescription: x\nside_effect: none\nrisk: low\nargs:\n  a: " +
		strings.Repeat("{type: object, properties: {a: ", 20) + "{type: string}" + strings.Repeat("}}", 20) + "\n"},
	{"tool", "name: demo.deep\nversion: 1\ndescription: x\nside_effect: none\nrisk: low\nargs:\n  a: " +
		strings.Repeat("{type: array, items: ", 20) + "{type: string}" + strings.Repeat("}", 20) + "\n"},
	// Huge and odd numbers.
	{"tool", "name: demo.a\nversion: 99999999999999999999999999\ndescription: x\nside_effect: none\nrisk: low\n"},
	{"tool", "name: demo.a\nversion: -9223372036854775808\ndescription: x\nside_effect: none\nrisk: low\noutput: {max_bytes: 0x7fffffffffffffff}\n"},
	{"tool", "name: demo.a\nversion: 0o17\ndescription: x\nside_effect: none\nrisk: low\nargs:\n  a: {type: number, min: 1e400, max: -.inf, default: .nan}\n  b: {type: integer, min: -1e308, max: 9223372036854775807, default: 9223372036854775807}\n  c: {type: string, max_length: 9223372036854775807, min_length: 9223372036854775808}\n  d: {type: integer, enum: [1, 0x1, 1.0, +1]}\n"},
	{"tool", "name: demo.a\nversion: 1_000\ndescription: x\nside_effect: none\nrisk: low\ntimeout: 9999999999999999999h\n"},
	{"tool", "name: demo.a\nversion: 1\ndescription: x\nside_effect: none\nrisk: low\nargs:\n  a: {type: array, items: {type: integer}, max_items: -1, min_items: 99999999999999999999}\n"},
	// Invalid UTF-8.
	{"tool", "name: \xff\xfe\nversion: 1\n"},
	{"tool", "name: demo.a\nversion: 1\ndescription: \"\xc3\x28\"\nside_effect: none\nrisk: low\napproval_when: \"args.\xe2\x82\"\n"},
	{"policy", "rules:\n  - name: r\n    deny_when: \"'\xed\xa0\x80' == tool\"\n"},
	// Duplicate and odd keys.
	{"tool", "name: demo.a\nname: demo.a\nversion: 1\n"},
	{"tool", "name: demo.a\nversion: 1\ndescription: x\nside_effect: none\nrisk: low\nargs:\n  a: {type: string}\n  a: {type: integer}\n"},
	{"server", "server_id: s\nconfigured_by: operator\ntransport: {stdio: {command: x, env: {A: a, A: b}}}\n"},
	{"tool", "~: x\nnull: y\n1: z\ntrue: w\n? [a, b]\n: c\n? {a: b}\n: d\n"},
	{"policy", "? |\n  rules\n: []\n"},
	{"tool", "\"name\": demo.a\n'version': 1\n"},
	// Tags.
	{"tool", "name: demo.a\nversion: 1\ndescription: !!binary aGVsbG8=\nside_effect: none\nrisk: low\n"},
	{"tool", "!!binary bmFtZQ==: demo.a\n"},
	{"tool", "name: !!str demo.a\nversion: !!int \"1\"\ndescription: !!str 12\nside_effect: !!str none\nrisk: !<tag:yaml.org,2002:str> low\n"},
	{"tool", "name: !custom demo.a\nversion: !!float 1\n"},
	{"tool", "name: demo.a\nversion: !!binary \"!!!\"\n"},
	{"tool", "name: demo.a\nversion: !!timestamp 2001-12-14\ndescription: 2001-12-14\n"},
	{"tool", "!!seq name: demo.a\n"},
	{"tool", "name: demo.a\nargs: !!map {a: !!seq [b]}\nresult: !!set {a, b}\nversion: !!omap [a: 1]\n"},
	{"tool", "name: demo.a\nversion: !!null\ndescription: !!bool yes\n"},
	// Block scalars and expression positions.
	{"tool", "name: demo.a\nversion: 1\ndescription: >-\n  folded\n  text\nside_effect: write\nidempotency: conditionally_idempotent\nidempotent_when: |\n  args.mode ==\n    'overwrite' &&\n  args.nope\nrisk: low\nargs:\n  mode: {type: string}\n"},
	{"tool", "name: demo.a\nversion: 1\ndescription: x\nside_effect: none\nrisk: low\napproval_when: |+\n  args.x\n\n\n"},
	{"tool", "name: demo.a\nversion: 1\ndescription: x\nside_effect: none\nrisk: low\napproval_when: |2-\n    args.x >\n   1\n"},
	{"tool", "name: demo.a\nversion: 1\ndescription: x\nside_effect: none\nrisk: low\napproval_when: >\n\n  args.x\n\n  > 1\nargs:\n  x: {type: integer}\n"},
	{"tool", "name: demo.a\nversion: 1\ndescription: x\nside_effect: none\nrisk: low\napproval_when: \"args.x\\n  > \\t\\u00e9 1\"\nargs:\n  x: {type: integer}\n"},
	{"tool", "name: demo.a\nversion: 1\ndescription: x\nside_effect: none\nrisk: low\napproval_when: 'args.x ''>'' 1\n\n  || true'\nargs:\n  x: {type: integer}\n"},
	{"tool", "name: demo.a\nversion: 1\ndescription: x\nside_effect: none\nrisk: low\napproval_when: args.x\n  > 1\n  ||\n"},
	{"tool", "name: demo.a\nversion: 1\ndescription: x\nside_effect: none\nrisk: low\napproval_when: |\n"},
	{"tool", "name: demo.a\nversion: 1\ndescription: x\nside_effect: none\nrisk: low\napproval_when: |\n  \u00e9\u00e9\u00e9 + \U0001F600 ++\n"},
	{"tool", "name: demo.a\nversion: 1\ndescription: x\nside_effect: none\nrisk: low\napproval_when: \"" + strings.Repeat("(", 200) + "true" + strings.Repeat(")", 200) + "\"\n"},
	{"tool", "name: demo.a\nversion: 1\ndescription: x\nside_effect: none\nrisk: low\napproval_when: \"" + strings.Repeat("args.x + ", 300) + "1 > 0\"\nargs:\n  x: {type: integer}\n"},
	{"policy", "rules:\n  - name: r\n    tools: [demo.echo]\n    approve_when: >\n      args.count >\n      'x'\n  - name: s\n    deny_when: \"principal.nope\"\n  - name: t\n    allow_when: \"args.anything.goes == 1\"\n"},
	{"policy", "rules:\n  - name: r\n    tools: [demo.echo, demo.echo]\n    approve_when: \"args.count\"\n"},
	// Names and references.
	{"protocol", "name: p\ninitial_mode: a\nmodes:\n  a: {tools: [demo.echo, mcp.demo.*, mcp.*.*, mcp..x, '*', mcp.nope.x, demo.echo.*]}\n  b: {tools: [demo.echo, mcp.demo.*]}\nexclusive_tools: [mcp.demo.*, demo.peek, mcp.demo.x]\n"},
	{"tool", "name: demo.args\nversion: 1\ndescription: x\nside_effect: none\nrisk: low\nargs:\n  a_b: {type: string}\n  ab: {type: string}\n  type: {type: string}\n  func: {type: string, enum: [a-b, a_b, \"\", A B]}\nresult:\n  a_b: {type: object, properties: {c: {type: string}}}\n"},
	{"tool", "name: demo.echo_args\nversion: 1\ndescription: x\nside_effect: none\nrisk: low\n"},
	{"server", "server_id: tenant_two\nconfigured_by: tenant\ntenant: acme\ntransport: {http: {url: \"https://evil.example.com:99999/%zz\"}}\n"},
	{"server", "server_id: s\nconfigured_by: tenant\ntenant: acme\ntransport: {http: {url: \"HTTPS://[::1]:80/\"}}\n"},
	{"tool", "name: " + strings.Repeat("a", 70) + "." + strings.Repeat("b", 70) + "\n"},
}

// TestLoadRejectsHiddenLineBreaks: YAML counts NEL, LS and PS as line breaks, editors
// do not, so they would shift every later position; UTF-16 files likewise (FuzzLoad).
func TestLoadRejectsHiddenLineBreaks(t *testing.T) {
	for _, c := range []struct {
		data string
		want []Pos
	}{
		{"\u2029\u00850", []Pos{{1, 1}, {1, 2}}},
		{"name: demo.a\r\ndescription: \"a\u2028b\"\rrisk: low # \u0085\n", []Pos{{2, 16}, {3, 13}}},
		{"\xff\xfen\x00:\x00 \x00x\x00", []Pos{{1, 1}}},
	} {
		tool, diags := LoadTool("tools/demo.a.yaml", "t.yaml", []byte(c.data))
		var got []Pos
		for _, d := range diags {
			got = append(got, Pos(d.Pos))
			if d.Category != "yaml" {
				t.Errorf("%q: %v, want rule yaml", c.data, d)
			}
		}
		if tool != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: tool %v, diagnostics at %v, want none at %v:\n%s", c.data, tool != nil, got, c.want, diagsText(diags))
		}
	}
}

// TestFuzzCompanionsLoadClean keeps the fuzz tree valid, so that what the fuzzer finds
// in it comes from the fuzzed file.
func TestFuzzCompanionsLoadClean(t *testing.T) {
	tree, diags, err := LoadFS(fuzzCompanions(), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(diags) != 0 {
		t.Errorf("the fuzz companion files have findings:\n%s", diagsText(diags))
	}
	if len(tree.Tools) != 2 || len(tree.Servers) != 2 || len(tree.Protocols) != 1 || len(tree.Devices) != 1 || tree.Policy == nil {
		t.Errorf("tree has %d tools, %d servers, %d protocols, %d devices, policy %v", len(tree.Tools), len(tree.Servers), len(tree.Protocols), len(tree.Devices), tree.Policy != nil)
	}
	// Every file kind has a companion, so the fuzzed file meets every cross-file rule.
	for _, k := range FileKinds {
		found := false
		for name := range fuzzCompanionFiles {
			found = found || kindOfSpecPath(name) == k
		}
		if !found {
			t.Errorf("no fuzz companion file of kind %s", k)
		}
	}
	for name, data := range fuzzCompanionFiles {
		if err := validateSpecYAML(t, kindOfSpecPath(name), []byte(data)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
