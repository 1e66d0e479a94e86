//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package proxy

// fastClient: without a non-blocking peek to tell an idle connection the
// server closed, upstreams go through net/http (see Transport).
const fastClient = false

// peekFD is never called: no HTTP/1.1 connection is made.
func (c *h1Conn) peekFD(uintptr) bool { return false }

func wouldBlock(error) bool { return false }

// awaitPlainFD, awaitTLSFD and readFD are never called either.
func (c *h1Conn) awaitPlainFD(uintptr) bool { return true }

func (c *h1Conn) awaitTLSFD(uintptr) bool { return true }

func (c *h1Conn) readFD([]byte) (int, error) { return 0, nil }
