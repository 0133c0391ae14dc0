package hosttest

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
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
