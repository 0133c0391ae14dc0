package tools

import (
	"testing"

	"github.com/toolgen/toolgen/gen"
)

var dispatch = gen.NewProtocolDispatch(protocolDispatch{})

func TestDispatch_EchoesTheMode(t *testing.T) {
	c := newCall(t, "")
	var res gen.ProtocolDispatchResult
	c.ok(t, dispatch, `{"mode": "implement", "reason": "the plan is written in PLAN.md"}`, &res)
	if res.Mode != "implement" {
		t.Fatalf("got %+v", res)
	}
	if _, suspended := c.tc.SuspendRequested(); suspended {
		t.Fatal("dispatch suspended the run")
	}
}

func TestDispatch_BlankReasonIsRefused(t *testing.T) {
	newCall(t, "").fails(t, dispatch, `{"mode": "review", "reason": "  "}`, "missing_reason")
}
