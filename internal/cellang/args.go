package cellang

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Args is the declaration of a tool's arguments to CEL, read from the tool's JSON
// Schema (its generated InputSchema): the "type", "properties" and "items" keywords,
// at any depth; other keywords are ignored. It gives args its CEL type (see
// [ToolEnv]) and converts the decoded JSON arguments to the CEL values of that type
// ([Args.Decode], [Args.Normalize], and the field accessors of the typed objects).
// A nil *Args is the declaration of arguments without a schema: map(string, dyn),
// whose numbers follow the schema-less rule of [DecodeArgs]. An *Args is immutable
// and safe for concurrent use.
type Args struct {
	typeName string // the synthetic CEL type of args, "" when args is map(string, dyn)
	root     *node
}

// kind is what a schema declares a value to be.
type kind uint8

const (
	kindDyn kind = iota // not declared, or not one of the below
	kindString
	kindInt
	kindDouble
	kindBool
	kindList
	kindObject
)

// node is the declaration of one value.
type node struct {
	kind kind
	// nullable: the type also admits null ("type": ["number", "null"]). The value's
	// numbers still convert as kind says, but its CEL type is dyn.
	nullable bool
	items    *node            // the elements ("items"), nil when undeclared
	props    map[string]*node // the properties ("properties")
}

// maxSchemaDepth bounds how deep a schema is read (the nesting canonical JSON
// accepts); below it values are dyn.
const maxSchemaDepth = 128

// NewArgs reads the JSON Schema of tool's arguments. An empty schema gives a nil
// *Args (no schema). When the schema is an object with "properties", args is a
// typed object ([TypeName] of tool), otherwise map(string, dyn) whose numbers are
// still converted as the schema declares.
func NewArgs(tool string, inputSchema []byte) (*Args, error) {
	if len(bytes.TrimSpace(inputSchema)) == 0 {
		return nil, nil
	}
	var s any
	if err := json.Unmarshal(inputSchema, &s); err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	return SchemaArgs(tool, s), nil
}

// SchemaArgs is [NewArgs] of a schema already decoded (map[string]any, []any, string
// and the other values encoding/json produces): the value the build encodes as a
// tool's InputSchema, read without encoding it.
func SchemaArgs(tool string, schema any) *Args {
	a := &Args{root: readNode(schema, 0)}
	if a.root != nil && a.root.kind == kindObject && !a.root.nullable {
		a.typeName = TypeName(tool)
	}
	return a
}

// Typed reports whether args is a typed object (else map(string, dyn)).
func (a *Args) Typed() bool { return a != nil && a.typeName != "" }

func readNode(s any, depth int) *node {
	m, ok := s.(map[string]any)
	if !ok || depth > maxSchemaDepth {
		return nil
	}
	n := &node{}
	name := ""
	switch ty := m["type"].(type) {
	case string:
		name = ty
	case []any:
		count := 0
		for _, x := range ty {
			switch x {
			case "null":
				n.nullable = true
			default:
				count++
				name, _ = x.(string)
			}
		}
		if count != 1 {
			name = ""
		}
	}
	switch name {
	case "string":
		n.kind = kindString
	case "integer":
		n.kind = kindInt
	case "number":
		n.kind = kindDouble
	case "boolean":
		n.kind = kindBool
	case "array":
		n.kind = kindList
	case "object":
		if _, ok := m["properties"].(map[string]any); ok {
			n.kind = kindObject // else map(string, dyn)
		}
	}
	// The numbers below a value convert as "properties" and "items" declare them
	// whatever its "type" says; its CEL type is an object only when it is one.
	n.items = readNode(m["items"], depth+1)
	if props, ok := m["properties"].(map[string]any); ok {
		n.props = make(map[string]*node, len(props))
		for k, v := range props {
			pn := readNode(v, depth+1)
			if pn == nil {
				pn = &node{}
			}
			n.props[k] = pn
		}
	}
	return n
}

