package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// The spec files are read as yaml.v3 node trees and walked by hand, never decoded into
// structs: Node.Decode ignores KnownFields (go-yaml/yaml#460) and does not report
// duplicate keys when the target is a Node, and a walk keeps every value's position.

func posOf(n *yaml.Node) Pos {
	if n == nil {
		return Pos{}
	}
	return Pos{Line: n.Line, Col: n.Column}
}

// yamlParserProblems are the problems yaml.v3's parser (not its scanner) reports
// (parserc.go, yaml_parser_set_parser_error*).
var yamlParserProblems = []string{
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"did not find expected '-' indicator",
	"did not find expected <document start>",
	"did not find expected <stream-start>",
	"did not find expected key",
	"did not find expected node content",
	"found duplicate %TAG directive",
	"found duplicate %YAML directive",
	"found incompatible YAML document",
	"found undefined tag handle",
}

var yamlErrLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parseDocument parses one YAML document and returns its root node (a mapping), or nil
// after reporting why it cannot be used. It never panics: the parser is run under
// recover because a parser panic on hostile input must become a diagnostic.
func parseDocument(r reporter, data []byte) (root *yaml.Node) {
	defer func() {
		if p := recover(); p != nil {
			r.errorf(Pos{1, 1}, "yaml.parser-failed", "YAML parser failed: %v", p)
			root = nil
		}
	}()
	if !checkEncoding(r, data) {
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			r.errorf(Pos{1, 1}, "yaml.empty-file", "file is empty")
			return nil
		}
		reportYAMLError(r, err)
		return nil
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		r.errorf(posOf(&extra), "yaml.multiple-documents", "a spec file holds exactly one YAML document; remove this one")
	} else if !errors.Is(err, io.EOF) {
		reportYAMLError(r, err)
		return nil
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		r.errorf(Pos{1, 1}, "yaml.empty-file", "file is empty")
		return nil
	}
	root = doc.Content[0]
	if !checkPlainYAML(r, root) {
		return nil
	}
	if root.Kind != yaml.MappingNode {
		r.errorf(posOf(root), "schema.not-a-mapping", "top level must be a mapping, found %s", kindName(root))
		return nil
	}
	return root
}

// checkEncoding rejects what would make the parser's positions differ from an editor's:
// a UTF-16 file (yaml.v3 decodes one after a byte order mark, while the positions of CEL
// expressions are computed on the file's bytes), and the line breaks YAML counts and
// editors and diffs do not show (NEL, LINE SEPARATOR, PARAGRAPH SEPARATOR: every line
// number after one would be wrong). Found by FuzzLoad.
func checkEncoding(r reporter, data []byte) bool {
	if bytes.HasPrefix(data, []byte{0xFE, 0xFF}) || bytes.HasPrefix(data, []byte{0xFF, 0xFE}) {
		r.errorf(Pos{1, 1}, "yaml.utf16", "spec files are UTF-8; this one is UTF-16")
		return false
	}
	ok := true
	line, col := 1, 1
	for i := 0; i < len(data); {
		c, size := utf8.DecodeRune(data[i:])
		i += size
		switch c {
		case '\n':
			line, col = line+1, 1
			continue
		case '\r':
			if i < len(data) && data[i] == '\n' {
				continue
			}
			line, col = line+1, 1
			continue
		case '\u0085', '\u2028', '\u2029':
			r.errorf(Pos{line, col}, "yaml.line-separator", "character %U is a line break to YAML but not to editors; remove it, or write it as the escape \\u%04X in a double-quoted string", c, c)
			ok = false
		}
		col++
	}
	return ok
}

func reportYAMLError(r reporter, err error) {
	msg := err.Error()
	if m := yamlErrLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		// yaml.v3 prints a scanner error's line 1-based but a parser error's 0-based
		// (decode.go, parser.fail): the parser's problems are a closed list.
		if slices.Contains(yamlParserProblems, m[2]) {
			line++
		}
		r.errorf(Pos{Line: line, Col: 1}, "yaml.syntax", "%s", m[2])
		return
	}
	r.errorf(Pos{1, 1}, "yaml.syntax", "%s", strings.TrimPrefix(msg, "yaml: "))
}

// checkPlainYAML rejects the YAML features a reviewed spec has no use for and that make
// a diff lie about what it changes: anchors, aliases, merge keys and custom tags.
func checkPlainYAML(r reporter, n *yaml.Node) bool {
	ok := true
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		switch {
		case n.Kind == yaml.AliasNode:
			r.errorf(posOf(n), "yaml.alias", "aliases are not allowed in spec files; write the value out")
			ok = false
			return
		case n.Anchor != "":
			r.errorf(posOf(n), "yaml.anchor", "anchors are not allowed in spec files; write the value out")
			ok = false
		case n.Tag == "!!merge":
			r.errorf(posOf(n), "yaml.merge-key", "merge keys (<<) are not allowed in spec files")
			ok = false
		case n.Kind == yaml.ScalarNode && n.Style&yaml.TaggedStyle != 0 && !slices.Contains(standardTags, n.Tag):
			r.errorf(posOf(n), "yaml.custom-tag", "custom tag %s is not allowed in spec files", n.Tag)
			ok = false
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(n)
	return ok
}

var standardTags = []string{"!!str", "!!int", "!!float", "!!bool", "!!null"}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return "null"
		case "!!int":
			return "an integer"
		case "!!float":
			return "a number"
		case "!!bool":
			return "a boolean"
		}
		return "a string"
	}
	return "nothing"
}

