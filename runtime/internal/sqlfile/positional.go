package sqlfile

import (
	"database/sql"
	"fmt"
	"strings"
)

// Positional is a statement whose named parameters (:name, SQLite's form) are written
// as ? and bound by position. The SQL files keep their names; a driver prepares Query
// and binds with Args. Why: modernc.org/sqlite asks SQLite for the name of every
// parameter on every execution and copies it into a Go string, and database/sql boxes
// every sql.NamedArg into an interface, two allocations per parameter, 25 for the
// insert of a call's record (issue 20). A bare ? has no name to copy.
type Positional struct {
	Query string   // the statement, each :name written as ?
	Names []string // the name of each ?, in order; a name used twice is listed twice
}

// NewPositional rewrites the :name parameters of query as ?. Literals ('...'),
// quoted identifiers ("...", `...`, [...]) and comments are copied unchanged, so a
// colon inside them is not a parameter. ?, ?NNN, @name and $name parameters are
// refused: a statement mixing them with ? would bind by the wrong positions.
func NewPositional(query string) (Positional, error) {
	var b strings.Builder
	var names []string
	for i := 0; i < len(query); {
		c := query[i]
		switch {
		case c == '\'' || c == '"' || c == '`' || c == '[':
			end := byte(c)
			if c == '[' {
				end = ']'
			}
			j := i + 1
			for j < len(query) {
				if query[j] == end {
					if end != ']' && j+1 < len(query) && query[j+1] == end { // '' inside '...'
						j += 2
						continue
					}
					break
				}
				j++
			}
			if j >= len(query) {
				return Positional{}, fmt.Errorf("sqlfile: unterminated %c at byte %d", c, i)
			}
			b.WriteString(query[i : j+1])
			i = j + 1
		case c == '-' && strings.HasPrefix(query[i:], "--"):
			j := strings.IndexByte(query[i:], '\n')
			if j < 0 {
				j = len(query) - i
			}
			b.WriteString(query[i : i+j])
			i += j
		case c == '/' && strings.HasPrefix(query[i:], "/*"):
			j := strings.Index(query[i+2:], "*/")
			if j < 0 {
				return Positional{}, fmt.Errorf("sqlfile: unterminated comment at byte %d", i)
			}
			b.WriteString(query[i : i+2+j+2])
			i += 2 + j + 2
		case c == ':' && i+1 < len(query) && isNameStart(query[i+1]):
			j := i + 1
			for j < len(query) && isNameByte(query[j]) {
				j++
			}
			names = append(names, query[i+1:j])
			b.WriteByte('?')
			i = j
		case c == '?' || c == '@' || c == '$':
			return Positional{}, fmt.Errorf("sqlfile: parameter %q at byte %d: only :name parameters can be made positional", c, i)
		default:
			b.WriteByte(c)
			i++
		}
	}
	return Positional{Query: b.String(), Names: names}, nil
}

// MustPositional is NewPositional for a driver's own statements, read at package
// initialisation: an error fails every test of the driver.
func MustPositional(query string) Positional {
	p, err := NewPositional(query)
	if err != nil {
		panic(err)
	}
	return p
}

// Args are the values of named in the order of p's parameters. A caller that passes
// named in that order (each name once, at its first use) pays one comparison per
// parameter; any other order is searched. A parameter named does not have is an error,
// as database/sql's would be; a name p does not use is ignored.
func (p Positional) Args(named ...sql.NamedArg) ([]any, error) {
	out := make([]any, len(p.Names))
	next := 0 // where the next name in first-use order is expected in named
	for i, name := range p.Names {
		j := -1
		if next < len(named) && named[next].Name == name {
			j = next
			next++
		} else {
			for k := range named {
				if named[k].Name == name {
					j = k
					break
				}
			}
		}
		if j < 0 {
			return nil, fmt.Errorf("sqlfile: no argument for :%s", name)
		}
		out[i] = named[j].Value
	}
	return out, nil
}

func isNameStart(c byte) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

func isNameByte(c byte) bool { return isNameStart(c) || '0' <= c && c <= '9' }
