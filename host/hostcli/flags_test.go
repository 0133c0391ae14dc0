package hostcli

import (
	"flag"
	"io"
	"slices"
	"testing"
)

// Every command's flags struct binds without a duplicate flag (which would panic at
// the command's first use), and every command of the dispatch has a struct here.
func TestFlagsStructs(t *testing.T) {
	structs := map[string]flags{
		"serve": &serveFlags{}, "call": &callFlags{}, "recover": &common{}, "uncertain": &common{},
		"resolve": &resolveFlags{}, "approvals": &common{}, "approve": &decideFlags{}, "deny": &decideFlags{},
		"audit": &auditFlags{}, "catalog": &catalogFlags{}, "device": &deviceFlags{}, "events": &eventsFlags{},
	}
	for cmd := range commands {
		if _, ok := structs[cmd]; !ok {
			t.Errorf("command %s has no flags struct in this test", cmd)
		}
	}
	for cmd, f := range structs {
		fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: %v", cmd, r)
				}
			}()
			f.bind(fs, cmd)
		}()
	}
}

// A command's flags go before or after its arguments, and the default principal is the
// agent's for serve and call, the operator's otherwise.
func TestParseInterleaved(t *testing.T) {
	e := &env{name: "toolrun", stderr: io.Discard}
	var f decideFlags
	pos, err := e.parse("approve", &f, []string{"7", "--reason", "ok", "--json"})
	if err != nil || !slices.Equal(pos, []string{"7"}) || f.reason != "ok" || !f.json || f.principal != "operator" {
		t.Fatalf("approve 7 --reason ok --json: %q %v, reason %q, json %v, principal %q", pos, err, f.reason, f.json, f.principal)
	}
	var c callFlags
	pos, err = e.parse("call", &c, []string{"--step", "3", "demo.echo", "-", "--session", "s"})
	if err != nil || !slices.Equal(pos, []string{"demo.echo", "-"}) || c.step != 3 || c.session != "s" || c.principal == "operator" {
		t.Fatalf("call --step 3 demo.echo - --session s: %q %v, step %d, session %q, principal %q", pos, err, c.step, c.session, c.principal)
	}
}
