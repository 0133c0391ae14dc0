package tools

import (
	"context"

	"github.com/toolgen/toolgen/gen"
	"github.com/toolgen/toolgen/runtime"
)

// identityWhoami implements identity.whoami: it answers with its bound arguments, which
// the pipeline filled from the verified caller and the call (SPEC-4); the model supplies
// nothing.
type identityWhoami struct{}

func (identityWhoami) Run(_ context.Context, _ *runtime.ExecContext, args gen.IdentityWhoamiArgs) (gen.IdentityWhoamiResult, error) {
	return gen.IdentityWhoamiResult(args), nil
}
