package testenv

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// FreeAddr's ports are never ones the kernel hands out as the local port of
// an outgoing connection, so no other test's client takes one between
// FreeAddr and the server's bind.
func TestFreeAddrIsOutsideTheEphemeralRange(t *testing.T) {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Skipf("no ephemeral port range to compare with: %v", err)
	}
	bounds := strings.Fields(string(data))
	low, _ := strconv.Atoi(bounds[0])
	high, _ := strconv.Atoi(bounds[1])
	for range 50 {
		_, port, err := net.SplitHostPort(FreeAddr(t))
		if err != nil {
			t.Fatal(err)
		}
		p, _ := strconv.Atoi(port)
		if p >= low && p <= high {
			t.Fatalf("FreeAddr gave port %d, inside the ephemeral range %d-%d", p, low, high)
		}
	}
}
