package tools

import (
	"context"

	"github.com/toolgen/toolgen/gen"
	"github.com/toolgen/toolgen/runtime"
)

// conversationAskUser implements conversation.ask_user, a control tool (RT-11): its
// effect is on the run, not the world. It asks the pipeline to suspend the run with the
// question and returns an empty answer. The pipeline records the suspension on the
// invocation (suspended_at and a resume token, not a new status); when the user answers,
// the runtime resumes the invocation and the user's answer becomes its result. The
// empty answer returned here is therefore never shown to the model as the reply.
type conversationAskUser struct{}

func (conversationAskUser) Run(ctx context.Context, tc *runtime.ExecContext, args gen.ConversationAskUserArgs) (gen.ConversationAskUserResult, error) {
	seen := map[string]bool{}
	for _, c := range args.Choices {
		if seen[c] {
			return gen.ConversationAskUserResult{}, runtime.Failf("duplicate_choice", "choice %q is offered twice", c)
		}
		seen[c] = true
	}
	// The arguments (question and choices) are persisted with the invocation; the
	// reason is what a person reading the suspended run sees first.
	tc.Suspend(args.Question)
	return gen.ConversationAskUserResult{}, nil
}
