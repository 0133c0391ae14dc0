package hosttest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// FreePort returns a TCP port on 127.0.0.1 that nothing listens on, for a server a
// script starts (and restarts) on a port it chose before.
//
// A port the kernel picks for bind(":0") is in its ephemeral range, the range it also
// draws every outgoing connection's local port from. Between a server's exit and its
// restart on the same port, any connection on the machine (a PostgreSQL pool, another
// script's client) can take that port, and the restarted server cannot listen. So the
// port is drawn from below the ephemeral range, where the kernel assigns nothing by
// itself, and never twice in one test process, so that scripts running in parallel do
// not pick the same one. Where the range cannot be read (not Linux), the kernel picks.
func FreePort() (int, error) {
	low := ephemeralLow()
	const floor = 10000 // below are the well-known services' ports a machine may run
	if low <= floor+1000 {
		return kernelPort()
	}
	givenMu.Lock()
	defer givenMu.Unlock()
	for range 200 {
		port := floor + rand.IntN(low-floor)
		if given[port] {
			continue
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue // taken: another server on the machine
		}
		ln.Close()
		given[port] = true
		return port, nil
	}
	return kernelPort()
}

var (
	givenMu sync.Mutex
	given   = map[int]bool{} // the ports FreePort handed out in this process
)

// ephemeralLow is the lowest port of the kernel's ephemeral range, 0 if unknown.
func ephemeralLow() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(data))
	if len(fields) != 2 {
		return 0
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil {
		return 0
	}
	return low
}

func kernelPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitFor polls ready until it reports true, at most wait. It fails the script as
// soon as a background command has exited (a server that could not start is not
// waited for a minute), or with what the last attempt said when the time is up.
func waitFor(ts *testscript.TestScript, what string, ready func() error) {
	deadline := time.Now().Add(wait)
	for {
		err := ready()
		if err == nil {
			return
		}
		if name := exitedBackground(ts); name != "" {
			ts.Fatalf("%s: the background command %s exited (its output is below)", what, name)
		}
		if time.Now().After(deadline) {
			ts.Fatalf("%s: %v (waited %s)", what, err, wait)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// exitedBackground names a background command of the script (one not yet waited for)
// whose process has ended, or returns "".
//
// testscript reaps each background process in a goroutine of its own; once it has,
// signalling the process reports os.ErrProcessDone, which reads no state that
// goroutine writes.
func exitedBackground(ts *testscript.TestScript) string {
	for _, cmd := range ts.BackgroundCmds() {
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