// mapping is a checked YAML mapping: known keys only, each at most once.
type mapping struct {
	r      reporter
	node   *yaml.Node
	values map[string]*yaml.Node
	keys   map[string]*yaml.Node
	order  []string
}

// asMapping checks that n is a mapping whose keys are all in known and appear once.
// It reports every unknown and duplicate key and returns nil if n is not a mapping.
func (r reporter) asMapping(n *yaml.Node, what string, known ...string) *mapping {
	if n.Kind != yaml.MappingNode {
		r.errorf(posOf(n), "schema.not-a-mapping", "%s must be a mapping, found %s", what, kindName(n))
		return nil
	}
	m := &mapping{r: r, node: n, values: map[string]*yaml.Node{}, keys: map[string]*yaml.Node{}}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag == "!!null" {
			r.errorf(posOf(k), "schema.key-not-string", "%s keys must be strings, found %s", what, kindName(k))
			continue
		}
		if first, dup := m.keys[k.Value]; dup {
			r.errorf(posOf(k), "schema.duplicate-key", "duplicate key %q in %s (first at line %d)", k.Value, what, first.Line)
			continue
		}
		m.keys[k.Value], m.values[k.Value] = k, v
		m.order = append(m.order, k.Value)
		if known != nil && !slices.Contains(known, k.Value) {
			msg := fmt.Sprintf("unknown key %q in %s", k.Value, what)
			if s := closest(k.Value, known); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			} else {
				sorted := slices.Clone(known)
				slices.Sort(sorted)
				msg += "; known keys: " + strings.Join(sorted, ", ")
			}
			r.errorf(posOf(k), "schema.unknown-key", "%s", msg)
		}
	}
	return m
}

func (m *mapping) has(key string) bool { _, ok := m.values[key]; return ok }

// at is the position of key's value, or of the mapping itself when the key is absent.
func (m *mapping) at(key string) Pos {
	if v, ok := m.values[key]; ok {
		return posOf(v)
	}
	return posOf(m.node)
}

// keyAt is the position of the key itself.
func (m *mapping) keyAt(key string) Pos {
	if k, ok := m.keys[key]; ok {
		return posOf(k)
	}
	return posOf(m.node)
}

func (m *mapping) get(key string) *yaml.Node { return m.values[key] }

// lookup finds the value at a dotted key path below m ("classification.risk"): the
// first key is one of m's checked keys, the rest are walked in the YAML node tree (the
// nested mappings were checked when they were loaded). ok is false when a key on the
// path is absent or a value on it is not a mapping.
func (m *mapping) lookup(path string) (k, v *yaml.Node, ok bool) {
	first, rest, nested := strings.Cut(path, ".")
	k, v, ok = m.keys[first], m.values[first], m.values[first] != nil
	for ok && nested {
		var key string
		key, rest, nested = strings.Cut(rest, ".")
		ok = false
		if v.Kind != yaml.MappingNode {
			break
		}
		for i := 0; i+1 < len(v.Content); i += 2 {
			if v.Content[i].Kind == yaml.ScalarNode && v.Content[i].Value == key {
				k, v, ok = v.Content[i], v.Content[i+1], true
				break
			}
		}
	}
	return k, v, ok
}

// Positions locates what one mapping of a spec file says: the document of a tool,
// server, protocol or policy, a mode, a policy rule. The model keeps it so that
// `toolgen diff` can name the line of each changed key in both trees.
type Positions struct {
	m *mapping
}

// At returns the position of the value at path, a key or a dotted key path such as
// "classification.risk" or "egress.allow", or of the mapping itself when the path is
// absent.
func (p Positions) At(path string) Pos {
	if p.m == nil {
		return Pos{1, 1}
	}
	if _, v, ok := p.m.lookup(path); ok {
		return posOf(v)
	}
	return posOf(p.m.node)
}

// KeyAt is [Positions.At] for the key rather than its value: the line that names a
// list or a block mapping ("transport:"), where At is its first entry.
func (p Positions) KeyAt(path string) Pos {
	if p.m == nil {
		return Pos{1, 1}
	}
	if k, _, ok := p.m.lookup(path); ok {
		return posOf(k)
	}
	return posOf(p.m.node)
}

