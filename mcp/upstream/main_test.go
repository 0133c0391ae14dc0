package upstream_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/toolgen/toolgen/internal/hostile"
)

// hostileEnv, when set in the environment, makes the test binary serve the hostile MCP
// server over stdio instead of running tests: the stdio tests start it as a subprocess.
const hostileEnv = "TOOLGEN_TEST_HOSTILE_STDIO"

func TestMain(m *testing.M) {
	if os.Getenv(hostileEnv) == "1" {
		if err := hostile.ServeStdio(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "hostile:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
