package testscripts

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkScriptVsCalls is issue 19's measurement: a 50-call task (read 50 workspace
// files of about 2 KB and report which mention TODO and how many lines they have in
// all) done by an agent through `toolrun serve --http`, once as 50 workspace.read_text
// calls and once as one sandbox.run_script whose script makes the same 50 calls. It
// reports the bytes of tool results that reach the agent (the MCP results as the client
// receives them: content text, and the whole result as JSON) and the end-to-end time of
// each, over TOOLGEN_BENCH_REPS repetitions (default 5), each in a session of its own so
// that no script replays. It ignores b.N: run it with -benchtime 1x.
//
//	go test -run XXX -bench BenchmarkScriptVsCalls -benchtime 1x -v ./testscripts/
func BenchmarkScriptVsCalls(b *testing.B) {
	const files = 50
	reps := 5
	if s := os.Getenv("TOOLGEN_BENCH_REPS"); s != "" {
		fmt.Sscan(s, &reps)
	}
	dir, ws := b.TempDir(), b.TempDir()
	for i := range files {
		var sb strings.Builder
		for l := 0; sb.Len() < 2000; l++ {
			if l == 7 && i%4 == 0 {
				fmt.Fprintf(&sb, "// TODO: revisit file %d\n", i)
				continue
			}
			fmt.Fprintf(&sb, "func f%d_%d(x int) int { return x*%d + %d } // line %d\n", i, l, l, i, l)
		}
		if err := os.WriteFile(filepath.Join(ws, fmt.Sprintf("src%02d.go", i)), []byte(sb.String()), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.Setenv("TOOLRUN_WORKSPACE", ws)
	url, _, _, _ := i15ServeHTTP(b, dir)
	script := fmt.Sprintf(`
todo = []
lines = 0
for i in range(%d):
    name = "src%%s%%d.go" %% ("0" if i < 10 else "", i)
    o = tools.workspace.read_text(path = name)
    if not o.ok:
        fail(o.reason_code)
    t = o.result["text"]
    lines += t.count("\n")
    if "TODO" in t:
        todo.append(name)
result = {"todo": todo, "lines": lines}
`, files)
	ctx := context.Background()
	connect := func() *mcp.ClientSession {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: url, DisableStandaloneSSE: true}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			b.Fatal(err)
		}
		return cs
	}
	size := func(res *mcp.CallToolResult) (text, all int) {
		for _, c := range res.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				text += len(t.Text)
			}
		}
		raw, _ := json.Marshal(res)
		return text, len(raw)
	}
	type side struct {
		name            string
		calls, text, js int
		times           []time.Duration
	}
	single, scripted := &side{name: "50 single calls"}, &side{name: "one script (50 calls)"}
	for r := range reps {
		cs := connect()
		start := time.Now()
		single.text, single.js, single.calls = 0, 0, 0
		for i := range files {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "workspace__read_text", Arguments: map[string]any{"path": fmt.Sprintf("src%02d.go", i)}})
			if err != nil || res.IsError {
				b.Fatalf("read %d: %v %v", i, err, res)
			}
			t, a := size(res)
			single.text, single.js, single.calls = single.text+t, single.js+a, single.calls+1
		}
		single.times = append(single.times, time.Since(start))
		cs.Close()

		cs = connect()
		start = time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sandbox__run_script", Arguments: map[string]any{"script": script}})
		if err != nil || res.IsError {
			b.Fatalf("script (rep %d): %v %+v", r, err, res)
		}
		scripted.times = append(scripted.times, time.Since(start))
		scripted.text, scripted.js = size(res)
		scripted.calls = 1
		if r == 0 {
			b.Logf("the script's answer: %.300s", res.Content[0].(*mcp.TextContent).Text)
		}
		cs.Close()
	}
	var rows []string
	for _, s := range []*side{single, scripted} {
		slices.Sort(s.times)
		rows = append(rows, fmt.Sprintf("| %s | %d | %d | %d | %s | %s |", s.name, s.calls, s.text, s.js,
			s.times[len(s.times)/2].Round(100*time.Microsecond), s.times[len(s.times)-1].Round(100*time.Microsecond)))
	}
	b.Logf("%d files, %d repetitions, load average %s\n\n| task | MCP calls | result text bytes | result JSON bytes | median time | slowest |\n|---|---:|---:|---:|---:|---:|\n%s",
		files, reps, loadavg(), strings.Join(rows, "\n"))
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
