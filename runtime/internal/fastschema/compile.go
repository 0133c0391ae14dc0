package fastschema

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
)

// ErrUnsupported is returned by Compile for a schema outside the fast subset.
var ErrUnsupported = errors.New("fastschema: schema outside the fast subset")

// MaxDepth bounds the nesting Valid follows; deeper documents are left to the
// reference validator.
const MaxDepth = 64

// maxProps bounds the properties of one object schema: seen and required
// properties are tracked in one 64-bit mask.
const maxProps = 64

// Validator is a compiled schema. It is immutable and safe for concurrent use.
type Validator struct{ root *node }

// JSON value types as bits; integer is a subset of number.
const (
	tNull uint8 = 1 << iota
	tBool
	tObject
	tArray
	tNumber
	tInteger
	tString
)

type node struct {
	never bool  // the false schema
	types uint8 // 0: any type

	enum    []scalar // nil: no enum
	hasEnum bool

	min, max, exMin, exMax             float64
	hasMin, hasMax, hasExMin, hasExMax bool

	minLen, maxLen int // -1: none
	pattern        *regexp.Regexp

	// Objects.
	props         []prop
	index         map[string]int
	requiredMask  uint64
	additional    *node // nil: any value
	minProps      int
	maxProps      int
	checksObjects bool

	// Arrays.
	items              *node
	minItems, maxItems int
}

type prop struct {
	schema   *node // nil: listed only in required; additional applies
	declared bool
}

type scalar struct {
	kind uint8 // tNull, tBool, tNumber or tString
	b    bool
	f    float64
	s    string
}

// annotations and validated keywords: every other non-zero field of a
// jsonschema.Schema makes it unsupported, so a keyword added to jsonschema-go later
// is refused rather than silently ignored.
var supportedFields = map[string]bool{
	"Schema": true, "Comment": true, "Title": true, "Description": true, "Default": true,
	"Deprecated": true, "ReadOnly": true, "WriteOnly": true, "Examples": true, "Format": true,
	"Extra": true, "PropertyOrder": true,
	"Type": true, "Types": true, "Enum": true,
	"Minimum": true, "Maximum": true, "ExclusiveMinimum": true, "ExclusiveMaximum": true,
	"MinLength": true, "MaxLength": true, "Pattern": true,
	"Items": true, "MinItems": true, "MaxItems": true,
	"Properties": true, "Required": true, "AdditionalProperties": true,
	"MinProperties": true, "MaxProperties": true,
}

// knownDialects are the $schema values jsonschema-go validates with; the keywords of
// the subset mean the same in all of them.
var knownDialects = map[string]bool{
	"": true, "https://json-schema.org/draft/2020-12/schema": true,
	"http://json-schema.org/draft-07/schema#": true, "https://json-schema.org/draft-07/schema#": true,
}

// Compile compiles the schema of a resolved jsonschema-go schema. It returns
// ErrUnsupported (wrapped, naming the keyword) for a schema outside the subset.
func Compile(s *jsonschema.Schema) (*Validator, error) {
	root, err := compile(s, 0)
	if err != nil {
		return nil, err
	}
	return &Validator{root: root}, nil
}

// anyNode checks nothing: the true schema, and a property with no schema of its own.
var anyNode = newNode()

func newNode() *node {
	return &node{minLen: -1, maxLen: -1, minItems: -1, maxItems: -1, minProps: -1, maxProps: -1}
}

