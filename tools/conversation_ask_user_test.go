package tools

import (
	"testing"

	"github.com/toolgen/toolgen/gen"
)

var askUser = gen.NewConversationAskUser(conversationAskUser{})

func TestAskUser_SuspendsWithTheQuestion(t *testing.T) {
	c := newCall(t, "")
	var res gen.ConversationAskUserResult
	c.ok(t, askUser, `{"question": "Which database?", "choices": ["sqlite", "postgres"]}`, &res)
	reason, suspended := c.tc.SuspendRequested()
	if !suspended || reason != "Which database?" {
		t.Fatalf("SuspendRequested() = %q, %v; want the question, true", reason, suspended)
	}
	if res.Answer != "" {
		t.Fatalf("answer %q before the user replied", res.Answer)
	}
	if c.marked {
		t.Error("a control tool recorded a watermark")
	}
}

func TestAskUser_DuplicateChoicesAreRefused(t *testing.T) {
	c := newCall(t, "")
	c.fails(t, askUser, `{"question": "Pick", "choices": ["a", "a"]}`, "duplicate_choice")
	if _, suspended := c.tc.SuspendRequested(); suspended {
		t.Fatal("a refused question suspended the run")
	}
}
