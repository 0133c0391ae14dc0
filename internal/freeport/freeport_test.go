package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestPick_OutsideTheEphemeralRangeAndNeverTwice(t *testing.T) {
	low := ephemeralLow()
	seen := map[int]bool{}
	for range 50 {
		port, err := Pick()
		if err != nil {
			t.Fatal(err)
		}
		if seen[port] {
			t.Fatalf("Pick handed out %d twice", port)
		}
		seen[port] = true
		if low > floor+1000 && port >= low {
			t.Fatalf("Pick = %d, in the ephemeral range from %d", port, low)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Fatalf("Pick = %d, which cannot be listened on: %v", port, err)
		}
		ln.Close()
	}
}
