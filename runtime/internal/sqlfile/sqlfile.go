// Package sqlfile reads the named SQL of a store driver from its .sql files (the
// shape of River's riverpgxv5 and riversqlite, without a code generator): each file
// holds sections that start with a line
//
//	-- name: InvocationInsert
//
// and run to the next such line. A section named with a capital letter is a
// statement; one named in lower case is a fragment (a predicate, a column list) that
// statements and other fragments include as {{name}}. Load expands every inclusion,
// so the SQL a driver runs is exactly the text of its files.
//
// It imports the standard library only.
package sqlfile

import (
	"bufio"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strings"
)

// Queries are the sections of a set of .sql files, their inclusions expanded.
type Queries map[string]string

// Get returns the section name, or panics if there is none: drivers read their SQL
// once, at package initialisation, so a missing name fails every test of the driver.
func (q Queries) Get(name string) string {
	s, ok := q[name]
	if !ok {
		panic(fmt.Sprintf("sqlfile: no section %q", name))
	}
	return s
}

var (
	nameLine  = regexp.MustCompile(`^--\s*name:\s*([A-Za-z_][A-Za-z0-9_]*)\s*$`)
	inclusion = regexp.MustCompile(`\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}`)
)

// Load reads the .sql files of fsys that match pattern (fs.Glob), in name order, and
// returns their sections expanded. A name defined twice, an inclusion of an unknown
// name or a cycle of inclusions is an error.
func Load(fsys fs.FS, pattern string) (Queries, error) {
	files, err := fs.Glob(fsys, pattern)
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	raw := map[string]string{}
	for _, f := range files {
		b, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, err
		}
		if err := parse(f, string(b), raw); err != nil {
			return nil, err
		}
	}
	out := Queries{}
	var expand func(name string, stack []string) (string, error)
	expand = func(name string, stack []string) (string, error) {
		if s, ok := out[name]; ok {
			return s, nil
		}
		for _, n := range stack {
			if n == name {
				return "", fmt.Errorf("sqlfile: inclusion cycle %s -> %s", strings.Join(stack, " -> "), name)
			}
		}
		body, ok := raw[name]
		if !ok {
			return "", fmt.Errorf("sqlfile: %s includes unknown section %q", stack[len(stack)-1], name)
		}
		var errOut error
		s := inclusion.ReplaceAllStringFunc(body, func(m string) string {
			v, err := expand(m[2:len(m)-2], append(stack, name))
			if err != nil && errOut == nil {
				errOut = err
			}
			return v
		})
		if errOut != nil {
			return "", errOut
		}
		out[name] = s
		return s, nil
	}
	for name := range raw {
		if _, err := expand(name, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// MustLoad is Load for a driver's embedded files: their errors are bugs.
func MustLoad(fsys fs.FS, pattern string) Queries {
	q, err := Load(fsys, pattern)
	if err != nil {
		panic(err)
	}
	return q
}

// parse adds the sections of one file to raw. Lines before the first name line are
// the file's comment. A section's text is trimmed of surrounding blank lines and of
// its leading comment lines (they document the section, not the SQL); a fragment's
// trailing newline is dropped so it can be included inside a line.
func parse(file, text string, raw map[string]string) error {
	var name string
	var body []string
	flush := func() error {
		if name == "" {
			return nil
		}
		if _, dup := raw[name]; dup {
			return fmt.Errorf("sqlfile: %s: section %q defined twice", file, name)
		}
		for len(body) > 0 && (strings.TrimSpace(body[0]) == "" || strings.HasPrefix(strings.TrimSpace(body[0]), "--")) {
			body = body[1:]
		}
		for len(body) > 0 && strings.TrimSpace(body[len(body)-1]) == "" {
			body = body[:len(body)-1]
		}
		raw[name] = strings.Join(body, "\n")
		return nil
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := nameLine.FindStringSubmatch(line); m != nil {
			if err := flush(); err != nil {
				return err
			}
			name, body = m[1], nil
			continue
		}
		if name != "" {
			body = append(body, line)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("sqlfile: %s: %w", file, err)
	}
	return flush()
}
