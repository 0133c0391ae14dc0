package tools

import (
	"slices"
	"strings"

	"github.com/toolgen/toolgen/gen"
	"github.com/toolgen/toolgen/runtime"
)

// Builtins returns every builtin tool wrapped for the registry, sorted by name.
func Builtins() []runtime.Tool {
	all := []runtime.Tool{
		gen.NewConversationAskUser(conversationAskUser{}),
		gen.NewIdentityWhoami(identityWhoami{}),
		gen.NewProtocolDispatch(protocolDispatch{}),
		gen.NewReviewApprove(reviewApprove{}),
		gen.NewReviewMerge[mergePlan](reviewMerge{}),
		gen.NewWorkspaceList(workspaceList{}),
		gen.NewWorkspaceReadText(workspaceReadText{}),
		gen.NewWorkspaceWriteText[writeTextPlan](workspaceWriteText{}),
	}
	slices.SortFunc(all, func(a, b runtime.Tool) int { return strings.Compare(a.Spec().Name, b.Spec().Name) })
	return all
}
