package toolgen

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The architecture: which of the module's packages each package may import (DESIGN §2).
// Every package of the module is in the table; a package missing from it, or an import
// the table does not allow, fails TestArchitecture — so an edge is added on purpose,
// here, where a reviewer sees it. Only non-test imports count: a test may assemble
// whatever it checks. The layering it encodes:
//
//	cmd/toolrun -> host -> (mcp/*, protocol, internal/events, internal/identity) -> runtime -> runtime/store
//	cmd/toolgen -> internal/toolgencli -> codegen -> spec -> model;  (mcp/*, protocol, internal/identity) -> model
//	gen -> runtime;  tools -> gen
//
// and: nothing the host assembles imports host; runtime imports neither mcp, protocol,
// spec nor a store driver; a tool (tools, gen) never reaches the pipeline's parts;
// production code never imports a test kit (runtime/tooltest and its siblings,
// host/hosttest, storetest, pgtest); the run-time packages take the run-time model
// (model), which spec produces, and never import spec: only the composition root
// (host) and the bridges internal/policyload and internal/protocolload hold both.
var architecture = []layer{
	{pkg: ".", stdOnly: true, why: "the embedded builtin specs: embed only"},
	{pkg: "cmd/toolgen", may: []string{"internal/toolgencli"}},
	{pkg: "cmd/toolrun", may: []string{"host", "host/hostcli"}},
	{pkg: "codegen", may: []string{"spec"}},
	{pkg: "gen", may: []string{"runtime"}},
	{pkg: "tools", may: []string{"gen", "internal/wspath", "runtime"}},
	{pkg: "model", may: []string{"vocab"}, stdOnly: true, why: "the run-time model spec produces and the run-time packages take"},
	{pkg: "vocab", stdOnly: true, why: "the typed vocabulary (side effect, idempotency, risk, trust, decision, resolution): the leaf"},
	{pkg: "sandbox", may: []string{"gen", "internal/names", "runtime"}, why: "the script runner (SCR-1): a tool through the bridge, and Starlark"},
	{pkg: "spec", may: []string{".", "internal/canonjson", "internal/cellang", "internal/names", "model", "spec/diag", "vocab"}},
	{pkg: "spec/diag", stdOnly: true, why: "the one annotation model and its formatters (issue 17, point 6)"},
	{pkg: "spec/specdiff", may: []string{"spec", "spec/diag", "vocab"}},
	{pkg: "host", may: []string{"host/console", "internal/events", "internal/identity", "internal/lru", "internal/policyload",
		"internal/protocolload", "internal/textsafe", "mcp/device", "mcp/server", "mcp/upstream", "model", "protocol", "runtime", "runtime/store",
		"runtime/store/postgres", "runtime/store/sqlite", "sandbox", "spec", "tools"}, why: "the composition root"},
	{pkg: "host/console", may: []string{"internal/events", "internal/lru", "internal/textsafe", "model", "runtime", "runtime/store"},
		why: "the reviewer's console: host's operator service through an interface; never a driver, mcp/* or host"},
	{pkg: "host/hostcli", may: []string{"host", "internal/cli", "internal/events", "internal/textsafe", "mcp/device", "runtime", "runtime/store"}},
	{pkg: "host/hosttest", may: []string{"host/hostcli", "internal/freeport"}},
	{pkg: "mcp"},
	{pkg: "mcp/server", may: []string{"internal/growstack", "internal/lru", "internal/names", "internal/relay", "internal/textsafe", "runtime",
		"runtime/store"}, why: "runtime/store: the MCP sessions and tasks roles, never a driver"},
	{pkg: "mcp/upstream", may: []string{"internal/names", "internal/relay", "model", "runtime", "runtime/store"}},
	{pkg: "mcp/device", may: []string{"internal/names", "mcp/upstream", "model", "runtime", "runtime/store"}},
	{pkg: "mcp/bench"},
	{pkg: "mcp/bench/internal/lookup"},
	{pkg: "mcp/bench/internal/sdkrelay", may: []string{"mcp/bench/internal/serve"},
		why: "the go-sdk relay, the floor of issue 20: the SDK only, like a third party's gateway"},
	{pkg: "mcp/bench/internal/serve", why: "how the benchmark's own server processes serve MCP over HTTP: the SDK only"},
	{pkg: "mcp/bench/internal/upstream", may: []string{"mcp/bench/internal/lookup", "mcp/bench/internal/serve"}},
	{pkg: "protocol", may: []string{"model", "runtime", "runtime/store"}},
	{pkg: "runtime", may: []string{"internal/canonjson", "internal/cellang", "internal/growstack", "internal/lru", "internal/names", "internal/wspath", "runtime/internal/fastschema", "runtime/store",
		"vocab"}},
	{pkg: "runtime/store", may: []string{"vocab"}, stdOnly: true, why: "the interface every driver implements; vocab's strings are the ones its rows hold"},
	{pkg: "runtime/store/internal/migrate", stdOnly: true},
	{pkg: "runtime/store/sqlite", may: []string{"runtime/internal/sqlfile", "runtime/store", "runtime/store/internal/migrate",
		"runtime/store/sqlite/internal/walvfs"}},
	{pkg: "runtime/store/sqlite/internal/walvfs", why: "the WAL's write buffer: SQLite's VFS and WAL format only"},
	{pkg: "runtime/store/postgres", may: []string{"runtime/internal/sqlfile", "runtime/store", "runtime/store/internal/migrate"}},
	{pkg: "runtime/store/postgres/pgtest", may: []string{"runtime/store/postgres"}},
	{pkg: "runtime/store/storetest", may: []string{"runtime/store", "vocab"}},
	{pkg: "runtime/tooltest", may: []string{"internal/names", "runtime", "runtime/store"},
		why: "no store driver: a test asks for one through tooltestsqlite or tooltestpg"},
	{pkg: "runtime/tooltest/tooltestsqlite", may: []string{"runtime/store", "runtime/store/sqlite", "runtime/tooltest"}},
	{pkg: "runtime/tooltest/tooltestpg", may: []string{"runtime/store", "runtime/store/postgres", "runtime/tooltest"}},
	{pkg: "runtime/bench", may: []string{"runtime", "runtime/store"}},
	{pkg: "runtime/chaostest"},
	{pkg: "runtime/crashtest"},
	{pkg: "runtime/faulttest"},
	{pkg: "runtime/internal/fastschema"},
	{pkg: "runtime/internal/faultstore", may: []string{"runtime/store"}},
	{pkg: "runtime/internal/reasongen"},
	{pkg: "runtime/internal/sqlfile", stdOnly: true, why: "the drivers' named .sql files: standard library only"},
	{pkg: "runtime/internal/testtools", may: []string{"runtime"}},
	{pkg: "internal/canonjson", stdOnly: true, why: "the one canonical JSON: every hash and key"},
	{pkg: "internal/canonjson/canonjsontest", why: "a test kit"},
	{pkg: "internal/cellang", why: "the one CEL language: cel-go and the standard library"},
	{pkg: "internal/cli", stdOnly: true, why: "the exit codes and the flag parser both command lines share: nothing of the project"},
	{pkg: "internal/events", may: []string{"runtime/store"}, stdOnly: true, why: "the event stream reads the store, nothing else"},
	{pkg: "internal/hostile"},
	{pkg: "internal/hostile/cmd/hostile", may: []string{"internal/hostile"}},
	{pkg: "internal/identity", may: []string{"internal/textsafe", "model", "runtime"}},
	{pkg: "internal/freeport", stdOnly: true, why: "a port for a test's server, below the ephemeral range: nothing of the project"},
	{pkg: "internal/growstack", stdOnly: true, why: "one assembly function: nothing of the project"},
	{pkg: "internal/lru", stdOnly: true},
	{pkg: "internal/mcppeers"},
	{pkg: "internal/names", stdOnly: true},
	{pkg: "internal/policyload", may: []string{"runtime", "spec"}, why: "spec's policy to the runtime's"},
	{pkg: "internal/protocolload", may: []string{"protocol", "runtime/store", "spec"}, why: "a spec root's checked protocol to package protocol, refusals audited"},
	{pkg: "internal/relay"},
	{pkg: "internal/scaffold", may: []string{"codegen", "spec"}},
	{pkg: "internal/textsafe", stdOnly: true},
	{pkg: "internal/toolgencli", may: []string{"codegen", "internal/cli", "internal/scaffold", "spec", "spec/diag", "spec/specdiff"}},
	{pkg: "internal/wspath", stdOnly: true},
	{pkg: "testscripts"},
}

