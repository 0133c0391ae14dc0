package hosttest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// A server that could not start fails waitport, waitmcp and waitfile at once, naming
// it, rather than after their minute.
func TestWait_FailsWhenTheBackgroundCommandExited(t *testing.T) {
	for _, wait := range []string{"waitport $PORT", "waitmcp http://127.0.0.1:$PORT/mcp", "waitfile never-written"} {
		t.Run(strings.Fields(wait)[0], func(t *testing.T) {
			dir := t.TempDir()
			script := "! exec sh -c 'echo cannot listen >&2; exit 3' &server&\n" + wait + "\n"
			if err := os.WriteFile(filepath.Join(dir, "exited.txtar"), []byte(script), 0o644); err != nil {
				t.Fatal(err)
			}
			rt := &recordingT{}
			testscript.RunT(rt, testscript.Params{Dir: dir, Cmds: Commands(), Setup: Setup(t.TempDir())})
			if !rt.failed {
				t.Fatalf("the script passed:\n%s", rt.log.String())
			}
			if got := rt.log.String(); !strings.Contains(got, `the background command "sh -c`) || !strings.Contains(got, "exited") {
				t.Fatalf("the failure does not name the exited command:\n%s", got)
			}
		})
	}
}

// A command the script killed before it started the one it now waits for is not a
// reason to fail: the wait watches what was started since the previous wait. (The new
// command writes its file a moment after it starts, so that the wait looks at the
// background commands at least once before it is satisfied.)
func TestWait_IgnoresWhatWasKilledBefore(t *testing.T) {
	dir := t.TempDir()
	script := `! exec sh -c 'touch old-up; exec sleep 600' &old&
waitfile old-up
kill -KILL old
! exec sh -c 'sleep 0.2; touch new-up; exec sleep 600' &new&
waitfile new-up
kill -KILL new
`
	if err := os.WriteFile(filepath.Join(dir, "killed.txtar"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	rt := &recordingT{}
	testscript.RunT(rt, testscript.Params{Dir: dir, Cmds: Commands(), Setup: Setup(t.TempDir())})
	if rt.failed {
		t.Fatalf("the script failed:\n%s", rt.log.String())
	}
}

// recordingT runs a script outside the testing package's control, so that a test can
// look at how it failed. Fatal and FailNow end the script's goroutine, as testing's do.
type recordingT struct {
	mu     sync.Mutex
	log    strings.Builder
	failed bool
}

func (r *recordingT) Log(args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintln(&r.log, args...)
}

func (r *recordingT) Fatal(args ...any) { r.Log(args...); r.FailNow() }
func (r *recordingT) Skip(args ...any)  { r.Log(args...); runtime.Goexit() }
func (r *recordingT) Parallel()         {}
func (r *recordingT) Verbose() bool     { return false }

func (r *recordingT) FailNow() {
	r.mu.Lock()
	r.failed = true
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *recordingT) Run(_ string, f func(testscript.T)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
}
