//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package proxy

import (
	"errors"
	"syscall"
)

// fastClient: upstreams go through the gateway's HTTP/1.1 client (see
// Transport).
const fastClient = true

// peekFD peeks at one byte of an idle connection's socket without
// blocking (see h1Conn.alive).
func (c *h1Conn) peekFD(fd uintptr) bool {
	c.peekN, _, c.peekErr = syscall.Recvfrom(int(fd), c.peekBuf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return true
}

// wouldBlock reports whether a peek found nothing to read: the connection
// is open and silent.
func wouldBlock(err error) bool { return errors.Is(err, syscall.EAGAIN) }
