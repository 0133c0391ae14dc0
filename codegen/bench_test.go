package codegen

import (
	"fmt"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/toolgen/toolgen/spec"
)

// BenchmarkGenerate measures what `go generate` costs on a large spec tree: load and
// check every spec (spec.LoadFS), then Generate, which includes gofmt through
// jennifer. The YAML is built once, outside the timer. load-ms/op and gen-ms/op split
// the time between the two.
//
//	go test -run XXX -bench BenchmarkGenerate -benchmem ./codegen/
func BenchmarkGenerate(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("specs=%d", n), func(b *testing.B) {
			fsys := syntheticSpecs(n)
			var load, gen time.Duration
			b.ResetTimer()
			for b.Loop() {
				t0 := time.Now()
				tree, diags, err := spec.LoadFS(fsys, "")
				if err != nil {
					b.Fatal(err)
				}
				if len(diags) > 0 {
					b.Fatalf("synthetic specs have %d diagnostics, first: %v", len(diags), diags[0])
				}
				t1 := time.Now()
				files, err := Generate(tree, Options{Package: "gen"})
				if err != nil {
					b.Fatal(err)
				}
				if len(files) != n+2 {
					b.Fatalf("got %d files, want %d", len(files), n+2)
				}
				load += t1.Sub(t0)
				gen += time.Since(t1)
			}
			b.ReportMetric(float64(load.Milliseconds())/float64(b.N), "load-ms/op")
			b.ReportMetric(float64(gen.Milliseconds())/float64(b.N), "gen-ms/op")
		})
	}
}

// syntheticSpecs returns n realistic tool specs: the four classes in turn (idempotent
// read, conditionally idempotent write, non-idempotent write, control), each with 3 to
// 6 arguments including an enum, and a CEL condition on every class that takes one.
func syntheticSpecs(n int) fstest.MapFS {
	fsys := fstest.MapFS{}
	for i := range n {
		name := fmt.Sprintf("dom%d.op_%d", i%97, i)
		var b strings.Builder
		fmt.Fprintf(&b, "name: %s\nversion: %d\n", name, 1+i%3)
		switch i % 4 {
		case 0:
			b.WriteString("description: Read a record from the store by path.\nside_effect: read\nidempotency: idempotent\nrisk: low\n")
			b.WriteString("required_scopes: [store.read]\nparallel_safe: true\noutput_trust: external_untrusted\n")
			b.WriteString("approval_when: \"args.path.startsWith('secret/')\"\n")
		case 1:
			b.WriteString("description: Write a record, replacing it in overwrite mode.\nside_effect: write\n")
			b.WriteString("idempotency: conditionally_idempotent\nidempotent_when: \"args.mode == 'overwrite'\"\nrisk: medium\n")
			b.WriteString("required_scopes: [store.write]\ntimeout: 30s\n")
		case 2:
			b.WriteString("description: Send a message; every call sends one.\nside_effect: write\nidempotency: non_idempotent\n")
			b.WriteString("risk: high\nrequired_scopes: [msg.send, msg.read]\ntimeout: 1500ms\n")
			b.WriteString("approval_when: \"args.count > 10 && args.mode != 'create'\"\n")
		case 3:
			b.WriteString("kind: control\ndescription: Ask the user and wait.\nside_effect: none\nrisk: low\noutput_trust: user\nsuspends: true\n")
		}
		b.WriteString("args:\n")
		b.WriteString("  path: {type: string, description: Path of the record, min_length: 1, max_length: 4096, pattern: \"^[a-z]\"}\n")
		b.WriteString("  mode: {type: string, enum: [create, overwrite, append], default: create}\n")
		b.WriteString("  count: {type: integer, min: 0, max: 1000, default: 1}\n")
		nargs := 3 + i%4 // 3..6
		if nargs > 3 {
			b.WriteString("  ratio: {type: number, min: 0, max: 1, default: 0.5}\n")
		}
		if nargs > 4 {
			b.WriteString("  tags: {type: array, items: {type: string, enum: [red, green, blue]}, max_items: 8, default: [red]}\n")
		}
		if nargs > 5 {
			b.WriteString("  options:\n    type: object\n    required: false\n    properties:\n")
			b.WriteString("      dry_run: {type: boolean, default: false}\n      owner: {type: string, required: false}\n")
		}
		b.WriteString("result:\n  id: {type: string}\n  size: {type: integer}\n")
		b.WriteString("  items:\n    type: array\n    required: false\n    items:\n      type: object\n      properties:\n")
		b.WriteString("        key: {type: string}\n        state: {type: string, enum: [new, old]}\n")
		fsys["tools/"+name+".yaml"] = &fstest.MapFile{Data: []byte(b.String())}
	}
	return fsys
}
