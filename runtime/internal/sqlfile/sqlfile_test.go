package sqlfile

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestLoad_SectionsAndInclusions(t *testing.T) {
	fsys := fstest.MapFS{
		"sql/a.sql": {Data: []byte(`-- the file's comment, before any section

-- name: fenced
-- the fragment's comment is not part of it
id = :id AND owner = :owner

-- name: InvocationSettle
-- Settles a row.
UPDATE t SET status = :status
WHERE {{fenced}} AND {{live}}
`)},
		"sql/b.sql": {Data: []byte("-- name: live\nsuspended_at IS NULL\n")},
	}
	q, err := Load(fsys, "sql/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	want := "UPDATE t SET status = :status\nWHERE id = :id AND owner = :owner AND suspended_at IS NULL"
	if got := q.Get("InvocationSettle"); got != want {
		t.Fatalf("InvocationSettle = %q, want %q", got, want)
	}
	if got := q.Get("fenced"); got != "id = :id AND owner = :owner" {
		t.Fatalf("fenced = %q", got)
	}
}

func TestLoad_Errors(t *testing.T) {
	for name, files := range map[string]map[string]string{
		"defined twice":   {"a.sql": "-- name: X\nSELECT 1\n", "b.sql": "-- name: X\nSELECT 2\n"},
		"unknown include": {"a.sql": "-- name: X\nSELECT {{nope}}\n"},
		"cycle":           {"a.sql": "-- name: a\n{{b}}\n-- name: b\n{{a}}\n"},
	} {
		fsys := fstest.MapFS{}
		for f, s := range files {
			fsys[f] = &fstest.MapFile{Data: []byte(s)}
		}
		if _, err := Load(fsys, "*.sql"); err == nil || !strings.HasPrefix(err.Error(), "sqlfile:") {
			t.Errorf("%s: err = %v, want a sqlfile error", name, err)
		}
	}
}

func TestGet_MissingPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Get of a missing section did not panic")
		}
	}()
	Queries{}.Get("missing")
}
