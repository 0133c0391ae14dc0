package hosttest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// waitFor polls ready until it returns nil, at most wait. It fails the script as
// soon as a background command it waits on has exited (a server that could not start
// is not waited for a minute), or with what the last attempt said when the time is up.
func waitFor(ts *testscript.TestScript, what string, ready func() error) {
	watched := waitedOn(ts)
	deadline := time.Now().Add(wait)
	for {
		err := ready()
		if err == nil {
			return
		}
		if name := exited(watched); name != "" {
			ts.Fatalf("%s: the background command %s exited (its output is below)", what, name)
		}
		if time.Now().After(deadline) {
			ts.Fatalf("%s: %v (waited %s)", what, err, wait)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A wait is for what the script started since its previous wait: `exec server &s&`
// then `waitport`. Those background commands are the ones watched, by this wait and
// the next ones until the script starts another; one started earlier may have been
// killed on purpose since (testscript's kill is a builtin, which no command sees),
// and is no reason to fail.
var (
	watchMu sync.Mutex
	watches = map[*testscript.TestScript]*watch{}
)

type watch struct {
	seen    map[*exec.Cmd]bool
	watched []*exec.Cmd
}

// waitedOn returns the background commands a wait of ts watches (see above).
func waitedOn(ts *testscript.TestScript) []*exec.Cmd {
	watchMu.Lock()
	defer watchMu.Unlock()
	w := watches[ts]
	if w == nil {
		w = &watch{seen: map[*exec.Cmd]bool{}}
		watches[ts] = w
		ts.Defer(func() {
			watchMu.Lock()
			delete(watches, ts)
			watchMu.Unlock()
		})
	}
	running := ts.BackgroundCmds()
	var started []*exec.Cmd
	for _, cmd := range running {
		if !w.seen[cmd] {
			w.seen[cmd] = true
			started = append(started, cmd)
		}
	}
	if len(started) > 0 {
		w.watched = started
	}
	// one the script has waited for (`wait NAME`) is no longer its background
	w.watched = slices.DeleteFunc(w.watched, func(cmd *exec.Cmd) bool { return !slices.Contains(running, cmd) })
	return slices.Clone(w.watched)
}

// exited names a command of cmds whose process has ended, or returns "".
//
// testscript reaps each background process in a goroutine of its own; once it has,
// signalling the process reports os.ErrProcessDone, which reads no state that
// goroutine writes.
func exited(cmds []*exec.Cmd) string {
	for _, cmd := range cmds {
		if err := cmd.Process.Signal(syscall.Signal(0)); errors.Is(err, os.ErrProcessDone) {
			return fmt.Sprintf("%q", strings.Join(append([]string{filepath.Base(cmd.Path)}, cmd.Args[1:]...), " "))
		}
	}
	return ""
}

// cmdWaitPort is "waitport PORT": it waits until something accepts TCP connections on
// 127.0.0.1:PORT, the server the script started in the background.
func cmdWaitPort(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitport PORT")
	}
	waitFor(ts, "waitport "+args[0], func() error {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+args[0], time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
}

// cmdWaitFile is "waitfile FILE": it waits until FILE exists, which a background
// process creates when it has reached a point (a tool's call in flight).
func cmdWaitFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitfile FILE")
	}
	path := ts.MkAbs(args[0])
	waitFor(ts, "waitfile "+args[0], func() error {
		_, err := os.Stat(path)
		return err
	})
}