// layer is one package's row: the module packages it may import directly (paths
// relative to the module, "." for the root) and whether it may import anything else
// than the standard library besides them.
type layer struct {
	pkg     string
	may     []string
	stdOnly bool
	why     string
}

const module = "github.com/toolgen/toolgen"

// pkgImports is one package of `go list -json`: its path and non-test imports.
type pkgImports struct {
	ImportPath string
	Imports    []string
}

// rel is path relative to the module ("." for the module itself), and whether it is
// the module's.
func rel(path string) (string, bool) {
	if path == module {
		return ".", true
	}
	r, ok := strings.CutPrefix(path, module+"/")
	return r, ok
}

// violations checks pkgs against table and returns what breaks it, sorted.
func violations(table []layer, pkgs []pkgImports) []string {
	rows := map[string]layer{}
	for _, l := range table {
		rows[l.pkg] = l
	}
	var out []string
	seen := map[string]bool{}
	for _, p := range pkgs {
		name, ok := rel(p.ImportPath)
		if !ok {
			continue
		}
		seen[name] = true
		row, ok := rows[name]
		if !ok {
			out = append(out, fmt.Sprintf("%s is not in the architecture table (architecture_test.go): add its row, with what it may import", name))
			continue
		}
		for _, imp := range p.Imports {
			dep, mine := rel(imp)
			switch {
			case mine && !slices.Contains(row.may, dep):
				out = append(out, fmt.Sprintf("%s imports %s, which the architecture table does not allow", name, dep))
			case !mine && row.stdOnly && strings.Contains(strings.SplitN(imp, "/", 2)[0], "."):
				out = append(out, fmt.Sprintf("%s imports %s: it may import only the standard library besides its row", name, imp))
			}
		}
	}
	for _, l := range table {
		if !seen[l.pkg] {
			out = append(out, fmt.Sprintf("the architecture table names %s, which is not a package of the module", l.pkg))
		}
	}
	slices.Sort(out)
	return out
}

