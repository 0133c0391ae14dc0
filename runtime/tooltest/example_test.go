package tooltest_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/toolgen/toolgen/gen"
	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/tooltest"
	"github.com/toolgen/toolgen/runtime/tooltest/tooltestsqlite"
)

// notes is an author's implementation behind a generated wrapper: Prepare only looks,
// the wrapper records the watermark, Commit writes.
type notes struct{}

type notePlan struct{ path, text string }

func (notes) Prepare(ctx context.Context, tc *runtime.ExecContext, args gen.WorkspaceWriteTextArgs) (notePlan, error) {
	return notePlan{path: filepath.Join(tc.Workspace(), filepath.Clean("/"+args.Path)), text: args.Text}, nil
}

func (notes) Commit(ctx context.Context, tc *runtime.ExecContext, p notePlan) (gen.WorkspaceWriteTextResult, error) {
	if err := os.WriteFile(p.path, []byte(p.text), 0o644); err != nil {
		return gen.WorkspaceWriteTextResult{}, err
	}
	sum := sha256.Sum256([]byte(p.text))
	return gen.WorkspaceWriteTextResult{BytesWritten: int64(len(p.text)), Sha256: hex.EncodeToString(sum[:])}, nil
}

// One call of the tool through a real pipeline on a real store (SQLite, in a temporary
// directory), its row read back; then the same call again, through a second handle on
// the same database, replayed at step 8 without running the tool.
func ExampleWorker() {
	t := &exampleT{} // in a test, the *testing.T
	defer t.cleanup()
	ctx := context.Background()

	w := tooltest.NewWorker(t, gen.NewWorkspaceWriteText[notePlan](notes{}), tooltest.WorkerOptions{Database: tooltestsqlite.TempFile(t)})
	first := w.Call(ctx, `{"path": "todo.txt", "text": "ship it\n"}`)
	fmt.Println(first.Outcome.Status, first.Executed, first.Row.Status, first.Row.EffectSentAt != nil)

	again := w.Reopen().Call(ctx, `{"text": "ship it\n", "path": "todo.txt"}`, tooltest.SameCallAs(first))
	fmt.Println(again.Outcome.Status, again.Outcome.Replayed, again.Executed)

	text, _ := os.ReadFile(filepath.Join(w.Workspace(), "todo.txt"))
	fmt.Printf("%q\n", text)
	// Output:
	// succeeded true SUCCEEDED true
	// succeeded true false
	// "ship it\n"
}

// exampleT is the part of *testing.T a Worker uses, so that this example runs outside a
// test. In your tests, pass the *testing.T.
type exampleT struct{ cleanups []func() }

func (*exampleT) Helper()                           {}
func (*exampleT) Logf(string, ...any)               {}
func (*exampleT) Errorf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (*exampleT) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (e *exampleT) Cleanup(f func())                { e.cleanups = append(e.cleanups, f) }
func (e *exampleT) TempDir() string {
	dir, err := os.MkdirTemp("", "tooltest-example-")
	if err != nil {
		panic(err)
	}
	e.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func (e *exampleT) cleanup() {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
}