func compile(s *jsonschema.Schema, depth int) (*node, error) {
	if s == nil {
		return anyNode, nil
	}
	if depth > MaxDepth {
		return nil, fmt.Errorf("%w: nested deeper than %d", ErrUnsupported, MaxDepth)
	}
	if isFalse(s) {
		return &node{never: true}, nil
	}
	if !knownDialects[s.Schema] {
		return nil, fmt.Errorf("%w: $schema %q", ErrUnsupported, s.Schema)
	}
	v := reflect.ValueOf(s).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !supportedFields[f.Name] && !v.Field(i).IsZero() {
			return nil, fmt.Errorf("%w: keyword %s", ErrUnsupported, f.Name)
		}
	}
	n := newNode()
	types := s.Types
	if s.Type != "" {
		types = []string{s.Type}
	}
	for _, t := range types {
		switch t {
		case "null":
			n.types |= tNull
		case "boolean":
			n.types |= tBool
		case "object":
			n.types |= tObject
		case "array":
			n.types |= tArray
		case "number":
			n.types |= tNumber | tInteger
		case "integer":
			n.types |= tInteger
		case "string":
			n.types |= tString
		default:
			return nil, fmt.Errorf("%w: type %q", ErrUnsupported, t)
		}
	}
	if s.Enum != nil {
		n.hasEnum = true
		for _, e := range s.Enum {
			switch e := e.(type) {
			case nil:
				n.enum = append(n.enum, scalar{kind: tNull})
			case bool:
				n.enum = append(n.enum, scalar{kind: tBool, b: e})
			case float64:
				n.enum = append(n.enum, scalar{kind: tNumber, f: e})
			case string:
				n.enum = append(n.enum, scalar{kind: tString, s: e})
			default:
				return nil, fmt.Errorf("%w: enum value of type %T", ErrUnsupported, e)
			}
		}
	}
	num := func(p *float64, dst *float64, has *bool) error {
		if p == nil {
			return nil
		}
		if math.IsNaN(*p) || math.IsInf(*p, 0) {
			return fmt.Errorf("%w: bound %v", ErrUnsupported, *p)
		}
		*dst, *has = *p, true
		return nil
	}
	if err := errors.Join(num(s.Minimum, &n.min, &n.hasMin), num(s.Maximum, &n.max, &n.hasMax),
		num(s.ExclusiveMinimum, &n.exMin, &n.hasExMin), num(s.ExclusiveMaximum, &n.exMax, &n.hasExMax)); err != nil {
		return nil, err
	}
	setInt := func(p *int, dst *int) {
		if p != nil {
			*dst = max(*p, 0)
		}
	}
	setInt(s.MinLength, &n.minLen)
	setInt(s.MaxLength, &n.maxLen)
	setInt(s.MinItems, &n.minItems)
	setInt(s.MaxItems, &n.maxItems)
	setInt(s.MinProperties, &n.minProps)
	setInt(s.MaxProperties, &n.maxProps)
	if s.Pattern != "" {
		// jsonschema-go compiles patterns with Go's regexp too; same engine, same answer.
		re, err := regexp.Compile(s.Pattern)
		if err != nil {
			return nil, fmt.Errorf("%w: pattern: %v", ErrUnsupported, err)
		}
		n.pattern = re
	}
	if s.Items != nil {
		items, err := compile(s.Items, depth+1)
		if err != nil {
			return nil, err
		}
		n.items = items
	}
	if s.Properties != nil || s.Required != nil || s.AdditionalProperties != nil ||
		s.MinProperties != nil || s.MaxProperties != nil {
		if err := n.compileObject(s, depth); err != nil {
			return nil, err
		}
	}
	return n, nil
}

func (n *node) compileObject(s *jsonschema.Schema, depth int) error {
	n.checksObjects = true
	n.index = map[string]int{}
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		ps, err := compile(s.Properties[name], depth+1)
		if err != nil {
			return err
		}
		n.index[name] = len(n.props)
		n.props = append(n.props, prop{schema: ps, declared: true})
	}
	for _, name := range s.Required {
		i, ok := n.index[name]
		if !ok {
			i = len(n.props)
			n.index[name] = i
			n.props = append(n.props, prop{})
		}
		if i < maxProps {
			n.requiredMask |= 1 << i
		}
	}
	if len(n.props) > maxProps {
		return fmt.Errorf("%w: more than %d properties", ErrUnsupported, maxProps)
	}
	if s.AdditionalProperties != nil {
		add, err := compile(s.AdditionalProperties, depth+1)
		if err != nil {
			return err
		}
		n.additional = add
	}
	return nil
}

// isFalse reports whether s is the false schema as jsonschema-go decodes it:
// {"not": {}} and nothing else.
func isFalse(s *jsonschema.Schema) bool {
	if s.Not == nil || !reflect.ValueOf(*s.Not).IsZero() {
		return false
	}
	c := *s
	c.Not = nil
	return reflect.ValueOf(c).IsZero()
}
