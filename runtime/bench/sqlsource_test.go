package bench

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/toolgen/toolgen/runtime/internal/sqlfile"
)

// The baselines run the drivers' own SQL, read from their source files at run time
// (the .sql files of runtime/store/<driver>/sql, and constants of their Go files): a
// change to the driver's SQL changes the baseline too.

// runtimeDir is the directory of package runtime, found from this file's path (or,
// built with -trimpath, from the working directory, which go test sets to the
// package's).
func runtimeDir(tb testing.TB) string {
	tb.Helper()
	dir := "."
	if _, file, _, ok := goruntime.Caller(0); ok {
		if _, err := os.Stat(file); err == nil {
			dir = filepath.Dir(file)
		}
	}
	return filepath.Join(dir, "..")
}

// sourceConsts evaluates the constant declarations of one Go file whose values are
// string or integer literals, other constants of the file, and + of those.
func sourceConsts(tb testing.TB, path string) map[string]string {
	tb.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		tb.Fatalf("bench: read SQL: %v", err)
	}
	exprs := map[string]ast.Expr{}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if i < len(vs.Values) {
					exprs[name.Name] = vs.Values[i]
				}
			}
		}
	}
	out := map[string]string{}
	var eval func(e ast.Expr) (string, error)
	eval = func(e ast.Expr) (string, error) {
		switch e := e.(type) {
		case *ast.BasicLit:
			if e.Kind == token.STRING {
				return strconv.Unquote(e.Value)
			}
			if e.Kind == token.INT {
				return e.Value, nil
			}
		case *ast.ParenExpr:
			return eval(e.X)
		case *ast.Ident:
			if v, ok := out[e.Name]; ok {
				return v, nil
			}
			x, ok := exprs[e.Name]
			if !ok {
				return "", fmt.Errorf("unknown constant %s", e.Name)
			}
			v, err := eval(x)
			if err == nil {
				out[e.Name] = v
			}
			return v, err
		case *ast.BinaryExpr:
			if e.Op == token.ADD {
				x, err := eval(e.X)
				if err != nil {
					return "", err
				}
				y, err := eval(e.Y)
				return x + y, err
			}
		}
		return "", fmt.Errorf("unsupported constant expression %T", e)
	}
	for name := range exprs {
		if _, err := eval(&ast.Ident{Name: name}); err != nil {
			// Constants of other shapes (typed, iota, ...) are not SQL: skip them.
			continue
		}
	}
	return out
}

// driverConsts returns the constants of runtime/store/<driver>/<file>, failing tb if
// one of names is missing.
func driverConsts(tb testing.TB, driver, file string, names ...string) map[string]string {
	tb.Helper()
	c := sourceConsts(tb, filepath.Join(runtimeDir(tb), "store", driver, file))
	for _, n := range names {
		if c[n] == "" {
			tb.Fatalf("bench: constant %s not found in runtime/store/%s/%s", n, driver, file)
		}
	}
	return c
}

// driverQueries returns the SQL of runtime/store/<driver>/sql/*.sql, its inclusions
// expanded, keyed by the driver's Go names for them: statement InvocationInsert is
// invocationInsertSQL, a fragment (nowMicros) keeps its name. It fails tb if one of
// names is missing.
func driverQueries(tb testing.TB, driver string, names ...string) map[string]string {
	tb.Helper()
	q, err := sqlfile.Load(os.DirFS(filepath.Join(runtimeDir(tb), "store", driver)), "sql/*.sql")
	if err != nil {
		tb.Fatalf("bench: read SQL: %v", err)
	}
	out := map[string]string{}
	for name, sql := range q {
		if first := name[:1]; first == strings.ToUpper(first) {
			name = strings.ToLower(first) + name[1:] + "SQL"
		}
		out[name] = sql
	}
	for _, n := range names {
		if out[n] == "" {
			tb.Fatalf("bench: statement %s not found in runtime/store/%s/sql", n, driver)
		}
	}
	return out
}
