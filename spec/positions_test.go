package spec

import (
	"testing"
	"testing/fstest"
)

// TestPositions: every part of a spec that `toolgen diff` reports on carries its
// position, for a key, a dotted key path, and the key itself of a list or a mapping.
func TestPositions(t *testing.T) {
	fsys := fstest.MapFS{
		"tools/notes.write.yaml": {Data: []byte("name: notes.write\nversion: 1\ndescription: W.\nside_effect: write\n" +
			"idempotency: non_idempotent\nrisk: high\noutput:\n  max_bytes: 4096\nacknowledge:\n  - RISK_LOWERED\n")},
		"servers/docs.yaml": {Data: []byte("server_id: docs\nconfigured_by: operator\ntransport:\n  http:\n    url: https://mcp.example.com/mcp\n" +
			"classification:\n  risk: low\n")},
		"protocols/flow.yaml": {Data: []byte("name: flow\ninitial_mode: plan\nmodes:\n  plan:\n    tools: [notes.write]\nexclusive_tools: [notes.write]\n")},
		"policy.yaml":         {Data: []byte("egress:\n  allow: [mcp.example.com]\nrules:\n  - name: r\n    tools: [notes.write]\n    deny_when: 'true'\n")},
	}
	tree, diags, err := LoadFS(fsys, "")
	if err != nil || len(diags) > 0 {
		t.Fatalf("LoadFS: %v %v", err, diags)
	}
	tool, srv, proto, pol := tree.Tools[0], tree.Servers[0], tree.Protocols[0], tree.Policy
	for _, c := range []struct {
		what      string
		got, want Pos
	}{
		{"tool risk", tool.At("risk"), Pos{6, 7}},
		{"tool output.max_bytes", tool.At("output.max_bytes"), Pos{8, 14}},
		{"tool output key", tool.KeyAt("output"), Pos{7, 1}},
		{"tool absent key", tool.At("timeout"), Pos{1, 1}},
		{"tool absent nested key", tool.At("output.max_lines"), Pos{1, 1}},
		{"tool acknowledge entry", tool.Acknowledge[0].Pos, Pos{10, 5}},
		{"server url", srv.At("transport.http.url"), Pos{5, 10}},
		{"server transport key", srv.KeyAt("transport"), Pos{3, 1}},
		{"server classification risk", srv.At("classification.risk"), Pos{7, 9}},
		{"protocol name", proto.At("name"), Pos{1, 7}},
		{"protocol exclusive_tools key", proto.KeyAt("exclusive_tools"), Pos{6, 1}},
		{"mode key", proto.Modes[0].Pos, Pos{4, 3}},
		{"mode tools key", proto.Modes[0].KeyAt("tools"), Pos{5, 5}},
		{"policy egress.allow key", pol.KeyAt("egress.allow"), Pos{2, 3}},
		{"policy rules key", pol.KeyAt("rules"), Pos{3, 1}},
		{"rule", pol.Rules[0].Pos, Pos{4, 5}},
		{"rule tools key", pol.Rules[0].KeyAt("tools"), Pos{5, 5}},
	} {
		if c.got != c.want {
			t.Errorf("%s at %v, want %v", c.what, c.got, c.want)
		}
	}
	if !srv.Has("classification.risk") || srv.Has("classification.side_effect") || srv.Has("transport.http.url.x") {
		t.Error("Server.Has is wrong about classification.risk, classification.side_effect or a path through a scalar")
	}
	var zero Positions
	if zero.At("x") != (Pos{1, 1}) || zero.KeyAt("x") != (Pos{1, 1}) || zero.Has("x") {
		t.Error("the zero Positions must locate everything at 1:1 and hold nothing")
	}
}

// TestAcknowledgeIsReviewMetadata: acknowledge changes neither the schemas nor the
// definition hash (and codegen reads neither it nor the file's bytes).
func TestAcknowledgeIsReviewMetadata(t *testing.T) {
	const doc = "name: notes.write\nversion: 1\ndescription: W.\nside_effect: write\nidempotency: non_idempotent\nrisk: high\nargs:\n  path: {type: string}\n"
	plain, d1 := LoadTool("tools/notes.write.yaml", "a", []byte(doc))
	acked, d2 := LoadTool("tools/notes.write.yaml", "b", []byte(doc+"acknowledge: [RISK_LOWERED, VERSION_NOT_BUMPED]\n"))
	if len(d1)+len(d2) > 0 {
		t.Fatalf("diagnostics: %v %v", d1, d2)
	}
	if len(acked.Acknowledge) != 2 || acked.Acknowledge[1].Name != "VERSION_NOT_BUMPED" {
		t.Fatalf("Acknowledge = %v", acked.Acknowledge)
	}
	pi, po, ps := plain.Schemas()
	ai, ao, as := acked.Schemas()
	if string(pi) != string(ai) || string(po) != string(ao) || ps != as {
		t.Errorf("acknowledge changed the schemas or the definition hash: %s vs %s", ps, as)
	}
}

func TestAcknowledgeGrammar(t *testing.T) {
	const doc = "name: notes.write\nversion: 1\ndescription: W.\nside_effect: none\nrisk: low\n"
	for _, c := range []struct{ ack, want string }{
		{"[risk_lowered]", `t:6:15: acknowledge entries are toolgen diff rule names such as RISK_LOWERED, found "risk_lowered" [acknowledge.grammar]`},
		{"[RISK_LOWERED, RISK_LOWERED]", `t:6:29: acknowledge lists RISK_LOWERED twice [acknowledge.duplicate]`},
		{"RISK_LOWERED", `t:6:14: acknowledge must be a list of strings, found a string [schema.not-a-string-list]`},
		{"[1]", `t:6:15: acknowledge entries must be strings, found an integer [schema.list-entry-not-string]`},
	} {
		tool, diags := LoadTool("tools/notes.write.yaml", "t", []byte(doc+"acknowledge: "+c.ack+"\n"))
		if len(diags) != 1 || diags[0].String() != c.want {
			t.Errorf("acknowledge: %s: diagnostics %v, want %s", c.ack, diags, c.want)
		}
		if tool != nil && len(tool.Acknowledge) > 1 {
			t.Errorf("acknowledge: %s: kept %v", c.ack, tool.Acknowledge)
		}
	}
}
