// Package infer must not compile: runOnly skipped Prepare/Commit (GEN-2).
package infer

import (
	"context"

	"example.com/gentest/gen"
	"github.com/toolgen/toolgen/runtime"
)

type runOnly struct{}

func (runOnly) Run(ctx context.Context, tc *runtime.ExecContext, args gen.WorkspaceWriteTextArgs) (gen.WorkspaceWriteTextResult, error) {
	return gen.WorkspaceWriteTextResult{}, nil
}

var Tool = gen.NewWorkspaceWriteText(runOnly{})