// Has reports whether the mapping holds a value at path (see [Positions.At]).
func (p Positions) Has(path string) bool {
	if p.m == nil {
		return false
	}
	_, _, ok := p.m.lookup(path)
	return ok
}

// str reads an optional string value. A scalar YAML resolves to another type (yes,
// 1.0, null) is an error: the author must quote it, so a reviewer sees what is meant.
func (m *mapping) str(key string) (string, bool) {
	v, ok := m.values[key]
	if !ok {
		return "", false
	}
	if v.Kind != yaml.ScalarNode || v.Tag != "!!str" {
		m.r.errorf(posOf(v), "schema.not-a-string", "%s must be a string, found %s (quote it if it is meant as text)", key, kindName(v))
		return "", false
	}
	return v.Value, true
}

// requiredStr reads a string value that must be present and non-empty.
func (m *mapping) requiredStr(key, what string) (string, bool) {
	if !m.has(key) {
		m.r.errorf(posOf(m.node), "schema.missing-key", "%s is missing required key %q", what, key)
		return "", false
	}
	s, ok := m.str(key)
	if ok && strings.TrimSpace(s) == "" {
		m.r.errorf(m.at(key), "schema.empty-string", "%s must not be empty", key)
		return "", false
	}
	return s, ok
}

func (m *mapping) boolean(key string) (bool, bool) {
	v, ok := m.values[key]
	if !ok {
		return false, false
	}
	var b bool
	if v.Kind != yaml.ScalarNode || v.Tag != "!!bool" || v.Decode(&b) != nil {
		m.r.errorf(posOf(v), "schema.not-a-bool", "%s must be true or false, found %s", key, kindName(v))
		return false, false
	}
	return b, true
}

func (m *mapping) integer(key string) (int64, bool) {
	v, ok := m.values[key]
	if !ok {
		return 0, false
	}
	return m.r.intValue(v, key)
}

func (r reporter) intValue(v *yaml.Node, what string) (int64, bool) {
	var i int64
	if v.Kind != yaml.ScalarNode || v.Tag != "!!int" || v.Decode(&i) != nil {
		r.errorf(posOf(v), "schema.not-an-integer", "%s must be an integer, found %s", what, kindName(v))
		return 0, false
	}
	return i, true
}

func (m *mapping) number(key string) (float64, bool) {
	v, ok := m.values[key]
	if !ok {
		return 0, false
	}
	var f float64
	if v.Kind != yaml.ScalarNode || (v.Tag != "!!int" && v.Tag != "!!float") || v.Decode(&f) != nil {
		m.r.errorf(posOf(v), "schema.not-a-number", "%s must be a number, found %s", key, kindName(v))
		return 0, false
	}
	if math.IsInf(f, 0) || math.IsNaN(f) {
		m.r.errorf(posOf(v), "SPEC-4.non-finite", "%s must be a finite number, found %s (JSON has no infinities or NaN)", key, v.Value)
		return 0, false
	}
	return f, true
}

// Ref is a name written in a spec, with where it was written.
type Ref struct {
	Name string
	Pos  Pos
}

// strList reads an optional list of strings.
func (m *mapping) strList(key string) ([]Ref, bool) {
	v, ok := m.values[key]
	if !ok {
		return nil, false
	}
	return m.r.strListValue(v, key)
}

func (r reporter) strListValue(v *yaml.Node, what string) ([]Ref, bool) {
	if v.Kind != yaml.SequenceNode {
		r.errorf(posOf(v), "schema.not-a-string-list", "%s must be a list of strings, found %s", what, kindName(v))
		return nil, false
	}
	out := make([]Ref, 0, len(v.Content))
	ok := true
	for _, e := range v.Content {
		if e.Kind != yaml.ScalarNode || e.Tag != "!!str" {
			r.errorf(posOf(e), "schema.list-entry-not-string", "%s entries must be strings, found %s", what, kindName(e))
			ok = false
			continue
		}
		out = append(out, Ref{Name: e.Value, Pos: posOf(e)})
	}
	return out, ok
}

// oneOf reads an optional string that must be one of allowed; req is the requirement
// the check is under (rule req.value-not-allowed).
func (m *mapping) oneOf(key, req string, allowed ...string) (string, bool) {
	s, ok := m.str(key)
	if !ok {
		return "", false
	}
	if !slices.Contains(allowed, s) {
		m.r.errorf(m.at(key), req+".value-not-allowed", "%s must be one of %s, found %q", key, strings.Join(allowed, ", "), s)
		return "", false
	}
	return s, true
}

// closest suggests the known key nearest to s, if it is near enough to be a typo.
// Closest suggests the name of known nearest to s when s looks like a typo of it, or "".
func Closest(s string, known []string) string { return closest(s, known) }

func closest(s string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(s, k); d < bestD || (d == bestD && k < best) {
			best, bestD = k, d
		}
	}
	if bestD > len(s)/2 {
		return ""
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func splitLines(data []byte) []string { return strings.Split(string(data), "\n") }
