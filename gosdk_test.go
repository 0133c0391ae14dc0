package toolgen_test

import (
	"os"
	"strings"
	"testing"
)

// TestGoSumKeepsTheReleasedGoSDK: go.mod replaces the go-sdk with the patched copy in
// third_party/go-sdk (PATCHES.md there), and `go mod tidy` then drops the released
// v1.8.0's checksums from go.sum. A module that imports toolgen does not inherit the
// replace: it builds with the released SDK and verifies it against these lines (the
// ext_* testscripts copy this go.sum into such a module, offline). Put them back after
// a tidy.
func TestGoSumKeepsTheReleasedGoSDK(t *testing.T) {
	b, err := os.ReadFile("go.sum")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"github.com/modelcontextprotocol/go-sdk v1.8.0 h1:",
		"github.com/modelcontextprotocol/go-sdk v1.8.0/go.mod h1:",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("go.sum has no line %q...: a module importing toolgen could not verify the released go-sdk (see third_party/go-sdk/PATCHES.md)", want)
		}
	}
}
