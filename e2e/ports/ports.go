// Package ports hands out loopback ports for tests that start real
// processes. A port from the kernel's ephemeral range ("127.0.0.1:0",
// closed, then passed to a child) can be taken in between by any outgoing
// connection on the machine; these ports come from below that range, are
// never handed out twice by one process, and start at a per-process offset
// so concurrently running test binaries rarely meet.
package ports

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

const floor = 10000 // below this are well-known and registered services

var (
	mu     sync.Mutex
	next   int
	lo, hi int
)

// ephemeralLow reads the start of the kernel's ephemeral range.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > floor+1000 {
				return n
			}
		}
	}
	return 32768
}

// Next returns a port of 127.0.0.1 that is free for TCP and UDP now.
func Next() (int, error) {
	mu.Lock()
	defer mu.Unlock()
	if hi == 0 {
		lo, hi = floor, ephemeralLow()
		next = lo + (os.Getpid()*997)%(hi-lo)
	}
	for range hi - lo {
		p := next
		next++
		if next >= hi {
			next = lo
		}
		if free(p) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("ports: no free port in %d-%d", lo, hi)
}

// Addr returns "127.0.0.1:PORT" for a port from Next.
func Addr() (string, error) {
	p, err := Next()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}

func free(p int) bool {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	defer ln.Close()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	pc.Close()
	return true
}
