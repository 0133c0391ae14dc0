package mcppeers

import (
	"net"
	"os"
	"os/exec"
	"testing"
)

// TestListensOn: a port this process listens on is this process's, not another's
// (a child that holds no socket), and no one's once closed.
func TestListensOn(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if _, known := ListensOn(os.Getpid(), port); !known {
		t.Skip("ListensOn reads /proc (Linux)")
	}
	if listening, _ := ListensOn(os.Getpid(), port); !listening {
		t.Errorf("ListensOn(this process, %d) = false while it listens there", port)
	}
	other := exec.Command("sleep", "30")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Process.Kill(); _ = other.Wait() }()
	if listening, _ := ListensOn(other.Process.Pid, port); listening {
		t.Errorf("ListensOn(another process, %d) = true: the socket is this process's", port)
	}
	l.Close()
	if listening, _ := ListensOn(os.Getpid(), port); listening {
		t.Errorf("ListensOn(this process, %d) = true after the listener closed", port)
	}
}
