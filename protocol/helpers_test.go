package protocol_test

import (
	"context"
	"sync"
	"testing"

	"github.com/toolgen/toolgen/protocol"
	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/spec"
)

// repoRoot is the repository's spec root: tools/, servers/, protocols/, policy.yaml.
const repoRoot = ".."

const shipped = "plan_implement_review"

// loadShipped is the shipped protocol as the host gets it: spec loads and checks the
// repository's spec root and produces the protocol's model.
func loadShipped(t *testing.T) *protocol.Protocol {
	t.Helper()
	tree, diags, err := spec.LoadDir(repoRoot)
	if err != nil || len(diags) > 0 {
		t.Fatalf("spec root: %v %v", err, diags)
	}
	m := tree.Model().Protocol(shipped)
	if m == nil {
		t.Fatalf("no protocol %s", shipped)
	}
	return protocol.FromModel(m)
}

// auditRecorder is an AuditLog that keeps the entries it is given.
type auditRecorder struct {
	mu      sync.Mutex
	entries []store.AuditEntry
	err     error
}

func (a *auditRecorder) AuditAppend(_ context.Context, e store.AuditEntry) (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil {
		return 0, a.err
	}
	a.entries = append(a.entries, e)
	return int64(len(a.entries)), nil
}
