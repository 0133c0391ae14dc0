// Package explicit must not compile: naming a plan type does not excuse runOnly from
// implementing Prepare and Commit (GEN-2).
package explicit

import (
	"context"

	"example.com/gentest/gen"
	"github.com/toolgen/toolgen/runtime"
)

type runOnly struct{}

func (runOnly) Run(ctx context.Context, tc *runtime.ExecContext, args gen.TicketCreateArgs) (gen.TicketCreateResult, error) {
	return gen.TicketCreateResult{}, nil
}

var Tool = gen.NewTicketCreate[struct{}](runOnly{})
