package freeport

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// floor is the lowest port Pick draws: below it are the well-known services' ports
// a machine may run.
const floor = 10000

// Pick returns a port on 127.0.0.1 that nothing listens on, below the kernel's
// ephemeral range and not handed out before in this process. Where the range cannot
// be read (not Linux) or leaves no room below it, the kernel picks.
func Pick() (int, error) {
	low := ephemeralLow()
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
	given   = map[int]bool{} // the ports Pick handed out in this process
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
