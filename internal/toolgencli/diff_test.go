package toolgencli

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgen/toolgen/internal/cli"
)

// TestDiffOwnHistory is the acceptance check of issue 5 on this repository's own
// history: `toolgen diff --against <first commit with specs>` runs without error, and so
// does the comparison with every commit since that changed a spec file. It needs git
// and the history (CI clones main in full); without them it skips.
func TestDiffOwnHistory(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "-C", root, "log", "--format=%H", "--", "tools/*.yaml", "servers", "protocols", "policy.yaml").Output()
	if err != nil {
		t.Skipf("no git history here: %v", err)
	}
	commits := strings.Fields(string(out))
	if len(commits) == 0 {
		t.Skip("no commit of the available history changes a spec file")
	}
	first := commits[len(commits)-1]
	t.Logf("first commit with specs: %s; %d commits change a spec file", first, len(commits))
	for _, ref := range append([]string{"HEAD"}, commits...) {
		var stdout, stderr bytes.Buffer
		code := Run([]string{"diff", "--against", ref, "--fail-on", "none", root}, &stdout, &stderr)
		if code != cli.ExitOK || stderr.Len() > 0 {
			t.Errorf("toolgen diff --against %s: exit %d\nstderr:\n%s", ref, code, stderr.String())
			continue
		}
		summary, _, _ := strings.Cut(stdout.String(), "\n")
		if !strings.Contains(summary, "weaken") && !strings.HasPrefix(summary, "no changes") {
			t.Errorf("toolgen diff --against %s: no summary line first:\n%s", ref, stdout.String())
		}
		if ref == first {
			t.Logf("--against %s: %s", ref[:12], summary)
		}
	}
}
