package sqlfile

import (
	"database/sql"
	"reflect"
	"strings"
	"testing"
)

func TestNewPositional(t *testing.T) {
	for _, tc := range []struct {
		query, want string
		names       []string
	}{
		{"SELECT 1", "SELECT 1", nil},
		{"SELECT a FROM t WHERE k = :key AND b = :b_2", "SELECT a FROM t WHERE k = ? AND b = ?", []string{"key", "b_2"}},
		{"WHERE c = :base OR substr(c, 1, length(:base) + 1) = :base || '-'",
			"WHERE c = ? OR substr(c, 1, length(?) + 1) = ? || '-'", []string{"base", "base", "base"}},
		{"WHERE instr(key, ':refused:') = 0 AND k = :k", "WHERE instr(key, ':refused:') = 0 AND k = ?", []string{"k"}},
		{"SELECT 'it''s :not' || :yes", "SELECT 'it''s :not' || ?", []string{"yes"}},
		{"SELECT \":col\", [:col], `:col` FROM t -- a :comment\nWHERE x = :x /* :also */",
			"SELECT \":col\", [:col], `:col` FROM t -- a :comment\nWHERE x = ? /* :also */", []string{"x"}},
		{"SELECT :a-- trailing", "SELECT ?-- trailing", []string{"a"}},
		{"SELECT 1:2, :", "SELECT 1:2, :", nil}, // a colon without a name is not a parameter
	} {
		got, err := NewPositional(tc.query)
		if err != nil {
			t.Fatalf("%q: %v", tc.query, err)
		}
		if got.Query != tc.want || !reflect.DeepEqual(got.Names, tc.names) {
			t.Errorf("%q:\n got %q %q\nwant %q %q", tc.query, got.Query, got.Names, tc.want, tc.names)
		}
	}
	for _, bad := range []string{"SELECT ?", "SELECT ?1", "SELECT @a", "SELECT $a", "SELECT 'open", "SELECT /* open", `SELECT "open`} {
		if _, err := NewPositional(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestPositionalArgs(t *testing.T) {
	p := MustPositional("SELECT :a, :b, :a, :c")
	for _, named := range [][]sql.NamedArg{
		{sql.Named("a", 1), sql.Named("b", 2), sql.Named("c", 3)},                     // first-use order
		{sql.Named("c", 3), sql.Named("a", 1), sql.Named("b", 2), sql.Named("zz", 9)}, // any order, one unused
	} {
		got, err := p.Args(named...)
		if err != nil || !reflect.DeepEqual(got, []any{1, 2, 1, 3}) {
			t.Errorf("Args(%v) = %v, %v", named, got, err)
		}
	}
	if _, err := p.Args(sql.Named("a", 1), sql.Named("c", 3)); err == nil || !strings.Contains(err.Error(), ":b") {
		t.Errorf("a missing argument: %v", err)
	}
}

func FuzzNewPositional(f *testing.F) {
	for _, s := range []string{"SELECT :a", "'x:y' :z", "-- :c\n:d", "/* :e */ :f", "[:g] \":h\" `:i`", "'it''s' :j"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, query string) {
		p, err := NewPositional(query)
		if err != nil {
			return
		}
		// each :name became one ?, and nothing else changed length
		shrink := 0
		for _, name := range p.Names {
			shrink += len(name)
		}
		if len(p.Query) != len(query)-shrink {
			t.Fatalf("%q rewritten to %q with names %q", query, p.Query, p.Names)
		}
		if _, err := p.Args(); len(p.Names) > 0 && err == nil {
			t.Fatalf("%q: Args without arguments did not fail", query)
		}
	})
}