// TestArchitecture holds every package of the module to the table above.
func TestArchitecture(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go command")
	}
	cmd := exec.Command("go", "list", "-json", "./...")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkgImports
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkgImports
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list listed %d packages: is the output what this test thinks it is?", len(pkgs))
	}
	for _, v := range violations(architecture, pkgs) {
		t.Error(v)
	}
}

// The test of the test: an edge outside the table, a package missing from it, a
// third-party import of a standard-library-only package and a stale row are each
// reported; a graph within the table is not.
func TestArchitecture_ReportsWhatBreaksTheTable(t *testing.T) {
	table := []layer{
		{pkg: "runtime", may: []string{"runtime/store"}},
		{pkg: "runtime/store", stdOnly: true},
		{pkg: "gone"},
	}
	pkgs := []pkgImports{
		{ImportPath: module + "/runtime", Imports: []string{"context", module + "/runtime/store", module + "/mcp/server"}},
		{ImportPath: module + "/runtime/store", Imports: []string{"context", "github.com/jackc/pgx/v5"}},
		{ImportPath: module + "/newpkg", Imports: []string{"fmt"}},
		{ImportPath: "example.com/other", Imports: []string{module + "/runtime"}},
	}
	got := violations(table, pkgs)
	want := []string{
		"newpkg is not in the architecture table (architecture_test.go): add its row, with what it may import",
		"runtime imports mcp/server, which the architecture table does not allow",
		"runtime/store imports github.com/jackc/pgx/v5: it may import only the standard library besides its row",
		"the architecture table names gone, which is not a package of the module",
	}
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	pkgs = pkgs[:1]
	pkgs[0].Imports = []string{module + "/runtime/store"}
	if got := violations(table[:1], pkgs); len(got) != 0 {
		t.Errorf("a graph within the table: %v", got)
	}
}