// TypeName is the synthetic CEL type of tool's args: toolgen.args.<tool> with every
// character but a-z, 0-9 and _ replaced by _. A provider declares one tool, so two
// tools whose names differ only in "." versus "_" never meet.
func TypeName(tool string) string {
	var b strings.Builder
	for _, r := range tool {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "toolgen.args.tool"
	}
	return "toolgen.args." + b.String()
}

// DecodeArgs decodes a call's JSON arguments for CEL without a schema: a number
// whose value is an integer that fits int64 (3, 3.0, 3e0) becomes an int64, any other
// number a float64. Empty input and null give an empty map; anything but a JSON
// object is an error.
func DecodeArgs(raw []byte) (map[string]any, error) { return (*Args)(nil).Decode(raw) }

// Decode decodes a call's JSON arguments for CEL: numbers the schema declares
// "number" become float64, numbers it declares "integer" int64 when integral, and
// the others follow the schema-less rule of [DecodeArgs].
func (a *Args) Decode(raw []byte) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decode arguments for CEL: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("decode arguments for CEL: more than one JSON value")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("decode arguments for CEL: arguments must be a JSON object, found %T", v)
	}
	return a.Normalize(m), nil
}

// Normalize converts, in place, the numbers of arguments decoded some other way
// (float64 from encoding/json, json.Number, int) as Decode would have, and returns
// args.
func (a *Args) Normalize(args map[string]any) map[string]any {
	if args == nil {
		return nil
	}
	var root *node
	if a != nil {
		root = a.root
	}
	normalize(root, args)
	return args
}

// normalize converts the numbers in v as n declares them, in place for maps and
// slices, and returns the converted value.
func normalize(n *node, v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			var en *node
			if n != nil {
				en = n.props[k]
			}
			x[k] = normalize(en, e)
		}
		return x
	case []any:
		var en *node
		if n != nil {
			en = n.items
		}
		for i, e := range x {
			x[i] = normalize(en, e)
		}
		return x
	}
	return number(n, v)
}

// number is the one conversion of a JSON number to CEL: a float64 when n declares
// "number", else an int64 when the value is integral and fits, else a float64. A
// value that is not a number is returned as it is.
func number(n *node, v any) any {
	double := n != nil && n.kind == kindDouble
	switch x := v.(type) {
	case json.Number:
		if !double {
			if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
				return i
			}
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return v
		}
		if double {
			return f
		}
		return intIfIntegral(f)
	case float64:
		if double {
			return x
		}
		return intIfIntegral(x)
	case float32:
		return number(n, float64(x))
	case int:
		if double {
			return float64(x)
		}
		return int64(x)
	case int64:
		if double {
			return float64(x)
		}
	case int32:
		return number(n, int64(x))
	}
	return v
}

func intIfIntegral(f float64) any {
	if f == math.Trunc(f) && f >= -(1<<63) && f < 1<<63 {
		return int64(f)
	}
	return f
}

// fieldValue converts the value of a typed object's field as declared, without
// modifying the caller's data: a list whose elements need converting is copied.
// Objects are not walked: their own fields convert when read.
func fieldValue(n *node, v any) any {
	if l, ok := v.([]any); ok {
		var items *node
		if n != nil {
			items = n.items
		}
		for i, e := range l {
			if c := fieldValue(items, e); !same(c, e) {
				out := slices.Clone(l)
				out[i] = c
				for j := i + 1; j < len(l); j++ {
					out[j] = fieldValue(items, l[j])
				}
				return out
			}
		}
		return v
	}
	return number(n, v)
}

// same reports whether fieldValue left e as it was (maps and slices are returned as
// they are or copied, never compared by value).
func same(c, e any) bool {
	switch e := e.(type) {
	case map[string]any:
		return true
	case []any:
		cl, _ := c.([]any)
		return len(cl) == len(e) && (len(e) == 0 || &cl[0] == &e[0])
	case json.Number, float64, float32, int, int32, int64:
		return c == e
	}
	return true
}
